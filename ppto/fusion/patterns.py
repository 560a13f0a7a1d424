"""The built-in fusion rules. Each is a pattern of ppto operators; elementwise ones get
generated kernels, the others a NumPy implementation that avoids temporaries (BLAS
with in-place epilogues, dot products instead of product-then-sum, out= sequences).
Every rule is checked against its pattern when registered.
"""

from __future__ import annotations

import functools

import numpy as np

from ppto.fusion.registry import register
from ppto.ops import elementwise as ew
from ppto.ops import linalg, nn, reductions
from ppto.ops.elementwise import GELU_CUBIC, GELU_SCALE
from ppto.runtime.backends import where_into

FORWARD, BACKWARD, BOTH = "forward", "backward", "forward and backward"
MATRIX = [(4, 3), (3, 5)]
MATRIX_BIAS = [(4, 3), (3, 5), (5,)]
MATRIX_PAIR_BIAS = [(4, 3), (3, 5), (4, 6), (6, 5), (5,)]


def rule(
    name,
    shapes=None,
    applies=BOTH,
    implementation=None,
    before_regions=False,
    cuda=None,
):
    def define(pattern):
        register(
            pattern,
            implementation,
            name=name,
            shapes=shapes,
            applies=applies,
            builtin=True,
            before_regions=before_regions,
            cuda=cuda,
        )
        return pattern

    return define


def _fits(out, *operands) -> bool:
    """Whether ``out`` combined with ``operands`` keeps ``out``'s own shape and
    floating dtype, so that the result may be written over it: else the in-place
    form would raise (a larger broadcast shape, a NumPy scalar from two vectors) or
    cast silently (float32 ``A @ B`` plus a float64 bias is float64). Decided
    without NumPy's type and shape machinery for the common operands (it costs
    microseconds, per step of an RNN)."""
    if type(out) is not np.ndarray or out.dtype.kind != "f":
        return False
    for operand in operands:
        if not _fits_one(out, operand):
            return False
    return True


def _fits_one(out, operand) -> bool:
    kind = type(operand)
    if (  # the common case first: a bias or matrix of out's dtype and trailing shape
        kind is np.ndarray
        and operand.dtype == out.dtype
        and operand.shape == out.shape[out.ndim - operand.ndim :]
    ):
        return True
    if kind is float or kind is int:
        return True  # a Python number takes the array's type
    if kind is not np.ndarray:
        return np.result_type(out, operand) == out.dtype and np.ndim(operand) == 0
    if operand.dtype != out.dtype and np.result_type(out, operand) != out.dtype:
        return False
    shape, own = operand.shape, out.shape
    return len(shape) <= len(own) and all(
        size == 1 or size == mine for size, mine in zip(shape[::-1], own[::-1])
    )


def _gelu(x):
    """GELU of a fresh array ``x``, in place where it may be (see ``_fits``)."""
    if not _fits(x):
        return 0.5 * x * (1 + np.tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x)))
    out = np.multiply(x, x)
    out *= GELU_CUBIC * x
    out += x
    out *= GELU_SCALE
    np.tanh(out, out=out)
    out += 1
    out *= 0.5 * x
    return out


def _sigmoid(out):
    """Sigmoid as ``ppto.sigmoid`` computes it, over a fresh array ``out``."""
    if not _fits(out):
        return 0.5 * (np.tanh(0.5 * out) + 1)
    out *= 0.5
    np.tanh(out, out=out)
    out += 1
    out *= 0.5
    return out


# --- matmul epilogues: BLAS, then the epilogue in place ---


def _matmul_bias(A, B, b):
    out = A @ B
    if _fits(out, b):
        out += b
        return out
    return out + b


rule("matmul_bias", MATRIX_BIAS, implementation=_matmul_bias)(
    lambda A, B, b: linalg.dot(A, B) + b
)
rule("matmul_relu", MATRIX, FORWARD, lambda A, B: np.maximum(A @ B, 0, out=None))(
    lambda A, B: ew.relu(linalg.dot(A, B))
)
rule("matmul_bias_relu", MATRIX_BIAS, FORWARD,
     lambda A, B, b: np.maximum(_matmul_bias(A, B, b), 0, out=None))(
    lambda A, B, b: ew.relu(linalg.dot(A, B) + b)
)  # fmt: skip


def _matmul_pair_bias(A, B, C, D, b, then=None):
    """``A @ B + C @ D + b`` (an RNN cell's input and state products), added into
    ``A @ B``'s new array where that keeps its shape and dtype: two arrays fewer
    per step than adding them one by one, the same sums in the same order.
    ``then``: a ufunc over the sum (tanh), written over it where it was added there."""
    out, other = A @ B, C @ D
    if _fits(out, other, b):
        out += other
        out += b
        return out if then is None else then(out, out=out)
    out = out + other + b
    return out if then is None else then(out)


def _matmul_pair_bias_tanh(A, B, C, D, b):
    return _matmul_pair_bias(A, B, C, D, b, np.tanh)


def _in_place(function):
    def run(*args):
        out = _matmul_bias(*args) if len(args) == 3 else args[0] @ args[1]
        return function(out, out=out) if _fits(out) else function(out)

    return run


rule("matmul_bias_maximum", MATRIX_BIAS, FORWARD,
     lambda A, B, b: np.maximum(_matmul_bias(A, B, b), 0.0))(
    lambda A, B, b: ew.maximum(linalg.dot(A, B) + b, 0.0)
)  # fmt: skip
rule("matmul_bias_tanh", MATRIX_BIAS, FORWARD, _in_place(np.tanh))(
    lambda A, B, b: ew.tanh(linalg.dot(A, B) + b)
)
rule("matmul_pair_bias", MATRIX_PAIR_BIAS, FORWARD, _matmul_pair_bias)(
    lambda A, B, C, D, b: linalg.dot(A, B) + linalg.dot(C, D) + b
)
rule("matmul_pair_bias_tanh", MATRIX_PAIR_BIAS, FORWARD, _matmul_pair_bias_tanh)(
    lambda A, B, C, D, b: ew.tanh(linalg.dot(A, B) + linalg.dot(C, D) + b)
)
rule("matmul_tanh", MATRIX, FORWARD, _in_place(np.tanh))(
    lambda A, B: ew.tanh(linalg.dot(A, B))
)
rule("matmul_bias_sigmoid", MATRIX_BIAS, FORWARD,
     lambda A, B, b: _sigmoid(_matmul_bias(A, B, b)))(
    lambda A, B, b: ew.sigmoid(linalg.dot(A, B) + b)
)  # fmt: skip
rule("matmul_sigmoid", MATRIX, FORWARD, lambda A, B: _sigmoid(A @ B))(
    lambda A, B: ew.sigmoid(linalg.dot(A, B))
)
rule("matmul_bias_gelu", MATRIX_BIAS, FORWARD,
     lambda A, B, b: _gelu(_matmul_bias(A, B, b)))(
    lambda A, B, b: ew.gelu(linalg.dot(A, B) + b)
)  # fmt: skip
rule("matmul_scale", MATRIX + [()], BOTH, lambda A, B, s: np.multiply(A @ B, s))(
    lambda A, B, s: linalg.dot(A, B) * s
)
rule("matmul_add", [(4, 3), (3, 5), (4, 5)], BOTH, _matmul_bias)(
    lambda A, B, C: C + linalg.dot(A, B)
)

# --- elementwise + reduction: no product array ----------------------------------------


# elements per BLAS dot product in a sum of float32 (or float16) products: BLAS adds
# them into a few running sums of that type (2e-5 relative error at 1e7 elements,
# past the default tolerance, where NumPy's pairwise sum has 1e-7); blocks of this
# size, their dot products added in float64, are as accurate as NumPy's sum
DOT_BLOCK = 1 << 16


def _vdot(a, b):
    """sum(a * b) by BLAS's dot product where both are arrays of one shape and dtype
    (a Python number or a broadcast operand: NumPy's own product and sum, which keep
    NumPy's result type)."""
    if (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and a.shape == b.shape
        and a.dtype == b.dtype
    ):
        a, b = np.ravel(a), np.ravel(b)
        if a.dtype.kind != "f" or a.dtype.itemsize >= 8 or a.size <= DOT_BLOCK:
            return np.vdot(a, b)
        blocks = range(0, a.size, DOT_BLOCK)
        partial = [np.vdot(a[i : i + DOT_BLOCK], b[i : i + DOT_BLOCK]) for i in blocks]
        return a.dtype.type(np.sum(partial, dtype=np.float64))
    return np.sum(a * b)


rule("sum_of_products", [(4, 4), (4, 4)], BOTH, _vdot)(
    lambda x, y: reductions.reduce_sum(x * y)
)
rule("sum_of_squares", [(4, 4)], BOTH, lambda x: _vdot(x, x))(
    lambda x: reductions.reduce_sum(x * x)
)
rule("sum_of_square_op", [(4, 4)], BOTH, lambda x: _vdot(x, x))(
    lambda x: reductions.reduce_sum(ew.square(x))
)


HALF = np.dtype(np.float16)


def _mean_of_products(a, b):
    """mean(a * b) as NumPy's mean makes it: float16 products are summed in
    float32 and divided there (their float16 sum is inf past 65504, where the
    mean need not be), the result float16; other dtypes by ``_vdot``."""
    if getattr(a, "dtype", None) is HALF or getattr(b, "dtype", None) is HALF:
        return np.mean(np.multiply(a, b))  # (np.result_type: ten times the time)
    return _vdot(a, b) / np.size(a)


rule("mean_of_squares", [(4, 4)], BOTH, lambda x: _mean_of_products(x, x))(
    lambda x: reductions.reduce_mean(x * x)
)
rule("mean_of_square_op", [(4, 4)], BOTH, lambda x: _mean_of_products(x, x))(
    lambda x: reductions.reduce_mean(ew.square(x))
)


def _squared_distance(a, b):
    difference = np.subtract(a, b)
    return _vdot(difference, difference)


rule("squared_distance", [(4, 4), (4, 4)], BOTH, _squared_distance)(
    lambda a, b: reductions.reduce_sum(ew.square(a - b))
)
rule("squared_distance_product", [(4, 4), (4, 4)], BOTH, _squared_distance)(
    lambda a, b: reductions.reduce_sum((a - b) * (a - b))
)


def _mean_squared_error(a, b):
    difference = np.subtract(a, b)  # (the broadcast shape's size, not a's)
    return _mean_of_products(difference, difference)


rule("mean_squared_error", [(4, 4), (4, 4)], BOTH, _mean_squared_error)(
    lambda a, b: reductions.reduce_mean(ew.square(a - b))
)  # fmt: skip


# --- softmax family along the last axis: out= sequences ---


def _softmax(x, axis=-1):
    out = x - np.max(x, axis=axis, keepdims=True)
    np.exp(out, out=out)
    out /= np.sum(out, axis=axis, keepdims=True)
    return out


def _log_softmax(x, axis=-1):
    out = x - np.max(x, axis=axis, keepdims=True)
    out -= np.log(np.sum(np.exp(out), axis=axis, keepdims=True))
    return out


def _logsumexp(x, axis=-1):
    peak = np.max(x, axis=axis, keepdims=True)
    total = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return np.squeeze(total, axis)


def _softmax_backward(s, dy, axis=-1):
    return s * (dy - np.sum(dy * s, axis=axis, keepdims=True))


def _log_softmax_backward(y, dy, axis=-1):
    return dy - np.exp(y) * np.sum(dy, axis=axis, keepdims=True)


def softmax_patterns(axis) -> dict:
    """The softmax family's patterns along ``axis`` (also how the CUDA stages write
    softmax and log-softmax out)."""

    def shifted_exp(x):
        return ew.exp(x - reductions.reduce_max(x, axis, True))

    return {
        "softmax": lambda x: (
            shifted_exp(x) / reductions.reduce_sum(shifted_exp(x), axis, True)
        ),
        "log_softmax": lambda x: (
            x
            - reductions.reduce_max(x, axis, True)
            - ew.log(reductions.reduce_sum(shifted_exp(x), axis, True))
        ),
        "logsumexp": lambda x: (
            ew.log(reductions.reduce_sum(shifted_exp(x), axis))
            + reductions.reduce_max(x, axis)
        ),
        "softmax_backward": lambda s, dy: (
            s * (dy - reductions.reduce_sum(dy * s, axis, True))
        ),
        "log_softmax_backward": lambda y, dy: (
            dy - ew.exp(y) * reductions.reduce_sum(dy, axis, True)
        ),
    }


# three axes, so that a rule along axis 1 is checked where axis 1 is not the last
STACKED_ROWS = [(3, 4, 6)]
_SOFTMAX_IMPLEMENTATIONS = {
    "softmax": (_softmax, STACKED_ROWS, BOTH),
    "log_softmax": (_log_softmax, STACKED_ROWS, BOTH),
    "logsumexp": (_logsumexp, STACKED_ROWS, BOTH),
    "softmax_backward": (_softmax_backward, STACKED_ROWS * 2, BACKWARD),
    "log_softmax_backward": (_log_softmax_backward, STACKED_ROWS * 2, BACKWARD),
}


def _along(implementation, axis):
    """``implementation`` along ``axis`` (the axis of the rule's pattern)."""

    @functools.wraps(implementation)
    def along_axis(*arrays):
        return implementation(*arrays, axis=axis)

    return along_axis


for axis, suffix in ((-1, "last_axis"), (1, "axis1")):
    for kind, pattern in softmax_patterns(axis).items():
        implementation, shapes, applies = _SOFTMAX_IMPLEMENTATIONS[kind]
        rule(f"{kind}_{suffix}", shapes, applies, _along(implementation, axis))(pattern)


def _cross_entropy(z, labels):
    return -np.mean(np.sum(labels * _log_softmax(z), axis=-1))


rule("cross_entropy_from_logits", [(4, 6), (4, 6)], FORWARD, _cross_entropy)(
    lambda z, labels: (
        -reductions.reduce_mean(
            reductions.reduce_sum(labels * nn.log_softmax(z, -1), -1)
        )
    )
)


def _layer_norm(x, eps):
    centred = x - np.mean(x, axis=-1, keepdims=True)
    scale = np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + eps)
    if not _fits(centred, scale):  # an eps of another dtype or a larger shape
        return centred / scale
    centred /= scale
    return centred


rule("layer_norm", [(4, 6), ()], FORWARD, _layer_norm)(
    lambda x, eps: (
        (x - reductions.reduce_mean(x, -1, True))
        / ew.sqrt(
            reductions.reduce_mean(
                ew.square(x - reductions.reduce_mean(x, -1, True)), -1, True
            )
            + eps
        )
    )
)

# --- elementwise chains: generated kernels ---

E = [(4, 4)]
rule("mul_add", E * 3)(lambda a, b, c: a * b + c)
rule("add_mul", E * 3)(lambda a, b, c: (a + b) * c)
rule("sub_mul", E * 3)(lambda a, b, c: (a - b) * c)
rule("mul_sub", E * 3)(lambda a, b, c: a * b - c)
rule("axpby", E * 4)(lambda a, x, b, y: a * x + b * y)
rule("mul3", E * 3)(lambda a, b, c: a * b * c)
rule("add3", E * 3)(lambda a, b, c: a + b + c)
rule("div_add", E * 3)(lambda a, b, c: a / (b + c))
rule("square_difference", E * 2)(lambda a, b: ew.square(a - b))
rule("product_of_difference", E * 2)(lambda a, b: (a - b) * (a - b))
rule("abs_difference", E * 2)(lambda a, b: ew.abs(a - b))
rule("polynomial2", E * 4)(lambda a, x, b, c: a * x * x + b * x + c)
rule("tanh_of_affine", E * 3)(lambda x, a, b: ew.tanh(x * a + b))
rule("tanh_of_sum", E * 2)(lambda x, b: ew.tanh(x + b))
rule("sigmoid_of_sum", E * 2)(lambda x, b: ew.sigmoid(x + b))
rule("relu_of_sum", E * 2)(lambda x, b: ew.relu(x + b))
rule("exp_of_negative", E)(lambda x: ew.exp(-x))
rule("exp_of_difference", E * 2)(lambda x, m: ew.exp(x - m))
rule("scaled_exp", E * 2)(lambda x, s: s * ew.exp(x))
rule("softplus_stable", E)(lambda x: ew.log1p(ew.exp(-ew.abs(x))) + ew.maximum(x, 0.0))
rule("relu_backward", E * 2, BACKWARD)(lambda x, dy: ew.where(x > 0, dy, 0.0))


def _maximum_backward(x, dy):
    """np.maximum(x, 0)'s gradient (a ReLU written with NumPy), ``where(x > 0, dy,
    where(x == 0, 0.5 * dy, 0.0))``: dy masked where x > 0 (the backend's integer
    lanes), then half of dy where x is exactly 0. A tie is rare: one comparison and
    a test find none most often, where the statements halve dy, mask the halves and
    choose between two arrays (the benchmark MLP's gradient 4-8% slower)."""
    out = where_into(np.greater(x, 0), dy, 0.0)
    ties = np.equal(x, 0)
    if ties.any():
        np.copyto(out, np.multiply(dy, 0.5), where=ties)
    return out


# (before regions: a region would take the two wheres apart)
rule("maximum_backward", E * 2, BACKWARD, _maximum_backward, before_regions=True)(
    lambda x, dy: ew.where(x > 0.0, dy, ew.where(x == 0.0, 0.5 * dy, 0.0))
)
rule("relu_mask_multiply", E * 2, BACKWARD)(lambda x, dy: dy * (x > 0))
rule("leaky_relu_backward", E * 3, BACKWARD)(
    lambda x, dy, slope: ew.where(x > 0, dy, dy * slope)
)
rule("tanh_backward", E * 2, BACKWARD)(lambda y, dy: dy * (1 - y * y))
rule("sigmoid_backward", E * 2, BACKWARD)(lambda y, dy: dy * y * (1 - y))
rule("log_backward", E * 2, BACKWARD)(lambda x, dy: dy / x)
rule("sqrt_backward", E * 2, BACKWARD)(lambda y, dy: dy / (2 * y))
rule("sin_backward", E * 2, BACKWARD)(lambda x, dy: dy * ew.cos(x))
rule("cos_backward", E * 2, BACKWARD)(lambda x, dy: -dy * ew.sin(x))
rule("square_backward", E * 2, BACKWARD)(lambda x, dy: dy * 2 * x)
rule("elu_backward", E * 3, BACKWARD)(
    lambda x, dy, y: ew.where(x > 0, dy, dy * (y + 1.0))
)
rule("clip_backward", E * 3, BACKWARD)(lambda x, y, dy: ew.where(y == x, dy, 0.0))
rule("pow_backward", E * 3, BACKWARD)(lambda a, b, dy: dy * b * a ** (b - 1))
rule("quotient_backward", E * 3, BACKWARD)(lambda y, b, dy: -dy * y / b)
rule("gelu", E)(
    lambda x: 0.5 * x * (1 + ew.tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x)))
)
