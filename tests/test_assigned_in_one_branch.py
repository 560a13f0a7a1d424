"""A value assigned in one branch only (``if use: y = ...``; later ``if use: s = s +
f(y)``), in a loop that may not run, or before a ``break`` in a ``for``/``else``:
on the path where Python never assigns it, the gradient's zero adjoint of it (made
for the branch that does not assign it) read it unbound and ``ppto.grad`` raised a
plain UnboundLocalError from the generated code (for a list or a dict,
``ppto.vjp`` a TypeError). Each path is checked against central differences of the
plain function, with ``grad``, ``value_and_grad`` and ``vjp``."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

X = np.array([0.3, -0.7, 1.1])


def flagged(x, use):
    if use:
        y = np.sin(x)
    s = np.sum(x**2)
    if use:
        s = s + np.sum(y)
    return s


def flagged_number(x, use):
    if use:
        c = x[0] * x[1]
    s = np.sum(x**2)
    if use:
        s = s + c
    return s


def flagged_tuple(x, use):
    if use:
        a, b = x * 2, np.sin(x)
    s = np.sum(x**2)
    if use:
        s = s + np.sum(a * b)
    return s


def flagged_list(x, use):
    if use:
        ys = [x * 2, np.sin(x)]
    s = np.sum(x**2)
    if use:
        s = s + np.sum(ys[0] * ys[1])
    return s


def flagged_appended(x, use):
    if use:
        ys = []
        for i in range(2):
            ys.append(x * i)
    s = np.sum(x**2)
    if use:
        s = s + np.sum(ys[1] * x)
    return s


def flagged_dict(x, use):
    if use:
        d = {"a": x * 2, "b": np.sin(x)}
    s = np.sum(x**2)
    if use:
        s = s + np.sum(d["a"] * d["b"])
    return s


def by_sign(x, use):
    if x[0] > 0:
        y = x * 2
    if x[0] > 0:
        return np.sum(y * x)
    return np.sum(x)


def each_branch_its_own(x, use):
    if x[0] > 1:
        a = x * 2
    elif x[0] > 0:
        b = x * 3
    else:
        c = x * 4
    if x[0] > 1:
        return np.sum(a * x)
    if x[0] > 0:
        return np.sum(b * x)
    return np.sum(c * x)


def found_before_break(x, use):
    for i in range(len(x)):
        if x[i] > 1.0:
            found = x[i] * 3
            break
    else:
        return np.sum(x)
    return found * x[0]


def last_of_a_loop(x, use):
    n = 2 if use else 0
    for i in range(n):
        y = x * (i + 1)
    if n > 0:
        return np.sum(y * x)
    return np.sum(x**2)


FUNCTIONS = [
    flagged,
    flagged_number,
    flagged_tuple,
    flagged_list,
    flagged_appended,
    flagged_dict,
    last_of_a_loop,
]
SIGNED = [by_sign, each_branch_its_own, found_before_break]
POINTS = [
    np.array([1.5, 0.5, 0.2]),
    np.array([0.5, 1.5, 0.2]),
    np.array([-0.5, 0.5, 0.2]),
]


@pytest.mark.parametrize("use", [True, False])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_gradient_on_either_path(function, use):
    expected = central_differences(function, (X, use), 0)
    what = f"{function.__name__}(use={use})"
    assert_gradient(ppto.grad(function)(X, use), expected, what)
    value, gradient = ppto.value_and_grad(function)(X, use)
    np.testing.assert_allclose(float(value), function(X, use), rtol=1e-12)
    assert_gradient(gradient, expected, what + " value_and_grad")
    _, pullback = ppto.vjp(function, X, use)
    assert_gradient(pullback(1.0)[0], expected, what + " vjp")


@pytest.mark.parametrize("x", POINTS, ids=["first", "second", "neither"])
@pytest.mark.parametrize("function", SIGNED, ids=lambda f: f.__name__)
def test_gradient_on_each_path_of_the_data(function, x):
    expected = central_differences(function, (x, True), 0)
    assert_gradient(ppto.grad(function)(x, True), expected, function.__name__)


def test_one_gradient_object_takes_both_paths_in_turn():
    gradient = ppto.grad(flagged)
    for use in (False, True, False, True):
        expected = central_differences(flagged, (X, use), 0)
        assert_gradient(gradient(X, use), expected, f"flagged(use={use})")


def test_large_values_on_the_path_without_the_value():
    x = np.random.default_rng(0).standard_normal(40_000)
    np.testing.assert_allclose(np.asarray(ppto.grad(flagged)(x, False)), 2 * x)
    expected = 2 * x + np.cos(x)
    np.testing.assert_allclose(np.asarray(ppto.grad(flagged)(x, True)), expected)


@pytest.mark.parametrize("use", [True, False])
def test_hessian_vector_product_on_either_path(use):
    def cubed(x, use):
        if use:
            y = np.sin(x)
        s = np.sum(x**3)
        if use:
            s = s + np.sum(y)
        return s

    direction = np.array([1.0, 0.5, -1.0])
    _, product = ppto.jvp(ppto.grad(cubed), (X, use), (direction, None))
    expected = 6 * X * direction - use * np.sin(X) * direction
    np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-10)
