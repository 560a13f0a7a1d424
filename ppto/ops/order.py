"""Order statistics: ``quantile``, ``percentile`` and ``median`` over axes, with
NumPy's methods (all but the inverted-CDF steps), and their NaN-skipping kin
(``nanquantile``, ``nanpercentile``, ``nanmedian``).

A quantile is linear in x where x's order holds, so its gradient goes to the one or
two elements it interpolates between (``quantile_weights``): tied elements share
none, the one first along the axis taking the lower place in the order, as a stable
sort puts it.
"""

import numpy as np

from ppto.errors import PptoError
from ppto.ops.arrange import sorting_method
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum, reduced_axes, unreduce
from ppto.ops.rules import rank_helper, rank_of

REDUCE = "(Tensor[...]) -> Tensor[...]"


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
    naming ``name`` for one outside."""
    fractions = np.asarray(q, dtype=np.float64) / per
    if not np.all((fractions >= 0) & (fractions <= 1)):
        bounds = "[0, 100]" if per == 100 else "[0, 1]"
        raise PptoError(f"ppto.{name}: q must be in the range {bounds}, got {q!r}")
    return fractions


def check_method(method: str, name: str) -> None:
    """A ppto error naming ``name`` for a method ppto does not take."""
    if method not in METHODS:
        raise PptoError(
            f"ppto.{name} takes method= one of {', '.join(METHODS)}, not "
            f"{method!r}: the inverted-CDF steps (inverted_cdf, "
            "averaged_inverted_cdf, closest_observation) have no ppto operator; "
            "method='lower' or 'higher' picks one order statistic as they do"
        )


@primitive(REDUCE, positional=("x", "q", "axis"))
def quantile(
    xp, x, q, axis=None, keepdims=False, method="linear", overwrite_input=False
):
    """The ``q``-th quantiles (fractions in [0, 1], a number or an array whose
    shape leads the result's) over ``axis``, like np.quantile: by default the
    order statistics around (n - 1) * q, interpolated linearly. By position it
    takes NumPy's first three, (a, q, axis); NumPy's next one is ``out``, which ppto
    does not take, so the rest go by name (see OperatorDef.positional)."""
    checked_quantiles(q, 1, "quantile")
    check_method(method, "quantile")
    return xp.quantile(x, q, axis=axis, keepdims=keepdims, method=method)


@primitive(REDUCE, positional=("x", "q", "axis"))
def percentile(
    xp, x, q, axis=None, keepdims=False, method="linear", overwrite_input=False
):
    """The ``q``-th percentiles (in [0, 100]) over ``axis``, like np.percentile:
    ``quantile`` of q / 100."""
    checked_quantiles(q, 100, "percentile")
    check_method(method, "percentile")
    return xp.percentile(x, q, axis=axis, keepdims=keepdims, method=method)


@primitive(REDUCE, positional=("x", "axis"))
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


@primitive(REDUCE, positional=("x", "q", "axis"))
def nanquantile(
    xp, x, q, axis=None, keepdims=False, method="linear", overwrite_input=False
):
    """``quantile`` of the entries that are not NaN, like np.nanquantile (NaN for
    an all-NaN slice); NaN entries get no gradient."""
    checked_quantiles(q, 1, "nanquantile")
    check_method(method, "nanquantile")
    if not hasattr(xp, "nanquantile"):  # (CuPy has none)
        return weighted_order_statistic(xp, x, q, axis, keepdims, method, 1)
    return xp.nanquantile(x, q, axis=axis, keepdims=keepdims, method=method)


@primitive(REDUCE, positional=("x", "q", "axis"))
def nanpercentile(
    xp, x, q, axis=None, keepdims=False, method="linear", overwrite_input=False
):
    """``percentile`` of the entries that are not NaN, like np.nanpercentile."""
    checked_quantiles(q, 100, "nanpercentile")
    check_method(method, "nanpercentile")
    if not hasattr(xp, "nanpercentile"):  # (CuPy has none)
        return weighted_order_statistic(xp, x, q, axis, keepdims, method, 100)
    return xp.nanpercentile(x, q, axis=axis, keepdims=keepdims, method=method)


def weighted_order_statistic(xp, x, q, axis, keepdims, method, per):
    """np.nanquantile of x (of q / per) as the sum of its weights times x, NaN for
    an all-NaN slice: for an array library without one."""
    weights = quantile_weights.impl(xp, x, q, axis, method, per, True)
    summed = tuple(np.ndim(q) + a for a in reduced_axes(x.ndim, axis))
    values = xp.where(xp.isnan(x), 0, x)
    total = xp.sum(weights * values, axis=summed, keepdims=keepdims)
    present = xp.sum(~xp.isnan(x), axis=axis, keepdims=keepdims)
    return xp.where(present > 0, total, xp.nan)


@primitive(REDUCE, positional=("x", "axis"))
def nanmedian(xp, x, axis=None, keepdims=False, overwrite_input=False):
    """``median`` of the entries that are not NaN, like np.nanmedian."""
    return xp.nanmedian(x, axis=axis, keepdims=keepdims)


@nanquantile.grad_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def backward(dY):
        weights = quantile_weights(x, q, axis, method, skip_nan=True)
        spread = unreduce(dY, weights, weights_axes(x, q, axis), keepdims)
        return reduce_sum(spread * weights, quantile_axes(q))

    return backward


@nanquantile.jvp_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def tangent(dx):
        weights = quantile_weights(x, q, axis, method, skip_nan=True)
        return reduce_sum(weights * dx, weights_axes(x, q, axis), keepdims)

    return tangent


@nanpercentile.grad_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def backward(dY):
        weights = quantile_weights(x, q, axis, method, 100, True)
        spread = unreduce(dY, weights, weights_axes(x, q, axis), keepdims)
        return reduce_sum(spread * weights, quantile_axes(q))

    return backward


@nanpercentile.jvp_rule
def _(x, q, axis=None, keepdims=False, method="linear", overwrite_input=False):
    def tangent(dx):
        weights = quantile_weights(x, q, axis, method, 100, True)
        return reduce_sum(weights * dx, weights_axes(x, q, axis), keepdims)

    return tangent


@nanmedian.grad_rule
def _(x, axis=None, keepdims=False, overwrite_input=False):
    def backward(dY):
        weights = quantile_weights(x, 0.5, axis, skip_nan=True)
        return unreduce(dY, x, axis, keepdims) * weights

    return backward


@nanmedian.jvp_rule
def _(x, axis=None, keepdims=False, overwrite_input=False):
    def tangent(dx):
        weights = quantile_weights(x, 0.5, axis, skip_nan=True)
        return reduce_sum(weights * dx, axis, keepdims)

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
def quantile_weights(xp, x, q, axis=None, method="linear", per=1, skip_nan=False):
    """How much each element of x counts in each quantile ``q`` / ``per`` over
    ``axis`` (per: 100 for percentiles), shaped q.shape + x.shape: the sum over
    axis of the weights times x is the quantile. The one or two order statistics
    ``method`` interpolates between take 1 - gamma and gamma; tied elements take
    their places in the order a stable sort gives them. With ``skip_nan``, the
    order statistics of the entries that are not NaN (none of an all-NaN slice)."""
    x = xp.asarray(x)  # (a differentiated Python float: a number, weak)
    axes = reduced_axes(x.ndim, axis)
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = xp.transpose(x, kept + list(axes))
    rows = xp.reshape(moved, moved.shape[: len(kept)] + (-1,))
    fractions = checked_quantiles(q, per, "quantile").reshape((-1,) + (1,) * len(kept))
    present = ~xp.isnan(rows) if skip_nan else xp.ones(rows.shape, dtype=bool)
    counts = xp.sum(present, axis=-1)  # (each slice's; NaN sorts last)
    below, above, gamma = interpolated_places(xp, counts, xp.asarray(fractions), method)
    places = xp.arange(rows.shape[-1])
    in_order = (places == below[..., None]) * (1 - gamma)[..., None] + (
        places == above[..., None]
    ) * gamma[..., None]
    in_order = in_order * (counts > 0)[..., None]
    stable = sorting_method(xp, "stable", None)
    ranks = xp.argsort(xp.argsort(rows, axis=-1, **stable), axis=-1, **stable)
    ranks = xp.broadcast_to(ranks, in_order.shape)
    weights = xp.take_along_axis(in_order.astype(x.dtype), ranks, axis=-1)
    weights = xp.reshape(weights, (-1, *moved.shape))
    back = np.argsort([0] + [1 + a for a in kept + list(axes)])
    return xp.reshape(xp.transpose(weights, tuple(back)), np.shape(q) + x.shape)


def interpolated_places(xp, count, fractions, method: str):
    """The places in sorted order below and above each quantile of ``count``
    elements (an array: one count per slice), and the weight gamma of the one
    above, as np.quantile finds them."""
    if method in ROUNDED:
        place = getattr(xp, ROUNDED[method])((count - 1) * fractions).astype(np.intp)
        return place, place, xp.zeros(place.shape)
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
