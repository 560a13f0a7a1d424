"""Calculus on samples: the trapezoidal rule (``np.trapezoid``) and polynomials'
values (``np.polyval``).

A trapezoid's integral is bilinear in the samples y and their points x (the sum of
each pair's mean times its width), so its derivatives are sums of neighbours and
differences. A polynomial is linear in its coefficients, and its derivative in x is
the polynomial of the coefficients' derivative (np.polyder's), evaluated at x.
"""

import numpy as np

from ppto.errors import ShapeError
from ppto.ops.arrange import diff, diff_padding, pad
from ppto.ops.indexing import getitem
from ppto.ops.linalg import dot
from ppto.ops.primitive import primitive
from ppto.ops.rules import rank_helper, rank_of, shape_helper
from ppto.ops.shape import (
    broadcast_to,
    dtype_of,
    expand_dims,
    flatten,
    reshape,
    unbroadcast,
)
from ppto.runtime.tensor import array_module


@primitive("(Tensor[...], Tensor[...]) -> Tensor[...]")
def trapezoid(xp, y, points=None, spacing=1.0, axis=-1):
    """The integral of the samples y along ``axis`` by the trapezoidal rule, like
    np.trapezoid(y, x, dx, axis): each pair of neighbours' mean times its width,
    summed; the widths are the differences of the ``points`` (NumPy's x: 1-D along
    ``axis``, or of y's shape), or ``spacing`` (NumPy's dx) where there are none.
    Differentiable in y and in the points."""
    if not y.ndim:
        raise ShapeError(
            "ppto.trapezoid of 0-d samples: integrate along an axis of an array "
            "of at least one (NumPy refuses a 0-d one too)"
        )
    widths = spacing
    if points is not None:
        widths = xp.diff(
            xp.reshape(points, trapezoid_points_shape(points, y, axis)), axis=axis
        )
    first, last = pair_ends(y, axis, "first"), pair_ends(y, axis, "last")
    # (NumPy's order of operations: the same value to the last bit)
    return xp.sum(widths * (y[last] + y[first]) / 2.0, axis=axis)


@trapezoid.grad_rule
def _(y, points=None, spacing=1.0, axis=-1):
    def backward(dY):
        # half of each width goes to either end of its pair; a width gets its
        # pair's mean, and a point the difference of its two widths'
        spread = expand_dims(dY, axis)
        if evenly_spaced(points):
            half = broadcast_to(spread * (0.5 * spacing), pairs_shape(y, axis))
            before = pad(half, pad_width=one_more(half, axis, True))
            return before + pad(half, pad_width=one_more(half, axis)), None
        aligned = reshape(points, trapezoid_points_shape(points, y, axis))
        widths = diff(aligned, axis=axis)
        half = spread * widths * 0.5
        before = pad(half, pad_width=one_more(half, axis, True))
        dy = unbroadcast(before + pad(half, pad_width=one_more(half, axis)), y)
        pairs = getitem(y, pair_ends(y, axis, "last")) + getitem(
            y, pair_ends(y, axis, "first")
        )
        dwidths = unbroadcast(spread * pairs * 0.5, widths)
        dpoints = -diff(
            pad(dwidths, pad_width=diff_padding(dwidths, 1, axis)), axis=axis
        )
        return dy, reshape(dpoints, np.shape(points))

    return backward


@trapezoid.jvp_rule
def _(y, points=None, spacing=1.0, axis=-1):
    def tangent(dy, dpoints):
        if evenly_spaced(points):
            return trapezoid(dy, spacing=spacing, axis=axis)
        return trapezoid(dy, points, axis=axis) + trapezoid(y, dpoints, axis=axis)

    return tangent


@rank_helper("points")
def evenly_spaced(points):
    """Whether np.trapezoid is given no points (None: its samples lie ``spacing``
    apart). Points have at least one axis (0-d ones are refused), so their rank
    tells, and where it is known when the rule is inlined, the branch is taken
    then."""
    return points is None or rank_of(points) == 0


@shape_helper
def trapezoid_points_shape(points, y, axis):
    """The shape np.trapezoid's points take against y: 1-D points lie along
    ``axis`` (one for each sample there), with 1 for y's other axes; others keep
    their own shape (they broadcast against y)."""
    shape, target = tuple(np.shape(points)), tuple(np.shape(y))
    if not target or not shape:
        raise ShapeError(
            f"ppto.trapezoid of samples of shape {target} at points of shape "
            f"{shape}: both need at least one axis (NumPy refuses 0-d ones too)"
        )
    if len(shape) != 1:
        return shape
    length = target[axis]
    if shape[0] != length:
        raise ShapeError(
            f"ppto.trapezoid: {shape[0]} points for {length} samples along axis "
            f"{axis} of y of shape {target}: give one point per sample (NumPy's x)"
        )
    aligned = [1] * len(target)
    aligned[axis] = length
    return tuple(aligned)


@shape_helper
def pairs_shape(y, axis):
    """The shape of y's pairs of neighbours along ``axis``: one fewer there."""
    shape = list(np.shape(y))
    shape[axis] = max(shape[axis] - 1, 0)
    return tuple(shape)


@rank_helper("x")
def pair_ends(x, axis, which):
    """The subscript of x along ``axis`` that takes each pair of neighbours'
    ``which`` end ('first': x[:-1], 'last': x[1:])."""
    part = slice(None, -1) if which == "first" else slice(1, None)
    return (slice(None),) * (axis % rank_of(x)) + (part,)


@rank_helper("x")
def one_more(x, axis, before=False):
    """One zero after (``before``: before) x along ``axis``, none elsewhere."""
    pairs = [(0, 0)] * rank_of(x)
    pairs[axis] = (1, 0) if before else (0, 1)
    return tuple(pairs)


@primitive("(Tensor[N], Tensor[...]) -> Tensor[...]")
def polyval(xp, p, x):
    """The polynomial with coefficients p (the highest power's first) at x, like
    np.polyval: p[0] * x ** (n - 1) + ... + p[n - 1], by Horner's scheme.
    Differentiable in p and x."""
    result = xp.zeros_like(x)
    for coefficient in p:  # (NumPy's order of operations: the same value)
        result = result * x + coefficient
    return result


@polyval.grad_rule
def _(p, x):
    def backward(dY):
        # a coefficient's gradient is dY times its power of x, summed over x; x's
        # is dY times the slope, the polynomial of p's derivative
        powers = expand_dims(flatten(x), 1) ** polyval_degrees(p)
        slopes = getitem(p, slice(None, -1)) * polyval_degrees(p, True)
        return dot(flatten(dY), powers), dY * polyval(slopes, x)

    return backward


@polyval.jvp_rule
def _(p, x):
    def tangent(dp, dx):
        slopes = getitem(p, slice(None, -1)) * polyval_degrees(p, True)
        return polyval(dp, x) + polyval(slopes, x) * dx

    return tangent


@shape_helper
def polyval_degrees(p, slopes=False):
    """The powers of x that p's coefficients multiply, highest first (n - 1 down
    to 0), as floats; ``slopes``: those of all but the last, the factors of
    np.polyder(p)."""
    n = np.shape(p)[0]
    xp = array_module(p)
    return xp.arange(n - 1, 0 if slopes else -1, -1, dtype=dtype_of(p))
