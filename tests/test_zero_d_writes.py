"""A 0-d array written through a subscript (``a[...] = v``, ``a[()] += v``), which
NumPy does in place: the reverse code's adjoint of ``a`` is a NumPy number there
(0-d operators give numbers), and the subscript write's backward wrote into it
(TypeError: 'numpy.float64' object does not support item assignment). Values are
compared with the plain function's, derivatives with float64 central
differences."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences


def doubled_then_cubed(a):
    a[...] = a * 2.0
    return a**3


def added_at_empty_index(a):
    a[()] += 1.5
    return np.sin(a) * a


def local_zero_d(x):
    z = np.zeros(())
    z += x[0]
    z[...] = x[1] * 2.0
    return z * x[0]


CASES = [
    (doubled_then_cubed, np.array(0.7)),
    (added_at_empty_index, np.array(0.7)),
    (local_zero_d, np.array([0.7, 1.3])),
]


@pytest.mark.parametrize("function, point", CASES, ids=[f.__name__ for f, _ in CASES])
def test_value_and_gradient(function, point):
    value, gradient = ppto.value_and_grad(function)(point.copy())
    np.testing.assert_allclose(float(value), float(function(point.copy())), rtol=1e-12)
    expected = central_differences(lambda p: function(p.copy()), (point,), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7)


@pytest.mark.parametrize("function", [doubled_then_cubed, added_at_empty_index])
def test_second_derivative(function):
    a, eps = 0.7, 1e-4
    at = [float(function(np.array(a + step))) for step in (eps, 0.0, -eps)]
    expected = (at[0] - 2.0 * at[1] + at[2]) / eps**2
    hessian = ppto.hessian(function)(np.array(a))
    np.testing.assert_allclose(float(np.asarray(hessian)), expected, rtol=1e-5)
    again = ppto.grad(ppto.grad(function))(np.array(a))
    np.testing.assert_allclose(float(np.asarray(again)), expected, rtol=1e-5)


WEIGHTS = np.array([0.3, -0.2, 0.5])


def _written_through_another_name(p):
    t = p
    t += 1.0  # (writes into p where p is a 0-d array, rebinds t for a number)
    return p * WEIGHTS


def _added_to(s):
    s += 1.0
    return s * WEIGHTS


def passes_a_zero_d_array(x):
    z = np.array(np.sum(x))  # (a 0-d array: t += 1.0 writes into it)
    return np.sum(_written_through_another_name(z) * x)


def passes_a_number_added_to(x):
    return np.sum(_added_to(np.sum(x)) * x)


def test_a_helper_writing_into_a_rank_0_argument_read_again_is_refused():
    # (silently wrong before: the helper took p for a number, whose += through t
    # leaves p as it was; NumPy writes into the 0-d array: value 0.608, not 0.228)
    x = np.array([0.3, -0.2, 0.5])
    assert passes_a_zero_d_array(x) != pytest.approx(0.6 * float(WEIGHTS @ x))
    with pytest.raises(ppto.TransformError, match=r"p is read afterwards") as error:
        ppto.grad(passes_a_zero_d_array)(x)
    assert "test_zero_d_writes.py" in str(error.value)
    assert "t += 1.0" in str(error.value)


def test_a_helper_adding_to_its_rank_0_parameter_itself_is_differentiated():
    x = np.array([0.3, -0.2, 0.5])
    value, gradient = ppto.value_and_grad(passes_a_number_added_to)(x)
    np.testing.assert_allclose(float(value), passes_a_number_added_to(x), rtol=1e-12)
    expected = central_differences(passes_a_number_added_to, (x,), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7)


def read_again_after_the_call(x):
    z = np.array(np.sum(x))  # (_added_to's s += 1.0 writes into it in NumPy)
    r = _added_to(z)
    return np.sum(r * x) + z


def read_again_through_another_name(x):
    z = np.array(np.sum(x))
    kept = z
    r = _added_to(z)
    return np.sum(r * x) + kept


def passed_again_in_a_loop(x):
    z = np.array(np.sum(x))
    for _ in range(2):
        r = _added_to(z)
    return np.sum(r * x)


@pytest.mark.parametrize(
    "function",
    [
        read_again_after_the_call,
        read_again_through_another_name,
        passed_again_in_a_loop,
    ],
)
def test_a_rank_0_argument_a_helper_adds_to_read_again_is_refused(function):
    # (silently wrong before: NumPy's s += 1.0 changed the caller's 0-d array z)
    x = np.array([0.3, -0.2, 0.5])
    with pytest.raises(ppto.TransformError, match=r"_added_to may change the arg"):
        ppto.grad(function)(x)


def rebound_to_the_result(x):
    z = np.array(np.sum(x))
    z = _added_to(z)  # (z's old value is read no more)
    return np.sum(z * x)


def _stepped(c, v):
    c += v
    return c * 0.5


def carried_through_a_loop(x):
    c = 0.0
    for i in range(3):
        c = _stepped(c, x[i])  # (c's old value is read no more)
    return c


def a_reduction_read_again(x):
    s = np.sum(x)  # (a NumPy number: += rebinds it in _added_to)
    return np.sum(_added_to(s) * x) * s


def _doubled_after_adding(p, v):
    p += v
    return p * 2.0


def an_element_read_again(x):
    c = x[0]  # (a NumPy number: += rebinds it in the helper)
    d = _doubled_after_adding(c, 1.0)
    return d * c + x[1]


def a_matrix_element_read_again(x):
    m = np.reshape(x, (1, 3))
    c = m[0, -1]
    d = _doubled_after_adding(c, x[1])
    return d * c


@pytest.mark.parametrize(
    "function",
    [
        rebound_to_the_result,
        carried_through_a_loop,
        a_reduction_read_again,
        an_element_read_again,
        a_matrix_element_read_again,
    ],
)
def test_a_rank_0_argument_a_helper_adds_to_and_not_read_again(function):
    x = np.array([0.3, -0.2, 0.5])
    value, gradient = ppto.value_and_grad(function)(x)
    np.testing.assert_allclose(float(value), function(x), rtol=1e-12)
    expected = central_differences(function, (x,), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7)


def an_ellipsis_of_a_zero_d_array_read_again(x):
    z = np.array(np.sum(x))
    c = z[...]  # (a 0-d array viewing z: the helper's += writes into both)
    d = _doubled_after_adding(c, 1.0)
    return np.sum(d * x) + z


def test_an_ellipsis_index_still_counts_as_a_zero_d_array():
    x = np.array([0.3, -0.2, 0.5])
    with pytest.raises(ppto.TransformError):
        ppto.grad(an_ellipsis_of_a_zero_d_array_read_again)(x)
