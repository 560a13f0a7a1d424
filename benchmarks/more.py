"""More workloads than the issue's six: ppto's gradient against a hand-written NumPy
forward+backward of the same function, in one process, checked first, then timed
alternately (median ratio). Run: ``python benchmarks/more.py`` (``--quick``).

Each one once showed ppto well behind the hand-written code, for a reason since
fixed: a matrix-vector product's gradient as a broadcast product summed (least
squares, 2.3x), a negated copy of a full gradient before a row sum (cross-entropy,
1.4x), a gather's gradient copying the zeros it adds into (embedding, 1.7x), and
conv2d and its gradients contracting a strided view of the image's windows, whose
copy in tensordot's order gathered one element at a time (conv 3x3, 2x to 10x).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import check, median_times, steady_heap  # noqa: E402

import ppto  # noqa: E402


def cross_entropy(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(logits.shape[0]), labels])


def cross_entropy_hand(logits, labels):
    n = logits.shape[0]
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    value = -np.mean((shifted - np.log(s))[np.arange(n), labels])
    d = e / s
    d[np.arange(n), labels] -= 1.0
    d /= n
    return value, (d,)


def layer_norm(x, g, b):
    mu = np.mean(x, axis=1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=1, keepdims=True)
    y = xc / np.sqrt(var + 1e-5) * g + b
    return np.sum(y * y)


def layer_norm_hand(x, g, b):
    xc = x - x.mean(axis=1, keepdims=True)
    inv = 1.0 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + 1e-5)
    xh = xc * inv
    y = xh * g + b
    dy = 2 * y
    dxh = dy * g
    dx = inv * (
        dxh
        - dxh.mean(axis=1, keepdims=True)
        - xh * (dxh * xh).mean(axis=1, keepdims=True)
    )
    return np.sum(y * y), (dx, (dy * xh).sum(0), dy.sum(0))


def attention(q, k, v):
    s = q @ k.T * 0.125
    p = np.exp(s - np.max(s, axis=1, keepdims=True))
    p = p / np.sum(p, axis=1, keepdims=True)
    return np.sum((p @ v) ** 2)


def attention_hand(q, k, v):
    s = q @ k.T * 0.125
    e = np.exp(s - s.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    o = p @ v
    do = 2 * o
    dp = do @ v.T
    ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
    return np.sum(o**2), (ds @ k * 0.125, ds.T @ q * 0.125, p.T @ do)


def least_squares(X, w, y):
    r = X @ w - y
    return np.mean(r * r)


def least_squares_hand(X, w, y):
    r = X @ w - y
    return np.mean(r * r), (X.T @ (2 * r / r.size),)


def embedding(table, rows):
    return np.sum(table[rows] ** 2)


def embedding_hand(table, rows):
    picked = table[rows]
    d = np.zeros_like(table)
    np.add.at(d, rows, 2 * picked)
    return np.sum(picked**2), (d,)


def conv_relu(x, w, b):
    y = ppto.conv2d(x, w, padding=1, layout="nhwc") + b
    return np.sum(np.maximum(y, 0.0))


def conv_relu_hand(x, w, b):
    """im2col: each output position's 3x3xC patch as a row, one matrix product."""
    n, height, width, channels = x.shape
    out_channels, _, kh, kw = w.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * channels)
    w_cols = w.transpose(2, 3, 1, 0).reshape(-1, out_channels)
    y = cols @ w_cols + b
    dy = (y > 0).astype(x.dtype)
    dw = (cols.T @ dy).reshape(kh, kw, channels, out_channels).transpose(3, 2, 0, 1)
    dcols = (dy @ w_cols.T).reshape(n, height, width, kh, kw, channels)
    dpadded = np.zeros_like(padded)
    for i in range(kh):
        for j in range(kw):
            dpadded[:, i : i + height, j : j + width] += dcols[:, :, :, i, j]
    return np.sum(np.maximum(y, 0.0)), (dpadded[:, 1:-1, 1:-1], dw, dy.sum(0))


def workloads(rng):
    n = rng.standard_normal
    return [
        ("cross-entropy 4096x1000", cross_entropy, cross_entropy_hand,
         (n((4096, 1000)), rng.integers(0, 1000, 4096)), 0),
        ("layer norm 4096x1024", layer_norm, layer_norm_hand,
         (n((4096, 1024)), n(1024), n(1024)), (0, 1, 2)),
        ("attention 1024x64", attention, attention_hand,
         tuple(n((1024, 64)) for _ in range(3)), (0, 1, 2)),
        ("least squares 20000x200", least_squares, least_squares_hand,
         (n((20000, 200)), n(200), n(20000)), 1),
        ("embedding 50000x128", embedding, embedding_hand,
         (n((50000, 128)), rng.integers(0, 50000, 256)), 0),
        ("conv 3x3 nhwc 8x32x32x32", conv_relu, conv_relu_hand,
         (n((8, 32, 32, 32)), n((32, 32, 3, 3)) * 0.1, n(32)), (0, 1, 2)),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    options = parser.parse_args()
    print(steady_heap(system_heap=False))
    print(f"{'workload':26s} {'ppto ms':>8s} {'numpy ms':>9s} {'ratio':>6s}")
    for name, function, hand, args, wrt in workloads(np.random.default_rng(0)):
        gradient = ppto.grad(function, wrt=wrt)
        grads = gradient(*args)
        check(
            grads if isinstance(grads, tuple) else (grads,), hand(*args)[1], "float64"
        )
        mine, theirs = median_times((gradient, hand), args, 5 if options.quick else 25)
        print(f"{name:26s} {mine * 1e3:8.2f} {theirs * 1e3:9.2f} {mine / theirs:6.2f}")


if __name__ == "__main__":
    main()
