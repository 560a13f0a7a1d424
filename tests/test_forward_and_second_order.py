"""The transformation corpus in forward mode and to second order.

Forward mode: ``ppto.jvp`` on every corpus function (scalar results or not), once
per differentiable argument (a random tangent on it, ``None`` on the others) and once
with random tangents on all of them; the tangent must match central differences of
the plain function along the tangent direction, and the value must be ``f(*args)``.

Second order: for every scalar function, the Hessian-vector product
``ppto.jvp(ppto.grad(f, wrt=i), args, tangents)`` against central differences of
the generated gradient along the tangents (a coarser step, 1e-5, and tolerance
1e-5, since the reference differences a derivative; whether that gradient is right
is test_transform_corpus.py's business); ``grad(grad(f))`` on scalar
functions of one scalar, and ``ppto.hessian`` on small functions, against exact
derivatives or differences of the gradient. Known failures: tests/corpus/checks.py.
"""

import inspect

import numpy as np
import pytest

import ppto
from ppto.ops.primitive import Primitive
from ppto.ops.reductions import reduce_sum, unreduce
from tests.corpus.case import S
from tests.corpus.checks import (
    CASES,
    as_float,
    assert_gradient,
    central_differences,
    directional_differences,
    expect,
    plain,
)

SECOND_ORDER_EPS = 1e-5
SECOND_ORDER_RTOL = 1e-5


def random_tangent(argument, rng):
    """A tangent like ``argument``: a float for a float, a tensor for a tensor."""
    if isinstance(argument, float):
        return float(rng.standard_normal())
    tangent = rng.standard_normal(np.shape(argument))
    return ppto.tensor(tangent) if isinstance(argument, ppto.Tensor) else tangent


def tangents_on(arguments, positions, seed):
    """Tangents for ``ppto.jvp`` (``None`` outside ``positions``) and the same
    direction as NumPy values by position, for the finite differences."""
    rng = np.random.default_rng(seed)
    tangents = [None] * len(arguments)
    for position in positions:
        tangents[position] = random_tangent(arguments[position], rng)
    direction = {
        p: t if isinstance(t, float) else as_float(t)
        for p, t in enumerate(tangents)
        if t is not None
    }
    return tuple(tangents), direction


def assert_outputs(actual, expected, what, check):
    """``check`` each output of a possibly tuple-valued result."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), what
        for i, (a, e) in enumerate(zip(actual, expected)):
            check(a, e, f"{what} output {i}")
    else:
        check(actual, expected, what)


def assert_same_value(actual, expected, what):
    np.testing.assert_allclose(
        np.asarray(actual), expected, rtol=1e-12, atol=1e-14, err_msg=what
    )


def check_jvp(case, positions, seed):
    arguments = case.arguments()
    tangents, direction = tangents_on(arguments, positions, seed)
    out, tangent_out = ppto.jvp(case.fn, arguments, tangents)
    assert_outputs(out, plain(case, arguments), f"{case.id} value", assert_same_value)
    expected = directional_differences(
        lambda *a: as_float(case.fn(*a)), arguments, direction
    )
    assert_outputs(tangent_out, expected, f"{case.id} tangent", assert_gradient)


# --- forward mode ---

PER_ARGUMENT = [
    pytest.param(case, position, id=f"{case.id}-wrt{position}")
    for case in CASES
    for position in case.wrt
]


@pytest.mark.parametrize("case, position", PER_ARGUMENT)
def test_jvp_per_argument(case, position):
    with expect("jvp", f"{case.id}-wrt{position}"):
        check_jvp(case, (position,), seed=position)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_jvp_all_arguments(case):
    with expect("jvp_all", case.id):
        check_jvp(case, case.wrt, seed=17)


def test_numpy_functions_are_differentiated_as_their_operators():
    # jvp's own example, ppto.jvp(np.sin, (x,), (v,)), raised TransformError: a
    # ufunc has no source to read
    x, v = np.array([0.3, -0.5]), np.array([1.0, 2.0])
    _, pushed = ppto.jvp(np.sin, (x,), (v,))
    np.testing.assert_allclose(np.asarray(pushed), np.cos(x) * v, rtol=1e-12)
    _, pushed = ppto.jvp(np.maximum, (x, x[::-1].copy()), (v, 3.0 * v))
    np.testing.assert_allclose(np.asarray(pushed), [1.0, 6.0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ppto.grad(np.sum)(x)), [1.0, 1.0])
    with pytest.raises(ppto.PptoError, match="np.dot of a 3-d and a 3-d"):
        ppto.jvp(np.dot, (np.ones((2, 2, 2)),) * 2, (np.ones((2, 2, 2)), None))


def test_jvp_needs_one_tangent_per_primal_and_one_not_none():
    with pytest.raises(ppto.GradError, match="every tangent is None"):
        ppto.jvp(sin_cubed, (0.5,), (None,))
    with pytest.raises(ppto.GradError, match="1 primals but 2 tangents"):
        ppto.jvp(sin_cubed, (0.5,), (1.0, None))


def doubled_sum(x):
    return np.sum(x * 2.0)


@pytest.mark.parametrize(
    "tangent",
    [1.0, np.ones(1), np.ones((1, 3)), np.ones(4)],
    ids=lambda t: str(np.shape(t)),
)
def test_jvp_refuses_a_tangent_of_another_shape_than_its_primal(tangent):
    # the tangent was broadcast against the primal: a scalar 1.0 for a vector of
    # 3 pushed forward to 2 instead of 6, one of 4 elements to 8
    with pytest.raises(ppto.ShapeError, match=r"tangent of 'x' has shape"):
        ppto.jvp(doubled_sum, (np.array([0.1, 0.5, 0.2]),), (tangent,))
    _, pushed = ppto.jvp(doubled_sum, (np.array([0.1, 0.5, 0.2]),), (np.ones(3),))
    assert float(pushed) == 6.0


# --- Hessian-vector products over the corpus ---

# Differences of the gradient see a value under ppto.stop_gradient move; jvp holds
# it constant (as JAX does), so these have no finite-difference reference.
HELD_CONSTANT = {"stopped_gradient"}
SCALAR_PER_ARGUMENT = [
    pytest.param(case, position, id=f"{case.id}-wrt{position}")
    for case in CASES
    if not case.vjp and case.id not in HELD_CONSTANT
    for position in case.wrt
]


@pytest.mark.parametrize("case, position", SCALAR_PER_ARGUMENT)
def test_hessian_vector_product(case, position):
    """d/dt grad_i f(args + t v) for random v on every differentiable argument."""
    arguments = case.arguments()
    with expect("hvp", f"{case.id}-wrt{position}"):
        gradient = ppto.grad(case.fn, wrt=position)
        tangents, direction = tangents_on(arguments, case.wrt, seed=position + 1)
        value, product = ppto.jvp(gradient, arguments, tangents)
        np.testing.assert_allclose(
            np.asarray(value), np.asarray(gradient(*arguments)), rtol=1e-10, atol=1e-12
        )
        expected = directional_differences(
            lambda *a: as_float(gradient(*a)),
            arguments,
            direction,
            eps=SECOND_ORDER_EPS,
        )
        assert_gradient(
            product,
            expected,
            f"{case.id} Hessian-vector product, row {position}",
            rtol=SECOND_ORDER_RTOL,
        )


# --- grad of grad, scalar to scalar ---


def sin_cubed(x):
    return x**3 * np.sin(x)


def sin_cubed_second(x):
    return 6 * x * np.sin(x) + 6 * x**2 * np.cos(x) - x**3 * np.sin(x)


def exp_of_tanh(x):
    return ppto.exp(ppto.tanh(x))


def exp_of_tanh_second(x):
    t = np.tanh(x)
    d = 1 - t * t
    return np.exp(t) * (d * d - 2 * t * d)


def piecewise(x):
    if x > 0:
        y = x**3 + x
    else:
        y = np.exp(x) - x * x
    return y


def piecewise_second(x):
    return 6 * x if x > 0 else np.exp(x) - 2.0


def repeated_sine(x):
    y = x
    for _ in range(3):
        y = np.sin(y) * x
    return y


def halving_while(x):
    y = x * x
    while y > 0.5:
        y = y * 0.5 + x * 0.1
    return y * x


def stacked_states(x):
    hs = []
    h = x
    for _ in range(3):
        h = np.sin(h) * x
        hs.append(h)
    return np.sum(np.stack(hs))


def enumerated_list(x):
    xs = [x, x * x, np.cos(x)]
    total = 0.0
    for i, v in enumerate(xs):
        total = total + v * (i + 1.0) * v
    return total


def popped_list(x):
    xs = [x, x * 2.0, np.sin(x)]
    last = xs.pop()
    return last * xs[0] + xs[1] ** 2


def returned_from_a_loop(x):
    y = x
    for _ in range(5):
        y = y * x + 0.1
        if y > 2.0:  # from x = 1.3 on, y = x**3 + 0.1 * x + 0.1 at the second turn
            return y * y
    return y


def returned_from_a_loop_second(x):
    y, slope, curve = x**3 + 0.1 * x + 0.1, 3 * x**2 + 0.1, 6 * x
    return 2 * slope**2 + 2 * y * curve


SCALAR_FUNCTIONS = [
    pytest.param(sin_cubed, sin_cubed_second, 0.7, id="sin_cubed"),
    pytest.param(exp_of_tanh, exp_of_tanh_second, -0.4, id="exp_of_tanh"),
    pytest.param(piecewise, piecewise_second, 0.8, id="piecewise-positive"),
    pytest.param(piecewise, piecewise_second, -0.6, id="piecewise-negative"),
    pytest.param(repeated_sine, None, 0.9, id="repeated_sine"),
    pytest.param(halving_while, None, 1.7, id="halving_while"),
    pytest.param(stacked_states, None, 0.7, id="stacked_states"),
    pytest.param(enumerated_list, None, 0.7, id="enumerated_list"),
    pytest.param(popped_list, None, 0.7, id="popped_list"),
    # a branch of the lowered second derivative kept only its comments: no block
    pytest.param(returned_from_a_loop, returned_from_a_loop_second, 1.3, id="return"),
]


def differences_of(function, x, eps=SECOND_ORDER_EPS):
    return (float(function(x + eps)) - float(function(x - eps))) / (2 * eps)


@pytest.mark.parametrize("function, exact, x", SCALAR_FUNCTIONS)
def test_grad_of_grad(function, exact, x):
    first = ppto.grad(function)
    second = ppto.grad(ppto.grad(function))
    for point in (x, np.array(x)):
        value = second(point)
        assert isinstance(value, ppto.Tensor)
        expected = exact(x) if exact else differences_of(first, x)
        np.testing.assert_allclose(float(value), expected, rtol=SECOND_ORDER_RTOL)
        assert np.isclose(float(first(point)), differences_of(function, x))


SCALAR_ARGUMENTS = [
    pytest.param(case, position, id=f"{case.id}-wrt{position}")
    for case in CASES
    if not case.vjp and case.id not in HELD_CONSTANT
    for position in case.wrt
    if isinstance(case.inputs[position], S)
]


@pytest.mark.parametrize("case, position", SCALAR_ARGUMENTS)
def test_grad_of_grad_wrt_a_scalar_argument(case, position):
    """``grad(grad(f, wrt=i), wrt=i)`` for every corpus function of a Python float
    argument ``i``, against differences of the first derivative. (A loop that may
    run no turn, returning from inside, lost the gradient carried around it.)"""
    arguments = case.arguments()
    first = ppto.grad(case.fn, wrt=position)
    second = ppto.grad(first, wrt=position)(*arguments)
    assert isinstance(second, ppto.Tensor) and second.shape == ()
    expected = directional_differences(
        lambda *a: as_float(first(*a)), arguments, {position: 1.0}, eps=SECOND_ORDER_EPS
    )
    assert_gradient(
        second, np.asarray(expected), f"{case.id} d2/ds2", rtol=SECOND_ORDER_RTOL
    )


def cubes_of_a_list(x):
    xs = [x, x * 2.0]
    total = 0.0
    for v in xs:
        total = total + v * v * v
    return total


def test_second_derivatives_through_list_operations():
    """The gradient's list operations (zeros_like_list, add_at, pops) differentiate
    in forward mode (jvp(grad(f))) and in reverse mode (grad(grad(f)))."""
    expected = differences_of(ppto.grad(cubes_of_a_list), 1.5)
    _, curvature = ppto.jvp(ppto.grad(cubes_of_a_list), (1.5,), (1.0,))
    np.testing.assert_allclose(float(curvature), expected, rtol=1e-6)
    second = ppto.grad(ppto.grad(cubes_of_a_list))(1.5)
    np.testing.assert_allclose(float(second), expected, rtol=1e-6)


def appended_to_a_list_argument(x, xs):
    xs.append(x * 3.0)
    return np.sum(xs[-1] * xs[0] * x)


def appended_in_a_loop_to_a_list_argument(x, xs):
    for _ in range(2):
        xs.append(xs[-1] * x)
    s = 0.0
    for v in xs:
        s = s + np.sum(v * x)
    return s


@pytest.mark.parametrize(
    "function", [appended_to_a_list_argument, appended_in_a_loop_to_a_list_argument]
)
def test_forward_mode_keeps_the_tangent_of_an_item_appended_to_a_list_argument(
    function,
):
    """A list argument not differentiated has no tangent: an append of a
    differentiated value lost the item's tangent in forward mode (jvp 6.78 for
    13.56, the Hessian's diagonal 3w for 6w), where grad was right."""
    x = np.array([0.3, 0.7, 1.2, -0.4])
    w = np.array([1.0, 2.0, 0.5, 0.1])
    v = np.array([0.3, -1.1, 0.5, 0.8])
    value, tangent = ppto.jvp(function, (x, [w.copy()]), (v, None))
    assert np.allclose(np.asarray(value), function(x.copy(), [w.copy()]))
    expected = directional_differences(lambda a: function(a, [w.copy()]), (x,), {0: v})
    np.testing.assert_allclose(float(tangent), expected, rtol=1e-6)
    gradient = ppto.grad(function)
    assert_gradient(
        gradient(x, [w.copy()]),
        central_differences(lambda a: function(a, [w.copy()]), (x,), 0),
        "dx",
    )
    hessian = np.asarray(ppto.hessian(function)(x, [w.copy()]))
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = SECOND_ORDER_EPS
        row = (
            np.asarray(gradient(x + step, [w.copy()]))
            - np.asarray(gradient(x - step, [w.copy()]))
        ) / (2 * SECOND_ORDER_EPS)
        np.testing.assert_allclose(hessian[i], row, rtol=1e-5, atol=1e-8)


# --- third and fourth derivatives through loops ---


def clipped_sines(x):
    y = x
    for _ in range(3):
        y = np.maximum(y * x, 0.1 * y) + np.sin(y)
    return y


def times_exp_thrice(x):
    y = x
    for _ in range(3):
        y = y * np.exp(x)
    return y


def times_exp_while(x):
    y = x
    count = 0
    while count < 3:
        y = y * np.exp(x)
        count = count + 1
    return y


def sine_steps(a, x):
    count = 0
    while count < 2:
        a = np.sin(a) * x + a
        count = count + 1
    return a


def halved_sine_steps(x):
    y = x
    for _ in range(2):
        y = sine_steps(y, x) * 0.5
    return y


def broken_inner_loops(x):
    y = x
    for _ in range(3):
        for _ in range(4):
            y = y * 0.9 + np.sin(x * y)
            if y > 1.5:
                break
    return y


def times_exp_thrice_derivative(order):
    """The ``order``-th derivative of x e^(3x), written out by hand."""
    return lambda x: np.exp(3 * x) * (3**order * x + order * 3 ** (order - 1))


POINTS = [1.3, 0.7]


def derivatives(function, order):
    """``function`` differentiated ``order`` times over: grad(grad(...))."""
    for _ in range(order):
        function = ppto.grad(function)
    return function


def assert_derivative_of_the_lower_one(function, order, points, exact=None):
    """The ``order``-th derivative at each of ``points`` against central
    differences of the one below (and against ``exact``, where given)."""
    lower = derivatives(function, order - 1)
    derivative = ppto.grad(lower)
    for x in points:
        value = float(derivative(x))
        expected = differences_of(lower, x)
        np.testing.assert_allclose(value, expected, rtol=SECOND_ORDER_RTOL)
        if exact is not None:
            np.testing.assert_allclose(value, exact(x), rtol=1e-10)


def test_third_derivative_through_a_loop():
    """Differentiating a gradient pops its loop's tapes in reverse: each tape's
    adjoint needs an entry per pop, zeros for values read only for their shape
    (these had no entries at all: ``pop from empty list`` in the third derivative)."""
    assert_derivative_of_the_lower_one(clipped_sines, 3, POINTS)
    exact = times_exp_thrice_derivative(3)
    assert_derivative_of_the_lower_one(times_exp_thrice, 3, POINTS, exact)


def test_fourth_derivative_through_a_loop():
    """A tuple's adjoint is unpacked, not indexed: the third derivative's code takes
    the adjoint of the saved values (a tuple of lists and arrays) apart, and as an
    index of it (``dsaved[4]``) the fourth differentiated it as an array's."""
    assert_derivative_of_the_lower_one(clipped_sines, 4, POINTS)
    exact = times_exp_thrice_derivative(4)
    assert_derivative_of_the_lower_one(times_exp_thrice, 4, POINTS, exact)


def test_fourth_derivative_through_a_while_loop():
    """The third derivative's code runs a while loop's reverse over
    ``range(iterations)``, the count read from its saved values, which count as
    differentiated: the fourth refused range as an operator it cannot
    differentiate. range is whole numbers, with no derivative."""
    exact = times_exp_thrice_derivative(4)
    assert_derivative_of_the_lower_one(times_exp_while, 4, POINTS, exact)


def test_fourth_derivative_through_a_helper_with_a_while_loop():
    """The shape of a value a loop's reverse reads for its shape only is restored
    under a name of its own (and from a tape of its own): in the fourth derivative,
    ``ddt2_shape`` was both the shape of ``ddt2`` and the adjoint of the third's
    ``dt2_shape``, and an adjoint was read as a shape."""
    assert_derivative_of_the_lower_one(halved_sine_steps, 4, [1.3])


def test_fourth_derivative_through_inner_loops_that_break():
    """The values a gradient saves include tapes of the inner loops' ranges, of
    different lengths where the loops break at different turns: their zero
    adjoints are made item by item (as an array, such a list has none)."""
    assert_derivative_of_the_lower_one(broken_inner_loops, 4, [0.7])


def test_forward_over_reverse_through_a_loop_to_third_and_fourth_order():
    """jvp of a second and of a third derivative: forward mode over the reverse
    mode's tapes, pops and list adjoints."""
    for order in (2, 3):
        derivative = derivatives(times_exp_thrice, order)
        for x in POINTS:
            _, tangent = ppto.jvp(derivative, (x,), (1.0,))
            exact = times_exp_thrice_derivative(order + 1)(x)
            np.testing.assert_allclose(float(tangent), exact, rtol=1e-10)


# --- Hessians ---


def quartic(x):
    return np.sum(x**4) + np.sum(x[:-1] * x[1:])


def unrolled_recurrence(x, w):
    h = x * 0.0
    for _ in range(2):
        h = np.tanh(x * w + h) + h * x
    return np.sum(h * h)


def branchy_matrix(x):
    if np.sum(x) > 0:
        return np.sum(np.exp(x) * x.T)
    return np.sum(x @ x)


HESSIANS = [
    pytest.param(quartic, (np.array([0.3, -0.7, 1.1]),), 0, id="quartic"),
    pytest.param(
        unrolled_recurrence,
        (np.array([0.2, -0.5, 0.9]), np.array([0.4, 1.2, -0.3])),
        1,
        id="unrolled_recurrence-w",
    ),
    pytest.param(
        branchy_matrix, (np.array([[0.5, -0.2], [0.3, 0.1]]),), 0, id="branchy_matrix"
    ),
]


@pytest.mark.parametrize("function, arguments, wrt", HESSIANS)
def test_hessian(function, arguments, wrt):
    point = arguments[wrt]
    hessian = ppto.hessian(function, wrt=wrt)(*arguments)
    assert isinstance(hessian, ppto.Tensor)
    assert hessian.shape == point.shape + point.shape
    hessian = np.asarray(hessian)
    gradient = ppto.grad(function, wrt=wrt)
    expected = np.zeros(point.shape + point.shape)
    for index in np.ndindex(point.shape):
        basis = np.zeros(point.shape)
        basis[index] = 1.0
        column = directional_differences(
            lambda *a: as_float(gradient(*a)),
            arguments,
            {wrt: basis},
            eps=SECOND_ORDER_EPS,
        )
        expected[(Ellipsis, *index)] = column
    assert_gradient(hessian, expected, "Hessian", rtol=SECOND_ORDER_RTOL)
    flat = hessian.reshape(point.size, point.size)
    np.testing.assert_allclose(flat, flat.T, rtol=1e-12, atol=1e-12)


def elementwise_sine(x):
    return np.sin(x)


NON_SCALAR_SECOND_ORDER = {
    "hessian": lambda x: ppto.hessian(elementwise_sine)(x),
    "jvp of grad": lambda x: ppto.jvp(ppto.grad(elementwise_sine), (x,), (x,)),
    "jacfwd of grad": lambda x: ppto.jacfwd(ppto.grad(elementwise_sine))(x),
    "jacrev of grad": lambda x: ppto.jacrev(ppto.grad(elementwise_sine))(x),
    "jacrev of value_and_grad": (
        lambda x: ppto.jacrev(ppto.value_and_grad(elementwise_sine))(x)
    ),
}


@pytest.mark.parametrize("way", sorted(NON_SCALAR_SECOND_ORDER))
def test_second_order_of_a_non_scalar_function_is_refused_as_grad_is(way):
    # each returned the Hessian of np.sum(np.sin(x)), of shape (2, 2)
    x = np.array([0.5, 1.0])
    with pytest.raises(ppto.GradError, match="scalar result.*returned shape \\(2,\\)"):
        ppto.grad(elementwise_sine)(x)
    with pytest.raises(ppto.GradError, match="ppto.grad\\(elementwise_sine\\) again"):
        NON_SCALAR_SECOND_ORDER[way](x)


def test_second_order_of_a_one_value_array_result_is_its_hessian():
    x = np.array([0.7])
    hessian = np.asarray(ppto.hessian(elementwise_sine)(x))
    gradient = ppto.grad(elementwise_sine)
    expected = directional_differences(
        lambda *a: as_float(gradient(*a)), (x,), {0: np.ones(1)}, eps=SECOND_ORDER_EPS
    )
    assert hessian.shape == (1, 1)
    assert_gradient(hessian.reshape(1), expected, "Hessian", rtol=SECOND_ORDER_RTOL)


def cubed_times(x, y):
    return np.sum(x**3 * y)


def test_hessian_keeps_the_arguments_dtype_and_refuses_several_arguments():
    # float32 came back float64, and wrt=(0, 1) raised a raw ValueError
    x, y = np.array([1.0, 2.0], np.float32), np.ones(2, np.float32)
    hessian = ppto.hessian(cubed_times)(x, y)
    assert hessian.dtype == np.float32
    np.testing.assert_allclose(np.asarray(hessian), np.diag(6.0 * x))
    with pytest.raises(ppto.GradError, match="one argument at a time"):
        ppto.hessian(cubed_times, wrt=(0, 1))


def tanh_of_a_float64_product(A, b):
    return np.sum(np.tanh(A @ b) ** 2)


def test_a_hessian_vector_product_keeps_the_arguments_dtypes():
    # the gradient of a float32 argument is float32 (grad casts it), but jvp of
    # grad gave it and its tangent in the dtype the function computed in, float64
    A = np.array([[0.5, -1.0], [2.0, 0.3]], np.float32)
    b, direction = np.array([0.4, -0.7]), np.array([[1.0, 0.5], [-2.0, 1.0]])
    gradient = ppto.grad(tanh_of_a_float64_product, wrt=(0, 1))
    (dA, db), (tA, tb) = ppto.jvp(gradient, (A, b), (direction, None))
    assert dA.dtype == tA.dtype == np.float32 and db.dtype == tb.dtype == np.float64
    np.testing.assert_allclose(np.asarray(dA), np.asarray(gradient(A, b)[0]))
    step, point = 1e-6, A.astype(np.float64)
    ahead, behind = (
        np.asarray(gradient(point + sign * step * direction, b)[0]) for sign in (1, -1)
    )
    expected = (ahead - behind) / (2 * step)
    np.testing.assert_allclose(np.asarray(tA), expected, rtol=1e-5)


def sorted_and_running_products(x):
    return np.sum(np.sort(x) * np.cumprod(x)) + np.sum(x * 2.0)


def test_the_hessian_at_an_empty_array_is_empty():
    # np.stack of no columns raised "need at least one array to stack"
    for point in (np.zeros(0), np.zeros((0, 3))):
        hessian = ppto.hessian(sorted_and_running_products)(point)
        assert hessian.shape == point.shape + point.shape


def test_the_hessian_at_a_cupy_array(emulated_cupy):
    # the point was read by np.asarray, which a CuPy array refuses (the emulated
    # CuPy refuses it as CuPy does)
    from ppto.runtime.backends import backend_for

    cupy = backend_for(ppto.Device("cuda")).xp
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    hessian = ppto.hessian(cubed_times)(cupy.asarray(x), y)
    assert hessian.device == "cuda:0"
    np.testing.assert_allclose(hessian.numpy(), np.diag(6.0 * x * y), rtol=1e-12)


def powers_of_two(x):
    return 2.0**x * x


def test_a_float32_result_has_a_float32_tangent():
    # pow's rule takes the log of its Python number base as a float64 array, which
    # made the tangent of a float32 result float64
    x = np.array([0.5, -1.0, 1.5])
    tangent = np.array([1.0, 2.0, -0.5])
    value, pushed = ppto.jvp(powers_of_two, (x.astype(np.float32),), (tangent,))
    assert value.dtype == pushed.dtype == np.float32
    expected = directional_differences(powers_of_two, (x,), {0: tangent})
    np.testing.assert_allclose(np.asarray(pushed), expected, rtol=1e-5)


def scaled_sines(x, *, scale=2.0):
    return np.sum(np.sin(x) * scale * x)


@pytest.mark.parametrize("keywords", [{}, {"scale": 3.0}], ids=["default", "given"])
def test_second_order_with_a_keyword_only_parameter(keywords):
    # the derivative's wrapper passed keyword-only parameters positionally: TypeError
    x = np.array([0.1, -0.4, 0.7])
    gradient = ppto.grad(scaled_sines)

    def first(point):
        return as_float(gradient(point, **keywords))

    columns = [
        directional_differences(first, (x,), {0: basis}, eps=SECOND_ORDER_EPS)
        for basis in np.eye(3)
    ]
    expected = np.stack(columns, axis=-1)
    hessian = ppto.hessian(scaled_sines)(x, **keywords)
    assert_gradient(np.asarray(hessian), expected, "Hessian", rtol=SECOND_ORDER_RTOL)
    if not keywords:  # (jvp passes primals only)
        tangent = np.array([0.5, -1.0, 2.0])
        _, product = ppto.jvp(gradient, (x,), (tangent,))
        assert_gradient(np.asarray(product), expected @ tangent, "jvp", rtol=1e-5)


def halved(x):
    return x * 0.5


def test_a_tangent_of_another_shape_than_its_argument_is_refused():
    # a (2, 2) tangent of a (2,) argument gave a (2, 2) tangent of the (2,)
    # result, a scalar one broadcast, a (3,) one failed with NumPy's ValueError
    x = np.array([1.0, 2.0])
    for tangent, shape in ((np.ones((2, 2)), r"\(2, 2\)"), (1.0, r"\(\)"),
                           (np.ones(3), r"\(3,\)")):  # fmt: skip
        with pytest.raises(ppto.ShapeError, match=rf"'x' has shape {shape}, but"):
            ppto.jvp(halved, (x,), (tangent,))
    _, tangent = ppto.jvp(halved, (x,), (np.array([1.0, -1.0]),))
    np.testing.assert_array_equal(tangent.numpy(), [0.5, -0.5])


def scaled_by_reductions_of_a_number(x, s):
    return np.sum(x * np.max(s, axis=-1, keepdims=True)) + np.min(s * s) * np.prod(x)


def test_reductions_of_a_differentiated_python_number():
    # a Python float stayed one in generated code, and reduce_max's rules read its
    # .dtype: jvp, grad and the Hessian with respect to s raised AttributeError
    x, s = np.array([1.0, 2.0]), 0.3
    expected = differences_of(lambda t: scaled_by_reductions_of_a_number(x, t), s)
    _, pushed = ppto.jvp(scaled_by_reductions_of_a_number, (x, s), (None, 1.0))
    gradient = ppto.grad(scaled_by_reductions_of_a_number, wrt=1)(x, s)
    np.testing.assert_allclose([float(pushed), float(gradient)], expected, rtol=1e-6)
    second = differences_of(
        lambda t: float(ppto.grad(scaled_by_reductions_of_a_number, wrt=1)(x, t)), s
    )
    hessian = ppto.hessian(scaled_by_reductions_of_a_number, wrt=1)(x, s)
    np.testing.assert_allclose(float(hessian), second, rtol=1e-5)


@ppto.operator
def rolled(x):
    # x rolled one place left (np.append has no ppto operator: the rules below
    return np.append(x[1:], x[:1])  # stand for it)


@rolled.grad_rule
def _(x):
    def backward(dy):
        return rolled_back(dy)

    return backward


def rolled_back(dy):
    return rolled(dy[::-1])[::-1]


def squares_of_rolled(x):
    return np.sum(rolled(x) ** 2)


def test_forward_mode_through_an_operator_without_a_tangent_rule_says_so():
    # the error (np.append has no operator, met in its body) advised a gradient
    # rule, which it has; now forward mode refuses the operator itself, at the call
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(ppto.TransformError) as caught:
        ppto.jvp(squares_of_rolled, (x,), (np.ones(3),))
    first = caught.value.msg.splitlines()[0]
    assert "ppto.rolled has a gradient rule" in first
    assert "but no tangent rule" in first
    assert "@rolled.jvp_rule" in str(caught.value)
    assert caught.value.lineno == inspect.getsourcelines(squares_of_rolled)[1] + 1


@ppto.operator
def clipped_gradient(x):
    return x * 1.0


@clipped_gradient.grad_rule
def _(x):
    def backward(dy):
        return ppto.clip(dy, -1.0, 1.0)  # (not the body's derivative, on purpose)

    return backward


CLIPPED_WEIGHTS = np.array([5.0, -5.0, 0.5, 2.0])


def through_clipped_gradient(x):
    return np.sum(np.sin(clipped_gradient(x)) * CLIPPED_WEIGHTS)


def test_forward_mode_refuses_an_operator_with_only_a_gradient_rule():
    # jvp and jacfwd differentiated the operator's body, so they disagreed with
    # grad and jacrev, which use its rule (jacfwd's diagonal [5, -5, 0.5, 2], the
    # rule's [1, -1, 0.5, 1]), silently; JAX refuses forward mode through custom_vjp
    x = np.array([0.5, -1.2, 2.0, 0.3])
    line = inspect.getsourcelines(through_clipped_gradient)[1] + 1
    rule_line = inspect.getsourcelines(clipped_gradient.backward_rule.fn)[1]
    attempts = {
        "jvp": lambda: ppto.jvp(through_clipped_gradient, (x,), (np.ones(4),)),
        "jacfwd": lambda: ppto.jacfwd(through_clipped_gradient)(x),
        "hessian": lambda: ppto.hessian(through_clipped_gradient)(x),
    }
    for what, attempt in attempts.items():
        with pytest.raises(ppto.TransformError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(
            "ppto.clipped_gradient has a gradient rule (test_forward_and_second_order"
            f".py, line {rule_line}) but no tangent rule, so forward mode"
        ), what
        assert "@clipped_gradient.jvp_rule" in message, what
        assert caught.value.lineno == line, what
        assert caught.value.filename == __file__, what
    # reverse mode uses the rule: cos(x) * weights, clipped to [-1, 1]
    gradient = ppto.grad(through_clipped_gradient)(x)
    expected = np.clip(np.cos(x) * CLIPPED_WEIGHTS, -1.0, 1.0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-12)


@ppto.operator
def softly_clipped(x):
    return x * 1.0


@softly_clipped.grad_rule
def _(x):
    def backward(dy):
        return dy * 0.5

    return backward


@softly_clipped.jvp_rule
def _(x):
    def tangent(dx):
        return dx * 0.5

    return tangent


def through_softly_clipped(x):
    return np.sum(np.sin(softly_clipped(x)) * CLIPPED_WEIGHTS)


def test_forward_mode_uses_an_operators_tangent_rule():
    # with a tangent rule agreeing with its gradient rule, jacfwd is jacrev
    x = np.array([0.5, -1.2, 2.0, 0.3])
    forward = np.asarray(ppto.jacfwd(through_softly_clipped)(x))
    reverse = np.asarray(ppto.jacrev(through_softly_clipped)(x))
    np.testing.assert_allclose(forward, 0.5 * np.cos(x) * CLIPPED_WEIGHTS, rtol=1e-12)
    np.testing.assert_allclose(forward, reverse, rtol=1e-12)


def _weighted_total(xp, a, b):
    return xp.sum(a) + 2.0 * xp.sum(b)


# an operator with rules, as ppto's own are (registered nowhere: the operator
# table would want a row for it)
weighted_total = Primitive(_weighted_total, "(Tensor[...], Tensor[...]) -> Tensor[]")


@weighted_total.grad_rule
def _(a, b):
    def backward(dY):
        return unreduce(dY, a), unreduce(dY * 2.0, b)

    return backward


@weighted_total.jvp_rule
def _(a, b):
    def tangent(da, db):
        total = reduce_sum(da)
        if b is not None:  # (undecided where the rule is inlined: b is a name)
            total = total + 2.0 * reduce_sum(db)
        return total

    return tangent


HELD = np.array([0.5, -1.0])


def total_of_b(b):
    return weighted_total(HELD, b) ** 2


def test_a_tangent_reassigned_in_a_rules_branch_is_not_read_as_zero():
    # with a's tangent zero, 'total' was known zero before the if and stayed so
    # after it, though the branch gave it b's part: the jvp was 0, silently
    b = np.array([0.25, 1.5, -0.75])
    direction = np.array([1.0, -2.0, 0.5])
    _, tangent = ppto.jvp(total_of_b, (b,), (direction,))
    expected = directional_differences(
        lambda x: as_float(total_of_b(x)), (b,), {0: direction}
    )
    assert float(tangent) == pytest.approx(float(expected), rel=1e-6)
    total = np.sum(HELD) + 2.0 * np.sum(b)
    assert float(tangent) == pytest.approx(2 * total * 2.0 * np.sum(direction))


# --- found by the random programs (tests/fuzz/) ---


def grown_until_large(u):
    h = u * 2.0
    while np.max(h) < 0.5:  # the body does not read h: its tangent is not carried
        h = np.tanh(u) + 1.0
    return h


def sum_grown_until_large(x):
    return np.sum(grown_until_large(x))


@pytest.mark.parametrize(
    "x", [np.array([0.1, 0.9]), np.array([0.1, 0.2])], ids=["no turn", "one turn"]
)
def test_jvp_of_a_helper_whose_while_loop_may_run_no_turn(x):
    # the helper's tangent was stored under its result's name only inside the
    # loop (coalesce_copies renamed the loop's store of the carried tangent), so
    # a loop that ran no turn left it unbound: UnboundLocalError
    tangent = np.array([1.0, -2.0])
    value, pushed = ppto.jvp(sum_grown_until_large, (x,), (tangent,))
    expected = directional_differences(sum_grown_until_large, (x,), {0: tangent})
    assert_gradient(pushed, np.asarray(expected), "tangent")
    assert float(value) == sum_grown_until_large(x)


def rectified_when_small(u):
    if np.mean(u) < 0.4:  # (no else: u's mean is below it at these points)
        t = np.maximum(u, 0.0)
    return t


def squares_rectified(W, s):
    return np.sum(rectified_when_small(W * s) ** 2)


def test_second_derivative_through_a_helper_whose_saved_values_get_no_gradient():
    # the helper's backward pass, differentiated again, gave the tuple it saves
    # ((cond, u), reached by no adjoint) the zero zeros_like((cond, u)): a
    # ShapeError ("inhomogeneous shape") instead of the second derivative
    W = np.random.default_rng(0).uniform(-1.0, 1.0, (4, 3))
    first = ppto.grad(squares_rectified, wrt=1)
    second = ppto.grad(first, wrt=1)(W, 0.3)
    expected = directional_differences(
        lambda *a: as_float(first(*a)), (W, 0.3), {1: 1.0}, eps=SECOND_ORDER_EPS
    )
    assert_gradient(second, np.asarray(expected), "d2/ds2", rtol=SECOND_ORDER_RTOL)
    assert float(second) == pytest.approx(2.0 * np.sum(np.maximum(W, 0.0) ** 2))


def absolute_sum(x):
    return np.sum(np.abs(x))


def absolute_times_itself(x):
    return np.sum(np.abs(x) * x)


def test_the_derivative_of_abs_is_the_sign_zero_at_zero():
    # abs'(0) was +1 (where(x >= 0, dY, -dY)); JAX and PyTorch give sign(x), and
    # so do central differences at 0: (|h| - |-h|) / 2h
    x = np.array([-1.5, 0.0, 2.0])
    expected = central_differences(absolute_sum, (x,), 0)
    assert expected[1] == 0.0
    found = np.asarray(ppto.grad(absolute_sum)(x))
    np.testing.assert_allclose(found, expected, rtol=1e-8, atol=0.0)
    tangent = np.array([0.5, 3.0, -1.0])
    _, pushed = ppto.jvp(absolute_sum, (x,), (tangent,))
    assert float(pushed) == pytest.approx(float(np.dot(expected, tangent)), rel=1e-8)
    # the second derivative of |x| x is 2 sign(x): 0 at 0, from either side
    h = 1e-4
    second = [
        (
            absolute_times_itself(x + h * e)
            - 2 * absolute_times_itself(x)
            + absolute_times_itself(x - h * e)
        )
        / h**2
        for e in np.eye(3)
    ]
    found = np.asarray(ppto.hessian(absolute_times_itself)(x))
    np.testing.assert_allclose(np.diag(found), second, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(found - np.diag(np.diag(found)), np.zeros((3, 3)))
