"""Indexing: subscripts (``x[i]``, slices, integer arrays, masks), functional writes,
and the gather / scatter pair along one axis.

Reading ``x[index]`` and adding into ``x[index]`` are adjoint to each other, so
``getitem`` and ``index_add`` give each other's gradients. Repeated integer indices
accumulate (``np.add.at`` semantics).

CuPy differs from NumPy where indices do, and both are made to behave as NumPy:
an integer index out of bounds, which CuPy wraps around, is refused with NumPy's
IndexError (``refuse_wrapped_indices``: one read back per integer array, on
backends other than NumPy), and of several writes to one element the last is kept
(``last_of_each``), where CuPy leaves which one lands undefined.

``choose`` and ``choose_among`` (np.choose) pick among choices by whole numbers: a
gather along the choices' axis, its gradient each choice's share of dY where it was
picked.
"""

import numpy as np

from ppto.errors import DTypeError, PptoError, ShapeError
from ppto.ops.elementwise import where
from ppto.ops.primitive import primitive
from ppto.ops.rules import dtype_helper, shape_helper
from ppto.ops.shape import (
    in_place_cast_error,
    in_place_refusal,
    reshape,
    unbroadcast,
    zeros_like,
)
from ppto.runtime.tensor import Tensor, array_module

ANY = "(Tensor[...]) -> Tensor[...]"


@shape_helper
def raw_index(xp, index):
    """``index`` with tensors replaced by raw arrays of the backend ``xp``."""
    if isinstance(index, tuple):
        return tuple(raw_index(xp, part) for part in index)
    if isinstance(index, Tensor):
        return xp.asarray(index.data)
    if isinstance(index, list):
        array = xp.asarray(index)
        # (an empty list is no element, as NumPy reads it: asarray makes float64)
        return array.astype(xp.intp) if array.size == 0 else array
    return index


@shape_helper
def is_basic(index):
    """Whether ``index`` only slices (then no element can be selected twice)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(
        part is None or part is Ellipsis or isinstance(part, (slice, int, np.integer))
        for part in parts
    )


@shape_helper
def may_repeat(index):
    """Whether ``index`` may select an element twice (an integer array may; the
    transformer decides it where the index is written out in the code)."""
    return not is_basic(index)


@shape_helper
def reorders_in_place(index):
    """Whether ``x[index]`` holds every element of x once, each axis whole and in
    order or reversed (slices ``:`` and ``::-1``, ``...``): reading dY at the same
    index puts every element back where it came from (a reversal is its own
    inverse), with no scatter into zeros. The transformer decides it where the
    index is written out in the code, and scatters where it is not."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(
        part is Ellipsis
        or (
            isinstance(part, slice)
            and part.start is None
            and part.stop is None
            and part.step in (None, 1, -1)
        )
        for part in parts
    )


@shape_helper
def axis_index(indices, axis, ndim):
    """The subscript that selects ``indices`` along ``axis`` of an ndim-D tensor."""
    return (slice(None),) * (axis % ndim) + (indices,)


def checked_index(xp, index, x):
    """``raw_index(xp, index)``, refused where it holds an index out of x's bounds
    (see ``refuse_wrapped_indices``); x may be a Python list or tuple (generated
    code subscripts those too), which Python checks itself."""
    index = raw_index(xp, index)
    refuse_wrapped_indices(xp, index, getattr(x, "shape", None))
    return index


def in_bounds(xp, indices, axis, x):
    """``indices`` along ``axis`` of x (flattened x when None), refused where one is
    out of bounds (see ``refuse_wrapped_indices``)."""
    if xp is not np:
        refuse_wrapped_indices(xp, *along(indices, axis, x))
    return indices


def refuse_wrapped_indices(xp, index, shape) -> None:
    """Raise IndexError, as NumPy does, where an integer array of ``index`` (a
    subscript of an array of ``shape``) holds an index out of bounds: CuPy wraps
    it around instead (its "Out-of-bounds indices"), which would read or write
    another element without a word. NumPy checks as it indexes; elsewhere this
    costs one read back to the host per integer array. ``shape`` None: a Python
    list or tuple, which Python checks itself."""
    if xp is np or shape is None:
        return
    parts = index if isinstance(index, tuple) else (index,)
    named = sum(_axes_of(part) for part in parts if part is not Ellipsis)
    axis = 0
    for part in parts:
        if part is Ellipsis:
            axis += len(shape) - named
            continue
        kind = getattr(getattr(part, "dtype", None), "kind", None)
        if kind in ("i", "u") and axis < len(shape) and part.size:
            low, high = int(part.min()), int(part.max())  # (a host array too)
            size = shape[axis]
            bad = high if high >= size else low if low < -size else None
            if bad is not None:
                raise IndexError(
                    f"index {bad} is out of bounds for axis {axis} with size {size}"
                )
        axis += _axes_of(part)


def _axes_of(part) -> int:
    """How many axes of the indexed array a subscript part stands for."""
    if part is None:
        return 0
    dtype = getattr(part, "dtype", None)
    if dtype is not None and dtype.kind == "b":
        return part.ndim  # a mask covers as many axes as it has
    return 1


@primitive(ANY, tangent="linear")
def getitem(xp, x, index):
    """x[index]: ints, slices, None, Ellipsis, integer or boolean arrays."""
    return x[checked_index(xp, index, x)]


@getitem.grad_rule
def _(x, index):
    def backward(dY):
        if reorders_in_place(index):  # (x[::-1]: its adjoint is a reversal too)
            return getitem(dY, index)
        return index_add(zeros_like(x), dY, index)

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear")
def index_add(xp, x, values, index):
    """A copy of x with ``values`` added at x[index]; repeated indices accumulate."""
    return _index_add_into(xp, _writable_copy(x), values, index)


def _writable_copy(x):
    """A copy of ``x`` to write into: of a NumPy number (a 0-d value NumPy's
    operators made, such as the adjoint of ``a`` in ``a[...] = v`` on a 0-d array),
    a 0-d array, which takes ``out[()] = v`` and ``out[...] = v`` (a NumPy number
    refuses item assignment)."""
    if isinstance(x, np.generic):
        return np.array(x)
    return x.copy()


def _index_add_into(xp, out, values, index):
    """``index_add`` adding into ``out`` itself, for an array the generated code
    makes as the argument (``index_add(zeros_like(x), ...)``, every gather's
    gradient), which nothing else holds: the copy would cost a pass over all of x
    (a 50000x128 embedding's gradient took 12 ms against 7 ms by hand)."""
    index = raw_index(xp, index)
    refuse_wrapped_indices(xp, index, getattr(out, "shape", None))
    if is_basic(index):
        out[index] += values
    else:
        xp.add.at(out, index, values)
    return out


index_add.into = _index_add_into  # (see lower.py: Lowering.lower_primitive)


@index_add.grad_rule
def _(x, values, index):
    def backward(dY):
        return dY, unbroadcast(getitem(dY, index), values)

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear")
def setitem(xp, x, values, index, at=""):
    """A copy of x with x[index] = values (the functional form of a subscript write).
    ``at`` (the user's file and line) for ``x[index] += v`` where x's dtype was not
    known when the code was made: values (the sum) NumPy's in-place operator
    refuses to cast into the part raise ``DTypeError`` naming it. A list (of Python
    numbers) takes the values as Python's does; a tuple refuses them as Python's."""
    if type(x) is tuple:
        where = f" ({at})" if at else ""
        raise TypeError(f"'tuple' object does not support item assignment{where}")
    out = _writable_copy(x)
    index = raw_index(xp, index)
    refuse_wrapped_indices(xp, index, getattr(out, "shape", None))
    if at:
        _refuse_in_place_cast(out, values, index, at)
    if xp is np or not may_repeat(index):
        out[index] = values
        return out
    # CuPy leaves which of the writes to a repeated integer index lands undefined
    # (its "Duplicate values in indices"); NumPy, and so ppto, keeps the last:
    # write each element's last value only, by flat position
    positions = xp.arange(out.size).reshape(out.shape)[index]
    kept = last_of_each(xp, positions, out.size)
    values = xp.broadcast_to(xp.asarray(values), positions.shape)  # (CuPy's takes
    out.reshape(-1)[positions[kept]] = values[kept]  # arrays only, not 0 or 0.5)
    return out


def _refuse_in_place_cast(out, values, index, at: str) -> None:
    """What NumPy refuses for ``out[index] += v`` given ``values``, the sum: a cast
    into a part that is an array (a slice of an integer array: its in-place
    operator casts 'same_kind'); a single element takes any value, converted, and
    so does a list (of Python numbers: ``s[0] += 1.0``)."""
    if isinstance(out, list):
        return
    dtype = getattr(values, "dtype", None)
    refusal = in_place_refusal(
        dtype if dtype is not None else np.asarray(values).dtype, out.dtype
    )
    if refusal is not None and getattr(out[index], "ndim", 0) > 0:
        raise in_place_cast_error(refusal, at)


@setitem.grad_rule
def _(x, values, index):
    def backward(dY):
        if whole_numbers(x):  # NumPy truncates the values to x's integers: the
            return setitem(dY, 0, index), zeros_like(values)  # result's are flat
        if not may_repeat(index):
            return setitem(dY, 0, index), unbroadcast(getitem(dY, index), values)
        # a repeated index keeps only its last write (dY has x's shape)
        chosen = where(last_written(dY, index), getitem(dY, index), 0.0)
        return setitem(dY, 0, index), unbroadcast(chosen, values)

    return backward


@dtype_helper
def whole_numbers(x) -> bool:
    """Whether ``x`` holds integers or booleans (whose values written into it are
    truncated): decided where the code is made when x's dtype is known."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind in "biu"


@setitem.jvp_rule
def _(x, values, index):
    def tangent(dx, dvalues):
        if whole_numbers(x):  # (the values truncated to x's integers: flat)
            return setitem(dx, 0, index)
        return setitem(dx, dvalues, index)

    return tangent


@shape_helper
def last_written(x, index):
    """Which elements of the selection ``x[index]`` a write ``x[index] = values``
    keeps: all but the earlier ones of a repeated integer index, which NumPy
    overwrites with the last. Reads only ``x``'s shape, and makes the mask on its
    device."""
    xp = array_module(x)
    index = raw_index(xp, index)
    size = int(np.prod(x.shape))
    positions = xp.arange(size).reshape(tuple(x.shape))[index]
    return last_of_each(xp, positions, size)


def last_of_each(xp, positions, size):
    """Which entries of ``positions`` (flat positions in an array of ``size``
    elements) are the last, in C order, to name their position: NumPy's winner of
    a write to a repeated index. By ``maximum.at``, deterministic on CuPy too
    (whose scatter takes uint64, not int64)."""
    order = xp.arange(1, positions.size + 1, dtype=xp.uint64).reshape(positions.shape)
    last = xp.zeros(size, dtype=xp.uint64)
    xp.maximum.at(last, positions, order)
    return last[positions] == order


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear", nondiff=("indices",)
)
def take(xp, x, indices, axis=None):
    """Elements of x at integer ``indices`` along ``axis`` (flattened when None)."""
    return xp.take(x, in_bounds(xp, indices, axis, x), axis=axis)


@take.grad_rule
def _(x, indices, axis=None):
    def backward(dY):
        if axis is None:
            flat = index_add(zeros_like(reshape(x, (-1,))), dY, indices)
            return reshape(flat, np.shape(x)), None
        if axis == 0:  # (rows: x[(indices,)], where axis is written out)
            return index_add(zeros_like(x), dY, (indices,)), None
        return index_add(zeros_like(x), dY, axis_index(indices, axis, x.ndim)), None

    return backward


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear", nondiff=("indices",)
)
def take_along_axis(xp, x, indices, axis=-1):
    """x's elements at ``indices`` along ``axis``, matched by position along the
    other axes (np.take_along_axis: each row's label, ``logp[i, y[i]]``); the whole
    flattened x when axis is None."""
    return xp.take_along_axis(x, in_bounds(xp, indices, axis, x), axis=axis)


@take_along_axis.grad_rule
def _(x, indices, axis=-1):
    def backward(dY):
        if axis is None:
            flat = index_add(zeros_like(reshape(x, (-1,))), dY, indices)
            return reshape(flat, np.shape(x)), None
        return index_add(zeros_like(x), dY, along_axis_index(indices, axis, x)), None

    return backward


@shape_helper
def along_axis_index(indices, axis, x):
    """The subscript of x that selects what ``take_along_axis(x, indices, axis)``
    does: ``indices`` along ``axis``, each other axis's own position (arange)
    broadcast against them. Makes the ranges on the device of ``indices``."""
    raw = indices.data if isinstance(indices, Tensor) else indices
    xp = array_module(raw)
    shape = tuple(np.shape(x))
    axis = axis % len(shape)
    index = []
    for dim, size in enumerate(shape):
        if dim == axis:
            index.append(raw)
        else:
            ones = [1] * len(shape)
            ones[dim] = size
            index.append(xp.arange(size).reshape(ones))
    return tuple(index)


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear", nondiff=("indices",)
)
def gather(xp, x, indices, axis=0):
    """Slices of x at integer ``indices`` along ``axis`` (rows by default), as
    tf.gather; in graph networks, the features of each edge's node."""
    return xp.take(x, in_bounds(xp, indices, axis, x), axis=axis)


@gather.grad_rule
def _(x, indices, axis=0):
    def backward(dY):
        return scatter_add(zeros_like(x), indices, dY, axis), None

    return backward


@primitive(
    "(Tensor[...], Tensor[...], Tensor[...]) -> Tensor[...]",
    tangent="linear",
    nondiff=("indices",),
)
def scatter_add(xp, x, indices, updates, axis=0):
    """A copy of x with ``updates`` added at integer ``indices`` along ``axis``."""
    out = x.copy()
    if xp is not np:
        refuse_wrapped_indices(xp, *along(indices, axis, out))
    xp.add.at(out, axis_index(indices, axis, out.ndim), updates)
    return out


def along(indices, axis, x) -> tuple:
    """``(index, shape)``: ``indices`` along ``axis`` of x as a subscript, and the
    shape it subscripts (x flattened when axis is None)."""
    if axis is None:
        return (indices,), (x.size,)
    return axis_index(indices, axis, x.ndim), tuple(x.shape)


@scatter_add.grad_rule
def _(x, indices, updates, axis=0):
    def backward(dY):
        return dY, None, unbroadcast(gather(dY, indices, axis), updates)

    return backward


CHOOSE_MODES = ("raise", "wrap", "clip")


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear", nondiff=("a",)
)
def choose(xp, a, choices, mode="raise"):
    """Elementwise, the choice that a's whole number names, like np.choose(a,
    choices): ``choices`` one array (its first axis the choices; a list written
    out is ``choose_among``'s), broadcast against a; ``mode`` 'raise' refuses
    numbers beyond the choices, 'wrap' takes them modulo their count, 'clip' the
    nearest. Differentiable in the choices (a, whole numbers, is not)."""
    picked = chosen_numbers(xp, a, choices, mode)
    aligned = xp.reshape(choices, choices_aligned(a, choices))
    stacked = xp.broadcast_to(aligned, (choices.shape[0],) + picked.shape)
    return xp.take_along_axis(stacked, picked[None], axis=0)[0]


@choose.grad_rule
def _(a, choices, mode="raise"):
    def backward(dY):
        # each choice gets dY where it was picked
        picked = where(chosen_mask(choices, a, mode), dY, 0.0)
        aligned = unbroadcast(picked, choices_aligned(a, choices))
        return None, reshape(aligned, np.shape(choices))

    return backward


def chosen_numbers(xp, a, choices, mode):
    """a's numbers as np.choose reads them (``mode``'s), broadcast against each
    of the choices (on their first axis)."""
    if choices.ndim == 0:
        raise ShapeError("np.choose needs at least one choice: got a 0-d array")
    return _read_numbers(xp, a, choices.shape[0], mode, [choices.shape[1:]])


def _read_numbers(xp, a, count, mode, shapes):
    """a's numbers as np.choose reads them among ``count`` choices of ``shapes``,
    after NumPy's checks (whole numbers; within the choices for 'raise'),
    broadcast against the choices."""
    if mode not in CHOOSE_MODES:
        raise PptoError(f"np.choose's mode is 'raise', 'wrap' or 'clip', not {mode!r}")
    if a.dtype.kind not in "iub":
        raise DTypeError(
            f"np.choose picks by whole numbers, not dtype {a.dtype}: convert a with "
            ".astype(int) first"
        )
    if not count:
        raise ShapeError("np.choose needs at least one choice")
    if mode == "wrap":
        a = a % count
    elif mode == "clip":
        a = xp.clip(a, 0, count - 1)
    elif a.size and (int(a.min()) < 0 or int(a.max()) >= count):
        beyond = int(a.max()) if int(a.max()) >= count else int(a.min())
        raise ShapeError(
            f"np.choose of number {beyond} among {count} choices (0 to {count - 1}): "
            "pass mode='wrap' or mode='clip' to bring it within them"
        )
    try:
        shape = np.broadcast_shapes(a.shape, *shapes)
    except ValueError as error:
        written = ", ".join(str(tuple(each)) for each in shapes)
        raise ShapeError(
            f"np.choose: a of shape {tuple(a.shape)} and choices of shape "
            f"{written} do not broadcast together"
        ) from error
    return xp.broadcast_to(a, shape).astype(xp.int64)


@primitive(
    "(Tensor[...], [Tensor[...]]) -> Tensor[...]", tangent="linear", nondiff=("a",)
)
def choose_among(xp, a, choices, mode="raise"):
    """np.choose(a, choices) of choices written out as a list (or tuple) of
    arrays and numbers, which broadcast together and against a, as NumPy's do
    (``np.choose(a, [x, 0.0])``); ``choose`` takes them as one array. Each choice
    gets dY where it was picked."""
    choices = list(choices)
    numbers = _read_numbers(xp, a, len(choices), mode, list(map(np.shape, choices)))
    # (NumPy's dtype of them: a number's is weak; read from dtypes, which CuPy's
    # arrays give without converting)
    dtype = np.result_type(*(getattr(c, "dtype", c) for c in choices))
    stacked = xp.stack(
        [xp.broadcast_to(xp.asarray(c, dtype), numbers.shape) for c in choices]
    )
    return xp.take_along_axis(stacked, numbers[None], axis=0)[0]


@choose_among.grad_rule
def _(a, choices, mode="raise"):
    def backward(dY):
        numbers = chosen_among(choices, a, mode)
        gradients = []
        for i in range(len(choices)):
            gradients.append(unbroadcast(where(numbers == i, dY, 0.0), choices[i]))
        return None, gradients

    return backward


@primitive("([Tensor[...]], Tensor[...]) -> Tensor[...]", differentiable=False)
def chosen_among(xp, choices, a, mode="raise"):
    """Which of the choices np.choose(a, choices, mode) picks at each place of
    the result (a's numbers as ``mode`` reads them, broadcast)."""
    return _read_numbers(xp, a, len(choices), mode, list(map(np.shape, choices)))


@shape_helper
def choices_aligned(a, choices):
    """The choices' shape with axes of length 1 after the first (the choices' own)
    where a has more axes than each choice: aligned to broadcast against a."""
    shape = tuple(np.shape(choices))
    missing = max(np.ndim(a) - (len(shape) - 1), 0)
    return shape[:1] + (1,) * missing + shape[1:]


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", differentiable=False)
def chosen_mask(xp, choices, a, mode="raise"):
    """For each of the choices (on their leading axis), where np.choose(a,
    choices, mode) picked it."""
    picked = chosen_numbers(xp, a, choices, mode)
    count = choices.shape[0]
    numbers = xp.arange(count).reshape((count,) + (1,) * picked.ndim)
    return picked[None] == numbers
