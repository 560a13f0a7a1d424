"""Statistics over axes: reductions that skip NaN entries (``nansum`` ... ``nanstd``),
the range ``ptp``, and order statistics (``quantile``, ``percentile``, ``median``).

NaN entries get no gradient. An order statistic's gradient goes to the one or two
elements it interpolates between (``quantile_weights``): tied elements share none,
the one first along the axis taking the lower place in the order, as a stable sort
puts it.
"""

import numpy as np

from ppto.errors import PptoError
from ppto.ops.arrange import sorting_method
from ppto.ops.elementwise import where
from ppto.ops.logic import isnan, logical_not
from ppto.ops.primitive import primitive
from ppto.ops.reductions import (
    extremum_rules,
    reduce_max,
    reduce_min,
    reduce_sum,
    reduced_axes,
    unreduce,
)
from ppto.ops.rules import rank_helper, rank_of
from ppto.ops.shape import cast

REDUCE = "(Tensor[...]) -> Tensor[...]"


@primitive(REDUCE)
def nansum(xp, x, axis=None, keepdims=False):
    """Sum over ``axis`` with NaN entries taken as 0, like np.nansum."""
    return xp.nansum(x, axis=axis, keepdims=keepdims)


@nansum.grad_rule
def _(x, axis=None, keepdims=False):
    def backward(dY):
        return where(isnan(x), 0.0, unreduce(dY, x, axis, keepdims))

    return backward


@nansum.jvp_rule
def _(x, axis=None, keepdims=False):
    def tangent(dx):
        return reduce_sum(where(isnan(x), 0.0, dx), axis, keepdims)

    return tangent


@primitive(REDUCE)
def nanmean(xp, x, axis=None, keepdims=False):
    """Mean over ``axis`` of the entries that are not NaN, like np.nanmean (NaN
    where all are)."""
    return xp.nanmean(x, axis=axis, keepdims=keepdims)


@nanmean.grad_rule
def _(x, axis=None, keepdims=False):
    def backward(dY):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, x.dtype), axis, keepdims)
        return where(present, unreduce(dY / count, x, axis, keepdims), 0.0)

    return backward


@nanmean.jvp_rule
def _(x, axis=None, keepdims=False):
    def tangent(dx):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, x.dtype), axis, keepdims)
        return reduce_sum(where(present, dx, 0.0), axis, keepdims) / count

    return tangent


@primitive(REDUCE)
def nanmax(xp, x, axis=None, keepdims=False):
    """Maximum over ``axis`` of the entries that are not NaN, like np.nanmax (tied
    maxima share the gradient equally, as np.max's)."""
    return xp.nanmax(x, axis=axis, keepdims=keepdims)


@primitive(REDUCE)
def nanmin(xp, x, axis=None, keepdims=False):
    """Minimum over ``axis`` of the entries that are not NaN, like np.nanmin (tied
    minima share the gradient equally, as np.min's)."""
    return xp.nanmin(x, axis=axis, keepdims=keepdims)


# NaN equals nothing, so the rules of max and min already pass it no gradient
extremum_rules(nanmax)
extremum_rules(nanmin)


@primitive(REDUCE)
def nanvar(xp, x, axis=None, keepdims=False, ddof=0):
    """Variance over ``axis`` of the entries that are not NaN, divided by their
    count less ``ddof``, like np.nanvar."""
    return xp.nanvar(x, axis=axis, keepdims=keepdims, ddof=ddof)


@nanvar.grad_rule
def _(x, axis=None, keepdims=False, ddof=0):
    def backward(dY):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, x.dtype), axis, True)
        centered = x - reduce_sum(where(present, x, 0.0), axis, True) / count
        scale = unreduce(dY, x, axis, keepdims) * 2.0 / (count - ddof)
        return where(present, scale * centered, 0.0)

    return backward


@nanvar.jvp_rule
def _(x, axis=None, keepdims=False, ddof=0):
    def tangent(dx):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, x.dtype), axis, keepdims)
        mean = reduce_sum(where(present, x, 0.0), axis, True) / unreduce(
            count, x, axis, keepdims
        )
        spread = reduce_sum(where(present, (x - mean) * dx, 0.0), axis, keepdims)
        return spread * 2.0 / (count - ddof)

    return tangent


@primitive(REDUCE)
def nanstd(xp, x, axis=None, keepdims=False, ddof=0):
    """Standard deviation over ``axis`` of the entries that are not NaN: the
    square root of ``nanvar``, like np.nanstd."""
    return xp.nanstd(x, axis=axis, keepdims=keepdims, ddof=ddof)


@nanstd.grad_rule
def _(x, axis=None, keepdims=False, ddof=0, out=None):
    def backward(dY):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, x.dtype), axis, True)
        centered = x - reduce_sum(where(present, x, 0.0), axis, True) / count
        scale = unreduce(dY / out, x, axis, keepdims) / (count - ddof)
        return where(present, scale * centered, 0.0)

    return backward


@nanstd.jvp_rule
def _(x, axis=None, keepdims=False, ddof=0, out=None):
    def tangent(dx):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, x.dtype), axis, keepdims)
        mean = reduce_sum(where(present, x, 0.0), axis, True) / unreduce(
            count, x, axis, keepdims
        )
        spread = reduce_sum(where(present, (x - mean) * dx, 0.0), axis, keepdims)
        return spread / (out * (count - ddof))

    return tangent


@primitive(REDUCE)
def ptp(xp, x, axis=None, keepdims=False):
    """The range, maximum less minimum, over ``axis``, like np.ptp (tied extrema
    share their part of the gradient equally, as np.max's and np.min's)."""
    return xp.ptp(x, axis=axis, keepdims=keepdims)


@ptp.grad_rule
def _(x, axis=None, keepdims=False):
    def backward(dY):
        top = x == reduce_max(x, axis, True)
        bottom = x == reduce_min(x, axis, True)
        to_top = dY / reduce_sum(cast(top, x.dtype), axis, keepdims)
        to_bottom = dY / reduce_sum(cast(bottom, x.dtype), axis, keepdims)
        return where(top, unreduce(to_top, x, axis, keepdims), 0.0) - where(
            bottom, unreduce(to_bottom, x, axis, keepdims), 0.0
        )

    return backward


@ptp.jvp_rule
def _(x, axis=None, keepdims=False):
    def tangent(dx):
        top = cast(x == reduce_max(x, axis, True), x.dtype)
        bottom = cast(x == reduce_min(x, axis, True), x.dtype)
        highest = reduce_sum(dx * top, axis, keepdims) / reduce_sum(top, axis, keepdims)
        lowest = reduce_sum(dx * bottom, axis, keepdims) / reduce_sum(
            bottom, axis, keepdims
        )
        return highest - lowest

    return tangent


# np.quantile's methods that interpolate between the two order statistics around
# n * q + alpha + q * (1 - alpha - beta) - 1 (Hyndman and Fan's), by (alpha, beta)
INTERPOLATING = {
    "interpolated_inverted_cdf": (0.0, 1.0),
    "hazen": (0.5, 0.5),
    "weibull": (0.0, 0.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
# the methods that pick one order statistic at (n - 1) * q rounded
ROUNDED = {"lower": "floor", "higher": "ceil", "nearest": "around"}
METHODS = ("linear", "midpoint", *ROUNDED, *INTERPOLATING)


def checked_quantiles(q, per: float, name: str):
    """``q`` as fractions in [0, 1] (``per`` 100 for percentiles); a ppto error
    naming ``name`` for one outside, or a method ppto does not take."""
    fractions = np.asarray(q, dtype=np.float64) / per
    if not np.all((fractions >= 0) & (fractions <= 1)):
        bounds = "[0, 100]" if per == 100 else "[0, 1]"
        raise PptoError(f"ppto.{name}: q must be in the range {bounds}, got {q!r}")
    return fractions


def check_method(method: str, name: str) -> None:
    if method not in METHODS:
        raise PptoError(
            f"ppto.{name} takes method= one of {', '.join(METHODS)}, not "
            f"{method!r}: the inverted-CDF steps (inverted_cdf, "
            "averaged_inverted_cdf, closest_observation) have no ppto operator; "
            "method='lower' or 'higher' picks one order statistic as they do"
        )


@primitive(REDUCE)
def quantile(
    xp, x, q, axis=None, keepdims=False, method="linear", overwrite_input=False
):
    """The ``q``-th quantiles (fractions in [0, 1], a number or an array whose
    shape leads the result's) over ``axis``, like np.quantile: by default the
    order statistics around (n - 1) * q, interpolated linearly. ``ppto.quantile``
    takes NumPy's order (a, q, axis, out, overwrite_input, method, keepdims)."""
    checked_quantiles(q, 1, "quantile")
    check_method(method, "quantile")
    return xp.quantile(x, q, axis=axis, keepdims=keepdims, method=method)


@primitive(REDUCE)
def percentile(
    xp, x, q, axis=None, keepdims=False, method="linear", overwrite_input=False
):
    """The ``q``-th percentiles (in [0, 100]) over ``axis``, like np.percentile:
    ``quantile`` of q / 100."""
    checked_quantiles(q, 100, "percentile")
    check_method(method, "percentile")
    return xp.percentile(x, q, axis=axis, keepdims=keepdims, method=method)


@primitive(REDUCE)
def median(xp, x, axis=None, keepdims=False, overwrite_input=False):
    """The median over ``axis``, like np.median: the middle element, or the mean
    of the two middle ones."""
    return xp.median(x, axis=axis, keepdims=keepdims)


# A quantile is linear in x where x's order does not change: the sum over axis of
# quantile_weights(x, q, ...) * x. Its gradient spreads dY with those weights, its
# tangent sums them with dx; the weights hold still, so second derivatives are 0.


@quantile.grad_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def backward(dY):
        weights = quantile_weights(x, q, axis, method)
        spread = unreduce(dY, weights, weights_axes(x, q, axis), keepdims)
        return reduce_sum(spread * weights, quantile_axes(q))

    return backward


@quantile.jvp_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def tangent(dx):
        weights = quantile_weights(x, q, axis, method)
        return reduce_sum(weights * dx, weights_axes(x, q, axis), keepdims)

    return tangent


@percentile.grad_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def backward(dY):
        weights = quantile_weights(x, q, axis, method, 100)
        spread = unreduce(dY, weights, weights_axes(x, q, axis), keepdims)
        return reduce_sum(spread * weights, quantile_axes(q))

    return backward


@percentile.jvp_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def tangent(dx):
        weights = quantile_weights(x, q, axis, method, 100)
        return reduce_sum(weights * dx, weights_axes(x, q, axis), keepdims)

    return tangent


@median.grad_rule
def _(x, axis=None, keepdims=False, overwrite_input=False):
    def backward(dY):
        weights = quantile_weights(x, 0.5, axis)
        return unreduce(dY, x, axis, keepdims) * weights

    return backward


@median.jvp_rule
def _(x, axis=None, keepdims=False, overwrite_input=False):
    def tangent(dx):
        return reduce_sum(quantile_weights(x, 0.5, axis) * dx, axis, keepdims)

    return tangent


@rank_helper("x")
def weights_axes(x, q, axis):
    """The axes of ``quantile_weights`` a quantile over ``axis`` sums: x's, after
    the leading axes of q."""
    leading = np.ndim(q)
    return tuple(leading + a for a in reduced_axes(rank_of(x), axis))


@rank_helper()
def quantile_axes(q):
    """The leading axes of ``quantile_weights``, one per axis of q."""
    return tuple(range(np.ndim(q)))


@primitive("(Tensor[...]) -> Tensor[...]", differentiable=False)
def quantile_weights(xp, x, q, axis=None, method="linear", per=1):
    """How much each element of x counts in each quantile ``q`` / ``per`` over
    ``axis`` (per: 100 for percentiles), shaped q.shape + x.shape: the sum over
    axis of the weights times x is the quantile. The one or two order statistics
    ``method`` interpolates between take 1 - gamma and gamma; tied elements take
    their places in the order a stable sort gives them."""
    fractions = xp.asarray(checked_quantiles(q, per, "quantile").reshape(-1))
    axes = reduced_axes(x.ndim, axis)
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = xp.transpose(x, kept + list(axes))
    rows = xp.reshape(moved, moved.shape[: len(kept)] + (-1,))
    count = rows.shape[-1]
    below, above, gamma = interpolated_places(xp, count, fractions, method)
    places = xp.arange(count)
    in_order = (places == below[:, None]) * (1 - gamma)[:, None] + (
        places == above[:, None]
    ) * gamma[:, None]
    stable = sorting_method(xp, "stable", None)
    ranks = xp.argsort(xp.argsort(rows, axis=-1, **stable), axis=-1, **stable)
    weights = xp.reshape(in_order.astype(x.dtype)[:, ranks], (-1, *moved.shape))
    back = np.argsort([0] + [1 + a for a in kept + list(axes)])
    return xp.reshape(xp.transpose(weights, tuple(back)), np.shape(q) + x.shape)


def interpolated_places(xp, count: int, fractions, method: str):
    """The places in sorted order below and above each quantile of ``count``
    elements, and the weight gamma of the one above, as np.quantile finds them."""
    if method in ROUNDED:
        place = getattr(xp, ROUNDED[method])((count - 1) * fractions).astype(np.intp)
        return place, place, xp.zeros(fractions.shape)
    if method in INTERPOLATING:
        alpha, beta = INTERPOLATING[method]
        virtual = count * fractions + (alpha + fractions * (1 - alpha - beta)) - 1
    elif method == "midpoint":
        exact = (count - 1) * fractions
        virtual = 0.5 * (xp.floor(exact) + xp.ceil(exact))
    else:  # linear (NumPy writes (n - 1) * q for it: fewer roundings)
        virtual = (count - 1) * fractions
    # beyond either end, both places are the end's (1 - gamma + gamma: weight 1)
    below = xp.clip(xp.floor(virtual), 0, count - 1).astype(np.intp)
    above = xp.where((virtual < 0) | (virtual >= count - 1), below, below + 1).astype(
        np.intp
    )
    if method == "midpoint":
        return below, above, xp.where(virtual % 1 == 0, 0.0, 0.5)
    return below, above, virtual - below
