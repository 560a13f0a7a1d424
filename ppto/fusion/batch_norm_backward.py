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

import inspect
import itertools
from dataclasses import dataclass

import numpy as np

from ppto.fusion.cnn_patterns import FIRST, PIXELS
from ppto.fusion.kernels import CHUNK_BYTES
from ppto.fusion.parallel import run_chunks
from ppto.fusion.patterns import BACKWARD, rule
from ppto.ops import elementwise, reductions
from ppto.ops.shape import target_shape
from ppto.runtime.backends import where_into


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


def _pattern(layout: Layout, added: bool, named: bool, masked: bool, tied: bool):
    """The gradient code of one layout, the input's added to an ``earlier`` one
    where ``added`` (the input is read elsewhere too); where ``named``, as the code
    is for a function naming ``x - mean`` (its gradient is accumulated first, then
    added to the input's); where ``masked``, the output's gradient ``g`` is first
    masked by a ReLU's ``where(condition, g, 0.0)`` that nothing else reads (the
    ReLU after the batch norm: ppto.relu's ``condition`` is ``t > 0``), or where
    ``tied`` too by np.maximum's ``where(condition, g, where(tie, 0.5 * g, 0.0))``
    (``t > 0.0``, and ``t == 0.0``: a tie shares the gradient)."""
    axes, keep = layout.axes, layout.keepdims

    def sum_(value):
        return reductions.reduce_sum(value, axes, keep)

    def back(value, like):
        return reductions.unreduce(value, like, axes, keep)

    def values(g, scaled, deviation, centred, gamma, count, like, earlier=None,
               shape=None, condition=None, tie=None):  # fmt: skip
        if tie is not None:
            g = elementwise.where(condition, g, elementwise.where(tie, 0.5 * g, 0.0))
        elif condition is not None:
            g = elementwise.where(condition, g, 0.0)
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

    parameters = _parameters(layout, added, masked, tied)

    def pattern(*arguments):
        return values(**dict(zip(parameters, arguments)))

    # (the registry reads a pattern's parameters from its signature)
    pattern.__signature__ = inspect.Signature(
        [
            inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for p in parameters
        ]  # fmt: skip
    )
    pattern.__name__ = pattern.__qualname__ = _name(layout, added, named, masked, tied)
    pattern.values = values  # (the NumPy fallback runs it on arrays)
    return pattern


def _parameters(layout: Layout, added: bool, masked: bool, tied: bool) -> tuple:
    """A rule's parameters, in the order its fused call passes them: the NHWC code
    broadcasts the variance's gradient back to the image's ``shape``."""
    return (
        "g",
        *["condition"] * masked,
        *["tie"] * tied,
        "scaled",
        "deviation",
        "centred",
        "gamma",
        "count",
        *["shape"] * (not layout.keepdims),
        "like",
        *["earlier"] * added,
    )


def _name(layout: Layout, added: bool, named: bool, masked: bool, tied: bool) -> str:
    words = ["batch_norm_backward"] + ["centred"] * named + ["masked"] * masked
    words += ["tied"] * tied
    return "_".join([*words, *["added"] * added, layout.name])


def _implementation(layout: Layout, name: str, pattern):
    """The kernel of one layout, with its rule's parameters (``_gradients``)."""
    parameters = tuple(pattern.__signature__.parameters)

    def kernel(*arguments):
        given = dict(zip(parameters, arguments))
        return _gradients(layout, pattern.values, **given)

    kernel.__name__ = kernel.__qualname__ = f"_{name}"
    return kernel


def _gradients(layout, values, g, scaled, deviation, centred, gamma, count, like,
               earlier=None, shape=None, condition=None, tie=None):  # fmt: skip
    """The pattern's values: the per-channel sums in one chunked pass, then the
    input's gradient in another (see the module docstring), ``g`` masked block by
    block in the first where a ``condition`` (and a ``tie``) masks it; other types
    and shapes, the pattern's own operators in NumPy (``values``)."""
    arguments = (g, scaled, deviation, centred, gamma, count, like, earlier, shape,
                 condition)  # fmt: skip
    if not _fits(layout, *arguments, tie):
        return values(*arguments, tie)
    channels = layout.channels(g)
    blocks = [layout.blocks(a) for a in (g, scaled, centred)]
    masks = None if condition is None else layout.blocks(condition)
    ties = None if tie is None else layout.blocks(tie)
    # the masked gradient, written block by block while its sums are taken, then
    # overwritten by dx (its last reader): no other image allocated
    masked = None if masks is None else np.empty_like(blocks[0])
    block_bytes = g.itemsize * (blocks[0][0].size)
    chunk = max(1, CHUNK_BYTES // block_bytes)
    chunks = -(-len(blocks[0]) // chunk)
    sums = [None] * chunks  # per chunk, added in chunk order (the same each call)
    kept = (0, 2) if layout.keepdims else 0  # the axes of a block but the channels'
    products = "nck,nck->c" if layout.keepdims else "rc,rc->c"

    def gradient(part):
        """The output's gradient over one chunk, masked where a condition is."""
        if masks is None:
            return blocks[0][part]
        if ties is None:
            return where_into(masks[part], blocks[0][part], 0.0, out=masked[part])
        # a tie's half first, then the gradient where the condition holds: both
        # written into the masked block itself
        halves = np.multiply(blocks[0][part], 0.5, out=masked[part])
        halves = where_into(ties[part], halves, 0.0, out=halves)
        return where_into(masks[part], blocks[0][part], halves, out=halves)

    def reduce(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            dy = gradient(part)
            out, centre = blocks[1][part], blocks[2][part]
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
    dx = np.empty_like(blocks[0]) if masked is None else masked
    dy = blocks[0] if masked is None else masked
    added = None if earlier is None else layout.blocks(earlier)

    def write(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            out = np.multiply(dy[part], scale, out=dx[part])
            out += np.multiply(blocks[2][part], slope)
            out += shift
            if added is not None:
                out += added[part]

    run_chunks(write, chunks)
    per_channel = layout.channel_shape(channels)
    dgamma = g_centred / deviation
    return g_sum.reshape(per_channel), dgamma.reshape(per_channel), dx.reshape(g.shape)


def _fits(layout, g, scaled, deviation, centred, gamma, count, like, earlier,
          shape, condition, tie=None, array=np.ndarray) -> bool:  # fmt: skip
    """Whether the arguments are images of one floating dtype (three, and the
    earlier gradient), boolean masks of their shape where there is a condition
    (and a tie),
    per-channel deviation and scale of it, a count of it (a number or 0-d array)
    and broadcast targets of the images' shape: the two passes' case (else
    NumPy's types). ``array``: the arrays' type (CuPy's, for its kernels)."""
    images = (g, scaled, centred) + (() if earlier is None else (earlier,))
    if type(g) is not array or g.ndim != 4 or g.size == 0 or g.dtype.kind != "f":
        return False
    if not all(type(a) is array and a.shape == g.shape for a in images):
        return False
    for mask in (condition, tie):
        if mask is not None and not (
            type(mask) is array and mask.dtype == bool and mask.shape == g.shape
        ):
            return False
    channel = layout.channel_shape(layout.channels(g))
    scales = (channel, channel[1:]) if layout.keepdims else (channel,)
    if not (
        type(deviation) is array
        and deviation.shape == channel
        and type(gamma) is array
        and gamma.shape in scales
    ):
        return False
    if {a.dtype for a in (*images, deviation, gamma)} != {g.dtype}:
        return False
    if type(count) not in (int, float) and not (
        type(count) is array and count.shape == () and count.dtype == g.dtype
    ):
        return False
    targets = (like,) if layout.keepdims else (shape, like)
    return all(target_shape(t) == g.shape for t in targets)


def _cuda_kernel(layout: Layout, values):
    """A function of a rule making its CuPy kernel (``ppto.fusion.
    cuda_batch_norm_backward``), which the registry calls on first use."""

    def make(rule):
        from ppto.fusion.cuda_batch_norm_backward import CudaBatchNormBackward

        return CudaBatchNormBackward(rule.kernel_name, layout, rule.parameters, values)

    return make


IMAGE, CHANNEL = (2, 5, 4, 3), (3,)
NCHW_IMAGE, NCHW_CHANNEL = (2, 3, 5, 4), (1, 3, 1, 1)
# (before regions: a region would take its elementwise statements apart)
# masks: none, ppto.relu's, np.maximum's (its tie shares the gradient)
for layout, named, (masked, tied), added in itertools.product(
    (NHWC, NCHW), (False, True), ((False, False), (True, False), (True, True)),
    (False, True)
):  # fmt: skip
    pattern = _pattern(layout, added, named, masked, tied)
    image, channel = (NCHW_IMAGE, NCHW_CHANNEL) if layout.keepdims else (IMAGE, CHANNEL)
    shapes = {"deviation": channel, "gamma": channel, "count": (), "shape": image}
    parameters = _parameters(layout, added, masked, tied)
    name = _name(layout, added, named, masked, tied)
    implementation = _implementation(layout, name, pattern)
    rule(name, [shapes.get(p, image) for p in parameters], BACKWARD, implementation,
         FIRST, cuda=_cuda_kernel(layout, pattern.values))(pattern)  # fmt: skip
