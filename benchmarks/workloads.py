"""The benchmark workloads: each as a plain NumPy function ppto differentiates, and a
hand-written NumPy forward+backward of the same function (the baseline)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Workload:
    name: str
    function: Callable
    hand: Callable  # args -> (value, gradients)
    make: Callable  # (rng, dtype) -> args
    wrt: tuple
    dtypes: tuple = ("float64", "float32")


# a. logsumexp over axis 1, summed -------------------------------------------------


def logsumexp_sum(x):
    peak = np.max(x, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - peak), axis=1, keepdims=True)) + peak)


def logsumexp_hand(x):
    peak = np.max(x, axis=1, keepdims=True)
    e = np.exp(x - peak)
    s = np.sum(e, axis=1, keepdims=True)
    value = np.sum(np.log(s[:, 0]) + peak[:, 0])
    return value, (e / s,)


# b. two-layer MLP with softmax cross-entropy --------------------------------------


def mlp(W1, b1, W2, b2, x, labels):
    h = np.maximum(x @ W1 + b1, 0.0)
    logits = h @ W2 + b2
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(log_probs[np.arange(x.shape[0]), labels])


def mlp_hand(W1, b1, W2, b2, x, labels):
    n = x.shape[0]
    a = x @ W1 + b1
    h = np.maximum(a, 0.0)
    logits = h @ W2 + b2
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(shifted)
    s = np.sum(e, axis=1, keepdims=True)
    log_probs = shifted - np.log(s)
    value = -np.mean(log_probs[np.arange(n), labels])
    dlogits = e / s
    dlogits[np.arange(n), labels] -= 1.0
    dlogits /= n
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ W2.T
    da = dh * (a > 0)
    dW1 = x.T @ da
    db1 = da.sum(axis=0)
    return value, (dW1, db1, dW2, db2)


def mlp_inputs(rng, dtype):
    return (
        (rng.standard_normal((784, 256)) * 0.05).astype(dtype),
        np.zeros(256, dtype),
        (rng.standard_normal((256, 10)) * 0.05).astype(dtype),
        np.zeros(10, dtype),
        rng.standard_normal((256, 784)).astype(dtype),
        rng.integers(0, 10, 256),
    )


# c. elementwise chain --------------------------------------------------------------


def chain(x, y, z):
    return np.sum(np.tanh(x * y + z) * np.exp(-x))


def chain_hand(x, y, z):
    t = np.tanh(x * y + z)
    e = np.exp(-x)
    value = np.sum(t * e)
    da = e * (1 - t * t)
    return value, (da * y - t * e, da * x, da)


def chain_inputs(size):
    def make(rng, dtype):
        return tuple(rng.standard_normal(size).astype(dtype) for _ in range(3))

    return make


# d. vanilla RNN over a Python loop ----------------------------------------------------


def rnn(x, h, Wx, Wh, b):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def rnn_hand(x, h, Wx, Wh, b):
    states = [h]
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ Wx + h @ Wh + b)
        states.append(h)
    value = np.sum(h**2)
    dh = 2 * h
    dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    for t in range(x.shape[0] - 1, -1, -1):
        da = dh * (1 - states[t + 1] ** 2)
        dWx += x[t].T @ da
        dWh += states[t].T @ da
        db += da.sum(axis=0)
        dh = da @ Wh.T
    return value, (dWx, dWh, db)


def rnn_inputs(rng, dtype):
    return (
        rng.standard_normal((50, 32, 64)).astype(dtype),
        np.zeros((32, 128), dtype),
        (rng.standard_normal((64, 128)) * 0.1).astype(dtype),
        (rng.standard_normal((128, 128)) * 0.1).astype(dtype),
        np.zeros(128, dtype),
    )


# e. a data-dependent branch -----------------------------------------------------------


def branch(x):
    if np.sum(x) > 0:
        y = np.sin(x) * x
    else:
        y = np.cos(x)
    return np.sum(y)


def branch_hand(x):
    if np.sum(x) > 0:
        s = np.sin(x)
        return np.sum(s * x), (np.cos(x) * x + s,)
    return np.sum(np.cos(x)), (-np.sin(x),)


def branch_inputs(sign):
    def make(rng, dtype):
        return (sign * np.abs(rng.standard_normal(1000)).astype(dtype),)

    return make


F64 = ("float64",)
WORKLOADS = [
    Workload("a logsumexp 1000x1000", logsumexp_sum, logsumexp_hand,
             lambda rng, dt: (rng.standard_normal((1000, 1000)).astype(dt),), (0,)),
    Workload("b MLP 256x784-256-10", mlp, mlp_hand, mlp_inputs, (0, 1, 2, 3)),
    Workload("c chain 1e6", chain, chain_hand, chain_inputs(1_000_000), (0, 1, 2)),
    Workload("d RNN 50 steps", rnn, rnn_hand, rnn_inputs, (2, 3, 4), ("float64",)),
    Workload("e branch, then", branch, branch_hand, branch_inputs(1.0), (0,), F64),
    Workload("e branch, else", branch, branch_hand, branch_inputs(-1.0), (0,), F64),
    Workload("f chain 10", chain, chain_hand, chain_inputs(10), (0, 1, 2), F64),
]  # fmt: skip
