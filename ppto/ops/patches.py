"""Convolution as one matrix product: the patch matrix of a channels-last (NHWC)
image, ``im2col``, holds each window's KH x KW x C values as one row, and its adjoint
``col2im`` adds such rows back into an image.

Rows are (N, OH, OW) and columns (KH, KW, C), C innermost, so that building the matrix
copies contiguous runs of channels, and conv2d and both its gradients are single BLAS
products of it. NCHW images are transposed to NHWC once, on the way in and out. Every
function is written against ``xp`` (NumPy or CuPy).
"""

import math


def to_channels_last(xp, x, layout):
    """x in NHWC, contiguous (a copy when x is NCHW)."""
    if layout == "nhwc":
        return x
    return xp.ascontiguousarray(x.transpose(0, 2, 3, 1))


def from_channels_last(x, layout):
    """The inverse of ``to_channels_last``: a view of NHWC ``x`` in ``layout``."""
    return x if layout == "nhwc" else x.transpose(0, 3, 1, 2)


def patch_matrix(patches):
    """(N, OH, OW, ...) ``patches`` (or an NHWC image) as a matrix with a row per
    position: a view when they are contiguous."""
    batch, rows, cols = patches.shape[:3]
    return patches.reshape(batch * rows * cols, math.prod(patches.shape[3:]))


def weight_matrix(w):
    """OIHW weights as the (KH * KW * C, O) matrix that patch rows multiply."""
    out_channels = w.shape[0]
    return w.transpose(2, 3, 1, 0).reshape(-1, out_channels)


def weights_from_matrix(xp, matrix, shape):
    """The inverse of ``weight_matrix``: contiguous OIHW weights of ``shape``."""
    out_channels, channels, kh, kw = shape
    grouped = matrix.reshape(kh, kw, channels, out_channels)
    return xp.ascontiguousarray(grouped.transpose(3, 2, 0, 1))


def im2col(xp, x, kernel, stride, padding):
    """The patches of NHWC ``x``: an (N, OH, OW, KH, KW, C) array whose
    ``reshape(N * OH * OW, -1)`` is the patch matrix.

    A 1x1 kernel without padding needs no copy: its patches are x's strided pixels.
    """
    rows, cols = stride
    if tuple(kernel) == (1, 1) and padding == (0, 0):
        return x[:, ::rows, ::cols, None, None, :]
    if padding != (0, 0):
        widths = ((0, 0), (padding[0], padding[0]), (padding[1], padding[1]), (0, 0))
        x = xp.pad(x, widths)
    view = xp.lib.stride_tricks.sliding_window_view(x, tuple(kernel), axis=(1, 2))
    # One copy into C-innermost order: each kernel offset's channels are a
    # contiguous run in x, where the view's own order (kernel axes last) would
    # gather them one element at a time.
    return xp.ascontiguousarray(view[:, ::rows, ::cols].transpose(0, 1, 2, 4, 5, 3))


def col2im(xp, patches, shape, stride, padding):
    """Sum (N, OH, OW, KH, KW, C) ``patches`` into the NHWC image of ``shape`` whose
    im2col they are shaped like (padding cropped off): the adjoint of ``im2col``."""
    batch, count_rows, count_cols, kh, kw, channels = patches.shape
    height = shape[1] + 2 * padding[0]
    width = shape[2] + 2 * padding[1]
    covered = (count_rows * kh, count_cols * kw)
    if (kh, kw) == tuple(stride) and covered == (height, width):
        # Windows that tile the image exactly: each pixel is in one window, so the
        # image is the patches reordered.
        tiled = patches.transpose(0, 1, 3, 2, 4, 5).reshape(
            batch, height, width, channels
        )
        return crop(tiled, padding)
    out = xp.zeros((batch, height, width, channels), dtype=patches.dtype)
    counts = (count_rows, count_cols)
    for (i, j), rows, cols in kernel_offsets((kh, kw), stride, counts):
        # For one kernel offset the windows touch distinct pixels, so a strided
        # += is exact; overlapping windows accumulate across offsets.
        out[:, rows, cols] += patches[:, :, :, i, j]
    return crop(out, padding)


def kernel_offsets(kernel, stride, counts):
    """For each kernel offset (i, j): ((i, j), rows, cols), the slices of an image's
    rows and columns that hold that element of each of ``counts`` windows (rows,
    columns) at ``stride``."""
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows = slice(i, i + stride[0] * (counts[0] - 1) + 1, stride[0])
            cols = slice(j, j + stride[1] * (counts[1] - 1) + 1, stride[1])
            yield (i, j), rows, cols


def crop(x, padding):
    """NHWC x without a border of ``padding`` rows and columns."""
    rows, cols = padding
    return x[:, rows : x.shape[1] - rows, cols : x.shape[2] - cols]
