"""Statistics over axes: reductions that skip NaN entries (``nansum`` ... ``nanstd``),
the range ``ptp``, and the covariance and correlation matrices (``cov``,
``corrcoef``). Order statistics are in ``ppto/ops/order.py``.

NaN entries get no gradient; tied extrema share theirs equally, as np.max's.
"""

import numpy as np

from ppto.errors import ShapeError
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
    dtype_of,
    expand_dims,
    matrix_transpose,
    reshape,
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
        count = reduce_sum(cast(present, dtype_of(x)), axis, keepdims)
        return where(present, unreduce(dY / count, x, axis, keepdims), 0.0)

    return backward


@nanmean.jvp_rule
def _(x, axis=None, keepdims=False):
    def tangent(dx):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, dtype_of(x)), axis, keepdims)
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
        count = reduce_sum(cast(present, dtype_of(x)), axis, True)
        mean = reduce_sum(where(present, x, 0.0), axis, True) / count
        # zero, not NaN, where x is NaN: a derivative of this rule multiplies
        # by it, and 0 * NaN is NaN (grad(grad) through nanstd was NaN)
        centered = where(present, x - mean, 0.0)
        scale = unreduce(dY, x, axis, keepdims) * 2.0 / (count - ddof)
        return scale * centered

    return backward


@nanvar.jvp_rule
def _(x, axis=None, keepdims=False, ddof=0):
    def tangent(dx):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, dtype_of(x)), axis, keepdims)
        mean = reduce_sum(where(present, x, 0.0), axis, True) / unreduce(
            count, x, axis, keepdims
        )
        centered = where(present, x - mean, 0.0)  # (as in the gradient rule)
        spread = reduce_sum(centered * dx, axis, keepdims)
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
        count = reduce_sum(cast(present, dtype_of(x)), axis, True)
        # shifted by the largest kept value: exactly 0 where the values kept are
        # all equal (their mean may be a rounding off them: as reduce_std's)
        shifted = x - nanmax(x, axis, True)
        mean = reduce_sum(where(present, shifted, 0.0), axis, True) / count
        # zero, not NaN, where x is NaN: a derivative of this rule multiplies
        # by it, and 0 * NaN is NaN (grad(grad) through nanstd was NaN)
        centered = where(present, shifted - mean, 0.0)
        # where the values kept are all equal, 0 (as reduce_std's), not 0 / 0
        spread = where(out == 0.0, 1.0, out)
        scale = unreduce(dY / spread, x, axis, keepdims) / (count - ddof)
        return scale * centered

    return backward


@nanstd.jvp_rule
def _(x, axis=None, keepdims=False, ddof=0, out=None):
    def tangent(dx):
        present = logical_not(isnan(x))
        count = reduce_sum(cast(present, dtype_of(x)), axis, keepdims)
        # shifted by the largest kept value, as in the gradient rule: centred
        # values exactly 0 where those kept are all equal, not a rounding's 1e-17
        # divided by a deviation as small
        shifted = x - nanmax(x, axis, True)
        mean = reduce_sum(where(present, shifted, 0.0), axis, True) / unreduce(
            count, x, axis, keepdims
        )
        centered = where(present, shifted - mean, 0.0)
        spread = reduce_sum(centered * dx, axis, keepdims)
        return spread / (where(out == 0.0, 1.0, out) * (count - ddof))

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
        to_top = dY / reduce_sum(cast(top, dtype_of(x)), axis, keepdims)
        to_bottom = dY / reduce_sum(cast(bottom, dtype_of(x)), axis, keepdims)
        return where(top, unreduce(to_top, x, axis, keepdims), 0.0) - where(
            bottom, unreduce(to_bottom, x, axis, keepdims), 0.0
        )

    return backward


@ptp.jvp_rule
def _(x, axis=None, keepdims=False):
    def tangent(dx):
        top = cast(x == reduce_max(x, axis, True), dtype_of(x))
        bottom = cast(x == reduce_min(x, axis, True), dtype_of(x))
        highest = reduce_sum(dx * top, axis, keepdims) / reduce_sum(top, axis, keepdims)
        lowest = reduce_sum(dx * bottom, axis, keepdims) / reduce_sum(
            bottom, axis, keepdims
        )
        return highest - lowest

    return tangent


# np.cov and np.corrcoef read m (and y) as variables along rows, observations along
# columns: a 1-D array as one variable, a 2-D m transposed where rowvar is False (a
# 2-D y too, unless of one row), y's variables after m's. ``variables`` arranges
# them so, ``split_variables`` puts rows back (its adjoint), so the rules below see
# one matrix of rows.


def check_covariance_inputs(m, y, name: str) -> None:
    """1-D or 2-D arrays, as NumPy takes them."""
    for array in (m, y):
        if np.ndim(array) > 2:
            raise ShapeError(
                f"ppto.{name} takes 1-D or 2-D arrays (variables and "
                f"observations), got one of shape {np.shape(array)}: reshape it "
                "to 2-D first"
            )


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]", tangent="linear")
def variables(xp, m, y=None, rowvar=True):
    """The variables of m and y as rows of one matrix, as np.cov reads them."""
    rows = [_rows(xp, m, rowvar, False)]
    if y is not None:
        rows.append(_rows(xp, y, rowvar, True))
    return xp.concatenate(rows, axis=0) if len(rows) > 1 else rows[0]


def _rows(xp, array, rowvar, second):
    arranged = xp.transpose(array, variables_axes(array, rowvar, second))
    return xp.reshape(arranged, (-1, arranged.shape[-1] if arranged.ndim else 1))


@variables.grad_rule
def _(m, y=None, rowvar=True):
    def backward(dY):
        parts = split_variables(dY, variables_layout(m, y, rowvar), rowvar)
        if y is None:
            return parts[0], None
        return parts[0], parts[1]

    return backward


@variables.jvp_rule
def _(m, y=None, rowvar=True):
    def tangent(dm, dy):
        if y is None:
            return variables(dm, None, rowvar)
        return variables(dm, dy, rowvar)

    return tangent


@shape_helper
def variables_layout(m, y, rowvar) -> tuple:
    """For each of m and y (where given): its shape, its rows in ``variables``'
    matrix and the transposition that arranged it."""
    layout, start = [], 0
    for array, second in ((m, False), (y, True)):
        if array is None:
            continue
        axes = variables_axes(array, rowvar, second)
        count = np.shape(array)[axes[0]] if np.ndim(array) == 2 else 1
        layout.append((tuple(np.shape(array)), start, start + count, axes))
        start += count
    return tuple(layout)


@primitive("(Tensor[...]) -> Tensor[...] tuple", tangent="linear")
def split_variables(xp, rows, layout, rowvar=True):
    """``variables``' matrix cut back into m and y (``layout``): its adjoint."""
    parts = []
    for shape, start, stop, axes in layout:
        arranged = tuple(shape[a] for a in axes)
        parts.append(xp.transpose(xp.reshape(rows[start:stop], arranged), axes))
    return tuple(parts)


@split_variables.grad_rule
def _(rows, layout, rowvar=True):
    def backward(dYs):
        if len(layout) == 1:
            return variables(dYs[0], None, rowvar)
        return variables(dYs[0], dYs[1], rowvar)

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]")
def cov(xp, m, y=None, rowvar=True, bias=False, ddof=None):
    """The covariance matrix of the variables of m (and y), like np.cov: each
    row a variable (a column where ``rowvar`` is False), the sums of products
    of deviations from the mean divided by the count less ``ddof`` (1 by
    default, 0 where ``bias``); a number for one variable."""
    check_covariance_inputs(m, y, "cov")
    return xp.cov(m, y, rowvar=rowvar, bias=bias, ddof=ddof)


@cov.grad_rule
def _(m, y=None, rowvar=True, bias=False, ddof=None):
    def backward(dY):
        rows = variables(m, y, rowvar)
        centered = rows - reduce_mean(rows, 1, True)
        square = reshape(dY, covariance_shape(rows))
        drows = (square + matrix_transpose(square)) @ centered
        drows = drows / covariance_divisor(rows, bias, ddof)
        parts = split_variables(drows, variables_layout(m, y, rowvar), rowvar)
        if y is None:
            return parts[0], None
        return parts[0], parts[1]

    return backward


@cov.jvp_rule
def _(m, y=None, rowvar=True, bias=False, ddof=None, out=None):
    def tangent(dm, dy):
        rows = variables(m, y, rowvar)
        drows = variables(dm, None, rowvar)
        if y is not None:
            drows = variables(dm, dy, rowvar)
        centered = rows - reduce_mean(rows, 1, True)
        product = (drows - reduce_mean(drows, 1, True)) @ matrix_transpose(centered)
        spread = product + matrix_transpose(product)
        return reshape(spread / covariance_divisor(rows, bias, ddof), np.shape(out))

    return tangent


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]")
def corrcoef(xp, x, y=None, rowvar=True):
    """The correlation coefficients of the variables of x (and y), like
    np.corrcoef: np.cov's matrix with each entry divided by the two variables'
    standard deviations (1 on the diagonal; a number for one variable)."""
    check_covariance_inputs(x, y, "corrcoef")
    return xp.corrcoef(x, y, rowvar=rowvar)


# R[i, j] = C[i, j] / (s[i] * s[j]), s = sqrt(diag(C)), for C the sums of products
# of deviations (the divisor cancels): the gradient in C is dR / (s s^T) less, on
# the diagonal, sum over j of dR[i, j] R[i, j] + dR[j, i] R[j, i] over 2 s[i]^2;
# then as np.cov's.


@corrcoef.grad_rule
def _(x, y=None, rowvar=True, out=None):
    def backward(dY):
        rows = variables(x, y, rowvar)
        centered = rows - reduce_mean(rows, 1, True)
        spread = sqrt(reduce_sum(centered * centered, 1))
        square = reshape(dY, covariance_shape(rows))
        weighted = square * reshape(out, covariance_shape(rows))
        through_spread = reduce_sum(weighted, 1) + reduce_sum(weighted, 0)
        dC = square / outer(spread, spread)
        dC = dC - diag(through_spread / (2.0 * spread * spread))
        drows = (dC + matrix_transpose(dC)) @ centered
        parts = split_variables(drows, variables_layout(x, y, rowvar), rowvar)
        if y is None:
            return parts[0], None
        return parts[0], parts[1]

    return backward


@corrcoef.jvp_rule
def _(x, y=None, rowvar=True, out=None):
    def tangent(dx, dy):
        rows = variables(x, y, rowvar)
        drows = variables(dx, None, rowvar)
        if y is not None:
            drows = variables(dx, dy, rowvar)
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
def variables_axes(m, rowvar, second=False):
    """The transposition that makes the rows of m (of y: ``second``) its variables
    (its own inverse): NumPy transposes a 2-D m where rowvar is False, a 2-D y
    only where it has more than one row."""
    if np.ndim(m) == 2 and not rowvar and not (second and np.shape(m)[0] == 1):
        return (1, 0)
    return tuple(range(np.ndim(m)))


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
