"""A repeated call written out as one function (ppto/straight_call.py): made once
fusion chose the code, it checks the arguments, the precision, registrations and
what the code read as the repeated call does, finishes the common result itself
and leaves anything else to the general finishing. Gradients are checked against
central differences."""

import numpy as np
import pytest

import ppto
from ppto import api
from ppto.repeated_call import RepeatedCall
from tests.corpus.checks import central_differences

SCALE = 2.0


def weighted(x, w, s):
    return np.sum(np.tanh(x) * w * s) * SCALE


def expected(x, w, s=1.5):
    return central_differences(weighted, (x, w, s), 0)


class _Refusing:
    """Whether RepeatedCall.matches may run (see ``written_only``)."""

    on = False


def written_out(gradient, *args):
    """``gradient`` called until its last call is written out; from then on the
    repeated call's own check refuses to run (with ``written_only``), so what
    follows runs the written-out function, or the keyed path where it misses."""
    _Refusing.on = False
    for _ in range(3):
        gradient(*args)
    assert gradient._straight is not None
    _Refusing.on = True
    return gradient._straight


@pytest.fixture
def written_only(monkeypatch):
    """RepeatedCall.matches fails the test once ``written_out`` has run."""
    matches = RepeatedCall.matches

    def refused(self, args):
        assert not _Refusing.on, "the written-out call should have answered"
        return matches(self, args)

    monkeypatch.setattr(RepeatedCall, "matches", refused)
    yield
    _Refusing.on = False


def test_calls_like_the_last_run_the_written_out_function(written_only):
    gradient = ppto.grad(weighted)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(5), rng.standard_normal(5)
    straight = written_out(gradient, x, w, 1.5)
    assert "def repeated_call(transformed, args):" in straight.source
    for _ in range(2):
        y = rng.standard_normal(5)
        result = gradient(y, w, 1.5)
        assert type(result) is ppto.Tensor and result.dtype == np.float64
        np.testing.assert_allclose(result.numpy(), expected(y, w), rtol=1e-6)
    assert gradient._straight is straight


@pytest.mark.parametrize(
    "other",
    [
        lambda x, w: (x.astype(np.float32), w, 1.5),  # another dtype
        lambda x, w: (x[:3], w[:3], 1.5),  # another shape
        lambda x, w: (ppto.tensor(x), w, 1.5),  # a tensor for an array
        lambda x, w: (x, w, 2),  # an int for a float
        lambda x, w: (x, w),  # fewer arguments (the default)
    ],
)
def test_any_other_call_misses_and_gets_its_own_code(written_only, other):
    def defaulted(x, w, s=1.5):
        return weighted(x, w, s)

    gradient = ppto.grad(defaulted)
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(5), rng.standard_normal(5)
    written_out(gradient, x, w, 1.5)
    args = other(x, w)
    values = [a.numpy() if isinstance(a, ppto.Tensor) else a for a in args]
    got = gradient(*args)
    want = central_differences(defaulted, tuple(values), 0)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4)
    assert got.dtype == np.asarray(values[0]).dtype


def test_tensor_arguments_and_their_layout(written_only):
    gradient = ppto.grad(weighted, wrt=(0, 1))
    rng = np.random.default_rng(3)
    x, w = ppto.tensor(rng.standard_normal(4)), rng.standard_normal(4)
    written_out(gradient, x, w, 1.5)
    dx, dw = gradient(x, w, 1.5)
    np.testing.assert_allclose(dx.numpy(), expected(x.numpy(), w), rtol=1e-6)
    want = central_differences(weighted, (x.numpy(), w, 1.5), 1)
    np.testing.assert_allclose(dw.numpy(), want, rtol=1e-6)
    images = ppto.tensor(rng.standard_normal((1, 2, 2, 3)), layout="nhwc")
    weights = rng.standard_normal((1, 2, 2, 3))
    written_out(gradient, images, weights, 1.5)
    assert gradient(images, weights, 1.5)[0].layout == "nhwc"
    plain = ppto.tensor(images.numpy())  # the same values without the layout
    assert gradient(plain, weights, 1.5)[0].layout is None


def test_a_rebound_global_a_new_code_a_precision_or_a_registration_is_noticed(
    written_only, monkeypatch
):
    gradient = ppto.grad(weighted)
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 2.0, 4)
    written_out(gradient, x, w, 1.5)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    np.testing.assert_allclose(gradient(x, w, 1.5).numpy(), expected(x, w), rtol=1e-6)
    monkeypatch.setitem(globals(), "SCALE", 2.0)
    written_out(gradient, x, w, 1.5)
    previous = ppto.set_precision("strict")
    try:
        np.testing.assert_allclose(
            gradient(x, w, 1.5).numpy(), expected(x, w), rtol=1e-6
        )
        assert ppto.get_precision() == "strict"
    finally:
        ppto.set_precision(previous)

    def squared(x, w, s):
        return np.sum(x * x * w * s)

    def changed(x, w, s):
        return np.sum(x * w * s)

    gradient = ppto.grad(changed)
    written_out(gradient, x, w, 1.5)
    changed.__code__ = squared.__code__
    np.testing.assert_allclose(gradient(x, w, 1.5).numpy(), 2 * x * w * 1.5)

    @ppto.operator
    def halved(v):
        return v / 2.0

    @ppto.grad_rule(halved)
    def _(v):
        def backward(dy):
            return dy / 2.0

        return backward

    np.testing.assert_allclose(gradient(x, w, 1.5).numpy(), 2 * x * w * 1.5)


def summed(x, y):
    return np.sum(x + y)


def test_gradients_sharing_memory_or_read_only_are_finished_as_always(written_only):
    gradient = ppto.grad(summed, wrt=(0, 1))
    x, y = np.ones(3), np.full(3, 2.0)
    written_out(gradient, x, y)
    for _ in range(2):
        dx, dy = gradient(x, y)
        np.testing.assert_array_equal(dx.numpy(), np.ones(3))
        np.testing.assert_array_equal(dy.numpy(), np.ones(3))
        assert not np.shares_memory(dx.data, dy.data)
        assert dx.data.flags.writeable and dy.data.flags.writeable
        dx.data += 1.0  # (each the caller's own)
        assert dy.numpy()[0] == 1.0


def test_value_and_grad_and_a_tuple_of_one(written_only):
    both = ppto.value_and_grad(weighted, wrt=(0,))
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 2.0, 4)
    written_out(both, x, w, 1.5)
    value, gradients = both(x, w, 1.5)
    assert isinstance(value, ppto.Tensor)
    np.testing.assert_allclose(float(value.numpy()), weighted(x, w, 1.5))
    assert type(gradients) is tuple and len(gradients) == 1
    np.testing.assert_allclose(gradients[0].numpy(), expected(x, w), rtol=1e-6)


def picked(x, index):
    return np.sum(x[index] ** 2)


def test_an_error_in_the_generated_code_is_still_translated(written_only):
    gradient = ppto.grad(picked)
    x = np.arange(4.0)
    written_out(gradient, x, np.array([0, 2]))
    with pytest.raises(ppto.ShapeError, match="picked"):
        gradient(x, np.array([0, 9]))


def test_the_memory_checker_sees_its_gradients(written_only, monkeypatch):
    gradient = ppto.grad(weighted, wrt=(0, 1))
    x, w = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 2.0, 4)
    written_out(gradient, x, w, 1.5)
    seen = []  # (observers set after the call was written out)
    monkeypatch.setattr(
        api, "RESULT_OBSERVERS", api.RESULT_OBSERVERS + [lambda *a: seen.append(a)]
    )
    result = gradient(x, w, 1.5)
    assert len(seen) == 1 and seen[0][:2] == ("Grad", "weighted")
    assert seen[0][2] is result


def tanh_times(x):
    return np.sum(np.tanh(x) * x)


@pytest.mark.parametrize(
    "first, then, kind",
    [
        (lambda f: ppto.grad(f), lambda f: ppto.value_and_grad(f), tuple),
        (lambda f: ppto.value_and_grad(f), lambda f: ppto.grad(f), ppto.Tensor),
        (lambda f: ppto.grad(f), lambda f: ppto.grad(f, wrt=(0,)), tuple),
        (lambda f: ppto.grad(f, wrt=(0,)), lambda f: ppto.grad(f), ppto.Tensor),
    ],
)
def test_grad_objects_sharing_a_function_s_code_keep_their_own_results(
    first, then, kind
):
    """grad(f), value_and_grad(f), grad(f, (0,)) share the code made for f (and its
    repeated calls): each still gives its own kind of result once another's call
    was written out."""

    def f(x):
        return tanh_times(x)

    x = np.linspace(0.1, 1.0, 5)
    written_out(first(f), x)
    other = then(f)
    for _ in range(5):
        result = other(x)
        assert type(result) is kind
    gradient = result[-1] if kind is tuple else result
    if type(gradient) is tuple:
        (gradient,) = gradient
    np.testing.assert_allclose(
        gradient.numpy(), central_differences(f, (x,), 0), rtol=1e-6
    )
    assert other._straight is not None


def test_calls_of_two_shapes_taking_turns_write_each_out_once(written_only):
    gradient = ppto.grad(weighted)
    rng = np.random.default_rng(8)
    small, large = rng.standard_normal(3), rng.standard_normal(7)
    w_small, w_large = np.ones(3), np.ones(7)
    first = written_out(gradient, small, w_small, 1.5)
    gradient(large, w_large, 1.5)  # (another shape: the last call now)
    _Refusing.on = False
    written_out(gradient, large, w_large, 1.5)
    _Refusing.on = True
    for _ in range(3):
        np.testing.assert_allclose(
            gradient(small, w_small, 1.5).numpy(), expected(small, w_small), rtol=1e-6
        )
        assert gradient._straight is first  # (written out once, kept)
        np.testing.assert_allclose(
            gradient(large, w_large, 1.5).numpy(), expected(large, w_large), rtol=1e-6
        )
