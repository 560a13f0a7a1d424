"""``ppto.jacobian`` (``jacrev``, ``jacfwd``) against central differences in float64,
in both modes: shapes (JAX's ``output.shape + argument.shape``), several arguments,
several outputs, loops and branches in the function, dtypes, devices, and errors."""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import EPS

MODES = ["reverse", "forward"]
A = np.array([[0.3, -0.2, 0.5, 0.1], [0.7, 0.4, -0.6, 0.2], [-0.1, 0.9, 0.3, -0.5]])


def differences(function, arguments, position):
    """d function(*arguments) / d arguments[position], the whole output for each
    input element: shape output.shape + argument.shape."""
    arguments = [np.array(a, dtype=np.float64) for a in arguments]
    point = arguments[position]
    columns = []
    for index in np.ndindex(point.shape):
        sides = []
        for step in (EPS, -EPS):
            moved = point.copy()
            moved[index] += step
            arguments[position] = moved
            sides.append(np.asarray(function(*arguments), dtype=np.float64))
        columns.append((sides[0] - sides[1]) / (2 * EPS))
    arguments[position] = point
    out_shape = columns[0].shape
    return np.stack(columns, axis=-1).reshape(out_shape + point.shape)


def layer(x, w):
    return np.sin(A @ x) * w


def looped(x, w):
    h = x
    for step in range(3):
        if np.sum(h) > 0:
            h = np.tanh(A.T @ (w * step) + h)
        else:
            h = h * h + 0.5
    return h[1:] * w


def matrix_in_matrix_out(m):
    return np.exp(m) @ m.T


POINT_X = np.array([0.4, -0.3, 0.8, 0.1])
POINT_W = np.array([1.5, -0.5, 2.0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "function, arguments",
    [
        (layer, (POINT_X, POINT_W)),
        (looped, (POINT_X, POINT_W)),
        (looped, (-POINT_X, POINT_W)),  # the other branch
    ],
    ids=["layer", "loop-then", "loop-else"],
)
def test_jacobian_against_differences(mode, function, arguments):
    jacobians = ppto.jacobian(function, wrt=(0, 1), mode=mode)(*arguments)
    assert isinstance(jacobians, tuple) and len(jacobians) == 2
    for position, jacobian in enumerate(jacobians):
        expected = differences(function, arguments, position)
        assert isinstance(jacobian, ppto.Tensor)
        assert jacobian.shape == expected.shape
        np.testing.assert_allclose(np.asarray(jacobian), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
def test_matrix_argument_and_output_shape(mode):
    m = np.array([[0.2, -0.4, 0.1], [0.5, 0.3, -0.2]])
    jacobian = ppto.jacobian(matrix_in_matrix_out, mode=mode)(m)
    expected = differences(matrix_in_matrix_out, (m,), 0)
    assert jacobian.shape == (2, 2, 2, 3)
    np.testing.assert_allclose(np.asarray(jacobian), expected, rtol=1e-6, atol=1e-8)


def test_reverse_and_forward_agree_and_aliases():
    reverse = ppto.jacrev(layer, wrt="w")(POINT_X, POINT_W)
    forward = ppto.jacfwd(layer, wrt="w")(POINT_X, POINT_W)
    np.testing.assert_allclose(np.asarray(reverse), np.asarray(forward), rtol=1e-12)
    np.testing.assert_allclose(
        np.asarray(reverse), np.diag(np.sin(A @ POINT_X)), rtol=1e-12
    )


def two_outputs(x, w):
    return np.sum(x**2) * w, np.tanh(x)


@pytest.mark.parametrize("mode", MODES)
def test_tuple_output_gives_one_jacobian_per_output(mode):
    first, second = ppto.jacobian(two_outputs, wrt=0, mode=mode)(POINT_X, POINT_W)
    np.testing.assert_allclose(
        np.asarray(first),
        differences(lambda x, w: two_outputs(x, w)[0], (POINT_X, POINT_W), 0),
        rtol=1e-6,
        atol=1e-8,
    )
    np.testing.assert_allclose(
        np.asarray(second), np.diag(1 - np.tanh(POINT_X) ** 2), rtol=1e-12
    )


def scalar_out(x):
    return np.sum(np.exp(x) * x)


@pytest.mark.parametrize("mode", MODES)
def test_scalar_output_jacobian_is_the_gradient(mode):
    jacobian = ppto.jacobian(scalar_out, mode=mode)(POINT_X)
    assert jacobian.shape == POINT_X.shape
    gradient = ppto.grad(scalar_out)(POINT_X)
    np.testing.assert_allclose(np.asarray(jacobian), np.asarray(gradient), rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_float32_argument_gives_a_float32_jacobian(mode):
    x = POINT_X.astype(np.float32)
    w = POINT_W.astype(np.float32)
    jacobian = ppto.jacobian(layer, mode=mode)(x, w)
    assert jacobian.dtype == np.float32
    expected = differences(layer, (x, w), 0)
    np.testing.assert_allclose(np.asarray(jacobian), expected, rtol=1e-4, atol=1e-5)


def scaled(x, n):
    return x * n


@pytest.mark.parametrize("mode", MODES)
def test_integer_arguments_ride_along_and_keywords_bind(mode):
    jacobian = ppto.jacobian(scaled, mode=mode)(x=POINT_X, n=3)
    np.testing.assert_allclose(np.asarray(jacobian), 3 * np.eye(4), rtol=1e-12)


def test_errors_name_what_was_wrong():
    with pytest.raises(ppto.GradError, match="'n'"):
        ppto.jacobian(scaled, wrt=1)(POINT_X, 3)
    with pytest.raises(ppto.GradError, match="mode"):
        ppto.jacobian(scaled, mode="sideways")
    with pytest.raises(ppto.GradError, match="no parameter named 'q'"):
        ppto.jacobian(scaled, wrt="q")


@pytest.mark.parametrize("mode", MODES)
def test_cuda_argument_gives_a_cuda_jacobian(emulated_cupy, mode):
    x = ppto.tensor(POINT_X, device="cuda:0")
    jacobian = ppto.jacobian(layer, mode=mode)(x, POINT_W)
    assert str(jacobian.device) == "cuda:0"
    np.testing.assert_allclose(
        jacobian.numpy(), differences(layer, (POINT_X, POINT_W), 0), rtol=1e-6
    )


def weighted(x, s):
    return np.sum(np.sin(x) * x) * s


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_of_a_gradient_is_the_hessian(mode):
    hessian = ppto.jacobian(ppto.grad(weighted), mode=mode)(POINT_X, 2.0)
    gradient = lambda x, s: np.cos(x) * x * s + np.sin(x) * s  # noqa: E731
    expected = differences(gradient, (POINT_X, 2.0), 0)
    np.testing.assert_allclose(np.asarray(hessian), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
def test_python_float_argument_has_a_0d_jacobian_block(mode):
    jacobian = ppto.jacobian(layer, wrt=1, mode=mode)(POINT_X, 2.0)
    expected = differences(layer, (POINT_X, 2.0), 1)
    assert jacobian.shape == (3,)
    np.testing.assert_allclose(np.asarray(jacobian), expected, rtol=1e-6, atol=1e-8)
