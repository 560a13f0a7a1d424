"""Properties of the generated code that are not about its numbers: a traceback inside
it shows the generated line, and a value under ``ppto.stop_gradient`` gets no adjoint
at all (not a zero one)."""

import collections
import functools
import importlib
import io
import os
import traceback
import types
import warnings

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences as _central_differences


def assert_derivatives_match(function, x, jvp=True):
    """The gradient of ``function`` at vector ``x`` against central differences,
    its forward-mode derivative along one direction, and its Hessian against
    central differences of the gradient."""
    from tests.corpus.checks import central_differences

    gradient, step = ppto.grad(function), 1e-5
    expected = central_differences(function, [x], 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-6)
    if jvp:
        tangent = np.linspace(1.0, -2.0, x.size)
        _, derivative = ppto.jvp(function, (x,), (tangent,))
        assert float(derivative) == pytest.approx(expected @ tangent, rel=1e-6)
    columns = [
        (gradient(x + step * e).numpy() - gradient(x - step * e).numpy()) / (2 * step)
        for e in np.eye(x.size)
    ]
    hessian = ppto.hessian(function)(x).numpy()
    np.testing.assert_allclose(hessian, np.stack(columns, 1), rtol=1e-5, atol=1e-7)


def sqrt_sum(x):
    return np.sum(np.sqrt(x))


def test_traceback_inside_generated_code_shows_the_generated_line():
    gradient = ppto.grad(sqrt_sum)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError) as raised:
        gradient(np.array([0.0, 1.0]))  # the backward pass divides by sqrt(0)
    # (raised again saying the user's line: NumPy's own error, its cause, ran there)
    innermost = traceback.extract_tb(raised.value.__cause__.__traceback__)[-1]
    assert innermost.filename.startswith("<ppto generated: sqrt_sum_grad")
    assert innermost.line == "dx = dsqrt_sum / (2 * t1)"


def logsumexp_stopped(x):
    peak = ppto.stop_gradient(np.max(x, axis=1, keepdims=True))
    return np.sum(np.log(np.sum(np.exp(x - peak), axis=1)) + peak[:, 0])


def test_stopped_value_gets_no_adjoint():
    x = np.random.default_rng(0).standard_normal((4, 5))
    source = ppto.show_grad(logsumexp_stopped, x, file=io.StringIO())
    assert "dpeak" not in source
    assert "# grad of: peak =" not in source
    # the peak cancels in logsumexp, so holding it constant leaves softmax(x)
    expected = np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True)
    np.testing.assert_allclose(ppto.grad(logsumexp_stopped)(x), expected, rtol=1e-12)


def cubic_sum(x, y):
    return np.sum(x * x * x * y)


def test_repeated_calls_check_what_changed():
    """A call like an earlier one skips argument checks; one that differs in dtype,
    shape, kind or precision is checked and specialised again."""
    gradient = ppto.grad(cubic_sum)
    rng = np.random.default_rng(1)
    for size in (3, 3, 5, 5):  # the second call of each shape takes the fast path
        x, y = rng.standard_normal(size), rng.standard_normal(size)
        np.testing.assert_allclose(gradient(x, y).numpy(), 3 * x * x * y, rtol=1e-12)
    with pytest.raises(ppto.GradError, match="integer"):
        gradient(np.arange(5), rng.standard_normal(5))
    with pytest.raises(ppto.GradError, match="integer"):
        gradient(2, 3.0)
    x32 = rng.standard_normal(5).astype(np.float32)
    assert gradient(x32, x32).dtype == np.float32
    tensor_x = ppto.tensor(x)
    np.testing.assert_allclose(gradient(tensor_x, y).numpy(), 3 * x * x * y)
    previous = ppto.set_precision("strict")
    try:
        np.testing.assert_allclose(gradient(x, y).numpy(), 3 * x * x * y)
    finally:
        ppto.set_precision(previous)


def logsumexp_rows(x):
    peak = np.max(x, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - peak), axis=1, keepdims=True)) + peak)


def log_softmax_loss(x, w):
    shifted = x - np.max(x, axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return np.sum(log_probs * w)


def softmax_loss(x, w):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return np.sum(e / np.sum(e, axis=0, keepdims=True) * w)


def shift_used_elsewhere(x, w):
    shifted = x - np.max(x, axis=1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return np.sum(log_probs * w) + np.sum(shifted * shifted)


@pytest.mark.parametrize("function", [logsumexp_rows, log_softmax_loss, softmax_loss])
def test_max_shift_of_softmax_idioms_gets_no_gradient(function):
    """The maximum subtracted before exp cancels out of these idioms: it is held
    constant (no pass over x for its mask) and the gradient is still exact."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    args = (x,) if function is logsumexp_rows else (x, w)
    source = ppto.show_grad(function, *args, file=io.StringIO())
    assert "stop_gradient(" in source and "hit" not in source
    assert ppto.check_grad(function, *args).ok


def test_max_shift_used_outside_an_idiom_keeps_its_gradient():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    source = ppto.show_grad(shift_used_elsewhere, x, w, file=io.StringIO())
    assert "stop_gradient(" not in source
    assert ppto.check_grad(shift_used_elsewhere, x, w).ok


def product_sum(x, w):
    return np.sum(x * w)


def maybe_scaled(x, w, flag):
    if flag:
        y = x
    else:
        y = x * 2.0
    return np.sum(y * w)


def test_gradients_never_alias_the_callers_arrays():
    """Generated code drops products with the gradient seed (dw = x, not 1 * x) only
    where the result is a new array or is read only by arithmetic: a gradient handed
    back never shares memory with an argument."""
    rng = np.random.default_rng(4)
    for size in (5, 1 << 16):  # the second large enough for fused regions
        x, w = rng.standard_normal(size), rng.standard_normal(size)
        dx, dw = ppto.grad(product_sum, wrt=(0, 1))(x, w)
        np.testing.assert_array_equal(dw.numpy(), x)
        assert not np.shares_memory(dw.data, x) and not np.shares_memory(dx.data, w)
    for flag in (True, False):
        (dw,) = ppto.grad(maybe_scaled, wrt=(1,))(x, w, flag)
        np.testing.assert_array_equal(dw.numpy(), x if flag else 2.0 * x)
        assert not np.shares_memory(dw.data, x)


def embedding_loss(table, rows, scale):
    picked = table[rows] * scale  # repeated rows accumulate in the gradient
    return np.sum(picked**2) + np.sum(table[1:3] * scale)


def norms_and_outer_products(x):
    m = np.outer(x, x * 2.0)
    rows = np.linalg.norm(m, axis=1, keepdims=True)
    total = np.sum(rows**2) + np.linalg.norm(m, "fro") + np.linalg.norm(x, 2)
    return total + np.linalg.norm(x * 0.0)  # a zero norm: a zero (sub)gradient


def test_norms_and_outer_products_in_generated_code():
    # np.outer and np.linalg.norm had no ppto operator (refused)
    x = np.array([0.3, -0.7, 1.3])
    value, _ = ppto.value_and_grad(norms_and_outer_products)(x)
    assert float(value) == pytest.approx(norms_and_outer_products(x), rel=1e-12)
    assert_derivatives_match(norms_and_outer_products, x)
    with pytest.raises(ppto.ShapeError, match="ord=3 over 2 axes is not a norm"):
        ppto.norm(ppto.tensor(np.ones((2, 2))), 3)
    with pytest.raises(ppto.ShapeError, match="ord='fro' over 1 axis is not"):
        ppto.grad(frobenius_of_a_vector)(x)  # (from the generated code)
    rows = ppto.norm(ppto.tensor(np.ones((2, 3))), 2, np.int64(1))  # refused for a
    np.testing.assert_allclose(rows.numpy(), np.sqrt([3.0, 3.0]))  # NumPy integer


def frobenius_of_a_vector(x):
    return np.linalg.norm(x, "fro")


def test_gathers_scatter_their_gradient_into_new_zeros_only():
    """A gather's gradient adds into the zeros made for it (no copy of them); the
    caller's arrays are never written."""
    from tests.corpus.checks import central_differences

    rng = np.random.default_rng(6)
    table, rows = rng.standard_normal((6, 3)), np.array([4, 1, 4, 0])
    kept = table.copy()
    text = ppto.show_grad(
        embedding_loss, table, rows, 0.5, wrt=(0, 2), lowered=True, file=None
    )
    assert "index_add_into(xp, xp.zeros_like(table" in text
    dtable, dscale = ppto.grad(embedding_loss, wrt=(0, 2))(table, rows, 0.5)
    np.testing.assert_array_equal(table, kept)
    arguments = [table, rows, 0.5]
    expected = central_differences(embedding_loss, arguments, 0)
    np.testing.assert_allclose(dtable.numpy(), expected, rtol=1e-6, atol=1e-8)
    expected = central_differences(embedding_loss, arguments, 2)
    np.testing.assert_allclose(float(dscale), float(expected), rtol=1e-6)


def widened(x):
    total = np.zeros(3)  # float64: the computation widens a float32 x
    for i in range(2):
        total = total + x * (i + 1.0)
    return np.sum(total * total)


def test_gradients_come_back_in_their_arguments_dtype():
    """As in JAX and PyTorch: a float32 argument's gradient is float32, also where
    the function computes in float64 (values agree with the float64 gradient)."""
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    expected = 2 * 3.0 * (3.0 * x.astype(np.float64))
    for _ in range(2):  # the second call takes the fast path
        gradient = ppto.grad(widened)(x)
        assert gradient.dtype == np.float32
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6)
    _, pullback = ppto.vjp(widened, x)
    (dx,) = pullback(np.float64(1.0))
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-6)


def plain_sum(x):
    return np.sum(x)


def test_gradients_are_writable_arrays():
    """The gradient of sum(x) is a broadcast of one in the generated code; the caller
    gets an array of its own that in-place updates can change."""
    for _ in range(2):  # the first call and the fast path
        gradient = ppto.grad(plain_sum)(np.zeros(3))
        gradient.data *= 2.0
        np.testing.assert_array_equal(gradient.numpy(), [2.0, 2.0, 2.0])


SCALE = 2.0


def scaled_helper(x):
    return x * SCALE


def uses_scale(x):
    return np.sum(np.sin(x) * SCALE)


def calls_helper(x):
    return np.sum(scaled_helper(x) * x)


WEIGHTS = ppto.tensor(np.linspace(-1.5, 2.0, 5))


def weighted_by_a_module_tensor(x):
    return np.sum(np.tanh(x * WEIGHTS)) + np.sum(np.clip(x, -0.5, WEIGHTS))


def test_a_module_level_tensor_is_read_as_its_array():
    """Weights made with ppto.tensor at module level: generated code reads their
    array (it read the tensor, and the first reduction failed with a misleading
    'np.add.reduce ... has no ppto operator')."""
    from tests.test_checkpoint import central_differences

    x = np.linspace(-1.0, 1.2, 5)
    gradient = ppto.grad(weighted_by_a_module_tensor)(x).numpy()
    expected = central_differences(weighted_by_a_module_tensor, (x,), 0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-7, atol=1e-9)


class _Layer:
    def __init__(self, weights):
        self.weights = weights


LAYER = _Layer(ppto.tensor(np.linspace(0.5, 1.5, 5)))
WEIGHT_LIST = [ppto.tensor(np.linspace(-1.0, 1.0, 5)), {"b": ppto.tensor(0.3)}]


def weighted_through_objects(x):
    hidden = np.tanh(x * LAYER.weights + WEIGHT_LIST[1]["b"])
    return np.sum(hidden * WEIGHT_LIST[0])


def test_a_tensor_reached_through_a_module_level_object_is_read_as_its_array():
    """A tensor read as an attribute or item of a module-level object (a layer's
    weights, a list of them) failed as a bare module-level tensor did: 'np.add.reduce
    ... has no ppto operator'. Read when the code runs: a rebound attribute counts."""
    from tests.test_checkpoint import central_differences

    x = np.linspace(-1.0, 1.2, 5)
    gradient = ppto.grad(weighted_through_objects)
    for weights in (LAYER.weights, ppto.tensor(np.linspace(2.0, -1.0, 5))):
        LAYER.weights = weights
        expected = central_differences(weighted_through_objects, (x,), 0)
        np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7, atol=1e-9)


def _scaled_exp(v, scale=2.0):
    return ppto.exp(v) * scale


class _Scaler:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, v):
        return ppto.exp(v) * self.scale


HELPER_LIST = [_scaled_exp]
HELPER_HOLDER = types.SimpleNamespace(helper=_scaled_exp)
SCALER = _Scaler(2.0)
SCALED_BY_TWO = functools.partial(_scaled_exp, scale=2.0)


def weighted_by_a_listed_helper(x, y):
    return np.sum(np.sin(x) * HELPER_LIST[0](y))


def weighted_by_a_held_helper(x, y):
    return np.sum(np.sin(x) * HELPER_HOLDER.helper(y))


def weighted_by_a_callable_object(x, y):
    return np.sum(np.sin(x) * SCALER(y))


def weighted_by_a_partial(x, y):
    return np.sum(np.sin(x) * SCALED_BY_TWO(y))


def _rebind_the_helper(function) -> None:
    """Give the object ``function`` reaches its helper through another helper (or
    scale)."""
    tripled = functools.partial(_scaled_exp, scale=3.0)
    if function is weighted_by_a_listed_helper:
        HELPER_LIST[0] = tripled
    elif function is weighted_by_a_held_helper:
        HELPER_HOLDER.helper = tripled
    elif function is weighted_by_a_callable_object:
        SCALER.scale = 3.0


@pytest.mark.parametrize(
    "function",
    [
        weighted_by_a_listed_helper,
        weighted_by_a_held_helper,
        weighted_by_a_callable_object,
        weighted_by_a_partial,
    ],
)
def test_a_helper_called_on_a_constant_through_an_object_gives_arrays(function):
    """A user's callable on a value not differentiated, reached through a module-level
    object (``HELPERS[0](y)``, ``NS.helper(y)``) or not a plain function (a callable
    object, a partial): lowered code called it and computed on the tensor it
    returned ('np.add.reduce ... has no ppto operator'), or, through an attribute,
    called the function the attribute held when the code was lowered (a stale value
    once it held another). It is read when the code runs, its result as arrays."""
    from tests.test_checkpoint import central_differences

    rng = np.random.default_rng(11)
    args = (rng.standard_normal(5), rng.standard_normal(5))
    saved = (HELPER_LIST[0], HELPER_HOLDER.helper, SCALER.scale)
    gradient = ppto.value_and_grad(function)
    try:
        for _ in range(2):
            for _ in range(2):  # (the second call runs the lowered code)
                value, dx = gradient(*args)
                assert float(value) == pytest.approx(float(function(*args)), rel=1e-12)
                expected = central_differences(function, args, 0)
                np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-7, atol=1e-9)
            _rebind_the_helper(function)
    finally:
        HELPER_LIST[0], HELPER_HOLDER.helper, SCALER.scale = saved


def test_grad_objects_of_one_function_share_its_transform():
    x = np.linspace(0.1, 1.0, 4)
    first = ppto.grad(uses_scale)
    first(x)
    second = ppto.grad(uses_scale)
    assert second._programs is first._programs  # no second transform
    np.testing.assert_allclose(second(x).numpy(), 2.0 * np.cos(x), rtol=1e-12)
    assert ppto.grad(uses_scale, wrt="x")._programs is first._programs


def test_a_shared_transform_does_not_keep_its_function_alive():
    """The transform shared by a function's grad objects is kept with the function,
    weakly: it held the function (and a cache of signatures did), so a closure made
    on each step, with the arrays it closes over, was never freed."""
    import gc
    import weakref

    def make(scale):
        def loss(x):
            return np.sum(np.sin(x) * scale)

        return loss

    loss = make(np.full(3, 2.0))
    gradient = ppto.grad(loss)
    np.testing.assert_allclose(gradient(np.ones(3)).numpy(), 2.0 * np.cos(np.ones(3)))
    _, pullback = ppto.vjp(loss, np.ones(3))
    pullback(1.0)
    alive = weakref.ref(loss)
    del loss, gradient, pullback
    gc.collect()
    assert alive() is None


def test_a_shared_transform_is_not_reused_after_what_it_read_changed(monkeypatch):
    """Rebinding a global the function or a helper it calls reads, or registering a
    rule, makes the next grad object transform again (never a stale gradient)."""
    x = np.linspace(0.1, 1.0, 4)
    np.testing.assert_allclose(ppto.grad(uses_scale)(x).numpy(), 2.0 * np.cos(x))
    np.testing.assert_allclose(ppto.grad(calls_helper)(x).numpy(), 4.0 * x)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    np.testing.assert_allclose(ppto.grad(uses_scale)(x).numpy(), 3.0 * np.cos(x))
    np.testing.assert_allclose(ppto.grad(calls_helper)(x).numpy(), 6.0 * x)
    before = ppto.grad(uses_scale)
    before(x)

    @ppto.operator
    def doubled(v):
        return v * 2.0

    @ppto.grad_rule(doubled)
    def _(v):
        def backward(dY):
            return dY * 2.0

        return backward

    assert ppto.grad(uses_scale)._programs is not before._programs


def tempered():
    temperature = 2.0

    def loss(x):
        return np.sum(np.exp(x / temperature))

    def set_temperature(value):
        nonlocal temperature
        temperature = value

    return loss, set_temperature


_Pair = collections.namedtuple("_Pair", "scaled shifted")


def _pair_of(v):
    return _Pair(v * 2.0, v + 1.0)


def weighted_by_a_helpers_named_tuple(x, y):
    pair = _pair_of(y)
    return np.sum(np.sin(x) * pair.scaled + pair.shifted)


def weighted_by_a_named_tuple_made_here(x, y):
    pair = _Pair(y, y * 2.0)
    return np.sum(np.sin(x) * pair.scaled + pair.shifted)


@pytest.mark.parametrize(
    "function", [weighted_by_a_helpers_named_tuple, weighted_by_a_named_tuple_made_here]
)
def test_a_named_tuple_on_values_not_differentiated_keeps_its_fields(function):
    """A helper's result is read as arrays in lowered code: a named tuple it returned
    became a plain tuple ('tuple' object has no attribute 'scaled'); so did one
    made by calling its class once callables other than functions were read so."""
    from tests.test_checkpoint import central_differences

    args = (np.linspace(-0.5, 1.0, 4), np.linspace(0.3, 0.9, 4))
    gradient = ppto.value_and_grad(function)
    for _ in range(2):  # (the second call runs the lowered code)
        value, dx = gradient(*args)
        assert float(value) == pytest.approx(float(function(*args)), rel=1e-12)
        expected = central_differences(function, args, 0)
        np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-7, atol=1e-9)


def _doubled(v):
    return v * 2.0


def _tripled(v):
    return v * 3.0


ACTIVATIONS = types.SimpleNamespace(act=ppto.tanh, scale=_doubled)
CONFIG = types.SimpleNamespace(layers=ACTIVATIONS)


def activated_through_objects(x):
    return np.sum(ACTIVATIONS.act(x) * CONFIG.layers.scale(x))


@pytest.mark.parametrize(
    "rebind",
    [
        lambda: setattr(ACTIVATIONS, "act", ppto.sin),  # an operator
        lambda: setattr(ACTIVATIONS, "scale", _tripled),  # a function
        lambda: setattr(  # the object holding them
            CONFIG, "layers", types.SimpleNamespace(act=ppto.tanh, scale=_tripled)
        ),
    ],
    ids=["operator", "function", "holder"],
)
def test_a_callee_held_by_an_object_and_rebound_is_differentiated_again(
    rebind, monkeypatch
):
    """``ACTIVATIONS.act(x)``: the transform differentiates the function the
    attribute holds; given another (``ACTIVATIONS.act = ppto.sin``), the gradient
    was the first one's, stale, the attribute being watched by nothing (a global is
    watched, and a method called on an object)."""
    from tests.test_checkpoint import central_differences

    monkeypatch.setattr(ACTIVATIONS, "act", ppto.tanh)
    monkeypatch.setattr(ACTIVATIONS, "scale", _doubled)
    monkeypatch.setattr(CONFIG, "layers", ACTIVATIONS)
    x = np.linspace(-0.8, 1.1, 5)
    gradient = ppto.grad(activated_through_objects)
    for _ in range(2):
        for _ in range(2):  # (the second call takes the fast path)
            expected = central_differences(activated_through_objects, (x,), 0)
            np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)
        rebind()


def test_a_grad_object_made_before_a_change_does_not_keep_the_old_gradient(
    monkeypatch,
):
    """A grad object checks, before each call, that what its code read is current:
    it kept handing out the gradient of the old function (its fast path for calls
    like earlier ones checked nothing)."""
    x = np.linspace(0.1, 1.0, 4)
    scaled, helper = ppto.grad(uses_scale), ppto.grad(calls_helper)
    for _ in range(2):  # the second call takes the fast path
        np.testing.assert_allclose(scaled(x).numpy(), 2.0 * np.cos(x))
        np.testing.assert_allclose(helper(x).numpy(), 4.0 * x)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    np.testing.assert_allclose(scaled(x).numpy(), 3.0 * np.cos(x))
    np.testing.assert_allclose(helper(x).numpy(), 6.0 * x)  # a helper's global

    loss, set_temperature = tempered()  # a closure variable, and jvp of a grad
    gradient = ppto.grad(loss)
    gradient(x), gradient(x)
    set_temperature(4.0)
    np.testing.assert_allclose(gradient(x).numpy(), np.exp(x / 4) / 4)
    _, curvature = ppto.jvp(gradient, (x,), (np.ones(4),))
    np.testing.assert_allclose(np.asarray(curvature), np.exp(x / 4) / 16)

    @ppto.operator
    def cube(v):
        return v * v * v

    @ppto.grad_rule(cube)
    def _(v):
        def backward(dY):
            return dY * 2.0 * v * v  # wrong on purpose, corrected below

        return backward

    cubed = ppto.grad(cubes)
    monkeypatch.setitem(globals(), "cube", cube)
    np.testing.assert_allclose(cubed(x).numpy(), 2.0 * x**2)
    np.testing.assert_allclose(cubed(x).numpy(), 2.0 * x**2)

    @ppto.grad_rule(cube)
    def _(v):
        def backward(dY):
            return dY * 3.0 * v * v

        return backward

    np.testing.assert_allclose(cubed(x).numpy(), 3.0 * x**2)


def cubes(x):
    return np.sum(cube(x))  # noqa: F821 (set by the test above)


def test_an_unknown_dtype_never_merges_into_a_known_one():
    """``np.dtype('float64') == None`` is true in NumPy (None reads as the default
    dtype): merging the dtypes a loop assigns must still make the value unknown, in
    either order (before, a loop's analysis flipped between them for ever)."""
    from ppto.transform.analyze import _merge

    for first, second in ((np.dtype("float64"), None), (None, np.dtype("float64"))):
        known: dict = {}
        _merge(known, "t", first)
        _merge(known, "t", second)
        assert known["t"] is None
        _merge(known, "t", np.dtype("float64"))
        assert known["t"] is None  # unknown stays unknown


def scaled_by_ten(function):
    @functools.wraps(function)
    def wrapper(x):
        return function(x) * 10.0

    return wrapper


def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        logged.calls += 1
        return function(*args, **kwargs)

    return wrapper


logged.calls = 0


@scaled_by_ten
def decorated_square(x):
    return np.sum(x**2)


@logged
def decorated_cube(x):
    return np.sum(x**3)


def test_decorated_functions_are_differentiated_as_they_run():
    """A ``functools.wraps`` decorator changing the result is part of the function
    (ppto differentiated the inner function alone: value 5, not 50); one passing
    the call through is read through."""
    x = np.array([1.0, 2.0])
    value, gradient = ppto.value_and_grad(decorated_square)(x)
    assert float(value) == 50.0
    np.testing.assert_allclose(gradient.numpy(), 20.0 * x)
    np.testing.assert_allclose(ppto.grad(decorated_cube)(x).numpy(), 3.0 * x**2)
    assert logged.calls == 0  # read through: the generated code calls no wrapper


SQUARE = lambda x: np.sum(x**2)  # noqa: E731 (a lambda is what this tests)


def test_a_lambda_is_differentiated_with_an_identifier_for_its_name():
    # its generated function was named "<lambda>_grad": a SyntaxError
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ppto.grad(SQUARE)(x).numpy(), 2.0 * x)
    assert "def lambda__grad(x):" in ppto.show_grad(SQUARE, x, file=io.StringIO())


def _named_ef(x):
    ef = np.sin(x) * x
    return np.sum(ef * ef)


def _named_el(el):
    return np.sum(np.exp(el) / (1.0 + el * el))


@pytest.mark.parametrize("function", [_named_ef, _named_el])
def test_a_name_whose_adjoint_would_be_a_keyword(function):
    # the adjoint (and tangent) of ef was named def, of el del: a SyntaxError in
    # the generated code of grad, jvp and hessian alike
    x = np.array([0.3, -1.2, 0.8])
    assert_derivatives_match(function, x)
    source = ppto.show_grad(function, x, file=io.StringIO())
    assert "def1" in source or "del1" in source


LOSSES = {
    "squares": lambda a, b: np.sum((a - b) ** 2),
    "products": lambda a, b: np.sum(a * b),
}
SCALED = dict(
    cubes=lambda a: np.sum(a**3),
)


def test_a_lambda_written_as_an_item_of_a_dict_is_differentiated():
    # a lambda on a line of its own inside a dict literal or a call: "cannot tell
    # which lambda on line N" (the line parsed neither as it is nor cut at its end)
    a, b = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    gradient = ppto.grad(LOSSES["squares"])(a, b).numpy()
    np.testing.assert_allclose(gradient, 2.0 * (a - b))
    np.testing.assert_allclose(ppto.grad(LOSSES["products"])(a, b).numpy(), b)
    np.testing.assert_allclose(ppto.grad(SCALED["cubes"])(a).numpy(), 3.0 * a**2)


def test_a_reloaded_module_is_read_afresh(tmp_path, monkeypatch):
    """After the file is edited and the module reloaded (Jupyter's autoreload), the
    new source is read: ppto read a cached copy of the old file."""
    module = tmp_path / "edited_loss.py"
    module.write_text("import numpy as np\ndef f(x):\n    return np.sum(x**2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import edited_loss

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ppto.grad(edited_loss.f)(x).numpy(), 2.0 * x)
    module.write_text("import numpy as np\ndef f(x):\n    return np.sum(x**3)\n")
    os.utime(module, (1, 1))  # a different modification time, as an edit gives
    importlib.reload(edited_loss)
    np.testing.assert_allclose(ppto.grad(edited_loss.f)(x).numpy(), 3.0 * x**2)


def rows_written_twice(x):
    y = np.zeros((5, 4))
    y[[0, 2, 2]] = x  # row 1 of x is overwritten by row 2, as NumPy does
    return np.sum(y * np.arange(5.0)[:, None])


def rows_added_twice(x):
    y = np.zeros((5, 4)) + 1.0
    y[[0, 2, 2]] += x * x  # NumPy buffers: the last of a repeated index counts
    return np.sum(y * np.arange(5.0)[:, None])


def rows_written_at(x, rows):
    y = np.zeros((5, 4))
    y[rows] = x  # the index known only when called
    return np.sum(y * np.arange(5.0)[:, None])


@pytest.mark.parametrize("function", [rows_written_twice, rows_added_twice,
                                      rows_written_at])  # fmt: skip
def test_a_write_with_a_repeated_index_gives_no_gradient_to_what_it_overwrote(
    function,
):
    # the gradient went to every value written, as if each survived
    from tests.test_golden import central_differences

    x = np.arange(12.0).reshape(3, 4) + 1.0
    args = [x, np.array([0, 2, 2])][: function.__code__.co_argcount]
    value, gradient = ppto.value_and_grad(function)(*args)
    assert float(value) == function(*args)
    expected = central_differences(function, args, 0)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6, atol=1e-6)
    assert not gradient.numpy()[1].any()


def zeroed_copy(x):
    y = x.copy()
    y[0] = 0.0
    return np.sum(y * x) + np.sum(np.copy(x) ** 2)


def test_copies_are_operators():
    # np.copy and .copy() were refused ("use a ppto operator"), and are what
    # a subscript write into a copy is written with
    x = np.array([1.0, 2.0, 3.0])
    expected = np.array([0.0, 4.0, 6.0]) + 2 * x
    np.testing.assert_allclose(ppto.grad(zeroed_copy)(x).numpy(), expected)


def keyword_scaled(x, *, c=2.0):
    return np.sum(np.sin(x) * c)


def test_keyword_only_parameters():
    # the generated code keeps them keyword-only: every call was a TypeError
    x = np.array([0.3, 0.7])
    np.testing.assert_allclose(ppto.grad(keyword_scaled)(x).numpy(), 2 * np.cos(x))
    np.testing.assert_allclose(
        ppto.grad(keyword_scaled)(x, c=3.0).numpy(), 3 * np.cos(x)
    )
    dc = ppto.grad(keyword_scaled, wrt="c")(x, c=3.0)
    np.testing.assert_allclose(dc.numpy(), np.sum(np.sin(x)))
    _, tangent = ppto.jvp(keyword_scaled, (x,), (np.ones(2),))
    np.testing.assert_allclose(np.asarray(tangent), np.sum(2 * np.cos(x)))


class Model:
    def __init__(self, W):
        self.W = W

    def loss(self, x):
        return np.sum(np.tanh(x @ self.W))


def test_a_bound_method_and_its_function_are_differentiated():
    # (the bound method was refused, saying to differentiate its function)
    model, x = Model(np.full((3, 2), 0.1)), np.ones((4, 3))
    expected = (1 - np.tanh(x @ model.W) ** 2) @ model.W.T
    np.testing.assert_allclose(ppto.grad(model.loss)(x).numpy(), expected)
    gradient = ppto.grad(Model.loss, wrt=1)(model, x)
    np.testing.assert_allclose(gradient.numpy(), expected)


def halved_repeatedly(x, n):
    if n == 0:
        return np.sum(x)
    return halved_repeatedly(x * 0.5, n - 1)


def sums_halved_repeatedly(x):
    return halved_repeatedly(x, 2) * 2.0


def test_recursion_is_a_transform_error_at_the_recursive_function():
    """It overflowed the stack inside ppto; then the error named the function
    differentiated (not the one calling itself) and had no file or line."""
    for function, args in [
        (halved_repeatedly, (np.ones(3), 3)),
        (sums_halved_repeatedly, (np.ones(3),)),
    ]:
        with pytest.raises(
            ppto.TransformError, match="halved_repeatedly: it calls"
        ) as caught:
            ppto.grad(function)(*args)
        assert caught.value.filename == __file__
        assert caught.value.lineno == halved_repeatedly.__code__.co_firstlineno
        assert "Instead: rewrite the recursion as a loop" in str(caught.value)


def returns_list(x):
    return [np.sum(x)]


def weighted(x, w=np.array([1.0, 1.0])):  # noqa: B008 (reassigned by the test)
    return np.sum(x * w)


def test_a_list_result_and_reassigned_defaults():
    # a list result failed inside the generated code (list.pop of an array)
    with pytest.raises(ppto.GradError, match="returns a tuple or list"):
        ppto.grad(returns_list)(np.ones(3))
    x, gradient = np.array([1.0, 2.0]), ppto.grad(weighted)
    np.testing.assert_allclose(gradient(x).numpy(), [1.0, 1.0])
    saved = weighted.__defaults__
    weighted.__defaults__ = (np.array([3.0, 3.0]),)
    try:  # the generated code's own default was used: the old one
        np.testing.assert_allclose(gradient(x).numpy(), [3.0, 3.0])
    finally:
        weighted.__defaults__ = saved


def bumped_first(x):
    a = x[0]  # a number for a vector: += rebinds it
    a += 1.0
    return a * np.sum(x)


def bumped_argument(x, c):
    d = c
    d += 1.0
    return np.sum(x) * d * c


def bumped_sum(x):
    s = np.sum(x)  # a number: += rebinds it
    t = s
    t += 1.0
    return s * t


def bumped_own_array(x):
    z = x
    z += 1.0  # changes the argument, but nothing reads it through x afterwards
    return np.sum(z * z)


def grown_tuple(x):
    s = x.shape
    t = s
    t += (1,)  # a tuple: += makes a new one
    return np.sum(np.reshape(x, t)) * s[0]


def fresh_in_each_turn(x):
    for _ in range(2):
        z = x
        z = z * 2.0  # a new array: the += below does not reach x
        z += 1.0
    return np.sum(z * x)


def array_on_one_path_only(x, flag):
    if flag:
        z = x * 2.0
    else:
        z = x[0]  # a number for a vector: += rebinds it
    z += 1.0
    return np.sum(x * z)


def fresh_on_both_paths(x, flag):
    z = x
    if flag:
        z = z * 3.0
    else:
        z = z * 2.0
    z += 1.0
    return np.sum(z * x)


ANNOTATED = """\
from __future__ import annotations
import numpy as np
def annotated(x: Undeclared) -> Undeclared:
    return np.sum(x * x)
"""


def test_valid_code_the_new_checks_must_not_refuse(tmp_path, monkeypatch):
    # refused for a while: += on a number taken from an array or an argument, and
    # names in annotations, which are never evaluated
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ppto.grad(bumped_first)(x).numpy(), [8.0, 2.0, 2.0])
    np.testing.assert_allclose(ppto.grad(bumped_argument)(x, 2.0).numpy(), [6.0] * 3)
    np.testing.assert_allclose(ppto.grad(bumped_sum)(x).numpy(), [13.0] * 3)
    np.testing.assert_allclose(ppto.grad(bumped_own_array)(x.copy()).numpy(), 2 * x + 2)
    np.testing.assert_allclose(ppto.grad(grown_tuple)(x).numpy(), [3.0] * 3)
    np.testing.assert_allclose(ppto.grad(fresh_in_each_turn)(x).numpy(), 4 * x + 1)
    np.testing.assert_allclose(
        ppto.grad(fresh_on_both_paths)(x, True).numpy(), 6 * x + 1
    )
    np.testing.assert_allclose(  # refused for a while: z is an array on one path
        ppto.grad(array_on_one_path_only)(x, True).numpy(), 4 * x + 1
    )
    np.testing.assert_allclose(  # and the other path, where += rebinds a number
        ppto.grad(array_on_one_path_only)(x, False).numpy(), [8.0, 2.0, 2.0]
    )
    np.testing.assert_allclose(
        ppto.grad(fresh_on_both_paths)(x, False).numpy(), 4 * x + 1
    )
    (tmp_path / "annotated_loss.py").write_text(ANNOTATED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import annotated_loss

    np.testing.assert_allclose(ppto.grad(annotated_loss.annotated)(x).numpy(), 2 * x)


def filled_with_mean(x, w):
    level = np.full_like(x, np.mean(x))  # x's shape, the mean's value
    scale = np.full_like(x, w)
    return np.sum(np.tanh(level * x) * scale)


def test_full_like_is_differentiated_through_its_fill_value():
    # np.full_like was refused as depending on x's value; it reads only x's shape
    from tests.corpus.checks import central_differences

    x, w = np.array([0.3, -0.8, 1.1]), 1.7
    grads = ppto.grad(filled_with_mean, wrt=(0, 1))(x, w)
    for position, gradient in enumerate(grads):
        expected = central_differences(filled_with_mean, [x, w], position)
        np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)


def spread_and_flattened(x):
    v = np.var(x, axis=1)
    s = x.std(axis=0, ddof=1, keepdims=True)
    flat = x.ravel() * np.arange(12.0) + x.flatten() ** 2
    return np.sum(v * 2.0) + np.sum(np.tanh(x / s)) + np.sum(flat) + np.std(x)


def test_var_std_and_flatten_in_generated_code():
    from tests.corpus.checks import central_differences

    x = np.random.default_rng(11).standard_normal((3, 4))
    gradient = ppto.grad(spread_and_flattened)(x)
    expected = central_differences(spread_and_flattened, [x], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)
    tangent = np.random.default_rng(12).standard_normal((3, 4))
    _, derivative = ppto.jvp(spread_and_flattened, (x,), (tangent,))
    np.testing.assert_allclose(float(derivative), np.sum(expected * tangent), rtol=1e-6)
    source = ppto.show_grad(spread_and_flattened, x, file=io.StringIO())
    # (the count's max(count - ddof, 0) folded; std's rules shift by reduce_max)
    counted = source.replace("reduce_max(", "")
    assert "- 0" not in source and "max(" not in counted and "* 12)" in source


def grown_in_a_loop(x):
    hs = [np.tanh(x)]
    for i in range(3):
        hs = hs + [hs[-1] * x + i]
    return np.sum(np.stack(hs) ** 2)


def grown_in_place(x):
    hs = [x]
    hs += [np.sin(x), x * x]
    return np.sum(np.stack(hs) * np.arange(3.0)[:, None])


def grown_by_a_chain(x):
    xs = [x[0]]
    ys = xs + [x[1]] + [x[2] * 2.0, x[0] * x[1]]  # chained + crashed too
    return np.sum(np.stack(ys) ** 2)


def repeated_item(x):
    ys = [x[0] * x[1]] * 2  # list repetition: the gradient was 0, or counted once
    return ys[1] + np.sum(np.stack([x] * 3) * x)


def repeated_inside_a_call(x):
    return np.sum(np.stack([x * 2.0, np.sin(x)] * 2) ** 2)


def repeated_tuples(x):
    ys = (x,) * 3  # tuples repeated and joined were elementwise products and sums
    both = (x * 2.0, x) * 2
    return np.sum(np.stack(ys) * np.arange(3.0)[:, None]) + np.sum(np.stack(both))


def repeated_then_joined(x):
    return np.sum(np.concatenate([x] * 2 + [x * 3.0])) + np.sum(
        np.stack((x,) + (x * x,))
    )


def joined_with_constants(x):
    xs = [x[0]]
    xs = xs + [1.0]  # constant items: refused for a while
    xs += [3.0]
    positions = [0]
    positions = positions + [1]
    return np.sum(np.stack(xs)) * x[1] + np.sum(x[positions] ** 2)


def repetitions_joined(x):
    xs = [x[0]] * 2 + [x[1]] * 3  # refused for a while
    ys = xs + [x[2], x[0]] * 2 + [x[1]] * 0
    zs = [1.0] * 2 + [x[0]] * 2  # a NameError in generated code for a while
    return (
        np.sum(np.stack(xs) * x[2])
        + np.sum(np.stack(ys) ** 2)
        + np.sum(np.stack(zs) ** 2 * np.arange(1.0, 5.0))
    )


def joined_onto_constants(x):
    c = [1.0, 2.0]
    ys = c + [x[0]] * 2  # a zero gradient for a while: c holds no derivative
    empty = []
    empty += [x[1] * 2.0]
    return np.sum(np.stack(ys) ** 2 * np.arange(1.0, 5.0)) + np.sum(
        np.stack(empty) ** 2
    )


def loop_over_an_array_and_a_number(x):
    total = 0.0
    for a in (x * 2.0, 3.0):  # a ValueError in generated code for a while
        total = total + np.sum(a * x)
    return total


@pytest.mark.parametrize(
    "function",
    [
        loop_over_an_array_and_a_number,
        repetitions_joined,
        joined_onto_constants,
        grown_in_a_loop,
        grown_in_place,
        grown_by_a_chain,
        repeated_item,
        repeated_inside_a_call,
        repeated_tuples,
        repeated_then_joined,
        joined_with_constants,
    ],
)
def test_lists_grown_with_plus(function):
    # hs + [item] crashed inside the generated code (a list added as an array)
    # (second order failed through the list helpers)
    assert_derivatives_match(function, np.array([0.3, -0.6, 0.9]))


def counters_from_one_number(x):
    a = b = 0.0  # chained numbers: refused for a while
    for i in range(3):
        a += x[i]
        b += x[i] * x[i]
    return a * b


def accumulated_from_an_argument(X, start):
    h = start  # a number: the first += makes a new array, sharing nothing
    for t in range(4):
        h += np.tanh(X[t] * 0.5)
    return np.sum(h * h) * start


def rebound_after_an_alias(x):
    s = 0.0
    kept = s
    s += x
    s += x
    return np.sum(s * s) + kept


def unpacked_and_named(x):
    (a, b) = c = (x * 1.0, x * 2.0)  # crashed in the normalizer
    return np.sum(a * b) + np.sum(c[0])


def fresh_array_on_every_exit(x):
    z = x * 1.0
    y = x * 2.0
    for i in range(3):
        y = z
        if i == 1:
            y = z * 2.0  # a new array before the break as well
            break
        y = z * 3.0
    y += 1.0
    return np.sum(z * x) + np.sum(y * y)


def copied_list_element(x):
    c = [x * 2.0, x * 3.0]
    a = c[0] * 1.0  # an array of its own
    a += 1.0
    total = 0.0
    for item in c:  # read, never written
        total = total + np.sum(item * a)
    return total + np.sum(c[0] * x)


def extended_after_reading_items(x):
    a = x * 2.0
    b = x * 3.0
    xs = [a, b]
    xs += [x * 4.0]  # extends the list: a and b do not change (refused for a while)
    return np.sum(np.stack(xs)) + np.sum(a * x)


def total_and_square(u):
    return np.sum(u), u * u  # neither shares u's array


def add_into_unpacked_new_values(x):
    total, square = total_and_square(x)
    total += 1.0
    square *= 2.0
    return total * np.sum(square) + np.sum(x * x)


@pytest.mark.parametrize(
    "function, arguments",
    [
        (add_into_unpacked_new_values, (np.array([0.3, -0.7, 2.3]),)),
        (extended_after_reading_items, (np.array([0.3, -0.7, 2.3]),)),
        (fresh_array_on_every_exit, (np.array([0.3, -0.7, 2.3]),)),
        (copied_list_element, (np.array([0.3, -0.7, 2.3]),)),
        (unpacked_and_named, (np.array([0.3, -0.7, 2.3]),)),
        (counters_from_one_number, (np.array([0.3, -0.7, 2.3]),)),
        (
            accumulated_from_an_argument,
            (np.random.default_rng(0).standard_normal((4, 3)), 0.3),
        ),
        (rebound_after_an_alias, (np.array([0.3, -0.7, 2.3]),)),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_accumulators_the_alias_check_must_accept(function, arguments):
    from tests.corpus.checks import central_differences

    expected = central_differences(function, list(arguments), 0)
    gradient = ppto.grad(function)(*arguments).numpy()
    np.testing.assert_allclose(gradient, expected, rtol=1e-6)


def spread_of_a_stack(x):
    rows = np.stack([x, x * x])
    return np.sum(np.var(rows, axis=1)) + np.sum(np.std(rows, axis=0, ddof=1))


def test_second_order_through_spreads_of_intermediates():
    # hessian failed at max(reduced_count(t, 1) - 0, 0): max had no operator
    assert_derivatives_match(spread_of_a_stack, np.array([0.3, -0.7, 2.3]), jvp=False)


def spread_without_freedom(x):
    return np.sum(np.var(x, axis=1, ddof=3)) + np.sum(np.std(x, axis=0, ddof=2))


def spread_below_zero_freedom(x):
    return np.sum(np.var(x, axis=1, ddof=5)) + np.sum(np.std(x, axis=0, ddof=4))


@pytest.mark.parametrize(
    "function", [spread_without_freedom, spread_below_zero_freedom]
)
def test_var_and_std_with_no_degrees_of_freedom_left(function):
    # ddof >= count raised ZeroDivisionError (== count), or gave a finite gradient of
    # the wrong sign (> count); NumPy divides by max(count - ddof, 0): infinite
    x = np.array([[0.3, -1.2, 0.8], [0.1, 0.5, -0.7]])
    with (
        np.errstate(divide="ignore", invalid="ignore"),
        pytest.warns(RuntimeWarning, match="Degrees of freedom"),  # NumPy's, as usual
    ):
        value, gradient = ppto.value_and_grad(function)(x)
        _, tangent = ppto.jvp(function, (x,), (np.ones_like(x),))
        expected = function(x)
    assert np.isinf(float(value)) and np.isinf(expected)
    assert not np.isfinite(np.asarray(gradient)).any()
    assert not np.isfinite(float(tangent))


def filled_into_integers(w):
    return np.sum(np.full_like(np.array([3, 4]), w) * 1.0)  # w is cut to 2


def integer_fill_times(x):
    return np.sum(np.full_like(x, x[0, 0], dtype=int) * x)


def through_integers_only(x):
    return np.sum(x.astype(np.int32) * 1.0)


def root_of_integers(x, like):
    whole = x.astype(like.dtype)  # 0 for x[0]: sqrt's derivative is infinite there
    return np.sum(np.sqrt(whole * 1.0)) + np.sum(x**3)


def cast_by_a_variable(x, like):
    whole = like.dtype  # known only when the code runs
    return np.sum(x.astype(whole) * 1.0 + x * x)


def test_whole_numbers_carry_no_derivative():
    # a fill or cast into integers passed the derivative on as if it were a float
    from tests.corpus.checks import central_differences

    x = np.array([[1.7, 0.3], [0.2, -0.4]])
    cases = [(filled_into_integers, 2.5), (integer_fill_times, x)]
    for function, point in cases:
        expected = central_differences(function, [point], 0)
        np.testing.assert_allclose(np.asarray(ppto.grad(function)(point)), expected)
        tangent = np.ones_like(np.asarray(point, dtype=float))
        _, derivative = ppto.jvp(function, (point,), (tangent,))
        np.testing.assert_allclose(float(derivative), np.sum(expected * tangent))
    with pytest.raises(ppto.GradError, match=r"ppto.cast .*int32.*whole numbers"):
        ppto.grad(through_integers_only)(x)
    vector, like = np.array([0.3, -0.7, 2.3]), np.array([1, 2, 3])
    expected = central_differences(cast_by_a_variable, [vector, like], 0)
    gradient = ppto.grad(cast_by_a_variable)(vector, like)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-6)
    # an infinite derivative into the integers was NaN (it was multiplied by 0)
    point = np.array([0.3, 1.5, 2.7])
    expected = central_differences(root_of_integers, [point, like], 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gradient = ppto.grad(root_of_integers)(point, like).numpy()
        hessian = ppto.hessian(root_of_integers)(point, like).numpy()
    np.testing.assert_allclose(gradient, expected, rtol=1e-6)
    np.testing.assert_allclose(np.diag(hessian), 6 * point, rtol=1e-6)
    np.testing.assert_array_equal(hessian - np.diag(np.diag(hessian)), 0.0)


def reversed_items(x):
    total = 0.0
    for a in reversed(x):  # a zero gradient for a while: taken for a range
        total = total + np.sin(a) * total + a
    for b in reversed((x, 2.0)):
        total = total + np.sum(b * x)
    return total


def sine_and_cosine(x):
    return np.sin(x), np.cos(x)


def reversed_unpacked_and_annotated(x):
    hs, scale = [], 1.0  # names bound by unpacking or with an annotation were taken
    for a in x:  # for ranges, which gave a zero gradient
        hs.append(np.sin(a) * scale)
    s, c = sine_and_cosine(x)
    y: np.ndarray = x * c
    r = range(2)
    total = 0.0
    for i in r:
        total = total + x[i]
    r = s * 2.0  # a name that held a range, rebound to an array
    for h in reversed(hs):
        total = total * 0.5 + h * h
    for a in reversed(s):
        total = total * 0.5 + a * a
    for a in reversed(y):
        total = total + a
    for a in reversed(r):
        total = total + a * a
    return total


def reversed_range_in_a_helper(v):
    total = 0.0
    turns, rate = range(v.shape[0]), 0.5  # a range unpacked: one still
    for i in reversed(turns):
        total = total * rate + v[i] * v[i] * v[0]
    return total


def reversed_through_a_helper(x):
    # the Hessian through the helper was refused for a while
    total = reversed_range_in_a_helper(np.sin(x))
    r = range(3)
    for i in r:
        total = total + x[i]
    r, k = x * 2.0, 1  # a range name rebound by unpacking
    for a in reversed(r):
        total = total * 0.5 + a * a * k
    return total


def reversed_in_enumerate_and_zip(x):
    total = 0.0
    for j, i in enumerate(reversed(range(3))):  # a TypeError for a while
        total = total + x[i] * (j + 1.0)
    for j, a in enumerate(reversed(x)):  # refused for a while
        total = total + a * a * (j + 1.0)
    for a, b in zip(reversed(x), x):
        total = total + a * b
    return total


@pytest.mark.parametrize(
    "function",
    [
        reversed_items,
        reversed_unpacked_and_annotated,
        reversed_through_a_helper,
        reversed_in_enumerate_and_zip,
    ],
)
def test_loops_over_reversed_sequences(function):
    assert_derivatives_match(function, np.array([0.7, 1.1, 1.3]))


def tuple_unpacked_twice(x):
    t = x[0] * 2.0, x[1]
    a, b = t
    c, d = t  # the adjoints of t were joined as tuples, not added: half the gradient
    return a * d + b * c


def chained_tuple_targets(x):
    a, b = c, d = x[0] * 2.0, x[1]
    return a * d + b * c * x[2]


def list_made_by_a_call(x):
    hs = list()  # its appends were lost in forward mode (a zero jvp)
    hs.append(x[0] * x[1])
    return hs[0] * x[2]


def list_named_again_after_its_changes(x):
    previous = []
    for step in range(3):
        current = [x[step] * 2.0]
        current.append(np.sin(x[step]))  # ``current`` is a new list each turn
        if step > 0:
            current.append(previous[0] * previous[1])
        previous = current
    return previous[0] + previous[-1]


@pytest.mark.parametrize(
    "function",
    [
        tuple_unpacked_twice,
        chained_tuple_targets,
        list_made_by_a_call,
        list_named_again_after_its_changes,
    ],
)
def test_a_tuple_read_twice_adds_its_adjoints(function):
    assert_derivatives_match(function, np.array([0.7, -1.1, 1.3]))


def rows_of_a_scaled_stack(x):
    y = np.stack([x, x * 3.0]) * 2  # (dy * 2 on a tuple of two: four items)
    a, b = y
    return np.sum(b * x) + np.sum(a)


def items_of_a_vector(x):
    a, b, c = x * 2.0  # (dy * 2.0 on a tuple: a TypeError)
    return a * b + c * np.sin(a)


def rows_unpacked_twice_and_indexed(x):
    y = np.outer(x[:2], x) - x
    a, b = y
    c, d = y
    return np.sum(a * d) + np.sum(b * b) + np.sum(y[1] * c)


def _outer_and_vector(x):
    return np.outer(x, x), x


def rows_of_a_helper_result(x):
    (a, b, c), d = _outer_and_vector(x)  # (its rank not known where unpacked)
    return np.sum(a * b * d) - np.sum(np.cos(c))


def the_only_row(x):
    (a,) = np.outer(x[:1], x) * 2.0
    return np.sum(a * a * x)


@pytest.mark.parametrize(
    "function",
    [
        rows_of_a_scaled_stack,
        items_of_a_vector,
        rows_unpacked_twice_and_indexed,
        rows_of_a_helper_result,
        the_only_row,
    ],
)
def test_an_array_unpacked_into_its_rows(function):
    """The adjoint of ``a, b = y`` for an array y is an array (the rows' adjoints
    stacked, zeros for a row without one), as that of ``y[0]``, ``y[1]`` would be:
    a tuple of them was wrong (3 for 6) or a TypeError under the rule of the
    operation that made y."""
    x = np.array([0.7, -1.1, 1.3])
    value, _ = ppto.value_and_grad(function)(x)
    assert float(value) == pytest.approx(function(x.copy()), rel=1e-12)
    assert_derivatives_match(function, x)


def tuple_of_an_array_and_a_number(x):
    pair = (x * 2.0, 3.0)  # looping over it was a ValueError (stacked as an array)
    total = 0.0
    for item in pair:
        total = total + np.sum(item * np.sin(x))
    return total + np.sum(pair[0])


def tuple_of_different_shapes(x):
    parts = (x[:2] * x[2], x)
    total = 0.0
    for i, part in enumerate(parts):
        total = total + (i + 1.0) * np.sum(part**2)
    first, second = parts
    return total + np.sum(first) * np.sum(second)


def tuple_unpacked_and_listed(x):
    parts = (x[:2] * x[2], x)
    listed = list(parts)
    first, second = parts  # the two adjoints were joined as tuples: a wrong gradient
    return np.sum(listed[0]) * 2.0 + np.sum(first * first) + np.sum(second)


def items_of_a_tuple_of_unlike_items(x):
    pair = (x * 2.0, 3.0)  # pair[0] was a ValueError (the adjoint stacked the items)
    return np.sum(pair[0] * pair[1]) + np.sum(pair[-2])


def tuple_bound_in_both_branches(x):
    if x[0] > 0.0:
        pair = (x, 2.0)
    else:
        pair = (x * 2.0, 1.0)
    total = 0.0
    for item in pair:  # a ValueError before: taken for an array after the branches
        total = total + np.sum(item * x)
    return total


def list_rebound_in_the_loop(x):
    items = [x, 2.0]
    total = 0.0
    for _ in range(2):
        for item in items:  # the last turn's list: an IndexError in its gradient
            total = total + np.sum(item * x)
        items = [x * 0.5, x * x]
    return total


@pytest.mark.parametrize(
    "function",
    [
        list_rebound_in_the_loop,
        tuple_bound_in_both_branches,
        tuple_unpacked_and_listed,
        items_of_a_tuple_of_unlike_items,
        tuple_of_an_array_and_a_number,
        tuple_of_different_shapes,
    ],
)
def test_a_loop_over_a_tuple_variable_of_unlike_items(function):
    assert_derivatives_match(function, np.array([0.7, -1.1, 1.3]))


def enumerate_from_one(x):
    total = 0.0
    for i, v in enumerate(x, 1):  # start was ignored: a wrong value and gradient
        total = total + v * i
    for i, v in enumerate(x[1:], start=-2):
        total = total + v * v * i
    return total


def zip_of_unequal_lengths(x):
    total = 0.0
    for a, b in zip(x, x[1:]):  # ran len(x) turns: an IndexError
        total = total + a * b
    return total


@pytest.mark.parametrize("function", [enumerate_from_one, zip_of_unequal_lengths])
def test_enumerate_start_and_zip_lengths_follow_python(function):
    x = np.array([0.7, -1.1, 1.3, 0.4])
    assert float(ppto.value_and_grad(function)(x)[0]) == pytest.approx(function(x))
    assert_derivatives_match(function, x)


def and_or_of_values(x):
    first = x[0] and x[1]  # the operand chosen got no derivative (a zero gradient)
    second = x[2] or x[3]
    third = (x[3] > 0.0) and x[0] * 2.0 or x[1]
    return first * x[2] + second * x[0] + third * x[3]


def test_and_or_of_values_pass_the_chosen_operands_derivative():
    from tests.corpus.checks import central_differences

    x = np.array([0.7, -1.1, 1.3, 0.4])
    assert float(ppto.value_and_grad(and_or_of_values)(x)[0]) == pytest.approx(
        and_or_of_values(x)
    )
    assert_derivatives_match(and_or_of_values, x)
    # falsy operands (exactly 0): the other operands are chosen; the gradient
    # there is each chosen operand's (a finite difference steps off the zeros,
    # where the same operands are chosen only because x[2] is 0 too)
    x = np.array([0.0, -1.1, 0.0, -0.4])
    value, gradient = ppto.value_and_grad(and_or_of_values)(x)
    assert float(value) == pytest.approx(and_or_of_values(x))
    # chosen: first = x0, second = x3, third = x1: x0*x2 + x3*x0 + x1*x3
    expected = [x[2] + x[3], x[3], x[0], x[0] + x[1]]
    np.testing.assert_allclose(gradient.numpy(), expected)
    np.testing.assert_allclose(
        gradient.numpy(), central_differences(and_or_of_values, [x], 0), atol=1e-6
    )


def _doubled_copy(a):
    b = a * 2.0
    b += 1.0  # into its own array: the caller's is untouched
    return b


def _scaled_number(s):
    s *= 2.0  # a number: += makes a new one
    return s


def _first_row(m):
    return m[0]


def helpers_that_change_nothing_of_the_caller(x):
    y = x * 1.0
    z = _doubled_copy(y)
    z[0] = 5.0  # z is the helper's new array, not y
    m = x.reshape(2, 2) * 1.0
    row = _first_row(m) * 1.0
    row += 1.0
    return np.sum(y * x) + np.sum(z * x) + _scaled_number(x[0]) * x[1] + np.sum(row * m)


def test_helpers_that_do_not_change_their_arguments_are_differentiated():
    assert_derivatives_match(
        helpers_that_change_nothing_of_the_caller, np.array([0.7, -1.1, 1.3, 0.4])
    )


def items_of_an_array_listed(x):
    items = list(x)  # its gradient was a tuple: an AttributeError after the call
    total = 0.0
    for v in tuple(x[1:]):
        total = total * 0.5 + v
    return items[0] * items[2] + total


def rows_of_a_matrix_listed(x):
    rows = list(x.reshape(2, 2))
    return np.sum(rows[0] * rows[1]) + np.sum(np.sin(rows[1]))


@pytest.mark.parametrize(
    "function", [items_of_an_array_listed, rows_of_a_matrix_listed]
)
def test_an_array_made_a_list_gets_an_array_gradient(function):
    x = np.array([0.7, -1.1, 1.3, 0.4])
    gradient = ppto.grad(function)(x)
    assert gradient.shape == x.shape
    assert_derivatives_match(function, x)


def items_of_a_list_replaced(x):
    a = [x[0], x[1]]  # refused before: as if a[i] = ... wrote into x
    for i in range(2):
        a[i] = a[i] * x[2]
    return a[0] + a[1]


def test_replacing_items_of_a_list_of_numbers_is_differentiated():
    assert_derivatives_match(items_of_a_list_replaced, np.array([0.3, -1.2, 0.7]))


def index_unpacked_beside_a_value(x):
    i, v = 2, x[0]  # i was taken for a differentiated value: refused as an index
    (j, k), w = (0, 1), x[1] * 2.0
    return v * x[i] + w * x[j] * x[k]


def test_an_index_unpacked_beside_a_differentiated_value():
    assert_derivatives_match(index_unpacked_beside_a_value, np.array([0.3, -1.2, 0.7]))


def clipped_by_numpy_keywords(x):
    low = x.clip(min=0.0)  # "ppto.clip has no argument 'min'" before
    return np.sum(low * x) + np.sum(x.clip(max=0.5)) + np.sum(np.clip(x, min=-0.5))


def test_clip_takes_numpys_keyword_names():
    x = np.array([0.3, -1.2, 0.7])
    np.testing.assert_allclose(
        ppto.grad(clipped_by_numpy_keywords)(x).numpy(), [2.6, 1.0, 2.4]
    )
    assert_derivatives_match(clipped_by_numpy_keywords, x)


def arrays_by_numpys_keyword_names(v):
    # NumPy names the array a, m, v, A, array or tup; ppto's operators say x
    x = v.reshape(3, 3)
    m = np.tril(m=x) + np.triu(m=x, k=1) * 2.0 + np.diag(v=np.diag(v=x))
    s = np.sort(a=m, axis=0) + np.roll(a=m, shift=1) + np.cumprod(a=m, axis=1)
    total = np.trace(a=s) + np.sum(np.pad(array=s, pad_width=1) ** 2)
    solved = np.linalg.solve(a=m + 5.0 * np.eye(3), b=s) + np.linalg.inv(a=s)
    stacked = np.vstack(tup=[solved, np.tile(A=s[0], reps=(1, 1))])
    return total + np.sum(stacked**2) + np.sum(np.diff(a=s)) + np.linalg.det(a=s)


def test_numpy_functions_take_numpys_keyword_names_for_their_arrays():
    # each was "ppto.tril got an unexpected argument 'm'" (in eager calls too)
    x = np.array([1.3, 0.2, 0.7, 0.4, 1.1, 0.3, 0.9, 0.5, 1.6])
    assert_derivatives_match(arrays_by_numpys_keyword_names, x)
    eager = arrays_by_numpys_keyword_names(ppto.tensor(x))
    np.testing.assert_allclose(eager.numpy(), arrays_by_numpys_keyword_names(x))


def item_at_the_largest(x):
    return np.sum(x[np.argmax(x)] * x) + x[x.argmin()] ** 2


def test_an_index_found_by_argmax_has_second_derivatives():
    # the gradient's index_add(..., np.argmax(x)) was refused as a differentiated
    # index when the gradient was differentiated again
    assert_derivatives_match(item_at_the_largest, np.array([0.3, -1.2, 0.7]))


def enumerate_from_a_start_changed_in_the_loop(x):
    start = 1
    total = 0.0
    for i, v in enumerate(x, start):  # start is read once, as Python does
        start = start + 10
        total = total + i * v**2
    return total


def listed_array_popped(x):
    rows = list(x.reshape(2, 2))
    last = rows.pop()  # the popped row's adjoint was spread over every row
    items = list(x)
    v = items.pop()
    return np.sum(last**2) * x[0] + v**2 * x[1]


def and_or_in_a_branch_not_taken(x):
    i = 3
    picked = np.sum(x) if i >= 3 else (x[i] and x[i - 1]) * 2.0  # x[3]: IndexError
    chosen = i < 3 and (x[i] or x[0])  # (run before even where i >= 3)
    return picked + chosen * x[0]


def _returned_as_is(a):
    return a


def _doubled(a):
    return a * 2.0


def _applying(op):
    def apply(a):
        return op(a)

    return apply


_DOUBLE, _SAME = _applying(_doubled), _applying(_returned_as_is)


def sorted_copy_and_method_reads(x):
    order = np.sort(np.array([2, 0, 1]))  # np.sort: a new array, not a list change
    print("largest", x.max(), end="\r")  # a method inside a dropped call: read only
    return np.sum(x[order] ** 2) + np.sum(_DOUBLE(x) * x)


def _number_updated(a, s=2.0):
    a += s  # numbers passed by keyword, and a default: new numbers
    s *= 1.5
    return a * s


def _accumulated(v, acc=None):
    if acc is None:
        acc = []  # not passed: the helper's own list
    acc.append(v * 2.0)
    return acc


def helpers_given_numbers_or_defaults(x):
    return _number_updated(a=x[0], s=x[1]) * x[2] + _accumulated(x[1])[0] * x[0]


def looped_list_then_appended(x):
    hs = [x[0], x[1]]
    total = 0.0
    for h in hs:
        total = total + h**2
    hs.append(total)  # its Hessian was refused (ppto's own sequence = hs copy)
    return hs[-1] * x[2]


@pytest.mark.parametrize(
    "function",
    [
        enumerate_from_a_start_changed_in_the_loop,
        listed_array_popped,
        and_or_in_a_branch_not_taken,
        sorted_copy_and_method_reads,
        helpers_given_numbers_or_defaults,
        looped_list_then_appended,
    ],
)
def test_second_review_cases(function):
    x = np.array([0.3, -1.2, 2.0, 0.5])
    value = ppto.value_and_grad(function)(x)[0]
    assert float(value) == pytest.approx(function(x))
    assert_derivatives_match(function, x)


def list_partly_popped(x):
    xs = [x[0], x[1] * 2.0, np.sin(x[2])]
    last = xs.pop()  # the two items left had no adjoint entries: pop from empty list
    return last * x[3]


def list_read_and_popped(x):
    xs = [x[0], x[1] * 2.0, x[2]]
    a = xs[0]
    b = xs.pop()  # db went to x[2]'s entry, da added into it, then an empty list
    return a * b * x[1]


def list_appended_after_a_pop(x):
    xs = [x[0], x[1] * x[1]]
    b = xs.pop()
    xs.append(np.ones(3) * x[2])  # its zero adjoint (shaped (3,)) went to x[0]
    return b * x[3] + x[0]


@pytest.mark.parametrize(
    "function", [list_partly_popped, list_read_and_popped, list_appended_after_a_pop]
)
def test_a_list_keeps_an_adjoint_per_item(function):
    """A list's adjoint holds one entry per item from where the reverse meets the
    list (zeros for the items still in it): the reverse of each pop appends one and
    that of each append pops one, so items never popped keep theirs. (It started
    empty, as though every item had been popped.)"""
    x = np.array([0.3, -1.2, 2.0, 0.5])
    assert_derivatives_match(function, x)


def tuple_grown_in_a_loop(x):
    t = ()
    for i in range(3):
        t = t + (x[i] ** 2, x[i + 1] * 0.5)
    return np.sum(np.stack(t) * np.arange(1.0, 7.0))


def tuple_grown_by_augmented_join(x):
    t = ()
    for i in range(3):
        t += (np.sin(x[i]),)
    return t[0] * t[1] + t[2] * x[3]


def tuple_joined_on_either_branch(x):
    t = (x[0],)
    if x[3] > 0.0:
        t = t + (x[1] ** 3,)
    else:
        t = t + (x[2] ** 3,)
    return t[0] * t[1]


def tuple_joined_returned(x):
    t = ()
    for i in range(2):
        t = t + (x[i] * 3.0,)
    return t


@pytest.mark.parametrize(
    "function",
    [
        tuple_grown_in_a_loop,
        tuple_grown_by_augmented_join,
        tuple_joined_on_either_branch,
    ],
)
def test_a_tuple_joined_with_tuples_is_differentiated(function):
    """``t = t + (v,)``, Python's way to grow a tuple, was refused ("joining these
    lists"): a tuple joins as a list ppto holds, made a tuple again."""
    for x in (np.array([0.3, -1.2, 2.0, 0.5]), np.array([0.3, -1.2, 2.0, -0.5])):
        value = ppto.value_and_grad(function)(x)[0]
        assert float(value) == pytest.approx(function(x), rel=1e-12)
        assert_derivatives_match(function, x)
    out, pullback = ppto.vjp(tuple_joined_returned, np.array([0.3, -1.2]))
    assert type(out) is tuple and len(out) == 2  # (a tuple, as Python's)
    (gradient,) = pullback((1.0, 2.0))
    np.testing.assert_allclose(np.asarray(gradient), [3.0, 6.0])


def assigned_on_two_paths_of_three(x):
    y = x[0]
    for _ in range(4):  # the else, the elif twice, then the if
        if y > 2.0:
            z = np.sqrt(y)
            y = z * x[1]
        elif y > 1.0:
            y = y * y
        else:
            z = x[1] * x[2]
            y = y + z * y
    return y * x[3]


def test_a_value_assigned_on_some_paths_of_an_elif_chain():
    """z is pushed where it is assigned, on two paths of three through the loop's
    if/elif/else: its reverse pops it in those branches, not before the if (which
    popped on every turn, from an empty tape)."""
    assert_derivatives_match(
        assigned_on_two_paths_of_three, np.array([0.9, 0.5, 0.6, 0.5])
    )


def test_a_closures_returned_arguments_are_its_own():
    # the analysis was cached per code object: _DOUBLE's answer served _SAME
    def write_through(x):
        y = x * 1.0
        z = _SAME(y)
        z[0] = 5.0
        return np.sum(y * x)

    ppto.grad(sorted_copy_and_method_reads)(np.array([0.3, -1.2, 2.0]))
    with pytest.raises(ppto.TransformError, match="shares its array with y"):
        ppto.grad(write_through)(np.array([0.3, -1.2, 2.0]))


def _last(items):
    return items[-1]


def _total(items):
    total = 0.0
    for item in items:
        total = total + item
    return total


def list_read_by_helpers_while_it_grows(x):
    items = [x[0], x[1]]
    a = _last(items)  # the helper kept the list itself: later appends changed it
    items.append(x[2] * 5.0)
    running = 0.0
    for i in range(3):
        items.append(x[i] * 2.0)  # an IndexError in the gradient before
        running = running + _last(items) * _total(items)
    items += [x[0]]  # refused before: taken for a write into a
    return a * _last(items) + running


def length_of_a_growing_list(x):
    lengths = []
    total = 0.0
    for i in range(3):
        lengths.append(x[i])
        total = total + x[i] / len(lengths)  # the backward read the final length
    return total


@pytest.mark.parametrize(
    "function", [list_read_by_helpers_while_it_grows, length_of_a_growing_list]
)
def test_lists_read_as_they_were_when_read(function):
    x = np.array([0.3, -0.5, 0.8])
    assert float(ppto.value_and_grad(function)(x)[0]) == pytest.approx(function(x))
    assert_derivatives_match(function, x)


def item_at_a_length_of_a_growing_list(x):
    hs = [x, x * 2.0, x * 3.0, x * 4.0, x * 5.0]
    for _ in range(3):
        hs.append(np.sin(hs[len(hs) - 5]) + x)  # the backward read the final length
    return np.sum(hs[-1] * hs[-2] * hs[-3])


def stacked_slice_of_a_list(x):
    hs = [x, x * x, np.sin(x)]
    first, second = hs[1:]  # a TypeError: the slice's adjoints were joined as lists
    return np.sum(np.stack(hs[1:]) ** 2) + np.sum(first * second)


def number_added_into_then_stacked(x):
    total = x[0] * 2.0
    kept = total
    for i in range(3):
        total += x[i]  # a number: refused once total was indexed below
    total = np.stack([total, kept])
    return total[0] * total[1]


class _Monitor:
    def __init__(self):
        self.size = 0.0

    def log(self, v):
        self.size = float(np.sqrt(np.sum(v * v)))  # kept, never read back


_MONITOR = _Monitor()


def logged_by_a_method(x):
    h = np.sin(x)
    _MONITOR.log(h)
    return np.sum(h * x)


@pytest.mark.parametrize(
    "function",
    [
        item_at_a_length_of_a_growing_list,
        stacked_slice_of_a_list,
        number_added_into_then_stacked,
        logged_by_a_method,
    ],
)
def test_fourth_review_cases(function):
    x = np.array([0.3, -0.7, 1.1])
    assert float(ppto.value_and_grad(function)(x)[0]) == pytest.approx(function(x))
    assert_derivatives_match(function, x)


def _item_of(v, i):
    return v[i]


def _both(items):
    return items, np.sum(items[-1] ** 2)


def fifth_review_accepted(x):
    s = _item_of(x, 0)  # a number: refused as an array shared with x before
    s += x[1]
    h = x
    for _ in ppto.checkpoint(range(2)):
        parts = []  # a list of the turn's own: refused under checkpoint before
        parts.append(np.sin(h))
        parts.append(np.cos(h))
        h = parts[0] * parts[1] + h
    hs = [x]
    m = np.outer(np.arange(1.0, 7.0), x)
    for _ in range(2):
        hs.append(np.sin(hs[-1]) * m[len(hs), 0])  # the index read the final length
    ys, t = _both(hs)  # a tuple holding the list itself (a copy before: wrong value)
    return s * x[2] + np.sum(h) + np.sum(hs[-1]) + t + np.sum(ys[0])


def test_fifth_review_cases():
    x = np.array([0.3, -0.7, 1.1])
    value = ppto.value_and_grad(fifth_review_accepted)(x)[0]
    assert float(value) == pytest.approx(fifth_review_accepted(x))
    assert_derivatives_match(fifth_review_accepted, x)


def _sum_of(items):
    total = 0.0
    for item in items:
        total = total + np.sum(item)
    return total


def list_of_unlike_items_to_a_helper(x):
    parts = [x[:2], x, x[0]]  # the helper took its list for an array: a ValueError
    running = 0.0
    states = []
    for i in range(3):
        states.append(np.sin(x * (i + 1.0)))
        running = running + _sum_of(states) * x[i]
    return _sum_of(parts) * x[1] + running


def test_a_helper_passed_a_list_treats_it_as_one():
    assert_derivatives_match(
        list_of_unlike_items_to_a_helper, np.array([0.3, -0.7, 1.1])
    )


def _scaled_rows(items, flag):
    if flag:
        items = np.stack(items) * 3.0  # an array from here on this path
    total = 0.0
    for item in items:
        total = total + np.sum(item**2)
    return total


def list_to_a_helper_that_rebinds_it(x):
    # the parameter was taken for a list after the branch too: a third of the
    # gradient, or a TypeError in the helper's backward pass
    pair = [x, x * 2.0]
    return _scaled_rows(pair, True) + _scaled_rows(pair, False)


def test_a_list_parameter_rebound_to_an_array():
    assert_derivatives_match(
        list_to_a_helper_that_rebinds_it, np.array([0.3, -0.7, 1.1])
    )


def list_rebound_to_another_list_in_a_branch(x):
    items = [x * 2.0, x * 4.0]
    if np.sum(x) > 0.0:
        # the other path's zero adjoint for the first list was an array: an
        # AttributeError (no .pop) in the gradient
        items = [x * 5.0, x * 7.0]
    return np.sum(np.stack(items) ** 2)


def list_rebound_to_another_list_in_a_loop(x):
    items = [x, x * 2.0]
    for _ in range(2):
        if np.sum(x) > 0.0:
            items = [items[1] * 3.0, items[0] * x]
    return np.sum(items[0] * items[1])


@pytest.mark.parametrize(
    "function",
    [list_rebound_to_another_list_in_a_branch, list_rebound_to_another_list_in_a_loop],
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_list_rebound_to_another_list_on_one_path(function, sign):
    assert_derivatives_match(function, sign * np.array([0.7, -0.3, 0.9]))


# tuples written out and bound on several paths: their adjoint was made as an array
# (the items stacked), a ValueError for an array and a number or unlike shapes


def tuple_rebound_in_one_branch(x):
    pair = (x, 1.0)
    if np.sum(x) > 0.0:
        pair = (x * 2.0, 3.0)
    return np.sum(pair[0]) * pair[1]


def tuple_bound_in_each_branch(x):
    if np.sum(x) > 0.0:
        pair = (x * 2.0, np.sum(x))
    else:
        pair = (x[:2], 5.0)
    first, second = pair
    return np.sum(first**2) * second + np.sum(pair[0]) * pair[1]


def tuple_carried_round_a_loop(x):
    pair = (x, np.sum(x))
    for _ in range(3):
        pair = (pair[0] * pair[1], np.sum(pair[0]))
    return np.sum(pair[0]) * pair[-1]


def tuple_of_unlike_shapes_round_a_loop(x):
    pair = (x, x[:2])
    for _ in range(3):
        head, tail = pair
        pair = (head * np.sum(tail), tail * 2.0)
    return np.sum(pair[0]) + np.sum(pair[1] ** 2)


def _product_of(pair):
    head, scale = pair
    return np.sum(head) * scale


def _pair_on_one_path(x, flag):
    if flag:
        pair = (x * 2.0, np.sum(x))
    else:
        pair = (x, 2.0)
    return pair


def tuple_rebound_passed_to_a_helper(x):
    pair = (x, 1.0)
    if np.sum(x) > 0.0:
        pair = (x * 2.0, 3.0)
    copy = pair
    return _product_of(pair) + copy[1] * np.sum(copy[0])


def tuple_rebound_in_a_helper_returned(x):
    a, b = _pair_on_one_path(x, True)
    c, d = _pair_on_one_path(x, False)
    return np.sum(a) * b + np.sum(c) * d


@pytest.mark.parametrize(
    "function",
    [
        tuple_rebound_in_one_branch,
        tuple_bound_in_each_branch,
        tuple_carried_round_a_loop,
        tuple_of_unlike_shapes_round_a_loop,
        tuple_rebound_passed_to_a_helper,
        tuple_rebound_in_a_helper_returned,
    ],
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_tuple_of_unlike_items_bound_on_several_paths(function, sign):
    assert_derivatives_match(function, sign * np.array([0.7, -0.3, 0.9]))


# changes to a list on one path that keep it a list, or make it an array on every
# path, beside the refused list made an array on one path only
# (tests/error_cases.py: list_made_an_array_in_one_branch)


def list_item_replaced_in_a_branch(x):
    items = [x * 2.0, x * 3.0]
    if np.sum(x) > 0.0:
        items[0] = x * 5.0
    return np.sum(np.stack(items) ** 2)


def list_appended_to_in_a_branch(x):
    items = [x * 2.0]
    if np.sum(x) > 0.0:
        items.append(x * 5.0)
    return np.sum(np.stack(items) ** 2)


def list_joined_in_a_branch(x):
    items = [x * 2.0]
    if np.sum(x) > 0.0:
        items = items + [x * x]
    return np.sum(np.stack(items) ** 2)


def list_stacked_on_every_path(x):
    items = [x * 2.0, x * 4.0]
    if np.sum(x) > 0.0:
        items = np.stack(items) * 3.0
    else:
        items = np.stack(items)
    return np.sum(items**2)


@pytest.mark.parametrize(
    "function",
    [
        list_item_replaced_in_a_branch,
        list_appended_to_in_a_branch,
        list_joined_in_a_branch,
        list_stacked_on_every_path,
    ],
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_list_kept_a_list_or_stacked_on_every_path(function, sign):
    assert_derivatives_match(function, sign * np.array([0.7, -0.3, 0.9]))


# a tuple of arrays where an operator takes an array: unreduce and unbroadcast took
# it for a shape (a ValueError in the gradient)


def sum_of_a_tuple_written_out(x):
    return np.sum((x, x * 2.0)) + np.sum([x, x**2])


def sum_of_a_tuple_variable(x):
    pair = (x, x * 2.0)
    return np.sum(pair) * np.sum(pair[1] * x)


def _stacked_on_one_path(items, x):
    if np.sum(x) > 0.0:
        items = np.stack(items) * 3.0
    return np.sum(items)


def list_written_out_to_a_helper_that_rebinds_it(x):
    return _stacked_on_one_path([x * 2.0, x * x], x)


@pytest.mark.parametrize(
    "function",
    [
        sum_of_a_tuple_written_out,
        sum_of_a_tuple_variable,
        list_written_out_to_a_helper_that_rebinds_it,
    ],
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_tuple_of_arrays_read_as_an_array(function, sign):
    assert_derivatives_match(function, sign * np.array([0.7, -0.3, 0.9]))


# the parts of np.split bound to a name: as an array, their adjoints were stacked (a
# NumPy ValueError in the gradient for parts of unlike lengths)


def split_parts_read_by_index(x):
    parts = np.split(x, [1, 2])
    return np.sum(parts[0] ** 2) + np.sum(parts[1] * 3.0) * np.sum(parts[-1] ** 3)


def split_parts_looped_over(x):
    total = 0.0
    for part in np.split(x, [2]):
        total = total + np.sum(part**2) * part[0]
    return total


def split_columns_read_by_index(x):
    columns = np.split(np.outer(x, x), [1], axis=1)
    return np.sum(columns[0] ** 3) + np.sum(columns[1] * columns[1][:, :1])


@pytest.mark.parametrize(
    "function",
    [split_parts_read_by_index, split_parts_looped_over, split_columns_read_by_index],
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_split_parts_of_unlike_lengths(function, sign):
    assert_derivatives_match(function, sign * np.array([0.7, -0.3, 0.9]))


# np.prod's derivatives divided the product by x: NaN where an element is 0


def product(x):
    return np.prod(x) + np.prod(x[:2])


def products_over_an_axis(x):
    table = np.outer(x, x[::-1] + 1.0)
    return np.sum(np.prod(table, axis=1) ** 2) + np.sum(np.prod(table, axis=0) * x)


@pytest.mark.parametrize("function", [product, products_over_an_axis])
@pytest.mark.parametrize(
    "x", [[0.7, 0.0, 0.9], [0.0, -0.3, 0.9], [0.0, 0.0, 0.9], [0.7, -0.3, 0.0]]
)
def test_product_with_zeros(function, x):
    assert_derivatives_match(function, np.array(x))


# a helper's several results bound to one name (pair = helper(x); pair[1]): taken
# for an array, its adjoint stacked the results (a NumPy ValueError in the gradient
# for an array and a number)


def _scaled_and_norm(x):
    if np.sum(x) > 0.0:
        return x * 2.0, np.sum(x**2)
    return x, 1.5


def results_read_by_index(x):
    pair = _scaled_and_norm(x)
    again = _scaled_and_norm(pair[0] * pair[1])
    return np.sum(pair[0] ** 2) * pair[1] + np.sum(again[0]) * again[-1]


def results_of_a_checkpointed_call(x):
    pair = ppto.checkpoint(_scaled_and_norm)(x)
    return np.sum(pair[0] ** 2) * pair[1]


def results_in_a_loop(x):
    total = 0.0
    for step in range(3):
        pair = _scaled_and_norm(x * (step - 1.0))
        for part in pair:
            total = total + np.sum(part) * pair[1]
    return total


@pytest.mark.parametrize(
    "function",
    [results_read_by_index, results_of_a_checkpointed_call, results_in_a_loop],
)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_several_results_of_a_helper_bound_to_one_name(function, sign):
    assert_derivatives_match(function, sign * np.array([0.7, -0.3, 0.9]))


# the statements after an if that may return (or continue) went into both of its
# branches as the same nodes, so renaming one path's names renamed the other's (an
# UnboundLocalError in the gradient)


def return_in_a_nested_if(x):
    if x[0] > 0.0:
        y = x * 2.0
        if x[1] > 0.0:
            return np.sum(y**2)
        y = y * x[2]
    else:
        y = x**3
    return np.sum(y)


def continue_in_a_nested_if(x):
    total = 0.0
    for i in range(3):
        if x[i] > 0.0:
            y = x[i] * 2.0
            if x[i] > 0.8:
                continue
            y = y * x[2]
        else:
            y = x[i] ** 3
        total = total + y * x[0]
    return total


def break_in_a_nested_if(x):
    """(the same for break: the value itself was wrong, the else branch's y taken
    from before its own ``y = y + x * 0.5``)"""
    y = x * 1.0
    for i in range(3):
        if x[i] > 0:
            y = y * 2.0
            if x[i] > 0.8:
                break
        else:
            y = y**2
        y = y + x * 0.5
    return np.sum(y * y)


@pytest.mark.parametrize(
    "function", [return_in_a_nested_if, continue_in_a_nested_if, break_in_a_nested_if]
)
@pytest.mark.parametrize(
    "x", [[0.7, -0.3, 0.9], [0.7, 0.3, 0.9], [-0.7, 0.3, 0.9], [0.9, -0.3, -0.5]]
)
def test_a_path_exiting_inside_a_nested_if(function, x):
    assert_derivatives_match(function, np.array(x))


# a return inside a loop (refused before): the loop breaks with a flag set, and the
# function returns after it


def return_in_for(x):
    total = 0.0
    for v in x:
        if v > 0.5:
            return total * v
        total = total + v * v
    return total


def return_in_while(x):
    total = np.sum(x * x) + 1.0
    while total > 1.0:
        total = total / 2.0
        if total < 1.5:
            return total * x[0]
    return total


def return_in_an_inner_loop(x):
    total = 0.0
    for i in range(3):
        for v in x:
            total = total + np.sin(v) * i
            if total > 1.0:
                return total * x[1]
        total = total * 0.5
    return total + x[2]


def return_in_while_true(x):
    y = x * 1.0
    steps = 0
    while True:
        y = np.tanh(y) + x * 0.3
        steps = steps + 1
        if np.sum(y) > 1.0 or steps == 4:
            return np.sum(y * y) * steps


@pytest.mark.parametrize(
    "function",
    [return_in_for, return_in_while, return_in_an_inner_loop, return_in_while_true],
)
@pytest.mark.parametrize("x", [[0.3, 0.2, 0.9], [0.7, -0.3, 0.2], [-0.2, -0.3, -0.1]])
def test_a_return_inside_a_loop(function, x):
    assert_derivatives_match(function, np.array(x))


# the Hessian through a helper whose loop reads integers from its tape (a while
# loop's index, an inner loop's range, a turn count where the loop may return):
# unpacked from the helper's saved tuple, they were taken for differentiated values,
# and the gradient differentiated again was refused ("does not differentiate an
# index")


def returns_in_a_while_loop(x):
    i = 0
    s = x[0]
    while i < 3:
        s = s * x[i] + 0.1
        if s > 0.3:
            return s
        i = i + 1
    return s * 2.0


def returns_in_an_inner_loop(x):
    s = 0.0
    for i in range(3):
        for j in range(3):
            s = s + x[i] * x[j]
            if s > 1.0:
                return s
        s = s * 0.5
    return s


def returns_over_items(x):
    s = 0.0
    for v in x:
        s = s + v * v
        if s > 0.5:
            return s * x[0]
    return s


def calls_a_while_loop(x):
    return returns_in_a_while_loop(x) * returns_in_a_while_loop(x * 0.9)


def calls_an_inner_loop(x):
    return returns_in_an_inner_loop(x) * 2.0


def calls_a_loop_over_items(x):
    return returns_over_items(x) + returns_over_items(x * 0.5)


@pytest.mark.parametrize(
    "function", [calls_a_while_loop, calls_an_inner_loop, calls_a_loop_over_items]
)
@pytest.mark.parametrize("x", [[0.3, 0.2, 0.9], [0.1, 0.2, 0.3], [1.5, 1.2, 0.7]])
def test_the_hessian_through_a_helper_with_a_loop(function, x):
    assert_derivatives_match(function, np.array(x))


# functions of one code with different values: closures of one factory, and one
# function's code under other globals (two modules with a global of one name)


def scaled_by(fn, k):
    def wrapper(x):
        return fn(x) * k

    return wrapper


def sines(x):
    return np.sum(np.sin(x) * x)


TWICE, FIVE_TIMES = scaled_by(sines, 2.0), scaled_by(sines, 5.0)
SCALED_TWICE = scaled_by(scaled_by(sines, 2.0), 3.0)  # one closure wrapping another


def uses_two_closures(x):
    return TWICE(x) * FIVE_TIMES(x)


def uses_scale_global_of_its_module(x):
    return np.sum(np.cos(x)) * SCALE


OTHER_MODULE = types.FunctionType(
    uses_scale_global_of_its_module.__code__, {**globals(), "SCALE": 7.0}, "other"
)


def uses_two_modules(x):
    return uses_scale_global_of_its_module(x) * OTHER_MODULE(x)


@pytest.mark.parametrize(
    "function", [uses_two_closures, SCALED_TWICE, uses_two_modules]
)
def test_functions_of_one_code_keep_their_own_values(function):
    """The second closure of a factory ran the first one's generated code and read
    the first one's k (a value and gradient 2.5x too small); a closure wrapping
    another of its factory was refused as recursion; a global of one name read by
    functions of two modules took the first one's value."""
    x = np.array([0.3, 0.2, 0.9])
    value = ppto.value_and_grad(function)(x)[0]
    assert float(value) == pytest.approx(function(x), rel=1e-12)
    assert_derivatives_match(function, x)


class _Log:
    pass


_LOG = _Log()


def _log_into(log, v):
    log.last = v


def logs_a_value_never_read_back(x):
    h = np.tanh(x)
    _log_into(_LOG, h)  # kept, but not read back: the gradient needs nothing of it
    _log_into(_LOG, h * 2.0)
    return np.sum(h * x)


def test_a_function_keeping_a_value_not_read_back_is_accepted():
    x = np.array([0.3, -0.2, 0.5])
    gradient = ppto.grad(logs_a_value_never_read_back)(x).numpy()
    expected = np.tanh(x) + x * (1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


# a method of a module-level object called by the differentiated function (refused
# before: "has no ppto operator")


class _DenseLayer:
    def __init__(self, W, b):
        self.W, self.b = W, b

    def forward(self, x):
        return np.tanh(x @ self.W + self.b)


DENSE = _DenseLayer(np.arange(6.0).reshape(3, 2) * 0.1, np.array([0.1, -0.2]))


def through_a_method(x):
    return np.sum(DENSE.forward(x) ** 2) + np.sum(DENSE.forward(x * 2.0))


def test_a_method_of_a_module_level_object_is_differentiated(monkeypatch):
    x = np.array([0.3, -0.2, 0.5])
    assert_derivatives_match(through_a_method, x)
    import ppto.api

    builds, build = [], ppto.api.build
    monkeypatch.setattr(
        ppto.api, "build", lambda *a, **k: builds.append(1) or build(*a, **k)
    )
    gradient = ppto.grad(through_a_method)
    for _ in range(3):
        gradient(x)
    assert len(builds) <= 1  # (the method's name here is not taken for a rebinding)
    monkeypatch.setitem(globals(), "DENSE", _DenseLayer(DENSE.W * 2.0, DENSE.b))
    from tests.test_checkpoint import central_differences

    expected = central_differences(through_a_method, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


# found by review: the method's name as a module global, an object kept through a
# keyword argument, and a method of an object reached through another


_DenseLayer_forward = 10.0  # (the name DENSE.forward, rewritten, was given)


def reads_a_global_named_like_the_method(x):
    return np.sum(DENSE.forward(x)) * _DenseLayer_forward + np.sum(
        DENSE.forward(x) ** 2
    )


def test_a_global_named_like_the_rewritten_method_is_still_read():
    # (it was shadowed by the method's function: float * function)
    x = np.array([0.3, -0.2, 0.5])
    from tests.test_checkpoint import central_differences

    gradient = ppto.grad(reads_a_global_named_like_the_method)(x).numpy()
    expected = central_differences(reads_a_global_named_like_the_method, (x,), 0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-7)


class _Keeper:
    def __init__(self):
        self.last = 0.0

    def record(self, v):
        self.last = v * 2.0


KEEPER = _Keeper()
HOLDS_KEEPER = types.SimpleNamespace(keeper=KEEPER)


def keep_by_keyword(v, into):
    into.last = v * 2.0


def kept_through_a_keyword(x):
    h = np.sin(x)
    keep_by_keyword(h, into=KEEPER)
    return np.sum(KEEPER.last)


def kept_through_a_method_of_an_inner_object(x):
    h = np.sin(x)
    HOLDS_KEEPER.keeper.record(h)
    return np.sum(HOLDS_KEEPER.keeper.last) + np.sum(h)


def logged_through_a_keyword(x):
    h = np.sin(x)
    keep_by_keyword(h, into=KEEPER)
    return np.sum(h * h)


@pytest.mark.parametrize(
    "function", [kept_through_a_keyword, kept_through_a_method_of_an_inner_object]
)
def test_a_value_kept_in_an_object_otherwise_passed_is_refused(function):
    # (both gave a silently wrong gradient: what was read back taken as a constant)
    with pytest.raises(ppto.TransformError, match="keeps an argument"):
        ppto.grad(function)(np.array([0.3, -0.2, 0.5]))


def test_a_log_passed_by_keyword_and_never_read_back_is_accepted():
    x = np.array([0.3, -0.2, 0.5])
    gradient = ppto.grad(logged_through_a_keyword)(x).numpy()
    np.testing.assert_allclose(gradient, 2 * np.sin(x) * np.cos(x), rtol=1e-12)


class _Rebound:
    def __init__(self, W):
        self.W = W

    def forward(self, x):
        return np.tanh(x @ self.W)


REBOUND = _Rebound(np.arange(6.0).reshape(3, 2) * 0.1)


def through_a_method_given_again(x):
    return np.sum(REBOUND.forward(x) ** 2)


def test_a_method_its_class_is_given_again_is_differentiated_again(monkeypatch):
    # (the program kept the first method's derivative: a stale gradient)
    from tests.test_checkpoint import central_differences

    x = np.array([0.3, -0.2, 0.5])
    gradient = ppto.grad(through_a_method_given_again)
    gradient(x)
    monkeypatch.setattr(_Rebound, "forward", lambda self, x: np.sin(x @ self.W))
    expected = central_differences(through_a_method_given_again, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)
    monkeypatch.setattr(REBOUND, "forward", lambda x: np.cos(x @ REBOUND.W))
    expected = central_differences(through_a_method_given_again, (x,), 0)
    np.testing.assert_allclose(gradient(x).numpy(), expected, rtol=1e-7)


class _TensorLayer:
    def __init__(self, W):
        self.W = W

    def forward(self, x):
        return np.tanh(x @ self.W)


TENSOR_LAYER = _TensorLayer(ppto.tensor(np.ones((3, 2)) * 0.2))


def through_a_method_reading_a_tensor(x):
    return np.sum(TENSOR_LAYER.forward(x))


def test_a_method_of_an_object_holding_tensors_is_refused_clearly():
    """Its code would read the tensors through ``self`` (generated code computes on
    arrays): refused at the line reading one, not a misleading error from inside
    the generated code."""
    with pytest.raises(ppto.TransformError, match="self.W is a ppto tensor") as raised:
        ppto.grad(through_a_method_reading_a_tensor)(np.array([0.3, -0.2, 0.5]))
    assert "return np.tanh(x @ self.W)" in str(raised.value)


def rows_times_weights(w, x):
    h = np.tanh(x).reshape(len(x), -1)  # (columns known only at run time)
    return np.sum(h @ w)


def raises_its_own_error(w, x):
    if x.shape[0] == 0:
        raise ValueError("an empty batch")
    return np.sum(x @ w)


def test_shape_errors_in_generated_code_are_ppto_errors_naming_the_statement():
    # NumPy's own ValueError / IndexError came out of the generated code, naming
    # neither ppto's function nor the arguments
    grad = ppto.grad(rows_times_weights)
    w, x = np.ones((3, 2)), np.ones((2, 2, 2))
    with pytest.raises(ppto.ShapeError) as caught:
        grad(w, x)
    message = str(caught.value)
    line = rows_times_weights.__code__.co_firstlineno + 2  # the user's own line
    assert (
        f"rows_times_weights's gradient failed at test_generated_code.py, line {line}"
        " (`return np.sum(h @ w)`)" in message
    )
    assert "shapes (3, 2), (2, 2, 2)" in message and "matmul" in message
    assert "@ w`" in message
    dw = grad(w, np.ones((2, 3)))  # then right shapes, and wrong again on the
    np.testing.assert_allclose(np.asarray(dw), np.full((3, 2), 2 * np.tanh(1.0)))
    with pytest.raises(ppto.ShapeError, match="matmul"):  # call's fast path
        grad(w, x)
    with pytest.raises(ppto.ShapeError, match="out of bounds"):
        ppto.grad(embedding_loss)(np.ones((4, 3)), np.array([1, 9]), 0.5)
    # a ValueError the function raises itself stays the user's
    with pytest.raises(ValueError, match="^an empty batch$"):
        ppto.grad(raises_its_own_error)(np.ones((3, 2)), np.ones((0, 3)))


def sorted_along_the_third_axis(x):
    return np.sum(np.sort(x, 2) * np.cumprod(x, 2))


def test_an_axis_out_of_range_in_generated_code_is_a_ppto_error():
    # NumPy's AxisError (a subclass of ValueError) came out of the generated code
    # as it was, naming neither the function nor the arguments
    f, x = sorted_along_the_third_axis, np.ones((2, 3))
    for run, what in (
        (lambda: ppto.grad(f)(x), "gradient"),
        (lambda: ppto.vjp(f, x), "vjp"),
        (lambda: ppto.jvp(f, (x,), (x,)), "jvp"),
    ):
        with pytest.raises(ppto.ShapeError, match=f"'s {what} .*out of bounds"):
            run()
    assert ppto.grad(f)(np.ones((1, 2, 2))).shape == (1, 2, 2)  # (where there is one)


def last_axis_gathers(table, rows, picks):
    taken = np.take(table, rows, axis=-1)
    return np.sum(taken**2) + np.sum(np.take_along_axis(table, picks, axis=-1) ** 3)


def test_rules_given_a_negative_axis_compile_without_warnings():
    # take's rule tests `axis is None`: inlined with axis=-1 it read `-1 is None`,
    # a SyntaxWarning when compiled, so an error where warnings are errors
    from tests.corpus.checks import central_differences

    table = np.random.default_rng(3).standard_normal((3, 4))
    rows, picks = np.array([3, 0, 3]), np.array([[1], [2], [2]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dtable = ppto.grad(last_axis_gathers)(table, rows, picks)
        _, pullback = ppto.vjp(last_axis_gathers, table, rows, picks)
        (dsplit, _, _) = pullback(1.0)
    expected = central_differences(last_axis_gathers, [table, rows, picks], 0)
    np.testing.assert_allclose(np.asarray(dtable), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(dsplit), expected, rtol=1e-6, atol=1e-8)


def einsum_diagonal(a, b):
    return np.sum(np.einsum("ii,i->i", a, b))


def einsum_of_the_diagonal(a, b):
    return np.sum(np.einsum("i,i->i", np.diagonal(a), b))


def test_einsum_takes_a_repeated_index_as_a_diagonal_and_runs_on_tensors():
    # np.einsum('ii,i->i', a, b) was refused ("repeats an index within one
    # operand"): it is the einsum of a's diagonal (np.einsum('ii->i', a)) and b,
    # in generated code and on tensors; ppto.einsum itself still refuses it
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([2.0, -3.0])
    for function in (einsum_diagonal, einsum_of_the_diagonal):
        gradient = ppto.grad(function)(a, b)
        np.testing.assert_allclose(np.asarray(gradient), np.diag(b))
    on_tensors = np.einsum("ii,i->i", ppto.tensor(a), ppto.tensor(b))
    np.testing.assert_allclose(np.asarray(on_tensors), np.einsum("ii,i->i", a, b))
    with pytest.raises(ppto.ShapeError, match="first with np.diagonal"):
        ppto.einsum(a, b, subscripts="ii,i->i")
    a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    result = np.einsum("ij,j->i", ppto.tensor(a), b)  # (NumPy's order, on a Tensor)
    assert isinstance(result, ppto.Tensor)
    np.testing.assert_allclose(result.numpy(), a @ b)


def test_vjp_and_jvp_name_shape_errors_in_generated_code_too():
    # (named the function's gradient, rows_times_weights_grad, for vjp and jvp too)
    w, x = np.ones((3, 2)), np.ones((2, 2, 2))
    with pytest.raises(ppto.ShapeError, match="rows_times_weights's vjp .*matmul"):
        ppto.vjp(rows_times_weights, w, x)
    with pytest.raises(ppto.ShapeError, match="rows_times_weights's jvp .*matmul"):
        ppto.jvp(rows_times_weights, (w, x), (w, x))
    with pytest.raises(ValueError, match="^an empty batch$") as caught:
        ppto.vjp(raises_its_own_error, np.ones((3, 2)), np.ones((0, 3)))
    assert caught.value.__cause__ is None  # (the user's error, untouched)


def padded_with_means(x):
    y = np.sin(x)
    return np.sum(np.pad(y, 1, mode="mean") ** 2)


def padded_with_differentiated_values(v):
    x = np.reshape(v[:6], (2, 3))
    one_value = np.pad(x, ((1, 0), (2, 1)), constant_values=v[6])
    per_side = np.pad(x, 1, constant_values=np.reshape(v[7:11], (2, 2)))
    scalar = ppto.pad(v[11], 2, constant_values=v[0])  # (a 0-d x: left as it is)
    return np.sum(one_value**3) + np.sum(np.sin(per_side)) + scalar**2


def test_a_differentiated_pad_value_gets_dy_summed_over_where_it_fills():
    # constant_values was a parameter: differentiated, it was refused ("does not
    # differentiate the 'constant_values' argument"), and np.pad of a 0-d array
    # (which NumPy returns as it is) was a ShapeError
    v = np.linspace(0.5, 2.0, 12)
    assert_derivatives_match(padded_with_differentiated_values, v)
    values = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(
        np.pad(ppto.tensor(x), 1, constant_values=values).numpy(),
        np.pad(x, 1, constant_values=values),
    )
    assert np.pad(ppto.tensor(3.0), 1).numpy() == np.pad(np.array(3.0), 1)


def differences_with_edges(v):
    x = np.reshape(v[:6], (2, 3))
    first = np.diff(x, prepend=0.5, append=x[:, :1])  # a number; x itself
    second = np.diff(x, 2, 0, v[6:9][None, :], v[9])  # NumPy's positions
    return np.sum(first**2) + np.sum(np.sin(second)) + np.sum(ppto.diff(v, 1, 0, v[0]))


def test_diff_takes_differentiated_prepend_and_append():
    # np.diff(x, prepend=..., append=...) was refused ("no argument 'prepend'")
    v = np.linspace(0.5, 2.0, 10) ** 2
    assert_derivatives_match(differences_with_edges, v)
    x = np.arange(6.0).reshape(2, 3) ** 2
    for call in (
        lambda d, a: d(a, prepend=0.0, append=2.0),
        lambda d, a: d(a, 2, 0, x[:1], 1.0),
        lambda d, a: d(a, axis=0, append=x),
    ):
        expected = call(np.diff, x)
        np.testing.assert_array_equal(call(np.diff, ppto.tensor(x)).numpy(), expected)
        np.testing.assert_array_equal(call(ppto.diff, x).numpy(), expected)


def stacked_numbers_vectors_and_matrices(v):
    s, vector, matrix = v[0], v[1:4], np.reshape(v[4:10], (2, 3))
    rows = np.vstack([vector, matrix, vector * s])  # (a vector is a row)
    numbers = np.vstack([s, v[1]])  # (a number is a 1x1 matrix)
    joined = np.hstack([s, vector, s**2])  # (a number is a vector)
    return np.sum(np.sin(rows)) + np.sum(numbers**2) + np.sum(joined**3)


def test_vstack_and_hstack_take_numbers_and_vectors_with_matrices():
    # np.vstack and np.hstack refused 0-d arrays, and vstack vectors with matrices
    # (NumPy makes them np.atleast_2d / np.atleast_1d first)
    assert_derivatives_match(
        stacked_numbers_vectors_and_matrices, np.linspace(0.5, 2.0, 10)
    )
    a, v, m = np.array(1.5), np.array([1.0, 2.0, 3.0]), np.arange(6.0).reshape(2, 3)
    for join, arrays in (
        (np.vstack, [a, np.array(2.0)]),
        (np.hstack, [a, np.array(2.0)]),
        (np.vstack, [v, m]),
        (np.hstack, [a, v]),
    ):
        tensors = [ppto.tensor(x) for x in arrays]
        np.testing.assert_array_equal(join(tensors).numpy(), join(arrays))


def inverse_sum(a):
    return np.sum(np.linalg.inv(a))


def test_an_operators_own_error_in_generated_code_says_where_it_was_raised():
    # a ppto error an operator raised when generated code ran (a mode it does not
    # take, a singular matrix) named neither the function nor the statement
    with pytest.raises(ppto.PptoError, match="got mode='mean'") as caught:
        ppto.grad(padded_with_means)(np.ones(3))
    message = str(caught.value)
    line = padded_with_means.__code__.co_firstlineno + 2  # the user's own line
    assert (
        f"padded_with_means's gradient failed at test_generated_code.py, line {line}"
        """ (`return np.sum(np.pad(y, 1, mode="mean") ** 2)`)""" in message
    )
    assert "'mean'" in message.split("generated statement")[-1]
    with pytest.raises(
        ppto.LinAlgError, match="inverse_sum's gradient failed .* generated statement `"
    ):
        ppto.grad(inverse_sum)(np.ones((2, 2)))
    with pytest.raises(ppto.LinAlgError, match="inverse_sum's jvp"):
        ppto.jvp(inverse_sum, (np.ones((2, 2)),), (np.ones((2, 2)),))


_HOLDER = types.SimpleNamespace(W=np.array([[1.0, 2.0], [3.0, 4.0]]), scale=0.5, axis=0)


def _through_a_global_object(x):
    rows = np.sum(np.tanh(x @ _HOLDER.W), axis=_HOLDER.axis)
    return np.sum(rows**2 * _HOLDER.scale)


def test_a_pullback_uses_the_attributes_its_forward_pass_read():
    """An attribute of a global object rebound between ``ppto.vjp``'s forward pass
    and the pullback: the backward pass re-read ``_HOLDER.W`` (and an operator's
    ``axis=_HOLDER.axis``) and got the new one."""
    from tests.test_checkpoint import central_differences

    x = np.array([[0.3, -0.2], [0.1, 0.5], [-0.4, 0.2]])
    expected = central_differences(_through_a_global_object, (x,), 0)
    out, pullback = ppto.vjp(_through_a_global_object, x)
    old = vars(_HOLDER).copy()
    try:
        _HOLDER.W, _HOLDER.scale, _HOLDER.axis = _HOLDER.W * 3.0, 2.0, 1
        (gradient,) = pullback(1.0)
    finally:
        vars(_HOLDER).update(old)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)


_PICK = types.SimpleNamespace(rows=np.array([0, 2]), start=1, stop=3)


def _indexed_through_a_global_object(x):
    return np.sum(x[_PICK.rows] ** 2) + np.sum(x[_PICK.start : _PICK.stop] ** 3)


def test_a_pullback_uses_the_indices_its_forward_pass_read():
    """``x[_PICK.rows]`` and ``x[_PICK.start : _PICK.stop]``: the backward pass
    scattered the gradient to the indices read when the pullback ran."""
    from tests.test_checkpoint import central_differences

    x = np.linspace(-0.9, 0.8, 5)
    expected = central_differences(_indexed_through_a_global_object, (x,), 0)
    out, pullback = ppto.vjp(_indexed_through_a_global_object, x)
    old = vars(_PICK).copy()
    try:
        _PICK.rows, _PICK.start, _PICK.stop = np.array([1, 4]), 2, 4
        (gradient,) = pullback(1.0)
    finally:
        vars(_PICK).update(old)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)


class _Counter:
    def __init__(self):
        self.calls = 0

    def next_scale(self):
        self.calls += 1
        return float(self.calls)


def test_a_value_drawn_inside_an_expression_is_drawn_once():
    """``x * rng.normal(size=2)``, ``x * counter.next_scale()``: the backward pass
    evaluated the expression again (another draw, another count), so the gradient
    used another factor than the value."""
    rng = np.random.default_rng(3)
    counter = _Counter()

    def noisy(x):
        return np.sum(x * rng.normal(size=2))

    def counted(x):
        return np.sum(x * np.full(2, counter.next_scale()))

    x = np.array([0.3, -0.2])
    draws = np.random.default_rng(3).normal(size=2)
    np.testing.assert_allclose(ppto.grad(noisy)(x).numpy(), draws, rtol=1e-12)
    np.testing.assert_allclose(ppto.grad(counted)(x).numpy(), [1.0, 1.0])
    assert counter.calls == 1

    def seeded(x):
        return np.sum(x * np.random.rand(2))

    np.random.seed(11)
    gradient = ppto.grad(seeded)(x)
    np.random.seed(11)
    np.testing.assert_allclose(gradient.numpy(), np.random.rand(2), rtol=1e-12)


# np.cumprod's derivatives are the products of the other elements up to each
# position: made without dividing by x, they are right with one, two or more zeros


def running_products(x):
    weights = np.arange(1.0, 1.0 + x.size)
    rows = np.cumprod(x.reshape(2, 3), axis=1)
    return np.sum(np.cumprod(x) * weights) + np.sum(rows**2)


def running_products_down_columns(x):
    table = np.outer(x, x[::-1] + 1.0)
    return np.sum(np.cumprod(table, axis=0) * table) + np.sum(x.cumprod())


@pytest.mark.parametrize("function", [running_products, running_products_down_columns])
@pytest.mark.parametrize(
    "x",
    [
        [0.7, -0.3, 0.9, 1.1, 0.5, -1.2],
        [0.7, 0.0, 0.9, 1.1, 0.5, -1.2],
        [0.0, -0.3, 0.0, 1.1, 0.5, 0.0],
        [0.7, 0.0, 0.9, 0.0, 0.0, -1.2],
        [0.7, 0.0, 0.0, 0.0, 0.5, -1.2],
    ],
)
def test_running_product_with_zeros(function, x):
    assert_derivatives_match(function, np.array(x))


# np.linalg's refusals (a singular matrix, one not positive definite) reach the
# user as ppto.LinAlgError naming the operator, from eager calls and generated code


def solved_and_factored(A, b):
    return np.sum(np.linalg.solve(A, b)) + np.sum(np.linalg.cholesky(A @ A.T))


def determinant(A):
    return np.linalg.det(A)


def log_determinant(A):
    return np.linalg.slogdet(A)[1]


def test_linear_algebra_refusals_name_the_operator_and_the_matrix():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    b = np.array([1.0, 1.0])
    refused = [
        (lambda: np.linalg.inv(ppto.tensor(singular)), "ppto.inv: Singular"),
        (lambda: np.linalg.solve(ppto.tensor(singular), b), "ppto.solve: Singular"),
        (lambda: ppto.cholesky(-np.eye(2)), "must be symmetric positive definite"),
        (lambda: ppto.grad(solved_and_factored)(singular, b), "ppto.solve"),
        (lambda: ppto.grad(log_determinant)(singular), "as for slogdet's gradient"),
        (lambda: ppto.hessian(determinant)(singular), "det's second derivative"),
    ]
    for call, message in refused:
        with pytest.raises(ppto.LinAlgError, match=message):
            call()
    with pytest.raises(ppto.ShapeError, match=r"a vector of shape \(2,\) or columns"):
        ppto.solve(np.eye(2), np.ones(3))
    assert float(determinant(singular)) == 0.0  # (only derivatives need inv)


def cofactors_by_minors(A):
    """Each entry's cofactor: the signed determinant of the matrix without its row
    and column."""
    rows, columns = np.indices(A.shape)
    minors = [
        np.linalg.det(np.delete(np.delete(A, i, 0), j, 1))
        for i, j in zip(rows.ravel(), columns.ravel())
    ]
    return (-1.0) ** (rows + columns) * np.reshape(minors, A.shape)


SINGULAR = [
    np.array([[1.0, 2.0], [2.0, 4.0]]),
    np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]]),
    np.outer([1.0, -2.0, 0.5], [0.3, 1.0, 2.0]),  # (rank 1: every cofactor is 0)
    np.zeros((1, 1)),
]


@pytest.mark.parametrize("A", SINGULAR, ids=["2x2", "rank-2", "rank-1", "1x1"])
def test_the_gradient_of_det_at_a_singular_matrix_is_its_cofactors(A):
    # it needed A's inverse, raising ppto.LinAlgError where the derivative is
    # defined (JAX gives it too)
    gradient = np.asarray(ppto.grad(determinant)(A))
    expected = _central_differences(determinant, [A], 0)
    np.testing.assert_allclose(gradient, expected, atol=1e-8)
    np.testing.assert_allclose(gradient, cofactors_by_minors(A), atol=1e-12)
    direction = np.linspace(1.0, -2.0, A.size).reshape(A.shape)
    _, pushed = ppto.jvp(determinant, (A,), (direction,))
    assert float(pushed) == pytest.approx(np.sum(expected * direction), abs=1e-8)
    stack = np.stack([A, A + np.eye(len(A))])
    gradients = np.asarray(ppto.grad(lambda S: np.sum(np.linalg.det(S)))(stack))
    np.testing.assert_allclose(gradients[0], gradient, atol=1e-12)


def test_the_cofactors_of_a_singular_stack_on_emulated_cupy(emulated_cupy):
    # the decomposition's route with CuPy's arrays (CuPy's inv gives NaN where
    # NumPy's raises: either way the values come from the decomposition)
    stack = np.stack([SINGULAR[1], SINGULAR[2]])
    got = ppto.cofactors(ppto.tensor(stack, device="cuda"))
    assert got.device == "cuda:0"
    expected = [cofactors_by_minors(A) for A in stack]
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)


def whole_part_weights(x):
    counts = np.asarray(x * 3.7, dtype=int)  # whole numbers: no derivative
    return np.sum(np.array(counts, dtype=np.float64) * x) + np.sum(np.asarray(x) ** 2)


def test_np_asarray_and_np_array_are_differentiated():
    # the input-cleaning lines NumPy code starts with were refused as having no
    # operator; a conversion to whole numbers passes no derivative
    from tests.corpus.checks import central_differences

    x = np.array([0.3, 1.1, 2.05])  # (away from 3.7 x's whole numbers)
    gradient = ppto.grad(whole_part_weights)(x)
    expected = central_differences(whole_part_weights, [x], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(gradient), np.floor(x * 3.7) + 2 * x)
    _, tangent = ppto.jvp(whole_part_weights, (x,), (np.ones(3),))
    np.testing.assert_allclose(float(tangent), np.sum(expected), rtol=1e-7)


def lagged_regression(x, w):
    # the stacked lags' rank is not known where the product's rule is inlined; w's is
    lags = np.stack([np.roll(x, k) for k in range(1, 3)], axis=1)
    return np.sum((lags @ w - x) ** 2)


def test_a_rule_branch_half_decided_by_the_ranks_reads_as_the_other_half():
    # dot's rule tests ``A.ndim == 2 and B.ndim == 1``: with only B's rank known the
    # generated code read ``if t1.ndim == 2 and True:`` / ``elif ... and False:``
    x, w = np.linspace(-1.0, 1.0, 6), np.array([0.4, -0.3])
    text = ppto.show_grad(lagged_regression, x, w, file=io.StringIO())
    assert "and True" not in text and "and False" not in text
    assert "or True" not in text and "or False" not in text
    from tests.corpus.checks import central_differences

    for position, gradient in enumerate(ppto.grad(lagged_regression, wrt=(0, 1))(x, w)):
        expected = central_differences(lagged_regression, [x, w], position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)


def recurrent_state(xs, w):
    # h's rank is not known where the product's rule is inlined (carried round
    # the loop); w's is
    h = np.zeros(w.shape[0])
    for x in xs:
        h = np.tanh(x + h @ w)
    return np.sum(h)


def test_a_rule_test_repeated_after_its_branch_returned_is_dropped():
    # with B a matrix, dot's rule read 'if h.ndim == 1: ... elif h.ndim == 1: ...',
    # the second branch never taken
    xs, w = np.linspace(-1.0, 1.0, 6).reshape(2, 3), np.eye(3) * 0.5 + 0.1
    text = ppto.show_grad(recurrent_state, xs, w, file=io.StringIO())
    tests = [line.split("if ", 1)[1] for line in text.splitlines() if "if " in line]
    assert tests and len(tests) == len(set(tests)), text
    from tests.corpus.checks import central_differences

    for position, gradient in enumerate(ppto.grad(recurrent_state, wrt=(0, 1))(xs, w)):
        expected = central_differences(recurrent_state, [xs, w], position)
        np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)


def tripled_by_default(function):
    @functools.wraps(function)
    def wrapper(x, scale=3.0):
        return function(x, scale)

    return wrapper


@tripled_by_default
def decorated_scaled_square(x, scale=1.0):
    return np.sum(x**2) * scale


def test_a_decorator_passing_its_call_on_with_defaults_of_its_own_is_kept():
    """A wrapper with a default of its own (scale=3.0 over the function's 1.0) is
    not read through: read through, the function was differentiated with its own
    default (gradient 2x where the function run gives 6x)."""
    x = np.array([1.0, 2.0])
    value, gradient = ppto.value_and_grad(decorated_scaled_square)(x)
    assert float(value) == 15.0
    np.testing.assert_allclose(gradient.numpy(), 6.0 * x)


def picked_by_their_order(x, y):
    first = np.argmax(y)
    order = np.argsort(y)
    halves = np.floor(y * 2).astype(int)
    picked = x[first] * 3.0 + np.sum(x[order] * np.arange(3.0))
    return picked + np.sum(x[halves] * y)


def test_indices_made_of_whole_numbers_from_differentiated_values_are_allowed():
    # np.argmax(y), np.argsort(y), np.floor(y).astype(int) carry no derivative, as
    # y > 0 does, so they may index x: refused as 'an index that depends on a
    # differentiated value' (so ppto.vjp, differentiating every argument, refused
    # float labels sorted to order a batch)
    from tests.corpus.checks import central_differences

    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.3, 0.1, 0.6])
    expected = [central_differences(picked_by_their_order, [x, y], p) for p in (0, 1)]
    gradients = ppto.grad(picked_by_their_order, wrt=(0, 1))(x, y)
    _, pullback = ppto.vjp(picked_by_their_order, x, y)
    for gradient, pulled, wanted in zip(gradients, pullback(1.0), expected):
        np.testing.assert_allclose(np.asarray(gradient), wanted, atol=1e-8)
        np.testing.assert_allclose(np.asarray(pulled), wanted, atol=1e-8)


def euler_step(y, w):
    return w * y + np.sin(y)


def two_stage_steps(y0, w):
    y = y0
    for _ in range(3):
        k1 = euler_step(y, w)
        k2 = euler_step(y + 0.5 * k1, w)
        y = y + 0.1 * (k1 + k2)
    return np.sum(y**2)


def test_called_helpers_are_specialised_on_their_arguments_shapes():
    """A helper's derivative is made for the shapes its call gives it, and what it
    returns has a known shape in the caller, so neither keeps run-time unbroadcasts
    or tapes of shapes (they made an RK4 gradient through a helper twice as slow as
    the same code inline). Gradients and tangents against central differences."""
    from tests.corpus.checks import central_differences

    y0, w = np.linspace(0.1, 1.0, 5), np.array([0.3])
    source = ppto.show_grad(two_stage_steps, y0, w, wrt=(0, 1), file=io.StringIO())
    assert "unbroadcast(" not in source and "_shape_tape" not in source
    dy, dw = ppto.grad(two_stage_steps, wrt=(0, 1))(y0, w)
    for got, position in ((dy, 0), (dw, 1)):
        expected = central_differences(two_stage_steps, [y0, w], position)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    direction = np.linspace(1.0, -1.0, 5)
    _, tangent = ppto.jvp(lambda y: two_stage_steps(y, w), (y0,), (direction,))
    expected = central_differences(two_stage_steps, [y0, w], 0) @ direction
    assert float(tangent) == pytest.approx(expected, rel=1e-6)
    # other shapes (w broadcast the other way) get code of their own
    y1, w1 = np.linspace(0.1, 1.0, 4).reshape(4, 1), np.linspace(0.2, 0.5, 3)
    dy, dw = ppto.grad(two_stage_steps, wrt=(0, 1))(y1, w1)
    for got, position in ((dy, 0), (dw, 1)):
        expected = central_differences(two_stage_steps, [y1, w1], position)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)


def grown(y, w):
    return np.concatenate([y, w * y[-1:]])


def growing_through_a_helper(y0, w):
    y = y0
    for _ in range(3):
        y = grown(y, w) * w
    return np.sum(np.sin(y))


def test_a_helper_result_whose_shape_changes_round_a_loop_is_not_taken_as_known():
    """The helper returns a longer array on every turn: the shape its first call
    returns holds on no later turn, so the loop's reverse must still unbroadcast by
    the shapes it saved. Against central differences."""
    from tests.corpus.checks import central_differences

    y0, w = np.linspace(0.1, 1.0, 3), np.array([0.7])
    dy, dw = ppto.grad(growing_through_a_helper, wrt=(0, 1))(y0, w)
    for got, position in ((dy, 0), (dw, 1)):
        expected = central_differences(growing_through_a_helper, [y0, w], position)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)


def tanh_layer(x, W):
    return np.tanh(x @ W)


def layer_on_rows_or_columns(x, W):
    if x.shape[0] == W.shape[0]:
        y = tanh_layer(x.T, W)
    else:
        y = tanh_layer(x, W)
    return np.sum(y * y)


def test_a_helper_call_whose_shapes_do_not_fit_on_a_path_not_taken_is_no_error():
    """The branch not taken calls the helper with shapes its matrix product does not
    fit: its derivative, specialised on them, raised ShapeError when the gradient
    was made (code made without them is, as before). Gradients against central
    differences, tangent too."""
    from tests.corpus.checks import central_differences

    x, W = (
        np.linspace(0.1, 0.6, 6).reshape(3, 2),
        np.linspace(-0.4, 0.4, 8).reshape(2, 4),
    )
    gradients = ppto.grad(layer_on_rows_or_columns, wrt=(0, 1))(x, W)
    for got, position in zip(gradients, (0, 1)):
        expected = central_differences(layer_on_rows_or_columns, [x, W], position)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    direction = np.ones_like(W)
    _, tangent = ppto.jvp(lambda W: layer_on_rows_or_columns(x, W), (W,), (direction,))
    expected = central_differences(layer_on_rows_or_columns, [x, W], 1)
    assert float(tangent) == pytest.approx(np.sum(expected * direction), rel=1e-6)


def _check_gradients(function, args, atol=1e-6):
    """Every argument's gradient against central differences, and the code that
    runs with fusion (the default precision) against the code without (strict)."""
    wrt = tuple(range(len(args)))
    gradients = ppto.grad(function, wrt=wrt)(*args)
    for position, gradient in enumerate(gradients):
        expected = _central_differences(function, args, position)
        np.testing.assert_allclose(np.asarray(gradient), expected, atol=atol)
    previous = ppto.set_precision("strict")  # strict: no fusion
    try:
        unfused = ppto.grad(function, wrt=wrt)(*args)
    finally:
        ppto.set_precision(previous)
    for a, b in zip(gradients, unfused):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)


def causal_attention(q, k, v):
    scores = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    n = scores.shape[-1]
    scores = scores - 1e9 * np.triu(np.ones((n, n)), 1)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return np.sum(np.einsum("bqk,bkd->bqd", weights, v) ** 2)


def batched_products(a, b):
    return np.sum(np.einsum("...ij,...jk->...ik", a, b) ** 2)


def sum_of_one_operand(a, b):  # (i and j: indices only a has)
    return np.sum(np.einsum("ij,k->k", a, b) ** 2)


def tensordot_and_inner(a, b, c):
    return np.sum(np.tensordot(a, b, axes=1) ** 2) + np.sum(np.inner(a, c) ** 2)


def test_einsum_gradients_name_their_subscripts_in_the_generated_code():
    # the subscripts of each gradient (and whether an index is summed alone) are
    # known when the code is generated: no helper computes them on every run
    helpers = ("operand_subscripts", "summed_alone", "alone_axes")
    helpers += ("tensordot_subscripts", "inner_axes")
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    text = ppto.show_grad(causal_attention, wrt=(0, 1, 2), file=io.StringIO())
    assert "subscripts='bqd,bkd->bqk'" in text  # (dp, of p and v)
    assert "subscripts='bqk,bkd->bqd'" in text  # (dq, of dscores and k)
    assert not any(helper in text for helper in helpers), text
    _check_gradients(causal_attention, [q, k, v])
    # "..." stands for as many axes as the operands' ranks say
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    text = ppto.show_grad(batched_products, a, b, wrt=(0, 1), file=io.StringIO())
    assert "subscripts='aik,jk->aij'" in text
    assert not any(helper in text for helper in helpers), text
    _check_gradients(batched_products, [a, b])
    a, b, c = (rng.standard_normal(shape) for shape in ((3, 4), (4, 5), (2, 4)))
    args = (a, b, c)
    text = ppto.show_grad(tensordot_and_inner, *args, wrt=(0, 1, 2), file=io.StringIO())
    assert "subscripts='ad,bd->ab'" in text  # (da of the tensordot)
    assert not any(helper in text for helper in helpers), text
    _check_gradients(tensordot_and_inner, list(args))
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(4)
    text = ppto.show_grad(sum_of_one_operand, wrt=(0, 1), file=io.StringIO())
    assert "expand_dims(da, (0, 1))" in text
    assert not any(helper in text for helper in helpers), text
    _check_gradients(sum_of_one_operand, [a, b])


def weighted_sorted(x):
    return np.sum(np.sort(np.sin(x), axis=0) ** 3 * np.arange(x.shape[0])[:, None])


def weighted_sorted_flat(x):
    return np.sum(np.sort(x, axis=None, kind="stable") * np.arange(x.size))


def test_sort_gradients_reuse_the_forward_permutation():
    # the gradient scatters along the permutation the forward pass sorted with:
    # one argsort in the whole code, none in the backward pass
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3))
    for function in (weighted_sorted, weighted_sorted_flat):
        text = ppto.show_grad(function, x, file=io.StringIO())
        assert text.count("argsort(") == 1, text
        backward = text.split("# grad of:")[1]
        assert "argsort(" not in backward and "order" in backward, text
        _check_gradients(function, [x])
        tangent = ppto.jvp(function, (x,), (np.ones_like(x),))[1]
        expected = np.sum(_central_differences(function, [x], 0))
        np.testing.assert_allclose(float(np.asarray(tangent)), expected, atol=1e-6)


def reversed_weights(x):
    return np.sum(np.sin(x[::-1]) * np.arange(x.shape[0]))


def reversed_columns(x):
    return np.sum(np.sin(x[:, ::-1]) * x) + np.sum(x[..., ::-1] ** 3)


def test_a_reversal_reverses_its_gradient_back():
    # x[::-1] holds every element once: its adjoint is dY[::-1], not a scatter of
    # dY into zeros; a slice that leaves elements out still scatters
    rng = np.random.default_rng(6)
    x = rng.standard_normal(5)
    text = ppto.show_grad(reversed_weights, file=io.StringIO())
    assert "dx = dt1[::-1]" in text and "index_add" not in text, text
    _check_gradients(reversed_weights, [x])
    hessian = ppto.hessian(reversed_weights)(x)
    np.testing.assert_allclose(
        np.asarray(hessian), np.diag(-np.sin(x) * np.arange(5.0)[::-1]), atol=1e-12
    )
    x = rng.standard_normal((3, 4))
    text = ppto.show_grad(reversed_columns, file=io.StringIO())
    assert "[:, ::-1]" in text.split("# grad of")[1] and "index_add" not in text
    _check_gradients(reversed_columns, [x])
    text = ppto.show_grad(tail_reversed, file=io.StringIO())
    assert "index_add(zeros_like(x), dt1, slice(2, None, -1))" in text, text
    _check_gradients(tail_reversed, [rng.standard_normal(5)])


def tail_reversed(x):
    return np.sum(x[2::-1] ** 2)


def rolled_back(x):
    return np.sum(np.roll(x, 2) * x) + np.sum(np.roll(x, (1, -1), axis=(0, 1)) ** 3)


def rolled_by(x, shift):
    return np.sum(np.roll(x, shift) * x)


def test_a_roll_is_undone_by_the_shift_written_out():
    # the shift that undoes a roll written as a number is worked out when the code
    # is generated; a shift the function receives is negated where the code runs
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4))
    text = ppto.show_grad(rolled_back, file=io.StringIO())
    assert "roll(dt1, -2)" in text, text
    assert "(-1, 1)" in text and "negated" not in text, text
    _check_gradients(rolled_back, [x])
    text = ppto.show_grad(rolled_by, x, 3, file=io.StringIO())
    assert "negated(shift)" in text, text
    gradient = ppto.grad(rolled_by)(x, 3)
    expected = _central_differences(lambda v: rolled_by(v, 3), [x], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, atol=1e-6)


def gaussian_process_likelihood(K, y):
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(K, y)
    sign, logdet = np.linalg.slogdet(K)
    return 0.5 * y @ alpha + 0.5 * logdet + np.sum(np.log(np.diag(L)))


def test_matrix_operators_ranks_decide_their_rules_branches():
    # cholesky, solve and diag have ranks that follow from their inputs': the
    # rules' tests of ndim are decided when the code is generated, and the
    # log-determinant of one matrix scales inv(K).T as the number it is
    rng = np.random.default_rng(10)
    A = rng.standard_normal((4, 4))
    K, y = A @ A.T + 4 * np.eye(4), rng.standard_normal(4)
    text = ppto.show_grad(gaussian_process_likelihood, K, y, file=io.StringIO())
    backward = text.split("# grad of")[1]
    assert "if " not in backward, text
    assert "dK = dt1[1] * inv(K).T" in text and "expand_dims(expand_dims" not in text
    np.testing.assert_allclose(
        np.asarray(ppto.grad(gaussian_process_likelihood)(K, y)),
        _central_differences(gaussian_process_likelihood, [K, y], 0),
        atol=1e-6,
    )
    _check_gradients(gaussian_process_likelihood, [K, y])


def running_totals(x):
    return np.sum(np.cumsum(x) ** 2) + np.sum(np.roll(x, 2) * x)


def test_running_sums_of_a_vector_reverse_without_a_reshape():
    # a vector's running sums need no reshape back to its shape (a matrix's, of
    # its flattened elements, do)
    rng = np.random.default_rng(12)
    x = rng.standard_normal(6)
    text = ppto.show_grad(running_totals, x, file=io.StringIO())
    assert "flip(cumsum(flip(dt" in text and "reshape" not in text, text
    _check_gradients(running_totals, [x])
    x = rng.standard_normal((2, 3))
    text = ppto.show_grad(running_totals, x, file=io.StringIO())
    assert "reshape(flip(cumsum(flip(dt" in text, text
    _check_gradients(running_totals, [x])


def rows_taken_twice(x):
    return np.sum(np.take(np.sin(x), (0, 2, 2), axis=0) * np.arange(3.0)[:, None])


def test_taken_rows_scatter_back_at_the_indices_themselves():
    # along axis 0 the subscript is (indices,): no helper builds it where the code
    # runs; a repeated row accumulates both gradients
    x = np.random.default_rng(14).standard_normal((3, 2))
    text = ppto.show_grad(rows_taken_twice, file=io.StringIO())
    assert "dt3, (t2,))" in text and "axis_index" not in text, text
    _check_gradients(rows_taken_twice, [x])


LOOP_WITH_A_TEMPORARY_NEW_VALUE = """
def turns(y, x):
    for _ in range(4):
        if y > 1.0:
            y_new = y * y
            dy = 2.0 * y
        else:
            y_new = y + x * y
            dy = 1.0 + x
        y = y_new
    return y, dy
"""


def test_a_copy_is_not_folded_into_branches_that_read_its_target_after():
    """``y = y_new`` after an if whose branches read ``y`` after storing the
    temporary ``y_new`` (a loop's turn reading the value it started from) keeps the
    copy: renaming the stores to ``y`` made the reads after them see the new value.
    (The jvp of an if/elif chain in a loop depended on the loop's SSA names counting
    as the user's, which they did only because preparing rewrote the parsed tree in
    place.)"""
    import gast

    from ppto.transform.optimize import coalesce_copies

    def run(body):
        module = gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))
        namespace = {}
        exec(compile(module, "<coalesced>", "exec"), namespace)
        return namespace["turns"](0.9, 0.5)

    written = gast.parse(LOOP_WITH_A_TEMPORARY_NEW_VALUE).body
    expected = run(written)
    function = gast.parse(LOOP_WITH_A_TEMPORARY_NEW_VALUE).body[0]
    function.body = coalesce_copies(function.body, {"y_new"})
    assert run([function]) == expected
    # a copy after a plain assignment still goes (it reads y before storing)
    plain = gast.parse("def f(y):\n    t = y * y\n    y = t\n    return y").body[0]
    plain.body = coalesce_copies(plain.body, {"t"})
    assert len(plain.body) == 2


LOOP_STORING_A_COPY_FROM_BOTH_BRANCHES = """
def turns(x, n, c):
    t = x * 1.0
    for _ in range(n):
        if c:
            u = x + 1.0
        else:
            u = x - 1.0
        t = u
    y = t
    return y
"""


def test_a_copy_after_a_loop_that_may_run_no_turn_keeps_the_value_before_it():
    """Coalescing ``t = u`` in the loop moves the if's two stores of ``u`` to ``t``;
    ``y = t`` after the loop must then count three stores of ``t``, not the two it
    had at the start, or it renames the loop's stores to ``y`` and a loop running
    no turn leaves ``y`` unbound (grad(grad(f)) of a zero-turn loop did)."""
    import gast

    from ppto.transform.optimize import coalesce_copies

    def run(function, n):
        module = gast.gast_to_ast(gast.Module(body=[function], type_ignores=[]))
        namespace = {}
        exec(compile(module, "<coalesced>", "exec"), namespace)
        return namespace["turns"](2.0, n, True)

    function = gast.parse(LOOP_STORING_A_COPY_FROM_BOTH_BRANCHES).body[0]
    function.body = coalesce_copies(function.body, {"t", "u"})
    assert run(function, 0) == 2.0 and run(function, 2) == 3.0
    assert "u" not in {
        node.id for node in gast.walk(function) if isinstance(node, gast.Name)
    }, "the copy in the loop is still coalesced"


def test_inlining_a_rule_leaves_its_parsed_template_unchanged():
    """Rules are inlined by writing a substituted copy of their parsed template
    (cached, shared by every transformation): the template must stay as parsed, so
    that the next function using the operator gets the rule's own code."""
    import ast

    import gast

    from ppto.ops.primitive import require_rule
    from ppto.transform.inline import _parsed_rule

    operators = (ppto.tanh, ppto.sum, ppto.matmul, ppto.exp, ppto.log)

    def templates():
        dumps = []
        for op in operators:
            for part in _parsed_rule(require_rule(op, "backward").source):
                parts = part if isinstance(part, list) else [part]
                dumps += [ast.dump(gast.gast_to_ast(node)) for node in parts]
        return dumps

    def first(W, x):
        return ppto.sum(ppto.tanh(ppto.matmul(W, x)) * ppto.exp(x))

    def second(W, x):
        return ppto.sum(ppto.log(ppto.exp(ppto.matmul(W, x))) * ppto.tanh(x), axis=0)

    rng = np.random.default_rng(3)
    W, x = rng.standard_normal((3, 3)), rng.standard_normal(3)
    before = templates()
    for function in (first, second, first):
        gradient = ppto.grad(function)(W, x)
        expected = _central_differences(function, [W, x], 0)
        np.testing.assert_allclose(np.asarray(gradient), expected, atol=1e-8)
        assert templates() == before


@pytest.mark.parametrize(
    "expression",
    [
        "x[np.arange(3), labels]",
        "x[np.arange(x.shape[0]), :, labels]",
        "x[labels]",
        "x[:, pairs]",
        "x[pairs, labels]",
        "x[pairs, :, labels]",
        "x[None, labels, 1:3]",
        "x[labels, labels, labels]",
        "x[np.arange(2), labels]",  # (shapes that do not broadcast: unknown)
        "x[mask]",  # (as many elements as True values: unknown)
        "x[np.arange(count), labels]",  # (a length not known)
    ],
)
def test_a_gather_by_integer_arrays_of_known_shapes_has_numpys_shape(expression):
    """The shape the analysis gives ``x[index]`` with integer arrays in the index is
    the one NumPy's indexing gives (None where it cannot be known before running)."""
    import gast

    from ppto.transform.analyze import expression_shape

    x = np.zeros((3, 4, 5))
    values = {"x": x, "labels": np.array([0, 2, 1]), "pairs": np.zeros((2, 1), int)}
    values.update(mask=np.array([True, False, True]), count=2, np=np)
    shapes = {k: np.shape(v) for k, v in values.items() if k not in ("np", "count")}
    dtypes = {k: v.dtype for k, v in values.items() if isinstance(v, np.ndarray)}
    node = gast.parse(expression).body[0].value
    known = expression_shape(node, shapes, dtypes)
    try:
        expected = eval(expression, values).shape
    except IndexError:
        expected = None
    if "mask" in expression or "count" in expression:
        expected = None
    assert known == expected


def cross_entropy_of_gathered(z, labels):
    picked = z[np.arange(z.shape[0]), labels] - np.log(np.sum(np.exp(z), axis=1))
    return -np.mean(picked)


def test_a_mean_of_a_gather_divides_by_its_count_written_out():
    """With the gather's shape known, the mean's gradient reads ``/ 6`` (no run-time
    count) and the subtraction's gradient needs no run-time unbroadcast; the
    gradient against central differences in float64."""
    rng = np.random.default_rng(4)
    z, labels = rng.standard_normal((6, 4)), np.array([0, 3, 3, 1, 2, 0])
    source = ppto.show_grad(cross_entropy_of_gathered, z, labels, file=io.StringIO())
    assert "/ 6, picked)" in source and "reduced_count" not in source
    assert "unbroadcast" not in source  # (the gather's shape is the sum's: (6,))
    expected = _central_differences(cross_entropy_of_gathered, [z, labels], 0)
    got = ppto.grad(cross_entropy_of_gathered)(z, labels)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-7, atol=1e-9)


CHAINS_OF_UNUSED_VALUES = """
def f(x, c):
    a = x * 2.0
    b = a + 1.0
    d = b * b
    kept = x - 1.0
    stack = [x, a]
    popped = stack.pop()
    if c:
        e = d + x
    for _ in range(2):
        g = kept * x
    return x
"""


def test_unused_values_go_round_after_round_and_a_pop_stays():
    """``remove_unused`` drops what nothing reads, then what only the dropped
    statements read (``d``, then ``b``), an ``if`` left empty, and a loop's body
    but for ``pass``; a name it must keep stays with what it reads; an unused
    pop's value still runs (the list shrinks), so the list and what it holds
    stay. The reads are counted once and a dropped statement's taken off: each
    round must see the last one's drops, as a fresh count would."""
    import gast

    from ppto.transform.emit import render_function
    from ppto.transform.optimize import remove_unused

    function = gast.parse(CHAINS_OF_UNUSED_VALUES).body[0]
    removable = {"a", "b", "d", "e", "g", "kept", "stack", "popped"}
    function.body = remove_unused(function.body, {"kept"}, removable)
    lines = [line.strip() for line in render_function(function).splitlines()]
    assert lines == [
        "def f(x, c):",
        "a = x * 2.0",
        "kept = x - 1.0",
        "stack = [x, a]",
        "stack.pop()",
        "for _ in range(2):",
        "pass",
        "return x",
    ]


KNOTS = np.array([0.0, 0.7, 1.5, 3.0])  # interpolation's x-coordinates, a global
xp = KNOTS  # the name NumPy's own docs give interp's x-coordinates
fp = np.array([0.0, 2.0, -1.0, 0.5])


def interpolated_squares(q):
    return np.sum(np.interp(q, xp, fp) ** 2)


def scaled_by_an_argument_named_xp(x, xp):
    return np.sum(np.tanh(x) * xp + np.zeros(x.shape))


def local_named_xp(x):
    xp = np.exp(x)
    return np.sum(xp * np.ones_like(x) + np.sqrt(xp))


@pytest.mark.parametrize(
    "function, arguments",
    [
        (interpolated_squares, (np.array([0.3, 1.1, 2.2]),)),
        (scaled_by_an_argument_named_xp, (np.array([0.3, -1.1, 2.2]), 1.7)),
        (local_named_xp, (np.array([0.3, -1.1, 2.2]),)),
    ],
)
def test_a_user_name_xp_is_not_the_generated_codes_array_namespace(function, arguments):
    """Lowered code reads the backend's array module as ``xp``; a user's argument,
    local or global of that name (interp's x-coordinates, by NumPy's own naming)
    once shadowed it (``'float' object has no attribute 'tanh'``) or was replaced by
    it (interp given the module as its x-coordinates). The module takes another
    name there."""
    gradient = ppto.grad(function)(*arguments)
    expected = _central_differences(function, list(arguments), 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)
    assert "xp_1" in ppto.show_grad(
        function, *arguments, lowered=True, file=io.StringIO()
    )


def _sine_times(x, w):
    return np.sin(x) * w


def _exponential(x):
    return np.exp(x)


@pytest.mark.parametrize("size", [4, 300_000])  # (small, and fused in chunks)
def test_a_pullback_keeps_what_it_reads_of_arguments_the_caller_changes(size):
    """The caller's arrays (or tensors) changed in place between ``ppto.vjp`` and
    the pullback (``W -= lr * dW``), or the result handed back written into: the
    backward pass read the changed values, a silently wrong gradient."""
    x, w = np.linspace(0.1, 1.0, size), np.linspace(-1.0, 1.0, size)
    expected = (np.cos(x) * w, np.sin(x))
    for wrap in (np.array, ppto.tensor):
        xs, ws = wrap(x.copy()), wrap(w.copy())
        _, pullback = ppto.vjp(_sine_times, xs, ws)
        xs *= 0.0
        ws += 5.0
        for gradient, wanted in zip(pullback(np.ones(size)), expected):
            np.testing.assert_allclose(np.asarray(gradient), wanted, rtol=1e-12)
    out, pullback = ppto.vjp(_exponential, x)
    np.asarray(out)[...] = 0.0
    (gradient,) = pullback(np.ones(size))
    np.testing.assert_allclose(np.asarray(gradient), np.exp(x), rtol=1e-12)


_SCALES = np.array([1.0, 2.0, 3.0])
_SCALE_LIST = [np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 2.0])]
_SCALE_DICT = {"w": np.array([1.0, 2.0, 3.0])}
_SCALE_HOLDER = types.SimpleNamespace(W=np.array([[1.0, 2.0, 3.0], [0.5, 1.0, 2.0]]))
_SCALE_TENSOR = ppto.tensor([1.0, 2.0, 3.0])


def _scaled_by_a_global(x):
    return np.sum(np.sin(x * _SCALES) * _SCALES)


def _scaled_by_a_global_list(x):
    return np.sum(np.sin(x * _SCALE_LIST[0]) * _SCALE_LIST[1])


def _scaled_by_a_global_dict(x):
    return np.sum(np.sin(x * _SCALE_DICT["w"]) * _SCALE_DICT["w"])


def _through_a_view_of_a_global(x):
    return np.sum(np.tanh(_SCALE_HOLDER.W.T @ x[:2]) * _SCALE_HOLDER.W[0])


def _scaled_by_a_global_tensor(x):
    return np.sum(np.sin(x * _SCALE_TENSOR) * _SCALE_TENSOR)


def _looped_over_a_global(x):
    for _ in range(3):
        x = np.tanh(0.3 * x * _SCALES) + 0.1 * _SCALES
    return np.sum(x**2)


def _scaled_by_a_closure():
    scales = np.array([1.0, 2.0, 3.0])

    def function(x):
        return np.sum(np.sin(x * scales) * scales)

    return function, scales


@pytest.mark.parametrize(
    "function, written",
    [
        (_scaled_by_a_global, lambda: _SCALES),
        (_scaled_by_a_global_list, lambda: _SCALE_LIST[0]),
        (_scaled_by_a_global_list, lambda: _SCALE_LIST[1]),
        (_scaled_by_a_global_dict, lambda: _SCALE_DICT["w"]),
        (_through_a_view_of_a_global, lambda: _SCALE_HOLDER.W),
        (_scaled_by_a_global_tensor, lambda: _SCALE_TENSOR),
        (_looped_over_a_global, lambda: _SCALES),
        _scaled_by_a_closure(),
    ],
)
def test_a_pullback_keeps_what_it_reads_of_arrays_the_caller_writes_into(
    function, written
):
    """A module-level array (or one in a module-level list or dict, an object's
    attribute, a view of one, a closure's) written into in place between
    ``ppto.vjp`` and the pullback: the backward pass read it as it was then, not
    as the forward pass did (4x the gradient for ``W *= 2``)."""
    array = written() if callable(written) else written
    x = np.array([0.1, 0.2, 0.3])
    expected = _central_differences(function, [x], 0)
    _, pullback = ppto.vjp(function, x)
    before = array.copy() if isinstance(array, np.ndarray) else array.numpy()
    array *= 2.0
    try:
        (gradient,) = pullback(1.0)
    finally:
        array[...] = before
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-7)


def constants_made_by_position(x):
    weights = ppto.tensor([1.0, 2.0, 3.0], "cpu", np.float32)
    shifted = ppto.eye(3, 3, 1, np.float64) + ppto.zeros((3,), np.float64, "cpu")
    counts = ppto.arange(0, 3, 1, float, "cpu") + ppto.full((3,), 2.0, None, "cpu")
    return ppto.reduce_sum(x * weights + x * shifted + x * counts)


def test_constructors_given_device_and_dtype_by_position_in_differentiated_code():
    # the lowered code called NumPy's function of the constructor's name with the
    # same arguments, which NumPy reads otherwise: ppto.tensor(data, "cpu") as
    # asarray(data, dtype="cpu"), zeros(shape, dtype, "cpu") with order="cpu", a
    # raw TypeError or ValueError out of the generated code
    x = np.linspace(0.5, 1.5, 9).reshape(3, 3)
    expected = np.array([1.0, 2.0, 3.0]) + np.eye(3, 3, 1) + np.arange(3) + 2.0
    gradient = ppto.grad(constants_made_by_position)(x)
    np.testing.assert_allclose(np.asarray(gradient), np.broadcast_to(expected, x.shape))
    np.testing.assert_allclose(
        np.asarray(constants_made_by_position(ppto.tensor(x))), np.sum(x * expected)
    )
