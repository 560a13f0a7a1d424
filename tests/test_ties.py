"""Ties of np.maximum and np.minimum (and fmax, fmin, their outer products) split
the gradient evenly, as JAX and PyTorch do: functions whose kinks cancel are smooth,
and their derivatives at the tie match central differences. Sending a tie's whole
gradient to the first operand gave max(z, 0) + min(z, 0), which is z, slope 2 at 0,
and the stable logistic loss slope 1 - y at z = 0 (zero-initialised weights)."""

import io

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences


def cancelling(a, b):
    # max + min of two values is their sum: smooth where they tie
    return np.sum((np.maximum(a, b) + np.minimum(a, b)) * np.arange(1.0, 5.0))


def cancelling_nan_skipping(a, b):
    return np.sum((np.fmax(a, b) + np.fmin(a, b)) * np.arange(1.0, 5.0))


def cancelling_outer(a, b):
    both = np.maximum.outer(a, b) + np.minimum.outer(a, b)
    return np.sum(both * np.arange(12.0).reshape(4, 3))


def relu_pair(z):
    # max(z, 0) + min(z, 0) is z
    return np.sum(np.sin(np.maximum(z, 0.0) + np.minimum(z, 0.0)))


def logistic_loss(w, X, y):
    # the numerically stable form, log(1 + exp(z)) - z * y, written with kinks
    z = X @ w
    return np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))


TIED_A = np.array([0.5, -1.0, 2.0, 3.0])
TIED_B = np.array([0.5, -1.0, 1.0, 4.0])  # the first two tie


@pytest.mark.parametrize("function", [cancelling, cancelling_nan_skipping])
@pytest.mark.parametrize("position", [0, 1])
def test_a_tie_splits_the_gradient_so_cancelling_kinks_cancel(function, position):
    gradient = ppto.grad(function, wrt=position)(TIED_A, TIED_B)
    expected = central_differences(function, (TIED_A, TIED_B), position)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("position", [0, 1])
def test_outer_ties_split_as_the_ufuncs_do(position):
    a, b = np.array([0.0, 1.0, 2.0, -1.0]), np.array([1.0, 0.0, 2.0])
    gradient = ppto.grad(cancelling_outer, wrt=position)(a, b)
    expected = central_differences(cancelling_outer, (a, b), position)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7, atol=1e-9)


def test_a_tie_with_a_constant_and_its_tangent():
    z = np.array([0.0, 0.7, -0.3, 0.0])
    expected = central_differences(relu_pair, (z,), 0)
    np.testing.assert_allclose(
        np.asarray(ppto.grad(relu_pair)(z)), expected, rtol=1e-7, atol=1e-9
    )
    direction = np.array([1.0, -2.0, 0.5, 3.0])
    _, derivative = ppto.jvp(relu_pair, (z,), (direction,))
    np.testing.assert_allclose(float(derivative), expected @ direction, rtol=1e-7)


def test_tangent_of_a_tie_between_two_arguments():
    direction_a = np.array([1.0, 2.0, 0.0, 0.0])
    direction_b = np.array([3.0, -1.0, 0.0, 0.0])
    _, derivative = ppto.jvp(cancelling, (TIED_A, TIED_B), (direction_a, direction_b))
    expected = central_differences(cancelling, (TIED_A, TIED_B), 0) @ direction_a
    expected += central_differences(cancelling, (TIED_A, TIED_B), 1) @ direction_b
    np.testing.assert_allclose(float(derivative), expected, rtol=1e-7)


def test_stable_logistic_loss_at_zero_weights():
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((8, 3)), (rng.random(8) > 0.5).astype(float)
    w = np.zeros(3)  # every z is exactly 0: each kink of the loss is met
    gradient = ppto.grad(logistic_loss)(w, X, y)
    expected = central_differences(logistic_loss, (w, X, y), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-9)
    # the kink-free form agrees
    smooth = ppto.grad(lambda w, X, y: np.mean(np.logaddexp(0.0, X @ w) - X @ w * y))
    np.testing.assert_allclose(np.asarray(gradient), np.asarray(smooth(w, X, y)))


def test_nan_is_still_skipped_by_fmax_and_fmin():
    # fmax(a, NaN) is a: the whole gradient goes to a (and none to the NaN)
    a, b = np.array([1.0, 2.0, np.nan]), np.array([np.nan, 2.0, 3.0])

    def skipping(a, b):
        return np.sum(np.fmax(a, b) * 2.0 + np.fmin(a, b))

    da, db = ppto.grad(skipping, wrt=(0, 1))(a, b)
    np.testing.assert_array_equal(np.asarray(da), [3.0, 1.5, 0.0])
    np.testing.assert_array_equal(np.asarray(db), [0.0, 1.5, 3.0])


def test_the_fused_maximum_backward_halves_ties_as_its_pattern_does():
    rule = next(r for r in ppto.fusion_rules() if r.name == "maximum_backward")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 5))
    x[::2, 1:3] = 0.0  # ties with the ReLU's 0 (-0.0 ties too)
    x[1, 1] = -0.0
    dy = rng.standard_normal((6, 5))
    expected = rule.pattern(ppto.tensor(x), ppto.tensor(dy)).numpy()
    np.testing.assert_array_equal(rule.implementation(x, dy), expected)
    np.testing.assert_array_equal(expected[x == 0], 0.5 * dy[x == 0])


def relu_network(W, x):
    return np.sum(np.tanh(np.maximum(x @ W, 0.0)) * np.arange(1.0, 4.0))


def test_a_fused_relu_gradient_with_ties_equals_the_unfused_one(monkeypatch):
    # large enough for the fused code: maximum_backward's kernel, ties included
    monkeypatch.setenv("PPTO_FUSION", "on")
    rng = np.random.default_rng(6)
    W, x = rng.standard_normal((8, 3)), rng.standard_normal((40000, 8))
    x[:500] = 0.0  # rows whose products are exactly 0: the ReLU's ties
    wrt = (0, 1)  # (x's gradient: the tied rows get half of theirs)
    text = ppto.show_grad(relu_network, W, x, wrt=wrt, fused=True, file=io.StringIO())
    assert "__fused_maximum_backward(" in text
    fused = ppto.grad(relu_network, wrt=wrt)(W, x)
    previous = ppto.set_precision("strict")
    try:
        unfused = ppto.grad(relu_network, wrt=wrt)(W, x)
    finally:
        ppto.set_precision(previous)
    for a, b in zip(fused, unfused):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    half = np.arange(1.0, 4.0) / 2 @ W.T  # tanh'(0) = 1, times the tie's half
    np.testing.assert_allclose(fused[1].numpy()[:500], np.tile(half, (500, 1)))
