"""One array passed for two parameters of a function that writes into one: NumPy's
write changes both, ppto's generated code keeps them apart, so such a call is
refused (ppto.shared_arguments); other calls run, checked against NumPy and float64
central differences."""

import numpy as np
import pytest

import ppto


def add_into_first(a, b):
    a += np.sin(b)
    return np.sum(a * b)


def write_into_part(a, b):
    a[:2] *= 3.0
    return np.sum(a * b)


def writes_nothing(a, b):
    c = a + np.sin(b)
    return np.sum(c * b)


def add_into_item(params, x):
    w = params[0]
    w += x
    return np.sum(w * params[1])


def central(function, args, position, eps=1e-6):
    gradient = np.zeros_like(args[position])
    for index in np.ndindex(gradient.shape):
        up = [a.copy() for a in args]  # (copies: the function writes into one)
        down = [a.copy() for a in args]
        up[position][index] += eps
        down[position][index] -= eps
        gradient[index] = (function(*up) - function(*down)) / (2 * eps)
    return gradient


W = np.array([0.3, -0.5, 0.7, 1.1])


def test_one_array_for_both_parameters_is_refused():
    w = W.copy()
    with pytest.raises(ppto.GradError) as caught:
        ppto.grad(add_into_first, wrt=(0, 1))(w, w)
    message = str(caught.value)
    assert "parameter a" in message and "for b" in message
    assert "a += np.sin(b)" in message and "line 13" in message
    assert "add_into_first(w, w.copy())" in message
    np.testing.assert_array_equal(w, W)  # (the caller's array is untouched)


def test_refused_on_the_repeated_call_path_too():
    grad = ppto.grad(add_into_first, wrt=(0, 1))
    for _ in range(3):  # (the later calls take the repeated call's path)
        grad(W.copy(), W.copy())
    assert type(grad._last).__name__ == "CheckedRepeatedCall"
    w = W.copy()
    with pytest.raises(ppto.GradError, match="parameter a"):
        grad(w, w)


def test_overlapping_view_is_refused_by_every_entry_point():
    w = np.arange(1.0, 6.0)
    a, b = w[:4], w[1:]  # (overlap in three elements)
    with pytest.raises(ppto.GradError, match="write_into_part"):
        ppto.grad(write_into_part)(a, b)
    with pytest.raises(ppto.GradError, match="parameter a"):
        ppto.value_and_grad(write_into_part, wrt=(0, 1))(a, b)
    with pytest.raises(ppto.GradError, match="parameter a"):
        ppto.vjp(write_into_part, a, b)
    with pytest.raises(ppto.GradError, match="parameter a"):
        ppto.jvp(write_into_part, (a, b), (np.ones(4), np.ones(4)))


def test_interleaved_views_share_no_element_and_run():
    w = np.arange(1.0, 9.0)
    a, b = w[::2], w[1::2]  # (the same bounds, no element in common)
    value, grads = ppto.value_and_grad(add_into_first, wrt=(0, 1))(a, b)
    expected = add_into_first(a.copy(), b.copy())
    assert np.isclose(float(value), expected)
    for position, grad in enumerate(grads):
        args = [a.copy(), b.copy()]
        np.testing.assert_allclose(
            np.asarray(grad),
            central(add_into_first, args, position),
            rtol=1e-6,
            atol=1e-8,
        )


def test_different_arrays_run_and_match_numpy():
    a, b = W.copy(), W[::-1].copy()
    value, grads = ppto.value_and_grad(add_into_first, wrt=(0, 1))(a, b)
    assert np.isclose(float(value), add_into_first(a.copy(), b.copy()))
    np.testing.assert_array_equal(a, W)  # (ppto writes into no caller's array)
    for position, grad in enumerate(grads):
        np.testing.assert_allclose(
            np.asarray(grad),
            central(add_into_first, [a, b], position),
            rtol=1e-6,
            atol=1e-8,
        )


def test_same_array_for_a_function_writing_into_neither_runs():
    w = W.copy()
    value, grads = ppto.value_and_grad(writes_nothing, wrt=(0, 1))(w, w)
    assert np.isclose(float(value), writes_nothing(w, w))

    def alone(v):
        return writes_nothing(v, v)

    total = central(alone, [w], 0)
    np.testing.assert_allclose(
        np.asarray(grads[0]) + np.asarray(grads[1]), total, rtol=1e-6, atol=1e-8
    )


def test_same_array_as_a_leaf_and_an_argument_is_refused():
    w = W.copy()
    with pytest.raises(ppto.GradError) as caught:
        ppto.grad(add_into_item, wrt=(0, 1))((w, W.copy()), w)
    message = str(caught.value)
    assert "params[0]" in message and "for x" in message
    assert "w += x" in message


def test_two_leaves_of_one_argument_sharing_are_refused():
    w = W.copy()
    with pytest.raises(ppto.GradError, match=r"params\[0\].*params\[1\]"):
        ppto.grad(add_into_item)((w, w), W.copy())


def rebound_first(a, b):
    a = a * 2.0  # (a new array: the write below is into it, not the argument)
    a += np.sin(b)
    return np.sum(a * b)


def test_a_write_after_rebinding_is_no_write_into_the_argument():
    w = W.copy()
    value, grads = ppto.value_and_grad(rebound_first, wrt=(0, 1))(w, w)
    assert np.isclose(float(value), rebound_first(w, w))

    def alone(v):
        return rebound_first(v, v)

    total = central(alone, [w], 0)
    np.testing.assert_allclose(
        np.asarray(grads[0]) + np.asarray(grads[1]), total, rtol=1e-6, atol=1e-8
    )
