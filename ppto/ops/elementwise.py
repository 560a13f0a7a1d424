"""Elementwise operators: arithmetic, transcendental functions, activations, selection.

Binary operators broadcast like NumPy; their gradients are reduced back to each input's
shape by ``unbroadcast``. Unary operators have diagonal (so symmetric) Jacobians:
their tangent rules are derived from the backward rules.
"""

import numpy as np

from ppto.errors import PptoError, ShapeError
from ppto.ops.logic import (
    floor_divide,
    isfinite,
    isnan,
    logical_and,
    logical_not,
    logical_or,
    sign,
)
from ppto.ops.primitive import primitive
from ppto.ops.rules import shape_helper
from ppto.ops.shape import (
    array,
    asarray,
    cast,
    dtype_of,
    floating,
    full_like,
    reshape,
    unbroadcast,
    zeros_like,
)

UNARY = "(Tensor[...]) -> Tensor[...]"
BINARY = "(Tensor[...], Tensor[...]) -> Tensor[...]"
TERNARY = "(Tensor[...], Tensor[...], Tensor[...]) -> Tensor[...]"


def unary(**options):
    options.setdefault("tangent", "symmetric")
    return primitive(UNARY, mode="broadcast", keeps_layout=True, **options)


def binary(**options):
    return primitive(BINARY, mode="broadcast", keeps_layout=True, **options)


# --- arithmetic -------------------------------------------------------------------


@binary(tangent="linear")
def add(xp, a, b):
    """a + b, broadcasting."""
    return xp.add(a, b)


@add.grad_rule
def _(a, b):
    def backward(dY):
        return unbroadcast(dY, a), unbroadcast(dY, b)

    return backward


@binary(tangent="linear")
def sub(xp, a, b):
    """a - b, broadcasting."""
    return xp.subtract(a, b)


@sub.grad_rule
def _(a, b):
    def backward(dY):
        # negated after summing: a broadcast b (x - row maxima) sums the full-size
        # dY once, not a negated copy of it (sums of negations are exact negations)
        return unbroadcast(dY, a), -unbroadcast(dY, b)

    return backward


@binary(tangent="bilinear")
def mul(xp, a, b):
    """a * b, broadcasting."""
    return xp.multiply(a, b)


@mul.grad_rule
def _(a, b):
    def backward(dY):
        return unbroadcast(dY * b, a), unbroadcast(dY * a, b)

    return backward


@binary()
def div(xp, a, b):
    """a / b, broadcasting (true division)."""
    return xp.true_divide(a, b)


@div.grad_rule
def _(a, b, out):
    def backward(dY):
        # divided after summing: a broadcast b (e / row sums) costs one full-size
        # product and its sum, the division and negation are at b's size
        return unbroadcast(dY / b, a), -unbroadcast(dY * out, b) / b

    return backward


@div.jvp_rule
def _(a, b, out):
    def tangent(da, db):
        return (da - out * db) / b

    return tangent


@unary(tangent="linear")
def neg(xp, x):
    """-x."""
    return xp.negative(x)


@neg.grad_rule
def _(x):
    def backward(dY):
        return -dY

    return backward


@binary()
def pow(xp, a, b):
    """a ** b, broadcasting."""
    return xp.power(a, b)


# d/da a ** b = b * a ** (b - 1), with the exponent 1 where a and b are 0: a ** 0
# is 1 everywhere, and 0 * 0 ** -1 would be NaN (elsewhere the exponent is b - 1,
# whose derivative in b a second derivative needs). A constant b decides the
# outer where when the rule is inlined: x ** 3 gives 3 * x ** 2.
@pow.grad_rule
def _(a, b, out):
    def backward(dY):
        log_a = log(where(a == 0, 1, a))
        return (
            unbroadcast(dY * b * a ** where(b == 0, where(a == 0, 1, b - 1), b - 1), a),
            unbroadcast(dY * out * log_a, b),
        )

    return backward


@pow.jvp_rule
def _(a, b, out):
    def tangent(da, db):
        # log(a) is NaN for a < 0 (where a ** b has no derivative in b): a zero
        # change of b (a constant exponent's zero tangent) must add 0, not NaN
        by_exponent = where(db == 0, 0.0, db * out * log(where(a == 0, 1, a)))
        return da * b * a ** where(b == 0, where(a == 0, 1, b - 1), b - 1) + by_exponent

    return tangent


@unary()
def square(xp, x):
    """x ** 2."""
    return xp.square(x)


@square.grad_rule
def _(x):
    def backward(dY):
        return dY * 2 * x

    return backward


@unary()
def reciprocal(xp, x):
    """1 / x (``np.reciprocal``; of integers, NumPy's integer result)."""
    return xp.reciprocal(x)


@reciprocal.grad_rule
def _(x, out):
    def backward(dY):
        return -dY * out * out

    return backward


@unary()
def cbrt(xp, x):
    """Cube root, real for negative x too (``np.cbrt``)."""
    return xp.cbrt(x)


@cbrt.grad_rule
def _(x, out):
    def backward(dY):
        return dY / (3 * out * out)

    return backward


@unary()
def sqrt(xp, x):
    """Square root."""
    return xp.sqrt(x)


@sqrt.grad_rule
def _(x, out):
    def backward(dY):
        return dY / (2 * out)

    return backward


@unary()
def abs(xp, x):
    """|x| (its gradient is sign(x): 0 at 0, as JAX's and PyTorch's)."""
    return xp.abs(x)


@abs.grad_rule
def _(x):
    def backward(dY):
        return dY * sign(x)

    return backward


# --- exponentials and logarithms --------------------------------------------------


@unary()
def exp(xp, x):
    """e ** x."""
    return xp.exp(x)


@exp.grad_rule
def _(x, out):
    def backward(dY):
        return dY * out

    return backward


@unary()
def log(xp, x):
    """Natural logarithm."""
    return xp.log(x)


@log.grad_rule
def _(x):
    def backward(dY):
        return dY / x

    return backward


@unary()
def log1p(xp, x):
    """log(1 + x), accurate near 0."""
    return xp.log1p(x)


@log1p.grad_rule
def _(x):
    def backward(dY):
        return dY / (1 + x)

    return backward


@unary()
def expm1(xp, x):
    """exp(x) - 1, accurate near 0."""
    return xp.expm1(x)


@expm1.grad_rule
def _(x, out):
    def backward(dY):
        return dY * (out + 1)

    return backward


LN2 = 0.6931471805599453  # log(2)
LN10 = 2.302585092994046  # log(10)


@unary()
def exp2(xp, x):
    """2 ** x."""
    return xp.exp2(x)


@exp2.grad_rule
def _(x, out):
    def backward(dY):
        return dY * out * LN2

    return backward


@unary()
def log2(xp, x):
    """Base-2 logarithm."""
    return xp.log2(x)


@log2.grad_rule
def _(x):
    def backward(dY):
        return dY / (x * LN2)

    return backward


@unary()
def log10(xp, x):
    """Base-10 logarithm."""
    return xp.log10(x)


@log10.grad_rule
def _(x):
    def backward(dY):
        return dY / (x * LN10)

    return backward


# --- trigonometric and hyperbolic -------------------------------------------------


@unary()
def sin(xp, x):
    """Sine."""
    return xp.sin(x)


@sin.grad_rule
def _(x):
    def backward(dY):
        return dY * cos(x)

    return backward


@unary()
def cos(xp, x):
    """Cosine."""
    return xp.cos(x)


@cos.grad_rule
def _(x):
    def backward(dY):
        return -dY * sin(x)

    return backward


@unary()
def tan(xp, x):
    """Tangent."""
    return xp.tan(x)


@tan.grad_rule
def _(x, out):
    def backward(dY):
        return dY * (1 + out * out)

    return backward


@unary()
def tanh(xp, x):
    """Hyperbolic tangent."""
    return xp.tanh(x)


@tanh.grad_rule
def _(x, out):
    def backward(dY):
        return dY * (1 - out * out)

    return backward


@unary()
def sinh(xp, x):
    """Hyperbolic sine."""
    return xp.sinh(x)


@sinh.grad_rule
def _(x):
    def backward(dY):
        return dY * cosh(x)

    return backward


@unary()
def cosh(xp, x):
    """Hyperbolic cosine."""
    return xp.cosh(x)


@cosh.grad_rule
def _(x):
    def backward(dY):
        return dY * sinh(x)

    return backward


@unary()
def arcsin(xp, x):
    """Inverse sine, for |x| < 1."""
    return xp.arcsin(x)


@arcsin.grad_rule
def _(x):
    def backward(dY):
        return dY / sqrt(1 - x * x)

    return backward


@unary()
def arccos(xp, x):
    """Inverse cosine, for |x| < 1."""
    return xp.arccos(x)


@arccos.grad_rule
def _(x):
    def backward(dY):
        return -dY / sqrt(1 - x * x)

    return backward


@unary()
def arctan(xp, x):
    """Inverse tangent."""
    return xp.arctan(x)


@arctan.grad_rule
def _(x):
    def backward(dY):
        return dY / (1 + x * x)

    return backward


@unary()
def arcsinh(xp, x):
    """Inverse hyperbolic sine."""
    return xp.arcsinh(x)


@arcsinh.grad_rule
def _(x):
    def backward(dY):
        return dY / sqrt(x * x + 1)

    return backward


@unary()
def arccosh(xp, x):
    """Inverse hyperbolic cosine, for x > 1."""
    return xp.arccosh(x)


@arccosh.grad_rule
def _(x):
    def backward(dY):
        return dY / sqrt(x * x - 1)

    return backward


@unary()
def arctanh(xp, x):
    """Inverse hyperbolic tangent, for |x| < 1."""
    return xp.arctanh(x)


@arctanh.grad_rule
def _(x):
    def backward(dY):
        return dY / (1 - x * x)

    return backward


DEGREES_PER_RADIAN = 180.0 / np.pi


@unary(tangent="linear")
def deg2rad(xp, x):
    """Degrees to radians (np.deg2rad, np.radians)."""
    return xp.deg2rad(x)


@deg2rad.grad_rule
def _(x):
    def backward(dY):
        return dY / DEGREES_PER_RADIAN

    return backward


@unary(tangent="linear")
def rad2deg(xp, x):
    """Radians to degrees (np.rad2deg, np.degrees)."""
    return xp.rad2deg(x)


@rad2deg.grad_rule
def _(x):
    def backward(dY):
        return dY * DEGREES_PER_RADIAN

    return backward


@binary()
def arctan2(xp, y, x):
    """The angle of the point (x, y) from the x axis, in (-pi, pi], broadcasting
    (``np.arctan2(y, x)``)."""
    return xp.arctan2(y, x)


@arctan2.grad_rule
def _(y, x):
    def backward(dY):
        # d angle = (x dy - y dx) / (x^2 + y^2); undefined at the origin (NaN there)
        scale = dY / (x * x + y * y)
        return unbroadcast(scale * x, y), unbroadcast(-scale * y, x)

    return backward


@arctan2.jvp_rule
def _(y, x):
    def tangent(dy, dx):
        return (x * dy - y * dx) / (x * x + y * y)

    return tangent


@binary()
def hypot(xp, a, b):
    """sqrt(a ** 2 + b ** 2), broadcasting, without overflow (``np.hypot``)."""
    return xp.hypot(a, b)


@hypot.grad_rule
def _(a, b, out):
    def backward(dY):
        # at a = b = 0 (no derivative) the gradient is taken as 0, not 0 / 0
        scale = dY / where(out == 0, 1.0, out)
        return unbroadcast(scale * a, a), unbroadcast(scale * b, b)

    return backward


@hypot.jvp_rule
def _(a, b, out):
    def tangent(da, db):
        return (a * da + b * db) / where(out == 0, 1.0, out)

    return tangent


# --- activations ------------------------------------------------------------------


@unary()
def sigmoid(xp, x):
    """1 / (1 + exp(-x)), computed without overflow as (tanh(x/2) + 1) / 2."""
    return 0.5 * (xp.tanh(0.5 * x) + 1)


@sigmoid.grad_rule
def _(x, out):
    def backward(dY):
        return dY * out * (1 - out)

    return backward


@unary()
def relu(xp, x):
    """max(x, 0); the gradient at 0 is 0."""
    return xp.maximum(x, 0)


@relu.grad_rule
def _(x):
    def backward(dY):
        return where(x > 0, dY, 0.0)

    return backward


@unary()
def leaky_relu(xp, x, negative_slope=0.01):
    """x where x > 0, else negative_slope * x."""
    return xp.where(x > 0, x, x * negative_slope)


@leaky_relu.grad_rule
def _(x, negative_slope=0.01):
    def backward(dY):
        return where(x > 0, dY, dY * negative_slope)

    return backward


@unary()
def elu(xp, x, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, 0)))


@elu.grad_rule
def _(x, alpha=1.0, out=None):
    def backward(dY):
        return where(x > 0, dY, dY * (out + alpha))

    return backward


@unary()
def softplus(xp, x):
    """log(1 + exp(x)), computed without overflow."""
    return xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(x, 0)


@softplus.grad_rule
def _(x):
    def backward(dY):
        return dY * sigmoid(x)

    return backward


@binary()
def logaddexp(xp, a, b):
    """log(exp(a) + exp(b)), broadcasting, computed without overflow
    (``np.logaddexp(0, -z)`` is the logistic loss)."""
    return xp.logaddexp(a, b)


@logaddexp.grad_rule
def _(a, b, out):
    def backward(dY):
        # each input's share of the sum, exp(a) / (exp(a) + exp(b)), is at most 1
        return unbroadcast(dY * exp(a - out), a), unbroadcast(dY * exp(b - out), b)

    return backward


@logaddexp.jvp_rule
def _(a, b, out):
    def tangent(da, db):
        return da * exp(a - out) + db * exp(b - out)

    return tangent


@binary()
def logaddexp2(xp, a, b):
    """log2(2**a + 2**b), broadcasting, computed without overflow (np.logaddexp2:
    sums of probabilities held as their base-2 logarithms)."""
    return xp.logaddexp2(a, b)


@logaddexp2.grad_rule
def _(a, b, out):
    def backward(dY):
        # each input's share of the sum, 2**a / (2**a + 2**b), is at most 1
        return unbroadcast(dY * exp2(a - out), a), unbroadcast(dY * exp2(b - out), b)

    return backward


@logaddexp2.jvp_rule
def _(a, b, out):
    def tangent(da, db):
        return da * exp2(a - out) + db * exp2(b - out)

    return tangent


GELU_SCALE = 0.7978845608028654  # sqrt(2 / pi)
GELU_CUBIC = 0.044715


@unary()
def gelu(xp, x):
    """Gaussian error linear unit, tanh approximation (as jax.nn.gelu's default)."""
    return 0.5 * x * (1 + xp.tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x)))


@gelu.grad_rule
def _(x):
    def backward(dY):
        t = tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x))
        slope = GELU_SCALE * (1 + 3 * GELU_CUBIC * x * x)
        return dY * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * slope)

    return backward


@unary()
def nan_to_num(xp, x, copy=True, nan=0.0, posinf=None, neginf=None):
    """x with NaN, inf and -inf replaced by numbers (``nan``; the largest finite
    numbers, or ``posinf`` and ``neginf``), like np.nan_to_num; the entries replaced
    get no gradient. Always a new array: ``copy=False`` (NumPy's writing into x)
    is refused."""
    if not copy:
        raise PptoError(
            "ppto.nan_to_num makes a new array: copy=False would write into x, "
            "which ppto's operators never do; write y = np.nan_to_num(x)"
        )
    return xp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


@nan_to_num.grad_rule
def _(x, copy=True, nan=0.0, posinf=None, neginf=None):
    def backward(dY):
        return where(isfinite(x), dY, 0.0)

    return backward


# --- selection --------------------------------------------------------------------


@binary()
def maximum(xp, a, b):
    """Elementwise maximum; a tie splits the gradient evenly between a and b."""
    return xp.maximum(a, b)


# A tie (a == b) gives each operand half the gradient, as JAX's and PyTorch's
# maximum and minimum do, and as np.max does among tied elements: kinks that cancel
# then cancel in the derivative too. Sending it all to a made max(z, 0) + min(z, 0),
# which is z, slope 2 at 0, and the stable logistic loss max(z, 0) - z * y +
# log1p(exp(-abs(z))) slope 1 - y at z = 0 where it is 0.5 - y.


@maximum.grad_rule
def _(a, b):
    def backward(dY):
        tied = where(a == b, 0.5 * dY, 0.0)
        return unbroadcast(where(a > b, dY, tied), a), unbroadcast(
            where(b > a, dY, tied), b
        )

    return backward


@maximum.jvp_rule
def _(a, b):
    def tangent(da, db):
        return where(a > b, da, where(b > a, db, 0.5 * (da + db)))

    return tangent


@binary()
def fmax(xp, a, b):
    """Elementwise maximum that skips NaN (the other operand where one is NaN, as
    np.fmax); a tie splits the gradient evenly."""
    return xp.fmax(a, b)


@fmax.grad_rule
def _(a, b):
    def backward(dY):
        # a NaN is skipped (both NaN: a's); a tie splits, as maximum's
        to_b = logical_or(b > a, logical_and(isnan(a), logical_not(isnan(b))))
        tied = where(a == b, 0.5 * dY, 0.0)
        return unbroadcast(
            where(logical_or(a > b, isnan(b)), dY, tied), a
        ), unbroadcast(where(to_b, dY, tied), b)

    return backward


@fmax.jvp_rule
def _(a, b):
    def tangent(da, db):
        to_b = logical_or(b > a, logical_and(isnan(a), logical_not(isnan(b))))
        to_a = logical_or(a > b, isnan(b))
        return where(to_a, da, where(to_b, db, 0.5 * (da + db)))

    return tangent


@binary()
def fmin(xp, a, b):
    """Elementwise minimum that skips NaN (the other operand where one is NaN, as
    np.fmin); a tie splits the gradient evenly."""
    return xp.fmin(a, b)


@fmin.grad_rule
def _(a, b):
    def backward(dY):
        # a NaN is skipped (both NaN: a's); a tie splits, as maximum's
        to_b = logical_or(b < a, logical_and(isnan(a), logical_not(isnan(b))))
        tied = where(a == b, 0.5 * dY, 0.0)
        return unbroadcast(
            where(logical_or(a < b, isnan(b)), dY, tied), a
        ), unbroadcast(where(to_b, dY, tied), b)

    return backward


@fmin.jvp_rule
def _(a, b):
    def tangent(da, db):
        to_b = logical_or(b < a, logical_and(isnan(a), logical_not(isnan(b))))
        to_a = logical_or(a < b, isnan(b))
        return where(to_a, da, where(to_b, db, 0.5 * (da + db)))

    return tangent


@binary()
def minimum(xp, a, b):
    """Elementwise minimum; a tie splits the gradient evenly (see maximum's rule)."""
    return xp.minimum(a, b)


@minimum.grad_rule
def _(a, b):
    def backward(dY):
        tied = where(a == b, 0.5 * dY, 0.0)
        return unbroadcast(where(a < b, dY, tied), a), unbroadcast(
            where(b < a, dY, tied), b
        )

    return backward


@minimum.jvp_rule
def _(a, b):
    def tangent(da, db):
        return where(a < b, da, where(b < a, db, 0.5 * (da + db)))

    return tangent


@binary()
def remainder(xp, a, b):
    """a % b, elementwise, with the sign of b (as in Python and NumPy):
    a - b * (a // b)."""
    return xp.remainder(a, b)


@remainder.grad_rule
def _(a, b):
    def backward(dY):
        return unbroadcast(dY, a), unbroadcast(-dY * floor_divide(a, b), b)

    return backward


@remainder.jvp_rule
def _(a, b):
    def tangent(da, db):
        return da - db * floor_divide(a, b)

    return tangent


@binary()
def fmod(xp, a, b):
    """a - b * trunc(a / b), elementwise, with the sign of a (C's fmod,
    ``np.fmod``; ``%`` takes the sign of b)."""
    return xp.fmod(a, b)


@fmod.grad_rule
def _(a, b, out):
    def backward(dY):
        # (a - out) / b is the whole number of b's taken away; as an expression of
        # out it is constant, so its own derivatives (second order) are right too
        return unbroadcast(dY, a), unbroadcast(-dY * ((a - out) / b), b)

    return backward


@fmod.jvp_rule
def _(a, b, out):
    def tangent(da, db):
        return da - db * ((a - out) / b)

    return tangent


@primitive(TERNARY, mode="broadcast", keeps_layout=True, nondiff=("condition",))
def where(xp, condition, a, b):
    """a where condition holds, else b (condition is not differentiated)."""
    return xp.where(condition, a, b)


@where.grad_rule
def _(condition, a, b):
    def backward(dY):
        return (
            None,
            unbroadcast(where(condition, dY, 0.0), a),
            unbroadcast(where(condition, 0.0, dY), b),
        )

    return backward


@where.jvp_rule
def _(condition, a, b):
    def tangent(dcondition, da, db):
        return where(condition, da, db)

    return tangent


@primitive(
    "([Tensor[...]], [Tensor[...]], Tensor[...]) -> Tensor[...]",
    nondiff=("condlist",),
)
def select(xp, condlist, choicelist, default=0):
    """Elementwise, the first choice whose condition holds, else ``default``, like
    np.select (conditions, choices and default broadcast together; conditions
    are not differentiated)."""
    return xp.select(list(condlist), list(choicelist), default)


@select.grad_rule
def _(condlist, choicelist, default=0):
    def backward(dY):
        taken = zeros_like(dY) != 0  # (where an earlier condition held)
        gradients = []
        for i in range(len(choicelist)):
            here = logical_and(condlist[i], logical_not(taken))
            gradients.append(unbroadcast(where(here, dY, 0.0), choicelist[i]))
            taken = logical_or(taken, condlist[i])
        return None, gradients, unbroadcast(where(taken, 0.0, dY), default)

    return backward


@select.jvp_rule
def _(condlist, choicelist, default=0):
    def tangent(dcondlist, dchoicelist, ddefault):
        return select(condlist, dchoicelist, ddefault)

    return tangent


# Results in whole numbers carry no derivative: a cast to them, or a fill cut to
# them. ``where`` (not a product with the flag, which turns an infinite derivative
# into NaN) picks zero there; where the dtype is known when the code is generated,
# the choice is made then.


# np.asarray and np.array: the values themselves, unless made whole numbers


@asarray.grad_rule
def _(x, dtype=None, out=None):
    def backward(dY):
        if dtype is None:
            return dY
        return where(floating(out), dY, 0.0)

    return backward


@asarray.jvp_rule
def _(x, dtype=None, out=None):
    def tangent(dx):
        if dtype is None:
            return asarray(dx)
        return where(floating(out), asarray(dx, out.dtype), 0.0)

    return tangent


@array.grad_rule
def _(x, dtype=None, copy=True, out=None):
    def backward(dY):
        if dtype is None:
            return dY
        return where(floating(out), dY, 0.0)

    return backward


@array.jvp_rule
def _(x, dtype=None, copy=True, out=None):
    def tangent(dx):
        if dtype is None:
            return asarray(dx)
        return where(floating(out), asarray(dx, out.dtype), 0.0)

    return tangent


@cast.grad_rule
def _(x, dtype, out=None):
    def backward(dY):
        return where(floating(out), cast(dY, dtype_of(x)), 0.0)

    return backward


@cast.jvp_rule
def _(x, dtype, out=None):
    def tangent(dx):
        return where(floating(out), cast(dx, dtype), 0.0)

    return tangent


@full_like.grad_rule
def _(x, fill_value, dtype=None, out=None):
    def backward(dY):
        return None, where(floating(out), unbroadcast(dY, fill_value), 0.0)

    return backward


@full_like.jvp_rule
def _(x, fill_value, dtype=None, out=None):
    def tangent(dx, dfill):
        return where(floating(out), full_like(out, dfill), 0.0)

    return tangent


@unary()
def clip(xp, x, lo=None, hi=None):
    """x limited to [lo, hi]; either bound may be None, a number or an array
    that broadcasts to x's shape."""
    widened = np.broadcast_shapes(np.shape(x), np.shape(lo), np.shape(hi))
    if widened != np.shape(x):  # (its result and gradient have x's shape)
        raise ShapeError(
            f"ppto.clip: bounds of shapes {np.shape(lo)} and {np.shape(hi)} widen x "
            f"of shape {np.shape(x)} to {widened}: broadcast x first, "
            f"np.clip(np.broadcast_to(x, {widened}), lo, hi)"
        )
    return xp.clip(x, lo, hi)


@clip.grad_rule
def _(x, lo=None, hi=None, out=None):
    def backward(dY):
        return where(out == x, dY, 0.0)

    return backward


# x is nondifferentiable so that activity analysis sees a constant result and no
# adjoint flows back into what computed x.
@unary(tangent="", nondiff=("x",))
def stop_gradient(xp, x):
    """x, treated as a constant by differentiation."""
    return x


@stop_gradient.grad_rule
def _(x):
    def backward(dY):
        return None

    return backward


@stop_gradient.jvp_rule
def _(x):
    def tangent(dx):
        return zeros_like(dx)

    return tangent


# --- a ufunc's outer: every pair of elements -------------------------------------

OUTER_UFUNCS = ("add", "subtract", "multiply", "divide", "maximum", "minimum")


@primitive(BINARY)
def ufunc_outer(xp, a, b, ufunc="multiply"):
    """A ufunc applied to every pair of a's and b's elements, like
    np.multiply.outer(a, b) (np.add.outer, ...): the result's shape is a's, then
    b's. ``ufunc`` is one of OUTER_UFUNCS; a tie of maximum or minimum splits the
    gradient evenly, as theirs do."""
    if ufunc not in OUTER_UFUNCS:
        raise PptoError(
            f"ppto.ufunc_outer takes the outer of {', '.join(OUTER_UFUNCS)}, not "
            f"{ufunc!r}: for another, spread a with a[..., None] and broadcast"
        )
    return getattr(xp, ufunc)(xp.reshape(a, outer_spread(a, b)), b)


@ufunc_outer.grad_rule
def _(a, b, ufunc="multiply", out=None):
    def backward(dY):
        # the ufunc's own gradients, a spread over b's axes and summed back
        spread = reshape(a, outer_spread(a, b))
        if ufunc in ("add", "subtract"):
            dspread = dY
            db = dY if ufunc == "add" else -dY
        elif ufunc == "multiply":
            dspread = dY * b
            db = dY * spread
        elif ufunc == "divide":
            dspread = dY / b
            db = -dY * out / b
        else:  # (maximum, minimum: a tie splits, as theirs)
            tied = where(spread == b, 0.5 * dY, 0.0)
            to_a = spread > b if ufunc == "maximum" else spread < b
            to_b = b > spread if ufunc == "maximum" else b < spread
            dspread = where(to_a, dY, tied)
            db = where(to_b, dY, tied)
        return reshape(unbroadcast(dspread, spread), np.shape(a)), unbroadcast(db, b)

    return backward


@ufunc_outer.jvp_rule
def _(a, b, ufunc="multiply", out=None):
    def tangent(da, db):
        spread = reshape(a, outer_spread(a, b))
        dspread = reshape(da, outer_spread(a, b))
        if ufunc == "add":
            return dspread + db
        if ufunc == "subtract":
            return dspread - db
        if ufunc == "multiply":
            return dspread * b + spread * db
        if ufunc == "divide":
            return (dspread - out * db) / b
        to_a = spread > b if ufunc == "maximum" else spread < b  # (or minimum)
        to_b = b > spread if ufunc == "maximum" else b < spread
        return where(to_a, dspread, where(to_b, db, 0.5 * (dspread + db)))

    return tangent


@shape_helper
def outer_spread(a, b):
    """a's shape with an axis of length 1 for each of b's after it: a so shaped
    broadcasts against b into every pair (a ufunc's outer)."""
    return tuple(np.shape(a)) + (1,) * np.ndim(b)
