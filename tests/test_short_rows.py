"""Reductions over the last axis of many short rows (a batch's class scores) run on
a column-ordered copy (ppto.runtime.backends._across_short_rows): the same values
as NumPy's (max and min exactly, sums within a float's rounding), in NumPy's
shapes and dtypes, and the gradient through them still the finite differences'."""

import math

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


def test_max_and_min_of_signed_zeros_are_zeros():
    """A row of -0.0 and +0.0 gives a zero (which one IEEE 754 leaves open, and
    NumPy's own differs between C and column order: not pinned here)."""
    rng = np.random.default_rng(7)
    x = rng.choice(
        np.array([-0.0, 0.0, -1.0, np.nan]), (256, 9), p=[0.45] * 2 + [0.05] * 2
    )
    for ours, theirs in ((ppto.reduce_max, np.max), (ppto.reduce_min, np.min)):
        got = np.asarray(ours(x, axis=1))
        np.testing.assert_array_equal(got, theirs(x, axis=1))  # (NaN where NaN)
        np.testing.assert_array_equal(got, theirs(np.ascontiguousarray(x), axis=1))


def test_max_keeps_nan_as_numpy_does():
    x = np.random.default_rng(2).standard_normal((128, 10))
    x[3, 7] = np.nan
    got = np.asarray(ppto.reduce_max(x, axis=1))
    assert np.isnan(got[3]) and not np.isnan(np.delete(got, 3)).any()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sum_within_rounding(shape, dtype):
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    got = np.asarray(ppto.reduce_sum(x, axis=-1, keepdims=True))
    assert got.dtype == x.dtype and got.shape == (*shape[:-1], 1)
    exact = np.apply_along_axis(math.fsum, -1, x.astype(np.float64))
    scale = np.abs(x.astype(np.float64)).sum(axis=-1)
    bound = shape[-1] * np.finfo(dtype).eps * scale
    assert (np.abs(got[..., 0] - exact) <= bound).all()


def test_integer_sums_exact_and_float16_sums_as_numpy():
    ints = np.random.default_rng(4).integers(-100, 100, (256, 10), dtype=np.int8)
    got = np.asarray(ppto.reduce_sum(ints, axis=1))
    np.testing.assert_array_equal(got, np.sum(ints, axis=1))
    assert got.dtype == np.sum(ints, axis=1).dtype
    halves = np.random.default_rng(5).standard_normal((256, 10)).astype(np.float16)
    # NumPy sums float16 in float32: the column order would round each step
    np.testing.assert_array_equal(
        np.asarray(ppto.reduce_sum(halves, axis=1)), np.sum(halves, axis=1)
    )


def test_which_reductions_take_the_column_order():
    rows = np.zeros((256, 10))
    compared, summed = backends._COMPARED_SHORT_ROWS, backends._SUMMED_SHORT_ROWS
    assert backends._short_rows(rows, 1, compared)
    assert backends._short_rows(rows, -1, summed)
    assert not backends._short_rows(rows, 0, compared)  # (not the last axis)
    assert not backends._short_rows(rows, None, compared)
    assert not backends._short_rows(rows, (1,), compared)
    assert not backends._short_rows(rows.T, 0, compared)  # (column-ordered already)
    assert not backends._short_rows(np.zeros((256, 40)), 1, compared)  # long rows
    assert not backends._short_rows(np.zeros((32, 10)), 1, compared)  # few rows
    assert not backends._short_rows(rows.astype(np.float16), 1, summed)
    assert backends._short_rows(rows.astype(np.float16), 1, compared)


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
