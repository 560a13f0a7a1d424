"""Symbolic nodes across the operator table: every operator applied to symbols
builds ``ppto.Operator`` nodes whose repr reads as the call that builds them, and
rebuilding a node from its parts (``op.call_with_inputs(node.inputs,
node.params)``, or ``op(*node.args)`` where calls by position take the operator's
own order) computes what the node computes, the operator on the values; where
calls by position take NumPy's order, ``op(*node.args)`` raises a PptoError that
says how to rebuild instead of building another computation."""

import re
import warnings

import numpy as np
import pytest

import ppto
from tests.optable import all_rows

ROWS = all_rows()


def symbolic_call(row):
    """``(result with symbols, result with values, symbols' values by name)``."""
    values = row.inputs(np.random.default_rng(5), "float64", "cpu")
    symbols, env = [], {}
    for number, (spec, value) in enumerate(zip(row.args, values)):
        if hasattr(spec, "make"):
            name = f"s{number}"
            dtype = str(np.asarray(value).dtype)
            symbols.append(ppto.symbol(name, tuple(spec.shape), dtype))
            env[name] = value
        else:
            symbols.append(spec)
    function = row.function()
    return function(*symbols), function(*values), env


def nodes_in(value):
    if isinstance(value, ppto.Operator):
        yield value
        for item in value.inputs:
            yield from nodes_in(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from nodes_in(item)


def assert_same(actual, expected, what):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), what
        for number, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{what}[{number}]")
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: {actual.shape} {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12, err_msg=what)


def evaluated(expr, env):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (NaN rows: nanmean of an all-NaN slice)
        return ppto.evaluate(expr, env)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_a_node_rebuilt_from_its_parts_computes_the_same(row):
    expr, concrete, env = symbolic_call(row)
    assert_same(evaluated(expr, env), concrete, f"{row.id}: evaluate")
    nodes = list(nodes_in(expr))
    assert nodes, f"{row.id}: no Operator node"
    for node in nodes:
        op = node.op
        text = repr(node)
        assert text.startswith(f"{op.name}(") and text.endswith(")"), text
        assert "<" not in text and " at 0x" not in text, text
        assert node.args[: len(node.inputs)] == node.inputs
        expected = evaluated(node, env)
        rebuilt = op.call_with_inputs(node.inputs, node.params)
        assert repr(rebuilt) == text
        assert_same(evaluated(rebuilt, env), expected, f"{text}: call_with_inputs")
        if getattr(op, "positional", ()):
            with pytest.raises(ppto.PptoError, match="call_with_inputs"):
                op(*node.args)
        else:
            again = op(*node.args)
            assert_same(evaluated(again, env), expected, f"{text}: op(*args)")


def test_the_repr_of_an_operator_taking_numpys_order_reads_as_its_call():
    x, edge = ppto.symbol("x", (3, 4)), ppto.symbol("edge", (3, 1))
    values = {"x": np.arange(12.0).reshape(3, 4) ** 2, "edge": np.ones((3, 1))}
    nodes = [
        ppto.pad(x, 1, constant_values=0.5),
        ppto.diff(x, 2, 0),
        ppto.diff(x, prepend=edge, append=edge),
        ppto.average(x, 1, weights=ppto.symbol("w", (4,))),
        ppto.quantile(x, 0.25, axis=0, method="lower"),
    ]
    values["w"] = np.array([1.0, 2.0, 3.0, 4.0])
    texts = [repr(node) for node in nodes]
    assert texts[0] == "pad(x, constant_values=0.5, pad_width=1, mode='constant')"
    assert texts[1] == "diff(x, n=2, axis=0)"
    assert texts[2] == "diff(x, prepend=edge, append=edge, n=1, axis=-1)"
    assert texts[3].startswith("average(x, weights=w, axis=1")
    assert texts[4].startswith("quantile(x, q=0.25, axis=0")
    names = {**{node.op.name: node.op for node in nodes}, "x": x, "edge": edge}
    names["w"] = ppto.symbol("w", (4,))
    for node, text in zip(nodes, texts):
        again = eval(text, names)  # (the repr is the call: read by the operator)
        assert_same(evaluated(again, values), evaluated(node, values), text)


def test_calls_by_position_in_numpys_order_still_work():
    x = np.arange(12.0).reshape(3, 4) ** 2
    np.testing.assert_allclose(np.asarray(ppto.diff(x, 2, 0)), np.diff(x, 2, 0))
    np.testing.assert_allclose(
        np.asarray(ppto.diff(x, np.int64(1))), np.diff(x, np.int64(1))
    )
    w = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(
        np.asarray(ppto.average(x, 1, w)), np.average(x, 1, w), rtol=1e-12
    )
    # a float for n is a number out of range, not an input out of place
    with pytest.raises(ppto.PptoError, match="n must be a whole number"):
        ppto.diff(x, 1.5)


def test_an_operator_with_several_results_is_unpacked_symbolically():
    a = ppto.symbol("a", (3, 3))
    pair = ppto.eigh(a)
    assert len(pair) == 2
    values, vectors = pair
    assert values.shape == (3,) and vectors.shape == (3, 3)
    assert repr(vectors) == "getitem(eigh(a, UPLO='L'), index=1)"
    with pytest.raises(ppto.PptoError, match="2 results"):
        pair.shape  # noqa: B018  (a shape is worked out when asked for)
    matrix = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 1.0]])
    w, v = np.linalg.eigh(matrix)
    product = ppto.evaluate(vectors * values, {"a": matrix})
    np.testing.assert_allclose(np.asarray(product), v * w, rtol=1e-12)


def test_an_operator_of_a_list_of_different_shapes_has_a_shape():
    a, b, c = (
        ppto.symbol(n, s) for n, s in (("a", (2, 3)), ("b", (3, 4)), ("c", (4,)))
    )
    product = ppto.multi_dot([a, b, c])
    assert product.shape == (2,)


# What a node's shape may not be known for: a shape set by the values (segment_sum
# without num_segments), several results, or stand-in values no input can take
# (divide_by_gaps is undefined at the repeated values every stand-in has).
UNKNOWN_SHAPE = "depends on its inputs' values|results \\(shapes|repeated eigenvalue"


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_a_nodes_shape_is_its_values_shape(row):
    """Worked out without the values: inv, solve and cholesky of constant
    stand-ins raised LinAlgError, clip's array bounds a ShapeError."""
    expr, _, env = symbolic_call(row)
    for node in nodes_in(expr):
        value = evaluated(node, env)
        try:
            shape = node.shape
        except ppto.PptoError as error:
            assert re.search(UNKNOWN_SHAPE, str(error)), f"{node!r}: {error}"
            continue
        assert shape == tuple(np.shape(np.asarray(value))), repr(node)
        assert node.dtype == np.asarray(value).dtype, repr(node)


def test_diffs_args_of_numbers_or_arrays_are_refused_not_read_in_numpys_order():
    """diff is the one operator whose own order has as many arguments as NumPy's:
    op(*node.args) with prepend and append given as numbers (or arrays) read as
    NumPy's n and axis built another node (diff(x, prepend=1, append=2, n=1,
    axis=0) gave n=1, axis=2, prepend=1, append=0); it is refused, and the node
    rebuilt from its parts is the same."""
    x = ppto.symbol("x", (2, 3, 4))
    ones = np.ones((1, 3, 4))
    value = {"x": np.arange(24.0).reshape(2, 3, 4) ** 2}
    nodes = [
        ppto.diff(x, prepend=1, append=2, n=1, axis=0),
        ppto.diff(x, prepend=0.5, append=0.25),
        ppto.diff(x, prepend=ones, append=2.0 * ones, axis=0),
    ]
    for node in nodes:
        with pytest.raises(ppto.PptoError, match="call_with_inputs"):
            node.op(*node.args)
        rebuilt = node.op.call_with_inputs(node.inputs, node.params)
        assert repr(rebuilt) == repr(node)
        assert_same(evaluated(rebuilt, value), evaluated(node, value), repr(node))
    expected = np.diff(value["x"], 1, 0, prepend=1, append=2)
    assert_same(evaluated(nodes[0], value), expected, "diff(prepend=1, append=2)")
    # NumPy's order with every argument by position and a symbol: refused as
    # ambiguous (by name it is read as written)
    with pytest.raises(ppto.PptoError, match="by name"):
        ppto.diff(x, 1, 0, 1, 2)
    # without a symbol the call is NumPy's; an array is no number for n
    np.testing.assert_allclose(
        np.asarray(ppto.diff(value["x"], 1, 0, ones, ones)),
        np.diff(value["x"], 1, 0, ones, ones),
    )
    with pytest.raises(ppto.PptoError, match="for 'n'"):
        ppto.diff(value["x"], ones, ones, 1, -1)


# operators without a row in tests/optable.py (not differentiable): a node and
# the values of its symbols
UNTABLED = [
    ("argmax", lambda x, i: ppto.argmax(x, axis=1, keepdims=True)),
    ("argmin", lambda x, i: ppto.argmin(x, 0)),
    ("argsort", lambda x, i: ppto.argsort(x, axis=0)),
    ("one_hot", lambda x, i: ppto.one_hot(i, 5, dtype="float32")),
    ("zeros_like", lambda x, i: ppto.zeros_like(x, dtype="float32")),
    ("ones_like", lambda x, i: ppto.ones_like(x)),
    ("round", lambda x, i: ppto.round(x)),
    ("sign", lambda x, i: ppto.sign(x)),
    ("floor_divide", lambda x, i: ppto.floor_divide(x, 0.3)),
    ("greater", lambda x, i: ppto.greater(x, 0.1)),
    ("logical_not", lambda x, i: ppto.logical_not(ppto.isfinite(x))),
    ("stop_gradient", lambda x, i: ppto.stop_gradient(x)),
]


@pytest.mark.parametrize(
    "build", [b for _, b in UNTABLED], ids=[n for n, _ in UNTABLED]
)
def test_an_untabled_operators_node_is_rebuilt_by_its_args(build):
    x, i = ppto.symbol("x", (3, 4)), ppto.symbol("i", (4,), "int64")
    values = {
        "x": np.random.default_rng(3).normal(size=(3, 4)),
        "i": np.array([0, 3, 1, 4]),
    }
    node = build(x, i)
    assert isinstance(node, ppto.Operator)
    expected = evaluated(node, values)
    assert_same(expected, build(values["x"], values["i"]), repr(node))
    again = node.op(*node.args)
    assert repr(again) == repr(node)
    assert_same(evaluated(again, values), expected, f"{node!r}: op(*args)")
