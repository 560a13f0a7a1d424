"""Signals: the discrete convolution and correlation of two 1-D arrays
(``np.convolve``, ``np.correlate``, modes full, same and valid), and piecewise
linear interpolation in a table (``np.interp``).

Convolution and correlation are bilinear (tangents derived). A mode's result is a
window of the full one, so a gradient puts dY back where its window sits (zeros
around it) and correlates it with the other input. An interpolation is
differentiable in the points x, the table's values fp and its points (``knots``,
NumPy's xp) alike.
"""

import numpy as np

from ppto.errors import PptoError, ShapeError
from ppto.ops.arrange import pad
from ppto.ops.elementwise import clip, where
from ppto.ops.indexing import index_add, take
from ppto.ops.logic import logical_and
from ppto.ops.primitive import primitive
from ppto.ops.rules import shape_helper
from ppto.ops.shape import cast, dtype_of, flip, zeros_like

SIGNALS = "(Tensor[N], Tensor[M]) -> Tensor[K]"
MODES = ("full", "same", "valid")


def check_mode(a, v, mode, name: str) -> None:
    """NumPy's modes (by name); empty inputs refused, as NumPy refuses them."""
    if mode not in MODES:
        raise PptoError(
            f"ppto.{name} takes mode='full', 'same' or 'valid', not {mode!r}"
        )
    if not (np.size(a) and np.size(v)):
        raise PptoError(f"ppto.{name} of an empty array: NumPy refuses it too")


@primitive(SIGNALS, tangent="bilinear")
def convolve(xp, a, v, mode="full"):
    """The discrete convolution of two 1-D arrays, like np.convolve: out[k] =
    sum over n of a[n] * v[k - n], all len(a) + len(v) - 1 of them ('full'), the
    middle max(len(a), len(v)) ('same') or those where the two overlap
    entirely ('valid')."""
    check_mode(a, v, mode, "convolve")
    return xp.convolve(a, v, mode=mode)


@convolve.grad_rule
def _(a, v, mode="full"):
    def backward(dY):
        # dY where it sits in the full convolution, correlated with the other input
        full = pad(dY, pad_width=full_window(a, v, mode), constant_values=0.0)
        return correlate(full, v, "valid"), correlate(full, a, "valid")

    return backward


@primitive(SIGNALS, tangent="bilinear")
def correlate(xp, a, v, mode="valid"):
    """The cross-correlation of two 1-D real arrays, like np.correlate: out[k] =
    sum over n of a[n + k] * v[n], NumPy's modes (its default: 'valid'); the
    convolution of a with v reversed."""
    check_mode(a, v, mode, "correlate")
    return xp.correlate(a, v, mode=mode)


@correlate.grad_rule
def _(a, v, mode="valid"):
    def backward(dY):
        full = pad(dY, pad_width=full_window(a, v, mode, True), constant_values=0.0)
        return convolve(full, v, "valid"), flip(correlate(full, a, "valid"))

    return backward


@shape_helper
def full_window(a, v, mode, correlation=False):
    """The pad widths that put a ``mode`` result of np.convolve (of np.correlate:
    ``correlation``) back where it sits in the full result (NumPy centres 'same'
    one place later for a correlation with the longer array second)."""
    n, m = np.shape(a)[0], np.shape(v)[0]
    full = n + m - 1
    if mode == "full":
        return ((0, 0),)
    if mode == "valid":
        before, length = min(n, m) - 1, abs(n - m) + 1
    else:  # (same)
        before, length = (min(n, m) - 1) // 2, max(n, m)
        if correlation and n < m:
            before = n // 2
    return ((before, full - length - before),)


@primitive("(Tensor[...], Tensor[N], Tensor[N]) -> Tensor[...]")
def interp(xp, x, knots, fp, left=None, right=None, period=None):
    """The piecewise linear function through the points (knots, fp) at x, like
    np.interp(x, xp, fp) (``knots`` increasing, as NumPy asks): ``left`` and
    ``right`` for x beyond the first and last knot (fp's first and last value
    when None). At a knot the gradient in x is the slope of the segment that
    starts there (of the last one at the last knot)."""
    if period is not None:
        raise PptoError(
            "ppto.interp takes no period=: reduce x modulo the period (x % period) "
            "and extend xp and fp by one point at each end, a period away"
        )
    if np.shape(knots)[0] < 2:
        raise ShapeError(
            f"ppto.interp needs at least 2 points to interpolate between, got "
            f"{np.shape(knots)[0]}: a one-point table is the constant fp[0]"
        )
    return xp.interp(x, knots, fp, left=left, right=right)


# Between knots k and k + 1 (the segment interp_segments finds), the result is
# fp[k] + slope * (x - knots[k]): its derivatives are the slope in x, (1 - share,
# share) in fp[k] and fp[k + 1], and -slope times those in the knots. Beyond the
# knots it is constant: fp's end value (covered), or left or right.


@interp.grad_rule
def _(x, knots, fp, left=None, right=None, period=None):
    def backward(dY):
        below = interp_segments(x, knots)
        start = take(knots, below)
        width = take(knots, below + 1) - start
        share = clip((x - start) / width, 0.0, 1.0)
        inside = logical_and(x >= knots[0], x <= knots[-1])
        slope = where(inside, (take(fp, below + 1) - take(fp, below)) / width, 0.0)
        reach = dY * cast(interp_covered(x, knots, left, right), dY.dtype)
        moved = dY * slope
        to_points = index_add(zeros_like(knots), -moved * (1.0 - share), (below,))
        to_values = index_add(zeros_like(fp), reach * (1.0 - share), (below,))
        return (
            moved,
            index_add(to_points, -moved * share, (below + 1,)),
            index_add(to_values, reach * share, (below + 1,)),
        )

    return backward


@interp.jvp_rule
def _(x, knots, fp, left=None, right=None, period=None):
    def tangent(dx, dknots, dfp):
        below = interp_segments(x, knots)
        start = take(knots, below)
        width = take(knots, below + 1) - start
        share = clip((x - start) / width, 0.0, 1.0)
        inside = logical_and(x >= knots[0], x <= knots[-1])
        slope = where(inside, (take(fp, below + 1) - take(fp, below)) / width, 0.0)
        covered = cast(interp_covered(x, knots, left, right), dtype_of(x))
        values = take(dfp, below) * (1.0 - share) + take(dfp, below + 1) * share
        points = take(dknots, below) * (1.0 - share) + take(dknots, below + 1) * share
        return slope * (dx - points) + covered * values

    return tangent


@primitive("(Tensor[...], Tensor[N]) -> Tensor[...]", differentiable=False)
def interp_segments(xp, x, knots):
    """For each of x, the segment of the knots it falls in (k: knots[k] <= x <
    knots[k + 1]), from 0 to len(knots) - 2: the first or last beyond either end."""
    found = xp.searchsorted(knots, x, side="right") - 1
    return xp.clip(found, 0, knots.shape[0] - 2)


@primitive("(Tensor[...], Tensor[N]) -> Tensor[...]", differentiable=False)
def interp_covered(xp, x, knots, left=None, right=None):
    """Whether np.interp's result at each x is read from fp: between the knots,
    or beyond one where no ``left`` (``right``) value replaces fp's end value."""
    covered = (x >= knots[0]) & (x <= knots[-1])
    if left is None:
        covered = covered | (x < knots[0])
    if right is None:
        covered = covered | (x > knots[-1])
    return covered
