"""Values written into an integer array (``k[1] = x[0] * 3.0``) are truncated by
NumPy: the array's values are flat in x almost everywhere, so no derivative passes
through them. ppto passed the written value's derivative on (a wrong gradient and
tangent), whether the array's dtype was known when the code was made (an integer
argument) or only when it ran. And ``k[1:] *= 1.5``, which NumPy refuses for an
integer array (the slice is an array: its in-place cast is not 'same_kind'), ran
and truncated where the value written was not differentiated. Gradients and
tangents are compared with float64 central differences, at points away from the
jumps of the truncation."""

import re

import numpy as np
import pytest
from numpy import ones

import ppto
from tests.corpus.checks import (
    assert_gradient,
    central_differences,
    directional_differences,
)

X = np.array([0.7, 1.3, -0.45])
N = np.array([1, 2, 3])
TANGENT = np.array([0.3, -0.2, 0.5])


def into_an_integer_argument(x, n):
    n[1] = x[0] * 3.0
    return np.sum(x * n)


def added_into_an_integer_argument(x, n):
    n[1] += x[0]
    return np.sum(x * n)


def into_arange(x, n):
    k = np.arange(3)
    k[1] = x[0] * 3.0
    return np.sum(x * k)


def into_zeros_of_integers(x, n):
    k = np.zeros(3, dtype=int)
    k[1:] = x[1:] * 3.0
    return np.sum(x * k)


WHOLE = np.int32  # (a dtype named outside the function)


def into_zeros_of_a_dtype_named_outside(x, n):
    k = np.zeros(3, WHOLE)
    k[0] = x[0] * 2.5
    return np.sum(x * k)


def into_ones_imported_by_name(x, n):
    k = ones(3, dtype="int64")
    k[2] = x[1] * 3.5
    return np.sum(x * k)


def into_integers_written_out(x, n):
    k = np.array([1, 2, 3])
    k[1] += x[1] * 2.0
    return np.sum(x * k)


def into_integers_known_when_run(x, n):
    k = n * 1  # (not differentiated: its dtype is known when the code runs)
    k[0] = x[2] * 5.0
    return np.sum(x * k)


def into_integers_in_a_loop(x, n):
    k = n + 0
    for i in range(3):
        k[i] = x[i] * 4.0
    return np.sum(x * k)


def into_floats_known_when_run(x, n):
    h = n * 1.0
    h[0] = x[2] * 5.0  # (floats: the derivative passes)
    return np.sum(x * h)


def into_the_sigmoid_of_integers(x, n):
    h = ppto.sigmoid(n)  # (floats, as NumPy's exp of integers: the derivative passes)
    h[0] = x[0] * 3.0
    return np.sum(x * h)


WRITES = [
    into_an_integer_argument,
    added_into_an_integer_argument,
    into_arange,
    into_zeros_of_integers,
    into_zeros_of_a_dtype_named_outside,
    into_ones_imported_by_name,
    into_integers_written_out,
    into_integers_known_when_run,
    into_integers_in_a_loop,
    into_floats_known_when_run,
    into_the_sigmoid_of_integers,
]


def fresh(function):
    """``function`` on a copy of its integer argument (it writes into it)."""
    return lambda x, n: float(np.asarray(function(x, np.copy(n))))


@pytest.mark.parametrize("function", WRITES, ids=lambda f: f.__name__)
def test_value_and_gradient(function):
    value, gradient = ppto.value_and_grad(function)(X, np.copy(N))
    assert float(value) == pytest.approx(fresh(function)(X, N), rel=1e-12)
    expected = central_differences(fresh(function), (X, N), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


# (jvp takes tangents of every argument, and an integer one has none: x alone is
# passed to a function calling these, which must not write into their argument)
LOCAL_WRITES = [f for f in WRITES if "argument" not in f.__name__]


@pytest.mark.parametrize("function", LOCAL_WRITES, ids=lambda f: f.__name__)
def test_tangent(function):
    def of_x(x):
        return function(x, np.copy(N))

    _, tangent = ppto.jvp(of_x, (X,), (TANGENT,))
    expected = directional_differences(of_x, (X,), {0: TANGENT})
    np.testing.assert_allclose(float(np.asarray(tangent)), expected, rtol=1e-6)


def test_the_test_is_made_when_the_code_runs_only_where_the_dtype_is_not_known():
    """An array of integers or floats known when the code is made has the branch
    taken there; one computed where the transformation does not follow dtypes
    (``n * 1`` not differentiated) gets ``whole_numbers`` tested when it runs."""
    for known in (
        into_an_integer_argument,
        into_arange,
        into_zeros_of_integers,
        into_zeros_of_a_dtype_named_outside,  # (the names resolved as the
        into_ones_imported_by_name,  # function's namespace has them)
    ):
        assert "whole_numbers" not in ppto.show_grad(known, X, N, file=None)
    floats = ppto.show_grad(into_floats_known_when_run, X, N, file=None)
    assert "whole_numbers(h)" in floats
    plain = ppto.show_grad(_into_zeros, X, N, file=None)
    assert "whole_numbers" not in plain and "getitem(" in plain


def _into_zeros(x, n):
    h = np.zeros(3)  # (float64: the derivative passes, no test)
    h[0] = x[2] * 5.0
    return np.sum(x * h)


def multiplied_slice_of_an_integer_argument(x, n):
    n[1:] *= 1.5
    return np.sum(x * n)


def added_slice_of_integers_written_out(x, n):
    k = np.array([1, 2, 3])
    k[:2] += 0.5
    return np.sum(x * k)


def added_slice_of_integers_known_when_run(x, n):
    k = n * 1  # (its dtype is known when the code runs: the write checks then)
    k[1:] += x[1:] * 0.5
    return np.sum(x * k)


@pytest.mark.parametrize(
    "function",
    [
        multiplied_slice_of_an_integer_argument,
        added_slice_of_integers_written_out,
        added_slice_of_integers_known_when_run,
    ],
    ids=lambda f: f.__name__,
)
def test_floats_into_an_integer_slice_are_refused_at_the_line(function):
    with pytest.raises(TypeError):  # (NumPy's own refusal)
        fresh(function)(X, N)
    with pytest.raises(ppto.DTypeError, match="same_kind") as raised:
        ppto.grad(function)(X, np.copy(N))
    first = function.__code__.co_firstlineno
    line = first + (1 if "argument" in function.__name__ else 2)
    assert re.search(rf'test_integer_writes\.py"?, line {line}\b', str(raised.value))


def added_to_a_slice_of_floats_known_when_run(x, n):
    h = n * 1.0
    h[1:] += x[1:] * 0.5  # (floats: NumPy takes them, and so does ppto)
    return np.sum(x * h)


def test_a_slice_of_floats_known_when_run_is_added_into():
    function = added_to_a_slice_of_floats_known_when_run
    source = ppto.show_grad(function, X, N, file=None)
    assert "test_integer_writes.py, line" in source  # (the write checks when run)
    value, gradient = ppto.value_and_grad(function)(X, N)
    assert float(value) == pytest.approx(function(X, np.copy(N)), rel=1e-12)
    expected = central_differences(fresh(function), (X, N), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def added_to_an_integer_element(x, n):
    k = np.array([1, 2, 3])
    k[1] += 1.5  # (an element is a number: NumPy truncates 3.5 to 3)
    return np.sum(x * k)


def test_floats_into_an_integer_element_are_truncated_as_numpys():
    value, gradient = ppto.value_and_grad(added_to_an_integer_element)(X, N)
    assert float(value) == added_to_an_integer_element(X, N)
    np.testing.assert_array_equal(np.asarray(gradient), [1.0, 3.0, 3.0])
