"""``grad`` and ``value_and_grad`` with ``has_aux=True`` (JAX's): the function
returns ``(value, aux)``; only the value is differentiated, ``aux`` comes back as
computed, and the function runs once."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences

X = np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.3]])
Y = np.array([1.0, 0.0, 1.0])
W = np.array([0.3, -0.2])


def loss_and_predictions(w, x, y):
    z = np.tanh(x @ w)
    return np.mean((z - y) ** 2), (z, np.sum(z > 0))


def loss_alone(w, x, y):
    return loss_and_predictions(w, x, y)[0]


def test_the_gradient_is_the_values_and_aux_comes_back_as_computed(monkeypatch):
    calls = []
    vjp = ppto.api.vjp
    monkeypatch.setattr(
        ppto.api, "vjp", lambda *a, **k: calls.append(1) or vjp(*a, **k)
    )
    gradient, (predictions, positive) = ppto.grad(loss_and_predictions, has_aux=True)(
        W, X, Y
    )
    assert len(calls) == 1  # (one vjp of the pair: the function ran once)
    expected = central_differences(loss_alone, [W, X, Y], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(predictions), np.tanh(X @ W))
    assert int(positive) == np.sum(np.tanh(X @ W) > 0)


def test_value_and_grad_with_aux_several_arguments_and_float32():
    (value, aux), (dw, dx) = ppto.value_and_grad(
        loss_and_predictions, wrt=(0, "x"), has_aux=True
    )(W, X, Y)
    assert float(value) == pytest.approx(loss_alone(W, X, Y), rel=1e-12)
    np.testing.assert_allclose(
        np.asarray(dx), central_differences(loss_alone, [W, X, Y], 1), rtol=1e-7
    )
    np.testing.assert_allclose(np.asarray(aux[0]), np.tanh(X @ W))
    as32 = [a.astype(np.float32) for a in (W, X, Y)]
    gradient, _ = ppto.grad(loss_and_predictions, has_aux=True)(*as32)
    assert gradient.dtype == np.float32


def three_results(w):
    return np.sum(w), w, w


def vector_value(w):
    return w * 2.0, np.sum(w)


def counted(w, n):
    return np.sum(w * n), n


@pytest.mark.parametrize(
    "function, arguments, message",
    [
        (three_results, (W,), "must return a pair .value, aux.; it returns a tuple"),
        (vector_value, (W,), r"must be a scalar, but has shape \(2,\)"),
    ],
)
def test_a_function_not_returning_a_scalar_and_aux_is_refused(
    function, arguments, message
):
    with pytest.raises(ppto.GradError, match=message):
        ppto.grad(function, has_aux=True)(*arguments)


def test_an_integer_argument_asked_for_is_refused():
    with pytest.raises(ppto.GradError, match="'n'"):
        ppto.grad(counted, wrt=1, has_aux=True)(W, 3)
