"""One array passed for two parameters of a function that writes into one: NumPy's
write changes both, ppto's generated code keeps them apart, so such a call is
refused (ppto.shared_arguments); other calls run, checked against NumPy and float64
central differences."""

import inspect

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
    line = _line_of(add_into_first, "a += np.sin(b)")
    assert "a += np.sin(b)" in message and f"line {line}" in message
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


# --- a list passed for two parameters, and 0-d arrays ------------------------------
# The check compared arrays only: one list given for xs and ys, changed through xs
# (an item replaced, extended), ran and read ys as it was (value 1.6 where NumPy
# gives 3.2); and a 0-d array's parameter was taken for a number, whose ``+=``
# rebinds it, so its write was not recorded (0.49 where NumPy gives 0.96).


def replace_first(x, xs, ys):
    xs[0] = x * 2.0
    return np.sum(ys[0] * x)


def extend(x, xs, ys):
    xs += (3.0,)
    return np.sum(x) * len(ys)


def other_name_incremented(x, a):
    z = a
    z += 1.0  # (a 0-d array: a changes too)
    return np.sum(x * a)


X = np.array([0.3, -0.5, 0.7])


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(n for n, line in enumerate(lines) if text in line)


@pytest.mark.parametrize(
    "function, written", [(replace_first, "xs[0] ="), (extend, "xs +=")]
)
def test_one_list_for_two_parameters_is_refused(function, written):
    line = _line_of(function, written)
    numbers = [1.0, 2.0]
    with pytest.raises(ppto.GradError) as caught:
        ppto.grad(function)(X.copy(), numbers, numbers)
    message = str(caught.value)
    assert "the list passed for xs is passed for ys too" in message
    assert f"line {line}" in message and f"{function.__name__}(w, list(w))" in message
    assert numbers == [1.0, 2.0]  # (the caller's list is untouched)


@pytest.mark.parametrize(
    "function, first, second",
    [
        (replace_first, [1.0, 2.0], [1.0, 2.0]),  # (two lists alike: apart)
        (extend, [1.0, 2.0], [1.0, 2.0]),
        (extend, (1.0, 2.0), "same"),  # (a tuple: += makes a new one)
    ],
)
def test_lists_apart_and_one_tuple_twice_run(function, first, second):
    second = first if second == "same" else second

    def in_numpy(x):  # (each call its own lists: the function changes them)
        copied = [type(first)(first), type(second)(second)]
        if second is first:
            copied[1] = copied[0]
        return function(x, *copied)

    value, gradient = ppto.value_and_grad(function)(X.copy(), first, second)
    assert np.isclose(float(value), in_numpy(X.copy()))
    expected = central(lambda x: in_numpy(x), [X.copy()], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)


def test_one_zero_d_array_for_two_parameters_is_refused():
    w = np.array(0.5)
    with pytest.raises(ppto.GradError) as caught:
        ppto.grad(add_into_first, wrt=(0, 1))(w, w)
    message = str(caught.value)
    assert "parameter a" in message and "for b" in message
    a, b = np.array(0.5), np.array(-0.2)  # (two 0-d arrays: they run)
    value, grads = ppto.value_and_grad(add_into_first, wrt=(0, 1))(a, b)
    assert np.isclose(float(value), add_into_first(a.copy(), b.copy()))
    for position, grad in enumerate(grads):
        expected = central(add_into_first, [a, b], position)
        np.testing.assert_allclose(np.asarray(grad), expected, rtol=1e-6, atol=1e-8)


def test_a_zero_d_array_written_through_another_name_is_refused():
    with pytest.raises(ppto.TransformError, match="shares its array with a") as e:
        ppto.grad(other_name_incremented)(X.copy(), np.array(0.5))
    assert e.value.lineno == _line_of(other_name_incremented, "z += 1.0")
    value = ppto.value_and_grad(other_name_incremented)(X.copy(), 0.5)[0]
    assert np.isclose(float(value), other_name_incremented(X, 0.5))  # (a number)


def other_name_incremented_then_read(x, a):
    z = a
    z += 1.0  # (a NumPy scalar, as a number: z is rebound, a unchanged)
    return np.sum(x * a) + z


@pytest.mark.parametrize("scalar", [np.float64, np.float32])
def test_a_numpy_scalar_written_through_another_name_runs(scalar):
    """A NumPy scalar is immutable, as a Python number is: ``z += 1.0`` rebinds z.
    The key told it from a 0-d array by neither rank nor dtype, so it was refused
    as a write into a 0-d array (which the same function still is, above)."""
    a = scalar(2.0)
    value, (dx, da) = ppto.value_and_grad(other_name_incremented_then_read, wrt=(0, 1))(
        X.copy(), a
    )
    assert np.isclose(float(value), other_name_incremented_then_read(X.copy(), a))
    f64 = np.float64(a)  # (differences in float64, of a NumPy scalar still)
    expected = central(lambda x: other_name_incremented_then_read(x, f64), [X], 0)
    np.testing.assert_allclose(np.asarray(dx), expected, rtol=1e-6, atol=1e-8)
    eps = 1e-6
    ahead = other_name_incremented_then_read(X.copy(), np.float64(f64 + eps))
    behind = other_name_incremented_then_read(X.copy(), np.float64(f64 - eps))
    np.testing.assert_allclose(float(da), (ahead - behind) / (2 * eps), rtol=1e-6)
    with pytest.raises(ppto.TransformError, match="shares its array with a"):
        ppto.grad(other_name_incremented_then_read)(X.copy(), np.array(2.0))


def add_into_second(x, w, v):
    w += x
    return np.sum(v * x * w)


SECOND_ORDER = {
    "hessian": lambda f, *a: ppto.hessian(f)(*a),
    "jacfwd(grad)": lambda f, *a: ppto.jacfwd(ppto.grad(f))(*a),
    "jacrev(grad)": lambda f, *a: ppto.jacrev(ppto.grad(f))(*a),
    "jvp(grad)": lambda f, *a: ppto.jvp(
        ppto.grad(f), a, (np.ones_like(a[0]),) + (None,) * (len(a) - 1)
    )[1],
}


def central_hessian(function, x, eps=1e-4):
    hessian = np.zeros((x.size, x.size))
    for i in range(x.size):
        for j in range(x.size):

            def at(di, dj):
                point = x.copy()
                point[i] += di
                point[j] += dj
                return function(point)

            hessian[i, j] = (
                at(eps, eps) - at(eps, -eps) - at(-eps, eps) + at(-eps, -eps)
            ) / (4 * eps * eps)
    return hessian


@pytest.mark.parametrize("way", sorted(SECOND_ORDER))
def test_a_derivative_differentiated_again_refuses_one_array_for_both(way):
    # the gradient code hessian & co. call ran without the call's checks: zeros
    # (the right Hessian of sum((w + x) * x * (w + x)) with v = w is not zero)
    x, w = np.array([0.5, 1.5]), np.array([1.0, 2.0])
    with pytest.raises(ppto.GradError, match="parameter w") as caught:
        SECOND_ORDER[way](add_into_second, x, w, w)
    assert "w += x" in str(caught.value)
    # two arrays run, matching float64 central differences of the NumPy function
    v = np.array([3.0, -1.0])
    got = np.asarray(SECOND_ORDER[way](add_into_second, x, w.copy(), v))
    expected = central_hessian(lambda p: add_into_second(p, w.copy(), v), x)
    if way == "jvp(grad)":
        expected = expected @ np.ones(2)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_grad_of_grad_refuses_on_the_repeated_call_path_too():
    second = ppto.grad(ppto.grad(add_into_second))
    w, v = np.array([1.0, 2.0]), np.array([1.0, 3.0])
    for _ in range(3):  # (d2/dx2 sum(v * x * (w + x)) = 2 sum(v))
        np.testing.assert_allclose(float(second(0.7, w.copy(), v)), 8.0)
    assert type(second._last).__name__ == "CheckedRepeatedCall"
    with pytest.raises(ppto.GradError, match="parameter w"):
        second(0.7, w, w)


DEFAULT_W = np.array([1.0, 2.0])


def add_into_default(x, w=DEFAULT_W):
    w += x
    return np.sum(w * x * x)


@pytest.mark.parametrize("way", sorted(SECOND_ORDER))
def test_a_derivative_differentiated_again_refuses_writing_a_default(way):
    with pytest.raises(ppto.GradError, match="to its default"):
        SECOND_ORDER[way](add_into_default, np.array([0.5, 1.5]))
    np.testing.assert_array_equal(DEFAULT_W, [1.0, 2.0])
