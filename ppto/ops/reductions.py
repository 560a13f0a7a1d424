"""Reductions over axes (``axis=None`` reduces everything; ``keepdims`` as in NumPy),
the weighted mean ``average``, and ``unreduce``, which broadcasts a reduced gradient
back over the reduced axes. Also the running sums and products along an axis,
``cumsum`` and ``cumprod`` (whose rules leave zeros out of the products instead of
dividing by them).
"""

import math

import numpy as np

from ppto.errors import PptoError, ShapeError
from ppto.ops.elementwise import exp, where
from ppto.ops.primitive import primitive
from ppto.ops.rules import shape_helper
from ppto.ops.shape import (
    broadcast_to,
    cast,
    dtype_of,
    flip,
    floating,
    reshape,
    target_shape,
    unbroadcast,
)

REDUCE = "(Tensor[...]) -> Tensor[...]"


@shape_helper
def reduced_axes(ndim, axis):
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)  # (a 0-d array too)
    return tuple(sorted(int(a) % ndim if ndim else 0 for a in axes))


# operators that reduce over ``axis`` (with ``keepdims``): their result's shape
# follows from their input's
REDUCTIONS = frozenset({
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_var", "reduce_std", "logsumexp", "argmax", "argmin",
    "nansum", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd", "ptp",
    "median", "nanmedian",
})  # fmt: skip


def reduced_shape(shape: tuple, axis, keepdims: bool) -> tuple | None:
    """The shape of a reduction of an array of ``shape`` over ``axis``, without
    reducing; None for an axis NumPy refuses."""
    given = () if axis is None else np.atleast_1d(axis).tolist()
    if any(not -len(shape) <= a < len(shape) for a in given):
        return None
    axes = reduced_axes(len(shape), axis)
    if len(set(axes)) < len(axes):
        return None
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


@shape_helper
def reduced_count(x, axis):
    """How many elements each reduction of ``x`` over ``axis`` combines."""
    shape = np.shape(x)
    return math.prod(shape[a] for a in reduced_axes(len(shape), axis))


@primitive(REDUCE, tangent="linear")
def unreduce(xp, x, like, axis=None, keepdims=False):
    """Broadcast a reduction's result (or gradient) back to the shape of ``like``."""
    target = target_shape(like)
    if not keepdims and np.ndim(x):  # a 0-d value broadcasts to any shape as it is
        kept = list(target)
        for a in reduced_axes(len(target), axis):
            kept[a] = 1
        x = xp.reshape(x, kept)
    return xp.broadcast_to(x, target)


@unreduce.grad_rule
def _(x, like, axis=None, keepdims=False):
    def backward(dY):
        return reduce_sum(dY, axis, keepdims)

    return backward


@primitive(REDUCE, tangent="linear")
def reduce_sum(xp, x, axis=None, keepdims=False):
    """Sum over ``axis``."""
    return xp.sum(x, axis=axis, keepdims=keepdims)


@reduce_sum.grad_rule
def _(x, axis=None, keepdims=False):
    def backward(dY):
        return unreduce(dY, x, axis, keepdims)

    return backward


@primitive(REDUCE, tangent="linear")
def reduce_mean(xp, x, axis=None, keepdims=False):
    """Mean over ``axis``."""
    return xp.mean(x, axis=axis, keepdims=keepdims)


@reduce_mean.grad_rule
def _(x, axis=None, keepdims=False):
    def backward(dY):
        # divided before broadcasting: one division per mean, not per element
        return unreduce(divide_by_count(dY, reduced_count(x, axis)), x, axis, keepdims)

    return backward


@primitive(REDUCE, tangent="linear")
def divide_by_count(xp, x, count):
    """``x / count`` for ``count`` a number of elements (a mean's gradient), in
    float32 where ``x`` is float16, as NumPy's mean divides: a count past 65504,
    float16's largest, would be inf there, and one past 2048 rounded. Where the
    dtype is known otherwise, generated code reads ``dy / 8`` instead."""
    if dtype_of(x) == np.float16:
        return (xp.asarray(x, dtype=xp.float32) / count).astype(xp.float16)
    return x / count


@divide_by_count.grad_rule
def _(x, count):
    def backward(dY):
        return divide_by_count(dY, count)

    return backward


def extremum_rules(op):
    """Rules of max and min: the gradient is shared equally among tied extrema."""

    @op.grad_rule
    def _(x, axis=None, keepdims=False, out=None):
        def backward(dY):
            hit = x == unreduce(out, x, axis, keepdims)
            share = dY / cast(reduce_sum(hit, axis, keepdims), dtype_of(x))
            return where(hit, unreduce(share, x, axis, keepdims), 0.0)

        return backward

    @op.jvp_rule
    def _(x, axis=None, keepdims=False, out=None):
        def tangent(dx):
            hit = cast(x == unreduce(out, x, axis, keepdims), dtype_of(x))
            return reduce_sum(dx * hit, axis, keepdims) / reduce_sum(
                hit, axis, keepdims
            )

        return tangent


@primitive(REDUCE)
def reduce_max(xp, x, axis=None, keepdims=False):
    """Maximum over ``axis``."""
    return xp.max(x, axis=axis, keepdims=keepdims)


@primitive(REDUCE)
def reduce_min(xp, x, axis=None, keepdims=False):
    """Minimum over ``axis``."""
    return xp.min(x, axis=axis, keepdims=keepdims)


extremum_rules(reduce_max)
extremum_rules(reduce_min)


@primitive(REDUCE)
def reduce_prod(xp, x, axis=None, keepdims=False):
    """Product over ``axis``."""
    return xp.prod(x, axis=axis, keepdims=keepdims)


# Each element's derivative of a product is the product of the other elements, made
# without dividing by x (out / x is NaN where x is 0): the product of the other
# non-zero elements times that of the other zeros, which is 1 where there are none,
# the one zero's value where there is one (so that its derivative, a second
# derivative of the product, is right), else 0. Rules are inlined as written, so
# both spell it out.


@reduce_prod.grad_rule
def _(x, axis=None, keepdims=False):
    def backward(dY):
        zero = x == 0.0
        nonzero = where(zero, 1.0, x)
        counted = cast(zero, dtype_of(x))
        zeros = reduce_sum(counted, axis, True) - counted
        zero_values = where(zero, x, 0.0)
        other_zero = reduce_sum(zero_values, axis, True) - zero_values
        of_zeros = where(zeros == 0.0, 1.0, where(zeros == 1.0, other_zero, 0.0))
        others = reduce_prod(nonzero, axis, True) / nonzero * of_zeros
        return unreduce(dY, x, axis, keepdims) * others

    return backward


@reduce_prod.jvp_rule
def _(x, axis=None, keepdims=False):
    def tangent(dx):
        zero = x == 0.0
        nonzero = where(zero, 1.0, x)
        counted = cast(zero, dtype_of(x))
        zeros = reduce_sum(counted, axis, True) - counted
        zero_values = where(zero, x, 0.0)
        other_zero = reduce_sum(zero_values, axis, True) - zero_values
        of_zeros = where(zeros == 0.0, 1.0, where(zeros == 1.0, other_zero, 0.0))
        others = reduce_prod(nonzero, axis, True) / nonzero * of_zeros
        return reduce_sum(dx * others, axis, keepdims)

    return tangent


@primitive(REDUCE)
def reduce_var(xp, x, axis=None, keepdims=False, ddof=0):
    """Variance over ``axis``: the mean squared deviation, divided by the count
    less ``ddof`` (0: NumPy's default; 1: the unbiased estimate)."""
    return xp.var(x, axis=axis, keepdims=keepdims, ddof=ddof)


@shape_helper
def degrees_of_freedom(x, axis, ddof) -> int:
    """What a spread of ``x`` over ``axis`` divides by: NumPy's max(count - ddof,
    0) (with ddof >= count, the spread and its derivatives are infinite or
    undefined, never finite)."""
    return max(reduced_count(x, axis) - ddof, 0)


@reduce_var.grad_rule
def _(x, axis=None, keepdims=False, ddof=0):
    def backward(dY):
        centered = x - reduce_mean(x, axis, True)
        scale = dY * 2.0 / degrees_of_freedom(x, axis, ddof)
        return unreduce(scale, x, axis, keepdims) * centered

    return backward


@reduce_var.jvp_rule
def _(x, axis=None, keepdims=False, ddof=0):
    def tangent(dx):
        centered = x - reduce_mean(x, axis, True)
        spread = reduce_sum(centered * dx, axis, keepdims) * 2.0
        return spread / degrees_of_freedom(x, axis, ddof)

    return tangent


@primitive(REDUCE)
def reduce_std(xp, x, axis=None, keepdims=False, ddof=0):
    """Standard deviation over ``axis``: the square root of ``reduce_var``."""
    return xp.std(x, axis=axis, keepdims=keepdims, ddof=ddof)


@reduce_std.grad_rule
def _(x, axis=None, keepdims=False, ddof=0, out=None):
    def backward(dY):
        # exactly 0 where the values are all equal: their mean may be a rounding
        # off them, and the centred values are divided by the deviation, as small
        # (gradients of size 1 where the derivative is 0: fuzz seed 100414); so
        # shifted by the largest value first
        shifted = x - reduce_max(x, axis, True)
        centered = shifted - reduce_mean(shifted, axis, True)
        # where the values are all equal (an axis of length 1: the deviation is 0
        # whatever they are) 0, not 0 / 0
        spread = where(out == 0.0, 1.0, out)
        scale = dY / (spread * degrees_of_freedom(x, axis, ddof))
        return unreduce(scale, x, axis, keepdims) * centered

    return backward


@reduce_std.jvp_rule
def _(x, axis=None, keepdims=False, ddof=0, out=None):
    def tangent(dx):
        shifted = x - reduce_max(x, axis, True)  # (as in the gradient rule)
        centered = shifted - reduce_mean(shifted, axis, True)
        count = degrees_of_freedom(x, axis, ddof)
        spread = where(out == 0.0, 1.0, out)  # (as in the gradient rule)
        return reduce_sum(centered * dx, axis, keepdims) / (spread * count)

    return tangent


@primitive(REDUCE)
def logsumexp(xp, x, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis``, without overflow."""
    peak = xp.max(x, axis=axis, keepdims=True)
    peak = xp.where(xp.isfinite(peak), peak, 0)
    total = xp.log(xp.sum(xp.exp(x - peak), axis=axis, keepdims=True)) + peak
    return total if keepdims else xp.squeeze(total, axis=axis)


@logsumexp.grad_rule
def _(x, axis=None, keepdims=False, out=None):
    def backward(dY):
        return unreduce(dY, x, axis, keepdims) * exp(
            x - unreduce(out, x, axis, keepdims)
        )

    return backward


@logsumexp.jvp_rule
def _(x, axis=None, keepdims=False, out=None):
    def tangent(dx):
        return reduce_sum(
            dx * exp(x - unreduce(out, x, axis, keepdims)), axis, keepdims
        )

    return tangent


@primitive(REDUCE, differentiable=False)
def argmax(xp, x, axis=None, keepdims=False):
    """Index of the maximum over ``axis`` (not differentiable)."""
    return xp.argmax(x, axis=axis, keepdims=keepdims)


@primitive(REDUCE, differentiable=False)
def argmin(xp, x, axis=None, keepdims=False):
    """Index of the minimum over ``axis`` (not differentiable)."""
    return xp.argmin(x, axis=axis, keepdims=keepdims)


@primitive("(Tensor[...]) -> Tensor[...]", tangent="linear")
def cumsum(xp, x, axis=None, dtype=None):
    """Running sums along ``axis`` (of the flattened x when None), like np.cumsum
    (summed in ``dtype`` where given)."""
    return xp.cumsum(x, axis=axis, dtype=dtype)


@cumsum.grad_rule
def _(x, axis=None, dtype=None, out=None):
    def backward(dY):
        # x[i] enters every running sum from i on: dY's running sums from the end
        if axis is None and x.ndim == 1:  # (decided where x's rank is known)
            gradient = flip(cumsum(flip(dY)))
        elif axis is None:
            gradient = reshape(flip(cumsum(flip(dY))), np.shape(x))
        else:
            gradient = flip(cumsum(flip(dY, axis), axis), axis)
        if dtype is not None:  # (in dtype: back to x's, none through ints)
            gradient = where(floating(out), cast(gradient, dtype_of(x)), 0.0)
        return gradient

    return backward


@primitive("(Tensor[...]) -> Tensor[...]")
def cumprod(xp, x, axis=None, dtype=None):
    """Running products along ``axis`` (of the flattened x when None), like
    np.cumprod (multiplied in ``dtype`` where given)."""
    return xp.cumprod(x, axis=axis, dtype=dtype)


# x[i]'s derivative of the running product out[j] (j >= i) is the product of the
# other elements up to j: out[j] / x[i] where x[i] is not 0. A zero is left out of
# the products instead of divided by: the first zero along the axis through the
# running products with it taken as 1; the second through those with both taken
# as 1, times the first zero's value (0, but its derivative is that product: the
# second derivatives are right); later zeros' derivatives have two zero factors.
# Rules are inlined as written, so both spell it out.


@cumprod.grad_rule
def _(x, axis=None, dtype=None, out=None):
    def backward(dY):
        along = running_axis(axis)
        flat = reshape(x, running_shape(x, axis))
        zero = flat == 0.0
        zeros_so_far = where(zero, cumsum(cast(zero, flat.dtype), along), 0.0)
        first = zeros_so_far == 1.0
        second = zeros_so_far == 2.0
        from_end = flip(cumsum(flip(dY * out, along), along), along)
        others = where(zero, 0.0, from_end / where(zero, 1.0, flat))
        without_first = cumprod(where(first, 1.0, flat), along)
        at_first = flip(cumsum(flip(dY * without_first, along), along), along)
        without_two = cumprod(where(first, 1.0, where(second, 1.0, flat)), along)
        first_value = reduce_sum(where(first, flat, 0.0), along, True)
        at_second = first_value * flip(
            cumsum(flip(dY * without_two, along), along), along
        )
        gradient = where(first, at_first, where(second, at_second, others))
        if dtype is not None:  # (in dtype: back to x's, none through ints)
            gradient = where(floating(out), cast(gradient, dtype_of(x)), 0.0)
        return reshape(gradient, np.shape(x))

    return backward


@cumprod.jvp_rule
def _(x, axis=None, dtype=None, out=None):
    def tangent(dx):
        along = running_axis(axis)
        flat = reshape(x, running_shape(x, axis))
        flat_dx = reshape(dx, running_shape(x, axis))
        zero = flat == 0.0
        zeros_so_far = where(zero, cumsum(cast(zero, flat.dtype), along), 0.0)
        first = zeros_so_far == 1.0
        second = zeros_so_far == 2.0
        others = out * cumsum(where(zero, 0.0, flat_dx / where(zero, 1.0, flat)), along)
        without_first = cumprod(where(first, 1.0, flat), along)
        at_first = without_first * cumsum(where(first, flat_dx, 0.0), along)
        without_two = cumprod(where(first, 1.0, where(second, 1.0, flat)), along)
        first_value = reduce_sum(where(first, flat, 0.0), along, True)
        at_second = (
            first_value * without_two * cumsum(where(second, flat_dx, 0.0), along)
        )
        if dtype is not None:  # (the products are in dtype)
            return cast(others + at_first + at_second, out.dtype)
        return others + at_first + at_second

    return tangent


@shape_helper
def running_axis(axis):
    """The axis a running sum or product runs along once x is ``running_shape``."""
    return 0 if axis is None else axis


@shape_helper
def running_shape(x, axis):
    """x's shape as a running sum or product along ``axis`` sees it: flattened when
    axis is None."""
    return (-1,) if axis is None else tuple(np.shape(x))


@primitive(
    "(Tensor[...], Tensor[...]) -> Tensor[...]",
    positional=("a", "axis", "weights", "returned"),
)
def average(xp, a, weights=None, axis=None, keepdims=False, returned=False):
    """Weighted mean over ``axis``, sum(a * weights) / sum(weights), like
    np.average: weights of a's shape, 1-D along an int ``axis``, or of a's lengths
    along a tuple ``axis``; without weights, the mean. By position, NumPy's order,
    (a, axis, weights, returned) (see OperatorDef.positional); returned=True is
    NumPy's spellings'."""
    if returned:  # (a pair: one result per operator, and one gradient rule)
        raise PptoError(
            "the average operator gives the average alone: returned=True is "
            "np.average's and ppto.average's, which call "
            "ppto.ops.averaged.average_returned for the pair"
        )
    if isinstance(weights, (list, tuple)):  # (a global list, in generated code)
        weights = xp.asarray(weights)
    if not hasattr(weights, "shape"):  # a number or None: every element alike
        if weights is not None and weights == 0:
            raise PptoError("ppto.average: weights of 0 sum to zero")
        return xp.mean(a, axis=axis, keepdims=keepdims)
    aligned = xp.reshape(weights, weights_shape(weights, a, axis))
    total = xp.sum(xp.broadcast_to(aligned, a.shape), axis=axis, keepdims=keepdims)
    if bool((total == 0).any()):  # (NumPy's ZeroDivisionError, said so)
        raise PptoError(
            f"ppto.average: the weights sum to zero along axis={axis}, so the "
            "average is not defined there: check the weights, or add a small "
            "positive number to them"
        )
    return xp.sum(a * aligned, axis=axis, keepdims=keepdims) / total


@shape_helper
def weights_shape(weights, a, axis):
    """The shape ``average``'s ``weights`` take to broadcast against a: their own
    where they are a's shape (or a number), 1-D weights along ``axis`` with 1 for
    each other axis, weights of a's lengths along a tuple ``axis`` with 1 for the
    others; any other shape is refused, as NumPy refuses it."""
    shape, target = tuple(np.shape(weights)), tuple(np.shape(a))
    if shape == target or not shape:
        return shape
    if isinstance(axis, tuple) and len(axis) == len(shape):
        return _weights_along_axes(shape, target, axis)
    if axis is None or not isinstance(axis, (int, np.integer)) or len(shape) != 1:
        raise ShapeError(
            f"ppto.average: weights of shape {shape} for an array of shape "
            f"{target} with axis={axis}: give weights of the array's shape, 1-D "
            "weights along one int axis, or weights of its lengths along a tuple "
            "axis (as np.average takes them)"
        )
    along = int(axis) % len(target) if -len(target) <= axis < len(target) else None
    if along is None or shape[0] != target[along]:
        size = target[along] if along is not None else "none"
        raise ShapeError(
            f"ppto.average: {shape[0]} weights along axis {axis} of an array of "
            f"shape {target} (its length there: {size})"
        )
    kept = [1] * len(target)
    kept[along] = shape[0]
    return tuple(kept)


def _weights_along_axes(shape: tuple, target: tuple, axis: tuple) -> tuple:
    """``weights_shape`` for a tuple ``axis``: weights of a's lengths along it, in
    its order (np.average's), which ppto takes where the axes increase."""
    rank = len(target)
    if not all(-rank <= int(one) < rank for one in axis):
        raise ShapeError(f"ppto.average: axis={axis} for an array of {rank} axes")
    along = [int(one) % rank for one in axis]
    if shape != tuple(target[one] for one in along):
        raise ShapeError(
            f"ppto.average: weights of shape {shape} along axis={axis} of an array "
            f"of shape {target}: their lengths must be the array's along those "
            "axes, in that order"
        )
    if along != sorted(set(along)):
        raise ShapeError(
            f"ppto.average: weights along axis={axis}, axes not in increasing "
            f"order: write axis={tuple(sorted(along))} with the weights' axes in "
            "that order (np.transpose)"
        )
    kept = [1] * rank
    for one, length in zip(along, shape):
        kept[one] = length
    return tuple(kept)


@average.grad_rule
def _(a, weights=None, axis=None, keepdims=False, returned=False, out=None):
    def backward(dY):
        if weights is None:  # (the mean; None has no gradient)
            return (
                unreduce(
                    divide_by_count(dY, reduced_count(a, axis)), a, axis, keepdims
                ),
                None,
            )
        # each element's share of the result is its weight over the weights' sum
        aligned = reshape(weights, weights_shape(weights, a, axis))
        total = reduce_sum(broadcast_to(aligned, np.shape(a)), axis, True)
        share = unreduce(dY, a, axis, keepdims) / total
        away = a - unreduce(out, a, axis, keepdims)
        return share * aligned, reshape(
            unbroadcast(share * away, aligned), np.shape(weights)
        )

    return backward


@average.jvp_rule
def _(a, weights=None, axis=None, keepdims=False, returned=False, out=None):
    def tangent(da, dweights):
        if weights is None:  # (the mean)
            return reduce_mean(da, axis, keepdims)
        aligned = reshape(weights, weights_shape(weights, a, axis))
        daligned = reshape(dweights, weights_shape(weights, a, axis))
        total = reduce_sum(broadcast_to(aligned, np.shape(a)), axis, True)
        away = a - unreduce(out, a, axis, keepdims)
        return reduce_sum((da * aligned + daligned * away) / total, axis, keepdims)

    return tangent
