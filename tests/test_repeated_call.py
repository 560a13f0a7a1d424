"""A grad object's path for a call like the last one (ppto/repeated_call.py): it
checks each argument's kind, dtype, shape and layout, and that the code is still
current; anything else goes the keyed way and gets its own code."""

import numpy as np
import pytest

import ppto
from ppto.repeated_call import RepeatedCall
from tests.corpus.checks import central_differences


def weighted_cubes(x, w):
    return np.sum(x**3 * w)


def expected(x, w):
    return central_differences(weighted_cubes, (x, w), 0)


def test_calls_like_the_last_take_the_repeated_path_and_stay_right():
    gradient = ppto.grad(weighted_cubes)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(6), rng.standard_normal(6)
    for _ in range(3):
        np.testing.assert_allclose(
            gradient(x, w).numpy(), expected(x, w), rtol=1e-6, atol=1e-8
        )
    assert isinstance(gradient._last, RepeatedCall)
    assert gradient._last.matches((x, w))
    y = rng.standard_normal(6)  # another array of the same kind
    np.testing.assert_allclose(
        gradient(y, w).numpy(), expected(y, w), rtol=1e-6, atol=1e-8
    )


def test_a_change_of_kind_dtype_shape_or_layout_is_noticed():
    gradient = ppto.grad(weighted_cubes)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal(6), rng.standard_normal(6)
    for _ in range(3):
        gradient(x, w)
    x32 = x.astype(np.float32)
    assert not gradient._last.matches((x32, w))
    assert gradient(x32, w).dtype == np.float32
    swapped = x.astype(">f8")  # equal values, a dtype that is another object
    assert not gradient._last.matches((swapped, w))
    np.testing.assert_allclose(
        gradient(swapped, w).numpy(), expected(x, w), rtol=1e-6, atol=1e-8
    )
    for _ in range(3):
        gradient(x, w)
    x.shape = (2, 3)  # the same array object, reshaped in place
    w2 = w.reshape(2, 3)
    assert not gradient._last.matches((x, w2))
    np.testing.assert_allclose(
        gradient(x, w2).numpy(), expected(x, w2), rtol=1e-6, atol=1e-8
    )
    tensor = ppto.tensor(x)
    assert not gradient._last.matches((tensor, w2))
    np.testing.assert_allclose(
        gradient(tensor, w2).numpy(), expected(x, w2), rtol=1e-6, atol=1e-8
    )
    assert not gradient._last.matches((x.tolist(), w2))


def test_a_precision_change_or_a_registration_is_noticed():
    gradient = ppto.grad(weighted_cubes)
    x, w = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 2.0, 5)
    for _ in range(3):
        gradient(x, w)
    previous = ppto.set_precision("strict")
    try:
        assert not gradient._last.matches((x, w))
        np.testing.assert_allclose(
            gradient(x, w).numpy(), expected(x, w), rtol=1e-6, atol=1e-8
        )
    finally:
        ppto.set_precision(previous)
    for _ in range(3):
        gradient(x, w)

    @ppto.operator
    def doubled(v):
        return v * 2.0

    @ppto.grad_rule(doubled)
    def _(v):
        def backward(dy):
            return dy * 2.0

        return backward

    assert not gradient._last.matches((x, w))
    np.testing.assert_allclose(
        gradient(x, w).numpy(), expected(x, w), rtol=1e-6, atol=1e-8
    )


def test_an_error_in_the_generated_code_is_still_translated():
    gradient = ppto.grad(weighted_cubes)
    x, w = np.ones((2, 3)), np.ones((2, 3))
    for _ in range(3):
        gradient(x, w)
    assert gradient._last.matches((x, w))
    with pytest.raises(ppto.ShapeError):
        gradient(x, np.ones((2, 4)))


def scaled_by(x, w, scale):
    return np.sum(scale(x) ** 2 * w)


def test_keyed_calls_alternating_kinds_stay_right():
    """Each call differs from the last (another shape, a tensor), so each after
    the first of its kind runs the code kept under its key, and is then the last
    call; a passed callable's never is (it is not checked by identity)."""
    rng = np.random.default_rng(5)
    small, large = rng.standard_normal(3), rng.standard_normal(4)

    def doubled(v):
        return v * 2.0

    cubes, scaled = ppto.grad(weighted_cubes), ppto.grad(scaled_by)
    for turn in range(3):
        for x in (small, ppto.tensor(large), small[::-1]):
            values = x.numpy() if isinstance(x, ppto.Tensor) else x
            w = np.linspace(0.5, 2.0, len(values))
            np.testing.assert_allclose(
                cubes(x, w).numpy(), expected(values, w), rtol=1e-6, atol=1e-8
            )
            if turn > 0:  # (the first of each kind takes the full path)
                assert cubes._last.matches((x, w))
            want = central_differences(scaled_by, (values, w, doubled), 0)
            np.testing.assert_allclose(
                scaled(x, w, doubled).numpy(), want, rtol=1e-6, atol=1e-8
            )
            assert scaled._last is None


def doubled_helper(v):
    return v * 2.0


def through_the_helper(x, w):
    return np.sum(doubled_helper(x) * w)


def test_a_function_given_new_code_is_transformed_again():
    # a reload that replaces a function's code in place (IPython's autoreload
    # sets f.__code__) kept the old gradient, on the repeated path, the keyed
    # one and for a new grad object alike: [0.5, 1, -2] for [0.3, -1.4, -4.8]
    def before(x, w):
        return np.sum(x * w)

    def after(x, w):
        return np.sum(x * x * w)

    def tripled(v):
        return v * 3.0

    rng = np.random.default_rng(6)
    x, w = rng.standard_normal(3), rng.standard_normal(3)
    gradient = ppto.grad(before)
    for _ in range(3):
        gradient(x, w)
    before.__code__ = after.__code__
    for made in (gradient, ppto.grad(before)):
        np.testing.assert_allclose(
            made(x, w).numpy(), central_differences(after, (x, w), 0), rtol=1e-6
        )
    helped = ppto.grad(through_the_helper)
    for _ in range(3):
        helped(x, w)
    code = doubled_helper.__code__
    doubled_helper.__code__ = tripled.__code__
    try:
        np.testing.assert_allclose(helped(x, w).numpy(), 3.0 * w, rtol=1e-12)
    finally:
        doubled_helper.__code__ = code
