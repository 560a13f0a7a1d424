"""Python lists (and tuples) of numbers given as data, not differentiated, to the
matrix products (``@``, ``np.dot``): read as NumPy reads them, as arrays. Gradients
and tangents with respect to the array operand against float64 central
differences."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences


def matmul(x, w):
    return np.sum(np.sin(x @ w))


def numpy_dot(x, w):
    return np.sum(np.sin(np.dot(x, w)))


def matmul_right(x, w):
    return np.sum(np.sin(w @ x))


W = np.array([[0.5, -1.0, 0.3], [2.0, 0.25, -0.7]])
DATA = {
    "nested-list": [[1.0, 2.0], [3.0, 4.0]],
    "flat-list": [1.0, 2.0],
    "tuple": (1.5, -2.0),
    "integers": [[1, 2], [3, 4], [5, 6]],
}


def operands(function, label):
    data = DATA[label]
    if function is matmul_right:  # (w @ x: x's rows are w's columns)
        width = np.shape(data)[0]
        return data, np.linspace(-1.0, 1.0, 3 * width).reshape(3, width)
    return data, W  # (each one's rows have two numbers: W's rows)


@pytest.mark.parametrize("label", sorted(DATA))
@pytest.mark.parametrize("function", [matmul, numpy_dot, matmul_right])
def test_list_data_in_a_matrix_product(function, label):
    x, w = operands(function, label)
    value, gradient = ppto.value_and_grad(function, wrt=1)(x, w)
    assert float(np.asarray(value)) == pytest.approx(function(x, w), rel=1e-12)
    expected = central_differences(function, (x, w), 1)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-9)
    direction = np.cos(np.arange(w.size)).reshape(w.shape)
    _, tangent = ppto.jvp(lambda w: function(x, w), (w,), (direction,))
    assert float(np.asarray(tangent)) == pytest.approx(
        float(np.sum(expected * direction)), rel=1e-6
    )
