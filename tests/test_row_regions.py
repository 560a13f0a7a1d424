"""Regions over rows (``ppto.transform.regions``, ``region_writer``): softmax-like
gradients (a row maximum or sum, values of shape ``(..., 1)`` beside ``(..., m)``
ones) run as one pass over blocks of whole rows. Each is checked against central
differences in float64 with the pass forced on for small arrays in chunks of a row
or two, and against the unfused code in float32."""

import io

import numpy as np
import pytest

import ppto
from ppto.fusion.kernels import LARGE, rows_layout
from tests.test_checkpoint import central_differences
from tests.test_fusion import region_kernels, unfused_value_and_grad
from tests.test_fusion_random import fuse_everything_in_small_chunks  # noqa: F401


def logsumexp_rows(x, y):
    peak = np.max(x, axis=-1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(x - peak), axis=-1, keepdims=True)) + peak)


def softmax_weighted(x, y):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return np.sum(e / np.sum(e, axis=-1, keepdims=True) * y)


def log_softmax_weighted(x, y):
    shifted = x - np.max(x, axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return -np.sum(log_probs * y)


def normalized_rows(x, y):
    centred = x - np.mean(x, axis=-1, keepdims=True)
    spread = np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + 1e-5)
    return np.sum(np.tanh(centred / spread) * y)


FUNCTIONS = [logsumexp_rows, softmax_weighted, log_softmax_weighted, normalized_rows]


def row_passes(gradient, args) -> list:
    """The sources of the passes over rows compiled for ``args``."""
    kernels = region_kernels(gradient, args)
    return [k.source for k in kernels if "blocks of rows" in k.source]


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 6)])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_passes_over_rows_give_the_gradient(
    function,
    shape,
    fuse_everything_in_small_chunks,  # noqa: F811
):
    rng = np.random.default_rng(3)
    args = (rng.standard_normal(shape) * 2.0, rng.standard_normal(shape))
    gradient = ppto.value_and_grad(function)
    assert row_passes(gradient, args), "no pass over rows was formed"
    ran = len(fuse_everything_in_small_chunks)
    value, dx = gradient(*args)
    assert len(fuse_everything_in_small_chunks) > ran  # its pass ran
    np.testing.assert_allclose(float(value), function(*args), rtol=1e-12)
    expected = central_differences(function, args, 0)
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_the_logsumexp_gradient_is_one_pass(
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """The row maximum (under stop_gradient), exp, row sum, log, the sum and the
    whole backward pass: one pass over the rows, nothing before or after it."""
    x = np.random.default_rng(8).standard_normal((6, 5))
    gradient = ppto.value_and_grad(logsumexp_rows)
    assert len(row_passes(gradient, (x, x))) == len(region_kernels(gradient, (x, x)))
    source = ppto.show_grad(logsumexp_rows, x, x, fused=True, file=io.StringIO())
    entry = source[: source.index("def __fused_region_1_unfused")]
    assert "before fusion, 1 after" in entry


@pytest.mark.parametrize("function", FUNCTIONS)
def test_passes_over_rows_equal_the_unfused_code_in_float32(function):
    rng = np.random.default_rng(4)
    shape = (LARGE // 100, 300)  # at least LARGE elements: fused as it is
    args = tuple(rng.standard_normal(shape).astype("float32") for _ in range(2))
    gradient = ppto.value_and_grad(function)
    assert row_passes(gradient, args)
    value, dx = gradient(*args)
    plain_value, plain_dx = unfused_value_and_grad(function, 0, args)
    assert value.dtype == plain_value.dtype == dx.dtype == np.float32
    np.testing.assert_allclose(float(value), float(plain_value), rtol=1e-5)
    np.testing.assert_allclose(dx.numpy(), plain_dx.numpy(), rtol=1e-5, atol=1e-6)


def layer_norm(x, g, b):
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    y = xc / np.sqrt(var + 1e-5) * g + b
    return np.sum(y * np.tanh(y))


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 6)])
def test_a_layer_norm_and_its_scale_and_shift_gradients_in_one_pass(
    shape,
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """The scale and shift (of the last axis's shape) are read whole by every block
    of rows; their gradients are sums over the rows, added up per block; the
    backward pass's row sums are nested in expressions. The whole gradient is one
    pass."""
    rng = np.random.default_rng(6)
    args = (
        rng.standard_normal(shape) * 2.0,
        rng.standard_normal(shape[-1:]),
        rng.standard_normal(shape[-1:]),
    )
    gradient = ppto.value_and_grad(layer_norm, wrt=(0, 1, 2))
    passes = row_passes(gradient, args)
    assert len(passes) == 1 and "partial_dg" in passes[0] and "partial_db" in passes[0]
    value, gradients = gradient(*args)
    np.testing.assert_allclose(float(value), layer_norm(*args), rtol=1e-12)
    for position, computed in enumerate(gradients):
        expected = central_differences(layer_norm, args, position)
        np.testing.assert_allclose(computed.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_a_layer_norm_in_float32_equals_the_unfused_code():
    rng = np.random.default_rng(7)
    shape = (LARGE // 200 + 1, 200)  # at least LARGE elements
    args = tuple(
        rng.standard_normal(s).astype("float32")
        for s in (shape, shape[-1:], shape[-1:])
    )
    gradient = ppto.value_and_grad(layer_norm, wrt=(0, 1, 2))
    assert row_passes(gradient, args)
    value, gradients = gradient(*args)
    plain_value, plain_gradients = unfused_value_and_grad(layer_norm, (0, 1, 2), args)
    np.testing.assert_allclose(float(value), float(plain_value), rtol=1e-5)
    for computed, plain in zip(gradients, plain_gradients):
        assert computed.dtype == plain.dtype == np.float32
        assert computed.shape == plain.shape
        np.testing.assert_allclose(
            computed.numpy(), plain.numpy(), rtol=2e-4, atol=2e-4
        )


def columns_normalized(x, y):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return np.sum(e / np.sum(e, axis=0, keepdims=True) * y)


def test_a_reduction_over_another_axis_is_no_pass_over_rows(
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """Only the last axis is a row: a softmax over columns is fused otherwise, and
    right."""
    rng = np.random.default_rng(5)
    args = (rng.standard_normal((4, 6)), rng.standard_normal((4, 6)))
    gradient = ppto.value_and_grad(columns_normalized)
    assert not row_passes(gradient, args)
    _, dx = gradient(*args)
    expected = central_differences(columns_normalized, args, 0)
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_the_pass_runs_only_on_the_shapes_it_was_made_for():
    full = np.zeros((4, LARGE // 4))
    rows = np.zeros((4, 1))
    assert rows_layout((full, rows, 2.0), "frs") == ((4, LARGE // 4), full.dtype)
    assert rows_layout((full, np.float64(1.0)), "fr") is None  # a row value, 0-d
    assert rows_layout((full, np.zeros((1, 4))), "fr") is None  # not (4, 1)
    assert rows_layout((full, rows), "ff") is None  # a full value of another shape
    # a 0-d value or a number where full rows were seen: the pass itself refuses
    # the values it would compute as full rows from it and rows alone
    assert rows_layout((full, np.zeros(()), 2.0), "fff") is not None
    assert rows_layout((2.0, rows), "fr") is None  # no full array: no rows' shape
    assert rows_layout((full, rows.astype("float32")), "fr") is None  # mixed dtypes
    assert rows_layout((full, rows), "fs") is None  # an array where 0-d was seen
    assert rows_layout((np.zeros(LARGE), np.zeros(1)), "fr") is None  # 1-d: no rows
    assert rows_layout((np.zeros((4, 5)), np.zeros((4, 1))), "fr") is None  # small
    column = np.zeros(LARGE // 4)
    assert rows_layout((full, column), "fc") is not None  # read whole by each block
    assert rows_layout((full, column[:-1]), "fc") is None  # not the last axis's
    assert rows_layout((full, np.float64(1.0)), "fc") is None  # 0-d where an array


def shifted_rows(x, r):
    shifted = r + x
    s = np.sum(shifted, axis=-1, keepdims=True)
    return np.sum(np.sin(s) * np.cos(s))


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 6)])
def test_a_row_sum_of_a_broadcast_row_counts_each_of_its_elements(
    shape,
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """The gradient of ``r`` (a column added to each row of ``x``) is the row sum of
    the row sum's gradient broadcast along the row: ``width`` times that gradient,
    not the gradient once."""
    rng = np.random.default_rng(6)
    args = (rng.standard_normal(shape), rng.standard_normal(shape[:-1] + (1,)))
    gradient = ppto.value_and_grad(shifted_rows, wrt=(0, 1))
    assert row_passes(gradient, args)
    ran = len(fuse_everything_in_small_chunks)
    _, (dx, dr) = gradient(*args)
    assert len(fuse_everything_in_small_chunks) > ran
    for position, found in enumerate((dx, dr)):
        expected = central_differences(shifted_rows, args, position)
        np.testing.assert_allclose(found.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_a_float16_row_mean_is_added_in_float32_as_by_np_mean(
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """np.mean adds float16 values in float32: a row of 3000 values near 30 sums to
    90000, past float16's largest (65504). Added in float16, the pass's mean was
    inf and the gradient NaN; such a pass leaves float16 to its statements."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 3000)) + 30.0).astype("float16")
    y = rng.standard_normal((4, 3000)).astype("float16")
    gradient = ppto.value_and_grad(normalized_rows)
    assert row_passes(gradient, (x, y))
    value, dx = gradient(x, y)
    plain_value, plain_dx = unfused_value_and_grad(normalized_rows, 0, (x, y))
    assert value.dtype == dx.dtype == np.float16
    assert np.isfinite(dx.numpy()).all()
    np.testing.assert_allclose(float(value), float(plain_value), rtol=1e-2)
    np.testing.assert_allclose(dx.numpy(), plain_dx.numpy(), rtol=1e-2, atol=1e-2)


def scaled_softmax(x, s):
    peak = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - peak)
    t = np.tanh(e * s + 1.0) * np.exp(-e) * s
    return np.sum(t * t)


def scaled_peak(x, s):
    peak = np.max(x, axis=-1, keepdims=True)
    scaled = peak * s
    e = np.exp(x - scaled)
    return np.sum(np.log(np.sum(e * e, axis=-1, keepdims=True)) * scaled)


@pytest.mark.parametrize("function", [scaled_softmax, scaled_peak])
def test_a_python_number_joins_a_pass_over_rows(
    function,
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """A Python number's shape was not known when the pass was written: it was
    taken for full rows, and the pass ran only where it was an array of that shape,
    so the region of ``scaled_softmax`` (which ran as a pass of chunks before passes
    over rows) never ran; and where a value it would compute as full rows came from
    numbers and rows alone (``peak * s`` in ``scaled_peak``: a row's value), the
    statements ran. A number argument is now hinted 0-d (see
    ``Program.add``): both run as passes, ``peak * s`` as a row's value."""
    assert rows_passed(function, 1.5, fuse_everything_in_small_chunks)


def rows_passed(function, number, passes: list) -> bool:
    """Whether ``function(x, number)``'s region over rows ran as a pass (``passes``:
    ``fuse_everything_in_small_chunks``), its value and gradient checked against
    NumPy and central differences either way."""
    x = np.random.default_rng(8).standard_normal((5, 7))
    gradient = ppto.value_and_grad(function)
    kernels = region_kernels(gradient, (x, number))
    rows = {k.name for k in kernels if "blocks of rows" in k.source}
    assert rows
    ran = len(passes)
    value, dx = gradient(x, number)
    passed = bool(rows & set(passes[ran:]))
    np.testing.assert_allclose(float(value), function(x, number), rtol=1e-12)
    expected = central_differences(function, (x, number), 0)
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-6, atol=1e-8)
    return passed


def test_one_expression_with_a_row_sum_inside_is_a_pass():
    """``dx = dy - reduce_sum(dy * p, axis=1, keepdims=True) * p`` (softmax's
    gradient written as one statement) is two passes over the rows unfused, the
    sum's and the expression's; as a region, one."""
    import gast

    from ppto.ops.reductions import reduce_sum
    from ppto.transform.regions import find_regions

    statement = "dx = dy - reduce_sum(dy * p, axis=1, keepdims=True) * p"
    body = gast.parse(statement).body
    shapes = {"dy": (300, 200), "p": (300, 200), "dx": (300, 200)}
    [(start, stop, steps, _, rows)] = find_regions(
        body, {"reduce_sum": reduce_sum}, shapes
    )
    assert (start, stop, rows) == (0, 1, (300, 200)) and steps[0].reduced == [rows]


def attention_like(x, w):
    p = np.exp(x - np.max(x, axis=-1, keepdims=True))
    p = p / np.sum(p, axis=-1, keepdims=True)
    return np.sum((p @ w) ** 2)


def test_a_gradient_from_a_product_joins_a_pass_over_rows(
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """``dp = dy @ w.T``: the analysis knows no shape for it, its value's shape (that
    of ``p``) is its likely one; the softmax's backward pass is a pass over rows
    (its row sum was a pass of its own), and would run its statements had the guess
    been wrong (the pass checks its arguments' shapes)."""
    rng = np.random.default_rng(9)
    args = (rng.standard_normal((6, 5)), rng.standard_normal((5, 3)))
    gradient = ppto.value_and_grad(attention_like)
    passes = row_passes(gradient, args)
    assert len(passes) == 2 and any(s.startswith("def") and "dp" in s for s in passes)
    ran = len(fuse_everything_in_small_chunks)
    _, dx = gradient(*args)
    assert len(fuse_everything_in_small_chunks) - ran == 2  # both ran
    expected = central_differences(attention_like, args, 0)
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_a_pass_given_a_gradient_of_another_shape_gives_its_statements_results(
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """The pass over ``dp`` was written for the shape guessed for it (that of ``p``);
    given a gradient of another shape (a row's, a 0-d array, a number, one row) it
    gives what its statements give (it runs them, or its chunked pass computes the
    same), of the same shape and dtype."""
    rng = np.random.default_rng(9)
    args = (rng.standard_normal((6, 5)), rng.standard_normal((5, 3)))
    gradient = ppto.value_and_grad(attention_like)
    (region,) = [k for k in region_kernels(gradient, args) if "dp" in k.source[:80]]
    captured = []
    run = region.run
    region.run = lambda *arguments: captured.append(arguments) or run(*arguments)
    gradient(*args)
    region.run = run
    (dp, *rest) = captured[0]
    for other in [dp, dp[:, :1].copy(), np.asarray(0.5), 0.5, dp[:1].copy()]:
        expected = region.fallback(other, *rest)
        result = region(other, *rest)
        assert np.shape(result) == np.shape(expected), np.shape(other)
        assert np.asarray(result).dtype == np.asarray(expected).dtype
        np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


def column_sums_kept(x, y, keep):
    t = np.sum(np.tanh(x * y + x) * np.exp(-x) * y, axis=0, keepdims=keep)
    return np.sum(np.sin(t[0]))


def test_a_sum_whose_keepdims_is_a_name_is_not_taken_for_a_column_sum():
    """``keepdims=keep`` is not a literal: the region cannot tell whether the sum
    keeps its axis. It was taken for False (a column sum of shape ``(m,)`` where the
    statement makes ``(1, m)``: ``t[0]`` then read one number, not the row), and the
    statements kept for its fallback read ``keep``, which they were not passed."""
    rng = np.random.default_rng(10)
    shape = (LARGE // 100 + 1, 100)  # at least LARGE elements: fused as it is
    args = (rng.standard_normal(shape), rng.standard_normal(shape), True)
    gradient = ppto.value_and_grad(column_sums_kept)
    kernels = region_kernels(gradient, args)  # (it runs the gradient once)
    assert kernels
    for kernel in kernels:  # (a name its statements read is passed to them)
        assert "keep" not in kernel.fallback.__code__.co_names
    value, dx = gradient(*args)  # (the second call runs the lowered code)
    np.testing.assert_allclose(float(value), column_sums_kept(*args), rtol=1e-12)
    _, plain_dx = unfused_value_and_grad(column_sums_kept, 0, args)
    np.testing.assert_allclose(dx.numpy(), plain_dx.numpy(), rtol=1e-10, atol=1e-12)


def _halved(v):
    return v * 0.5


def scaled_peak_by_a_computed_number(x, s):
    k = _halved(s)  # (a number no analysis or hint gives a shape)
    peak = np.max(x, axis=-1, keepdims=True)
    scaled = peak * k
    e = np.exp(x - scaled)
    return np.sum(np.log(np.sum(e * e, axis=-1, keepdims=True)) * scaled)


def test_a_number_of_unknown_shape_making_a_rows_value_runs_the_statements(
    fuse_everything_in_small_chunks,  # noqa: F811
):
    """A number whose shape nothing tells is taken for full rows: ``peak * k`` is
    then a value the pass would compute as full rows from numbers and rows alone,
    a row's value at run time, so the region runs its statements instead."""
    function = scaled_peak_by_a_computed_number
    assert not rows_passed(function, 3.0, fuse_everything_in_small_chunks)
