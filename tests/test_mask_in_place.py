"""Masked gradients written into their dying input in lowered CPU code
(ppto/transform/mask_in_place.py): where the rewrite applies, that values are
NumPy's ``where`` bit for bit (NaN, infinities, -0.0), that an array anything
else can see is never written, and gradients against float64 central
differences."""

import io

import numpy as np
import pytest

import ppto
from ppto.runtime import backends
from ppto.runtime.backends import _where
from ppto.transform.mask_in_place import where_into_dead
from tests.corpus.checks import central_differences


def relu_layers(W1, W2, x):
    h = np.maximum(x @ W1, 0.0)
    return np.sum(np.tanh(h @ W2))


def relu_arguments():
    rng = np.random.default_rng(5)
    return (
        rng.standard_normal((4, 6)),
        rng.standard_normal((6, 3)),
        rng.standard_normal((5, 4)),
    )


def lowered_code(function, arguments, wrt) -> str:
    return ppto.show_grad(
        function, *arguments, wrt=wrt, lowered=True, file=io.StringIO()
    )


def test_relu_gradient_is_written_into_the_dying_gradient():
    code = lowered_code(relu_layers, relu_arguments(), (0, 1))
    assert "where_into_dead(" in code


def test_relu_gradients_match_central_differences():
    arguments = relu_arguments()
    gradients = ppto.grad(relu_layers, wrt=(0, 1, 2))(*arguments)
    for position, gradient in zip((0, 1, 2), gradients):
        expected = central_differences(relu_layers, arguments, position)
        np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-9)


def test_fused_mlp_gradient_equals_unfused(monkeypatch):
    """The benchmark's MLP shape, fused (where its relu gradient is rewritten),
    against strict precision's unfused code."""
    rng = np.random.default_rng(0)
    W1, W2 = rng.standard_normal((784, 64)) * 0.05, rng.standard_normal((64, 10))
    x, labels = rng.standard_normal((256, 784)), rng.integers(0, 10, 256)

    def mlp(W1, W2, x, labels):
        h = np.maximum(x @ W1, 0.0)
        logits = h @ W2
        shifted = logits - np.max(logits, axis=1, keepdims=True)
        log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
        return -np.mean(log_probs[np.arange(x.shape[0]), labels])

    monkeypatch.setenv("PPTO_FUSION", "on")
    fused = ppto.grad(mlp, wrt=(0, 1))(W1, W2, x, labels)
    previous = ppto.set_precision("strict")
    try:
        unfused = ppto.grad(mlp, wrt=(0, 1))(W1, W2, x, labels)
    finally:
        ppto.set_precision(previous)
    for mine, theirs in zip(fused, unfused):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=1e-12)


def test_pullback_leaves_the_callers_cotangent_alone():
    x = np.array([-1.0, 2.0, -3.0, 4.0])
    cotangent = np.array([1.0, np.nan, np.inf, -0.0])
    kept = cotangent.copy()
    _, pullback = ppto.vjp(lambda x: np.maximum(x, 0.0), x)
    (dx,) = pullback(cotangent)
    np.testing.assert_array_equal(cotangent, kept)
    np.testing.assert_array_equal(np.asarray(dx), [0.0, np.nan, 0.0, -0.0])


def special_values(dtype):
    values = np.array([1.5, np.nan, np.inf, -np.inf, -0.0, 0.0, -2.0, 3.0], dtype)
    mask = np.array([True, True, True, False, True, False, False, True])
    return values, mask


def same_bits(a, b) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("keep", [True, False])
def test_an_unshared_array_is_written_with_wheres_bits(dtype, keep):
    def generated():  # (as generated code calls it: the array only in a local)
        values, mask = special_values(dtype)
        if keep:
            result = where_into_dead(mask, values, 0.0)
            return result, values, np.where(mask, special_values(dtype)[0], 0.0)
        result = where_into_dead(mask, 0.0, values)
        return result, values, np.where(mask, 0.0, special_values(dtype)[0])

    result, values, expected = generated()
    assert result is values  # (written in place)
    assert same_bits(result, expected)


def test_an_array_another_name_holds_is_not_written():
    values, mask = special_values(np.float64)
    other = values
    kept = values.copy()
    result = where_into_dead(mask, values, 0.0)
    assert result is not other
    assert same_bits(other, kept)
    assert same_bits(result, np.where(mask, kept, 0.0))


def test_a_view_is_not_written():
    def generated(owner):
        values = owner[::2]
        return where_into_dead(np.array([True, False, True, False]), values, 0.0)

    owner = np.arange(8.0)
    kept = owner.copy()
    result = generated(owner)
    assert same_bits(owner, kept)
    assert same_bits(result, np.array([0.0, 0.0, 4.0, 0.0]))


@pytest.mark.parametrize("zero", [-0.0, 1.0])
def test_other_fills_make_a_new_array(zero):
    def generated():
        values, mask = special_values(np.float64)
        return where_into_dead(mask, values, zero), values

    result, values = generated()
    assert result is not values
    expected = np.where(special_values(np.float64)[1], values, zero)
    assert same_bits(result, expected)
    assert same_bits(values, special_values(np.float64)[0])


@pytest.fixture
def lanes_for_any_size(monkeypatch):
    """The lanes route taken for these few elements too (large arrays take it)."""
    monkeypatch.setattr(backends, "_LANES_FROM", 1)


def two_special_arrays(dtype):
    """Special values in both operands, a random mask (np.where branches on it)."""
    first, mask = special_values(dtype)
    second = np.roll(first, 3)[::-1].copy()
    rng = np.random.default_rng(8)
    return first, second, rng.random(first.shape) > 0.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("dying", [0, 1])
def test_a_choice_between_two_arrays_is_written_into_the_dying_one(
    dtype, dying, lanes_for_any_size
):
    def generated():  # (both arrays only in locals; one dies with the call)
        a, b, mask = two_special_arrays(dtype)
        result = where_into_dead(mask, a, b, dying)
        return result, (a, b)[dying], (a, b)[1 - dying]

    result, written, other = generated()
    a, b, mask = two_special_arrays(dtype)
    assert result is written
    assert same_bits(result, np.where(mask, a, b))
    assert same_bits(other, (a, b)[1 - dying])  # the one still read is unchanged


def test_a_choice_never_writes_an_array_another_name_holds(lanes_for_any_size):
    a, b, mask = two_special_arrays(np.float64)
    other = b
    kept = b.copy()
    result = where_into_dead(mask, a, b, 1)
    assert result is not other
    assert same_bits(other, kept)
    assert same_bits(result, np.where(mask, a, kept))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backend_where_chooses_by_bits_as_numpy_does(dtype, lanes_for_any_size):
    # the lanes route (a ^ b times the mask, then ^ b) against np.where, bit for
    # bit: NaN payloads, infinities and signed zeros in both operands, numbers
    # beside arrays, broadcasts, strided views, and outputs that are an operand
    a, b, mask = two_special_arrays(dtype)
    cases = [
        (mask, a, b),
        (mask, a, 0.5),
        (mask, -0.0, b),
        (mask, 3, b),
        (mask[::2], a[::2], b[1::2]),
        (np.stack([mask, ~mask]), a, b),
        (mask, np.stack([a, b]), b[:1]),
        (np.ones_like(mask), a, b),  # (uniform masks: np.where's own route)
        (np.zeros_like(mask), a, 0.5),
    ]
    for condition, x, y in cases:
        assert same_bits(_where(condition, x, y), np.where(condition, x, y))
    for into in (0, 1):  # written into a or b itself
        x, y = a.copy(), b.copy()
        written = _where(mask, x, y, out=(x, y)[into])
        assert written is (x, y)[into]
        assert same_bits(written, np.where(mask, a, b))
    owner = np.concatenate([a, b])  # an output overlapping an operand elsewhere
    out = owner[1 : a.size + 1]
    expected = np.where(mask, owner[: a.size], b)
    assert same_bits(_where(mask, owner[: a.size], b, out=out), expected)


def test_backend_where_leaves_other_choices_to_numpy():
    mask = np.array([True, False, True])
    a32, a64 = np.arange(3.0, dtype=np.float32), np.arange(3.0) + 0.1
    for condition, x, y in [
        (mask, a32, a64),  # two dtypes: np.where promotes
        (mask, a32, 1e39),  # past float32's range
        (mask, a32, True),
        (mask.astype(float), a64, a64[::-1]),  # a condition that is not boolean
        (mask, np.arange(3), np.arange(3) * 2),  # integers
    ]:
        with np.errstate(over="ignore"):
            expected = np.where(condition, x, y)
            assert same_bits(_where(condition, x, y), expected)
