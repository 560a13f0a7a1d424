"""A helper's ``p += v`` into its rank-0 argument: NumPy rebinds ``p`` where the
caller passed a number (a Python float argument, ``float(v)``, ``v.item()``) and
writes into the caller's 0-d array (``np.array(0.5)``) otherwise. Where the caller
never sees the difference (a number; an array it rebinds at once and never reads
again) the call is differentiated: values equal the plain function's, gradients
float64 central differences. Where it would (the array, a view of it, or another
name for it read after the call), the call is refused at its line."""

import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences


def _step(c, v):
    p = c
    p += v  # (writes into c where c is a 0-d array, rebinds p for a number)
    return p * 2.0


def a_float_argument(x, c):
    c = _step(c, x[0])
    return c * x[1]


def a_fresh_array_rebound_in_a_loop(x):
    c = np.array(0.5)  # (written into on the first turn, then never read again)
    for i in range(2):
        c = _step(c, x[i])
    return c * x[0]


def a_float_read_again(x):
    c = float(x[0])
    d = _step(c, x[1])
    return d * c * x[1]


def an_item_read_again(x):
    c = x[0].item()
    d = _step(c, x[1])
    return d * c * x[1]


def a_float32_array_rebound(x):
    c = np.array(0.5, dtype=np.float32)  # (+= keeps float32, as NumPy's does)
    c = _step(c, x[0])
    return c * x[1]


def an_array_rebound_in_a_branch(x):
    c = np.array(0.5)
    if x[0] > 0:
        c = _step(c, x[0])
    return c * x[1]


def a_float_read_in_a_loop(x):
    c = float(x[0])
    s = 0.0
    for i in range(2):
        s = s + _step(c, x[i]) * c
    return s


ACCEPTED = [
    a_fresh_array_rebound_in_a_loop,
    a_float_read_again,
    an_item_read_again,
    an_array_rebound_in_a_branch,
    a_float_read_in_a_loop,
]
X = np.array([0.7, 1.3])


@pytest.mark.parametrize("function", ACCEPTED, ids=[f.__name__ for f in ACCEPTED])
def test_a_helper_adding_into_a_value_the_caller_cannot_see_changed(function):
    value, gradient = ppto.value_and_grad(function)(X.copy())
    assert float(value) == pytest.approx(float(function(X.copy())), rel=1e-7)
    expected = central_differences(function, (X,), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7)


def test_a_float32_array_keeps_its_dtype_through_the_helper():
    # (p += v rounds to float32 in NumPy, whose central differences would be
    # noise: the derivative, which takes the rounding for the identity, is the
    # float64 function's)
    value, gradient = ppto.value_and_grad(a_float32_array_rebound)(X.copy())
    assert float(value) == float(a_float32_array_rebound(X.copy()))
    assert float(value) != pytest.approx((0.5 + X[0]) * 2.0 * X[1], rel=1e-12)

    def in_float64(x):
        return _step(np.array(0.5), x[0]) * x[1]

    expected = central_differences(in_float64, (X,), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)


@pytest.mark.parametrize("wrt", [0, (0, 1)])
def test_a_python_float_argument_added_into_by_a_helper(wrt):
    value, gradient = ppto.value_and_grad(a_float_argument, wrt=wrt)(X.copy(), 0.5)
    assert float(value) == pytest.approx(a_float_argument(X.copy(), 0.5), rel=1e-12)
    gradients = gradient if isinstance(wrt, tuple) else (gradient,)
    for position, found in zip(np.atleast_1d(wrt), gradients):
        expected = central_differences(a_float_argument, (X, 0.5), int(position))
        np.testing.assert_allclose(np.asarray(found), expected, rtol=1e-7)


def a_fresh_array_read_again(x):
    c = np.array(0.5)
    d = _step(c, x[0])  # (NumPy's c is 0.5 + x[0] from here on)
    return d * c


def another_name_read_after_a_loop(x):
    c = np.array(0.5)
    d = c  # (the first turn writes into d's array too)
    for i in range(2):
        c = _step(c, x[i])
    return c * d * x[0]


def passed_again_in_a_loop(x):
    c = np.array(0.5)
    for i in range(2):
        d = _step(c, x[i])
    return d * x[0]


def read_in_a_branch(x):
    c = np.array(0.5)
    d = _step(c, x[0])
    if x[1] > 0:
        d = d * c
    return d * x[1]


def a_zero_d_argument_read_again(x, c):
    d = _step(c, x[0])
    return d * c * x[1]


def a_view_of_the_argument(x):
    v = x[1:2].reshape(())  # (a view: the helper's += writes into x)
    d = _step(v, x[0])
    return d * np.sum(x)


def a_view_written_out(x):
    c = np.array(0.5)
    d = _step(c[...], x[0])
    return d * c * x[1]


REFUSED = [
    (a_fresh_array_read_again, (X,)),
    (another_name_read_after_a_loop, (X,)),
    (passed_again_in_a_loop, (X,)),
    (read_in_a_branch, (X,)),
    (a_zero_d_argument_read_again, (X, np.array(0.5))),
    (a_view_of_the_argument, (X,)),
    (a_view_written_out, (X,)),
]


@pytest.mark.parametrize(
    "function, arguments", REFUSED, ids=[f.__name__ for f, _ in REFUSED]
)
def test_a_helper_adding_into_a_zero_d_array_read_again_is_refused(function, arguments):
    fresh = [np.copy(a) for a in arguments]
    with pytest.raises(
        ppto.TransformError, match=r"may change the argument|in place"
    ) as error:
        ppto.value_and_grad(function)(*fresh)
    assert "test_zero_d_calls.py" in str(error.value)


def test_the_refusal_names_the_call():
    with pytest.raises(ppto.TransformError) as error:
        ppto.grad(a_fresh_array_read_again)(X.copy())
    message = str(error.value)
    assert "_step may change the argument it is given for c in place" in message
    written = inspect.getsourcelines(_step)[1] + 2  # (the line of p += v)
    assert "(p += v" in message and f"line {written})" in message
    assert "test_zero_d_calls.py" in message
    assert "d = _step(c, x[0])" in message  # (the caller's line, quoted)


def test_the_refused_cases_do_differ_in_numpy():
    # (each refusal stands for a value the generated code would get wrong: NumPy's
    # helper changed the caller's array, a copy of the function that cannot
    # change it gives another value)
    def as_if_copied(x):
        c = np.array(0.5)
        d = _step(c.copy(), x[0])
        return d * c

    assert a_fresh_array_read_again(X.copy()) != pytest.approx(as_if_copied(X.copy()))
