"""Multi-output rules of training-mode batch norm on NHWC images, for gradient code.

A gradient's forward pass keeps what its backward pass reads: batch norm's centred
value ``x - mean``, its deviation ``sqrt(variance + eps)``, the scaled value
``gamma * centred / deviation`` and the output before its ReLU. The one-value rules of
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


def batch_norm_values(x, gamma, eps):
    """The values batch norm's backward pass reads, as ppto's code computes them:
    centred, deviation, scaled (``(x - mean)`` read twice, as NumPy code writes it)."""
    centred = x - reductions.reduce_mean(x, PIXELS)
    deviation = ew.sqrt(reductions.reduce_mean(centred**2, PIXELS) + eps)
    return centred, deviation, gamma * centred / deviation


def _outputs(x, gamma, beta, eps, skip=None, relu=False) -> tuple:
    """centred, deviation, scaled, then ``scaled + beta`` (plus ``skip`` where there
    is one) and its ReLU where ``relu``: each a fresh array, computed in the
    pattern's order (so each equals the unfused code's up to the sum of squares)."""
    if not _rows_fit(x, gamma, beta, skip):  # (other shapes or dtypes: NumPy's rules)
        return _plain(x, gamma, beta, eps, skip, relu)
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
            scaled = np.multiply(gamma, centred[part], out=results[0][part])
            scaled /= deviation
            out = np.add(scaled, beta, out=results[1][part])
            if others is not None:
                out += others[part]
            if relu:
                np.maximum(out, 0.0, out=results[2][part])

    run_chunks(scale, chunks)
    shape = x.shape
    images = [array.reshape(shape) for array in results]
    return (centred.reshape(shape), deviation, *images)


def _rows_fit(x, gamma, beta, skip) -> bool:
    """Whether the arrays are an NHWC image (and a skip of its shape and dtype) with
    per-channel scale and shift that keep its dtype: the two passes' case."""
    if type(x) is not np.ndarray or x.ndim != 4 or x.size == 0:
        return False
    if skip is not None and not (
        type(skip) is np.ndarray and skip.shape == x.shape and skip.dtype == x.dtype
    ):
        return False
    channel = (x.shape[-1],)
    return _fits(x, gamma, beta) and all(
        type(v) is np.ndarray and v.shape == channel for v in (gamma, beta)
    )


def _plain(x, gamma, beta, eps, skip, relu) -> tuple:
    """The pattern in NumPy, operator by operator."""
    centred = x - np.mean(x, axis=PIXELS)
    deviation = np.sqrt(np.mean(centred**2, axis=PIXELS) + eps)
    scaled = gamma * centred / deviation
    out = scaled + beta
    if skip is not None:
        out = out + skip
    return (centred, deviation, scaled, out) + ((np.maximum(out, 0.0),) if relu else ())


def _shifted(x, gamma, beta, eps):
    return _outputs(x, gamma, beta, eps)


def _shifted_relu(x, gamma, beta, eps):
    return _outputs(x, gamma, beta, eps, relu=True)


def _residual_relu(x, gamma, beta, eps, skip):
    return _outputs(x, gamma, beta, eps, skip, relu=True)


def _pattern_shifted(x, gamma, beta, eps):
    centred, deviation, scaled = batch_norm_values(x, gamma, eps)
    return centred, deviation, scaled, scaled + beta


def _relu_pattern(activation):
    def pattern(x, gamma, beta, eps):
        centred, deviation, scaled = batch_norm_values(x, gamma, eps)
        out = scaled + beta
        return centred, deviation, scaled, out, activation(out)

    return pattern


def _residual_pattern(activation):
    def pattern(x, gamma, beta, eps, skip):
        centred, deviation, scaled = batch_norm_values(x, gamma, eps)
        summed = scaled + beta + skip
        return centred, deviation, scaled, summed, activation(summed)

    return pattern


def _maximum(value):
    return ew.maximum(value, 0.0)


# (before regions: a region would take the statements after the deviation apart)
rule("batch_norm_outputs_nhwc", BATCH_NORM, FORWARD, _shifted, FIRST)(_pattern_shifted)
for activation, suffix in ((_maximum, "maximum"), (ew.relu, "relu")):
    rule(f"batch_norm_{suffix}_outputs_nhwc", BATCH_NORM, FORWARD, _shifted_relu,
         FIRST)(_relu_pattern(activation))  # fmt: skip
    rule(f"batch_norm_add_{suffix}_outputs_nhwc", [*BATCH_NORM, IMAGE], FORWARD,
         _residual_relu, FIRST)(_residual_pattern(activation))  # fmt: skip
