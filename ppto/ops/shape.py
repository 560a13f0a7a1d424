"""Shape operators: transpose, reshape, broadcasting, axes, joining and splitting, and
the constant constructors ``zeros_like`` / ``ones_like``.

All of them are linear, so their tangent rules are the operators themselves. The
adjoint pairs (broadcast_to / unbroadcast, concat / split, stack / unstack) give each
other's gradients, which keeps the rules closed under repeated differentiation.
"""

import numpy as np

from ppto.errors import DTypeError, GradError, ShapeError
from ppto.ops.primitive import primitive
from ppto.ops.rules import rank_helper, rank_of, shape_helper

ANY = "(Tensor[...]) -> Tensor[...]"


@shape_helper
def inverse_permutation(axes):
    """The axes that undo ``transpose(x, axes)``; None stays None (a reversal).
    Negative axes count from the end, as in np.transpose (axes has one per axis)."""
    if axes is None:
        return None
    return tuple(int(i) for i in np.argsort([int(a) % len(axes) for a in axes]))


@shape_helper
def split_points(xs, axis):
    """Where ``split`` must cut to undo ``concat(xs, axis)``."""
    if axis is None:  # (the parts would need reshaping: a rule returns no list)
        raise GradError(
            "ppto.concat with axis=None joins the arrays flattened, and has no "
            "gradient rule that way: flatten them first, "
            "np.concatenate([a.ravel(), b.ravel()])"
        )
    sizes = [np.shape(x)[axis] for x in xs]
    return list(np.cumsum(sizes)[:-1])


@primitive(ANY, tangent="linear", keeps_layout=False)
def transpose(xp, x, axes=None):
    """Permute axes (reverse them when axes is None), like np.transpose."""
    return xp.transpose(x, axes)


@transpose.grad_rule
def _(x, axes=None):
    def backward(dY):
        if axes is None:
            return transpose(dY)
        return transpose(dY, inverse_permutation(axes))

    return backward


@primitive("(Tensor[...,M,N]) -> Tensor[...,N,M]", tangent="linear")
def matrix_transpose(xp, x):
    """Swap the last two axes (of each matrix in a batch)."""
    return xp.swapaxes(x, -1, -2)


@matrix_transpose.grad_rule
def _(x):
    def backward(dY):
        return matrix_transpose(dY)

    return backward


@primitive(ANY, tangent="linear")
def swapaxes(xp, x, axis1, axis2):
    """Exchange two axes, like np.swapaxes (``k.swapaxes(-1, -2)``: keys to columns)."""
    return xp.swapaxes(x, axis1, axis2)


@swapaxes.grad_rule
def _(x, axis1, axis2):
    def backward(dY):
        return swapaxes(dY, axis1, axis2)

    return backward


# the orders reshape and flatten take in generated code: 'A' and 'K' follow how an
# array is laid out in memory, which generated code does not keep (its intermediates
# may be fused kernels' fresh arrays where NumPy's would be transposed views)
ORDERS = ("C", "F")


@primitive(ANY, tangent="linear")
def reshape(xp, x, shape, order="C"):
    """The same elements in a new shape (one axis may be -1), read and written in
    row-major order, or column-major with ``order='F'`` (like np.reshape)."""
    return xp.reshape(x, shape, order=order)


@reshape.grad_rule
def _(x, shape, order="C"):
    def backward(dY):
        return reshape(dY, np.shape(x), order=order)

    return backward


@primitive("(Tensor[...]) -> Tensor[N]", tangent="linear")
def flatten(xp, x, order="C"):
    """x's elements along one axis, in row-major order, or column-major with
    ``order='F'`` (``np.ravel(x)``, ``x.flatten()``, ``x.ravel(order='F')``)."""
    return xp.reshape(x, (-1,), order=order)


@flatten.grad_rule
def _(x, order="C"):
    def backward(dY):
        return reshape(dY, np.shape(x), order=order)

    return backward


@primitive(ANY, tangent="linear")
def broadcast_to(xp, x, shape):
    """x repeated along new or size-1 axes to ``shape``, like np.broadcast_to."""
    return xp.broadcast_to(x, shape)


@broadcast_to.grad_rule
def _(x, shape):
    def backward(dY):
        return unbroadcast(dY, x)

    return backward


def target_shape(like) -> tuple:
    """``like`` where it is a shape (whole numbers: generated code passes shapes it
    saved), else the shape of ``like``: an array's, or a tuple of arrays' stacked
    (``np.sum((a, b))``: taken for a shape, a ValueError)."""
    if isinstance(like, tuple) and all(isinstance(n, (int, np.integer)) for n in like):
        return like
    return np.shape(like)


@primitive(ANY, tangent="linear")
def unbroadcast(xp, x, like):
    """Sum x down to the shape of ``like``: the adjoint of broadcasting to x's shape.

    Every binary elementwise gradient goes through this one helper.
    """
    target = target_shape(like)
    if not hasattr(x, "shape"):  # the 0 a list's adjoint holds for an item that is
        # replaced later (``hs[1] = v`` in a loop): no part of like reaches the end
        return xp.full(target, x, dtype=getattr(like, "dtype", np.float64))
    if tuple(x.shape) == tuple(target):
        return x
    if x.ndim < len(target):  # like's extra leading axes have size 1 (full_like)
        x = xp.reshape(x, (1,) * (len(target) - x.ndim) + tuple(x.shape))
    lead = x.ndim - len(target)
    axes = tuple(range(lead)) + tuple(
        lead + i
        for i, size in enumerate(target)
        if size == 1 and x.shape[lead + i] != 1
    )
    summed = xp.sum(x, axis=axes, keepdims=True) if axes else x
    return xp.reshape(summed, target)


@unbroadcast.grad_rule
def _(x, like):
    def backward(dY):
        return broadcast_to(dY, np.shape(x))

    return backward


@primitive(ANY, tangent="linear")
def expand_dims(xp, x, axis):
    """Insert size-1 axes at ``axis`` (an int or a tuple)."""
    return xp.expand_dims(x, axis)


@expand_dims.grad_rule
def _(x, axis):
    def backward(dY):
        return reshape(dY, np.shape(x))

    return backward


@primitive(ANY, tangent="linear")
def squeeze(xp, x, axis=None):
    """Remove size-1 axes (all of them when axis is None)."""
    return xp.squeeze(x, axis)


@squeeze.grad_rule
def _(x, axis=None):
    def backward(dY):
        return reshape(dY, np.shape(x))

    return backward


@primitive("([Tensor[...]]) -> Tensor[...]", tangent="linear")
def concat(xp, xs, axis=0):
    """Join tensors along an existing axis, like np.concatenate."""
    return xp.concatenate(xs, axis=axis)


@concat.grad_rule
def _(xs, axis=0):
    def backward(dY):
        return split(dY, split_points(xs, axis), axis)

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]")
def rule_gradient(xp, gradient, like, rule="", input=""):
    """The gradient a user's rule (of the operator ``rule``) gives its input
    ``input`` as it is, once its shape is checked against that input's (``like``):
    one of another shape would be broadcast by the operators that read it, a
    silently wrong gradient. With no ``input``: a tangent rule's tangent of the
    result ``like``."""
    if np.shape(gradient) == np.shape(like):
        return gradient
    if not input:  # (a tangent rule's tangent of the result)
        raise GradError(
            f"the tangent rule of {rule} gave its result (of shape "
            f"{np.shape(like)}) a tangent of shape {np.shape(gradient)}: a tangent "
            "rule gives the result's tangent, of the result's shape"
        )
    raise GradError(
        f"the gradient rule of {rule} gave its input {input!r} (of shape "
        f"{np.shape(like)}) a gradient of shape {np.shape(gradient)}: a rule "
        "gives each input a gradient of that input's shape (sum the axes "
        f"broadcasting added with ppto.unbroadcast(g, {input}))"
    )


@rule_gradient.grad_rule
def _(gradient, like, rule="", input=""):
    def backward(dY):
        return dY, None

    return backward


@rule_gradient.jvp_rule
def _(gradient, like, rule="", input=""):
    def tangent(dgradient, dlike):
        return dgradient

    return tangent


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear")
def append(xp, arr, values, axis=None):
    """values after arr, like np.append: both flattened when ``axis`` is None,
    else joined along ``axis`` (values of arr's number of axes)."""
    return xp.append(arr, values, axis=axis)


@append.grad_rule
def _(arr, values, axis=None):
    def backward(dY):
        if axis is None:
            head, tail = split(dY, [np.size(arr)], 0)
            return reshape(head, np.shape(arr)), reshape(tail, np.shape(values))
        head, tail = split(dY, [np.shape(arr)[axis]], axis)
        return head, tail

    return backward


@primitive("([Tensor[...]]) -> Tensor[...]", tangent="linear")
def stack(xp, xs, axis=0):
    """Join tensors along a new axis, like np.stack."""
    return xp.stack(xs, axis=axis)


@stack.grad_rule
def _(xs, axis=0):
    def backward(dY):
        return unstack(dY, axis)

    return backward


@primitive(ANY + " tuple", tangent="linear")
def split(xp, x, indices, axis=0):
    """Cut x along ``axis`` into a tuple, like np.split: ``indices`` is a list of cut
    points or a number of equal sections."""
    return tuple(xp.split(x, indices, axis=axis))


@split.grad_rule
def split_rule(x, indices, axis=0):
    def backward(dYs):
        spans = overlapping_pieces(x, indices, axis)
        if spans is not None:  # (cut points out of order: gradients add up)
            total = zeros_like(x)
            for i in range(len(spans)):
                before, _, after = split(x, spans[i], axis)
                total = total + concat(
                    [zeros_like(before), dYs[i], zeros_like(after)], axis
                )
            return total
        return concat(dYs, axis)

    return backward


@shape_helper
def overlapping_pieces(x, indices, axis):
    """The [start, stop] of each piece np.split (or np.array_split) makes of ``x``
    at the cut points ``indices`` where two of the pieces overlap, else None (the
    pieces then tile the axis, and their gradients join end to end). Cut points out
    of order overlap: at [3, 1] the second piece is empty and the third starts
    again at 1, so x[:, 1:3] is in the first and the third."""
    if np.ndim(indices) == 0:  # (a number of sections: they tile the axis)
        return None
    size = np.shape(x)[axis]
    cuts = [None, *(int(cut) for cut in indices), None]
    spans = [slice(a, b).indices(size)[:2] for a, b in zip(cuts[:-1], cuts[1:])]
    if sum(max(stop - start, 0) for start, stop in spans) == size:
        return None
    return [[start, max(start, stop)] for start, stop in spans]


@primitive(ANY + " tuple", tangent="linear")
def unstack(xp, x, axis=0):
    """The slices of x along ``axis``, as a tuple (the inverse of stack)."""
    return tuple(xp.moveaxis(x, axis, 0))


@unstack.grad_rule
def _(x, axis=0):
    def backward(dYs):
        return stack(dYs, axis)

    return backward


@shape_helper
def dtype_of(x) -> np.dtype:
    """``x.dtype``, or for a Python number the dtype NumPy gives it alone (float64
    for a float). Rules read their inputs' dtypes with it: a differentiated Python
    float stays one in generated code, so that it is weak as NumPy makes it (NEP 50:
    ``x32 * 2.0`` is float32), and it has no ``.dtype``.

    >>> dtype_of(np.zeros(2, np.float32)), dtype_of(2.0)
    (dtype('float32'), dtype('float64'))
    """
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.result_type(x)


@shape_helper
def floating(x) -> bool:
    """Whether ``x`` holds floating point (or complex) numbers."""
    return dtype_of(x).kind in "fc"


@primitive(ANY)
def cast(xp, x, dtype):
    """x converted to ``dtype`` (to whole numbers: no derivative passes). Its rules
    are with ``where`` (ops/elementwise.py), which they use. Complex numbers made
    real are refused (NumPy warns and drops the imaginary part): in differentiated
    code, a complex value came from a real one, whose derivative that is not."""
    x = xp.asarray(x)  # (a Python number has no astype)
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        raise GradError(
            f"cannot convert complex values to {np.dtype(dtype)}: ppto "
            "differentiates real computations only (a complex intermediate value "
            "needs conjugates its rules do not take); compute the real and "
            "imaginary parts as two real arrays"
        )
    return x.astype(dtype)


@primitive(ANY, tangent="linear", keeps_layout=True)
def cast_in_place(xp, x, target, at=""):
    """What ``target += v`` (or ``-=``, ``*=`` ...) leaves in ``target``, given x,
    ``target + v``: where target is an array, which NumPy writes into, x in
    target's dtype (a float32 array, 0-d too, stays one whatever v is); where it is
    a number, which ``+=`` rebinds as ``+`` would, x itself (see
    ``in_place_target``). What NumPy refuses in place raises, naming ``at`` (the
    user's file and line): a cast that is not 'same_kind' (floats into an integer
    array) ``DTypeError``, a target broadcast to another shape ``ShapeError``.

    >>> cast_in_place(np.ones(2) * np.float64(0.5), np.ones(2, np.float32)).dtype
    dtype('float32')
    """
    if not in_place_target(target):
        return x
    where = f" ({at})" if at else ""
    if tuple(x.shape) != tuple(target.shape):
        raise ShapeError(
            f"an in-place operator (+=, -=, *=, /=, ...) cannot broadcast an array "
            f"of shape {tuple(target.shape)} to {tuple(x.shape)}{where}: "
            f"NumPy refuses it; write t = t + v (a new array)"
        )
    if x.dtype != target.dtype:
        refusal = in_place_refusal(x.dtype, target.dtype)
        if refusal is not None:
            raise in_place_cast_error(refusal, at)
    if target.ndim == 0:
        # NumPy's operators make a number of a 0-d array; y stays an array, so
        # that a later y += v still writes into it
        return xp.asarray(x, dtype=target.dtype)
    return x if x.dtype == target.dtype else x.astype(target.dtype)


@cast_in_place.grad_rule
def _(x, target, at="", out=None):
    def backward(dY):
        return cast(dY, dtype_of(x))

    return backward


def in_place_target(value) -> bool:
    """Whether an in-place operator writes into ``value``: an array of any device
    does, a 0-d one included (``y += v`` keeps a float32 ``y`` float32); a Python or
    NumPy number is immutable, so ``+=`` makes a new one. Where NumPy's operators
    and reductions make numbers and CuPy's 0-d arrays (``total = np.sum(x); total
    += v``), the transformer knows the target a number and removes the cast
    (``ppto.transform.analyze.makes_a_number``): a cast that runs has a target that
    may be a 0-d array, which the value's type tells on every device."""
    return hasattr(value, "ndim") and not isinstance(value, np.generic)


def in_place_refusal(result, target) -> str | None:
    """Why NumPy's in-place operators refuse to write ``result`` values into a
    ``target`` array (its 'same_kind' casting rule), or None where they do not."""
    if np.can_cast(result, target, casting="same_kind"):
        return None
    return (
        f"an in-place operator (+=, -=, *=, /=, ...) cannot write {result} values "
        f"into an array of {target}: NumPy refuses the cast (it is not 'same_kind')"
    )


IN_PLACE_ADVICE = "t = t + v (a new array), or t += v.astype(t.dtype)"


def in_place_cast_error(refusal: str, at: str) -> DTypeError:
    """The error for a cast an in-place operator refuses when the code runs
    (``refusal``: see ``in_place_refusal``), naming ``at``, the user's file and
    line, where known (``t += v`` and ``x[i] += v``: see ops/indexing.py)."""
    where = f" ({at})" if at else ""
    return DTypeError(f"{refusal}{where}; write {IN_PLACE_ADVICE}")


@primitive(ANY, tangent="linear")
def flip(xp, x, axis=None):
    """x's elements in reverse order along ``axis`` (every axis when None), like
    np.flip."""
    return xp.flip(x, axis=axis)


@flip.grad_rule
def _(x, axis=None):
    def backward(dY):
        return flip(dY, axis)

    return backward


@primitive(ANY, tangent="linear")
def rot90(xp, x, k=1, axes=(0, 1)):
    """x turned by k quarter turns in the plane of ``axes``, like np.rot90."""
    return xp.rot90(x, k, axes)


@rot90.grad_rule
def _(x, k=1, axes=(0, 1)):
    def backward(dY):
        return rot90(dY, -k, axes)

    return backward


@primitive(ANY, tangent="linear")
def at_least(xp, x, ndim=1):
    """x with axes of length 1 added up to ``ndim`` axes where it has fewer, as
    np.atleast_1d, np.atleast_2d and np.atleast_3d add them."""
    return getattr(xp, f"atleast_{ndim}d")(x)


@at_least.grad_rule
def _(x, ndim=1):
    def backward(dY):
        return reshape(dY, np.shape(x))

    return backward


@primitive(ANY, keeps_layout=True)
def asarray(xp, x, dtype=None):
    """x as an array, in ``dtype`` if given (``np.asarray(x)``): x itself where it
    is already one, a list of arrays and numbers stacked. Its rules are with
    ``where`` (ops/elementwise.py), as cast's."""
    return xp.asarray(x, dtype=dtype)


@primitive(ANY, keeps_layout=True)
def array(xp, x, dtype=None, copy=True):
    """A new array with x's values, in ``dtype`` if given (``np.array(x)``): a list
    of arrays and numbers stacked; ``copy=False`` as asarray (ppto's generated code
    never writes into it). Its rules are with ``where`` (ops/elementwise.py)."""
    return xp.array(x, dtype=dtype) if copy else xp.asarray(x, dtype=dtype)


@primitive(ANY, tangent="linear", keeps_layout=True)
def copy(xp, x):
    """A new array with x's values (``np.copy(x)``, ``x.copy()``): what a subscript
    write changes without touching x."""
    return x.copy()


@copy.grad_rule
def _(x):
    def backward(dY):
        return dY

    return backward


@primitive(ANY, keeps_layout=True)
def zeros_like(xp, x, dtype=None):
    """Zeros of x's shape and device (and dtype unless given); a constant for
    differentiation."""
    return xp.zeros_like(x, dtype=dtype)


@primitive(ANY, keeps_layout=True)
def ones_like(xp, x, dtype=None):
    """Ones of x's shape and device (and dtype unless given); a constant for
    differentiation."""
    return xp.ones_like(x, dtype=dtype)


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]",
    mode="fill",
    keeps_layout=True,
    nondiff=("x",),
)
def full_like(xp, x, fill_value, dtype=None):
    """An array of x's shape and device (and dtype unless given) holding
    ``fill_value`` (broadcast to x's shape): ``np.full_like``. Only the fill value is
    differentiated; its rules are with ``where`` (ops/elementwise.py)."""
    return xp.full_like(x, fill_value, dtype=dtype)


def _constant_rules(op):
    @op.grad_rule
    def _(x, dtype=None):
        def backward(dY):
            return None

        return backward

    @op.jvp_rule
    def _(x, dtype=None, out=None):
        def tangent(dx):
            return zeros_like(out)

        return tangent


_constant_rules(zeros_like)
_constant_rules(ones_like)


@primitive(ANY, tangent="linear")
def moveaxis(xp, x, source, destination):
    """x with axis ``source`` moved to position ``destination`` (each may be a tuple),
    the others keeping their order, like np.moveaxis."""
    return xp.moveaxis(x, source, destination)


@moveaxis.grad_rule
def _(x, source, destination):
    def backward(dY):
        return moveaxis(dY, destination, source)

    return backward


@shape_helper
def part_shapes(xs) -> tuple:
    """The shapes of the arrays ``xs`` that vstack or hstack joined."""
    return tuple(tuple(getattr(x, "shape", np.shape(x))) for x in xs)


def _joined_shape(shape: tuple, by: str) -> tuple:
    """How ``by`` (vstack, hstack or column_stack) sees an array of ``shape``: as
    np.atleast_2d (a number a 1x1 matrix, a vector a row) or np.atleast_1d makes
    it, or column_stack does (a vector a column)."""
    if by == "column_stack":
        return shape if len(shape) >= 2 else (shape or (1,)) + (1,)
    if by == "dstack":  # (np.atleast_3d: a vector (1, n, 1), a matrix (m, n, 1))
        return {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}.get(len(shape), shape)
    least = 2 if by == "vstack" else 1
    return (1,) * (least - len(shape)) + shape if len(shape) < least else shape


def _joined_axis(shapes: tuple, by: str) -> int:
    """The axis ``by`` joins along: vstack's first; hstack's first for vectors
    (and numbers), else its second."""
    if by == "column_stack":
        return 1
    if by == "dstack":
        return 2
    if by == "vstack" or len(_joined_shape(shapes[0], by)) == 1:
        return 0
    return 1


@primitive("([Tensor[...]]) -> Tensor[...]", tangent="linear")
def vstack(xp, xs):
    """Arrays joined along their first axis, like np.vstack: a vector is a row
    and a number a 1x1 matrix first (np.atleast_2d)."""
    return xp.vstack(xs)


@vstack.grad_rule
def _(xs):
    def backward(dY):
        return split_joined(dY, part_shapes(xs), "vstack")

    return backward


@primitive("([Tensor[...]]) -> Tensor[...]", tangent="linear")
def hstack(xp, xs):
    """Vectors (and numbers) joined end to end, or arrays of two or more axes
    joined along their second, like np.hstack."""
    ranks = {len(_joined_shape(shape, "hstack")) for shape in part_shapes(xs)}
    if 1 in ranks and len(ranks) > 1:  # (NumPy's concatenate refuses them too)
        raise ShapeError(
            "ppto.hstack joins vectors (and numbers) alone or arrays of 2 or more "
            f"axes, got arrays of {sorted(ranks)} axes: reshape them to the same "
            "number of axes first"
        )
    return xp.hstack(xs)


@hstack.grad_rule
def _(xs):
    def backward(dY):
        return split_joined(dY, part_shapes(xs), "hstack")

    return backward


@primitive("([Tensor[...]]) -> Tensor[...]", tangent="linear")
def column_stack(xp, xs):
    """Arrays joined along their second axis, like np.column_stack: a vector is a
    column (and a number a 1x1 matrix) first."""
    return xp.column_stack(xs)


@column_stack.grad_rule
def _(xs):
    def backward(dY):
        return split_joined(dY, part_shapes(xs), "column_stack")

    return backward


@primitive("([Tensor[...]]) -> Tensor[...]", tangent="linear")
def dstack(xp, xs):
    """Arrays joined along their third axis, like np.dstack: each made 3-d first
    as np.atleast_3d makes it (a vector (1, n, 1), a matrix (m, n, 1))."""
    return xp.dstack(xs)


@dstack.grad_rule
def _(xs):
    def backward(dY):
        return split_joined(dY, part_shapes(xs), "dstack")

    return backward


@primitive(ANY + " tuple", tangent="linear")
def array_split(xp, x, indices, axis=0):
    """Cut x along ``axis`` into a tuple, like np.array_split: ``indices`` is a
    list of cut points, or a number of sections as equal as they can be (the
    first ones one longer where they cannot)."""
    return tuple(xp.array_split(x, indices, axis=axis))


array_split.grad_rule(split_rule)  # (the same pieces: the same gradient)


@primitive(ANY + " tuple", tangent="linear")
def split_by(xp, x, indices, by):
    """Cut x into a tuple as np.hsplit (``by='h'``: along the second axis, a
    vector's first), np.vsplit (``'v'``: the first, of 2 or more axes) or np.dsplit
    (``'d'``: the third, of 3 or more) do; ``indices`` as np.split's."""
    return tuple(getattr(xp, f"{by}split")(x, indices))  # (NumPy checks the ranks)


@split_by.grad_rule
def _(x, indices, by):
    def backward(dYs):
        axis = split_axis(x, by)
        spans = overlapping_pieces(x, indices, axis)
        if spans is not None:  # (cut points out of order: gradients add up)
            total = zeros_like(x)
            for i in range(len(spans)):
                before, _, after = split(x, spans[i], axis)
                total = total + concat(
                    [zeros_like(before), dYs[i], zeros_like(after)], axis
                )
            return total
        return concat(dYs, axis)

    return backward


@rank_helper("x")
def split_axis(x, by):
    """The axis ``split_by`` cuts x along."""
    if by == "h":
        return 1 if rank_of(x) > 1 else 0
    return {"v": 0, "d": 2}[by]


@primitive(ANY + " tuple", tangent="linear")
def split_joined(xp, x, shapes, by):
    """The parts of ``x = vstack(xs)`` (``by='vstack'``), ``hstack(xs)``,
    ``column_stack(xs)`` or ``dstack(xs)`` for xs of ``shapes``, each of its own
    shape: the adjoint of vstack, hstack, column_stack and dstack."""
    axis = _joined_axis(shapes, by)
    sizes = [_joined_shape(shape, by)[axis] for shape in shapes]
    parts = xp.split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis)
    return tuple(xp.reshape(part, shape) for part, shape in zip(parts, shapes))


@split_joined.grad_rule
def _(x, shapes, by):
    def backward(dYs):
        if by == "vstack":
            return vstack(dYs)
        if by == "column_stack":
            return column_stack(dYs)
        if by == "dstack":
            return dstack(dYs)
        return hstack(dYs)

    return backward
