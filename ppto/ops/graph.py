"""Segment reductions for graph neural networks: rows of ``data`` pooled by integer
``segment_ids`` along axis 0 (TensorFlow's ``unsorted_segment_*``), ``out[s]`` combining
every row ``i`` with ``segment_ids[i] == s``; ids need not be sorted.

``num_segments=None`` means ``max(segment_ids) + 1``. Ids are never differentiated.
Empty segments give 0 for every reduction. Each backward rule gathers the incoming
gradient back to the rows (``gather``), so the rules are closed under differentiation.
NumPy's ``np.bincount(x, weights)`` is a segment sum of a vector, its length max(x)
+ 1 or ``minlength``.
"""

import operator

from ppto.errors import DTypeError, ShapeError
from ppto.ops.elementwise import maximum
from ppto.ops.indexing import gather, take
from ppto.ops.logic import equal
from ppto.ops.primitive import primitive
from ppto.ops.shape import cast, dtype_of, ones_like, reshape

SEGMENT = "(Tensor[...], Tensor[N]) -> Tensor[...]"


def row_broadcast_shape(ndim):
    """The shape that spreads one value per row over the trailing axes of an
    ndim-D tensor: ``(-1, 1, 1)`` for 3-D."""
    return (-1,) + (1,) * (ndim - 1)


def checked_num_segments(op_name, data, segment_ids, num_segments):
    """The number of segments, after checking that ``segment_ids`` are integers, one
    per row of ``data``, and within ``[0, num_segments)``.

    >>> checked_num_segments("segment_sum", np.zeros((3, 2)), np.array([0, 2, 2]), None)
    3
    """
    if segment_ids.dtype.kind not in "iu":
        raise DTypeError(
            f"ppto.{op_name}: segment_ids must be integers, got dtype "
            f"{segment_ids.dtype}; convert them with .astype('int64')"
        )
    if data.ndim == 0 or data.shape[0] != segment_ids.shape[0]:
        rows = "a scalar" if data.ndim == 0 else f"{data.shape[0]} rows"
        raise ShapeError(
            f"ppto.{op_name}: segment_ids has {segment_ids.shape[0]} entries but data "
            f"(shape {tuple(data.shape)}) has {rows}; give one segment id per row of "
            "data (axis 0)"
        )
    if segment_ids.size == 0:
        return 0 if num_segments is None else _count(op_name, num_segments)
    low, high = int(segment_ids.min()), int(segment_ids.max())
    if low < 0:
        raise ShapeError(
            f"ppto.{op_name}: segment id {low} is negative; ids must lie in "
            "[0, num_segments): drop those rows first, e.g. data[ids >= 0]"
        )
    if num_segments is None:
        return high + 1
    count = _count(op_name, num_segments)
    if high >= count:
        raise ShapeError(
            f"ppto.{op_name}: segment id {high} is out of range for "
            f"num_segments={count}; ids must lie in [0, num_segments): pass "
            f"num_segments={high + 1} or more, or None for max(id) + 1"
        )
    return count


def _count(op_name, num_segments):
    try:
        count = operator.index(num_segments)
    except TypeError as error:
        raise ShapeError(
            f"ppto.{op_name}: num_segments must be an integer or None, got "
            f"{num_segments!r}"
        ) from error
    if count < 0:
        raise ShapeError(f"ppto.{op_name}: num_segments must be >= 0, got {count}")
    return count


def summed_rows(xp, data, segment_ids, count):
    """The per-segment sums of ``data``'s rows, as ``count`` rows."""
    out = xp.zeros((count,) + tuple(data.shape[1:]), dtype=data.dtype)
    xp.add.at(out, segment_ids, data)
    return out


@primitive(SEGMENT, tangent="linear", nondiff=("segment_ids",))
def segment_sum(xp, data, segment_ids, num_segments=None):
    """Sum of the rows of data in each segment (tf.math.unsorted_segment_sum).

    >>> ppto.segment_sum(ppto.tensor([1.0, 2.0, 4.0]), [1, 0, 1], num_segments=3)
    Tensor([2., 5., 0.], device='cpu', dtype=float64)
    """
    count = checked_num_segments("segment_sum", data, segment_ids, num_segments)
    return summed_rows(xp, data, segment_ids, count)


@segment_sum.grad_rule
def _(data, segment_ids, num_segments=None):
    def backward(dY):
        return gather(dY, segment_ids), None

    return backward


@primitive(SEGMENT, tangent="linear", nondiff=("segment_ids",))
def segment_mean(xp, data, segment_ids, num_segments=None):
    """Mean of the rows of data in each segment; an empty segment gives 0.

    >>> ppto.segment_mean(ppto.tensor([1.0, 2.0, 4.0]), [1, 0, 1], num_segments=3)
    Tensor([2. , 2.5, 0. ], device='cpu', dtype=float64)
    """
    count = checked_num_segments("segment_mean", data, segment_ids, num_segments)
    sums = summed_rows(xp, data, segment_ids, count)
    # bincount refuses uint64 ids; dividing empty segments by 1 leaves their 0.
    members = xp.bincount(segment_ids.astype(xp.int64, copy=False), minlength=count)
    members = xp.maximum(members, 1).astype(sums.dtype)
    return sums / members.reshape(row_broadcast_shape(sums.ndim))


@segment_mean.grad_rule
def _(data, segment_ids, num_segments=None):
    def backward(dY):
        ones = ones_like(segment_ids, dtype=dY.dtype)
        members = gather(segment_sum(ones, segment_ids, num_segments), segment_ids)
        share = reshape(members, row_broadcast_shape(dY.ndim))
        return gather(dY, segment_ids) / share, None

    return backward


@primitive(SEGMENT, nondiff=("segment_ids",))
def segment_max(xp, data, segment_ids, num_segments=None):
    """Maximum of the rows of data in each segment; an empty segment gives 0 (as in
    PyTorch Geometric's max aggregation, not TensorFlow's lowest float).

    >>> ppto.segment_max(ppto.tensor([1.0, 2.0, 4.0]), [1, 0, 1], num_segments=3)
    Tensor([2., 4., 0.], device='cpu', dtype=float64)
    """
    count = checked_num_segments("segment_max", data, segment_ids, num_segments)
    out = xp.zeros((count,) + tuple(data.shape[1:]), dtype=data.dtype)
    # Seeding each segment with one of its own rows (any one, when ids repeat) needs
    # no per-dtype sentinel like -inf, and leaves empty segments at 0.
    out[segment_ids] = data
    xp.maximum.at(out, segment_ids, data)
    return out


@segment_max.grad_rule
def _(data, segment_ids, num_segments=None, out=None):
    # Tied maxima share the gradient equally (an exact subgradient); every row's
    # segment holds its maximum at least once, so the tie count is never 0.
    def backward(dY):
        hit = cast(equal(data, gather(out, segment_ids)), dY.dtype)
        ties = gather(segment_sum(hit, segment_ids, num_segments), segment_ids)
        return gather(dY, segment_ids) * hit / ties, None

    return backward


@segment_max.jvp_rule
def _(data, segment_ids, num_segments=None, out=None):
    # Empty segments have no maximum and no ties: dividing by at least 1 keeps them 0.
    def tangent(ddata, dsegment_ids):
        hit = cast(equal(data, gather(out, segment_ids)), ddata.dtype)
        ties = segment_sum(hit, segment_ids, num_segments)
        return segment_sum(ddata * hit, segment_ids, num_segments) / maximum(ties, 1)

    return tangent


@primitive("(Tensor[N], Tensor[...]) -> Tensor[K]", tangent="linear", nondiff=("x",))
def bincount(xp, x, weights=None, minlength=0):
    """How many times each whole number 0, 1, ... occurs in x or, with ``weights``
    (one for each entry of x), the sum of each one's weights, like np.bincount:
    max(x) + 1 of them, or ``minlength`` where that is more. The sums are float64,
    as NumPy's; differentiable in the weights (x, whole numbers, is not)."""
    if x.dtype.kind not in "iub":
        raise DTypeError(
            f"np.bincount counts whole numbers, not dtype {x.dtype}: convert x "
            "with .astype(int) (or np.rint(x).astype(int)) first"
        )
    if weights is not None and tuple(weights.shape) != tuple(x.shape):
        raise ShapeError(
            f"np.bincount's weights (shape {tuple(weights.shape)}) must be one for "
            f"each entry of x (shape {tuple(x.shape)})"
        )
    if x.size and int(x.min()) < 0:
        raise ShapeError(
            f"np.bincount of a negative number ({int(x.min())}): it counts 0, 1, "
            "...; shift x, or drop those entries first (x[x >= 0])"
        )
    try:
        length = operator.index(minlength)
    except TypeError as error:
        raise ShapeError(
            f"np.bincount's minlength must be a whole number, got {minlength!r}"
        ) from error
    if length < 0:
        raise ShapeError(f"np.bincount's minlength must be >= 0, got {length}")
    return xp.bincount(x, weights=weights, minlength=length)


@bincount.grad_rule
def _(x, weights=None, minlength=0):
    def backward(dY):
        # each weight went into the sum of its number: it gets that sum's gradient
        return None, cast(take(dY, x), dtype_of(weights))

    return backward
