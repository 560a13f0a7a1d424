"""float16 means as NumPy computes them (a float32 sum, divided in float32, the
result float16): their values, fused and not, against NumPy's own float16 result,
and their gradients against float64 central differences, past 65504 elements
(float16's largest finite number) too."""

import io

import numpy as np
import pytest

import ppto

COUNT = 70000  # past float16's largest finite number: a count that is inf there
SAMPLED = 12  # elements checked by central differences (each costs two calls)


def sampled_central_differences(function, x, rng, step=1e-4):
    """d function / d x at SAMPLED random elements, in float64."""
    point = x.astype(np.float64)
    indices = [tuple(int(rng.integers(n)) for n in x.shape) for _ in range(SAMPLED)]
    slopes = []
    for index in indices:
        ahead, behind = point.copy(), point.copy()
        ahead[index] += step
        behind[index] -= step
        slopes.append((function(ahead) - function(behind)) / (2 * step))
    return indices, np.array(slopes)


def mean_of_squares(x):
    return np.mean(x * x)


def row_means(x):
    return np.sum(np.mean(x * x, axis=1) * np.array([1.0, 3.0], np.float16))


def unweighted_average(x):
    return np.average(x * x)


@pytest.mark.parametrize(
    "function, shape",
    [
        (mean_of_squares, (COUNT,)),
        (row_means, (2, COUNT)),
        (unweighted_average, (COUNT,)),
    ],
)
def test_float16_mean_gradient_past_65504_elements(function, shape):
    rng = np.random.default_rng(3)
    x = (4 * rng.standard_normal(shape)).astype(np.float16)
    gradient = np.asarray(ppto.grad(function)(x))
    assert gradient.dtype == np.float16
    indices, expected = sampled_central_differences(function, x, rng)
    got = np.array([gradient[index] for index in indices], dtype=np.float64)
    # float16's relative precision, and its spacing below 2**-14 (subnormals)
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2**-23)
    assert np.count_nonzero(gradient) > 0.99 * gradient.size


def test_float16_mean_tangent_past_65504_elements():
    rng = np.random.default_rng(4)
    x = (4 * rng.standard_normal(COUNT)).astype(np.float16)
    dx = rng.standard_normal(COUNT).astype(np.float16)
    _, tangent = ppto.jvp(unweighted_average, (x,), (dx,))
    wide = x.astype(np.float64)
    expected = np.mean(2 * wide * dx.astype(np.float64))
    assert np.asarray(tangent).dtype == np.float16
    np.testing.assert_allclose(float(np.asarray(tangent)), expected, rtol=2e-3)


def test_only_float16_past_2048_elements_divides_in_float32():
    """Other dtypes (and short float16 means) divide by the count written out."""
    for dtype, size in (("float32", COUNT), ("float64", COUNT), ("float16", 2048)):
        x = np.ones(size, dtype)
        source = ppto.show_grad(mean_of_squares, x, file=io.StringIO())
        assert f"/ {size}" in source and "divide_by_count" not in source
    x = np.ones(2049, np.float16)
    source = ppto.show_grad(mean_of_squares, x, file=io.StringIO())
    assert "divide_by_count(" in source


def squared_error(a, b):
    return np.mean(np.square(a - b))


@pytest.mark.parametrize("function", [mean_of_squares, squared_error])
def test_fused_float16_mean_of_squares_is_numpys_float16_mean(function):
    """Sums of squares past 65504 (40000 elements, mean 4): the fused rules
    (mean_of_squares, mean_squared_error), which run from the second call on,
    give NumPy's float16 mean, not inf."""
    rng = np.random.default_rng(0)
    a = (2 * rng.standard_normal(40000)).astype(np.float16)
    b = (2 * rng.standard_normal(40000)).astype(np.float16)
    arguments = (a,) if function is mean_of_squares else (a, b)
    expected = function(*arguments)
    assert expected.dtype == np.float16 and np.isfinite(expected)
    fused = ppto.show_grad(function, *arguments, fused=True, file=io.StringIO())
    assert "__fused_mean_" in fused
    transformed = ppto.value_and_grad(function)
    for _ in range(3):
        value = np.asarray(transformed(*arguments)[0])
        assert value.dtype == np.float16 and value == expected
