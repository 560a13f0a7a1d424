"""Result shapes of operators whose signature does not give them (convolutions and
poolings, joins, padding and tiling, contractions, linear algebra...), from their
inputs' shapes and literal parameters, without running them.

The transformer's analysis asks for these so that code after such an operator is
specialised on shapes too (a bias gradient after a conv2d is a plain sum over the
batch and image axes, not a run-time ``unbroadcast``). Each rule follows the
operator's implementation; ``tests/test_shape_rules.py`` checks every rule against
the implementation's actual results. A rule returns None (the shape is not known
before running) where a parameter or input shape it needs is unknown or the inputs
do not fit: the operator then raises its own error when it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ppto.errors import PptoError
from ppto.ops.linalg import numpy_dot_refusal
from ppto.ops.nn import conv_geometry, pool_geometry
from ppto.ops.reductions import reduced_shape
from ppto.ops.signature import matmul_shape
from ppto.ops.unary_einsum import unary_subscripts

# operator name -> rule(input shapes, parameters) -> result shape or None; an input
# that is a list of arrays comes as a list of shapes
SHAPE_RULES: dict[str, Callable] = {}

# operators whose result has the shape of their first input
SAME_AS_FIRST = frozenset(
    {
        "copy", "array", "asarray", "inv", "cofactors", "cholesky", "roll",
        "index_add", "setitem", "scatter_add", "diagonal_mask",
    }
)  # fmt: skip

# an optional input left out (np.diff's prepend and append)
ABSENT = "absent"

# parameters naming an array whose shape the result takes (``like``)
LIKE_RESULTS = frozenset(
    {
        "conv2d_backward_input", "conv2d_backward_weight", "avg_pool2d_backward",
        "pad_folded", "windows_folded",
    }
)  # fmt: skip


def result_shape(name: str, inputs: list, params: dict, like=None) -> tuple | None:
    """The shape ``name`` gives for inputs of shapes ``inputs`` (None where one is
    unknown) and literal ``params`` (the operator's defaults filled in), or None.
    ``like``: the shape of the array a ``like=`` parameter names, if any."""
    if name in LIKE_RESULTS:
        return like
    if name in SAME_AS_FIRST:  # (of an array: a list's shape is the stack's)
        first = inputs[0] if inputs else None
        return first if isinstance(first, tuple) else None
    rule = SHAPE_RULES.get(name)
    if rule is None or not all(_known(shape) for shape in inputs):
        return None
    try:
        shape = rule(inputs, params)
    except (PptoError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    return None if shape is None else tuple(int(n) for n in shape)


def _known(shape) -> bool:
    if shape is ABSENT:
        return True
    if isinstance(shape, list):
        return all(_known(part) for part in shape)
    return shape is not None


def rule(*names: str):
    def define(function: Callable) -> Callable:
        for name in names:
            SHAPE_RULES[name] = function
        return function

    return define


def _axis(axis, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis!r} out of range for {ndim} axes")
    return int(axis) % ndim


def _view(shape: tuple) -> np.ndarray:
    """An array of ``shape`` taking no memory, for NumPy's view functions to
    compute shapes on."""
    return np.lib.stride_tricks.as_strided(np.zeros(1), shape, [0] * len(shape))


# --- same shape, or flattened without an axis ---


@rule("sort", "argsort", "cumsum", "cumprod", "partition")
def _along_axis(inputs, params):
    (shape,) = inputs
    if params.get("axis") is None:
        return (math.prod(shape),)
    _axis(params["axis"], len(shape))
    return shape


@rule("tril", "triu")
def _triangle(inputs, params):
    (shape,) = inputs
    if not shape:
        raise ValueError("np.tril and np.triu take no 0-d array")
    return shape * 2 if len(shape) == 1 else shape  # (a vector: each row of a square)


@rule("flip")
def _flip(inputs, params):
    (shape,) = inputs
    axis = params.get("axis")
    for one in axis if isinstance(axis, (tuple, list)) else [axis]:
        if one is not None:
            _axis(one, len(shape))
    return shape


@rule("flatten")
def _flatten(inputs, params):
    return (math.prod(inputs[0]),)


# --- views: NumPy computes their shapes on an array taking no memory ---


@rule("swapaxes")
def _swapaxes(inputs, params):
    return np.swapaxes(_view(inputs[0]), params["axis1"], params["axis2"]).shape


@rule("moveaxis")
def _moveaxis(inputs, params):
    moved = np.moveaxis(_view(inputs[0]), params["source"], params["destination"])
    return moved.shape


@rule("diagonal")
def _diagonal(inputs, params):
    view = _view(inputs[0])
    return np.diagonal(view, params["offset"], params["axis1"], params["axis2"]).shape


@rule("trace")
def _trace(inputs, params):
    return _diagonal(inputs, params)[:-1]  # (the diagonal's axis summed)


@rule("diag")
def _diag(inputs, params):
    (shape,), k = inputs, params["k"]
    if len(shape) == 1:
        side = shape[0] + abs(k)
        return (side, side)
    if len(shape) == 2:
        return np.diagonal(_view(shape), k).shape
    return None


# --- joins ---


@rule("concat")
def _concat(inputs, params):
    shapes, axis = inputs[0], params["axis"]
    if axis is None:
        return (sum(math.prod(shape) for shape in shapes),)
    first = shapes[0]
    axis = _axis(axis, len(first))
    for shape in shapes:
        if len(shape) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(shape, first)) if i != axis
        ):
            return None
    return (*first[:axis], sum(shape[axis] for shape in shapes), *first[axis + 1 :])


@rule("stack")
def _stack(inputs, params):
    shapes = inputs[0]
    if not shapes or any(shape != shapes[0] for shape in shapes):
        return None
    axis = _axis(params["axis"], len(shapes[0]) + 1)
    return (*shapes[0][:axis], len(shapes), *shapes[0][axis:])


@rule("vstack")
def _vstack(inputs, params):
    shapes = [(1,) * (2 - len(s)) + tuple(s) if len(s) < 2 else s for s in inputs[0]]
    return _concat([shapes], {"axis": 0})


@rule("hstack")
def _hstack(inputs, params):
    shapes = [s if len(s) else (1,) for s in inputs[0]]
    axis = 0 if len(shapes[0]) == 1 else 1
    return _concat([shapes], {"axis": axis})


@rule("dstack")
def _dstack(inputs, params):
    from ppto.ops.shape import _joined_shape

    shapes = [_joined_shape(tuple(s), "dstack") for s in inputs[0]]
    return _concat([shapes], {"axis": 2})


@rule("column_stack")
def _column_stack(inputs, params):
    shapes = [s if len(s) >= 2 else (tuple(s) or (1,)) + (1,) for s in inputs[0]]
    return _concat([shapes], {"axis": 1})


# --- padding, tiling, repeating, differences ---


@rule("pad")
def _pad(inputs, params):
    shape = inputs[0]
    widths = np.broadcast_to(
        np.asarray(params["pad_width"], dtype=np.int64), (len(shape), 2)
    )
    if (widths < 0).any():
        return None
    return tuple(
        n + int(before) + int(after) for n, (before, after) in zip(shape, widths)
    )


@rule("sliding_window_view")
def _sliding_window_view(inputs, params):
    from ppto.ops.arrange import window_axes

    (shape,) = inputs
    windows, axes = window_axes(shape, params["window_shape"], params["axis"])
    counts = list(shape)
    for axis, size in zip(axes, windows):
        counts[axis] -= size - 1
    return (*counts, *windows)


@rule("tile")
def _tile(inputs, params):
    shape, reps = inputs[0], params["reps"]
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    if not all(isinstance(r, (int, np.integer)) and r >= 0 for r in reps):
        return None
    size = max(len(shape), len(reps))
    shape = (1,) * (size - len(shape)) + tuple(shape)
    reps = (1,) * (size - len(reps)) + reps
    return tuple(n * r for n, r in zip(shape, reps))


@rule("repeat")
def _repeat(inputs, params):
    shape, repeats, axis = inputs[0], params["repeats"], params.get("axis")
    if isinstance(repeats, float) and repeats.is_integer():
        repeats = int(repeats)  # (the operator takes whole floats, as NumPy)
    if not isinstance(repeats, (int, np.integer)) or repeats < 0:
        return None  # (an array of counts: its sum is a value)
    if axis is None:
        return (math.prod(shape) * repeats,)
    axis = _axis(axis, len(shape))
    return (*shape[:axis], shape[axis] * repeats, *shape[axis + 1 :])


@rule("diff")
def _diff(inputs, params):
    shape, prepend, append = inputs
    n, axis = params["n"], _axis(params["axis"], len(inputs[0]))
    length = shape[axis]
    for extra in (prepend, append):
        if extra is ABSENT:
            continue
        length += extra[axis] if len(extra) == len(shape) else 1
    if length - n < 0:
        return None
    return (*shape[:axis], length - n, *shape[axis + 1 :])


# --- contractions ---


@rule("outer")
def _outer(inputs, params):
    return (math.prod(inputs[0]), math.prod(inputs[1]))


@rule("inner")
def _inner(inputs, params):
    a, b = inputs
    if not a or not b:
        return np.broadcast_shapes(a, b)
    if a[-1] != b[-1]:
        return None
    return (*a[:-1], *b[:-1])


@rule("vdot")
def _vdot(inputs, params):
    return () if math.prod(inputs[0]) == math.prod(inputs[1]) else None


@rule("numpy_dot")
def _numpy_dot(inputs, params):
    a, b = inputs
    if numpy_dot_refusal(len(a), len(b)) is not None:
        return None  # (the operator refuses these: see there)
    return matmul_shape(a, b)


@rule("tensordot")
def _tensordot(inputs, params):
    a, b = inputs
    axes = params["axes"]
    if isinstance(axes, (int, np.integer)):
        if axes < 0 or axes > min(len(a), len(b)):
            return None
        ours, theirs = list(range(len(a) - axes, len(a))), list(range(axes))
    else:
        ours, theirs = ([x] if isinstance(x, int) else list(x) for x in axes)
        ours = [_axis(x, len(a)) for x in ours]
        theirs = [_axis(x, len(b)) for x in theirs]
    if len(ours) != len(theirs) or any(a[i] != b[j] for i, j in zip(ours, theirs)):
        return None
    kept_a = [n for i, n in enumerate(a) if i not in ours]
    kept_b = [n for i, n in enumerate(b) if i not in theirs]
    return (*kept_a, *kept_b)


@rule("einsum")
def _einsum(inputs, params):
    subscripts = params["subscripts"].replace(" ", "")
    if "." in subscripts:
        return None  # (an ellipsis: left to the run)
    given, _, result = subscripts.partition("->")
    terms = given.split(",")
    if len(terms) != len(inputs):
        return None
    sizes: dict = {}
    for term, shape in zip(terms, inputs):
        if len(term) != len(shape):
            return None
        for letter, size in zip(term, shape):
            if sizes.setdefault(letter, size) != size:
                if size == 1 or sizes[letter] == 1:  # (NumPy broadcasts ones)
                    sizes[letter] = max(size, sizes[letter])
                else:
                    return None
    if "->" not in subscripts:  # implicit: the letters used once, in order
        letters = "".join(terms)
        result = "".join(sorted(x for x in set(letters) if letters.count(x) == 1))
    return tuple(sizes[letter] for letter in result)


@rule("unary_einsum")
def _unary_einsum(inputs, params):
    (shape,) = inputs
    explicit = unary_subscripts(params["subscripts"], _view(shape))
    given, _, result = explicit.partition("->")
    if len(given) != len(shape):
        return None
    sizes = dict(zip(given, shape))
    if any(sizes[letter] != size for letter, size in zip(given, shape)):
        return None  # (a diagonal of unequal axes: NumPy refuses it)
    return tuple(sizes[letter] for letter in result)


# --- linear algebra ---


@rule("det")
def _det(inputs, params):
    (shape,) = inputs
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return None
    return shape[:-2]


@rule("solve")
def _solve(inputs, params):
    a, b = inputs
    if len(a) < 2 or a[-1] != a[-2]:
        return None
    if len(b) == 1:  # NumPy 2: a vector b is one right-hand side
        return (*a[:-1],) if b[0] == a[-1] else None
    if b[-2] != a[-1]:
        return None
    return (*np.broadcast_shapes(a[:-2], b[:-2]), *b[-2:])


@rule("norm")
def _norm(inputs, params):
    (shape,) = inputs
    return reduced_shape(shape, params.get("axis"), params.get("keepdims", False))


@rule("average")
def _average(inputs, params):
    if params.get("returned"):
        return None  # (a pair)
    return reduced_shape(inputs[0], params.get("axis"), params.get("keepdims", False))


# --- images ---


@rule("conv2d")
def _conv2d(inputs, params):
    x, w = inputs
    stride, padding, layout = params["stride"], params["padding"], params["layout"]
    return conv_geometry("conv2d", x, w, stride, padding, layout)[2]


@rule("max_pool2d", "avg_pool2d")
def _pool(inputs, params):
    return pool_geometry(
        "pool", inputs[0], params["kernel_size"], params["stride"], params["layout"]
    )[2]


@rule("max_pool2d_tangent")
def _pool_tangent(inputs, params):
    return _pool(inputs[1:], params)


@rule("max_pool2d_backward")
def _pool_backward(inputs, params):
    return inputs[1]


# --- indexing ---


@rule("take")
def _take(inputs, params):
    shape, indices = inputs
    axis = params.get("axis")
    if axis is None:
        return indices
    axis = _axis(axis, len(shape))
    return (*shape[:axis], *indices, *shape[axis + 1 :])


@rule("one_hot")
def _one_hot(inputs, params):
    classes = params["num_classes"]
    if not isinstance(classes, (int, np.integer)):
        return None
    return (*inputs[0], classes)


@rule("segment_sum", "segment_mean", "segment_max")
def _segments(inputs, params):
    count = params.get("num_segments")
    if not isinstance(count, (int, np.integer)):
        return None  # (from the ids' values)
    return (count, *inputs[0][1:])
