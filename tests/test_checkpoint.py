"""Checkpointing and the lean tape: gradients unchanged (against central
differences), and the bytes the backward pass keeps, counted exactly."""

import types

import numpy as np
import pytest

import ppto
from ppto.debug import saved_bytes


def step(h, xt, W):
    a = np.tanh(xt @ W + h @ W)
    return np.tanh(a @ W) * 0.5 + h * 0.5


def plain_loop(x, h, W):
    for t in range(x.shape[0]):
        a = np.tanh(x[t] @ W + h @ W)
        h = np.tanh(a @ W) * 0.5 + h * 0.5
    return np.sum(h**2)


def checkpointed_loop(x, h, W):
    for t in ppto.checkpoint(range(x.shape[0])):
        a = np.tanh(x[t] @ W + h @ W)
        h = np.tanh(a @ W) * 0.5 + h * 0.5
    return np.sum(h**2)


def calls_in_loop(x, h, W):
    for t in range(x.shape[0]):
        h = step(h, x[t], W)
    return np.sum(h**2)


def checkpointed_calls(x, h, W):
    for t in range(x.shape[0]):
        h = ppto.checkpoint(step)(h, x[t], W)
    return np.sum(h**2)


STEP = ppto.checkpoint(step)


def checkpointed_by_name(x, h, W):
    for t in range(x.shape[0]):
        h = STEP(h, x[t], W)
    return np.sum(h**2)


def vanilla_rnn(x, h, Wx, Wh, b):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def arguments(steps=4, batch=2, size=3, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((steps, batch, size)),
        rng.standard_normal((batch, size)) * 0.3,
        rng.standard_normal((size, size)) * 0.4,
    )


def central_differences(function, args, position, eps=1e-6):
    gradient = np.zeros_like(args[position])
    for index in np.ndindex(gradient.shape):
        up, down = list(args), list(args)
        up[position] = args[position].copy()
        down[position] = args[position].copy()
        up[position][index] += eps
        down[position][index] -= eps
        gradient[index] = (function(*up) - function(*down)) / (2 * eps)
    return gradient


@pytest.mark.parametrize(
    "function",
    [
        plain_loop,
        checkpointed_loop,
        calls_in_loop,
        checkpointed_calls,
        checkpointed_by_name,
    ],
)
@pytest.mark.parametrize("position", [1, 2])
def test_gradients_match_central_differences(function, position):
    args = arguments()
    gradient = np.asarray(ppto.grad(function, wrt=position)(*args))
    expected = central_differences(function, args, position)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)


def test_checkpointing_saves_only_the_carried_state():
    args = arguments(steps=20, batch=8, size=16)
    state = args[1].nbytes
    plain = saved_bytes(plain_loop, *args, wrt=("W",))
    checkpointed = saved_bytes(checkpointed_loop, *args, wrt=("W",))
    # plain keeps h and the inner activation per step; checkpointed keeps h only
    assert checkpointed <= 20 * state + 2 * state
    assert plain >= 2 * 20 * state
    calls = saved_bytes(calls_in_loop, *args, wrt=("W",))
    assert saved_bytes(checkpointed_calls, *args, wrt=("W",)) < calls / 1.5


def test_vanilla_rnn_tape_is_within_five_percent_of_its_hidden_states():
    rng = np.random.default_rng(0)
    args = (
        rng.standard_normal((50, 4, 8)),
        rng.standard_normal((4, 16)),
        rng.standard_normal((8, 16)),
        rng.standard_normal((16, 16)),
        rng.standard_normal(16),
    )
    minimum = 50 * args[1].nbytes
    assert (
        minimum
        <= saved_bytes(vanilla_rnn, *args, wrt=("Wx", "Wh", "b"))
        <= 1.05 * minimum
    )


@pytest.mark.parametrize("target", [5, None, 2.5])
def test_checkpoint_of_neither_a_function_nor_a_range_is_refused(target):
    # ppto.checkpoint(5) handed 5 back, and the loop over it failed later with a
    # raw TypeError far from the mistake
    with pytest.raises(ppto.PptoError, match="function or a loop's range"):
        ppto.checkpoint(target)
    assert list(ppto.checkpoint(range(2))) == [0, 1]


def test_a_checkpointed_loop_recomputes_with_the_values_its_forward_pass_read():
    """A checkpointed loop's reverse runs its body again: a random draw in it (a
    dropout mask) drew another mask, and an attribute read (``_CELL.W``) rebound
    before vjp's pullback gave other weights; both are saved instead."""
    cell = types.SimpleNamespace(W=np.array([[0.9, -0.4], [0.3, 0.7]]))
    rng = np.random.default_rng(5)

    def dropped(x):
        h = x
        for _ in ppto.checkpoint(range(3)):
            keep = rng.random(2) > 0.4
            h = np.tanh(h @ cell.W) * keep
        return np.sum(h**2)

    def fixed(x, masks):
        h = x
        for keep in masks:
            h = np.tanh(h @ cell.W) * keep
        return np.sum(h**2)

    x = np.array([0.3, -0.6])
    masks = np.random.default_rng(5).random((3, 2)) > 0.4
    expected = central_differences(lambda x: fixed(x, masks), (x,), 0)
    np.testing.assert_allclose(ppto.grad(dropped)(x).numpy(), expected, rtol=1e-7)
    masks = np.random.default_rng(5).random((6, 2))[3:] > 0.4  # (the next draws)
    expected = central_differences(lambda x: fixed(x, masks), (x,), 0)
    out, pullback = ppto.vjp(dropped, x)
    cell.W = cell.W * 3.0
    (gradient,) = pullback(1.0)
    cell.W = cell.W / 3.0
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)


def dropout_step(h, W):
    keep = np.random.random_sample(h.shape) > 0.5
    return np.tanh(h @ W) * keep * 2.0


RNG = np.random.default_rng(5)


def generator_step(h, W):
    noise = RNG.standard_normal(h.shape)
    return np.tanh(h @ W + noise)


def noisy_step(h, W, rng):
    return np.tanh(h @ W) * (rng.random(h.shape) > 0.3)


def random_steps(W, h):
    for _ in range(3):
        h = ppto.checkpoint(dropout_step)(h, W)
    h = ppto.checkpoint(generator_step)(h, W)
    return np.sum(h**2)


def seeded(function, *args):
    """``function(*args)`` from the same random state each time."""
    np.random.seed(3)
    RNG.bit_generator.state = np.random.default_rng(5).bit_generator.state
    return function(*args)


@pytest.mark.parametrize("position", [0, 1])
def test_checkpointed_steps_draw_the_same_random_numbers_again(position):
    args = arguments()[1:][::-1]  # (W, h)
    expected = central_differences(
        lambda *a: seeded(random_steps, *a), list(args), position
    )
    value, gradient = seeded(ppto.value_and_grad(random_steps, wrt=position), *args)
    assert float(np.asarray(value)) == pytest.approx(seeded(random_steps, *args))
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)


def test_a_checkpointed_step_replays_the_generator_it_is_passed():
    W, h = arguments()[2], arguments()[1]

    def loss(W, rng):
        x = h
        for _ in range(2):
            x = ppto.checkpoint(noisy_step)(x, W, rng)
        return np.sum(x**2)

    expected = central_differences(lambda W: loss(W, np.random.default_rng(7)), [W], 0)
    gradient = np.asarray(ppto.grad(loss)(W, np.random.default_rng(7)))
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)


def test_the_generators_go_on_from_the_forward_pass():
    args = arguments()[1:][::-1]
    seeded(ppto.grad(random_steps), *args)
    after_gradient = np.random.random_sample(), RNG.random()
    seeded(random_steps, *args)
    assert (np.random.random_sample(), RNG.random()) == after_gradient


def doubled(x):
    return x * 2.0


def spread(n):
    return np.linspace(0.5, 1.5, n)


def deterministic_step(x):
    return np.sum(np.tanh(doubled(x) * spread(x.shape[0])) ** 2)


def checkpointed_deterministic(x):
    return ppto.checkpoint(deterministic_step)(x) * 3.0


def masking(shape):
    return RNG.random(shape) > 0.4


def masked_step(x):
    return np.sum(np.tanh(doubled(x) * masking(x.shape)) ** 2)


def checkpointed_masked(x):
    return ppto.checkpoint(masked_step)(x) * 3.0  # the line refused below


def second_differences(function, x, eps=1e-4):
    """d2 function / dx dx, from function's values alone."""
    n = x.size
    hessian = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            total = 0.0
            for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                moved = x.copy()
                moved[i] += si * eps
                moved[j] += sj * eps
                total += si * sj * function(moved)
            hessian[i, j] = total / (4 * eps * eps)
    return hessian


def test_second_order_through_a_deterministic_checkpointed_step_calling_helpers():
    # any call in the step was taken for one that may draw random numbers: the
    # gradient replayed the generators' states, and hessian, jacrev/jvp of grad
    # and grad of grad were refused ("replayed has no ppto operator")
    x = np.array([0.3, -0.8, 1.1])
    expected = second_differences(checkpointed_deterministic, x)
    gradient = ppto.grad(checkpointed_deterministic)
    np.testing.assert_allclose(
        np.asarray(ppto.hessian(checkpointed_deterministic)(x)),
        expected,
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        np.asarray(ppto.jacrev(gradient)(x)), expected, rtol=1e-5, atol=1e-6
    )
    v = np.array([1.0, -0.5, 2.0])
    _, tangent = ppto.jvp(gradient, (x,), (v,))
    np.testing.assert_allclose(np.asarray(tangent), expected @ v, rtol=1e-5, atol=1e-6)

    def first(s):
        return checkpointed_deterministic(np.array([s, -0.8, 1.1]))

    assert float(ppto.grad(ppto.grad(first))(0.3)) == pytest.approx(
        expected[0, 0], rel=1e-5
    )


def test_a_helper_that_draws_still_replays_and_second_order_names_the_line():
    # masking's draws are not differentiated, but the step's rerun differs: its
    # gradient replays them; second order through the replay is refused at the
    # user's line (it named a line of the generated code)
    x = np.array([0.3, -0.8, 1.1])
    expected = central_differences(lambda x: seeded(checkpointed_masked, x), [x], 0)
    gradient = seeded(ppto.grad(checkpointed_masked), x)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    with pytest.raises(ppto.TransformError, match="checkpoint") as refused:
        ppto.hessian(checkpointed_masked)(x)
    assert refused.value.filename == __file__
    assert "ppto.checkpoint(masked_step)(x) * 3.0" in str(refused.value)


class Inner:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)


class Outer:
    def __init__(self, seed):
        self.inner = Inner(seed)


def listed_step(x, rngs):
    return np.sum(np.tanh(x * rngs[0].standard_normal(x.shape)))


def deep_step(x, m):
    return np.sum(np.tanh(x * m.inner.rng.standard_normal(x.shape)))


def python_random_step(x, r):
    return np.sum(np.tanh(x * r.random()))


def tupled_step(x, held):
    return np.sum(np.tanh(x * held[1].normal(size=x.shape)))


@pytest.mark.parametrize(
    "step, holder",
    [
        (listed_step, lambda: [np.random.default_rng(1)]),
        (deep_step, lambda: Outer(1)),
        (python_random_step, lambda: __import__("random").Random(1)),
        (tupled_step, lambda: (2.0, np.random.RandomState(1))),
    ],
)
def test_a_checkpointed_step_replays_generators_held_in_lists_and_objects(step, holder):
    # a generator in a list argument, two attributes deep (m.inner.rng) or a
    # random.Random was not replayed: the recomputation drew other numbers
    def loss(x):
        held = holder()
        return ppto.checkpoint(step)(x, held) + ppto.checkpoint(step)(x * 2.0, held)

    x = np.array([0.3, -0.8, 1.1])
    expected = central_differences(loss, [x], 0)
    np.testing.assert_allclose(
        np.asarray(ppto.grad(loss)(x)), expected, rtol=1e-6, atol=1e-8
    )


class _Layer:
    """A layer whose weights are attributes, checkpointed through its methods."""

    def __init__(self, W, b):
        self.W = W
        self.b = b

    def forward(self, h):
        a = np.tanh(h @ self.W + self.b)
        return np.tanh(a @ self.W) * 0.5 + h * 0.5

    def __call__(self, h):
        return self.forward(h)


class _TwoLayers:
    def __init__(self, rng):
        self.first = _Layer(rng.standard_normal((3, 3)) * 0.4, rng.normal(size=3))
        self.second = _Layer(rng.standard_normal((3, 3)) * 0.4, rng.normal(size=3))

    def __call__(self, x):
        h = ppto.checkpoint(self.first.forward)(x)
        return ppto.checkpoint(self.second)(h)


LAYER = _Layer(*arguments()[2:], np.linspace(-0.3, 0.2, 3))
TWO = _TwoLayers(np.random.default_rng(4))
LAYER_STEP = ppto.checkpoint(LAYER.forward)


def through_a_method(x, h, W):
    for t in range(x.shape[0]):
        h = ppto.checkpoint(LAYER.forward)(h + x[t])
    return np.sum(h**2)


def through_the_object(x, h, W):
    for t in range(x.shape[0]):
        h = ppto.checkpoint(LAYER)(h + x[t])
    return np.sum(h**2)


def through_self(x, h, W):
    return np.sum(TWO(x[0] + h) ** 2)


def through_a_method_wrapped_by_name(x, h, W):
    for t in range(x.shape[0]):
        h = LAYER_STEP(h + x[t])
    return np.sum(h**2)


@pytest.mark.parametrize(
    "function",
    [
        through_a_method,
        through_the_object,
        through_self,
        through_a_method_wrapped_by_name,
    ],
)
def test_a_checkpointed_method_is_differentiated(function):
    # (refused before: "cannot differentiate the attribute .W" at the method's
    # line, or "ppto.checkpoint(self.first.forward) has no ppto operator")
    args = arguments()
    value, gradient = ppto.value_and_grad(function, wrt=1)(*args)
    np.testing.assert_allclose(float(value), function(*args), rtol=1e-12)
    expected = central_differences(function, args, 1)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)


DEFAULT_RNG = np.random.default_rng(1)
MODULE_RNG = np.random.default_rng(2)


def drawing_by_default(x, rng=DEFAULT_RNG):
    return np.sum(np.tanh(x * rng.standard_normal(x.shape)))


def drawing_by_keyword_default(x, *, rng=DEFAULT_RNG):
    return np.sum(np.tanh(x * rng.standard_normal(x.shape)))


def drawing_from_its_module(x):
    return np.sum(np.tanh(x * MODULE_RNG.standard_normal(x.shape)))


# a user's module of helpers (``import noise``), whose function draws from a
# generator of its own module
noise = types.ModuleType("noise")
noise.drawing = drawing_from_its_module


def calling_a_module_function(x):
    return noise.drawing(x) * 2.0


@pytest.mark.parametrize(
    "step",
    [
        drawing_by_default,
        drawing_by_keyword_default,
        noise.drawing,
        calling_a_module_function,
    ],
)
def test_a_checkpointed_step_replays_generators_held_in_defaults_and_modules(step):
    # a generator held as a default (rng=RNG) or reached through a module of the
    # user's (noise.drawing reading that module's generator) was not replayed:
    # the recomputation drew other numbers (gradient [0.19, -0.19, -0.45] for
    # [0.42, -0.72, -0.01])
    def loss(x):
        return ppto.checkpoint(step)(x) + ppto.checkpoint(step)(x * 2.0)

    def from_the_same_states(function, *args):
        DEFAULT_RNG.bit_generator.state = np.random.default_rng(1).bit_generator.state
        MODULE_RNG.bit_generator.state = np.random.default_rng(2).bit_generator.state
        return function(*args)

    x = np.array([0.3, -0.8, 1.1])
    expected = central_differences(lambda x: from_the_same_states(loss, x), [x], 0)
    gradient = from_the_same_states(ppto.grad(loss), x)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)


def test_a_checkpointed_loop_keeps_one_copy_of_generator_states_nothing_draws_from():
    # a checkpointed method (it reads self.W, so its rerun replays the random
    # generators' states) kept NumPy's 2.5 kB global state and Python's 625
    # numbers at every step: 89.75 hidden states' bytes for 20 steps of a 1 kB
    # state, against 41 for the same step as a function of W (and 123 without
    # ppto.checkpoint)
    import random

    from ppto.checkpoint import random_states

    x, h, W = arguments(steps=20, batch=8, size=16)
    layer = _Layer(W, np.zeros(16))

    def checkpointed_method(x, h):
        for t in range(x.shape[0]):
            h = ppto.checkpoint(layer.forward)(h + x[t])
        return np.sum(h**2)

    def checkpointed_function(x, h):
        for t in range(x.shape[0]):
            h = ppto.checkpoint(step)(h + x[t], x[t], W)
        return np.sum(h**2)

    numpy_state = np.random.get_state()[1].nbytes
    assert (
        saved_bytes(checkpointed_method, x, h, wrt=("h",))
        <= saved_bytes(checkpointed_function, x, h, wrt=("h",)) + numpy_state + h.nbytes
    )
    first, again = random_states(step), random_states(step)
    assert [g for g, _ in first] == [g for g, _ in again]
    for (_, state), (_, state_again) in zip(first, again):
        assert state_again is state  # (nothing drew in between: the same copy)
    held = dict(random_states(layer.forward, h))[layer]
    assert held["W"] is W
    assert dict(random_states(layer.forward, h))[layer] is held  # (one copy)
    layer.W = W * 2.0
    assert dict(random_states(layer.forward, h))[layer]["W"] is layer.W
    random.random()
    np.random.random_sample()
    changed = dict(random_states(step))
    assert changed[random] != dict(first)[random]
    assert not np.array_equal(changed[np.random][1], dict(first)[np.random][1])


CELL = types.SimpleNamespace(W=np.array([[0.9, -0.4], [0.3, 0.7]]))


def reading_a_global_object(h):
    return np.tanh(h @ CELL.W)


def reading_its_argument(h, cell):
    return np.tanh(h @ cell.W)


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("how", ["method", "argument", "global"])
def test_a_checkpointed_step_recomputes_with_the_attributes_its_forward_read(
    how, in_place
):
    # its recomputation read self.W (cell.W, CELL.W) as rebound between vjp's
    # forward pass and the pullback: [0.385, 0.297, 0.350] for [0.215, -0.115,
    # 0.306] where the plain method's saved W gave the right one; so too where
    # the arrays were written into (``layer.W *= 3.0``), not rebound
    W = np.array([[0.9, -0.4], [0.3, 0.7]])
    layer, cell = _Layer(W.copy(), np.array([0.1, -0.2])), CELL
    cell.W = W.copy()
    steps = {
        "method": lambda h: ppto.checkpoint(layer.forward)(h),
        "argument": lambda h: ppto.checkpoint(reading_its_argument)(h, cell),
        "global": lambda h: ppto.checkpoint(reading_a_global_object)(h),
    }

    def loss(x):
        h = x
        for _ in range(3):
            h = call(h)
        return np.sum(h**2)

    call = steps[how]
    x = np.array([0.3, -0.6])
    expected = central_differences(loss, [x], 0)
    out, pullback = ppto.vjp(loss, x)
    if in_place:
        layer.W *= 3.0
        cell.W *= 3.0
    else:
        layer.W, cell.W = W * 3.0, W * 3.0
    (gradient,) = pullback(1.0)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-7)
    assert layer.W[0, 0] == cell.W[0, 0] == pytest.approx(2.7)  # (put back)


def dropped_loop(x):
    h = x
    for _ in ppto.checkpoint(range(3)):
        h = np.tanh(h @ CELL.W) * (RNG.random(2) > 0.3) + h * 0.5
    return np.sum(h**2)


def dropped_layer(x):
    return np.tanh(x @ CELL.W) * (RNG.random(2) > 0.3)


def test_a_jacobian_made_column_by_column_draws_the_first_columns_numbers():
    # hessian and jacfwd run one tangent pass per column: each drew other masks
    # (a Hessian of no draw, not symmetric), and left the generator as after n
    # calls; now each column draws what the first did, as one call would
    CELL.W = np.array([[0.9, -0.4], [0.3, 0.7]])
    x = np.array([0.3, -0.6])

    def from_the_start(function, *args):
        RNG.bit_generator.state = np.random.default_rng(5).bit_generator.state
        return function(*args)

    expected = second_differences(lambda x: from_the_start(dropped_loop, x), x)
    hessian = from_the_start(ppto.hessian(dropped_loop), x)
    after = RNG.random()
    np.testing.assert_allclose(np.asarray(hessian), expected, rtol=1e-5, atol=1e-6)
    from_the_start(dropped_loop, x)
    assert RNG.random() == after  # (the generator goes on as after one call)
    jacobian = from_the_start(ppto.jacfwd(dropped_layer), x)
    columns = [
        central_differences(lambda x: from_the_start(dropped_layer, x)[i], [x], 0)
        for i in range(2)
    ]
    np.testing.assert_allclose(np.asarray(jacobian), np.stack(columns), rtol=1e-6)


TANH = ppto.checkpoint(np.tanh)


class _Steps:
    @classmethod
    def scaled(cls, h):
        return np.tanh(h) * 2.0


SCALED = __import__("functools").partial(reading_its_argument, cell=CELL)


def checkpointed_numpy_function(x):
    return np.sum(ppto.checkpoint(np.tanh)(x) ** 2 + TANH(x * 2.0))


def checkpointed_operator(x):
    return np.sum(ppto.checkpoint(ppto.tanh)(x) * ppto.checkpoint(np.sum)(x, axis=0))


def checkpointed_classmethod(x):
    return np.sum(ppto.checkpoint(_Steps.scaled)(x))  # refused here


def checkpointed_partial(x):
    return np.sum(ppto.checkpoint(SCALED)(x))  # refused here


@pytest.mark.parametrize(
    "function", [checkpointed_numpy_function, checkpointed_operator]
)
def test_a_checkpointed_operator_is_called_as_it_is(function):
    # its Callee was taken for a user's function: raw TypeError "cannot create
    # weak reference to 'NoneType' object" from inside the transformer
    x = np.array([0.3, -0.8, 1.1])
    np.testing.assert_allclose(
        np.asarray(ppto.grad(function)(x)),
        central_differences(function, [x], 0),
        rtol=1e-6,
        atol=1e-9,
    )


@pytest.mark.parametrize("function", [checkpointed_classmethod, checkpointed_partial])
def test_checkpointing_what_is_no_function_of_the_users_is_refused_at_its_line(
    function,
):
    # a classmethod ran generated code missing its class (raw TypeError
    # "scaled_forward() missing 1 required positional argument: 'h'")
    CELL.W = np.array([[0.9, -0.4], [0.3, 0.7]])
    with pytest.raises(ppto.TransformError, match="cannot checkpoint") as refused:
        ppto.grad(function)(np.array([0.3, -0.8]))
    assert refused.value.filename == __file__
    assert "refused here" in str(refused.value)
