"""Functions returning lists (or tuples holding lists) of arrays of different shapes:
outputs are pytrees, so ``jvp`` and ``vjp`` give back the same structure (a list
stays a list) and a pullback takes a cotangent of that structure. Checked against
central differences in float64. (A list of arrays of different shapes was a raw
NumPy ValueError: the result was made one array.)"""

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

RNG = np.random.default_rng(31)
X = RNG.uniform(-1.0, 1.0, 2)
W = RNG.uniform(-1.0, 1.0, (2, 3))


def ragged(x, w):
    return [np.sin(x) * 2.0, np.sum(w * x[:, None], axis=0), np.sum(x * x)]


def nested(x, w):
    return np.tanh(x), [w.T * x[0], (np.sum(w), np.exp(x))]


FUNCTIONS = [
    pytest.param(ragged, id="list"),
    pytest.param(nested, id="list in a tuple"),
]


def leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def same_structure(a, b) -> bool:
    if isinstance(b, (list, tuple)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(same_structure(x, y) for x, y in zip(a, b))
        )
    return not isinstance(a, (list, tuple))


def rebuilt(like, values: list):
    """``values`` in the structure of ``like``."""
    if isinstance(like, (list, tuple)):
        return type(like)(rebuilt(item, values) for item in like)
    return values.pop(0)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_jvp_gives_the_outputs_structure(function):
    expected = function(X, W)
    tangents = (RNG.standard_normal(X.shape), RNG.standard_normal(W.shape))
    out, tangent = ppto.jvp(function, (X, W), tangents)
    assert same_structure(out, expected) and same_structure(tangent, expected)
    eps = 1e-6
    ahead = function(X + eps * tangents[0], W + eps * tangents[1])
    behind = function(X - eps * tangents[0], W - eps * tangents[1])
    for value, reference, part, high, low in zip(
        leaves(out), leaves(expected), leaves(tangent), leaves(ahead), leaves(behind)
    ):
        np.testing.assert_allclose(np.asarray(value), reference, rtol=1e-12)
        assert np.shape(part) == np.shape(reference)
        assert_gradient(part, (np.asarray(high) - low) / (2 * eps), "tangent part")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_vjp_takes_a_cotangent_of_the_outputs_structure(function):
    expected = function(X, W)
    out, pullback = ppto.vjp(function, X, W)
    assert same_structure(out, expected)
    cotangent = rebuilt(
        expected, [RNG.standard_normal(np.shape(v)) for v in leaves(expected)]
    )

    def contracted(x, w):
        return sum(
            float(np.sum(c * v))
            for c, v in zip(leaves(cotangent), leaves(function(x, w)))
        )

    gradients = pullback(cotangent)
    for position, argument in enumerate((X, W)):
        assert np.shape(gradients[position]) == argument.shape
        expected_gradient = central_differences(contracted, (X, W), position)
        assert_gradient(gradients[position], expected_gradient, f"arg {position}")


def test_a_cotangent_of_another_structure_is_refused_by_name():
    _, pullback = ppto.vjp(ragged, X, W)
    with pytest.raises(ppto.ShapeError, match="a list of 3 values"):
        pullback([np.ones(2), np.ones(3)])
    with pytest.raises(ppto.ShapeError, match=r"output 1 has shape \(3,\)"):
        pullback([np.ones(2), np.ones(2), 1.0])


def test_a_list_of_one_shape_also_takes_its_stacked_cotangent():
    def rows(x):
        return [np.sin(x), x * x]

    out, pullback = ppto.vjp(rows, X)
    assert isinstance(out, list) and len(out) == 2
    (stacked,) = pullback(np.array([[1.0, 2.0], [3.0, 4.0]]))
    (listed,) = pullback([np.array([1.0, 2.0]), np.array([3.0, 4.0])])
    expected = np.cos(X) * [1.0, 2.0] + 2 * X * [3.0, 4.0]
    np.testing.assert_allclose(np.asarray(stacked), expected, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(listed), expected, rtol=1e-12)
