"""Training-mode batch norm's backward pass on NHWC and NCHW images, as ppto's rules
write it, fused on the CPU.

For ``y = gamma * centred / deviation + beta`` (``centred = x - mean``, ``deviation =
sqrt(variance + eps)``, statistics over the pixels) the gradient code computes the
shift's and scale's gradients and the input's, the latter accumulated into one name
(``dh = dt11``, ``dh = dh + dt9``, ``dh = dh + unreduce(dmean / n, ...)``). Written
out, with ``g`` the output's gradient and ``scaled = gamma * centred / deviation``:

    dbeta  = sum(g)                 dgamma = sum(g * centred) / deviation
    dx = (gamma / deviation) * g + b * centred + k   per channel, where
    b = -sum(g * scaled) / (deviation**2 * n),  k = -(gamma / deviation * sum(g)
        + b * sum(centred)) / n

(``sum(centred)`` is zero up to rounding, but the code computes it, so the kernel
does too). The kernel makes one pass over blocks of the images for the four
per-channel sums, while each block is in cache, then one pass writing ``dx``: two
passes over the images where the statements one by one make about fifteen. NHWC
statistics are over axes (0, 1, 2) (blocks of rows of channels), NCHW ones over (0,
2, 3) with their dims kept, as NCHW code must write them to broadcast (blocks of
whole images); a rule's pattern is the code ppto writes for each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppto.fusion.cnn_patterns import FIRST, PIXELS
from ppto.fusion.kernels import CHUNK_BYTES
from ppto.fusion.parallel import run_chunks
from ppto.fusion.patterns import BACKWARD, rule
from ppto.ops import reductions
from ppto.ops.shape import target_shape


@dataclass(frozen=True)
class Layout:
    """Where an image's channels are: the statistics' axes, whether the code keeps
    their dims, and the per-channel values' shape for ``channels`` channels."""

    name: str
    axes: tuple
    keepdims: bool

    def channel_shape(self, channels: int) -> tuple:
        return (1, channels, 1, 1) if self.keepdims else (channels,)

    def blocks(self, image: np.ndarray) -> np.ndarray:
        """The image as blocks the passes cut along their first axis: rows of
        channels (NHWC) or images of channels by pixels (NCHW)."""
        if self.keepdims:
            return image.reshape(image.shape[0], image.shape[1], -1)
        return image.reshape(-1, image.shape[-1])

    def channels(self, image: np.ndarray) -> int:
        return image.shape[1] if self.keepdims else image.shape[-1]


NHWC = Layout("nhwc", PIXELS, False)
NCHW = Layout("nchw", (0, 2, 3), True)


def _pattern(layout: Layout, added: bool, named: bool):
    """The gradient code of one layout, the input's added to an ``earlier`` one
    where ``added`` (the input is read elsewhere too); where ``named``, as the code
    is for a function naming ``x - mean`` (its gradient is accumulated first, then
    added to the input's)."""
    axes, keep = layout.axes, layout.keepdims

    def sum_(value):
        return reductions.reduce_sum(value, axes, keep)

    def back(value, like):
        return reductions.unreduce(value, like, axes, keep)

    def values(g, scaled, deviation, centred, gamma, count, like, earlier, shape):
        dbeta = sum_(g)
        dcentred = g / deviation
        ddeviation = -sum_(g * scaled) / deviation
        dvariance = ddeviation / (2 * deviation)
        # (kept dims broadcast as they are: else the code broadcasts the variance's
        # gradient back to the image)
        dsquare = (dvariance / count if keep else back(dvariance / count, shape)) * 2
        if named:
            dnamed = dsquare * centred
            dgamma = sum_(dcentred * centred)
            dnamed = dnamed + dcentred * gamma
            dx = dnamed if earlier is None else earlier + dnamed
            return dbeta, dgamma, dx + back(-sum_(dnamed) / count, like)
        dgamma = sum_(dcentred * centred)
        dinput = dcentred * gamma
        dx = dinput if earlier is None else earlier + dinput
        dmean = -sum_(dinput)
        dsquare = dsquare * centred
        dx = dx + dsquare
        dmean = dmean + -sum_(dsquare)
        return dbeta, dgamma, dx + back(dmean / count, like)

    if keep and added:

        def pattern(g, scaled, deviation, centred, gamma, count, like, earlier):
            return values(g, scaled, deviation, centred, gamma, count, like, earlier,
                          None)  # fmt: skip
    elif keep:

        def pattern(g, scaled, deviation, centred, gamma, count, like):
            return values(g, scaled, deviation, centred, gamma, count, like, None,
                          None)  # fmt: skip
    elif added:

        def pattern(g, scaled, deviation, centred, gamma, count, shape, like, earlier):
            return values(g, scaled, deviation, centred, gamma, count, like, earlier,
                          shape)  # fmt: skip
    else:

        def pattern(g, scaled, deviation, centred, gamma, count, shape, like):
            return values(g, scaled, deviation, centred, gamma, count, like, None,
                          shape)  # fmt: skip

    pattern.__name__ = pattern.__qualname__ = _name(layout, added, named)
    pattern.values = values  # (the NumPy fallback runs it on arrays)
    return pattern


def _name(layout: Layout, added: bool, named: bool) -> str:
    words = ["batch_norm_backward"] + ["centred"] * named + ["added"] * added
    return "_".join([*words, layout.name])


def _implementation(layout: Layout, name: str, pattern):
    """The kernel of one layout, with its rule's parameters (``_gradients``)."""
    if layout.keepdims:

        def kernel(g, scaled, deviation, centred, gamma, count, like, earlier=None):
            arguments = (g, scaled, deviation, centred, gamma, count, like, earlier)
            return _gradients(layout, pattern.values, *arguments, None)
    else:

        def kernel(g, scaled, deviation, centred, gamma, count, shape, like,
                   earlier=None):  # fmt: skip
            arguments = (g, scaled, deviation, centred, gamma, count, like, earlier)
            return _gradients(layout, pattern.values, *arguments, shape)

    kernel.__name__ = kernel.__qualname__ = f"_{name}"
    return kernel


def _gradients(layout, values, g, scaled, deviation, centred, gamma, count, like,
               earlier, shape):  # fmt: skip
    """The pattern's values: the per-channel sums in one chunked pass, then the
    input's gradient in another (see the module docstring); other types and
    shapes, the pattern's own operators in NumPy (``values``)."""
    arguments = (g, scaled, deviation, centred, gamma, count, like, earlier, shape)
    if not _fits(layout, *arguments):
        return values(*arguments)
    channels = layout.channels(g)
    blocks = [layout.blocks(a) for a in (g, scaled, centred)]
    block_bytes = g.itemsize * (blocks[0][0].size)
    chunk = max(1, CHUNK_BYTES // block_bytes)
    chunks = -(-len(blocks[0]) // chunk)
    sums = [None] * chunks  # per chunk, added in chunk order (the same each call)
    kept = (0, 2) if layout.keepdims else 0  # the axes of a block but the channels'
    products = "nck,nck->c" if layout.keepdims else "rc,rc->c"

    def reduce(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            dy, out, centre = (a[part] for a in blocks)
            sums[number] = (
                np.add.reduce(dy, axis=kept),
                np.einsum(products, dy, out),
                np.einsum(products, dy, centre),
                np.add.reduce(centre, axis=kept),
            )

    run_chunks(reduce, chunks)
    g_sum, g_scaled, g_centred, centred_sum = np.add.reduce(np.array(sums), axis=0)
    deviation, gamma = deviation.reshape(channels), gamma.reshape(channels)
    scale = gamma / deviation
    slope = -g_scaled / deviation / (2 * deviation) / count * 2
    shift = -(scale * g_sum + slope * centred_sum) / count
    if layout.keepdims:  # (broadcast along a block's pixels)
        scale, slope, shift = (v.reshape(channels, 1) for v in (scale, slope, shift))
    dx = np.empty_like(blocks[0])
    added = None if earlier is None else layout.blocks(earlier)

    def write(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            out = np.multiply(blocks[0][part], scale, out=dx[part])
            out += np.multiply(blocks[2][part], slope)
            out += shift
            if added is not None:
                out += added[part]

    run_chunks(write, chunks)
    per_channel = layout.channel_shape(channels)
    dgamma = g_centred / deviation
    return g_sum.reshape(per_channel), dgamma.reshape(per_channel), dx.reshape(g.shape)


def _fits(layout, g, scaled, deviation, centred, gamma, count, like, earlier,
          shape) -> bool:  # fmt: skip
    """Whether the arguments are images of one floating dtype (three, and the
    earlier gradient), per-channel deviation and scale of it, a count of it (a
    number or 0-d array) and broadcast targets of the images' shape: the two
    passes' case (else NumPy's types)."""
    images = (g, scaled, centred) + (() if earlier is None else (earlier,))
    if type(g) is not np.ndarray or g.ndim != 4 or g.size == 0 or g.dtype.kind != "f":
        return False
    if not all(type(a) is np.ndarray and a.shape == g.shape for a in images):
        return False
    channel = layout.channel_shape(layout.channels(g))
    scales = (channel, channel[1:]) if layout.keepdims else (channel,)
    if not (
        type(deviation) is np.ndarray
        and deviation.shape == channel
        and type(gamma) is np.ndarray
        and gamma.shape in scales
    ):
        return False
    if {a.dtype for a in (*images, deviation, gamma)} != {g.dtype}:
        return False
    if type(count) not in (int, float) and not (
        type(count) is np.ndarray and count.shape == () and count.dtype == g.dtype
    ):
        return False
    targets = (like,) if layout.keepdims else (shape, like)
    return all(target_shape(t) == g.shape for t in targets)


IMAGE, CHANNEL = (2, 5, 4, 3), (3,)
NCHW_IMAGE, NCHW_CHANNEL = (2, 3, 5, 4), (1, 3, 1, 1)
# (before regions: a region would take its elementwise statements apart)
for layout in (NHWC, NCHW):
    for named in (False, True):
        for added in (False, True):
            pattern = _pattern(layout, added, named)
            if layout.keepdims:
                image, channel, shapes = NCHW_IMAGE, NCHW_CHANNEL, []
            else:
                image, channel, shapes = IMAGE, CHANNEL, [IMAGE]
            shapes = [image, image, channel, image, channel, (), *shapes, image]
            shapes += [image] * added
            name = _name(layout, added, named)
            implementation = _implementation(layout, name, pattern)
            rule(name, shapes, BACKWARD, implementation, FIRST)(pattern)
