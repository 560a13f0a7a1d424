"""Parameter defaults are the values the ``def`` bound, as in Python.

A default is evaluated once, when the ``def`` runs. Generated code copied the
default expressions into its own signatures and evaluated them again: a global
rebound since gave its new value (silently wrong), a closure's or a loop's
variable was not in scope (NameError). Each check compares the value with the
plain function and the gradient with float64 central differences.
"""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import (
    assert_gradient,
    assert_value,
    central_differences,
    directional_differences,
)

X = np.array([1.0, 2.0, -0.5])

scale = 2.0
weights = np.array([1.0, 10.0, 3.0])


def scaled(x, s=scale):
    return x * s


def scaled_by_keyword(x, *, s=scale):
    return np.tanh(x * s)


def weighted(x, w=weights):
    return x * w


config = {"a": 2.0, "b": np.array([1.0, 0.5, 3.0])}
pair = [np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5])]


def from_containers(x, cfg=config, ws=pair):
    return x * cfg["a"] * cfg["b"] + x * ws[0] * ws[1]


class Layer:
    def apply(self, x, s=scale, *, w=weights):
        return np.sin(x * s) * w


layer = Layer()

# rebound after the defs: the functions above keep 2.0 and [1, 10, 3]
scale = 5.0
weights = np.array([100.0, 1000.0, 7.0])
config = {"a": 100.0, "b": np.zeros(3)}
pair = [np.zeros(3), np.zeros(3)]


def through_scaled(x):
    return np.sum(scaled(x) * x)


def through_keyword(x):
    return np.sum(scaled_by_keyword(x) ** 2)


def through_weighted(x):
    return np.sum(weighted(x) * x)


def through_containers(x):
    return np.sum(from_containers(x) * x)


def through_method(x):
    return np.sum(layer.apply(x) ** 2)


def made_power(k):
    def power(x, k=k):
        return x**k

    return power


cube = made_power(3)


def through_closure_default(x):
    return np.sum(cube(x) * x)


powers = []
for k in (2, 3):

    def loop_power(x, k=k):
        return np.sum(x**k)

    powers.append(loop_power)


def through_loop_default(x):
    return powers[0](x) + 2.0 * loop_power(x)


def made_weighting(w):
    def weighting(x, w=w * 2.0):  # an array computed by the factory
        return x * w

    return weighting


doubled = made_weighting(np.array([1.0, 2.0, 3.0]))


def through_computed_default(x):
    return np.sum(doubled(x) * np.sin(x))


def scaled_by_numpy_scalar(x, s=np.float64(2.5)):  # noqa: B008 (what it tests)
    return x * s


def through_numpy_scalar(x):  # (reads no np: generated code may not see it)
    return ppto.reduce_sum(scaled_by_numpy_scalar(x) * x)


HELPERS = [
    through_scaled,
    through_keyword,
    through_weighted,
    through_containers,
    through_method,
    through_closure_default,
    through_loop_default,
    through_computed_default,
    through_numpy_scalar,
]


def _check(function, x=X):
    value, gradient = ppto.value_and_grad(function)(x)
    assert_value(value, function(x), "value")
    assert_gradient(gradient, central_differences(function, (x,), 0), "gradient")


@pytest.mark.parametrize("function", HELPERS, ids=lambda f: f.__name__)
def test_a_called_function_reads_its_defaults_as_bound(function):
    _check(function)


@pytest.mark.parametrize("function", HELPERS, ids=lambda f: f.__name__)
def test_forward_mode_reads_the_defaults_as_bound(function):
    tangent = np.array([0.5, -1.0, 2.0])
    value, pushed = ppto.jvp(function, (X,), (tangent,))
    assert_value(value, function(X), "value")
    expected = directional_differences(function, (X,), {0: tangent})
    assert float(pushed) == pytest.approx(float(expected), rel=1e-6)


def test_the_value_bound_is_not_the_one_rebound():
    # (what the checks above compare with is Python's: here the numbers)
    value, gradient = ppto.value_and_grad(through_scaled)(X)
    assert float(value) == pytest.approx(2.0 * np.sum(X * X))
    np.testing.assert_allclose(np.asarray(gradient), 4.0 * X)
    value = ppto.value_and_grad(through_weighted)(X)[0]
    assert float(value) == pytest.approx(np.sum(X * X * [1.0, 10.0, 3.0]))


@pytest.mark.parametrize(
    "function", [cube, powers[0], powers[1]], ids=["closure", "loop 2", "loop 3"]
)
def test_the_differentiated_function_reads_its_defaults_as_bound(function):
    def total(x):
        return np.sum(function(x))

    _check(total)
    gradient = ppto.grad(lambda x: np.sum(function(x)))(X)
    k = function.__defaults__[0]
    np.testing.assert_allclose(np.asarray(gradient), k * X ** (k - 1), rtol=1e-12)
    direct = ppto.grad(function)(np.array(1.5))  # the entry point's own signature
    assert float(direct) == pytest.approx(k * 1.5 ** (k - 1))


def test_the_second_derivative_reads_the_defaults_as_bound():
    hessian = ppto.hessian(through_computed_default)(X)
    w = np.array([2.0, 4.0, 6.0])
    expected = np.diag(w * (2 * np.cos(X) - X * np.sin(X)))
    np.testing.assert_allclose(np.asarray(hessian), expected, rtol=1e-10, atol=1e-12)


def test_generated_code_shows_the_bound_defaults():
    text = ppto.show_grad(through_scaled, X, file=None)
    assert "def scaled_forward(x, s=2.0):" in text
    assert "s=scale" not in text
    text = ppto.show_grad(through_weighted, X, file=None)
    assert "def weighted_forward(x, w=w_default):" in text
    text = ppto.show_grad(through_closure_default, X, file=None)
    assert "def power_forward(x, k=3):" in text


def given_other_defaults(x, s=2.0, *, t=-1):
    return x * s + t * x**2


# what a decorator or a factory setting defaults does: the literals written in
# the def are no longer the defaults (Python reads __defaults__ and
# __kwdefaults__)
given_other_defaults.__defaults__ = (10.0,)
given_other_defaults.__kwdefaults__ = {"t": 3}


def through_other_defaults(x):
    return np.sum(given_other_defaults(x) ** 2)


def test_defaults_given_after_the_def_are_read_not_the_written_literals():
    _check(through_other_defaults)
    tangent = np.array([0.5, -1.0, 2.0])
    pushed = ppto.jvp(through_other_defaults, (X,), (tangent,))[1]
    expected = directional_differences(through_other_defaults, (X,), {0: tangent})
    assert float(pushed) == pytest.approx(float(expected), rel=1e-6)
    direct = ppto.grad(lambda x: np.sum(given_other_defaults(x)))(X)
    np.testing.assert_allclose(np.asarray(direct), 10.0 + 6.0 * X, rtol=1e-12)


def rescaled(x, s=np.array([2.0, 2.0, 2.0]), *, t=1.0):  # noqa: B008 (what it tests)
    return x * s * t


def through_rescaled(x):
    return np.sum(np.sin(rescaled(x)) * x)


def test_defaults_given_others_make_the_programs_stale():
    gradient = ppto.value_and_grad(through_rescaled)
    tangent = np.array([0.5, -1.0, 2.0])
    kept = rescaled.__defaults__, dict(rescaled.__kwdefaults__)
    try:
        for change in range(4):
            if change == 1:  # rebound
                rescaled.__defaults__ = (np.array([10.0, -1.0, 0.5]),)
            elif change == 2:  # a keyword default changed in its dict
                rescaled.__kwdefaults__["t"] = 3.0
            elif change == 3:  # the dict rebound
                rescaled.__kwdefaults__ = {"t": -0.5}
            for value_and_grad in (gradient, ppto.value_and_grad(through_rescaled)):
                for _ in range(2):  # (the second call: the repeated-call path)
                    value, found = value_and_grad(X)
                    assert_value(value, through_rescaled(X), "value")
                    expected = central_differences(through_rescaled, (X,), 0)
                    assert_gradient(found, expected, "gradient")
            pushed = ppto.jvp(through_rescaled, (X,), (tangent,))[1]
            expected = directional_differences(through_rescaled, (X,), {0: tangent})
            assert float(pushed) == pytest.approx(float(expected), rel=1e-6)
    finally:
        rescaled.__defaults__, rescaled.__kwdefaults__ = kept


def accumulated(x, buf=np.zeros(3)):  # noqa: B008 (what it tests: the default kept)
    buf += x
    return np.sum(buf * x)


def accumulated_through_another_name(x, buf=np.zeros(3)):  # noqa: B008
    kept = buf
    kept[0] = 1.0
    return np.sum(kept * x)


def appended(x, found=[]):  # noqa: B006 (what it tests)
    found.append(x)
    return np.sum(found[-1] * x)


def made_inside(x, buf=None):  # the rewrite the refusal suggests
    if buf is None:
        buf = np.zeros(3)
    buf += x
    return np.sum(buf * x)


@pytest.mark.parametrize(
    ("helper", "line"),
    [
        (accumulated, "buf += x"),
        (accumulated_through_another_name, "kept[0] = 1.0"),
        (appended, "found.append(x)"),
    ],
    ids=["augmented", "through another name", "appended"],
)
def test_a_write_into_a_called_function_default_is_refused(helper, line):
    # Python keeps the change in the default for the next call: ppto's code
    # would not, so every call after the first would be wrong
    kept = [list(np.asarray(v).ravel()) for v in helper.__defaults__]
    with pytest.raises(ppto.TransformError) as caught:
        ppto.value_and_grad(lambda x: helper(x * 1.0))(X)
    assert caught.value.filename == __file__
    assert line in str(caught.value) and "default value of the parameter" in str(
        caught.value
    )
    assert "=None" in str(caught.value)
    assert [list(np.asarray(v).ravel()) for v in helper.__defaults__] == kept


def test_a_write_into_the_differentiated_function_default_is_refused():
    for entry in (ppto.grad(accumulated), ppto.value_and_grad(accumulated)):
        with pytest.raises(ppto.GradError, match="leaves buf to its default"):
            entry(X)
    with pytest.raises(ppto.GradError, match="leaves buf to its default"):
        ppto.jvp(accumulated, (X,), (np.ones(3),))
    np.testing.assert_array_equal(accumulated.__defaults__[0], np.zeros(3))
    given = np.ones(3)  # (an array passed: the default is not written)
    gradient = ppto.grad(accumulated)(X, given)
    np.testing.assert_allclose(np.asarray(gradient), 2.0 * X + 1.0, rtol=1e-12)


def test_the_suggested_rewrite_runs():
    def calling(x):
        return made_inside(x * 1.0) + made_inside(x * 2.0)

    for _ in range(2):
        _check(calling)
    _check(made_inside)
