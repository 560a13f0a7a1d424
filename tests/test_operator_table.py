"""Every operator of the table through the gradient checker: float64 (central
differences, element by element and along random directions, plus the dot-product
identity between tangent and backward rules) and float32 with a looser tolerance, on
every available device."""

import numpy as np
import pytest

import ppto
from ppto.ruletape import vjp_by_rules
from tests.conftest import DEVICES
from tests.corpus.checks import assert_gradient, central_differences
from tests.optable import (
    CONSTANT,
    NON_DIFFERENTIABLE,
    REFUSAL_CALLS,
    REFUSAL_PARAMS,
    REFUSAL_SECOND,
    all_rows,
)

ROWS = all_rows()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_gradient_matches_finite_differences(row, dtype, device):
    rng = np.random.default_rng(1234)
    args = row.inputs(rng, dtype, device)
    report = ppto.check_grad(row.function(), *args, wrt=row.wrt)
    assert report.ok, f"{row.id}\n{report}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_result_stays_on_device_and_matches_cpu(row, device):
    rng = np.random.default_rng(7)
    args = row.inputs(rng, "float64", device)
    out = row.function()(*args)
    parts = out if isinstance(out, tuple) else (out,)
    assert all(part.device == device for part in parts)
    cpu_args = [a.to("cpu") if isinstance(a, ppto.Tensor) else a for a in args]
    expected = row.function()(*cpu_args)
    expected_parts = expected if isinstance(expected, tuple) else (expected,)
    for part, want in zip(parts, expected_parts):
        np.testing.assert_allclose(np.asarray(part), np.asarray(want), rtol=1e-12)


def test_every_differentiable_operator_has_a_row():
    covered = {row.op for row in ROWS}
    skipped = set(NON_DIFFERENTIABLE) | set(CONSTANT)
    missing = sorted(set(ppto._OPERATORS) - covered - skipped)
    assert not missing, f"operators without a table row: {missing}"


@pytest.mark.parametrize("name", NON_DIFFERENTIABLE)
def test_non_differentiable_operator_refuses_gradient(name):
    op = ppto._OPERATORS[name]
    x = ppto.tensor([[0.5, -1.5], [2.5, 0.25]])
    params = REFUSAL_PARAMS.get(name, {})
    second = REFUSAL_SECOND.get(name, lambda a: a * 2)
    call = (
        (lambda a: op(a, second(a)))
        if op.signature.arity == 2
        else (lambda a: op(a, **params))
    )
    if name in REFUSAL_CALLS:
        call = REFUSAL_CALLS[name](op)
    with pytest.raises(ppto.GradError, match="no gradient|not differentiable"):
        ppto.check_grad(call, x)


@pytest.mark.parametrize("name", ["zeros_like", "ones_like"])
def test_constant_operators_have_zero_gradient(name):
    x = ppto.tensor([1.0, 2.0, 3.0])
    report = ppto.check_grad(lambda a: a * 2 + ppto._OPERATORS[name](a), x)
    assert report.ok, str(report)
    with pytest.raises(ppto.GradError, match="does not depend"):
        ppto.check_grad(ppto._OPERATORS[name], x)


def test_stop_gradient_blocks_the_gradient_but_not_the_value():
    x = ppto.tensor([1.0, 2.0, 3.0])
    out, pullback = vjp_by_rules(lambda a: a * 2 + ppto.stop_gradient(a) ** 2, [x], [0])
    np.testing.assert_allclose(np.asarray(out), [3.0, 8.0, 15.0])
    (grad,) = pullback(ppto.ones_like(out))
    np.testing.assert_allclose(np.asarray(grad), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_every_operator_runs_its_cupy_code_path_on_emulated_cupy(emulated_cupy, row):
    # device 'cuda' served by the CuPy backend over tests/cuda_emulation.py's
    # emulated CuPy: each operator's CuPy route (and its rules') without a GPU
    args = row.inputs(np.random.default_rng(1234), "float64", "cuda")
    tensors = [a for a in args if isinstance(a, ppto.Tensor)]
    assert all(type(t.data).__name__ == "EmulatedCupyArray" for t in tensors)
    report = ppto.check_grad(row.function(), *args, wrt=row.wrt)
    assert report.ok, f"{row.id}\n{report}"
    test_result_stays_on_device_and_matches_cpu(row, "cuda")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x: ppto.pad(x, 1, mode="median"), "got mode='median'"),
        (
            lambda x: ppto.pad(x, 1, mode="edge", constant_values=2.0),
            "takes no constant_values",
        ),
        (lambda x: ppto.pad(x[:0], 1, mode="wrap"), "axis 0 of x has length 0"),
        (lambda x: ppto.pad(x, -1), "at least 0"),
        (lambda x: ppto.pad(x, 1.5), "whole numbers"),
        (lambda x: ppto.pad(x, ((1, 1), (1, 1), (1, 1))), "pair for each of the 2"),
        (lambda x: ppto.repeat(x, 1.5), "repeats must be a whole number"),
        (lambda x: ppto.repeat(x, [1, 2], axis=0), "repeat"),
        (lambda x: ppto.repeat(x, 2.5), "2.5 .NumPy would repeat 2 times"),
        (lambda x: ppto.diff(x, n=-1), "at least 0"),
        (lambda x: ppto.diff(x, 1.0), "whole number"),
        (
            lambda x: ppto.diag(ppto.reshape(x, (3, 2, 1))),
            r"vector or a matrix.*np.diagonal\(x, axis1=-2, axis2=-1\)",
        ),
        (lambda x: ppto.diag(x, 0.5), "k must be a whole number"),
        (lambda x: ppto.tril(x[0, 0]), "tril takes a vector, a matrix"),
        (lambda x: ppto.triu(x[0, 0]), "triu takes a vector, a matrix"),
        (lambda x: ppto.vstack([x, x[:, :1]]), "ppto.vstack"),
        (lambda x: ppto.hstack([x, x[0]]), r"vectors \(and numbers\) alone"),
        (lambda x: ppto.tensordot(x, x, axes=([0], [1])), "tensordot"),
        (lambda x: ppto.trace(x[0]), "trace"),
    ],
)
def test_rearranging_operators_name_a_bad_argument(call, message):
    x = ppto.tensor(np.ones((3, 2)))
    with pytest.raises(ppto.PptoError, match=message):
        call(x)


def test_sort_gives_tied_elements_a_valid_subgradient():
    # tied values: each takes the gradient of one of the places they sort into
    x = np.array([0.5, -1.0, 0.5, 2.0])
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    grad = ppto.grad(lambda a: ppto.sum(ppto.sort(a) * weights))(x)
    np.testing.assert_allclose(np.asarray(grad)[[1, 3]], [1.0, 4.0])
    np.testing.assert_allclose(sorted(np.asarray(grad)[[0, 2]]), [2.0, 3.0])


def ranked_stably(x):
    order = np.argsort(x, kind="stable")
    ordered = np.take_along_axis(x, order, 0)
    return np.sum(ordered * np.arange(x.size)) + np.sum(np.sort(x, stable=True) ** 2)


def test_sort_and_argsort_take_numpys_kind_and_stable():
    # each was refused ("ppto.argsort got an unexpected argument 'kind'"); with
    # ties, kind='stable' decides the order argsort gives them
    x = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 2.0, 2.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    tensor = ppto.tensor(x)
    for keywords in ({"kind": "stable"}, {"stable": True}, {"kind": "heapsort"}):
        expected = np.argsort(x, **keywords)
        np.testing.assert_array_equal(np.argsort(tensor, **keywords).numpy(), expected)
        np.testing.assert_array_equal(np.sort(tensor, **keywords).numpy(), x[expected])
    np.testing.assert_array_equal(
        tensor.argsort(kind="stable").numpy(), x.argsort(kind="stable")
    )
    tensor.sort(kind="stable")  # (in place, as ndarray.sort)
    np.testing.assert_array_equal(tensor.numpy(), np.sort(x))
    value, grad = ppto.value_and_grad(ranked_stably)(x)
    assert float(value) == pytest.approx(ranked_stably(x))
    ranks = np.empty(x.size)
    ranks[np.argsort(x, kind="stable")] = np.arange(x.size)
    np.testing.assert_allclose(np.asarray(grad), ranks + 2 * x)


@pytest.mark.parametrize(
    "name, args",
    [
        ("cumsum", (None, "int64")),
        ("cumprod", (None, "int64")),
        ("trace", (0, 0, 1, "int64")),
    ],
)
def test_a_running_sum_or_trace_made_whole_numbers_passes_no_gradient(name, args):
    # called directly, the rules gave dY's running sums (cumsum's also in dtype=,
    # not x's, where x was a vector): a conversion to whole numbers has no derivative
    x = ppto.tensor(np.array([[0.3, 1.1], [2.05, -0.4]]))
    op = ppto._OPERATORS[name]
    out = op(x, *args)
    backward = ppto.get_grad_rule(op)(x, *args)
    gradient = backward(ppto.ones_like(out))
    assert gradient.dtype == np.float64
    np.testing.assert_array_equal(gradient.numpy(), np.zeros((2, 2)))
    vector = ppto.tensor(np.array([0.3, 1.1, 2.05]))
    rule = ppto.get_grad_rule(ppto._OPERATORS["cumsum"])(vector, None, "float32")
    assert rule(ppto.ones_like(vector).astype("float32")).dtype == np.float64


def clipped_by_differentiated_bound(x, lo):
    return np.sum(np.clip(x, lo, 1.0))


def test_clip_refuses_bounds_that_widen_x_and_differentiates_bounds():
    # bounds of shape (2, 1) made a (2, 3) result from x of shape (3,), whose
    # gradient came out (2, 3) (a GradError, after the transform)
    x = ppto.tensor(np.array([-1.0, 0.3, 0.1]))
    with pytest.raises(ppto.ShapeError, match=r"np.broadcast_to\(x, \(2, 3\)\)"):
        np.clip(x, np.zeros(3), np.ones((2, 1)))
    # a differentiated bound is clip as NumPy defines it, minimum(maximum(x, lo),
    # hi): the gradient goes to whichever is taken (it was refused)
    point = (np.array([-1.0, 0.3, 0.1]), np.array([-0.5, 0.4, 0.0]))
    gradients = ppto.grad(clipped_by_differentiated_bound, wrt=(0, 1))(*point)
    for position, gradient in enumerate(gradients):
        expected = central_differences(clipped_by_differentiated_bound, point, position)
        assert_gradient(np.asarray(gradient), expected, f"d/d arg {position}")
