"""The functions whose generated backward source is frozen in ``golden/``.

``CASES`` lists one ``GoldenCase`` per file ``golden/<name>.txt``, which holds exactly
the text ``ppto.show_grad(function, *args, wrt=wrt)`` returns. The arguments only fix
ranks (and Python flags), so they are small and fixed. ``tools/regen_golden.py``
rewrites the files; ``tests/test_golden.py`` compares them byte for byte.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ppto

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"
REGENERATE = "python tools/regen_golden.py"


@dataclass(frozen=True)
class GoldenCase:
    function: Callable
    args: tuple
    wrt: Any = 0

    @property
    def name(self) -> str:
        return self.function.__name__

    @property
    def path(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.txt"

    def render(self) -> str:
        """The generated backward source, as the golden file holds it."""
        return ppto.show_grad(
            self.function, *self.args, wrt=self.wrt, file=io.StringIO()
        )


def golden_diff(expected: str, actual: str, path: Path) -> str:
    """A unified diff from a golden file's text to the generated text."""
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{path.name} (golden)",
            tofile=f"{path.name} (generated)",
        )
    )


def vector(n: int = 3) -> np.ndarray:
    return np.linspace(0.5, 1.5, n)


def matrix(rows: int = 2, columns: int = 3) -> np.ndarray:
    return np.linspace(-1.0, 1.0, rows * columns).reshape(rows, columns)


# --- straight line, NumPy style -------------------------------------------------------


def square_sum(x):
    return np.sum(x * x)


def sin_times_x(x):
    return np.sum(np.sin(x) * x)


def polynomial(x):
    return np.sum(3.0 * x**3 - 2.0 * x + 1.0)


def quotient(x, y):
    return np.sum(x / (1.0 + y * y))


def norm(x):
    return np.sqrt(np.sum(x * x))


def log_and_exp(x):
    return np.sum(np.log1p(np.exp(x)) - np.abs(x))


def reassignment(x):
    y = x * 2.0
    y = np.sin(y)
    y = y * x
    return np.sum(y)


# --- straight line, ppto style --------------------------------------------------------


def ppto_chain(x):
    return ppto.reduce_sum(ppto.exp(ppto.tanh(x)))


def ppto_sigmoid_bce(logits, labels):
    p = ppto.sigmoid(logits)
    loss = -(labels * ppto.log(p) + (1.0 - labels) * ppto.log(1.0 - p))
    return ppto.reduce_mean(loss)


# --- broadcasting and reductions ------------------------------------------------------


def add_bias(x, b):
    return np.sum(np.tanh(x + b))


def scale_rows(x, s):
    return np.sum((x * s) ** 2)


def mean_over_axis(x):
    return np.sum(np.mean(x, axis=0) ** 2)


def center_rows(x):
    centered = x - np.max(x, axis=1, keepdims=True)
    return np.sum(centered * centered)


def method_reductions(x):
    return (x.sum(axis=1) * x.mean()).sum()


def logsumexp_rows(x):
    return np.sum(ppto.logsumexp(x, axis=1))


# --- models and losses ----------------------------------------------------------------


def dense_relu(x, w, b):
    return np.sum(ppto.relu(x @ w + b))


def two_layer_mlp(x, w1, b1, w2):
    h = np.tanh(x @ w1 + b1)
    y = h @ w2
    return np.mean(y * y)


def mlp_params_dict(params, x):
    h = np.tanh(x @ params["W1"] + params["b1"])
    y = h @ params["W2"] + params["b2"]
    return np.mean(y * y)


def softmax_cross_entropy(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.sum(labels * log_probs) / logits.shape[0]


def ppto_softmax_cross_entropy(logits, labels):
    return -ppto.reduce_mean(ppto.reduce_sum(labels * ppto.log_softmax(logits), axis=1))


def l2_regularized(x, w, lam):
    residual = x @ w - 1.0
    return np.sum(residual * residual) + lam * np.sum(w * w)


# --- control flow ---------------------------------------------------------------------


def flag_branch(x, squared):
    if squared:
        y = x * x
    else:
        y = np.abs(x)
    return np.sum(y)


def data_branches(x):
    total = np.sum(x)
    if total > 10.0:
        y = x * 2.0
    elif total > 0.0:
        y = np.sin(x)
    else:
        y = -x
    return np.sum(y * x)


def nested_branches(x, mode):
    if mode > 0:
        if mode > 1:
            y = np.exp(x)
        else:
            y = x * x
    else:
        y = x
    return np.sum(y)


def conditional_expression(x, mode):
    y = x * x if mode > 0 else -x
    return np.sum(y)


def early_return(x):
    if np.sum(x) < 0.0:
        return np.sum(x * x)
    y = np.tanh(x)
    return np.sum(y * x)


# --- calls ----------------------------------------------------------------------------


def scaled_square(a, scale=1.0):
    return scale * a * a


def calls_with_keywords(x):
    return np.sum(scaled_square(x, scale=2.0) + scaled_square(a=x))


def moments(x):
    return np.mean(x), np.mean(x * x)


def tuple_unpacking(x):
    mean, mean_square = moments(x)
    variance = mean_square - mean * mean
    first, second = x[0], x[1]
    return variance + first * second


def centered_moments(x):
    return (np.mean(x), np.mean(x * x)), x - np.mean(x)


def nested_unpacking(x):
    (mean, mean_square), centered = centered_moments(x)
    return np.sum(centered * centered) + mean_square - mean * mean


# --- indexing and shapes --------------------------------------------------------------


def slices(x):
    return np.sum(x[1:, ::2] * x[0, :2])


def integer_array_index(x, index):
    return np.sum(x[index] ** 2)


def take_rows(x, index):
    return np.sum(np.take(x, index, axis=0) * 2.0)


def transpose_reshape(x):
    gram = x.T @ x
    return np.sum(np.reshape(gram, (9,)) * x.reshape(9))


def concat_stack(x, y):
    joined = np.concatenate([x, y], axis=0)
    stacked = ppto.stack([x, y], axis=1)
    return np.sum(joined * joined) + np.sum(stacked[:, 0] * y)


def where_maximum_clip(x, y):
    leaky = np.where(x > 0.0, x, 0.1 * x)
    return np.sum(leaky * np.maximum(x, y) + np.clip(y, -0.5, 0.5))


def expand_and_squeeze(x):
    column = np.expand_dims(x, 1)
    return np.sum(np.squeeze(column * column.T, axis=None))


# --- loops ----------------------------------------------------------------------------


def recurrent_cell(x, w, h):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ w + h)
    return np.sum(h * h)


def rows_loop(x, w):
    total = 0.0
    for row in x:
        total = total + np.sum(np.sin(row) * w)
    return total


def while_growing(x):
    y = x * 1.0
    while np.sum(y) < 4.0:
        y = y * 1.5 + x
    return np.sum(y * y)


def break_on_total(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + x[i] * x[i]
        if total > 2.0:
            break
    return total


def skip_negatives(x):
    total = 0.0
    for v in x:
        if v < 0.0:
            continue
        total = total + np.exp(v)
    return total


def nested_loops(x, w):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total = total + x[i, j] * w[j]
    return total


def stacked_states(x, w):
    h = x[0]
    states = []
    for t in range(x.shape[0]):
        h = np.tanh(h * w + x[t])
        states.append(h)
    return np.sum(np.stack(states)) + np.sum(states[-1])


def buffer_in_loop(x):
    out = np.zeros(x.shape[0] - 1)
    for i in range(x.shape[0] - 1):
        out[i] = x[i + 1] - x[i]
    return np.sum(out * out)


# --- custom rules ---------------------------------------------------------------------


@ppto.operator
def golden_softclip(x):
    return x / (1.0 + ppto.abs(x))


@ppto.grad_rule
def _(x):
    def backward(dy):
        return dy / ((1.0 + ppto.abs(x)) * (1.0 + ppto.abs(x)))

    return backward


def custom_rule(x):
    return np.sum(golden_softclip(x) * x)


@ppto.operator
def golden_smooth_abs(x, eps=1e-3):
    return ppto.sqrt(x * x + eps)


def composite_operator(x):
    return np.sum(golden_smooth_abs(x, eps=0.01))


# --- local functions ------------------------------------------------------------------


def local_layer(x, w, act):
    def layer(v):  # (lifted out: w becomes its parameter, act its np.tanh)
        return act(v * w)

    return np.sum(layer(layer(x)))


def einsum_trace_and_larger(x):
    # a trace by np.einsum of one operand, and Python's max of numbers
    t = np.einsum("ii->", x)
    return max(t, np.sum(x * x), 0.5)


CASES = [
    GoldenCase(square_sum, (vector(),)),
    GoldenCase(sin_times_x, (vector(),)),
    GoldenCase(polynomial, (vector(),)),
    GoldenCase(quotient, (vector(), vector()), wrt=(0, 1)),
    GoldenCase(norm, (vector(),)),
    GoldenCase(log_and_exp, (vector(),)),
    GoldenCase(reassignment, (vector(),)),
    GoldenCase(ppto_chain, (vector(),)),
    GoldenCase(ppto_sigmoid_bce, (vector(4), np.array([0.0, 1.0, 1.0, 0.0]))),
    GoldenCase(add_bias, (matrix(), vector()), wrt=(0, 1)),
    GoldenCase(scale_rows, (matrix(), np.ones((2, 1))), wrt=(0, 1)),
    GoldenCase(mean_over_axis, (matrix(),)),
    GoldenCase(center_rows, (matrix(),)),
    GoldenCase(method_reductions, (matrix(),)),
    GoldenCase(logsumexp_rows, (matrix(),)),
    GoldenCase(dense_relu, (matrix(), matrix(3, 4), vector(4)), wrt=(1, 2)),
    GoldenCase(
        two_layer_mlp,
        (matrix(), matrix(3, 4), vector(4), matrix(4, 2)),
        wrt=("w1", "b1", "w2"),
    ),
    GoldenCase(
        mlp_params_dict,
        (
            {"W1": matrix(3, 4), "b1": vector(4), "W2": matrix(4, 2), "b2": vector(2)},
            matrix(),
        ),
    ),
    GoldenCase(softmax_cross_entropy, (matrix(), np.eye(2, 3))),
    GoldenCase(ppto_softmax_cross_entropy, (matrix(), np.eye(2, 3))),
    GoldenCase(l2_regularized, (matrix(), vector(), 0.1), wrt="w"),
    GoldenCase(flag_branch, (vector(), True)),
    GoldenCase(data_branches, (vector(),)),
    GoldenCase(nested_branches, (vector(), 2)),
    GoldenCase(conditional_expression, (vector(), 1)),
    GoldenCase(early_return, (vector(),)),
    GoldenCase(calls_with_keywords, (vector(),)),
    GoldenCase(tuple_unpacking, (vector(),)),
    GoldenCase(nested_unpacking, (vector(),)),
    GoldenCase(slices, (matrix(3, 4),)),
    GoldenCase(integer_array_index, (vector(4), np.array([0, 2, 2]))),
    GoldenCase(take_rows, (matrix(3, 2), np.array([2, 0]))),
    GoldenCase(transpose_reshape, (matrix(3, 3),)),
    GoldenCase(concat_stack, (vector(), vector()), wrt=(0, 1)),
    GoldenCase(
        where_maximum_clip,
        (np.array([-0.6, 0.2, 1.1]), np.array([0.3, -0.2, 0.9])),
        wrt=(0, 1),
    ),
    GoldenCase(expand_and_squeeze, (vector(),)),
    GoldenCase(recurrent_cell, (matrix(3, 2), matrix(2, 2), vector(2)), wrt=(1, 2)),
    GoldenCase(rows_loop, (matrix(3, 2), vector(2)), wrt=(0, 1)),
    GoldenCase(while_growing, (vector(),)),
    GoldenCase(break_on_total, (np.array([0.5, -0.3, 1.2, 0.8, 0.9]),)),
    GoldenCase(skip_negatives, (np.array([0.5, -0.3, 1.2, -0.8]),)),
    GoldenCase(nested_loops, (matrix(2, 3), vector(3)), wrt=(0, 1)),
    GoldenCase(stacked_states, (matrix(3, 2), vector(2)), wrt=(0, 1)),
    GoldenCase(buffer_in_loop, (vector(4),)),
    GoldenCase(custom_rule, (vector(),)),
    GoldenCase(composite_operator, (vector(),)),
    GoldenCase(local_layer, (vector(), vector(), np.tanh), wrt=(0, 1)),
    GoldenCase(einsum_trace_and_larger, (matrix(3, 3),)),
]
