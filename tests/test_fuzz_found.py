"""Bugs the random programs (tests/fuzz/) found, each reduced to a small function
and checked against float64 central differences (the seed that found it is named
in each test)."""

import numpy as np

import ppto
from tests.corpus.checks import as_float, directional_differences


def tanh_layer(x, y, W, s):
    return np.sum(np.tanh(W @ x)) + np.sum(y * y) * s


def tanh_layer_of_a_pair(x, params, W, s):
    y, c = params
    return np.sum(np.tanh(W @ x)) + c * np.sum(y * y) * s


def _arguments():
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((3, 4)),
        rng.standard_normal((3, 4)),
        rng.standard_normal((4, 3)),
    )


def test_hessian_vector_product_of_a_gradient_of_one_argument_in_a_tuple():
    """Seed 12: ``jvp(grad(f, wrt=(0,)))`` gave the first row of each gradient (a
    bare gradient iterated as if it were the tuple of one), and so did any
    Hessian-vector product through a pytree argument."""
    x, y, W = _arguments()
    tangents = (np.ones_like(x), np.ones_like(y), np.zeros_like(W), 0.0)
    for wrt, single in (((0,), False), (0, True)):
        gradient = ppto.grad(tanh_layer, wrt=wrt)
        value, product = ppto.jvp(gradient, (x, y, W, 0.5), tangents)
        if not single:
            assert isinstance(value, tuple) and len(value) == 1
            value, product = value[0], product[0]
        expected = directional_differences(
            lambda *a: as_float(ppto.grad(tanh_layer)(*a)),
            (x, y, W, 0.5),
            dict(enumerate(tangents)),
        )
        np.testing.assert_allclose(
            np.asarray(value), as_float(ppto.grad(tanh_layer)(x, y, W, 0.5))
        )
        np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-6, atol=1e-8)


def test_hessian_vector_product_with_a_pytree_argument():
    """Seed 12: the same through a tuple argument (the leaves' gradient regrouped)."""
    x, y, W = _arguments()
    gradient = ppto.grad(tanh_layer_of_a_pair, wrt=0)
    primals = (x, (y, 0.3), W, 0.5)
    value, product = ppto.jvp(gradient, primals, (np.ones_like(x), (y, 1.0), W, 0.0))
    assert np.shape(value) == x.shape and np.shape(product) == x.shape

    def along(t):
        return as_float(gradient(x + t, (y + t * y, 0.3 + t), W + t * W, 0.5))

    expected = (along(1e-6) - along(-1e-6)) / 2e-6
    np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-6, atol=1e-8)
