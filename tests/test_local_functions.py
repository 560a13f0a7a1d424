"""Local functions and callables passed as arguments beyond the corpus's checks
(tests/corpus/local_functions.py runs each form through grad, vjp, jvp and
Hessian-vector products): one gradient object given different callables in turn,
a global a local function reads rebound, a local function shadowing a global of its
name, grad of grad, and what vjp and jvp give for a callable argument. Every
gradient is compared with central differences of the plain function."""

import io

import numpy as np

import ppto
from tests.corpus.checks import assert_gradient, central_differences
from tests.corpus.local_functions import applied, applied_in_closure, softplus

X = np.array([0.3, -0.7, 1.1])
W = np.array([0.5, 1.2, -0.4])


def test_one_gradient_object_specialised_on_each_callable():
    gradient = ppto.grad(applied)
    for act in (np.tanh, np.sin, softplus, np.tanh, ppto.sigmoid, np.sin):
        expected = central_differences(applied, (X, act), 0)
        assert_gradient(gradient(X, act), expected, f"applied with {act}")


def test_code_shown_for_two_callables_calls_each():
    shown = {
        act: ppto.show_grad(applied, X, act, file=io.StringIO())
        for act in (np.tanh, np.sin)
    }
    assert "tanh(x)" in shown[np.tanh] and "sin(" not in shown[np.tanh]
    assert "sin(x)" in shown[np.sin] and "cos(x)" in shown[np.sin]


SCALE = 2.0


def reads_a_global_in_a_local_function(x):
    def scaled(v):
        return v * v * SCALE

    return np.sum(scaled(x))


def test_rebinding_a_global_a_local_function_reads_transforms_again():
    global SCALE
    gradient = ppto.grad(reads_a_global_in_a_local_function)
    try:
        for SCALE in (2.0, 5.0):
            np.testing.assert_allclose(np.asarray(gradient(X)), 2 * SCALE * X)
    finally:
        SCALE = 2.0


def layer(v):
    return v * 100.0


def local_shadows_global(x, w):
    def layer(v):  # (not the module's layer)
        return np.tanh(v * w)

    return np.sum(layer(x))


def test_a_local_function_shadows_a_global_of_its_name():
    for position in (0, 1):
        expected = central_differences(local_shadows_global, (X, W), position)
        actual = ppto.grad(local_shadows_global, wrt=position)(X, W)
        assert_gradient(actual, expected, f"wrt {position}")


def lambda_of_a_scalar(s):
    f = lambda v: v**3 * np.sin(v)  # noqa: E731
    return f(s)


def test_grad_of_grad_through_a_lambda():
    s = 0.7
    second = ppto.grad(ppto.grad(lambda_of_a_scalar))(s)
    exact = 6 * s * np.sin(s) + 6 * s**2 * np.cos(s) - s**3 * np.sin(s)
    np.testing.assert_allclose(float(second), exact, rtol=1e-10)


def times_callable(s, act):
    return act(s) * s


def test_grad_of_grad_with_a_callable_argument():
    s = 0.4
    second = ppto.grad(ppto.grad(times_callable))
    np.testing.assert_allclose(
        float(second(s, np.sin)), 2 * np.cos(s) - s * np.sin(s), rtol=1e-10
    )
    t = np.tanh(s)
    exact = 2 * (1 - t * t) - 2 * s * t * (1 - t * t)  # (s tanh s)''
    np.testing.assert_allclose(float(second(s, np.tanh)), exact, rtol=1e-10)


def test_vjp_gives_no_gradient_for_a_callable():
    out, pullback = ppto.vjp(applied_in_closure, X, W, np.tanh)
    assert float(out) == applied_in_closure(X, W, np.tanh)
    dx, dw, dact = pullback(1.0)
    assert dact is None
    for position, actual in ((0, dx), (1, dw)):
        expected = central_differences(applied_in_closure, (X, W, np.tanh), position)
        assert_gradient(actual, expected, f"vjp wrt {position}")


def test_jvp_with_a_callable_and_a_closure():
    tangent = np.array([1.0, -2.0, 0.5])
    for act in (np.tanh, softplus):
        value, pushed = ppto.jvp(applied_in_closure, (X, W, act), (None, tangent, None))
        expected = central_differences(applied_in_closure, (X, W, act), 1) @ tangent
        np.testing.assert_allclose(float(value), applied_in_closure(X, W, act))
        np.testing.assert_allclose(float(pushed), expected, rtol=1e-6)


def scaling(scale):
    return lambda v: v * scale


def test_lambdas_made_again_each_step_reuse_code_and_programs_stay_bounded(
    builds, monkeypatch
):
    """A lambda written in a training loop is a new object each turn: the same
    text with the same closure values reuses the code made for the first; a lambda
    closing over a value that changes each turn gets code of its own, right for its
    value, and the programs kept for the function stay bounded."""
    from ppto import api

    gradient = ppto.grad(applied)
    for _ in range(5):
        result = gradient(X, lambda v: v * v * 2.0)
        expected = central_differences(applied, (X, lambda v: v * v * 2.0), 0)
        assert_gradient(result, expected, "a lambda made again")
    assert len(builds) == 1
    monkeypatch.setattr(api, "PROGRAMS_KEPT", 4)
    for turn in range(10):
        scaled = scaling(float(turn))  # (a closure cell of its own each turn)
        result = gradient(X, scaled)
        expected = central_differences(applied, (X, scaled), 0)
        assert_gradient(result, expected, f"turn {turn}")
        assert len(gradient._programs) <= 4


def cubed_times_scale(x):
    return x * x * x * SCALE


def test_rebinding_a_global_makes_a_second_derivative_transform_again():
    """grad(grad(f)) kept computing with the global's old value: its code calls
    the first derivative's, which went stale while its own did not (18.0 after
    SCALE = 5.0, where the second derivative 6 x SCALE at 1.5 is 45.0)."""
    global SCALE
    second = ppto.grad(ppto.grad(cubed_times_scale))
    try:
        for SCALE in (2.0, 5.0):
            for _ in range(2):  # (the second call takes the repeated-call path)
                expected = central_differences(
                    lambda v: 3 * v * v * SCALE, [np.array(1.5)], 0
                )
                np.testing.assert_allclose(float(second(1.5)), expected, rtol=1e-6)
                np.testing.assert_allclose(float(second(x=1.5)), expected, rtol=1e-6)
    finally:
        SCALE = 2.0
