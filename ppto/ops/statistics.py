"""Statistics over axes: reductions that skip NaN entries (``nansum`` ... ``nanstd``),
the range ``ptp``, and the covariance and correlation matrices (``cov``,
``corrcoef``). Order statistics are in ``ppto/ops/order.py``.

NaN entries get no gradient; tied extrema share theirs equally, as np.max's.
"""

import numpy as np

from ppto.errors import PptoError, ShapeError
from ppto.ops.elementwise import sqrt, where
from ppto.ops.linalg import diag, diagonal, outer
from ppto.ops.logic import isnan, logical_not
from ppto.ops.primitive import primitive
from ppto.ops.reductions import (
    extremum_rules,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_sum,
    unreduce,
)
from ppto.ops.rules import shape_helper
from ppto.ops.shape import (
    cast,
    expand_dims,
    matrix_transpose,
    reshape,
    transpose,
)

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


# np.cov and np.corrcoef read m as variables along rows, observations along columns:
# a 1-D m as one variable, a 2-D one transposed where rowvar is False. Their rules
# arrange m so (rows) and put the gradient back the same way.


def check_covariance_inputs(m, y, name: str) -> None:
    """1-D or 2-D m; y (a second set of variables) refused with the rewrite."""
    if y is not None:
        raise PptoError(
            f"ppto.{name} takes no second array y: stack the variables first, "
            f"np.{name}(np.vstack([m, y])) (np.{name}(np.hstack([m, y]), "
            "rowvar=False) for variables in columns), which NumPy computes the same"
        )
    if np.ndim(m) > 2:
        raise ShapeError(
            f"ppto.{name} takes a 1-D or 2-D array (variables and observations), "
            f"got one of shape {np.shape(m)}: reshape it to 2-D first"
        )


@primitive("(Tensor[...]) -> Tensor[...]")
def cov(xp, m, y=None, rowvar=True, bias=False, ddof=None):
    """The covariance matrix of the variables of m, like np.cov: each row a
    variable (a column where ``rowvar`` is False), the sums of products of
    deviations from the mean divided by the count less ``ddof`` (1 by default, 0
    where ``bias``); a number for one variable."""
    check_covariance_inputs(m, y, "cov")
    return xp.cov(m, rowvar=rowvar, bias=bias, ddof=ddof)


@cov.grad_rule
def _(m, y=None, rowvar=True, bias=False, ddof=None):
    def backward(dY):
        rows = reshape(
            transpose(m, variables_axes(m, rowvar)), variables_shape(m, rowvar)
        )
        centered = rows - reduce_mean(rows, 1, True)
        square = reshape(dY, covariance_shape(rows))
        drows = (square + matrix_transpose(square)) @ centered
        drows = drows / covariance_divisor(rows, bias, ddof)
        return transpose(reshape(drows, arranged(m, rowvar)), variables_axes(m, rowvar))

    return backward


@cov.jvp_rule
def _(m, y=None, rowvar=True, bias=False, ddof=None, out=None):
    def tangent(dm):
        rows = reshape(
            transpose(m, variables_axes(m, rowvar)), variables_shape(m, rowvar)
        )
        drows = reshape(
            transpose(dm, variables_axes(m, rowvar)), variables_shape(m, rowvar)
        )
        centered = rows - reduce_mean(rows, 1, True)
        product = (drows - reduce_mean(drows, 1, True)) @ matrix_transpose(centered)
        spread = product + matrix_transpose(product)
        return reshape(spread / covariance_divisor(rows, bias, ddof), np.shape(out))

    return tangent


@primitive("(Tensor[...]) -> Tensor[...]")
def corrcoef(xp, x, y=None, rowvar=True):
    """The correlation coefficients of the variables of x, like np.corrcoef:
    np.cov's matrix with each entry divided by the two variables' standard
    deviations (1 on the diagonal; a number for one variable)."""
    check_covariance_inputs(x, y, "corrcoef")
    return xp.corrcoef(x, rowvar=rowvar)


# R[i, j] = C[i, j] / (s[i] * s[j]), s = sqrt(diag(C)), for C the sums of products
# of deviations (the divisor cancels): the gradient in C is dR / (s s^T) less, on
# the diagonal, sum over j of dR[i, j] R[i, j] + dR[j, i] R[j, i] over 2 s[i]^2;
# then as np.cov's.


@corrcoef.grad_rule
def _(x, y=None, rowvar=True, out=None):
    def backward(dY):
        rows = reshape(
            transpose(x, variables_axes(x, rowvar)), variables_shape(x, rowvar)
        )
        centered = rows - reduce_mean(rows, 1, True)
        spread = sqrt(reduce_sum(centered * centered, 1))
        square = reshape(dY, covariance_shape(rows))
        weighted = square * reshape(out, covariance_shape(rows))
        through_spread = reduce_sum(weighted, 1) + reduce_sum(weighted, 0)
        dC = square / outer(spread, spread)
        dC = dC - diag(through_spread / (2.0 * spread * spread))
        drows = (dC + matrix_transpose(dC)) @ centered
        return transpose(reshape(drows, arranged(x, rowvar)), variables_axes(x, rowvar))

    return backward


@corrcoef.jvp_rule
def _(x, y=None, rowvar=True, out=None):
    def tangent(dx):
        rows = reshape(
            transpose(x, variables_axes(x, rowvar)), variables_shape(x, rowvar)
        )
        drows = reshape(
            transpose(dx, variables_axes(x, rowvar)), variables_shape(x, rowvar)
        )
        centered = rows - reduce_mean(rows, 1, True)
        spread = sqrt(reduce_sum(centered * centered, 1))
        product = (drows - reduce_mean(drows, 1, True)) @ matrix_transpose(centered)
        dC = product + matrix_transpose(product)
        # each variable's spread s moves by dC[i, i] / (2 s[i]), relatively:
        relative = diagonal(dC) / (2.0 * spread * spread)
        R = reshape(out, covariance_shape(rows))
        dR = dC / outer(spread, spread) - R * (
            expand_dims(relative, 1) + expand_dims(relative, 0)
        )
        return reshape(dR, np.shape(out))

    return tangent


@shape_helper
def variables_axes(m, rowvar):
    """The transposition that makes m's rows its variables (its own inverse):
    NumPy transposes a 2-D m where rowvar is False."""
    if np.ndim(m) == 2 and not rowvar:
        return (1, 0)
    return tuple(range(np.ndim(m)))


@shape_helper
def arranged(m, rowvar):
    """m's shape after ``variables_axes``."""
    return tuple(np.shape(m)[a] for a in variables_axes(m, rowvar))


@shape_helper
def variables_shape(m, rowvar):
    """(variables, observations) for m once arranged: a 1-D m is one variable."""
    return (1, -1) if np.ndim(m) < 2 else arranged(m, rowvar)


@shape_helper
def covariance_shape(rows):
    """The covariance matrix's shape for variables along ``rows``' rows."""
    count = np.shape(rows)[0]
    return (count, count)


@shape_helper
def covariance_divisor(rows, bias, ddof):
    """What np.cov divides the sums of products by: the observations less ddof
    (1 by default, 0 where bias)."""
    if ddof is None:
        ddof = 0 if bias else 1
    return np.shape(rows)[1] - ddof
