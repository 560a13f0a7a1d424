"""Comparisons, logical operators and piecewise-constant functions.

None of these is differentiable: their results are booleans or change only in jumps.
They serve as conditions and masks; asking for a gradient through one raises
``GradError``.
"""

from ppto.ops.primitive import primitive

BINARY = "(Tensor[...], Tensor[...]) -> Tensor[...]"
UNARY = "(Tensor[...]) -> Tensor[...]"
binary = primitive(BINARY, mode="broadcast", differentiable=False, keeps_layout=True)
unary = primitive(UNARY, mode="broadcast", differentiable=False, keeps_layout=True)


@binary
def greater(xp, a, b):
    """A > b, elementwise."""
    return xp.greater(a, b)


@binary
def greater_equal(xp, a, b):
    """A >= b, elementwise."""
    return xp.greater_equal(a, b)


@binary
def less(xp, a, b):
    """A < b, elementwise."""
    return xp.less(a, b)


@binary
def less_equal(xp, a, b):
    """A <= b, elementwise."""
    return xp.less_equal(a, b)


@binary
def equal(xp, a, b):
    """A == b, elementwise."""
    return xp.equal(a, b)


@binary
def not_equal(xp, a, b):
    """A != b, elementwise."""
    return xp.not_equal(a, b)


@binary
def logical_and(xp, a, b):
    """A and b, elementwise."""
    return xp.logical_and(a, b)


@binary
def logical_or(xp, a, b):
    """A or b, elementwise."""
    return xp.logical_or(a, b)


@binary
def logical_xor(xp, a, b):
    """A xor b, elementwise."""
    return xp.logical_xor(a, b)


@unary
def logical_not(xp, x):
    """Not x, elementwise."""
    return xp.logical_not(x)


@unary
def isfinite(xp, x):
    """Whether x is neither inf nor nan, elementwise."""
    return xp.isfinite(x)


@unary
def isnan(xp, x):
    """Whether x is nan, elementwise (the entries np.nansum and its kin skip)."""
    return xp.isnan(x)


@unary
def sign(xp, x):
    """-1, 0 or 1 by the sign of x, elementwise."""
    return xp.sign(x)


@binary
def heaviside(xp, x, h0):
    """The step function: 0 where x < 0, h0 where x is 0, 1 where x > 0, like
    np.heaviside (its jumps leave no derivative)."""
    return xp.heaviside(x, h0)


@binary
def floor_divide(xp, a, b):
    """a // b, elementwise: floor(a / b)."""
    return xp.floor_divide(a, b)


@unary
def floor(xp, x):
    """The largest integer <= x, elementwise."""
    return xp.floor(x)


@unary
def ceil(xp, x):
    """The smallest integer >= x, elementwise."""
    return xp.ceil(x)


@unary
def round(xp, x, decimals=0):
    """Round x to ``decimals`` places (half to even), elementwise, like np.round."""
    return xp.round(x, decimals)
