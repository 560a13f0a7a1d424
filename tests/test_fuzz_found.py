"""Bugs the random programs (tests/fuzz/) found, each reduced to a small function
and checked against float64 central differences (the seed that found it is named
in each test)."""

import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import (
    as_float,
    assert_gradient,
    central_differences,
    directional_differences,
)
from tests.fuzz.checks import fused_for_any_size


def assert_gradients(gradients, function, arguments, label="d/d arg"):
    """Each of ``gradients`` (of the arguments in order) against central
    differences of ``function``."""
    for position, gradient in enumerate(gradients):
        expected = central_differences(function, arguments, position)
        assert_gradient(np.asarray(gradient), expected, f"{label} {position}")


def assert_tangent(function, arguments, tangents):
    """``ppto.jvp`` of ``function`` along ``tangents`` against differences."""
    _, pushed = ppto.jvp(function, arguments, tangents)
    expected = directional_differences(function, arguments, dict(enumerate(tangents)))
    np.testing.assert_allclose(float(np.asarray(pushed)), expected, rtol=1e-6)


def tanh_layer(x, y, W, s):
    return np.sum(np.tanh(W @ x)) + np.sum(y * y) * s


def tanh_layer_of_a_pair(x, params, W, s):
    y, c = params
    return np.sum(np.tanh(W @ x)) + c * np.sum(y * y) * s


def _arguments():
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((3, 4)),
        rng.standard_normal((3, 4)),
        rng.standard_normal((4, 3)),
    )


def test_hessian_vector_product_of_a_gradient_of_one_argument_in_a_tuple():
    """Seed 12: ``jvp(grad(f, wrt=(0,)))`` gave the first row of each gradient (a
    bare gradient iterated as if it were the tuple of one), and so did any
    Hessian-vector product through a pytree argument."""
    x, y, W = _arguments()
    tangents = (np.ones_like(x), np.ones_like(y), np.zeros_like(W), 0.0)
    for wrt, single in (((0,), False), (0, True)):
        gradient = ppto.grad(tanh_layer, wrt=wrt)
        value, product = ppto.jvp(gradient, (x, y, W, 0.5), tangents)
        if not single:
            assert isinstance(value, tuple) and len(value) == 1
            value, product = value[0], product[0]
        expected = directional_differences(
            lambda *a: as_float(ppto.grad(tanh_layer)(*a)),
            (x, y, W, 0.5),
            dict(enumerate(tangents)),
        )
        np.testing.assert_allclose(
            np.asarray(value), as_float(ppto.grad(tanh_layer)(x, y, W, 0.5))
        )
        np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-6, atol=1e-8)


def test_hessian_vector_product_with_a_pytree_argument():
    """Seed 12: the same through a tuple argument (the leaves' gradient regrouped)."""
    x, y, W = _arguments()
    gradient = ppto.grad(tanh_layer_of_a_pair, wrt=0)
    primals = (x, (y, 0.3), W, 0.5)
    value, product = ppto.jvp(gradient, primals, (np.ones_like(x), (y, 1.0), W, 0.0))
    assert np.shape(value) == x.shape and np.shape(product) == x.shape

    def along(t):
        return as_float(gradient(x + t, (y + t * y, 0.3 + t), W + t * W, 0.5))

    expected = (along(1e-6) - along(-1e-6)) / 2e-6
    np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-6, atol=1e-8)


def sum_over_a_dict(x, params):
    total = 0.0
    for _key, leaf in params.items():
        total = total + np.sum(np.tanh(leaf))
    for number, leaf in enumerate(params.values()):
        total = total + np.sum(leaf) * number
    return total * np.sum(x * x)


def test_a_loop_over_a_dict_held_constant():
    """Seeds 8 and 21: ``for key, leaf in params.items()`` with ``params`` not
    differentiated ran ``params.items()[i]`` (TypeError)."""
    x = np.array([0.5, -1.0, 2.0])
    params = {"a": np.array([0.1, 0.2]), "b": 0.5, "c": np.ones((2, 2))}
    gradient = ppto.grad(sum_over_a_dict, wrt=0)(x, params)
    expected = central_differences(lambda x: sum_over_a_dict(x, params), (x,), 0)
    assert_gradient(np.asarray(gradient), expected, "d/dx")
    # one holding an integer is passed as it is: its views made lists first
    counts = {"a": np.array([0.1, 0.2]), "n": 2}
    gradient = ppto.grad(sum_over_a_dict, wrt=0)(x, counts)
    expected = central_differences(lambda x: sum_over_a_dict(x, counts), (x,), 0)
    assert_gradient(np.asarray(gradient), expected, "d/dx, integer leaf")


def sorted_by_one_argument(x, y, W):
    t = np.max(np.tanh(W), axis=-1)
    ordered = np.take_along_axis(t, np.argsort(t, axis=0), axis=0)
    return np.sum(ordered * x)


def test_an_argument_not_read_beside_an_argsort():
    """Seed 15: an argsort on W's way made ``y``, which the result does not read,
    raise 'depends on y only through ppto.argsort'; y's gradient is zero."""
    x, W, y = np.arange(4.0), np.random.default_rng(1).standard_normal((4, 3)), 0.5
    gradients = ppto.grad(sorted_by_one_argument, wrt=(0, 1, 2))(x, y, W)
    arguments = (x, y, W)
    assert_gradients(gradients, sorted_by_one_argument, arguments)


def local_function_over_a_leaf(x, params):
    y = params["y"]

    def local(v, scale=0.5):
        return scale * np.tanh(v * y)

    t = x * 1.0
    for _ in range(2):
        t = local(t)
    return np.sum(t * y) + np.sum(x * y)


def test_a_local_function_in_a_function_of_a_pytree(builds):
    """Seed 75: a local function of a function taking a dict was compiled with the
    globals of the function standing in for it (taking the leaves), which has
    none: ``np`` was undefined where the generated code ran the local function as
    it is, and the globals it read, watched there, always looked rebound (the code
    was made again at every call)."""
    x = np.array([0.5, -1.0, 2.0])
    params = {"y": np.array([0.1, -0.2, 0.3])}
    for _ in range(3):
        gradients = ppto.grad(local_function_over_a_leaf, wrt=(0, 1))(x, params)
    assert len(builds) == 1
    expected = central_differences(
        lambda x: local_function_over_a_leaf(x, params), (x,), 0
    )
    assert_gradient(np.asarray(gradients[0]), expected, "d/dx")
    dy = central_differences(
        lambda y: local_function_over_a_leaf(x, {"y": y}), (params["y"],), 0
    )
    assert_gradient(np.asarray(gradients[1]["y"]), dy, "d/dy")
    # only x: the local function runs as written (its result is read for the
    # value alone where y's gradient is not asked for)
    alone = ppto.grad(local_function_over_a_leaf, wrt=0)(x, params)
    assert_gradient(np.asarray(alone), expected, "d/dx alone")


def spread_of_the_small(x, s):
    kept = np.where(x > 0.6, np.nan, x * s)
    return np.nanstd(kept) + np.nanvar(kept, axis=1).sum()


def spread_unread_after_an_early_return(x, s):
    kept = np.where(x > 0.6, np.nan, x)
    spread = np.nanstd(kept)
    if np.max(x) > 0.1:
        return np.sum(x) * s * s
    return spread


def test_second_derivatives_through_nan_skipping_spreads():
    """Seed 129: ``nanstd``'s and ``nanvar``'s rules multiplied by ``x - mean``,
    NaN where x is, inside a ``where``: their own derivatives gave 0 * NaN, NaN
    (grad(grad) in s was NaN even where the result does not read the spread)."""
    x = np.array([[0.3, 0.9, -0.2], [0.1, 0.5, 0.8]])
    second = ppto.grad(ppto.grad(spread_unread_after_an_early_return, wrt=1), wrt=1)
    np.testing.assert_allclose(float(np.asarray(second(x, 0.4))), 2.0 * np.sum(x))
    gradient = ppto.grad(spread_of_the_small, wrt=0)
    tangent = np.array([[1.0, -0.5, 0.3], [0.2, 0.7, -1.0]])
    _, product = ppto.jvp(gradient, (x, 0.4), (tangent, 0.0))
    expected = directional_differences(
        lambda *a: as_float(gradient(*a)), (x, 0.4), {0: tangent}
    )
    assert np.all(np.isfinite(np.asarray(product)))
    np.testing.assert_allclose(np.asarray(product), expected, rtol=1e-6, atol=1e-8)
    in_s = ppto.grad(ppto.grad(spread_of_the_small, wrt=1), wrt=1)(x, 0.4)
    first = ppto.grad(spread_of_the_small, wrt=1)
    wanted = (as_float(first(x, 0.4 + 1e-5)) - as_float(first(x, 0.4 - 1e-5))) / 2e-5
    np.testing.assert_allclose(float(np.asarray(in_s)), wanted, rtol=1e-6, atol=1e-8)


def spread_over_a_length_one_axis(x, s):
    top = x.max(axis=-2, keepdims=True)
    return np.sum(np.std(top, axis=0) * s) + np.sum(np.nanstd(top * s, axis=0)) + s


def test_standard_deviation_of_equal_values():
    """Seed 3234: the deviation over an axis of length 1 is 0 whatever the values,
    but std's and nanstd's rules divided 0 by it: NaN gradients (and tangents)."""
    x = np.array([[0.3, -0.9, 0.2, 0.5], [0.1, 0.5, 0.8, -0.4], [0.0, 0.2, 0.1, 0.3]])
    arguments = (x, 0.7)
    gradients = ppto.grad(spread_over_a_length_one_axis, wrt=(0, 1))(*arguments)
    assert_gradients(gradients, spread_over_a_length_one_axis, arguments)
    tangents = (np.ones_like(x), 1.0)
    assert_tangent(spread_over_a_length_one_axis, arguments, tangents)


def upper_quartile(u):
    return np.percentile(u, 75)


def scaled_quartile(x, s):
    return upper_quartile(np.tanh(x * s)) * s


def test_second_derivative_through_a_helpers_percentile():
    """Seed 4567: grad(grad(f)) where a helper takes a percentile was refused ("the
    result depends on 'saved' only through ppto.quantile_weights"): the check that
    a parameter reaches the result through differentiable operators ran on the
    generated gradient, whose percentile rule reads piecewise-constant weights;
    differentiated again they contribute zero, as they should."""
    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    first = ppto.grad(scaled_quartile, wrt=1)
    second = ppto.grad(first, wrt=1)(x, 0.3)
    wanted = central_differences(lambda *a: as_float(first(*a)), (x, 0.3), 1)
    np.testing.assert_allclose(float(np.asarray(second)), wanted, rtol=1e-6)


def outer_plus_a_strong_number(x, s):
    t1 = s * np.tanh(s)  # (a NumPy float64: strong, as NumPy 2 makes it)
    t3 = np.outer(x * 0.09, x)
    t3 += np.minimum(t3, t1)
    return np.mean(np.tanh(t3))


def scaled_by_a_strong_number(W, s):
    t2 = W * W
    t2 += (t2 + s) * np.tanh(s)
    return np.sum(t2 * t2)


def log_plus_a_strong_number(x, s):
    t3 = np.log(1.0 + np.exp(s / (s * s + 1.0)))
    t4 = np.log(np.abs(np.einsum("ij,ij->i", x, x)) + 1.0)
    t4 += t3 * np.tanh(np.exp(-t4 * t4))
    return np.sum(t4 * t4)


def test_augmented_assignment_keeps_the_arrays_dtype():
    """Seeds 3782, 3913 and 4429: ``t += v`` with t a float32 array and v float64
    (a NumPy float64 number such as ``np.tanh(s)`` of a Python float) is float32 in
    NumPy, whose in-place operators cast back; ppto wrote ``t = t + v``, a float64
    value (and float64 values downstream)."""
    rng = np.random.default_rng(3782)
    for function, shape in (
        (outer_plus_a_strong_number, (4,)),
        (scaled_by_a_strong_number, (3, 4)),
        (log_plus_a_strong_number, (3, 4)),
    ):
        x = rng.uniform(-1.0, 1.0, shape)
        x32 = x.astype(np.float32)
        value, (dx, ds) = ppto.value_and_grad(function, wrt=(0, 1))(x32, 0.3)
        assert value.dtype == np.asarray(function(x32, 0.3)).dtype == np.float32
        np.testing.assert_allclose(float(value), function(x, 0.3), rtol=1e-5)
        expected = central_differences(function, (x, 0.3), 0)
        assert dx.dtype == np.float32
        np.testing.assert_allclose(as_float(dx), expected, rtol=1e-3, atol=1e-4)
        exact = ppto.grad(function, wrt=(0, 1))(x, 0.3)
        assert_gradient(np.asarray(exact[0]), expected, f"{function.__name__} dx")
        expected = central_differences(function, (x, 0.3), 1)
        assert_gradient(np.asarray(exact[1]), expected, f"{function.__name__} ds")
        np.testing.assert_allclose(float(ds), expected, rtol=1e-4)


def zero_d_plus_a_strong_number(y, s):
    y += np.abs(s)  # (a NumPy float64: strong; y, a 0-d array, is written into)
    return np.sum(y * y) + y * s


def test_augmented_assignment_keeps_a_zero_d_arrays_dtype():
    """Seed 8232: ``y += np.abs(s)`` with y a 0-d float32 array is float32 in
    NumPy, which writes into it; ppto took 0-d arrays for numbers and rebound y
    to the float64 sum."""
    y = np.asarray(0.3)
    y32 = y.astype(np.float32)
    value, (dy, ds) = ppto.value_and_grad(zero_d_plus_a_strong_number, wrt=(0, 1))(
        y32, 0.7
    )
    direct = zero_d_plus_a_strong_number(y32.copy(), 0.7)
    assert value.dtype == np.asarray(direct).dtype == np.float32
    assert dy.dtype == np.float32 and ds.dtype == np.float64
    np.testing.assert_allclose(float(value), float(direct), rtol=1e-6)

    def on_a_copy(y, s):
        return zero_d_plus_a_strong_number(np.array(y), s)

    exact = ppto.grad(zero_d_plus_a_strong_number, wrt=(0, 1))(y, 0.7)
    assert_gradients(exact, on_a_copy, (y, 0.7))
    np.testing.assert_allclose(float(dy), float(exact[0]), rtol=1e-5)
    np.testing.assert_allclose(float(ds), float(exact[1]), rtol=1e-5)


def masks_combined(x, y, s):
    both = (x > 0) & (y < 0.5)
    either = (x > 0.2) | (y > 0.3) ^ (x < -0.5)
    either &= y > -0.9
    z = x.copy()
    z[~both & (y > 0)] *= 2.0
    t = np.where(both, x * y, np.sin(x)) + x * ~either
    return np.sum(t * s) + np.sum(z * z) + np.sum(np.tanh(x[either | both]))


def test_masks_combined_with_bitwise_operators():
    """Found writing the fuzzer's masks: ``(x > 0) & (y < 0.5)``, the usual way to
    combine masks, was refused ('cannot differentiate the & operator'), and so
    were ``|``, ``^`` and ``m &= ...``; like a comparison they are whole numbers,
    computed as written, with no derivative."""
    rng = np.random.default_rng(3)
    arguments = (rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4)), 0.7)
    gradients = ppto.grad(masks_combined, wrt=(0, 1, 2))(*arguments)
    assert_gradients(gradients, masks_combined, arguments)
    tangents = (np.ones((3, 4)), np.ones((3, 4)), 1.0)
    assert_tangent(masks_combined, arguments, tangents)


def clipped_to_data_bounds(x, y, s):
    centre, spread = np.mean(y), np.std(y)
    t = np.clip(x, centre - spread, centre + spread)
    u = x.clip(y * 0.5, None) + np.clip(x, a_min=None, a_max=s) + x.clip(max=y)
    return np.sum(t * t) + np.sum(np.sin(u)) * s


def test_clip_with_differentiated_bounds():
    """Found writing the fuzzer's clip chains: ``np.clip(x, m - d, m + d)`` with
    bounds computed from differentiated values was refused ("ppto does not
    differentiate the 'lo' argument of ppto.clip"); it is NumPy's definition,
    ``minimum(maximum(x, lo), hi)``, and now differentiated as that (also the
    method spelling and one-sided bounds)."""
    rng = np.random.default_rng(5)
    arguments = (rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4)), 0.3)
    gradients = ppto.grad(clipped_to_data_bounds, wrt=(0, 1, 2))(*arguments)
    assert_gradients(gradients, clipped_to_data_bounds, arguments)
    tangents = (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), 1.0)
    assert_tangent(clipped_to_data_bounds, arguments, tangents)


def filled_row_by_row(x, s):
    z = np.empty_like(x)
    for i in range(x.shape[0]):
        z[i] = np.tanh(x[i]) * s
    return np.sum(z * z)


def test_an_array_made_with_empty_like_and_filled():
    """Found writing the fuzzer's array fills: ``z = np.empty_like(x)`` then
    filled row by row was refused ('np.empty_like has no ppto operator');
    NumPy leaves its values unspecified, so it is zeros_like, a constant."""
    arguments = (np.random.default_rng(7).uniform(-1, 1, (3, 4)), 0.8)
    gradients = ppto.grad(filled_row_by_row, wrt=(0, 1))(*arguments)
    assert_gradients(gradients, filled_row_by_row, arguments)


def indexed_by_a_mask_made_in_steps(x, s):
    m = (x > 0.1) ^ (s < -0.15)
    m &= x > -0.9
    n = ~m
    z = x.copy()
    z[m] = np.sqrt(x * x + 1.0)[m]
    return np.sum(np.tanh(z * s)) + np.sum(x[n] * s)


def test_an_index_made_in_steps_from_a_mask_reading_a_differentiated_value():
    """Seed 100035: with s differentiated, ``m = (x > 0.1) ^ (s < ...)`` then
    ``m &= ...`` (or ``n = ~m``) and ``z[m] = ...`` was refused ('does not
    differentiate an index, but it depends on a differentiated value'): the
    statement-level analysis takes a mask of s for varied, and a statement whose
    reads had all been found passive since was written passive but its name
    stayed varied."""
    arguments = (np.random.default_rng(11).uniform(-1, 1, (3, 4)), 0.6)
    gradients = ppto.grad(indexed_by_a_mask_made_in_steps, wrt=(0, 1))(*arguments)
    assert_gradients(gradients, indexed_by_a_mask_made_in_steps, arguments)


def rows_picked_then_changed(x, y, s):
    t = y[np.array([-1, 2])]
    t -= np.maximum(t, 0.0) * s
    u = y[1:, [0, 2]]
    u *= np.tanh(x[0, :2]) * s
    return np.sum(t * y[0]) + np.sum(u * y[0, :2]) + np.sum(y * x)


def test_a_copy_made_by_an_index_array_changed_in_place():
    """Seed 100120: ``t = y[np.array([-1, 2])]; t -= ...`` was refused ('this
    writes into t, which shares its array with y'): an index array written out
    (a list, or np.array of one) makes a copy in NumPy, so y does not change."""
    rng = np.random.default_rng(13)
    arguments = (rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4)), 0.6)
    gradients = ppto.grad(rows_picked_then_changed, wrt=(0, 1, 2))(*arguments)
    assert_gradients(gradients, rows_picked_then_changed, arguments)


def weighted_by_positions(x, y, s):
    rows, columns = np.nonzero(y > 0)
    kept = np.where(y[0] > 0.2)[0]
    count = np.count_nonzero(x > s, axis=1)
    picked = np.flatnonzero(x[1] < 0.5)
    return (
        np.sum(np.tanh(x[rows, columns])) * s
        + np.sum(x[0][kept] * y[0][kept])
        + np.sum(count * np.sum(x * x, axis=1))
        + np.sum(x[1][picked] ** 2)
    )


def test_positions_and_counts_of_masks():
    """Found probing the fuzzer's masks: ``np.nonzero(m)``, ``np.where(m)[0]``,
    ``np.count_nonzero(x > s)`` and ``np.flatnonzero`` of a mask were refused
    ('has no ppto operator', 'ppto.where needs 3 inputs', or 'does not
    differentiate an index'): their results are whole numbers, computed as
    written, with no derivative (and a name read through comparisons only is not
    differentiated)."""
    rng = np.random.default_rng(17)
    arguments = (rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4)), 0.1)
    gradients = ppto.grad(weighted_by_positions, wrt=(0, 1, 2))(*arguments)
    assert_gradients(gradients, weighted_by_positions, arguments)


def spread_of_a_row_of_equal_values(x, W):
    z = np.zeros_like(W)
    z[3] = np.sum(np.tanh(x))
    z = np.log(1.0 + np.exp(z))
    return np.sum(np.std(z, axis=1, keepdims=True)) + np.sum(np.std(z * W, axis=0))


def nan_skipping_spread_of_a_row_of_equal_values(x, W):
    z = np.zeros_like(W)
    z[3] = np.sum(np.tanh(x))
    z = np.log(1.0 + np.exp(z))
    return np.sum(np.nanstd(z, axis=1, keepdims=True)) + np.sum(np.nanstd(z * W))


def test_standard_deviation_of_values_equal_but_for_their_mean_s_rounding():
    """Seed 100414: a row of equal values (one number broadcast) has deviation 0
    whatever the number, but the mean of three equal values may be a rounding off
    them, so std's rules divided centred values of 1e-17 by a deviation as small:
    a gradient of size 0.2 where differences give 0 (nanstd's too). The rules
    centre the values shifted by their largest, exactly 0 then (nanstd's
    gradient and tangent rules too)."""
    x = 0.3 * np.array([1.0, -0.5, 0.3, 0.2])
    W = np.random.default_rng(19).uniform(-1, 1, (4, 3))
    # (the deviation of the equal row is a rounding here: the case that failed)
    row = np.full(3, np.log1p(np.exp(np.sum(np.tanh(x)))))
    assert np.std(row) != 0.0
    gradients = ppto.grad(spread_of_a_row_of_equal_values, wrt=(0, 1))(x, W)
    assert_gradients(gradients, spread_of_a_row_of_equal_values, (x, W))
    _, pushed = ppto.jvp(spread_of_a_row_of_equal_values, (x, W), (x, W))
    expected = directional_differences(
        spread_of_a_row_of_equal_values, (x, W), {0: x, 1: W}
    )
    np.testing.assert_allclose(float(np.asarray(pushed)), expected, rtol=1e-6)
    # nanstd's rules likewise (its tangent gave 0.62 where differences give 0.46)
    gradients = ppto.grad(nan_skipping_spread_of_a_row_of_equal_values, wrt=(0, 1))(
        x, W
    )
    assert_gradients(
        gradients,
        nan_skipping_spread_of_a_row_of_equal_values,
        (x, W),
        "nanstd d/d arg",
    )
    for tangents in ((x, W), (x, np.zeros_like(W)), (np.zeros_like(x), W)):
        _, pushed = ppto.jvp(
            nan_skipping_spread_of_a_row_of_equal_values, (x, W), tangents
        )
        expected = directional_differences(
            nan_skipping_spread_of_a_row_of_equal_values,
            (x, W),
            dict(enumerate(tangents)),
        )
        np.testing.assert_allclose(float(np.asarray(pushed)), expected, rtol=1e-6)


def tanh_and_its_flat_view(u):
    t = np.tanh(u)
    return t, t.reshape(-1)


def shifted_then_summed_through_the_view(W, s):
    a, b = tanh_and_its_flat_view(W)
    a -= s
    return np.sum(b)


def tanh_and_a_product(u, W):
    return np.tanh(u), u @ W


def tanh_rows(u):
    t = np.tanh(u)
    return t


def shifted_items_of_fresh_results(x, W, s):
    a, b = tanh_and_a_product(x, W)
    a -= s  # (a is an array of its own)
    t, flat = tanh_and_its_flat_view(x @ W)
    flat *= s  # (t, which flat is a view of, is not read again)
    first, second = tanh_rows(x)
    first += s  # (rows of one array share no memory)
    both = [np.tanh(x), x * 2.0]
    both[0] -= s  # (items of their own)
    return (
        np.sum(a * a)
        + np.sum(b * s)
        + np.sum(flat * flat)
        + np.sum(first * second)
        + np.sum(both[0] * both[1])
    )


def test_a_write_into_an_item_of_a_helper_result_another_item_views():
    """Seed 12209: ``a, b = pair(W)`` with ``return t, t.reshape(-1)``: b is a view
    of a, so ``a -= s`` changes b in NumPy, but ppto gave b's old value (and
    d/ds 0, where it is -b.size). Such a write is refused at its line now, as for
    a view made in the same function; items of results that share nothing (or
    whose sharers are not read again) are still differentiated."""
    W = np.random.default_rng(23).uniform(-1, 1, (2, 3))
    with pytest.raises(ppto.TransformError, match="shares its array with b") as error:
        ppto.grad(shifted_then_summed_through_the_view, wrt=(0, 1))(W, 0.4)
    line = inspect.getsourcelines(shifted_then_summed_through_the_view)[1] + 2
    assert error.value.lineno == line
    assert "a -= s" in error.value.text
    rng = np.random.default_rng(29)
    arguments = (rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 3)), 0.7)
    gradients = ppto.grad(shifted_items_of_fresh_results, wrt=(0, 1, 2))(*arguments)
    assert_gradients(gradients, shifted_items_of_fresh_results, arguments)


def scaled_item_of_an_argument(x, params, s):
    y, b = params
    b *= np.arctan2(b, s * s + 1.0)  # (y, the other item, is not b's array)
    return np.sum(b * x) + np.sum(np.tanh(y * x)) + np.sum(np.square(b))


def scaled_item_of_a_local_list(x, s):
    p = [x * 1.0, np.sin(x)]
    y, b = p
    b *= s  # (p, which holds b, is not read again)
    return np.sum(b * x) + np.sum(y * y)


def scaled_last_item_of_a_local_list(x, s):
    z = x * 1.0
    p = [z, np.sin(x)]
    last = p[-1]
    last *= s  # (z, p's other item, is read again; p is not)
    return np.sum(last * x) + np.sum(z * z)


def test_a_write_into_one_unpacked_item_is_not_a_write_into_the_other():
    """Seed 7187: ``y, b = params; b *= ...`` was refused as a write into b
    'which shares its array with y': the alias check took every name unpacked
    from a list for a view of all its items. Items of a list written out (the
    leaves of a differentiated list are one) are apart now, by position; a name
    for the whole list still shares with each (tests/test_transform_errors.py)."""
    rng = np.random.default_rng(31)
    x, y, b = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)

    def flat(x, y, b, s):
        return scaled_item_of_an_argument(x, [np.copy(y), np.copy(b)], s)

    dx, (dy, db), ds = ppto.grad(scaled_item_of_an_argument, wrt=(0, 1, 2))(
        x, [y, b], 0.6
    )
    assert_gradients([dx, dy, db, ds], flat, (x, y, b, 0.6))
    for function in (scaled_item_of_a_local_list, scaled_last_item_of_a_local_list):
        gradients = ppto.grad(function, wrt=(0, 1))(x, 0.6)
        assert_gradients(gradients, function, (x, 0.6))


def _total_and_flat(u):
    flat = u.reshape(-1)  # (a view of the caller's x)
    total = 0.0
    for row in u:
        total = total + np.sum(2.0 * row - 1.0)
    return total, flat


def _flat_and_total(u):
    total, flat = _total_and_flat(u)
    return flat, total


def number_of_a_helper_shifted(x, y):
    total, flat = _total_and_flat(x)
    total -= np.arctan2(y, y * y + 1.0)  # (a number: x is not written)
    return np.sum(total * total) + np.sum(flat * y)


def view_of_a_helper_shifted(x, y):
    flat, total = _flat_and_total(x)
    flat -= total * y  # (writes into x, read below)
    return np.sum(x * x)


def test_a_number_a_helper_returns_beside_a_view_is_no_view():
    """Seed 101685: ``t6, t7 = helper2(x)`` with ``return acc4, t3`` (a sum, and
    t3 = x.reshape(-1)) was refused at ``t6 -= ...`` as a write into a view of x:
    each item of a helper's result was taken for a view of every argument it
    returns. The items of a tuple the helper writes out are told apart by position
    now; the view's position still is one (through a second helper too)."""
    rng = np.random.default_rng(101685)
    arguments = (rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, 6))
    gradients = ppto.grad(number_of_a_helper_shifted, wrt=(0, 1))(*arguments)
    assert_gradients(gradients, number_of_a_helper_shifted, arguments)
    with pytest.raises(ppto.TransformError, match="shares its array with x") as error:
        ppto.grad(view_of_a_helper_shifted, wrt=(0, 1))(*arguments)
    assert "flat -= total * y" in error.value.text


def view_written_after_its_base_is_renamed(x):
    t = x * 1.0
    u = t
    v = t[1:]
    t = x * 2.0  # (u and v still share the first array)
    v += 1.0
    return np.sum(u * u) + np.sum(t)


def view_written_after_its_base_is_renamed_and_dropped(x):
    t = x * 1.0
    u = t  # noqa: F841 (a second name for the array, never read again)
    v = t[1:]
    t = x * 2.0
    v += 1.0  # (u is not read again: nothing else sees the write)
    return np.sum(v * v) + np.sum(t)


def test_names_sharing_an_array_keep_sharing_when_a_third_is_rebound():
    """Found reading the refusals of seeds 14000-14400: ``u = t; v = t[1:]; t =
    ...`` forgot that u and v share an array (each was linked through the name t
    only), so ``v += 1.0`` did not reach u in the generated code: a silently wrong
    value (0.449 for NumPy's 5.649) and gradient. Refused at the write now;
    without a later read of u it is differentiated."""
    x = np.linspace(0.1, 0.5, 4)
    with pytest.raises(ppto.TransformError, match="shares its array with u") as error:
        ppto.grad(view_written_after_its_base_is_renamed)(x)
    line = inspect.getsourcelines(view_written_after_its_base_is_renamed)[1] + 5
    assert error.value.lineno == line
    function = view_written_after_its_base_is_renamed_and_dropped
    value, gradient = ppto.value_and_grad(function)(x)
    np.testing.assert_allclose(float(value), function(x.copy()))
    assert_gradients([gradient], function, (x,))


def swapped_then_written(x, s):
    a, b = np.sqrt(x * x + 1.0), x / (s * s + 1.0)
    a, b = b, a
    b += np.square(b)  # (b is a's former array, which a no longer names)
    return np.sum(a * b)


def swapped_view_then_written(x, s):
    a = x * s
    b = a[1:]
    a, b = b, a
    b += 1.0  # (a is now a view of it)
    return np.sum(a * a)


def swapped_second_name_then_written(x, s):
    a, b = x * s, x * 2.0
    kept = b
    a, b = b, a
    a += 1.0  # (kept names the same array)
    return np.sum(kept * kept)


def test_names_swapped_take_each_others_arrays():
    """Seeds 14091, 14221, 14256: ``t17, t18 = t18, t17`` then ``t18 += ...`` was
    refused as a write into an array t17 shares: the names were bound one after
    the other (t18 to the new t17). Every value is read before any name is bound
    now; sharing that does hold across a swap is still refused."""
    x = np.linspace(-0.5, 0.7, 4)
    gradients = ppto.grad(swapped_then_written, wrt=(0, 1))(x, 0.6)
    assert_gradients(gradients, swapped_then_written, (x, 0.6))
    for function, other in (
        (swapped_view_then_written, "a"),
        (swapped_second_name_then_written, "kept"),
    ):
        assert_raised = pytest.raises(ppto.TransformError, match=f"with {other} ")
        with assert_raised as error:
            ppto.grad(function, wrt=(0, 1))(x, 0.6)
        assert error.value.lineno == inspect.getsourcelines(function)[1] + 4


def picked_by_index_functions_then_written(x, w):
    top = x[np.argsort(x)[-2:]]  # (an index array: a copy, not x's memory)
    rows = w[np.arange(2)]
    positive = x[np.nonzero(x > 0.0)[0]]
    kept = x[x.argsort()[::-1]]
    x += np.tanh(w)
    w *= 2.0
    return np.sum(top * x[:2]) + np.sum(rows * w[:2]) + np.sum(positive) + kept @ w


def row_picked_by_argsort_then_written(m):
    row = m[np.argsort(m[:, 0])[0]]  # (a number indexes: a view of a row)
    m += 1.0
    return np.sum(row * row)


def test_what_index_functions_pick_is_a_copy():
    """Seed 102437: ``t2 = x[np.argsort(x)[-2:]]`` then ``x += ...`` was refused
    as a write into an array t2 shares, where NumPy's index array made t2 a copy
    (so too np.arange, np.nonzero(...)[0] and .argsort(), sliced or not). An index
    that is one number still picks a view, and the write stays refused."""
    rng = np.random.default_rng(3)
    x, w = rng.uniform(-1.0, 1.0, 4), rng.uniform(-1.0, 1.0, 4)
    function = picked_by_index_functions_then_written
    value, gradients = ppto.value_and_grad(function, wrt=(0, 1))(x, w)
    np.testing.assert_allclose(float(value), function(x.copy(), w.copy()))
    on_copies = lambda x, w: function(x.copy(), w.copy())  # noqa: E731
    assert_gradients(gradients, on_copies, (x, w))
    with pytest.raises(ppto.TransformError, match="shares its array with row"):
        ppto.grad(row_picked_by_argsort_then_written)(rng.uniform(size=(3, 2)))


def rows_taken_then_one_written(x, params):
    y = params[0]
    c = params[1]
    y += np.sin(x)  # (into params' first row or item: c is another)
    return np.sum(y * x) + np.sum(c * c)


def unpacked_then_one_written(x, params):
    y, c = params
    y += np.sin(x)
    return np.sum(y * x) + np.sum(c * c)


def unpacked_then_written_and_read_whole(x, params):
    y, c = params
    y += np.sin(x)  # (NumPy: params[0] is y's array, changed)
    return np.sum(params[0] * x) + np.sum(c)


@pytest.mark.parametrize(
    "function", [rows_taken_then_one_written, unpacked_then_one_written]
)
@pytest.mark.parametrize("kind", ["array", "tuple"])
def test_items_of_an_argument_at_two_positions_are_apart(function, kind):
    """Seed 14228 (its gradient of a gradient, where params is not
    differentiated): ``y = params[0]; c = params[1]; y += ...`` was refused as a
    write into an array c shares: rows (or a tuple's items) at two positions
    counted from the start never overlap."""
    rng = np.random.default_rng(5)
    x, y, c = rng.uniform(-1.0, 1.0, (3, 3))
    params = np.stack([y, c]) if kind == "array" else (y, c)
    value, dx = ppto.value_and_grad(function, wrt=0)(x, params)

    def on_copies(x):
        copied = params.copy() if kind == "array" else tuple(a.copy() for a in params)
        return function(x, copied)

    np.testing.assert_allclose(float(value), on_copies(x.copy()))
    assert_gradients([dx], on_copies, (x,))


def test_an_item_unpacked_and_written_is_seen_in_its_argument():
    """``y, c = params; y += ...; ... params[0]`` gave 6.9 where NumPy gives 7.17
    for a tuple: the write into y (an item of params, which NumPy changes) was
    taken for a number rebound and dropped. Refused now, as for an array."""
    x = np.full(3, 0.3)
    for params in ((np.ones(3), np.full(3, 2.0)), np.stack([np.ones(3), np.ones(3)])):
        with pytest.raises(ppto.TransformError, match="shares its array with params"):
            ppto.grad(unpacked_then_written_and_read_whole)(x, params)


def swapped_then_squared(x, s):
    a, b = 2.0 * s - 1.0, s / (s * s + 1.0)
    a, b = b, a
    return np.sum(b * b) + np.sum(x * x)


def test_a_fused_sum_of_products_through_a_kept_copy():
    """Seed 102590: after ``a, b = b, a`` the fused ``sum_of_products`` read the
    copy's source (t4 for ``t5_1 = t4``, a copy the backward code keeps), and the
    chain pass, its read counts stale, then wrote t4's value into the copy and
    dropped t4: NameError in the fused code."""
    x = np.linspace(-0.5, 0.7, 4)
    with fused_for_any_size():
        value, gradients = ppto.value_and_grad(swapped_then_squared, wrt=(0, 1))(x, 0.6)
    np.testing.assert_allclose(float(value), swapped_then_squared(x, 0.6))
    assert_gradients(gradients, swapped_then_squared, (x, 0.6))


def scaled_by_a_number_then_written(x, s):
    t = x * s
    t *= np.sinh(x) * 0.5
    return np.sum(t * t) + s


def test_an_array_times_a_number_not_differentiated_is_a_new_array():
    """Seed 20334: ``t = x * s`` with s a float not differentiated (which the
    specialisation takes for a number or a list of numbers) was taken for s
    repeated x times, holding s's items, so ``t *= ...`` was refused as a write
    into s's array ('shares its array with s'). An array given for x makes it
    NumPy's product whatever s is (an array's operator comes before a list's
    repetition): a new array."""
    x = np.linspace(-0.5, 0.7, 4)
    value, gradient = ppto.value_and_grad(scaled_by_a_number_then_written)(x, 0.6)
    np.testing.assert_allclose(float(value), scaled_by_a_number_then_written(x, 0.6))
    expected = central_differences(scaled_by_a_number_then_written, (x, 0.6), 0)
    assert_gradient(np.asarray(gradient), expected, "d/dx")


def _bumped(u):
    z = u.copy()
    z[1] += 1.0
    return z


def bumped_where_masked(W, s):
    h = np.where(s > W, s, W * 0.5)
    return np.sum(_bumped(h) * h)


def test_a_comparison_has_the_rank_of_its_operands():
    """Seed 20437 (differentiated for s): a comparison written verbatim (``s >
    W``, no derivative) had no known rank, nor had np.where of it, so the helper
    was told nothing of its argument, which might then be a list: ``z =
    u.copy(); z[1] += 1.0`` was refused as a change to the caller's value (the
    items of a list's copy are the list's). It broadcasts as any elementwise
    operator: a matrix here."""
    W = np.array([[0.3, -0.2], [0.5, 0.1]])
    value, gradients = ppto.value_and_grad(bumped_where_masked, wrt=(0, 1))(W, 0.2)
    np.testing.assert_allclose(float(value), bumped_where_masked(W, 0.2))
    assert_gradients(gradients, bumped_where_masked, (W, 0.2))


def copied_then_stored_into(x, params):
    y, c = params
    t = y.copy()
    t[y > 0.2] = 0.5
    return np.sum(t * x) + np.sum(y) * c


def test_a_store_into_a_copy_leaves_what_was_copied():
    """Seed 104246 (params not differentiated, so y may be a list for all the
    check knew): ``t = y.copy(); t[m] = v`` was refused as a write into y's
    array. Whether y is an array (t a new one) or a list (t a new list, whose
    item the store replaces), y is untouched; a write into an item of the copy
    (``t[0] += v``) still counts for y's items."""
    x = np.array([0.3, 0.5, -0.1])
    params = (np.array([0.1, 0.4, 0.7]), 0.5)
    value, gradient = ppto.value_and_grad(copied_then_stored_into)(x, params)
    np.testing.assert_allclose(float(value), copied_then_stored_into(x, params))
    assert_gradients([gradient], copied_then_stored_into, (x, params))
