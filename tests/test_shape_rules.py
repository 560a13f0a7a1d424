"""Every shape rule in ``ppto.ops.shapes`` against its operator's implementation: the
shape a rule tells the analysis must be the shape the operator returns (code after
it is specialised on it), and where a rule cannot tell it says None."""

import io
import re

import numpy as np
import pytest

import ppto
from ppto.ops.primitive import OPERATORS
from ppto.ops.shapes import (
    ABSENT,
    LIKE_RESULTS,
    SAME_AS_FIRST,
    SHAPE_RULES,
    result_shape,
)

RNG = np.random.default_rng(0)
NCHW, NHWC = {"layout": "nchw"}, {"layout": "nhwc"}
POOL = {"kernel_size": 2, **NCHW}


def arrays(*shapes):
    return [RNG.standard_normal(shape) for shape in shapes]


def spd(n, *batch):
    a = RNG.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# (operator, inputs, parameters): each row runs the implementation and the rule
CASES = [
    ("sort", arrays((3, 4)), {"axis": 0}),
    ("sort", arrays((3, 4)), {"axis": None}),
    ("argsort", arrays((2, 5)), {"axis": -1}),
    ("partition", arrays((3, 4)), {"kth": 1, "axis": 0}),
    ("partition", arrays((3, 4)), {"kth": [1, 5], "axis": None}),
    ("unary_einsum", arrays((3, 3)), {"subscripts": "ii->i"}),
    ("unary_einsum", arrays((2, 3, 4)), {"subscripts": "...ij->...ji"}),
    ("unary_einsum", arrays((3, 4)), {"subscripts": "ji"}),
    ("column_stack", [arrays((3,), (3, 2))], {}),
    ("dstack", [arrays((3,), (1, 3, 2))], {}),
    ("dstack", [arrays((2, 3), (2, 3))], {}),
    ("cumsum", arrays((3, 4)), {}),
    ("cumsum", arrays((3, 4)), {"axis": 1}),
    ("cumprod", arrays((2, 3, 2)), {"axis": -2}),
    ("sliding_window_view", arrays((4, 5)), {"window_shape": (2, 3)}),
    ("sliding_window_view", arrays((2, 5, 4)), {"window_shape": 3, "axis": 2}),
    ("sliding_window_view", arrays((2, 5)), {"window_shape": (3, 2), "axis": (1, 0)}),
    ("sliding_window_view", arrays((2, 5, 4)), {"window_shape": 3, "axis": (1,)}),
    ("sliding_window_view", arrays((6,)), {"window_shape": 4, "axis": -1}),
    ("tril", arrays((3, 4)), {"k": 1}),
    ("tril", arrays((3,)), {"k": -1}),
    ("triu", arrays((2, 3, 4)), {}),
    ("triu", arrays((4,)), {"k": 2}),
    ("flip", arrays((3, 4)), {}),
    ("flip", arrays((3, 4, 2)), {"axis": (0, 2)}),
    ("flatten", arrays((3, 4, 2)), {}),
    ("swapaxes", arrays((3, 4, 2)), {"axis1": 0, "axis2": -1}),
    ("moveaxis", arrays((3, 4, 2)), {"source": 0, "destination": -1}),
    ("moveaxis", arrays((3, 4, 2)), {"source": (0, 1), "destination": (2, 0)}),
    ("diagonal", arrays((3, 4, 2)), {"offset": 1, "axis1": 0, "axis2": 1}),
    ("diagonal", arrays((4, 3)), {"offset": -2}),
    ("trace", arrays((3, 4, 2)), {"offset": 0, "axis1": 1, "axis2": 2}),
    ("trace", arrays((4, 4)), {}),
    ("diag", arrays((3,)), {"k": 2}),
    ("diag", arrays((3,)), {"k": -1}),
    ("diag", arrays((3, 5)), {"k": 1}),
    ("concat", [arrays((2, 3), (4, 3))], {"axis": 0}),
    ("concat", [arrays((2, 3), (2, 1), (2, 2))], {"axis": -1}),
    ("concat", [arrays((2, 3), (4,))], {"axis": None}),
    ("stack", [arrays((2, 3), (2, 3))], {"axis": 1}),
    ("stack", [arrays((2, 3), (2, 3), (2, 3))], {"axis": -1}),
    ("vstack", [arrays((3,), (2, 3))], {}),
    ("vstack", [arrays((), ())], {}),
    ("hstack", [arrays((3,), (2,))], {}),
    ("hstack", [arrays((2, 3), (2, 1))], {}),
    ("pad", arrays((3, 4), ()), {"pad_width": 2}),
    ("pad", arrays((3, 4), ()), {"pad_width": ((1, 0), (2, 3))}),
    ("pad", arrays((3, 4), ()), {"pad_width": (1, 2)}),
    ("tile", arrays((3, 4)), {"reps": 2}),
    ("tile", arrays((3,)), {"reps": (2, 1, 3)}),
    ("repeat", arrays((3, 4)), {"repeats": 2}),
    ("repeat", arrays((3, 4)), {"repeats": 3, "axis": -1}),
    ("diff", [*arrays((3, 5)), None, None], {"n": 2, "axis": -1}),
    ("diff", [*arrays((3, 5), (3, 2)), None], {"n": 1, "axis": 1}),
    ("diff", [*arrays((3, 5)), 0.0, 1.0], {"n": 1, "axis": 0}),
    ("outer", arrays((3,), (2, 2)), {}),
    ("inner", arrays((3, 4), (2, 4)), {}),
    ("inner", arrays((), (2, 4)), {}),
    ("vdot", arrays((3, 4), (12,)), {}),
    ("numpy_dot", arrays((3, 4), (4,)), {}),
    ("numpy_dot", arrays((4,), (4, 2)), {}),
    ("numpy_dot", arrays((2, 3, 4), (4, 2)), {}),
    ("numpy_dot", arrays((4,), (4,)), {}),
    ("tensordot", arrays((3, 4, 5), (4, 5, 2)), {"axes": 2}),
    ("tensordot", arrays((3, 4), (2, 3)), {"axes": ((0,), (1,))}),
    ("tensordot", arrays((3, 4), (2, 3)), {"axes": 0}),
    ("tensordot", arrays((3, 4), (4, 3)), {"axes": (1, 0)}),
    ("einsum", arrays((3, 4), (4, 5)), {"subscripts": "ij,jk->ik"}),
    ("einsum", arrays((3, 4), (4, 5)), {"subscripts": "ij,jk"}),
    ("einsum", arrays((3, 4), (3, 4)), {"subscripts": "ij,ij->"}),
    ("det", [spd(3, 2)], {}),
    ("solve", [spd(3), *arrays((3,))], {}),
    ("solve", [spd(3, 2), *arrays((2, 3, 4))], {}),
    ("solve", [spd(3, 2), *arrays((3, 1))], {}),
    ("norm", arrays((3, 4)), {"axis": 1}),
    ("norm", arrays((3, 4)), {"axis": 0, "keepdims": True}),
    ("norm", arrays((3, 4)), {}),
    ("average", arrays((3, 4), (3, 4)), {"axis": 1}),
    ("average", arrays((3, 4), (3, 4)), {}),
    ("conv2d", arrays((2, 3, 8, 7), (5, 3, 3, 3)), {"padding": 1, **NCHW}),
    ("conv2d", arrays((2, 8, 7, 3), (5, 3, 3, 2)), {"stride": 2, **NHWC}),
    ("conv2d", arrays((2, 3, 9, 9), (4, 3, 2, 2)), {"stride": (2, 1)} | NCHW),
    ("max_pool2d", arrays((2, 3, 8, 6)), {"kernel_size": 2, **NCHW}),
    ("avg_pool2d", arrays((2, 8, 6, 3)), {"kernel_size": 3, "stride": 1, **NHWC}),
    ("max_pool2d_tangent", arrays((2, 3, 8, 6), (2, 3, 8, 6)), POOL),
    ("max_pool2d_backward", arrays((2, 3, 4, 3), (2, 3, 8, 6)), POOL),
    ("take", [*arrays((5, 4)), np.array([[0, 2], [4, 1]])], {"axis": 0}),
    ("take", [*arrays((5, 4)), np.array([3, 1, 2])], {"axis": 1}),
    ("take", [*arrays((5, 4)), np.array([3, 1, 2])], {}),
    ("one_hot", [np.array([[0, 2], [1, 1]])], {"num_classes": 4}),
    ("segment_sum", [*arrays((5, 3)), np.array([0, 0, 1, 2, 2])], {"num_segments": 4}),
    ("segment_max", [*arrays((5,)), np.array([0, 0, 1, 2, 2])], {"num_segments": 3}),
    ("segment_mean", [*arrays((5, 2)), np.array([0, 1, 1, 2, 2])], {"num_segments": 3}),
]  # fmt: skip


def shape_of(value):
    return None if value is None else np.shape(value)


@pytest.mark.parametrize("name, inputs, params", CASES, ids=[c[0] for c in CASES])
def test_rule_gives_the_shape_the_operator_returns(name, inputs, params):
    op = OPERATORS[name]
    result = op.impl(np, *inputs, **params)
    shapes = [
        [np.shape(part) for part in x] if isinstance(x, list) else shape_of(x)
        for x in inputs
    ]
    shapes = [ABSENT if x is None else x for x in shapes]
    told = result_shape(name, shapes, {**op.defaults, **params})
    assert told == np.shape(result)


def test_every_rule_has_a_case_and_every_shape_operator_a_rule_or_a_reason():
    covered = {case[0] for case in CASES}
    assert set(SHAPE_RULES) <= covered
    # operators whose result shape the analysis still does not know: a tuple of
    # results, or a shape from the values (indices compared, the ids' count)
    untold = {
        "slogdet", "split", "split_joined", "unstack", "gather", "take_along_axis",
        "cross",
    }  # fmt: skip
    assert not untold & set(SHAPE_RULES)
    for name in SAME_AS_FIRST | LIKE_RESULTS:
        assert name in OPERATORS


@pytest.mark.parametrize(
    "name, inputs, params",
    [
        ("conv2d", [(2, 3, 8, 7), (5, 4, 3, 3)], {"padding": 0}),  # channels differ
        ("concat", [[(2, 3), (4, 2)]], {"axis": 0}),  # other axes differ
        ("stack", [[(2, 3), (2, 4)]], {"axis": 0}),
        ("tensordot", [(3, 4), (5, 3)], {"axes": 1}),
        ("repeat", [(3, 4)], {"repeats": [1, 2, 3]}),  # counts: their sum is a value
        ("einsum", [(3, 4), (4, 5)], {"subscripts": "...j,jk->...k"}),
        ("solve", [(3, 3), (4,)], {}),
        ("numpy_dot", [(2, 3, 4), (5, 4, 2)], {}),  # NumPy's pairing: refused
        ("segment_sum", [(5, 3), (5,)], {"num_segments": None}),
        ("sort", [(3, 4)], {"axis": 2}),
        ("concat", [[(2, 3), None]], {"axis": 0}),  # one shape unknown
    ],
)
def test_rule_says_none_where_the_shape_is_not_known_or_the_inputs_do_not_fit(
    name, inputs, params
):
    assert result_shape(name, inputs, {**OPERATORS[name].defaults, **params}) is None


def conv_block(x, w, b):
    h = ppto.conv2d(x, w, padding=1, layout="nhwc") + b
    return np.sum(np.tanh(h) * h)


def pooled_block(x, w, b):
    # no layout given: both operators take the image's (an nhwc tensor's) hint
    h = ppto.max_pool2d(ppto.conv2d(x, w, padding=1) + b, 2)
    return np.sum(np.tanh(h) * h)


@pytest.mark.parametrize("block", [conv_block, pooled_block])
def test_code_after_a_conv2d_is_specialised_and_its_gradient_right(block):
    """The bias gradient after a conv2d (and a max pooling) is a plain sum over the
    batch and image axes (the analysis knows their shapes, with the layout taken
    from the image where none is given), checked against differences."""
    x = ppto.tensor(RNG.standard_normal((2, 6, 4, 3)), layout="nhwc")
    w = RNG.standard_normal((4, 3, 3, 3)) * 0.3
    b = RNG.standard_normal(4) * 0.1
    source = ppto.show_grad(block, x, w, b, wrt=(1, 2), file=io.StringIO())
    assert "unbroadcast" not in source and "unreduce(" not in source
    assert re.search(r"db = reduce_sum\(d\w+, axis=\(0, 1, 2\)\)", source)
    dw, db = ppto.grad(block, wrt=(1, 2))(x, w, b)
    plain = np.asarray(x)

    def value(w_, b_):
        return float(np.asarray(block(ppto.tensor(plain, layout="nhwc"), w_, b_)))

    step = 1e-6
    for index in [(0, 0, 0, 0), (3, 2, 1, 2), (1, 1, 2, 0)]:
        moved = [w.copy(), w.copy()]
        moved[0][index] += step
        moved[1][index] -= step
        expected = (value(moved[0], b) - value(moved[1], b)) / (2 * step)
        assert np.isclose(np.asarray(dw)[index], expected, rtol=1e-6, atol=1e-8)
    for index in range(4):
        moved = [b.copy(), b.copy()]
        moved[0][index] += step
        moved[1][index] -= step
        expected = (value(w, moved[0]) - value(w, moved[1])) / (2 * step)
        assert np.isclose(np.asarray(db)[index], expected, rtol=1e-6, atol=1e-8)
