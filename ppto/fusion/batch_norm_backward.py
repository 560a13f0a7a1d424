"""Training-mode batch norm's backward pass on NHWC images, as ppto's rules write it,
fused on the CPU.

For ``y = gamma * centred / deviation + beta`` (``centred = x - mean``, ``deviation =
sqrt(variance + eps)``, statistics over the pixels) the gradient code computes the
shift's and scale's gradients and the input's, the latter accumulated into one name
(``dh = dt11``, ``dh = dh + dt9``, ``dh = dh + unreduce(dmean / n, ...)``). Written
out, with ``g`` the output's gradient and ``scaled = gamma * centred / deviation``:

    dbeta  = sum(g)                 dgamma = sum(g * centred) / deviation
    dx = (gamma / deviation) * g + b * centred + k   per channel, where
    b = -sum(g * scaled) / (deviation**2 * n),  k = -(gamma / deviation * sum(g)
        + 2 * b * sum(centred)) / n

(``sum(centred)`` is zero up to rounding, but the code computes it, so the kernel
does too). The kernel makes one pass over blocks of rows for the four per-channel
sums, while each block is in cache, then one pass writing ``dx``: two passes over
the images where the statements one by one make about fifteen.
"""

from __future__ import annotations

import numpy as np

from ppto.fusion.cnn_patterns import CHANNEL, FIRST, IMAGE, PIXELS
from ppto.fusion.kernels import CHUNK_BYTES
from ppto.fusion.parallel import run_chunks
from ppto.fusion.patterns import BACKWARD, rule
from ppto.ops import reductions
from ppto.ops.shape import target_shape


def batch_norm_backward(g, scaled, deviation, centred, gamma, count, shape, like):
    """Batch norm's gradients as ppto's rules write them (``count``: the pixels per
    channel; ``shape`` and ``like``: what the two ``unreduce`` calls broadcast to,
    a shape and an image): the shift's, the scale's and the input's."""
    return _pattern(g, scaled, deviation, centred, gamma, count, shape, like, None)


def batch_norm_backward_added(
    g, scaled, deviation, centred, gamma, count, shape, like, earlier
):
    """``batch_norm_backward`` with the input's gradient added to its ``earlier``
    one (an input read elsewhere too)."""
    return _pattern(g, scaled, deviation, centred, gamma, count, shape, like, earlier)


def _pattern(g, scaled, deviation, centred, gamma, count, shape, like, earlier):
    dbeta = reductions.reduce_sum(g, PIXELS)
    dcentred = g / deviation
    ddeviation = -reductions.reduce_sum(g * scaled, PIXELS) / deviation
    dvariance = ddeviation / (2 * deviation)
    dgamma = reductions.reduce_sum(dcentred * centred, PIXELS)
    dinput = dcentred * gamma
    dx = dinput if earlier is None else earlier + dinput
    dmean = -reductions.reduce_sum(dinput, PIXELS)
    dsquare = reductions.unreduce(dvariance / count, shape, PIXELS) * 2 * centred
    dx = dx + dsquare
    dmean = dmean + -reductions.reduce_sum(dsquare, PIXELS)
    return dbeta, dgamma, dx + reductions.unreduce(dmean / count, like, PIXELS)


def _gradients(g, scaled, deviation, centred, gamma, count, shape, like,
               earlier=None):  # fmt: skip
    """The pattern's values: the per-channel sums in one chunked pass, then the
    input's gradient in another (see the module docstring)."""
    arguments = (g, scaled, deviation, centred, gamma, count, shape, like, earlier)
    if not _fits(*arguments):
        return _plain(*arguments)
    channels = g.shape[-1]
    rows = [a.reshape(-1, channels) for a in (g, scaled, centred)]
    chunk = max(1, CHUNK_BYTES // (g.itemsize * channels))
    chunks = -(-len(rows[0]) // chunk)
    sums = [None] * chunks  # per chunk, added in chunk order (the same each call)

    def reduce(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            dy, out, centre = (a[part] for a in rows)
            sums[number] = (
                np.add.reduce(dy, axis=0),
                np.einsum("rc,rc->c", dy, out),
                np.einsum("rc,rc->c", dy, centre),
                np.add.reduce(centre, axis=0),
            )

    run_chunks(reduce, chunks)
    g_sum, g_scaled, g_centred, centred_sum = np.add.reduce(np.array(sums), axis=0)
    scale = gamma / deviation
    slope = -g_scaled / deviation / (2 * deviation) / count * 2
    shift = -(scale * g_sum + slope * centred_sum) / count
    dx = np.empty_like(rows[0])
    added = None if earlier is None else earlier.reshape(rows[0].shape)

    def write(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            out = np.multiply(rows[0][part], scale, out=dx[part])
            out += np.multiply(rows[2][part], slope)
            out += shift
            if added is not None:
                out += added[part]

    run_chunks(write, chunks)
    return g_sum, g_centred / deviation, dx.reshape(g.shape)


def _fits(g, scaled, deviation, centred, gamma, count, shape, like, earlier) -> bool:
    """Whether the arguments are NHWC images of one floating dtype (three, and the
    earlier gradient), per-channel deviation and scale of it, a count of it (a number
    or 0-d array) and broadcast targets of the images' shape: the two passes' case
    (else NumPy's types)."""
    images = (g, scaled, centred) + (() if earlier is None else (earlier,))
    if type(g) is not np.ndarray or g.ndim != 4 or g.size == 0 or g.dtype.kind != "f":
        return False
    if not all(type(a) is np.ndarray and a.shape == g.shape for a in images):
        return False
    channel = (g.shape[-1],)
    if not all(
        type(a) is np.ndarray and a.shape == channel for a in (deviation, gamma)
    ):
        return False
    if {a.dtype for a in (*images, deviation, gamma)} != {g.dtype}:
        return False
    if type(count) not in (int, float) and not (
        type(count) is np.ndarray and count.shape == () and count.dtype == g.dtype
    ):
        return False
    return all(target_shape(t) == g.shape for t in (shape, like))


def _plain(g, scaled, deviation, centred, gamma, count, shape, like, earlier) -> tuple:
    """The pattern in NumPy, operator by operator."""
    dcentred = g / deviation
    dvariance = -np.sum(g * scaled, axis=PIXELS) / deviation / (2 * deviation)
    dinput = dcentred * gamma
    dx = dinput if earlier is None else earlier + dinput
    dmean = -np.sum(dinput, axis=PIXELS)
    dsquare = _unreduce(dvariance / count, shape) * 2 * centred
    dx = dx + dsquare
    dmean = dmean + -np.sum(dsquare, axis=PIXELS)
    dx = dx + _unreduce(dmean / count, like)
    return np.sum(g, axis=PIXELS), np.sum(dcentred * centred, axis=PIXELS), dx


def _unreduce(value, like):
    return reductions.unreduce.impl(np, value, like, PIXELS)


# (before regions: a region would take its elementwise statements apart)
SHAPES = [IMAGE, IMAGE, CHANNEL, IMAGE, CHANNEL, (), IMAGE, IMAGE]
rule("batch_norm_backward_nhwc", SHAPES, BACKWARD, _gradients, FIRST)(
    batch_norm_backward
)
rule("batch_norm_backward_added_nhwc", [*SHAPES, IMAGE], BACKWARD, _gradients, FIRST)(
    batch_norm_backward_added
)
