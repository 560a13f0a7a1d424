"""Differentiated Python floats are weak scalars, as NumPy 2 makes them (NEP 50):
``x32 * 2.0`` is float32, so ppto's value, gradients and tangents have the dtypes
the function itself gives (they came out float64 when ppto turned the float into a
NumPy float64). A Python float's gradient is a 0-d float64 tensor (the dtype of
``ppto.tensor(2.0)``). Values are checked against float64 central differences of
the plain function."""

import numpy as np
import pytest

import ppto
from ppto.api import NUMBERS, WEAK_NUMBER
from ppto.fusion.kernels import LARGE
from tests.corpus.checks import central_differences, directional_differences
from tests.test_fusion import fallback_calls

RNG = np.random.default_rng(50)
X = RNG.uniform(0.5, 1.5, 5)
S = 0.7
# float32 values and gradients: central differences in float64 to this (relative)
TOLERANCE = {"float64": 1e-6, "float32": 2e-4}


def scaled_square(x, s):
    return np.sum((x * s) ** 2) + s * s


def number_reductions(x, s):
    # max, prod and mean's rules read their input's dtype: here a Python float's
    return np.sum(x * np.max(s)) + np.prod(s) * np.mean(x) + np.min(s * s)


def chosen_by_number(x, s):
    return np.sum(np.where(x > 1.0, s, x) * np.maximum(x, s) + np.clip(x * s, 0, 1))


def number_in_a_loop(x, s):
    total = 0.0
    for _ in range(3):
        s = s * 0.5 + 0.1
        if s > 0.2:
            total = total + np.sum(x * s)
    return total + s


def strong_exponential(x, s):
    # np.exp of a Python float is a NumPy float64 (strong): the result is float64
    # whatever x's dtype, and so must ppto's be
    return np.sum(x * np.exp(s))


def numbers_only(a, b):
    return a * b + a / b


FUNCTIONS = [
    scaled_square,
    number_reductions,
    chosen_by_number,
    number_in_a_loop,
    strong_exponential,
]


def direct_dtype(function, *args) -> np.dtype:
    """The dtype of what the function itself returns (a Python float: float64)."""
    return np.asarray(function(*args)).dtype


def assert_close(actual, expected, dtype, what):
    actual = np.asarray(actual, dtype=np.float64)
    scale = max(float(np.max(np.abs(expected))), 1e-2)
    error = float(np.max(np.abs(actual - expected)))
    assert error <= TOLERANCE[dtype] * scale, f"{what}: {actual} vs {expected}"


def assert_number_gradient(gradient, expected, dtype, what):
    """A Python float's gradient: a 0-d float64 tensor, close to ``expected``."""
    assert isinstance(gradient, ppto.Tensor), f"{what}: {type(gradient)}"
    assert gradient.dtype == np.float64 and gradient.shape == (), what
    assert_close(gradient, expected, dtype, what)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_grad_and_value_and_grad_keep_numpys_dtypes(function, dtype):
    x = X.astype(dtype)
    expected_dx = central_differences(function, (X, S), 0)
    expected_ds = central_differences(function, (X, S), 1)
    gradient = ppto.value_and_grad(function, wrt=(0, 1))
    for _ in range(2):  # (the second call takes the fast path)
        value, (dx, ds) = gradient(x, S)
        assert value.dtype == direct_dtype(function, x, S)
        assert_close(value, function(X, S), dtype, "value")
        assert dx.dtype == x.dtype
        assert_close(dx, expected_dx, dtype, "dx")
        assert_number_gradient(ds, expected_ds, dtype, "ds")
    ds_alone = ppto.grad(function, wrt=1)(x, S)
    assert_number_gradient(ds_alone, expected_ds, dtype, "grad wrt s")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_vjp_keeps_numpys_dtypes(function, dtype):
    x = X.astype(dtype)
    out, pullback = ppto.vjp(function, x, S)
    assert out.dtype == direct_dtype(function, x, S)
    dx, ds = pullback(1.0)
    assert dx.dtype == x.dtype
    assert_close(dx, central_differences(function, (X, S), 0), dtype, "dx")
    assert_number_gradient(ds, central_differences(function, (X, S), 1), dtype, "ds")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_jvp_keeps_numpys_dtypes(function, dtype):
    x = X.astype(dtype)
    v = RNG.standard_normal(X.shape)
    out, tangent = ppto.jvp(function, (x, S), (v.astype(dtype), 0.5))
    assert out.dtype == tangent.dtype == direct_dtype(function, x, S)
    expected = directional_differences(function, (X, S), {0: v, 1: 0.5})
    assert_close(tangent, expected, dtype, "tangent")


def test_a_function_of_numbers_only():
    value, (da, db) = ppto.value_and_grad(numbers_only, wrt=(0, 1))(0.6, 1.5)
    assert value.dtype == np.float64
    np.testing.assert_allclose(float(value), numbers_only(0.6, 1.5), rtol=1e-15)
    assert_number_gradient(
        da, central_differences(numbers_only, (0.6, 1.5), 0), "float64", "da"
    )
    assert_number_gradient(
        db, central_differences(numbers_only, (0.6, 1.5), 1), "float64", "db"
    )
    out, tangent = ppto.jvp(numbers_only, (0.6, 1.5), (1.0, -2.0))
    expected = directional_differences(numbers_only, (0.6, 1.5), {0: 1.0, 1: -2.0})
    assert_close(tangent, expected, "float64", "tangent")


def affine(params, x):
    return np.sum(x * params["scale"] + params["shift"]) * params["scale"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_float_in_a_dict_of_parameters(dtype):
    x = X.astype(dtype)
    params = {"scale": S, "shift": np.linspace(-1, 1, 5).astype(dtype)}
    value, grads = ppto.value_and_grad(affine)(params, x)
    assert value.dtype == direct_dtype(affine, params, x)
    assert list(grads) == ["scale", "shift"]
    assert grads["shift"].dtype == np.dtype(dtype)

    def at(scale, shift):
        return affine({"scale": scale, "shift": shift}, X)

    shift = params["shift"].astype(np.float64)
    expected_scale = central_differences(at, (S, shift), 0)
    assert_number_gradient(grads["scale"], expected_scale, dtype, "scale")
    assert_close(grads["shift"], central_differences(at, (S, shift), 1), dtype, "shift")


def test_second_derivatives_with_respect_to_a_float():
    def plain(s):
        return scaled_square(X, s)

    step = 1e-4
    curvature = (plain(S + step) - 2 * plain(S) + plain(S - step)) / step**2
    second = ppto.grad(ppto.grad(scaled_square, wrt=1), wrt=1)(X, S)
    assert_number_gradient(second, curvature, "float32", "d2/ds2")
    hessian = ppto.hessian(scaled_square, wrt=1)(X, S)
    assert_close(hessian, curvature, "float32", "hessian")
    _, along = ppto.jvp(ppto.grad(scaled_square, wrt=1), (X, S), (None, 2.0))
    assert_close(along, 2.0 * curvature, "float32", "Hessian-vector product")


# With these float32 values a float32 sum cancels to 0, a float64 sum gives 1: which
# shows in which dtype a number cotangent or tangent was computed.
CANCELLING = np.array([1e8, 1.0, -1e8], dtype=np.float32)


def scaled_sum(x, s):
    return np.sum(x * s)


def test_a_number_cotangent_takes_the_outputs_dtype():
    out, pullback = ppto.vjp(scaled_sum, CANCELLING, 1.0)
    assert out.dtype == np.float32
    from_number = float(pullback(1.0)[1])
    assert from_number == float(pullback(np.ones((), np.float32))[1])
    assert from_number != float(pullback(np.ones((), np.float64))[1])


def test_a_number_tangent_of_a_float_stays_weak():
    _, tangent = ppto.jvp(scaled_sum, (CANCELLING, 1.0), (None, 1.0))
    assert tangent.dtype == np.float32
    assert float(tangent) == float(np.sum(CANCELLING * 1.0))  # (NumPy's float32 sum)
    assert float(tangent) != float(np.sum(CANCELLING * np.float64(1.0)))


def test_describe_tells_a_weak_number():
    gradient = ppto.grad(scaled_sum, wrt=(0, 1))
    x = X.astype(np.float32)
    described = gradient.describe([x, S], [x, S])
    assert described[0] == (1, (5,), None, np.dtype(np.float32), False)
    assert described[1] == WEAK_NUMBER == (0, (), None, float, False)
    # not differentiated, a float is passed as it is, described only as a number
    # (no dtype, no value: the alias check's NUMBERS, which an array's is not)
    not_differentiated = ppto.grad(scaled_sum, wrt=0).describe([x, S], [x, S])[1]
    assert not_differentiated is NUMBERS and not_differentiated != WEAK_NUMBER


def chain_with_number(x, s):
    return np.sum(np.tanh(x * s) * np.exp(-x) + s * x * x)


def test_fused_regions_take_a_float_as_numpy_does():
    """Large float32 arrays and a differentiated Python float: the fused passes run
    (none falls back to its statements) in float32, as the function computes."""
    x64 = np.random.default_rng(3).standard_normal(LARGE + 5)
    x = x64.astype(np.float32)
    gradient = ppto.value_and_grad(chain_with_number, wrt=(0, 1))
    calls = fallback_calls(gradient, (x, S))
    value, (dx, ds) = gradient(x, S)
    assert calls == []
    assert (
        value.dtype == dx.dtype == np.float32 == direct_dtype(chain_with_number, x, S)
    )
    assert ds.dtype == np.float64 and ds.shape == ()
    # the derivatives written out, in float64
    tanh, decay = np.tanh(x64 * S), np.exp(-x64)
    expected_dx = S * (1 - tanh**2) * decay - tanh * decay + 2 * S * x64
    expected_ds = np.sum(x64 * (1 - tanh**2) * decay + x64 * x64)
    np.testing.assert_allclose(float(value), chain_with_number(x64, S), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dx), expected_dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(ds), expected_ds, rtol=1e-5)


@pytest.mark.parametrize(
    "function",
    [scaled_square, number_reductions, chain_with_number],
    ids=lambda f: f.__name__,
)
def test_a_float_with_arrays_on_emulated_cupy(emulated_cupy, function):
    """CuPy code (lowered and fused for CUDA) takes the Python float as NumPy does."""
    x = X.astype(np.float32)
    value, (dx, ds) = ppto.value_and_grad(function, wrt=(0, 1))(
        ppto.tensor(x, device="cuda"), S
    )
    assert value.device == dx.device == "cuda:0"
    assert value.dtype == direct_dtype(function, x, S)
    assert dx.dtype == np.float32
    assert_close(dx.numpy(), central_differences(function, (X, S), 0), "float32", "dx")
    assert ds.dtype == np.float64 and ds.shape == ()
    expected_ds = central_differences(function, (X, S), 1)
    assert_close(ds.numpy(), expected_ds, "float32", "ds")
