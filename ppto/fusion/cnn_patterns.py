"""Built-in fusion rules of convolutional networks on channels-last (NHWC) images:
a convolution's bias and ReLU applied over its BLAS product in place, batch norm's
statistics over every axis but the channels', and the residual join of a ResNet block
(add, ReLU, global average pooling). Each rule is checked against its pattern by the
test suite, as ``ppto.fusion.patterns``' are.
"""

from __future__ import annotations

import numpy as np

from ppto.fusion.patterns import BACKWARD, BOTH, FORWARD, _fits, rule
from ppto.ops import elementwise as ew
from ppto.ops import nn, reductions

# an NHWC image's statistics axes: batch, rows and columns, one value per channel
PIXELS = (0, 1, 2)
# an NHWC image's spatial axes: global average pooling keeps batch and channels
SPATIAL = (1, 2)
IMAGE, KERNEL, CHANNEL = (2, 5, 4, 3), (6, 3, 3, 3), (3,)
# these rules' statistics and pooling are over axes a region's pass does not sum
# over: matched before regions form, so that a region does not take their
# elementwise statements (FusionRule.before_regions)
FIRST = True

# --- convolution epilogues: the BLAS product of im2col, then the epilogue in place ---


def _conv_bias(x, w, b, stride, padding):
    """``conv2d(x, w) + b`` in NHWC: the product's array (a fresh one) takes b."""
    out = nn.conv2d.impl(np, x, w, stride, padding, "nhwc")
    if _fits(out, b):
        out += b
        return out
    return out + b


def _conv_bias_relu(x, w, b, stride, padding):
    out = _conv_bias(x, w, b, stride, padding)
    return np.maximum(out, 0.0, out=out) if _fits(out) else np.maximum(out, 0.0)


CONV_BIAS = [IMAGE, KERNEL, (6,), (), ()]
# (before regions: a region would take the bias and ReLU away from the product)
rule("conv2d_bias_nhwc", CONV_BIAS, BOTH, _conv_bias, FIRST)(
    lambda x, w, b, stride, padding: nn.conv2d(x, w, stride, padding, "nhwc") + b
)
rule("conv2d_bias_relu_nhwc", CONV_BIAS, FORWARD, _conv_bias_relu, FIRST)(
    lambda x, w, b, stride, padding: ew.relu(
        nn.conv2d(x, w, stride, padding, "nhwc") + b
    )
)
rule("conv2d_bias_maximum_nhwc", CONV_BIAS, FORWARD, _conv_bias_relu, FIRST)(
    lambda x, w, b, stride, padding: ew.maximum(
        nn.conv2d(x, w, stride, padding, "nhwc") + b, 0.0
    )
)

# --- batch norm over the pixels: per-channel sums without product arrays ---


def _same_images(*arrays) -> bool:
    """Whether every operand is a 4-D array of one shape and floating dtype, which
    ``np.einsum`` reduces without NumPy's broadcasting (else the unfused form)."""
    first = arrays[0]
    return all(
        type(a) is np.ndarray
        and a.ndim == 4
        and a.shape == first.shape
        and a.dtype == first.dtype
        and a.dtype.kind == "f"
        for a in arrays
    )


def _channel_dot(a, b):
    """``sum(a * b, axis=(0, 1, 2))``: one pass, no product array (einsum)."""
    if not _same_images(a, b):
        return np.sum(np.multiply(a, b), axis=PIXELS)
    return np.einsum("nhwc,nhwc->c", a, b)


def _channel_mean_of_squares(x):
    if not _same_images(x):
        return np.mean(np.square(x), axis=PIXELS)
    return _channel_dot(x, x) / (x.size // x.shape[-1])


rule("channel_sum_of_products", [IMAGE, IMAGE], BOTH, _channel_dot)(
    lambda a, b: reductions.reduce_sum(a * b, PIXELS)
)
rule("channel_mean_of_squares", [IMAGE], BOTH, _channel_mean_of_squares)(
    lambda x: reductions.reduce_mean(x**2, PIXELS)
)


def _variance_backward(dy, y, s):
    return -_channel_dot(dy, y) / s / (2 * s)


# the gradient of batch norm's variance as ppto's rules write it for y = t / s
# with s = sqrt(variance + eps): its per-channel sum of dy * y, no product array
rule("batch_norm_variance_backward", [IMAGE, IMAGE, CHANNEL], BACKWARD,
     _variance_backward)(
    lambda dy, y, s: -reductions.reduce_sum(dy * y, PIXELS) / s / (2 * s)
)  # fmt: skip


def _batch_norm(x, gamma, beta, eps):
    """Training-mode batch norm of NHWC ``x``: the mean, one centred copy of x, its
    per-channel sum of squares read from it (einsum), then scale and shift written
    over it: one array allocated, where the operators one by one allocate five."""
    mean = np.mean(x, axis=PIXELS)
    centred = x - mean
    variance = _channel_mean_of_squares(centred)
    scale = gamma / np.sqrt(variance + eps)
    if not _fits(centred, scale, beta):  # (other shapes or dtypes: NumPy's types)
        return gamma * centred / np.sqrt(variance + eps) + beta
    centred *= scale
    centred += beta
    return centred


def batch_norm_pattern(x, gamma, beta, eps):
    """Batch norm as it is written in NumPy: ``(x - mean)`` read twice."""
    centred = x - reductions.reduce_mean(x, PIXELS)
    variance = reductions.reduce_mean(centred**2, PIXELS)
    return gamma * centred / ew.sqrt(variance + eps) + beta


BATCH_NORM = [IMAGE, CHANNEL, CHANNEL, ()]
rule("batch_norm_nhwc", BATCH_NORM, FORWARD, _batch_norm, FIRST)(batch_norm_pattern)


def _batch_norm_relu(x, gamma, beta, eps):
    out = _batch_norm(x, gamma, beta, eps)
    return np.maximum(out, 0.0, out=out) if _fits(out) else np.maximum(out, 0.0)


rule("batch_norm_relu_nhwc", BATCH_NORM, FORWARD, _batch_norm_relu, FIRST)(
    lambda x, gamma, beta, eps: ew.relu(batch_norm_pattern(x, gamma, beta, eps))
)
rule("batch_norm_maximum_nhwc", BATCH_NORM, FORWARD, _batch_norm_relu, FIRST)(
    lambda x, gamma, beta, eps: ew.maximum(batch_norm_pattern(x, gamma, beta, eps), 0.0)
)


def normalized_pattern(x, gamma, beta, eps):
    """Batch norm normalized first, then scaled: ``gamma * (centred / deviation)``."""
    centred = x - reductions.reduce_mean(x, PIXELS)
    variance = reductions.reduce_mean(centred**2, PIXELS)
    return gamma * (centred / ew.sqrt(variance + eps)) + beta


# the same kernels for batch norm normalized first (forward-only code: in gradient
# code the multi-output rules of batch_norm_outputs keep the values read back)
rule("batch_norm_normalized_nhwc", BATCH_NORM, FORWARD, _batch_norm, FIRST)(
    normalized_pattern
)
rule("batch_norm_normalized_relu_nhwc", BATCH_NORM, FORWARD, _batch_norm_relu, FIRST)(
    lambda x, gamma, beta, eps: ew.relu(normalized_pattern(x, gamma, beta, eps))
)
rule(
    "batch_norm_normalized_maximum_nhwc", BATCH_NORM, FORWARD, _batch_norm_relu, FIRST
)(lambda x, gamma, beta, eps: ew.maximum(normalized_pattern(x, gamma, beta, eps), 0.0))

# --- the residual join: ReLU of a sum, and its global average pool ---


def _pool_of_relu_sum(a, b):
    """``mean(relu(a + b), axis=(1, 2))`` image by image: one image's sum at a
    time, never the batch's."""
    if not _same_images(a, b):
        return np.mean(np.maximum(a + b, 0.0), axis=SPATIAL)
    pooled = np.empty((a.shape[0], a.shape[3]), a.dtype)
    buffer = np.empty(a.shape[1:], a.dtype)
    for image in range(a.shape[0]):
        np.add(a[image], b[image], out=buffer)
        np.maximum(buffer, 0.0, out=buffer)
        np.mean(buffer, axis=(0, 1), out=pooled[image])
    return pooled


rule("global_pool_of_relu_sum", [IMAGE] * 2, FORWARD, _pool_of_relu_sum, FIRST)(
    lambda a, b: reductions.reduce_mean(ew.maximum(a + b, 0.0), SPATIAL)
)
rule("global_pool_of_relu_op_sum", [IMAGE] * 2, FORWARD, _pool_of_relu_sum, FIRST)(
    lambda a, b: reductions.reduce_mean(ew.relu(a + b), SPATIAL)
)


def _batch_norm_add_relu(x, gamma, beta, eps, skip):
    """``relu(batch_norm(x) + skip)``: the end of a ResNet block, written over the
    batch norm's array."""
    out = _batch_norm(x, gamma, beta, eps)
    if not _fits(out, skip):
        return np.maximum(out + skip, 0.0)
    out += skip
    return np.maximum(out, 0.0, out=out)


RESIDUAL = [*BATCH_NORM, IMAGE]
rule("batch_norm_add_relu_nhwc", RESIDUAL, FORWARD, _batch_norm_add_relu, FIRST)(
    lambda x, gamma, beta, eps, skip: ew.relu(
        batch_norm_pattern(x, gamma, beta, eps) + skip
    )
)
rule("batch_norm_add_maximum_nhwc", RESIDUAL, FORWARD, _batch_norm_add_relu, FIRST)(
    lambda x, gamma, beta, eps, skip: ew.maximum(
        batch_norm_pattern(x, gamma, beta, eps) + skip, 0.0
    )
)
rule(
    "batch_norm_normalized_add_relu_nhwc",
    RESIDUAL,
    FORWARD,
    _batch_norm_add_relu,
    FIRST,
)(
    lambda x, gamma, beta, eps, skip: ew.relu(
        normalized_pattern(x, gamma, beta, eps) + skip
    )
)
rule(
    "batch_norm_normalized_add_maximum_nhwc",
    RESIDUAL,
    FORWARD,
    _batch_norm_add_relu,
    FIRST,
)(
    lambda x, gamma, beta, eps, skip: ew.maximum(
        normalized_pattern(x, gamma, beta, eps) + skip, 0.0
    )
)
