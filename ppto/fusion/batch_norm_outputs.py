"""Multi-output rules of training-mode batch norm on NHWC images, for gradient code.

A gradient's forward pass keeps what its backward pass reads: batch norm's centred
value ``x - mean``, its deviation ``sqrt(variance + eps)``, the scaled value
``gamma * centred / deviation`` (or, written the other way, the normalized value
``centred / deviation`` before ``gamma * normalized + beta``) and the output before
its ReLU. The one-value rules of
``ppto.fusion.cnn_patterns`` cannot absorb statements whose values are read again, so
these rules return all of them (``FusionRule.outputs``); fused code binds each to the
name the unfused code gave it. The kernel makes two passes over blocks of rows while
they are in cache: the centred value with its per-channel sum of squares, then every
value after the deviation. Each value is one array, as it must be: the backward pass
reads them.
"""

from __future__ import annotations

import numpy as np

from ppto.fusion.cnn_patterns import BATCH_NORM, FIRST, IMAGE, PIXELS
from ppto.fusion.kernels import CHUNK_BYTES
from ppto.fusion.parallel import run_chunks
from ppto.fusion.patterns import FORWARD, _fits, rule
from ppto.ops import elementwise as ew
from ppto.ops import reductions


def batch_norm_values(x, gamma, beta, eps, normalized=False):
    """The values batch norm's backward pass reads, as ppto's code computes them
    (``(x - mean)`` read twice, as NumPy code writes it): centred, deviation, the
    scaled value ``gamma * centred / deviation`` (or the normalized one ``centred /
    deviation``, then scaled), and the shifted output."""
    centred = x - reductions.reduce_mean(x, PIXELS)
    deviation = ew.sqrt(reductions.reduce_mean(centred**2, PIXELS) + eps)
    if normalized:
        third = centred / deviation
        return centred, deviation, third, gamma * third + beta
    third = gamma * centred / deviation
    return centred, deviation, third, third + beta


def _outputs(x, gamma, beta, eps, skip=None, relu=False, normalized=False) -> tuple:
    """centred, deviation, scaled (or normalized), then the output (plus ``skip``
    where there is one) and its ReLU where ``relu``: each a fresh array, computed in
    the pattern's order (so each equals the unfused code's up to the sum of
    squares)."""
    if not _rows_fit(x, gamma, beta, eps, skip):  # (else NumPy's types and shapes)
        return _plain(x, gamma, beta, eps, skip, relu, normalized)
    channels = x.shape[-1]
    rows = x.reshape(-1, channels)
    chunk = max(1, CHUNK_BYTES // (x.itemsize * channels))
    chunks = -(-len(rows) // chunk)
    mean = np.mean(x, axis=PIXELS)
    centred = np.empty_like(rows)
    squares = [None] * chunks  # per chunk, added in chunk order (the same each call)

    def centre(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            piece = np.subtract(rows[part], mean, out=centred[part])
            squares[number] = np.einsum("rc,rc->c", piece, piece)

    run_chunks(centre, chunks)
    deviation = np.sqrt(np.add.reduce(np.array(squares), axis=0) / len(rows) + eps)
    results = [np.empty_like(rows) for _ in range(2 + bool(relu))]
    others = None if skip is None else skip.reshape(rows.shape)

    def scale(claim):
        for number in iter(claim, None):
            part = slice(number * chunk, (number + 1) * chunk)
            third, out = results[0][part], results[1][part]
            if normalized:
                np.divide(centred[part], deviation, out=third)
                np.multiply(gamma, third, out=out)
                out += beta
            else:
                np.multiply(gamma, centred[part], out=third)
                third /= deviation
                np.add(third, beta, out=out)  # (not a copy, then beta: a pass less)
            if others is not None:
                out += others[part]
            if relu:
                np.maximum(out, 0.0, out=results[2][part])

    run_chunks(scale, chunks)
    shape = x.shape
    images = [array.reshape(shape) for array in results]
    return (centred.reshape(shape), deviation, *images)


def _rows_fit(x, gamma, beta, eps, skip) -> bool:
    """Whether the arrays are an NHWC image (and a skip of its shape and dtype) with
    per-channel scale and shift and an eps that keep its dtype: the two passes'
    case (their arrays are of the image's dtype)."""
    if type(x) is not np.ndarray or x.ndim != 4 or x.size == 0:
        return False
    if skip is not None and not (
        type(skip) is np.ndarray and skip.shape == x.shape and skip.dtype == x.dtype
    ):
        return False
    channel = (x.shape[-1],)
    return _fits(x, gamma, beta, eps) and all(
        type(v) is np.ndarray and v.shape == channel for v in (gamma, beta)
    )


def _plain(x, gamma, beta, eps, skip, relu, normalized) -> tuple:
    """The pattern in NumPy, operator by operator."""
    centred = x - np.mean(x, axis=PIXELS)
    deviation = np.sqrt(np.mean(centred**2, axis=PIXELS) + eps)
    if normalized:
        third = centred / deviation
        out = gamma * third + beta
    else:
        third = gamma * centred / deviation
        out = third + beta
    if skip is not None:
        out = out + skip
    return (centred, deviation, third, out) + ((np.maximum(out, 0.0),) if relu else ())


def _implementation(normalized: bool, relu: bool, residual: bool, variant: str):
    """The kernel of one variant, with the rule's parameters."""
    if residual:

        def kernel(x, gamma, beta, eps, skip):
            return _outputs(x, gamma, beta, eps, skip, relu, normalized)
    else:

        def kernel(x, gamma, beta, eps):
            return _outputs(x, gamma, beta, eps, None, relu, normalized)

    kernel.__name__ = kernel.__qualname__ = f"_batch_norm_{variant}"
    return kernel


def _pattern(normalized: bool, activation, residual: bool):
    """The values of one variant: those of ``batch_norm_values``, the output with the
    skip added where ``residual``, then its ``activation`` where there is one."""
    if residual:

        def pattern(x, gamma, beta, eps, skip):
            *values, out = batch_norm_values(x, gamma, beta, eps, normalized)
            summed = out + skip
            return (*values, summed, activation(summed))
    elif activation is not None:

        def pattern(x, gamma, beta, eps):
            *values, out = batch_norm_values(x, gamma, beta, eps, normalized)
            return (*values, out, activation(out))
    else:

        def pattern(x, gamma, beta, eps):
            return batch_norm_values(x, gamma, beta, eps, normalized)

    return pattern


def _variant(normalized: bool, relu, residual: bool) -> str:
    words = ["normalized"] * normalized + ["add"] * residual + [relu] * bool(relu)
    return "_".join(words + ["outputs"])


def _maximum(value):
    return ew.maximum(value, 0.0)


# (before regions: a region would take the statements after the deviation apart)
for normalized in (False, True):
    for activation, name in ((None, ""), (_maximum, "maximum"), (ew.relu, "relu")):
        for residual in (False, True) if activation is not None else (False,):
            variant = _variant(normalized, name, residual)
            shapes = [*BATCH_NORM, IMAGE] if residual else BATCH_NORM
            relu = activation is not None
            implementation = _implementation(normalized, relu, residual, variant)
            rule(f"batch_norm_{variant}_nhwc", shapes, FORWARD, implementation, FIRST)(
                _pattern(normalized, activation, residual)
            )
