"""The residual-block workload of ``tools/fusion_bench.py``: examples/resnet_block.py's
ResNet basic block on NHWC images (conv - batch norm - ReLU - conv - batch norm, the
skip added, ReLU, global average pooling, a linear layer, softmax cross-entropy) and
its forward and backward written by hand in NumPy (im2col convolutions, the textbook
batch norm gradient)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from workloads import Workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from resnet_block import block_loss, make_arguments  # noqa: E402

EPS = 1e-5


def _patches(x):
    """The (N*H*W, 9*C) im2col matrix of NHWC ``x`` for a 3x3 kernel, padding 1."""
    n, h, w, c = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    return np.ascontiguousarray(windows.transpose(0, 1, 2, 4, 5, 3)).reshape(
        n * h * w, 9 * c
    )


def _weights(w):
    return w.transpose(2, 3, 1, 0).reshape(-1, w.shape[0])


def _conv(x, w):
    patches = _patches(x)
    return (patches @ _weights(w)).reshape(x.shape[:3] + (w.shape[0],)), patches


def _conv_backward(dy, x, w, patches):
    rows = dy.reshape(-1, w.shape[0])
    dw = (patches.T @ rows).reshape(3, 3, w.shape[1], w.shape[0]).transpose(3, 2, 0, 1)
    parts = (rows @ _weights(w).T).reshape(x.shape[:3] + (3, 3, x.shape[3]))
    n, h, width, _ = x.shape
    dx = np.zeros((n, h + 2, width + 2, x.shape[3]), x.dtype)
    for i in range(3):
        for j in range(3):
            dx[:, i : i + h, j : j + width] += parts[:, :, :, i, j]
    return dx[:, 1:-1, 1:-1], np.ascontiguousarray(dw)


def _batch_norm(h, gamma, beta):
    centred = h - h.mean(axis=(0, 1, 2))
    inverse = 1.0 / np.sqrt(np.mean(centred * centred, axis=(0, 1, 2)) + EPS)
    normal = centred * inverse
    return normal * gamma + beta, (normal, inverse)


def _batch_norm_backward(dy, gamma, saved):
    normal, inverse = saved
    count = dy.size // dy.shape[-1]
    dbeta = dy.sum(axis=(0, 1, 2))
    dgamma = np.einsum("nhwc,nhwc->c", dy, normal)
    dnormal = dy * gamma
    dh = dnormal * count
    dh -= (dbeta * gamma)[None, None, None]
    dh -= normal * (dgamma * gamma)
    dh *= inverse / count
    return dh, dgamma, dbeta


def block_hand(x, w1, g1, b1, w2, g2, b2, W, c, labels):
    """The loss and its gradients with respect to x and every parameter."""
    h1, patches1 = _conv(x, w1)
    n1, saved1 = _batch_norm(h1, g1, b1)
    r1 = np.maximum(n1, 0.0)
    h2, patches2 = _conv(r1, w2)
    n2, saved2 = _batch_norm(h2, g2, b2)
    joined = n2 + x
    out = np.maximum(joined, 0.0)
    pooled = out.mean(axis=(1, 2))
    logits = pooled @ W + c
    shifted = logits - logits.max(axis=1, keepdims=True)
    exps = np.exp(shifted)
    sums = exps.sum(axis=1, keepdims=True)
    batch = x.shape[0]
    loss = -np.sum(labels * (shifted - np.log(sums))) / batch

    dlogits = (exps / sums * labels.sum(axis=1, keepdims=True) - labels) / batch
    dW, dc = pooled.T @ dlogits, dlogits.sum(axis=0)
    dpooled = dlogits @ W.T
    spatial = x.shape[1] * x.shape[2]
    djoined = np.where(joined > 0, dpooled[:, None, None, :] / spatial, 0.0)
    dh2, dg2, db2 = _batch_norm_backward(djoined, g2, saved2)
    dr1, dw2 = _conv_backward(dh2, r1, w2, patches2)
    dn1 = np.where(n1 > 0, dr1, 0.0)
    dh1, dg1, db1 = _batch_norm_backward(dn1, g1, saved1)
    dx, dw1 = _conv_backward(dh1, x, w1, patches1)
    dx = dx + djoined
    return loss, (dx, dw1, dg1, db1, dw2, dg2, db2, dW, dc)


def block_inputs(rng, dtype):
    arguments = make_arguments(int(rng.integers(1 << 30)), batch=16, channels=32)
    return tuple(a.astype(dtype) for a in arguments)


RESIDUAL_BLOCK = Workload(
    "r residual block",
    block_loss,
    block_hand,
    block_inputs,
    tuple(range(9)),
)
