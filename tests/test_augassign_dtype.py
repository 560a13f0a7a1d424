"""``t += v`` keeps t's dtype, as NumPy's in-place operators do: a float32 array
stays float32 whatever v is (a NumPy float64 such as ``np.tanh(s)`` of a Python
float, a float64 array), and a cast NumPy refuses in place (floats into an integer
array) raises a ``ppto.DTypeError`` naming the line. ppto wrote ``t = t + v`` and
gave float64 values. Values and dtypes are compared with the plain function's,
gradients and tangents with float64 central differences (float32 results to float32
precision)."""

import re

import numpy as np
import pytest

import ppto
from tests.corpus.checks import (
    as_float,
    assert_gradient,
    central_differences,
    directional_differences,
)
from tests.fuzz import checks as fuzz_checks
from tests.fuzz.checks import fused_for_any_size

RNG = np.random.default_rng(11)
X = RNG.uniform(0.5, 1.5, 5)
W = RNG.uniform(0.5, 1.5, 5)
S = 0.7
FLOAT32_RTOL = 2e-4


def strong_number_added(x, s):
    t = x * 2.0
    t += np.tanh(s) * x  # np.tanh(s) is a NumPy float64: t + ... is float64
    return np.sum(t * t)


def every_operator(x, w, s):
    # w stays float64 (it is not converted with x below): each step widens
    t = x * x
    t += w * s
    t -= np.exp(s) * x
    t *= w
    t /= 1.0 + w * w
    t **= 2
    return np.sum(np.tanh(t))


def in_a_loop(x, s):
    h = x * 1.0
    total = 0.0
    for _ in range(3):
        h += np.sin(s) * np.tanh(h)
        total += np.sum(h * h)
    return total


def subscript_written(x, s):
    t = x * 1.0
    t[1:] += np.cos(s) * x[:-1]
    t[0] += np.exp(s)
    return np.sum(t * t)


def from_a_dict(params, x):
    t = params["w"] * x
    t += np.tanh(params["s"]) * params["w"]
    return np.sum(t * t)


def list_extended(x, s):
    hs = [x * s]
    hs += [np.tanh(h) for h in hs]
    h = hs[0] * 1.0
    h += np.exp(s) * hs[1]
    return np.sum(h * h)


def arguments(function, dtype):
    """(the arguments in ``dtype``, the same in float64) for ``function``."""
    if function is every_operator:
        return (X.astype(dtype), W, S), (X, W, S)
    return (X.astype(dtype), S), (X, S)


FUNCTIONS = [strong_number_added, every_operator, in_a_loop, subscript_written]
WRT = {every_operator: (0, 2)}


def _check_value(value, function, args, reference_args, dtype):
    direct = function(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    assert value.dtype == np.asarray(direct).dtype
    rtol = 1e-12 if dtype == "float64" else FLOAT32_RTOL
    np.testing.assert_allclose(
        float(value), float(function(*reference_args)), rtol=rtol
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_value_and_gradient_keep_the_targets_dtype(function, dtype):
    args, reference_args = arguments(function, dtype)
    wrt = WRT.get(function, (0, 1))
    value, gradients = ppto.value_and_grad(function, wrt=wrt)(*args)
    _check_value(value, function, args, reference_args, dtype)
    for position, gradient in zip(wrt, gradients):
        expected = central_differences(function, reference_args, position)
        if dtype == "float64":
            assert_gradient(gradient, expected, f"d/d arg {position}")
            continue
        scale = max(float(np.max(np.abs(expected))), 1e-2)
        error = float(np.max(np.abs(as_float(gradient) - expected)))
        assert error <= FLOAT32_RTOL * scale, f"d/d arg {position}: {error}"


def test_float32_value_is_float32_as_numpys():
    """The bug itself: ppto's value was float64 where the function's is float32."""
    x = X.astype(np.float32)
    assert strong_number_added(np.copy(x), S).dtype == np.float32
    value = ppto.value_and_grad(strong_number_added)(x, S)[0]
    assert value.dtype == np.float32
    out, pullback = ppto.vjp(strong_number_added, x, S)
    assert out.dtype == np.float32 and pullback(1.0)[0].dtype == np.float32


def float64_array_added_twice(x, w):
    t = x * 1.0
    t += w
    t *= w
    return np.sum(t * t)


def test_a_second_add_of_a_constant_float64_array_keeps_float32():
    # the first cast's result was taken for float64 (the sum's dtype, as for a
    # number +=  rebinds): the second += lost its cast, float64 values came out
    x = X.astype(np.float32)
    direct = float64_array_added_twice(np.copy(x), W)
    assert direct.dtype == np.float32
    value, gradient = ppto.value_and_grad(float64_array_added_twice)(x, W)
    assert value.dtype == np.float32 and gradient.dtype == np.float32
    np.testing.assert_allclose(float(value), float(direct), rtol=1e-6)
    expected = central_differences(float64_array_added_twice, (X, W), 0)
    np.testing.assert_allclose(as_float(gradient), expected, rtol=FLOAT32_RTOL)
    v = RNG.standard_normal(X.shape)
    out, tangent = ppto.jvp(
        float64_array_added_twice, (x, W), (v.astype(np.float32), None)
    )
    assert out.dtype == np.float32 and tangent.dtype == np.float32
    np.testing.assert_allclose(float(out), float(direct), rtol=1e-6)
    along = directional_differences(float64_array_added_twice, (X, W), {0: v})
    np.testing.assert_allclose(float(tangent), along, rtol=FLOAT32_RTOL)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_forward_mode(function, dtype):
    args, reference_args = arguments(function, dtype)
    tangents = tuple(
        RNG.standard_normal(np.shape(a)).astype(dtype)
        if isinstance(a, np.ndarray)
        else 0.5
        for a in args
    )
    out, tangent = ppto.jvp(function, args, tangents)
    _check_value(out, function, args, reference_args, dtype)
    assert tangent.dtype == out.dtype
    expected = directional_differences(
        function, reference_args, dict(enumerate(as_float(tangents)))
    )
    rtol = 1e-6 if dtype == "float64" else FLOAT32_RTOL
    np.testing.assert_allclose(float(tangent), expected, rtol=rtol)


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_grad_of_grad(function):
    """Second order in s, through the generated cast: against central differences
    of the first derivative."""
    args, _ = arguments(function, "float64")
    position = len(args) - 1
    first = ppto.grad(function, wrt=position)
    second = ppto.grad(first, wrt=position)(*args)
    expected = central_differences(lambda *a: as_float(first(*a)), args, position)
    np.testing.assert_allclose(float(np.asarray(second)), expected, rtol=1e-6)


def test_hessian_vector_product():
    x = X.astype(np.float32)
    gradient = ppto.grad(strong_number_added, wrt=0)
    v = RNG.standard_normal(X.shape)
    value, product = ppto.jvp(gradient, (x, S), (v.astype(np.float32), 0.0))
    # (the gradient's value as grad gives it; jvp of a grad keeps the dtype its
    # code computes in, float64 past np.tanh(s), as before this change)
    np.testing.assert_allclose(
        as_float(value), as_float(gradient(x, S)), rtol=FLOAT32_RTOL
    )
    expected = directional_differences(
        lambda *a: as_float(ppto.grad(strong_number_added, wrt=0)(*a)), (X, S), {0: v}
    )
    np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_fused_code(function):
    """Fused regions for arrays of any size compute what the unfused code does."""
    args, reference_args = arguments(function, "float32")
    wrt = WRT.get(function, (0, 1))
    unfused = ppto.value_and_grad(function, wrt=wrt)(*args)
    with fused_for_any_size():
        fused = ppto.value_and_grad(function, wrt=wrt)(*args)
    assert fused[0].dtype == unfused[0].dtype == np.float32
    np.testing.assert_allclose(float(fused[0]), float(unfused[0]), rtol=1e-6)
    for a, b in zip(fused[1], unfused[1]):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_a_dict_argument():
    params = {"w": W.astype(np.float32), "s": S}
    value, (dparams, dx) = ppto.value_and_grad(from_a_dict, wrt=(0, 1))(
        params, X.astype(np.float32)
    )
    direct = from_a_dict(params, X.astype(np.float32))
    assert value.dtype == np.float32 == np.asarray(direct).dtype
    assert dparams["w"].dtype == dx.dtype == np.float32
    reference = {"w": W, "s": S}
    expected_dx = central_differences(lambda x: from_a_dict(reference, x), (X,), 0)
    expected_dw = central_differences(
        lambda w: from_a_dict({"w": w, "s": S}, X), (W,), 0
    )
    expected_ds = central_differences(
        lambda s: from_a_dict({"w": W, "s": s}, X), (S,), 0
    )
    for actual, expected in (
        (dx, expected_dx),
        (dparams["w"], expected_dw),
        (dparams["s"], expected_ds),
    ):
        scale = max(float(np.max(np.abs(expected))), 1e-2)
        error = float(np.max(np.abs(as_float(actual) - expected)))
        assert error <= FLOAT32_RTOL * scale


def test_a_list_is_extended_not_cast():
    x = X.astype(np.float32)
    value, (dx, ds) = ppto.value_and_grad(list_extended, wrt=(0, 1))(x, S)
    assert value.dtype == np.asarray(list_extended(x, S)).dtype == np.float32
    np.testing.assert_allclose(float(value), list_extended(X, S), rtol=FLOAT32_RTOL)
    expected = central_differences(list_extended, (X, S), 0)
    np.testing.assert_allclose(as_float(dx), expected, rtol=1e-3, atol=1e-4)
    expected = central_differences(list_extended, (X, S), 1)
    np.testing.assert_allclose(float(ds), expected, rtol=FLOAT32_RTOL)


def same_dtype_accumulation(x, w):
    t = x * 2.0
    t += x * w
    total = 0.0
    for _ in range(2):
        total += np.sum(t * w)
    return total


def test_the_cast_shows_only_where_the_dtypes_may_differ():
    """Dtypes known to agree (or a Python number target): no cast in the code;
    a strong float64 added to a float32 array: one."""
    x = X.astype(np.float32)
    agreeing = ppto.show_grad(same_dtype_accumulation, x, x, file=None)
    assert "cast_in_place" not in agreeing
    assert "t_1 = t + t1" in agreeing  # (the sum written into t's version itself)
    differing = ppto.show_grad(strong_number_added, x, S, file=None)
    assert differing.count("cast_in_place") == 1
    # in float64 too (np.tanh(s)'s dtype is known only when it runs): the code
    # test_grad_of_grad differentiates again
    assert "cast_in_place" in ppto.show_grad(strong_number_added, X, S, file=None)


def into_integers(x, n):
    c = (x * 3.0).astype(int)
    c += x * 0.5
    return np.sum(x * c)


def into_an_integer_slice(x, n):
    c = (x * 3.0).astype(int)
    c[1:] += x[1:] * 0.5
    return np.sum(x * c)


def into_given_integers(x, n):
    c = n * 2
    c += x * 0.5
    return np.sum(x * c)


def into_an_integer_element(x, n):
    c = n * 2
    c[0] += x[0] * 0.5  # (an element is a number: the write converts it)
    return np.sum(x * c)


@pytest.mark.parametrize(
    "function",
    [
        into_integers,
        into_an_integer_slice,
        into_given_integers,
    ],
    ids=lambda f: f.__name__,
)
def test_floats_into_an_integer_array_are_refused_at_the_line(function):
    """Refused where the transformation knows c's dtype, else when the code runs
    (c computed from an argument it does not differentiate): either way naming
    the line, as NumPy refuses it."""
    n = np.arange(5)
    with pytest.raises(TypeError):  # (NumPy's own refusal)
        function(X, np.copy(n))
    with pytest.raises(ppto.DTypeError, match="same_kind") as raised:
        ppto.grad(function)(X, n)
    line = function.__code__.co_firstlineno + 2
    assert re.search(rf'test_augassign_dtype\.py"?, line {line}\b', str(raised.value))


def test_an_integer_element_takes_the_float_converted():
    n = np.arange(5)
    value = ppto.value_and_grad(into_an_integer_element)(X, n)[0]
    assert float(value) == float(into_an_integer_element(X, np.copy(n)))


def test_cast_in_place_operator():
    x = np.array([0.25, 0.5]) * np.float64(3.0)
    narrow = ppto.cast_in_place(x, np.zeros(2, np.float32))
    assert narrow.dtype == np.float32
    np.testing.assert_allclose(np.asarray(narrow), x.astype(np.float32))
    assert ppto.cast_in_place(x, 1.0).dtype == np.float64  # (a number is rebound)
    assert ppto.cast_in_place(x, np.float32(1.0)).dtype == np.float64
    # a 0-d NumPy array is written into as NumPy does, and stays an array (a
    # later += writes into it again); a NumPy number is rebound
    number = np.float64(0.5) + 1.0
    kept = ppto.cast_in_place(number, np.array(1.0, np.float32))
    assert kept.dtype == np.float32 and kept.numpy().shape == ()
    assert type(kept.numpy()) is np.ndarray
    assert ppto.cast_in_place(number, np.float32(1.0)).dtype == np.float64
    with pytest.raises(ppto.DTypeError, match=r"float64 values into an array of int"):
        ppto.cast_in_place(x, np.zeros(2, np.int64))


def test_on_emulated_cupy(emulated_cupy):
    x = X.astype(np.float32)
    value, (dx, ds) = ppto.value_and_grad(strong_number_added, wrt=(0, 1))(
        ppto.tensor(x, device="cuda"), S
    )
    assert value.device == dx.device == "cuda:0"
    assert value.dtype == dx.dtype == np.float32
    expected = central_differences(strong_number_added, (X, S), 0)
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-3, atol=1e-4)
    expected = central_differences(strong_number_added, (X, S), 1)
    np.testing.assert_allclose(float(ds.numpy()), expected, rtol=FLOAT32_RTOL)


def broadened(x, s):
    t = x * s  # (of a dtype known only when it runs: s is a Python float)
    t += np.outer(x, x)  # (NumPy: "non-broadcastable output operand")
    return np.sum(t)


def broadened_known(x, w):
    t = x * w
    t += np.outer(x, w)
    return np.sum(t)


@pytest.mark.parametrize("function", [broadened, broadened_known])
def test_an_array_broadcast_to_another_shape_in_place_is_refused_at_the_line(
    function,
):
    with pytest.raises(ValueError):
        function(X, S if function is broadened else W)
    with pytest.raises(ppto.ShapeError, match="cannot broadcast") as raised:
        ppto.grad(function)(X, S if function is broadened else W)
    line = function.__code__.co_firstlineno + 2
    assert re.search(rf'test_augassign_dtype\.py"?, line {line}\b', str(raised.value))


def test_cast_in_place_refuses_to_broadcast_its_target():
    with pytest.raises(ppto.ShapeError, match=r"shape \(2,\) to \(3, 2\)"):
        ppto.cast_in_place(np.ones((3, 2)), np.zeros(2, np.float32))


def dict_item_added(x, s):
    d = {"a": x * 1.0, "b": x * 2.0}
    d["a"] += np.tanh(s) * x
    return np.sum(d["a"] * d["b"])


def list_item_added(x, s):
    xs = [x * 1.0, x * 2.0]
    xs[0] += np.tanh(s) * x
    return np.sum(xs[0] * xs[1])


@pytest.mark.parametrize(
    "function", [dict_item_added, list_item_added], ids=lambda f: f.__name__
)
def test_an_item_of_a_dict_or_list(function):
    """``d[k] += v`` adds into the array the dict (or list) holds: its dtype."""
    x = X.astype(np.float32)
    value, (dx, ds) = ppto.value_and_grad(function, wrt=(0, 1))(x, S)
    assert value.dtype == np.asarray(function(x, S)).dtype == np.float32
    np.testing.assert_allclose(float(value), function(X, S), rtol=FLOAT32_RTOL)
    exact = ppto.grad(function, wrt=(0, 1))(X, S)
    for position, (low, high) in enumerate(zip((dx, ds), exact)):
        expected = central_differences(function, (X, S), position)
        assert_gradient(np.asarray(high), expected, f"d/d arg {position}")
        np.testing.assert_allclose(as_float(low), expected, rtol=1e-3, atol=1e-4)


def test_hessian_vector_product_through_a_kept_cast():
    """Random program seed 4330: the gradient's code keeps the cast of ``t12 +=
    np.tanh(t12) ** 3`` and its backward reads the cast's value (for its dtype);
    differentiated again, where the dtypes are known, that cast was removed with
    its value (a NameError). Every check of the program: values, gradients and
    Hessian-vector products against central differences."""
    outcome = fuzz_checks.check(4330)
    assert outcome.kind == "checked", outcome.detail


# A 0-d array, which += writes into, and a number, which it rebinds, told apart by
# the transformer (a cast removed for a 0-d array made a number of it: after two
# += in a row the float64 mean took over, float64 where NumPy keeps float32)


def into_a_zero_d_array(x, y):
    s = np.zeros((), np.float32)
    s += x.sum()
    s += y.mean()  # (y is float64: s stays a float32 array)
    return s * 2.0


def into_a_numpy_number(x, y):
    s = np.float32(0)
    s += x.sum()
    s += x.mean()  # (float32: a NumPy number rebound stays float32)
    s += y.max()  # (float64: rebound, float64 as NumPy's)
    return s * 2.0


def into_a_zero_d_argument(x, y, s):
    s += x.sum()
    s += y.mean()
    return s * 2.0


def into_a_sum(x, y):
    s = x.sum()  # (a NumPy number: += rebinds it, on CuPy too, where it is 0-d)
    s += x.mean()
    s += y.mean()
    return s * 2.0


ZERO_D = [into_a_zero_d_array, into_a_numpy_number, into_a_zero_d_argument, into_a_sum]


def zero_d_arguments(function, s):
    """(float32 x, float64 y[, s]), and a float64 reference: a function of the
    float64 arguments (one of the same values computed in float64 throughout)."""
    x, y = X.astype(np.float32), W.astype(np.float64)
    if function is into_a_zero_d_argument:
        reference = np.zeros((), np.float64) if type(s) is np.ndarray else 0.0
        return (x, y, s), lambda x, y: function(x, y, np.copy(reference))
    if function is into_a_zero_d_array:  # (its float32 array, float64)
        return (x, y), lambda x, y: into_a_zero_d_argument(x, y, np.zeros(()))
    return (x, y), function


def copied(value):
    """An array copied (the function writes into a 0-d one), a number as it is
    (``np.copy`` would make it an array)."""
    return np.copy(value) if type(value) is np.ndarray else value


def differences(reference, position, direction=None):
    """Central differences of ``reference`` at (X, W): d/d arg ``position``, or
    along ``direction`` there."""
    if direction is None:
        return central_differences(reference, (X, W), position)
    return directional_differences(reference, (X, W), {position: direction})


@pytest.mark.parametrize(
    "s", [np.zeros((), np.float32), np.float32(0)], ids=["0-d array", "number"]
)
@pytest.mark.parametrize("function", ZERO_D, ids=lambda f: f.__name__)
def test_two_adds_into_a_zero_d_value_keep_numpys_dtype(function, s):
    args, reference = zero_d_arguments(function, s)
    expected_dtype = np.asarray(function(*map(copied, args))).dtype
    if function is into_a_zero_d_argument:
        assert expected_dtype == (np.float32 if type(s) is np.ndarray else np.float64)
    wrt = (0, 1)
    for _ in range(2):  # (the second call: the cached code)
        value, gradients = ppto.value_and_grad(function, wrt=wrt)(*args)
        assert value.dtype == expected_dtype
        np.testing.assert_allclose(float(value), reference(X, W), rtol=1e-6)
        for position, gradient in zip(wrt, gradients):
            assert gradient.dtype == args[position].dtype
            expected = differences(reference, position)
            np.testing.assert_allclose(as_float(gradient), expected, rtol=1e-5)
    for position in wrt:  # (each alone: a cast differentiated or not)
        value = ppto.value_and_grad(function, wrt=position)(*args)[0]
        assert value.dtype == expected_dtype
        tangents = tuple(
            np.ones_like(a) if p == position else None for p, a in enumerate(args)
        )
        out, tangent = ppto.jvp(function, args, tangents)
        assert out.dtype == expected_dtype and tangent.dtype == expected_dtype
        expected = differences(reference, position, np.ones(5))
        np.testing.assert_allclose(float(tangent), expected, rtol=1e-5)


@pytest.mark.parametrize("function", ZERO_D, ids=lambda f: f.__name__)
def test_zero_d_values_on_emulated_cupy(emulated_cupy, function):
    """CuPy's operators make 0-d arrays where NumPy's make numbers: the transformer
    tells them apart as NumPy does, so that a cuda 0-d argument is written into
    (float32 kept) and a sum is rebound (float64), as on the CPU."""
    args, reference = zero_d_arguments(function, np.zeros((), np.float32))
    expected_dtype = np.asarray(function(*map(copied, args))).dtype
    on_gpu = [ppto.tensor(a, device="cuda") for a in args]
    value, (dx, dy) = ppto.value_and_grad(function, wrt=(0, 1))(*on_gpu)
    assert value.device == dx.device == "cuda:0"
    assert value.dtype == expected_dtype
    assert (dx.dtype, dy.dtype) == (np.float32, np.float64)
    np.testing.assert_allclose(float(value.numpy()), reference(X, W), rtol=1e-6)
    for position, gradient in ((0, dx), (1, dy)):
        expected = differences(reference, position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-5)
