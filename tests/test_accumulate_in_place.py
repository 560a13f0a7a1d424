"""Loop accumulators added into in place in lowered CPU code
(ppto/transform/accumulate_in_place.py): where the rewrite applies, where it must
not (another statement reads the accumulator or holds its array), its fallbacks,
and gradients against float64 central differences."""

import ast
import io
import textwrap

import gast
import numpy as np

import ppto
from ppto.transform.accumulate_in_place import accumulate_in_place, add_into
from ppto.transform.emit import render_function
from ppto.transform.syntax import to_gast
from tests.corpus.checks import central_differences


def rnn(x, h, Wx, Wh, b):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ Wx + h @ Wh + b)
    return np.sum(h**2)


def rnn_arguments():
    rng = np.random.default_rng(3)
    return (
        rng.standard_normal((4, 3, 5)),
        rng.standard_normal((3, 6)) * 0.5,
        rng.standard_normal((5, 6)) * 0.3,
        rng.standard_normal((6, 6)) * 0.3,
        rng.standard_normal(6) * 0.1,
    )


def lowered_code(function, arguments, wrt) -> str:
    return ppto.show_grad(
        function, *arguments, wrt=wrt, lowered=True, file=io.StringIO()
    )


def code_lines(text: str) -> list:
    return [line.strip() for line in text.splitlines() if "#" not in line]


def assert_matches_differences(function, arguments, wrt):
    gradients = ppto.grad(function, wrt=wrt)(*arguments)
    for position, gradient in zip(wrt, gradients):
        expected = central_differences(function, arguments, position)
        np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-9)


def test_rnn_weight_gradients_add_into_their_zeros():
    arguments = rnn_arguments()
    lines = code_lines(lowered_code(rnn, arguments, (2, 3, 4)))
    for gradient in ("dWx", "dWh", "db"):
        assert f"{gradient} = xp.zeros_like" in "\n".join(lines)
        written = f"{gradient} = add_into({gradient}, "
        assert any(line.startswith(written) for line in lines)
    assert_matches_differences(rnn, arguments, (2, 3, 4))


def test_repeated_calls_start_from_zeros():
    # the array written into is made by each call: a second call must not add
    # into the first call's gradient
    arguments = rnn_arguments()
    gradient = ppto.grad(rnn, wrt=(2, 3, 4))
    first = [np.array(g) for g in gradient(*arguments)]
    for _ in range(3):
        again = gradient(*arguments)
        for a, b in zip(first, again):
            np.testing.assert_array_equal(np.asarray(b), a)


def rewritten(source: str) -> str:
    """``source``'s function after the pass (``zeros(...)`` makes new zeros)."""
    definition = to_gast(ast.parse(textwrap.dedent(source)).body[0])

    def is_zeros(node):
        return isinstance(node, gast.Call) and getattr(node.func, "id", "") == "zeros"

    accumulate_in_place(definition, is_zeros, lambda function, name: name)
    return render_function(definition)


def test_pass_rewrites_an_accumulator_nothing_else_sees():
    text = rewritten(
        """
        def f(x, W):
            dW = zeros(W)
            for t in reversed(range(3)):
                g = x[t] * 2
                dW = dW + g.T @ x[t]
            return dW
        """
    )
    assert "dW = add_into(dW, g.T @ x[t])" in text


def test_pass_leaves_accumulators_another_statement_can_see():
    cases = {
        "kept each turn": "dW = dW + x[t]\n        kept.append(dW)",
        "read by another": "y = dW * 2\n        dW = dW + x[t]",
        "added twice": "dW = dW + x[t]\n        dW = dW + x[t]",
        "read in its value": "dW = dW + dW * x[t]",
    }
    for label, body in cases.items():
        text = rewritten(
            f"""
def f(x, W, kept):
    dW = zeros(W)
    for t in range(3):
        {body}
    return dW
"""
        )
        assert "add_into" not in text, label
    aliased = """
        def f(x, W):
            dW = zeros(W)
            other = dW
            for t in range(3):
                dW = dW + x[t]
            return dW, other
        """
    assert "add_into" not in rewritten(aliased)
    not_zeros = """
        def f(x, W):
            dW = W
            for t in range(3):
                dW = dW + x[t]
            return dW
        """
    assert "add_into" not in rewritten(not_zeros)


def test_add_into_writes_only_same_shape_and_dtype():
    total = np.zeros(3)
    assert add_into(total, np.ones(3)) is total
    np.testing.assert_array_equal(total, [1.0, 1.0, 1.0])
    # another dtype: the sum as NumPy makes it, total untouched
    wide = np.zeros(3, np.float32)
    out = add_into(wide, np.ones(3))
    assert out is not wide and out.dtype == np.float64
    np.testing.assert_array_equal(wide, [0.0, 0.0, 0.0])
    # broadcasting to a larger shape, a number, a 0-d array, a read-only array
    row = np.zeros(3)
    assert add_into(row, np.ones((2, 3))).shape == (2, 3)
    assert add_into(row, 2.0) is not row
    scalar = np.zeros(())
    assert add_into(scalar, np.ones(())) is not scalar
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    assert add_into(frozen, np.ones(3)) is not frozen
    np.testing.assert_array_equal(row, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(frozen, [0.0, 0.0, 0.0])
