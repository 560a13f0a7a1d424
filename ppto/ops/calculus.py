"""Calculus on samples: the trapezoidal rule (``np.trapezoid``), derivatives by
finite differences (``np.gradient``) and polynomials' values (``np.polyval``).

A trapezoid's integral is bilinear in the samples y and their points x (the sum of
each pair's mean times its width), so its derivatives are sums of neighbours and
differences. A polynomial is linear in its coefficients, and its derivative in x is
the polynomial of the coefficients' derivative (np.polyder's), evaluated at x.
np.gradient is linear in its samples: its gradient is its adjoint, each
difference's weights sent back to the samples it reads, and that adjoint's is
np.gradient again.
"""

import numpy as np

from ppto.errors import PptoError, ShapeError
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

ANY = "(Tensor[...]) -> Tensor[...]"


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


# --- np.gradient -------------------------------------------------------------------


@primitive(ANY, tangent="linear")
def gradient(xp, f, spacing=1.0, axis=None, edge_order=1):
    """f's derivative along one axis from its samples, ``spacing`` apart (one
    number), like np.gradient(f, spacing, axis=axis, edge_order=edge_order):
    central differences inside, one-sided ones of first or second order
    (``edge_order``) at the ends; ``axis=None`` is f's only axis (np.gradient of
    an array of several gives several: ``gradients``)."""
    along = gradient_axis(f, axis)
    (step,) = gradient_spacings(spacing, 1)
    check_gradient(f, along, edge_order)
    return xp.gradient(f, step, axis=along, edge_order=edge_order)


@gradient.grad_rule
def _(f, spacing=1.0, axis=None, edge_order=1):
    def backward(dY):
        return gradient_adjoint(dY, spacing, gradient_axis(f, axis), edge_order)

    return backward


@primitive("(Tensor[...]) -> Tensor[...] tuple", tangent="linear")
def gradients(xp, f, spacing=1.0, axis=None, edge_order=1):
    """f's derivatives along each of ``axis`` (every axis when None), as a tuple,
    like np.gradient(f, *spacing, axis=axis) of several axes (NumPy's tuple, a
    list before NumPy 2):
    ``spacing`` one number for all, or one for each of those axes."""
    axes = gradient_axes(f, axis)
    steps = gradient_spacings(spacing, len(axes))
    for along in axes:
        check_gradient(f, along, edge_order)
    return tuple(
        xp.gradient(f, step, axis=along, edge_order=edge_order)
        for step, along in zip(steps, axes)
    )


@gradients.grad_rule
def _(f, spacing=1.0, axis=None, edge_order=1):
    def backward(dYs):
        axes = gradient_axes(f, axis)
        steps = gradient_steps(f, spacing, axis)
        total = gradient_adjoint(dYs[0], steps[0], axes[0], edge_order)
        for i in range(1, len(axes)):
            total = total + gradient_adjoint(dYs[i], steps[i], axes[i], edge_order)
        return total

    return backward


@primitive(ANY, tangent="linear")
def gradient_adjoint(xp, dY, spacing=1.0, axis=0, edge_order=1):
    """The adjoint of ``gradient`` along ``axis`` (each difference's weights sent
    back to the samples it reads): the gradient of np.gradient's result."""
    (spacing,) = gradient_spacings(spacing, 1)
    check_gradient(dY, axis, edge_order)
    along = xp.moveaxis(dY, axis, 0)
    out = xp.zeros(along.shape, dtype=along.dtype)
    inside = along[1:-1] / (2.0 * spacing)
    out[2:] += inside
    out[:-2] -= inside
    first, last = along[0] / spacing, along[-1] / spacing
    if edge_order == 1:
        out[1] += first
        out[0] -= first
        out[-1] += last
        out[-2] -= last
    else:
        for place, weight in zip((0, 1, 2), (-1.5, 2.0, -0.5)):
            out[place] += weight * first
        for place, weight in zip((-3, -2, -1), (0.5, -2.0, 1.5)):
            out[place] += weight * last
    return xp.moveaxis(out, 0, axis)


@gradient_adjoint.grad_rule
def _(dY, spacing=1.0, axis=0, edge_order=1):
    def backward(dZ):
        return gradient(dZ, spacing, axis, edge_order)

    return backward


@rank_helper("f")
def gradient_axis(f, axis):
    """The one axis ``gradient`` differentiates f along: ``axis`` (an int, or a
    tuple of one), f's only axis where it is None."""
    return gradient_axes(f, axis, one=True)[0]


@rank_helper("f")
def gradient_axes(f, axis, one=False):
    """The axes np.gradient differentiates f along, as a tuple: ``axis`` (an int or
    a tuple), every axis where it is None; ``one``: a single axis (``gradient``'s,
    whose None is f's only one)."""
    rank = rank_of(f)
    if axis is None:
        if one and rank != 1:
            raise ShapeError(
                f"np.gradient of an array of {rank} axes without axis= gives "
                f"{rank} arrays: in differentiated code write the axes out "
                f"(axis={tuple(range(rank))} for all {rank}, axis=k for one array)"
                if rank
                else "np.gradient of a 0-d array: NumPy refuses it too"
            )
        axes = tuple(range(rank))
    else:
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if one and len(axes) != 1:
        raise ShapeError(
            f"ppto.gradient takes one axis, got axis={axis}: ppto.gradients (the "
            "arrays np.gradient gives along several) takes several"
        )
    for along in axes:
        if not isinstance(along, (int, np.integer)) or not -rank <= along < rank:
            raise ShapeError(
                f"np.gradient along axis {along!r} of an array of {rank} axes: "
                f"give ints from {-rank} to {rank - 1}"
            )
    if len({along % rank for along in axes}) != len(axes):
        raise ShapeError(f"np.gradient along axis={axis}: an axis is repeated")
    return tuple(int(along) % rank for along in axes)


@rank_helper("f")
def gradient_steps(f, spacing, axis):
    """The spacing of np.gradient's samples along each axis it differentiates f
    along (see ``gradient_axes`` and ``gradient_spacings``)."""
    return gradient_spacings(spacing, len(gradient_axes(f, axis)))


def gradient_spacings(spacing, count) -> list:
    """The spacing of np.gradient's samples along each of ``count`` axes: one
    number for all, or one for each. Coordinates of the samples (an array, NumPy's
    other form) are refused."""
    steps = list(spacing) if isinstance(spacing, (tuple, list)) else [spacing]
    if len(steps) == 1:
        steps = steps * count
    if len(steps) != count:
        raise ShapeError(
            f"np.gradient takes one spacing for all axes or one for each: got "
            f"{len(steps)} for {count} axes"
        )
    for step in steps:
        if np.ndim(step) != 0:
            raise PptoError(
                "ppto's np.gradient takes its spacings as numbers: coordinates of "
                f"the samples (an array of shape {np.shape(step)}) are not supported; "
                "for points x, differentiate along the axis as np.diff(f) / "
                "np.diff(x) at the midpoints, or resample evenly"
            )
    return steps


def check_gradient(f, axis, edge_order) -> None:
    """NumPy's conditions: edge_order 1 or 2, and at least edge_order + 1 samples
    along ``axis``."""
    if edge_order not in (1, 2):
        raise PptoError(f"np.gradient's edge_order is 1 or 2, got {edge_order!r}")
    length = np.shape(f)[axis]
    if length < edge_order + 1:
        raise ShapeError(
            f"np.gradient of {length} sample(s) along axis {axis} with "
            f"edge_order={edge_order}: at least {edge_order + 1} are needed (NumPy "
            "refuses fewer too)"
        )
