"""The graph family: segment_sum / segment_mean / segment_max against naive loops,
tie sharing in segment_max, second-order rules, a message-passing layer through the
gradient checker, and the errors for bad ids."""

import numpy as np
import pytest

import ppto
from tests.conftest import DEVICES

OPS = ["segment_sum", "segment_mean", "segment_max"]


def loop_reference(name, data, ids, num_segments):
    """The segment reduction written as a Python loop over segments and rows."""
    data = np.asarray(data, dtype=np.float64)
    count = int(max(ids)) + 1 if num_segments is None else num_segments
    out = np.zeros((count,) + data.shape[1:])
    for segment in range(count):
        rows = [data[i] for i in range(len(ids)) if ids[i] == segment]
        if not rows:
            continue
        if name == "segment_sum":
            out[segment] = sum(rows)
        elif name == "segment_mean":
            out[segment] = sum(rows) / len(rows)
        else:
            out[segment] = np.max(np.stack(rows), axis=0)
    return out


CASES = [
    ((6,), [2, 0, 2, 1, 0, 2], None),
    ((6, 3), [3, 0, 3, 3, 1, 0], 6),
    ((4, 2, 3), [1, 1, 1, 1], 3),
    ((5, 2), [0, 1, 2, 3, 4], None),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape, ids, num_segments", CASES)
def test_matches_loop_reference(name, shape, ids, num_segments, device):
    data = np.random.default_rng(3).standard_normal(shape)
    out = getattr(ppto, name)(
        ppto.tensor(data, device=device),
        ppto.tensor(np.array(ids), device=device),
        num_segments=num_segments,
    )
    assert out.device == device
    expected = loop_reference(name, data, ids, num_segments)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", OPS)
def test_keeps_float32_and_accepts_other_integer_ids(name):
    data = np.arange(8, dtype=np.float32).reshape(4, 2) - 5
    for id_dtype in (np.int32, np.uint8, np.uint64):
        ids = np.array([1, 0, 1, 3], dtype=id_dtype)
        out = getattr(ppto, name)(ppto.tensor(data), ids)
        assert out.dtype == np.float32
        expected = loop_reference(name, data, ids, None)
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_empty_segments_give_zero_even_when_every_value_is_negative():
    data = ppto.tensor([[-3.0, -1.0], [-2.0, -5.0]])
    out = ppto.segment_max(data, [2, 2], num_segments=4)
    np.testing.assert_array_equal(np.asarray(out), [[0, 0], [0, 0], [-2, -1], [0, 0]])
    ints = ppto.segment_max(np.array([-7, -4, -9]), [1, 1, 1])
    assert ints.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(ints), [0, -4])


@pytest.mark.parametrize("name", OPS)
def test_no_rows_give_num_segments_zero_rows(name):
    out = getattr(ppto, name)(ppto.zeros((0, 3)), np.zeros(0, np.int64), 2)
    assert out.shape == (2, 3)
    assert not np.asarray(out).any()
    assert getattr(ppto, name)(ppto.zeros((0,)), np.zeros(0, np.int64)).shape == (0,)


# --- gradients ----------------------------------------------------------------------


def test_segment_max_shares_the_gradient_among_tied_maxima():
    data = ppto.tensor([[1.0, 5.0], [3.0, 5.0], [3.0, 4.0], [2.0, 2.0]])
    ids = np.array([0, 0, 0, 1])
    out = ppto.segment_max(data, ids, num_segments=3)
    backward = ppto.get_grad_rule(ppto.segment_max)(data, ids, 3, out=out)
    grad, ids_grad = backward(ppto.tensor([[6.0, 4.0], [1.0, 1.0], [7.0, 7.0]]))
    assert ids_grad is None
    expected = [[0.0, 2.0], [3.0, 2.0], [3.0, 0.0], [1.0, 1.0]]
    np.testing.assert_allclose(np.asarray(grad), expected)
    tangent = ppto.get_jvp_rule(ppto.segment_max)(data, ids, 3, out=out)
    step = ppto.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    moved = tangent(step, ppto.zeros_like(ids))
    np.testing.assert_allclose(np.asarray(moved), [[4.0, 3.0], [7.0, 8.0], [0, 0]])


@pytest.mark.parametrize("name", OPS)
def test_ids_are_not_differentiable(name):
    op = getattr(ppto, name)
    data = ppto.tensor([[0.5, -1.0], [2.0, 0.25], [1.5, 3.0]])
    with pytest.raises(ppto.GradError, match="floating point"):
        ppto.check_grad(op, data, np.array([0, 1, 1]), wrt=1)


@pytest.mark.parametrize("name", OPS)
def test_backward_rules_are_differentiable(name):
    """Second order: the backward rule, as a function of the incoming gradient and
    of the data, goes through the gradient checker."""
    op = getattr(ppto, name)
    rng = np.random.default_rng(5)
    data = ppto.tensor(rng.standard_normal((6, 2)))
    ids = np.array([2, 0, 2, 2, 1, 0])
    backward = ppto.get_grad_rule(op)(data, ids, 4)
    dY = ppto.tensor(rng.standard_normal((4, 2)))
    report = ppto.check_grad(lambda d: backward(d)[0], dY)
    assert report.ok, str(report)

    def gradient_of_squares(x):
        # d/dx sum(op(x)**2): the backward rule applied to a cotangent depending on x.
        out = op(x, ids, 4)
        return ppto.get_grad_rule(op)(x, ids, 4, out=out)(2 * out)[0]

    report = ppto.check_grad(gradient_of_squares, data)
    assert report.ok, str(report)


def message_passing(features, weight, sources, targets, aggregate="segment_sum"):
    """One GNN layer: each edge carries its source's features times ``weight`` to its
    target; a node pools its incoming messages and applies tanh."""
    messages = ppto.dot(ppto.gather(features, sources), weight)
    pooled = getattr(ppto, aggregate)(messages, targets, features.shape[0])
    return ppto.tanh(pooled)


EDGES = (np.array([0, 1, 1, 2, 3, 4, 4, 0]), np.array([1, 0, 2, 1, 1, 3, 0, 3]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("aggregate", OPS)
def test_message_passing_gradients(aggregate, device):
    rng = np.random.default_rng(11)
    features = ppto.tensor(rng.standard_normal((6, 3)), device=device)
    weight = ppto.tensor(rng.standard_normal((3, 4)) * 0.5, device=device)
    sources, targets = EDGES

    def layer(x, w):
        return message_passing(x, w, sources, targets, aggregate)

    report = ppto.check_grad(layer, features, weight, wrt=(0, 1))
    assert report.ok, str(report)


def test_message_passing_matches_dense_adjacency():
    rng = np.random.default_rng(12)
    features, weight = rng.standard_normal((6, 3)), rng.standard_normal((3, 4))
    sources, targets = EDGES
    adjacency = np.zeros((6, 6))
    np.add.at(adjacency, (targets, sources), 1.0)
    out = message_passing(ppto.tensor(features), ppto.tensor(weight), sources, targets)
    expected = np.tanh(adjacency @ features @ weight)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12)
    assert not np.asarray(out)[5].any(), "node 5 receives no edge"


# --- errors -------------------------------------------------------------------------


DATA = ppto.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])


@pytest.mark.parametrize("name", OPS)
def test_float_ids_are_refused(name):
    with pytest.raises(ppto.DTypeError, match=rf"ppto\.{name}.*float64.*astype"):
        getattr(ppto, name)(DATA, np.array([0.0, 1.0, 1.0]))


@pytest.mark.parametrize(
    "ids, num_segments, message",
    [
        ([0, 1], None, r"2 entries but data \(shape \(3, 2\)\) has 3 rows"),
        ([0, 3, 1], 2, r"segment id 3 is out of range .* num_segments=4 or more"),
        ([0, -2, 1], None, r"segment id -2 is negative.*drop those rows"),
        ([0, 1, 1], 1.5, "num_segments must be an integer or None, got 1.5"),
        ([0, 1, 1], -1, "num_segments must be >= 0, got -1"),
        ([[0, 1, 1]], None, "must have 1 axes"),
    ],
)
@pytest.mark.parametrize("name", OPS)
def test_bad_ids_raise_shape_errors(name, ids, num_segments, message):
    with pytest.raises(ppto.ShapeError, match=rf"ppto\.{name}.*{message}"):
        getattr(ppto, name)(DATA, ids, num_segments)


def test_scalar_data_is_refused():
    with pytest.raises(ppto.ShapeError, match="data \\(shape \\(\\)\\) has a scalar"):
        ppto.segment_sum(ppto.tensor(1.0), [0])
