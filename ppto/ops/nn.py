"""Neural-network operators: softmax, log_softmax, one_hot, and 2-D convolution and
pooling of images in NCHW or NHWC layout (convolution weights are always OIHW).

Image operators take and return images in the layout they are given. Convolutions
compute in NHWC, where each one is a single matrix product of a patch matrix
(ppto/ops/patches.py), transposing NCHW images on the way in and out; pooling
computes in either layout without transposing.

Each gradient is a backward primitive of this module whose own rules keep the family
closed under repeated differentiation: conv2d and its two backward primitives are
mutually adjoint bilinear maps, max pooling scatters to and gathers from each window's
maxima (ties share equally), and average pooling and its backward are adjoint linear
maps.
"""

import numpy as np

from ppto.errors import ShapeError
from ppto.ops.elementwise import exp
from ppto.ops.patches import (
    col2im,
    from_channels_last,
    im2col,
    kernel_offsets,
    patch_matrix,
    to_channels_last,
    weight_matrix,
    weights_from_matrix,
)
from ppto.ops.primitive import primitive
from ppto.ops.reductions import reduce_sum

SAME = "(Tensor[...]) -> Tensor[...]"
PAIR = "(Tensor[...], Tensor[...]) -> Tensor[...]"

# The (channel, row, column) axes of a 4-D image in each layout. Signatures bind axes
# by position, which cannot say "C is axis 1 or 3 by layout", so image operators write
# their images as Tensor[...] and check shapes themselves, naming the layout.
IMAGE_AXES = {"nchw": (1, 2, 3), "nhwc": (3, 1, 2)}


# --- softmax ----------------------------------------------------------------------


@primitive(SAME, tangent="symmetric", keeps_layout=True)
def softmax(xp, x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the maximum so it cannot
    overflow: ``softmax(x)`` sums to 1 along ``axis``."""
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


@softmax.grad_rule
def _(x, axis=-1, out=None):
    # The Jacobian diag(Y) - Y Y^T is symmetric, so the derived ("symmetric") tangent
    # rule is this backward rule read forwards.
    def backward(dY):
        return out * (dY - reduce_sum(dY * out, axis, keepdims=True))

    return backward


@primitive(SAME, keeps_layout=True)
def log_softmax(xp, x, axis=-1):
    """x - logsumexp(x) along ``axis``, without overflow."""
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


@log_softmax.grad_rule
def _(x, axis=-1, out=None):
    def backward(dY):
        return dY - exp(out) * reduce_sum(dY, axis, keepdims=True)

    return backward


@log_softmax.jvp_rule
def _(x, axis=-1, out=None):
    def tangent(dx):
        return dx - reduce_sum(exp(out) * dx, axis, keepdims=True)

    return tangent


@primitive("(Tensor[...]) -> Tensor[...,num_classes]", differentiable=False)
def one_hot(xp, indices, num_classes, dtype="float64"):
    """1 where a new last axis of length ``num_classes`` equals ``indices``, else 0.

    Indices outside [0, num_classes) give rows of zeros, as in jax.nn.one_hot.
    """
    return (xp.expand_dims(indices, -1) == xp.arange(num_classes)).astype(dtype)


# --- image geometry ---------------------------------------------------------------


def pair(op_name, what, value):
    """An int or a pair of ints, as (rows, columns)."""
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return int(value[0]), int(value[1])
    raise ShapeError(
        f"ppto.{op_name}: {what} must be an int or a pair (rows, columns), "
        f"got {value!r}"
    )


def image_axes(op_name, layout, shape):
    """The (channel, row, column) axes of an image of ``shape`` in ``layout``."""
    if layout not in IMAGE_AXES:
        raise ShapeError(
            f"ppto.{op_name}: layout must be 'nchw' or 'nhwc', got {layout!r}"
        )
    if len(shape) != 4:
        raise ShapeError(
            f"ppto.{op_name}: images are 4-D ({layout.upper()}), got shape "
            f"{tuple(shape)}"
        )
    return IMAGE_AXES[layout]


def spatial_index(layout, rows, cols):
    """The subscript selecting ``rows`` and ``cols`` of a 4-D image."""
    index = [slice(None)] * 4
    _, row_axis, col_axis = IMAGE_AXES[layout]
    index[row_axis], index[col_axis] = rows, cols
    return tuple(index)


def windowed_shape(op_name, shape, kernel, stride, padding, layout):
    """The shape of one value per window: the image ``shape`` with its rows and
    columns replaced by window counts (ShapeError when a window does not fit)."""
    _, row_axis, col_axis = image_axes(op_name, layout, shape)
    if min(stride) < 1 or min(padding) < 0 or min(kernel) < 1:
        raise ShapeError(
            f"ppto.{op_name}: need kernel and stride >= 1 and padding >= 0, got "
            f"kernel {kernel}, stride {stride}, padding {padding}"
        )
    padded = (shape[row_axis] + 2 * padding[0], shape[col_axis] + 2 * padding[1])
    if kernel[0] > padded[0] or kernel[1] > padded[1]:
        raise ShapeError(
            f"ppto.{op_name}: a {kernel[0]}x{kernel[1]} window does not fit in the "
            f"{padded[0]}x{padded[1]} (padded) image of input {tuple(shape)} in "
            f"layout {layout!r}: use a smaller kernel or more padding"
        )
    result = list(shape)
    for axis, size, k, s in zip((row_axis, col_axis), padded, kernel, stride):
        result[axis] = (size - k) // s + 1
    return tuple(result)


def expect_shape(op_name, what, shape, expected, layout):
    if tuple(shape) != tuple(expected):
        raise ShapeError(
            f"ppto.{op_name}: {what} has shape {tuple(shape)} but the forward "
            f"operator's result has shape {tuple(expected)} (layout {layout!r})"
        )


# --- convolution ------------------------------------------------------------------


def conv_geometry(op_name, x_shape, w_shape, stride, padding, layout):
    """(stride, padding, output shape) of conv2d, checking that x and w agree."""
    channel, _, _ = image_axes(op_name, layout, x_shape)
    if len(w_shape) != 4:
        raise ShapeError(
            f"ppto.{op_name}: weights must be 4-D (O, C, KH, KW), got shape "
            f"{tuple(w_shape)}"
        )
    if x_shape[channel] != w_shape[1]:
        raise ShapeError(
            f"ppto.{op_name}: input {tuple(x_shape)} in layout {layout!r} has "
            f"{x_shape[channel]} channels but the weights {tuple(w_shape)} (OIHW) "
            f"expect {w_shape[1]}: pass the layout the data is in, or weights of "
            f"shape (O, {x_shape[channel]}, KH, KW)"
        )
    stride = pair(op_name, "stride", stride)
    padding = pair(op_name, "padding", padding)
    counts = windowed_shape(op_name, x_shape, w_shape[2:], stride, padding, layout)
    out_shape = list(counts)
    out_shape[channel] = w_shape[0]
    return stride, padding, tuple(out_shape)


@primitive(
    "(Tensor[...], Tensor[O,C,KH,KW]) -> Tensor[...]",
    tangent="bilinear",
    keeps_layout=True,
)
def conv2d(xp, x, w, stride=1, padding=0, layout=None):
    """2-D cross-correlation of images x (NCHW or NHWC, per ``layout``) with weights
    w (O, C, KH, KW), zero ``padding`` and ``stride`` (ints or (rows, columns) pairs).

    The result has O channels and stays in x's layout.
    """
    stride, padding, _ = conv_geometry(
        "conv2d", x.shape, w.shape, stride, padding, layout
    )
    x = to_channels_last(xp, x, layout)
    patches = im2col(xp, x, w.shape[2:], stride, padding)
    positions = patches.shape[:3]
    out = patch_matrix(patches) @ weight_matrix(w)
    return from_channels_last(out.reshape(positions + (w.shape[0],)), layout)


@conv2d.grad_rule
def _(x, w, stride=1, padding=0, layout=None):
    def backward(dY):
        return (
            conv2d_backward_input(dY, w, x, stride, padding, layout),
            conv2d_backward_weight(x, dY, w, stride, padding, layout),
        )

    return backward


@primitive(
    "(Tensor[...], Tensor[O,C,KH,KW]) -> Tensor[...]",
    tangent="bilinear",
    keeps_layout=True,
)
def conv2d_backward_input(xp, dY, w, like, stride=1, padding=0, layout=None):
    """The gradient of conv2d with respect to its input, of ``like``'s shape: the
    transposed convolution of dY with w."""
    stride, padding, out_shape = conv_geometry(
        "conv2d_backward_input", like.shape, w.shape, stride, padding, layout
    )
    expect_shape("conv2d_backward_input", "dY", dY.shape, out_shape, layout)
    dY = to_channels_last(xp, dY, layout)
    # Each window's share of the gradient, laid out as im2col lays out its patches.
    parts = patch_matrix(dY) @ weight_matrix(w).T
    parts = parts.reshape(dY.shape[:3] + tuple(w.shape[2:]) + (w.shape[1],))
    channel, row_axis, col_axis = IMAGE_AXES[layout]
    image = tuple(like.shape[axis] for axis in (0, row_axis, col_axis, channel))
    return from_channels_last(col2im(xp, parts, image, stride, padding), layout)


@conv2d_backward_input.grad_rule
def _(dY, w, like, stride=1, padding=0, layout=None):
    def backward(dX):
        return (
            conv2d(dX, w, stride, padding, layout),
            conv2d_backward_weight(dX, dY, w, stride, padding, layout),
        )

    return backward


@primitive("(Tensor[...], Tensor[...]) -> Tensor[O,C,KH,KW]", tangent="bilinear")
def conv2d_backward_weight(xp, x, dY, like, stride=1, padding=0, layout=None):
    """The gradient of conv2d with respect to its weights, of ``like``'s shape: the
    correlation of x's windows with dY, summed over the batch and positions."""
    stride, padding, out_shape = conv_geometry(
        "conv2d_backward_weight", x.shape, like.shape, stride, padding, layout
    )
    expect_shape("conv2d_backward_weight", "dY", dY.shape, out_shape, layout)
    x = to_channels_last(xp, x, layout)
    patches = im2col(xp, x, like.shape[2:], stride, padding)
    dY = to_channels_last(xp, dY, layout)
    # patches.T @ dY, not dY.T @ patches: the same sums, but multithreaded OpenBLAS
    # took up to 100 times longer for the (O, positions) x (positions, K) shape
    # on a loaded machine, and steadily about as long for this one.
    summed = patch_matrix(patches).T @ patch_matrix(dY)
    return weights_from_matrix(xp, summed, like.shape)


@conv2d_backward_weight.grad_rule
def _(x, dY, like, stride=1, padding=0, layout=None):
    def backward(dW):
        return (
            conv2d_backward_input(dY, dW, x, stride, padding, layout),
            conv2d(x, dW, stride, padding, layout),
        )

    return backward


# --- pooling ----------------------------------------------------------------------
#
# Pooling runs over kernel offsets, not windows: each offset's element of every window
# is a strided view of the image shaped like the result, so a pooling is KH * KW
# whole-image operations (a reduction over each window's few elements, in a view with
# the kernel axes last, runs an inner loop of KW elements per window).


def pool_geometry(op_name, shape, kernel_size, stride, layout):
    """(kernel, stride, output shape) of a pooling; stride defaults to the kernel."""
    kernel = pair(op_name, "kernel_size", kernel_size)
    stride = kernel if stride is None else pair(op_name, "stride", stride)
    out_shape = windowed_shape(op_name, shape, kernel, stride, (0, 0), layout)
    return kernel, stride, out_shape


def pool_offsets(kernel, stride, out_shape, layout):
    """For each kernel offset (i, j), the subscript of a 4-D image selecting that
    element of every window: strided views shaped like the result ``out_shape``."""
    _, row_axis, col_axis = IMAGE_AXES[layout]
    counts = out_shape[row_axis], out_shape[col_axis]
    return [
        spatial_index(layout, rows, cols)
        for _, rows, cols in kernel_offsets(kernel, stride, counts)
    ]


def window_max(xp, x, offsets):
    """The maximum of each window of x, given its ``pool_offsets``."""
    out = x[offsets[0]].copy()
    for offset in offsets[1:]:
        xp.maximum(out, x[offset], out=out)
    return out


def window_ties(xp, x, peak, offsets, dtype):
    """How many of each window's elements equal its maximum ``peak``, in ``dtype``."""
    count = xp.zeros(peak.shape, dtype=dtype)
    for offset in offsets:
        count += x[offset] == peak
    return count


@primitive(SAME, keeps_layout=True)
def max_pool2d(xp, x, kernel_size, stride=None, layout=None):
    """The maximum of each window of x (NCHW or NHWC), without padding; ``stride``
    defaults to ``kernel_size``."""
    kernel, stride, out_shape = pool_geometry(
        "max_pool2d", x.shape, kernel_size, stride, layout
    )
    return window_max(xp, x, pool_offsets(kernel, stride, out_shape, layout))


@max_pool2d.grad_rule
def _(x, kernel_size, stride=None, layout=None):
    def backward(dY):
        return max_pool2d_backward(dY, x, kernel_size, stride, layout)

    return backward


@max_pool2d.jvp_rule
def _(x, kernel_size, stride=None, layout=None):
    def tangent(dx):
        return max_pool2d_tangent(dx, x, kernel_size, stride, layout)

    return tangent


@primitive(PAIR, tangent="linear", keeps_layout=True, nondiff=("x",))
def max_pool2d_backward(xp, dY, x, kernel_size, stride=None, layout=None):
    """The gradient of max_pool2d at x: each window's dY sent to its maxima (shared
    equally among ties, which makes it an exact subgradient). Linear in dY; x only
    selects, so it is not differentiated."""
    name = "max_pool2d_backward"
    kernel, stride, out_shape = pool_geometry(
        name, x.shape, kernel_size, stride, layout
    )
    expect_shape(name, "dY", dY.shape, out_shape, layout)
    offsets = pool_offsets(kernel, stride, out_shape, layout)
    peak = window_max(xp, x, offsets)
    share = dY / window_ties(xp, x, peak, offsets, dY.dtype)
    dx = xp.zeros(x.shape, dtype=share.dtype)
    for offset in offsets:
        # One offset's elements belong to distinct windows, so a strided += is
        # exact; overlapping windows accumulate across offsets.
        dx[offset] += xp.where(x[offset] == peak, share, 0)
    return dx


@max_pool2d_backward.grad_rule
def _(dY, x, kernel_size, stride=None, layout=None):
    def backward(dX):
        return max_pool2d_tangent(dX, x, kernel_size, stride, layout), None

    return backward


@primitive(PAIR, tangent="linear", keeps_layout=True, nondiff=("x",))
def max_pool2d_tangent(xp, dx, x, kernel_size, stride=None, layout=None):
    """The tangent of max_pool2d at x: per window, the mean of dx over x's maxima.
    The adjoint of max_pool2d_backward; x only selects, so it is not differentiated."""
    name = "max_pool2d_tangent"
    kernel, stride, out_shape = pool_geometry(
        name, x.shape, kernel_size, stride, layout
    )
    expect_shape(name, "dx", dx.shape, x.shape, layout)
    offsets = pool_offsets(kernel, stride, out_shape, layout)
    peak = window_max(xp, x, offsets)
    total = xp.zeros(peak.shape, dtype=dx.dtype)
    for offset in offsets:
        total += xp.where(x[offset] == peak, dx[offset], 0)
    return total / window_ties(xp, x, peak, offsets, dx.dtype)


@max_pool2d_tangent.grad_rule
def _(dx, x, kernel_size, stride=None, layout=None):
    def backward(dY):
        return max_pool2d_backward(dY, x, kernel_size, stride, layout), None

    return backward


@primitive(SAME, tangent="linear", keeps_layout=True)
def avg_pool2d(xp, x, kernel_size, stride=None, layout=None):
    """The mean of each window of x (NCHW or NHWC), without padding; ``stride``
    defaults to ``kernel_size``."""
    kernel, stride, out_shape = pool_geometry(
        "avg_pool2d", x.shape, kernel_size, stride, layout
    )
    offsets = pool_offsets(kernel, stride, out_shape, layout)
    return xp.mean(xp.stack([x[offset] for offset in offsets]), axis=0)


@avg_pool2d.grad_rule
def _(x, kernel_size, stride=None, layout=None):
    def backward(dY):
        return avg_pool2d_backward(dY, x, kernel_size, stride, layout)

    return backward


@primitive(SAME, tangent="linear", keeps_layout=True)
def avg_pool2d_backward(xp, dY, like, kernel_size, stride=None, layout=None):
    """The gradient of avg_pool2d, of ``like``'s shape: each window's dY spread
    evenly over the window."""
    name = "avg_pool2d_backward"
    kernel, stride, out_shape = pool_geometry(
        name, like.shape, kernel_size, stride, layout
    )
    expect_shape(name, "dY", dY.shape, out_shape, layout)
    offsets = pool_offsets(kernel, stride, out_shape, layout)
    share = dY / len(offsets)
    dx = xp.zeros(tuple(like.shape), dtype=share.dtype)
    for offset in offsets:
        dx[offset] += share
    return dx


@avg_pool2d_backward.grad_rule
def _(dY, like, kernel_size, stride=None, layout=None):
    def backward(dX):
        return avg_pool2d(dX, kernel_size, stride, layout)

    return backward
