"""Reductions over the last axis of many short rows (a batch's class scores) run on
a column-ordered copy (ppto.runtime.backends._across_short_rows): NumPy's values,
shapes and dtypes (sums of rows shorter than 8 bit for bit; max and min the same
values, and under precision 'strict' the same bits whatever the batch size), and
the gradient through them still the finite differences'."""

import numpy as np
import pytest

import ppto
from ppto.runtime import backends

SHAPES = [(256, 10), (8, 40, 10), (64, 2), (100, 16)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int16", "float16"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_max_and_min_are_numpy_s(shape, dtype, keepdims):
    x = (np.random.default_rng(1).standard_normal(shape) * 50).astype(dtype)
    for ours, theirs in ((ppto.reduce_max, np.max), (ppto.reduce_min, np.min)):
        got = np.asarray(ours(x, axis=-1, keepdims=keepdims))
        expected = theirs(x, axis=-1, keepdims=keepdims)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_max_keeps_nan_as_numpy_does():
    x = np.random.default_rng(2).standard_normal((128, 10))
    x[3, 7] = np.nan
    got = np.asarray(ppto.reduce_max(x, axis=1))
    assert np.isnan(got[3]) and not np.isnan(np.delete(got, 3)).any()


def test_max_and_min_of_signed_zeros():
    """A row of -0.0 and +0.0 gives a zero (which one IEEE 754 leaves open, and
    NumPy's own differs between C and column order); under precision 'strict'
    the one NumPy's C order gives, whatever the batch size."""
    rng = np.random.default_rng(7)
    x = rng.choice(
        np.array([-0.0, 0.0, -1.0, np.nan]), (256, 9), p=[0.45] * 2 + [0.05] * 2
    )
    for ours, theirs in ((ppto.reduce_max, np.max), (ppto.reduce_min, np.min)):
        got = np.asarray(ours(x, axis=1))
        np.testing.assert_array_equal(got, theirs(x, axis=1))  # (NaN where NaN)
        previous = ppto.set_precision("strict")
        try:
            strict = np.asarray(ours(x, axis=1))
            fewer = np.asarray(ours(x[:63], axis=1))
        finally:
            ppto.set_precision(previous)
        assert strict.tobytes() == theirs(x, axis=1).tobytes()
        assert fewer.tobytes() == strict[:63].tobytes()


@pytest.mark.parametrize("width", range(2, 8))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sums_of_rows_shorter_than_8_are_numpy_s_bits(width, dtype):
    rng = np.random.default_rng(width)
    x = (rng.standard_normal((300, width)) * 10.0 ** rng.integers(-3, 4, width)).astype(
        dtype
    )
    x[::7] = -0.0  # (rows of negative zeros sum to -0.0)
    for keepdims in (False, True):
        got = np.asarray(ppto.reduce_sum(x, axis=-1, keepdims=keepdims))
        expected = np.sum(x, axis=-1, keepdims=keepdims)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()
    assert backends._short_rows(x, 1, backends._SUMMED, backends._SUMMED_ROW)


def test_a_row_s_sum_does_not_depend_on_the_batch_size():
    for width in (4, 10):  # (a row of 10 keeps NumPy's order: its 8 partial sums)
        x = np.random.default_rng(0).standard_normal((64, width)).astype(np.float32)
        whole = np.asarray(ppto.reduce_sum(x, axis=1))
        fewer = np.asarray(ppto.reduce_sum(x[:63], axis=1))
        assert whole[:63].tobytes() == fewer.tobytes()


def test_integer_sums_exact_and_float16_sums_as_numpy():
    ints = np.random.default_rng(4).integers(-100, 100, (256, 5), dtype=np.int8)
    got = np.asarray(ppto.reduce_sum(ints, axis=1))
    np.testing.assert_array_equal(got, np.sum(ints, axis=1))
    assert got.dtype == np.sum(ints, axis=1).dtype
    halves = np.random.default_rng(5).standard_normal((256, 5)).astype(np.float16)
    # NumPy sums float16 in float32: the column order would round each step
    np.testing.assert_array_equal(
        np.asarray(ppto.reduce_sum(halves, axis=1)), np.sum(halves, axis=1)
    )


def test_which_reductions_take_the_column_order():
    rows = np.zeros((256, 10))
    compared = (backends._COMPARED, backends._COMPARED_ROW)
    summed = (backends._SUMMED, backends._SUMMED_ROW)
    assert backends._short_rows(rows, 1, *compared)
    assert not backends._short_rows(rows[:, :7], -1, *summed)  # (a view)
    assert backends._short_rows(np.zeros((256, 7)), -1, *summed)
    assert not backends._short_rows(rows, -1, *summed)  # (8 partial sums: NumPy's)
    assert not backends._short_rows(rows, 0, *compared)  # (not the last axis)
    assert not backends._short_rows(rows, None, *compared)
    assert not backends._short_rows(rows, (1,), *compared)
    assert not backends._short_rows(rows.T, 0, *compared)  # (column-ordered already)
    assert not backends._short_rows(np.zeros((256, 40)), 1, *compared)  # long rows
    assert not backends._short_rows(np.zeros((32, 10)), 1, *compared)  # few rows
    assert not backends._short_rows(np.zeros((256, 5), np.float16), 1, *summed)
    assert backends._short_rows(rows.astype(np.float16), 1, *compared)


def test_the_operators_take_the_column_order(monkeypatch):
    taken = []
    across = backends._across_short_rows

    def spied(ufunc, x, keepdims):
        taken.append(ufunc.__name__)
        return across(ufunc, x, keepdims)

    monkeypatch.setattr(backends, "_across_short_rows", spied)
    scores = np.random.default_rng(9).standard_normal((256, 5))
    ppto.reduce_max(scores, axis=1)
    ppto.reduce_min(scores, axis=-1, keepdims=True)
    ppto.reduce_sum(scores, axis=1)
    assert taken == ["maximum", "minimum", "add"]
    previous = ppto.set_precision("strict")
    try:
        ppto.reduce_max(scores, axis=1)
        ppto.reduce_sum(scores, axis=1)  # (bit for bit NumPy's in either order)
    finally:
        ppto.set_precision(previous)
    assert taken == ["maximum", "minimum", "add", "add"]


def test_gradient_through_short_rows_matches_differences():
    def loss(x):
        shifted = x - ppto.reduce_max(x, axis=1, keepdims=True)
        return ppto.reduce_sum(ppto.exp(shifted) * ppto.reduce_min(x, axis=1)[:, None])

    x = np.random.default_rng(6).standard_normal((96, 5))
    got = np.asarray(ppto.grad(loss)(x))
    expected = np.zeros_like(x)
    step = 1e-6
    for index in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[index] += step
        down[index] -= step
        value = (float(np.asarray(loss(up))) - float(np.asarray(loss(down)))) / 2
        expected[index] = value / step
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
