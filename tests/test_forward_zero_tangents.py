"""Zero tangents in forward mode have the shape of what they stand for.

A tangent rule that applies a shape-changing operator (reshape, transpose, a sum,
an index, a matrix product) to an input without a tangent simplifies the result to
zero; where that zero must still be written out (beside a non-zero tangent in a
``where``, a ``concat``, a tuple), it is zeros of the *result's* shape, not of the
input's. A function returning a tuple whose parts no tangent reaches gets zeros
part by part. Every tangent is checked against central differences (float64).
"""

import numpy as np
import pytest

import ppto
from ppto.ops.elementwise import where
from ppto.ops.indexing import getitem
from ppto.ops.linalg import dot
from ppto.ops.primitive import Primitive
from ppto.ops.reductions import reduce_sum
from ppto.ops.shape import concat, reshape, transpose
from tests.corpus.checks import as_float, assert_gradient, directional_differences

# Operators with tangent rules, as ppto's own are (registered nowhere: the operator
# table would want a row for them). Each rule combines a shape-changing operator of
# one input's tangent with the other's tangent in an operator that cannot drop a
# zero operand.


def _column_sums_then(xp, a, b):
    return xp.concatenate([xp.sum(a, axis=0), b])


column_sums_then = Primitive(_column_sums_then, "(Tensor[M,N], Tensor[K]) -> Tensor[L]")


@column_sums_then.jvp_rule
def _(a, b):
    def tangent(da, db):
        return concat([reduce_sum(da, 0), db])

    return tangent


def _transposed_or(xp, a, b):
    return xp.where(b > 0.0, a.T, b)


transposed_or = Primitive(_transposed_or, "(Tensor[M,N], Tensor[N,M]) -> Tensor[N,M]")


@transposed_or.jvp_rule
def _(a, b):
    def tangent(da, db):
        return where(b > 0.0, transpose(da), db)

    return tangent


def _flat_or(xp, a, b):
    return xp.where(b > 0.0, a.reshape(-1), b)


flat_or = Primitive(_flat_or, "(Tensor[M,N], Tensor[K]) -> Tensor[K]")


@flat_or.jvp_rule
def _(a, b):
    def tangent(da, db):
        flat = reshape(da, (-1,))
        return where(b > 0.0, flat, db)

    return tangent


def _first_row_or(xp, a, b):
    return xp.where(b > 0.0, a[0], b)


first_row_or = Primitive(_first_row_or, "(Tensor[M,N], Tensor[N]) -> Tensor[N]")


@first_row_or.jvp_rule
def _(a, b):
    def tangent(da, db):
        return where(b > 0.0, getitem(da, 0), db)

    return tangent


def _projected_or(xp, a, w, b):
    return xp.where(b > 0.0, a @ w, b)


projected_or = Primitive(
    _projected_or, "(Tensor[M,K], Tensor[K,N], Tensor[M,N]) -> Tensor[M,N]"
)


@projected_or.jvp_rule
def _(a, w, b):
    def tangent(da, dw, db):
        return where(b > 0.0, dot(da, w) + dot(a, dw), db)

    return tangent


RNG = np.random.default_rng(20)
A = RNG.uniform(-1.0, 1.0, (2, 3))
W = RNG.uniform(-1.0, 1.0, (3, 4))
MIXED = np.array([[0.5, -0.5], [-0.5, 0.5], [0.5, 0.5]])  # both paths of where


def sums_then(a, b):
    return np.sum(column_sums_then(a, b) ** 2)


def transposed(a, b):
    return np.sum(transposed_or(a, b) ** 2)


def flattened(a, b):
    return np.sum(flat_or(a, b) ** 2)


def first_row(a, b):
    return np.sum(first_row_or(a, b) ** 2)


def projected(a, w, b):
    return np.sum(projected_or(a, w, b) ** 2)


CASES = [
    pytest.param(sums_then, (A, np.array([0.3, -0.2])), id="sum"),
    pytest.param(transposed, (A, MIXED), id="transpose"),
    pytest.param(flattened, (A, MIXED.reshape(-1)), id="reshape"),
    pytest.param(first_row, (A, MIXED[:, 0]), id="index"),
    pytest.param(projected, (A, W, np.where(RNG.random((2, 4)) > 0.5, 1.0, -1.0) * 0.5),
                 id="matrix product"),
]  # fmt: skip


def check_jvp(function, arguments, positions):
    """jvp with a random tangent on each of ``positions`` (None on the others)."""
    rng = np.random.default_rng(len(positions))
    tangents = [None] * len(arguments)
    for position in positions:
        tangents[position] = rng.standard_normal(np.shape(arguments[position]))
    value, tangent = ppto.jvp(function, arguments, tuple(tangents))
    direction = {p: t for p, t in enumerate(tangents) if t is not None}
    plain = lambda *a: float(function(*a))  # noqa: E731  (the operators give Tensors)
    expected = directional_differences(plain, arguments, direction)
    assert float(value) == pytest.approx(plain(*arguments), rel=1e-12)
    assert_gradient(tangent, np.asarray(expected), f"{function.__name__} tangent")


@pytest.mark.parametrize("function, arguments", CASES)
def test_a_shape_changing_operator_of_no_tangent_gives_zeros_of_its_result(
    function, arguments
):
    # the last input alone has a tangent: the first input's, changed in shape by
    # the rule, is zero and written out beside it
    check_jvp(function, arguments, (len(arguments) - 1,))
    check_jvp(function, arguments, tuple(range(len(arguments))))


def parts(x, c):
    return c.reshape(-1) * 2.0, np.sum(c, axis=0), c[0].astype(np.float32)


def nested_parts(x, c):
    return (np.sum(x * x), (c.T, c[:, :1]))


def test_a_tuple_whose_parts_no_tangent_reaches_gets_zeros_per_part():
    x, c = np.array([0.5, -1.0]), A
    value, tangent = ppto.jvp(parts, (x, c), (np.ones(2), None))
    expected = parts(x, c)
    assert isinstance(tangent, tuple) and len(tangent) == len(expected)
    for part, primal in zip(tangent, expected):
        assert np.shape(part) == primal.shape and part.dtype == primal.dtype
        assert not np.any(np.asarray(part))
    # and with a tangent on c, each part matches differences (the float32 part,
    # linear in c, the tangent's first row itself: differences in float32 are
    # good to three digits only)
    direction = np.random.default_rng(3).standard_normal(c.shape)
    _, tangent = ppto.jvp(parts, (x, c), (None, direction))
    differences = directional_differences(parts, (x, c), {1: direction})
    for part, reference in zip(tangent[:2], differences[:2]):
        np.testing.assert_allclose(as_float(part), reference, rtol=1e-7, atol=1e-9)
    assert tangent[2].dtype == np.float32
    np.testing.assert_allclose(np.asarray(tangent[2]), direction[0], rtol=1e-6)


def test_a_nested_tuple_part_no_tangent_reaches_gets_zeros_of_its_parts():
    x, c = np.array([0.5, -1.0]), A
    _, (first, (transposed_part, column)) = ppto.jvp(
        nested_parts, (x, c), (np.array([1.0, 2.0]), None)
    )
    assert float(first) == pytest.approx(2 * 0.5 * 1.0 + 2 * -1.0 * 2.0)
    assert np.shape(transposed_part) == (3, 2) and np.shape(column) == (2, 1)
    assert not np.any(np.asarray(transposed_part)) and not np.any(np.asarray(column))
