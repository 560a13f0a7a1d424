"""Operators that move, repeat or pad elements: roll, tile, repeat, pad, diff and
sort (with argsort, its order).

Each is linear in x (sort piecewise so), and each gradient is the adjoint
rearrangement: roll back, sum the copies, cut the padding off, scatter through the
sorting order. They are built from the shape and indexing operators, whose rules
make them differentiable again.
"""

import numpy as np

from ppto.errors import PptoError, ShapeError
from ppto.ops.indexing import along_axis_index, getitem, index_add, take_along_axis
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum
from ppto.ops.rules import rank_helper, rank_of, shape_helper
from ppto.ops.shape import flatten, reshape, target_shape, unbroadcast, zeros_like
from ppto.runtime.tensor import Tensor, array_module

ANY = "(Tensor[...]) -> Tensor[...]"


def _whole_number(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ShapeError(f"{what} must be a whole number, got {value!r}")
    return int(value)


@primitive(ANY, tangent="linear")
def roll(xp, x, shift, axis=None):
    """x's elements moved ``shift`` places along ``axis`` (of the flattened x when
    None), those pushed off the end coming back at the start, like np.roll."""
    return xp.roll(x, shift, axis=axis)


@roll.grad_rule
def _(x, shift, axis=None):
    def backward(dY):
        return roll(dY, negated(shift), axis)

    return backward


@rank_helper()
def negated(shift):
    """The shift that undoes ``shift`` (a number, or one per axis; NumPy takes a
    0-d array or a float too, and rolls by its whole part)."""
    if np.ndim(shift) == 0:
        return -int(shift)
    return tuple(-int(part) for part in np.ravel(shift))


@primitive(ANY, tangent="linear")
def tile(xp, x, reps):
    """x repeated ``reps`` times along each axis (a number: along the last), like
    np.tile: ``np.tile([a, b], 2)`` is ``[a, b, a, b]``."""
    return xp.tile(x, reps)


@tile.grad_rule
def _(x, reps):
    def backward(dY):
        # each copy in a block of its own axis, then the copies summed
        blocks = reshape(dY, tile_blocks(x, reps))
        return reshape(reduce_sum(blocks, tile_copy_axes(x, reps)), np.shape(x))

    return backward


def _tile_sizes(x, reps) -> tuple[tuple, tuple]:
    """x's shape and ``reps``, each padded with leading 1s to the result's rank."""
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    shape = tuple(np.shape(x))
    rank = max(len(shape), len(reps))
    return (1,) * (rank - len(shape)) + shape, (1,) * (rank - len(reps)) + reps


@shape_helper
def tile_blocks(x, reps):
    """The tiled result's shape with each axis split into (copies, x's size)."""
    shape, reps = _tile_sizes(x, reps)
    return tuple(n for pair in zip(reps, shape) for n in pair)


@shape_helper
def tile_copy_axes(x, reps):
    """The axes of ``tile_blocks`` that count the copies."""
    shape, _ = _tile_sizes(x, reps)
    return tuple(range(0, 2 * len(shape), 2))


@primitive(ANY, tangent="linear")
def repeat(xp, x, repeats, axis=None):
    """Each element of x ``repeats`` times in a row along ``axis`` (of the flattened x
    when None), like np.repeat: ``np.repeat([a, b], 2)`` is ``[a, a, b, b]``;
    ``repeats`` may give a count per element."""
    return xp.repeat(x, repeat_counts(repeats), axis=axis)


@repeat.grad_rule
def _(x, repeats, axis=None):
    def backward(dY):
        if counted_per_element(repeats):  # each copy added into what it copies
            if axis is None:
                sources = repeat_sources(x, repeats)
                return reshape(
                    index_add(zeros_like(flatten(x)), dY, sources), np.shape(x)
                )
            sources = repeat_sources(x, repeats, axis)
            return index_add(zeros_like(x), dY, along_axis_index(sources, axis, dY))
        # one count: each element's copies side by side on an axis of their own
        copies = reshape(dY, repeat_blocks(x, repeats, axis))
        return reshape(reduce_sum(copies, repeat_copy_axis(x, axis)), np.shape(x))

    return backward


@shape_helper
def counted_per_element(repeats) -> bool:
    """Whether ``repeats`` gives a count per element (else one for all)."""
    return isinstance(repeat_counts(repeats), list)


@shape_helper
def repeat_blocks(x, repeats, axis=None):
    """The shape of ``repeat(x, repeats, axis)`` (one count) with the axis repeated
    along split into (x's size, copies); for the flattened x, (x's size, copies)."""
    shape = tuple(np.shape(x))
    if axis is None:
        return (int(np.prod(shape)), repeat_counts(repeats))
    axis = axis % len(shape)
    return shape[:axis] + (shape[axis], repeat_counts(repeats)) + shape[axis + 1 :]


@shape_helper
def repeat_copy_axis(x, axis=None):
    """The axis of ``repeat_blocks`` that counts the copies."""
    return 1 if axis is None else axis % np.ndim(x) + 1


@shape_helper
def repeat_sources(x, repeats, axis=None):
    """For each position of ``repeat(x, repeats, axis)`` along ``axis``, the position
    of x it copies (of the flattened x when axis is None), shaped to index the
    result along ``axis``; made on x's device."""
    xp = array_module(x)
    shape = tuple(np.shape(x))
    size = int(np.prod(shape)) if axis is None else shape[axis]
    sources = xp.repeat(xp.arange(size), repeat_counts(repeats))
    if axis is None:
        return sources
    ones = [1] * len(shape)
    ones[axis] = sources.size
    return sources.reshape(ones)


@shape_helper
def repeat_counts(repeats):
    """``repeats`` as np.repeat and cupy.repeat both take it: one whole number, or a
    list of them (CuPy takes no array of counts)."""
    raw = repeats.data if isinstance(repeats, Tensor) else repeats
    if hasattr(raw, "tolist"):  # (an array or a NumPy number)
        raw = raw.tolist()
    if isinstance(raw, (list, tuple)):
        return [_count(count, "ppto.repeat: each of repeats") for count in raw]
    return _count(raw, "ppto.repeat: repeats")


def _count(value, what: str) -> int:
    """A count NumPy 2 takes: a whole number, or a float of a whole value
    (``np.repeat(x, 2.0)``). NumPy cuts 2.5 down to 2; ppto refuses it rather
    than guess which count was meant."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, (float, np.floating)):
        raise ShapeError(
            f"{what} must be a whole number, got {value!r} (NumPy would repeat "
            f"{int(value)} times): round it first, e.g. int(round(repeats))"
        )
    return _whole_number(value, what)


PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")
# (the modes besides 'constant' copy x's own elements: each place pad fills is
# a copy of one element of x, so the gradient adds it back there, pad_folded)


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]",
    positional=("x", "pad_width", "mode"),
)
def pad(xp, x, constant_values=0, pad_width=None, mode="constant"):
    """x with ``pad_width`` elements added before and after it along each axis,
    like np.pad (``((before, after), ...)``, one pair for every axis, or one
    number; a 0-d x is left as it is): of ``constant_values`` (mode 'constant',
    the default; the pad value is an input, differentiable as x is), or copies
    of x's own elements (modes 'edge', 'reflect', 'symmetric', 'wrap', as
    NumPy's). By position, NumPy's order, (x, pad_width, mode) (see
    OperatorDef.positional)."""
    if mode not in PAD_MODES:
        raise PptoError(
            f"ppto.pad takes the modes {', '.join(map(repr, PAD_MODES))}, got "
            f"mode={mode!r}: pad with np.concatenate of the values you want "
            "(np.mean(x, axis, keepdims=True), ...) instead"
        )
    pairs = pad_pairs(x, pad_width)
    if not pairs:  # (NumPy returns a 0-d array as it is)
        return x.copy()
    if mode == "constant":
        return xp.pad(x, pairs, mode="constant", constant_values=constant_values)
    if not (np.ndim(constant_values) == 0 and constant_values == 0):
        raise PptoError(  # (NumPy's ValueError: only 'constant' reads them)
            f"ppto.pad: mode={mode!r} takes no constant_values (it copies x's own "
            "elements): leave them out, or use mode='constant'"
        )
    _refuse_empty_axes(x, pairs, mode)
    return xp.pad(x, pairs, mode=mode)


def _refuse_empty_axes(x, pairs, mode) -> None:
    """NumPy's ValueError, as a ppto error: an axis of length 0 has no element
    to copy into the places padded along it."""
    for axis, ((before, after), size) in enumerate(zip(pairs, np.shape(x))):
        if size == 0 and before + after:
            raise ShapeError(
                f"ppto.pad: axis {axis} of x has length 0, so mode={mode!r} has "
                "nothing to copy into its padding: use mode='constant'"
            )


@pad.grad_rule
def _(x, constant_values, pad_width, mode="constant"):
    def backward(dY):
        if mode != "constant":  # (each filled place is a copy of an element of x)
            return pad_folded(dY, x, pad_width=pad_width, mode=mode), None
        # each pad value gets dY summed over the places it fills
        filled = dY * pad_filling(x, constant_values, pad_width)
        dvalues = reduce_sum(filled, pad_filled_axes(x))
        return getitem(dY, unpadded(x, pad_width)), reshape(
            dvalues, np.shape(constant_values)
        )

    return backward


@pad.jvp_rule
def _(x, constant_values, pad_width, mode="constant"):
    def tangent(dx, dconstant_values):
        if mode != "constant":
            return pad(dx, pad_width=pad_width, mode=mode)
        return pad(dx, pad_width=pad_width, constant_values=dconstant_values)

    return tangent


@primitive("(Tensor[...]) -> Tensor[...]", tangent="linear")
def pad_folded(xp, x, like, pad_width=None, mode="edge"):
    """The adjoint of ``pad`` in a mode copying its input's elements ('edge',
    'reflect', 'symmetric', 'wrap'): x, of the padded shape, with each element
    added back to the element of ``like``'s shape it is a copy of. Axis by
    axis: the part that is ``like`` itself, plus the padded places folded onto
    their sources (found by padding the positions, so they are NumPy's own)."""
    pairs = pad_pairs(like, pad_width)
    for axis, ((before, after), size) in enumerate(zip(pairs, target_shape(like))):
        if not before + after:
            continue
        sources = np.pad(np.arange(size), (before, after), mode=mode)
        padded = np.r_[0:before, before + size : before + size + after]
        moved = xp.moveaxis(x, axis, 0)
        folded = moved[before : before + size].copy()
        xp.add.at(folded, xp.asarray(sources[padded]), moved[padded])
        x = xp.moveaxis(folded, 0, axis)
    return x if pairs else x.copy()


@pad_folded.grad_rule
def _(x, like, pad_width=None, mode="edge"):
    def backward(dY):
        return pad(dY, pad_width=pad_width, mode=mode)

    return backward


@shape_helper
def pad_filling(x, constant_values, pad_width):
    """For each element of ``constant_values`` (on a leading axis), where it fills
    ``pad(x, constant_values, pad_width)``: 1 there, 0 elsewhere (made by padding
    with the values' positions, so that NumPy's broadcasting of the values over the
    axes and sides, and the order in which corners are filled, are its own)."""
    xp = array_module(x)
    count = int(np.size(constant_values))
    pairs = pad_pairs(x, pad_width)
    if not pairs:  # (a 0-d x: nothing is padded)
        return xp.zeros((count,), dtype=x.dtype)
    positions = np.arange(1, count + 1).reshape(np.shape(constant_values))
    where = np.pad(np.zeros(np.shape(x), int), pairs, constant_values=positions)
    ones = where == np.arange(1, count + 1).reshape((count,) + (1,) * np.ndim(x))
    return xp.asarray(ones.astype(x.dtype))


@shape_helper
def pad_filled_axes(x):
    """The axes of ``dY * pad_filling(...)`` summed for each pad value's gradient."""
    return tuple(range(1, np.ndim(x) + 1))


@shape_helper
def pad_pairs(x, pad_width):
    """``pad_width`` as one (before, after) pair of whole numbers per axis of x."""
    if pad_width is None:  # (the operator's default, after its inputs)
        raise PptoError("ppto.pad is missing its pad_width")
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu" or widths.size and widths.min() < 0:
        raise ShapeError(
            "ppto.pad: pad_width must be whole numbers of at least 0, got "
            f"{pad_width!r}"
        )
    try:
        pairs = np.broadcast_to(widths, (np.ndim(x), 2))
    except ValueError as error:
        raise ShapeError(
            f"ppto.pad: pad_width {pad_width!r} does not give a (before, after) "
            f"pair for each of the {np.ndim(x)} axes of x: {error}"
        ) from error
    return tuple((int(before), int(after)) for before, after in pairs)


@shape_helper
def unpadded(x, pad_width):
    """The subscript of ``pad(x, pad_width)`` that is x."""
    return tuple(
        slice(before, before + size)
        for (before, _), size in zip(pad_pairs(x, pad_width), np.shape(x))
    )


@primitive(
    "(Tensor[...], Tensor[...], Tensor[...]) -> Tensor[...]",
    positional=("x", "n", "axis", "prepend", "append"),
)
def diff(xp, x, prepend=None, append=None, n=1, axis=-1):
    """Differences of neighbours along ``axis``, ``x[1:] - x[:-1]``, taken ``n``
    times, like np.diff; ``prepend`` and ``append`` (a number, or an array of x's
    shape but along ``axis``) are put before and after x along ``axis`` first, and
    are differentiable as x is. By position, NumPy's order, (x, n, axis,
    prepend, append) (see OperatorDef.positional)."""
    _whole_number(n, "ppto.diff's n")
    if n < 0:
        raise ShapeError(f"ppto.diff's n must be at least 0, got {n}")
    edges = {"prepend": prepend, "append": append}
    edges = {side: value for side, value in edges.items() if value is not None}
    return xp.diff(x, n=n, axis=axis, **edges)


@diff.grad_rule
def _(x, prepend, append, n=1, axis=-1):
    def backward(dY):
        # a difference's adjoint is minus the difference of the zero-padded dY
        # (the n-th's: (-1)**n times the n-th), here of x with its edges put
        # before and after it
        order = diff_order(x, prepend, append, n, axis)
        padded = pad(dY, pad_width=diff_padding(x, order, axis), constant_values=0.0)
        difference = diff(padded, n=order, axis=axis)
        widened = -difference if diff_odd(order) else difference
        if prepend is None and append is None:
            return widened, None, None  # (of x's shape: x has no edges)
        dprepend = dappend = None
        if prepend is not None:
            part = diff_part(x, prepend, append, axis, "prepend")
            dprepend = unbroadcast(getitem(widened, part), prepend)
        if append is not None:
            part = diff_part(x, prepend, append, axis, "append")
            dappend = unbroadcast(getitem(widened, part), append)
        part = diff_part(x, prepend, append, axis, "x")
        return getitem(widened, part), dprepend, dappend

    return backward


@diff.jvp_rule
def _(x, prepend, append, n=1, axis=-1):
    def tangent(dx, dprepend, dappend):
        # linear in x and its edges together; an edge left out has no tangent
        before = after = None
        if prepend is not None:
            before = dprepend
        if append is not None:
            after = dappend
        return diff(dx, n=n, axis=axis, prepend=before, append=after)

    return tangent


@shape_helper
def diff_edges(x, prepend, append, axis) -> tuple[int, int]:
    """How many elements ``prepend`` and ``append`` put before and after x along
    ``axis`` (a number: one; none: 0)."""
    return tuple(
        0 if edge is None else np.shape(edge)[axis] if np.ndim(edge) else 1
        for edge in (prepend, append)
    )


@shape_helper
def diff_order(x, prepend, append, n, axis):
    """How many differences ``diff`` takes before none is left: n, or the length
    along ``axis`` of x with its edges where n is more."""
    before, after = diff_edges(x, prepend, append, axis)
    return min(n, before + np.shape(x)[axis] + after)


@shape_helper
def diff_part(x, prepend, append, axis, which):
    """The subscript of x with its edges (along ``axis``) that is ``which`` of
    them: 'prepend', 'x' or 'append'."""
    before, _ = diff_edges(x, prepend, append, axis)
    size = np.shape(x)[axis]
    part = {
        "prepend": slice(0, before),
        "x": slice(before, before + size),
        "append": slice(before + size, None),
    }[which]
    return (slice(None),) * (axis % np.ndim(x)) + (part,)


@rank_helper()
def diff_odd(n):
    """Whether n is odd: the n-th difference's adjoint is minus a difference."""
    return n % 2 == 1


@rank_helper("x")
def diff_padding(x, n, axis):
    """n zeros before and after (an array of) x's rank along ``axis``."""
    pairs = [(0, 0)] * rank_of(x)
    pairs[axis] = (n, n)
    return tuple(pairs)


@primitive(ANY, differentiable=False)
def argsort(xp, x, axis=-1, kind=None, stable=None):
    """The indices that sort x along ``axis`` (the flattened x when None), like
    np.argsort (not differentiable); ``kind='stable'`` or ``stable=True`` keeps
    tied elements in their order."""
    return xp.argsort(x, axis=axis, **sorting_method(xp, kind, stable))


def sorting_method(xp, kind, stable) -> dict:
    """np.sort's and np.argsort's ``kind`` and ``stable`` where given, for NumPy to
    check as it does; CuPy takes no ``stable`` (its sorts are stable) and ``kind``
    as it allows."""
    method = {"kind": kind, "stable": stable}
    if xp is not np:
        del method["stable"]
    return {name: value for name, value in method.items() if value is not None}


@primitive(ANY)
def sort(xp, x, axis=-1, kind=None, stable=None):
    """x's elements in increasing order along ``axis`` (of the flattened x when None),
    like np.sort (``kind`` and ``stable`` as NumPy takes them: the values are the
    same). Tied elements share no gradient: each gets the gradient of the place the
    sort put it in."""
    return xp.sort(x, axis=axis, **sorting_method(xp, kind, stable))


@sort.grad_rule
def _(x, axis=-1, kind=None, stable=None):
    def backward(dY):
        # dY goes back to where each sorted element came from
        if axis is None:
            flat = index_add(zeros_like(flatten(x)), dY, argsort(x, None))
            return reshape(flat, np.shape(x))
        order = argsort(x, axis)
        return index_add(zeros_like(x), dY, along_axis_index(order, axis, x))

    return backward


@sort.jvp_rule
def _(x, axis=-1, kind=None, stable=None):
    def tangent(dx):
        return take_along_axis(dx, argsort(x, axis), axis)

    return tangent


@primitive(ANY)
def partition(xp, x, kth, axis=-1, kind="introselect"):
    """x rearranged along ``axis`` (the flattened x when None) so that the element
    at each place in ``kth`` is the one a sort puts there, the smaller before it and
    the larger after, like np.partition (whose values these are). Each element gets
    the gradient of the place it is put in; tied elements share none."""
    if xp is not np:  # (CuPy takes no kind: it sorts)
        return xp.partition(x, kth, axis=axis)
    return xp.partition(x, kth, axis=axis, kind=kind)


@partition.grad_rule
def _(x, kth, axis=-1, kind="introselect", out=None):
    def backward(dY):
        # dY goes back to where each element of the result came from
        sources = partition_sources(x, out, axis)
        if axis is None:
            flat = index_add(zeros_like(flatten(x)), dY, sources)
            return reshape(flat, np.shape(x))
        return index_add(zeros_like(x), dY, along_axis_index(sources, axis, x))

    return backward


@partition.jvp_rule
def _(x, kth, axis=-1, kind="introselect", out=None):
    def tangent(dx):
        return take_along_axis(dx, partition_sources(x, out, axis), axis)

    return tangent


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", differentiable=False)
def partition_sources(xp, x, partitioned, axis=-1):
    """Where along ``axis`` of x (of the flattened x when None) each element of
    ``partitioned``, x partitioned, came from. np.argpartition may arrange the
    sides of each place in kth otherwise than np.partition does, so the places are
    matched by rank: the element of each rank in the result is x's of that rank
    (tied elements matched in their order, as a stable sort ranks them)."""
    if axis is None:
        x, partitioned, axis = xp.reshape(x, (-1,)), xp.reshape(partitioned, (-1,)), 0
    stable = sorting_method(xp, "stable", None)
    order = xp.argsort(x, axis=axis, **stable)
    ranks = xp.argsort(
        xp.argsort(partitioned, axis=axis, **stable), axis=axis, **stable
    )
    return xp.take_along_axis(order, ranks, axis=axis)


@primitive("([Tensor[...]]) -> Tensor[...] tuple", tangent="linear")
def meshgrid(xp, xs, indexing="xy", sparse=False, copy=True):
    """Coordinate grids from 1-D arrays (others flattened), like np.meshgrid: one
    array per input, each repeating it along every other input's axis ('xy', the
    default, puts the second input's axis first; 'ij' keeps their order; sparse
    grids have length 1 along the other axes). ``ppto.meshgrid`` takes a list;
    np.meshgrid the arrays one by one."""
    if not isinstance(indexing, str):  # (ppto.meshgrid(x, y), as NumPy's is called:
        # x read as the list of its rows, y as indexing; a raw array's truth value)
        raise PptoError(
            "ppto.meshgrid takes its arrays in one list, ppto.meshgrid([x, y]) "
            f"(np.meshgrid one by one); indexing= got a {type(indexing).__name__}"
        )
    if indexing not in ("xy", "ij"):
        raise PptoError(f"ppto.meshgrid takes indexing='xy' or 'ij', not {indexing!r}")
    return tuple(xp.meshgrid(*xs, indexing=indexing, sparse=sparse, copy=copy))


@meshgrid.grad_rule
def _(xs, indexing="xy", sparse=False, copy=True):
    def backward(dYs):
        # each input's element was repeated along the other inputs' axes
        return grid_sums(dYs, grid_shapes(xs), indexing, sparse)

    return backward


@shape_helper
def grid_shapes(xs) -> tuple:
    """The shapes of meshgrid's inputs."""
    return tuple(tuple(np.shape(x)) for x in xs)


@primitive("([Tensor[...]]) -> Tensor[...] tuple", tangent="linear")
def grid_sums(xp, dYs, shapes, indexing="xy", sparse=False):
    """Each grid of ``dYs`` summed along every axis but its own input's, in that
    input's shape (of ``shapes``): the adjoint of meshgrid."""
    sums = []
    for position, (grid, shape) in enumerate(zip(dYs, shapes)):
        own = grid_axis(position, len(shapes), indexing)
        others = tuple(a for a in range(len(shapes)) if a != own)
        total = grid if sparse else xp.sum(grid, axis=others, keepdims=True)
        sums.append(xp.reshape(total, shape))
    return tuple(sums)


@grid_sums.grad_rule
def _(dYs, shapes, indexing="xy", sparse=False):
    def backward(ddxs):
        return meshgrid(ddxs, indexing, sparse)

    return backward


def grid_axis(position: int, count: int, indexing: str) -> int:
    """The axis of meshgrid's grids along which input ``position`` runs: 'xy'
    swaps the first two (x along columns, y along rows)."""
    if indexing == "xy" and count > 1 and position < 2:
        return 1 - position
    return position


@primitive(
    "(Tensor[...]) -> Tensor[...]",
    tangent="linear",
    positional=("x", "window_shape", "axis"),
)
def sliding_window_view(xp, x, window_shape=None, axis=None):
    """Every window of ``window_shape`` sliding over x along ``axis`` (all axes
    when None), like np.lib.stride_tricks.sliding_window_view: x's shape with
    each windowed axis shortened to its count of windows, then the window's
    axes. A read-only view of x, as NumPy's. By position, NumPy's order (x,
    window_shape, axis)."""
    windows, axes = window_axes(np.shape(x), window_shape, axis)
    view = xp.lib.stride_tricks.sliding_window_view
    return view(x, windows, axis=axes)


@sliding_window_view.grad_rule
def _(x, window_shape=None, axis=None):
    def backward(dY):
        return windows_folded(dY, x, window_shape=window_shape, axis=axis)

    return backward


@primitive("(Tensor[...]) -> Tensor[...]", tangent="linear")
def windows_folded(xp, x, like, window_shape=None, axis=None):
    """The adjoint of ``sliding_window_view``: x, one value per element of each
    window, added back to the element of ``like``'s shape it is a view of (a
    shifted slice per place in the window)."""
    shape = target_shape(like)
    windows, axes = window_axes(shape, window_shape, axis)
    out = xp.zeros(shape, dtype=x.dtype)
    lead = (slice(None),) * len(shape)
    for place in np.ndindex(*windows):
        target = list(lead)
        for a, offset, size in zip(axes, place, windows):
            target[a] = slice(offset, offset + shape[a] - size + 1)
        out[tuple(target)] += x[(Ellipsis, *place)]
    return out


@windows_folded.grad_rule
def _(x, like, window_shape=None, axis=None):
    def backward(dY):
        return sliding_window_view(dY, window_shape=window_shape, axis=axis)

    return backward


def window_axes(shape, window_shape, axis):
    """``(window sizes, axes)`` of a sliding window over an array of ``shape``,
    each axis once and
    each window no longer than its axis, as tuples; else a ShapeError."""
    if window_shape is None:
        raise PptoError("ppto.sliding_window_view is missing its window_shape")
    windows = (window_shape,) if np.ndim(window_shape) == 0 else tuple(window_shape)
    windows = tuple(_whole_number(w, "a window size") for w in windows)
    ndim = len(shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        axes = tuple(_whole_number(a, "a window's axis") for a in axes)
    if len(axes) != len(windows):
        raise ShapeError(
            f"ppto.sliding_window_view: window_shape {window_shape!r} gives "
            f"{len(windows)} sizes for {len(axes)} axes"
        )
    if any(not -ndim <= a < ndim for a in axes):
        raise ShapeError(
            f"ppto.sliding_window_view: axis {axis!r} is out of bounds for x of "
            f"{ndim} axes"
        )
    axes = tuple(a % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(
            f"ppto.sliding_window_view: axis {axis!r} names an axis twice; ppto "
            "slides one window per axis (take windows of the windows instead)"
        )
    for a, size in zip(axes, windows):
        if size < 0 or size > shape[a]:
            raise ShapeError(
                f"ppto.sliding_window_view: a window of {size} does not fit axis "
                f"{a} of x, of length {shape[a]}"
            )
    return windows, axes
