"""NumPy idioms ppto once refused in differentiated code: Python's max and min of
numbers, np.column_stack, np.array_split, np.partition, a ufunc's reduce, order='F'
reshapes, float(x) and x.item(), np.einsum of one operand and in its interleaved
form, np.trapezoid, np.polyval, np.gradient, np.bincount's weights, np.choose and a
ufunc's outer. Each function's value must be NumPy's exactly, and its gradient
(reverse and forward) central differences' in float64."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import ppto
from tests.corpus.checks import central_differences

RNG = np.random.default_rng(7)
MATRIX = RNG.standard_normal((3, 4))
SQUARE = RNG.standard_normal((3, 3))
CUBE = RNG.standard_normal((2, 3, 4))
# values at least 0.1 apart: no ties for max, min and partition
SPREAD = (RNG.permutation(12) - 6) * 0.25 + RNG.uniform(0, 0.1, 12)


def max_of_two(x):
    a, b = np.sum(x), np.sum(x * x)
    return max(a, b) + min(a, b) * 2.0


def max_of_three(x):
    return max(np.sum(x), np.sum(x**2) - 3.0, np.sum(np.sin(x)))


def min_of_a_number_and_a_float(x):
    return min(np.sum(x * x), 5.0) + max(0.5, np.sum(x))


def max_of_a_list(x):
    values = []
    for row in x:
        values.append(np.sum(row**2))
    return max(values) - min(values)


def max_of_a_list_written_out(x):
    return max([np.sum(x[0]), np.sum(x[1] ** 2)]) + min((x[0, 0], x[1, 1]))


def max_of_a_generator(x):
    return max(np.sum(row * row) for row in x)


def max_of_a_vector(x):
    return max(x[0]) * min(x[1])


def column_stack(x):
    stacked = np.column_stack([x[0], x[1] ** 2, x.T[:, :2]])
    return np.sum(stacked * np.arange(stacked.size).reshape(stacked.shape))


def array_split(x):
    a, b, c = np.array_split(x, 3, axis=1)
    return np.sum(a**2) + np.sum(b * 3.0) + np.sum(np.sin(c))


def partition(x):
    flat = np.ravel(x)
    return np.sum(np.partition(flat, 3)[:4] ** 2) + np.partition(flat, [2, 8])[8]


def partition_rows(x):
    weights = np.arange(x.size).reshape(x.shape)
    return np.sum(np.partition(x, 1, axis=0) * weights)


def partition_flattened(x):
    return np.sum(np.partition(x, 5, axis=None)[5:] ** 3)


def argpartition_passive(x):
    rows = np.argpartition(x, 1, axis=1)
    return np.sum(np.take_along_axis(x, rows, axis=1)[:, :2] ** 2)


def ufunc_reduces(x):
    return (
        np.sum(np.maximum.reduce(x) ** 2)
        + np.sum(np.minimum.reduce(x, axis=1) * 3.0)
        + np.sum(np.add.reduce(x, 1) ** 2)
        + np.multiply.reduce(x, axis=None)
    )


def fortran_order(x):
    weights = np.arange(x.size)
    return (
        np.sum(x.ravel(order="F") * weights)
        + np.sum(np.ravel(x, order="F") ** 2 * weights)
        + np.sum(x.flatten("F") ** 3 * weights)
        + np.sum(np.reshape(x, (2, 6), order="F") * weights.reshape(2, 6))
        + np.sum(x.reshape((6, 2), order="F") ** 2 * weights.reshape(6, 2))
    )


def float_of_a_sum(x):
    s = float(np.sum(x**2))
    return s * s + np.sum(x)


def item_of_a_sum(x):
    s = np.sum(np.sin(x)).item()
    return s * 3.0 + s * s


def einsum_trace(x):
    return np.einsum("ii->", x) * 2.0


def einsum_diagonal(x):
    return np.sum(np.einsum("ii->i", x) ** 2)


def einsum_transpose(x):
    weights = np.arange(x.size).reshape(x.shape[::-1])
    return np.sum(np.einsum("ij->ji", x) * weights) + np.sum(np.einsum("ji", x) ** 2)


def einsum_column_sums(x):
    return np.sum(np.einsum("ij->j", x) ** 2) + np.einsum("ij->", x)


def einsum_middle_sums(x):
    return np.sum(np.einsum("ijk->ik", x) ** 2)


def einsum_batched_transpose(x):
    weights = np.arange(x.size).reshape(2, 4, 3)
    return np.sum(np.einsum("...ij->...ji", x) * weights)


def rounded_scales(x):
    # np.round with decimals (by position and name), np.around, the method
    scales = np.round(x, 1) + np.round(x, decimals=2) + np.around(x, 1) + x.round(1)
    return np.sum(scales * x)


def flipped_and_inverse_hyperbolics(x):
    flipped = np.fliplr(x) * np.flipud(x) + np.fabs(x)
    inverse = np.arcsinh(x) + np.arctanh(x * 0.5) + np.arccosh(x * x + 1.5)
    return np.sum(flipped * inverse)


def angles_converted(x):
    return np.sum(np.sin(np.radians(x * 40.0)) * np.rad2deg(x) + np.deg2rad(x * x))


def maxima_skipping_nan(x):
    return np.sum(np.fmax(x, x[0]) ** 2 + np.fmin(x * 2.0, 0.3) * x)


def appended_in_a_loop(x):
    grown = np.array([])
    for k in range(3):
        grown = np.append(grown, x[k] * k)  # (flattened: axis None)
    rows = np.append(x, x[:1] ** 2, axis=0)
    return np.sum(grown**2) + np.sum(rows * np.arange(rows.size).reshape(rows.shape))


def vector_products_and_cleaned_values(x):
    # np.vecdot (NumPy 2), np.linalg.vecdot along another axis; np.nan_to_num's
    # -inf entries become -3.0, with no gradient
    rows = np.vecdot(x, x[0]) + np.linalg.vecdot(x, x * 2.0, axis=0).sum()
    infinite = np.where(np.arange(x.size).reshape(x.shape) % 5 == 0, -np.inf, 0.0)
    cleaned = np.nan_to_num(x * 2.0 + infinite, neginf=-3.0)
    return np.sum(rows**2) + np.sum(cleaned * x)


def selected_pieces(x):
    # np.select: the first condition holding picks its choice, else the default
    pieces = np.select([x < -0.5, x > 0.5], [x**2, x[0] * 3.0], default=np.sin(x))
    return np.sum(pieces * x)


def turned_and_raised(x):
    turned = np.sum((x @ np.rot90(x)) ** 2) + np.sum(np.rot90(x, 2, axes=(1, 0)) * x)
    raised = np.atleast_3d(x) * np.atleast_2d(x[0])[None] + np.atleast_1d(x[0, 0])
    return turned + np.sum(raised**2)


def binned_weights(x):
    # positions among sorted edges are whole numbers: no derivative passes
    edges = np.array([-1.0, 0.0, 1.0])
    binned = np.sum(x**2 * np.searchsorted(edges, x)) + np.sum(
        x * np.digitize(x, edges)
    )
    return binned + np.sum(np.sin(x) * np.heaviside(x, 0.5))  # (a step: no derivative)


def ufunc_accumulates(x):
    # a ufunc's accumulate: its running reduction along axis 0 unless told
    running = np.add.accumulate(x) * np.multiply.accumulate(x, axis=1)
    return np.sum(running**2)


def convolved_by_windows(x):
    # a convolution as NumPy users write it: windows of the image, then einsum
    kernel = np.array([[0.5, -1.0], [2.0, 0.25]])
    windows = np.lib.stride_tricks.sliding_window_view(x, (2, 2))
    return np.sum(np.tanh(np.einsum("hwij,ij->hw", windows, kernel)) ** 2)


def moving_average_of_reflected(x):
    padded = np.pad(x, ((1, 1), (2, 0)), mode="reflect")
    smooth = sliding_window_view(padded, 3, axis=1).mean(axis=-1)
    edged = np.pad(smooth, 1, "edge") * np.pad(x, 2, mode="wrap")[:, 1:-1]
    return np.sum(edged**2) + np.sum(np.pad(x, (2, 3), mode="symmetric") ** 3)


def scattered_by_ufunc_at(x):
    # NumPy's unbuffered scatter: a repeated index adds each time
    table = np.zeros((4, 4))
    np.add.at(table, (np.array([0, 2, 0]), slice(None)), x[:, :4] ** 2)
    np.subtract.at(table, ([1, 1, 3], [0, 0, 2]), x[0, :3] * 0.5)
    counts = x[1] * 1.0
    np.add.at(counts, [3, 3, 3], 2.0)  # (numbers only: no derivative to pass)
    return np.sum(np.tanh(table) * 1.5) + np.sum(counts**2)


def integrals_and_polynomials(x):
    # np.trapezoid over samples evenly spaced and at points (both differentiated);
    # np.polyval of coefficients and points both differentiated
    points = np.cumsum(np.exp(x[0]))
    areas = np.trapezoid(x**2, points) + np.trapezoid(x, dx=0.5, axis=0).sum()
    return np.sum(areas**2) + np.sum(np.polyval(x[1], x[2:] * x[0]) ** 2)


def derivatives_by_differences(x):
    # np.gradient of a vector, along one axis (edge_order 2), and along several:
    # NumPy's tuple (unpacked, indexed, iterated), one spacing for all axes or one
    # for each
    slope = np.gradient(x[0] ** 2) + np.gradient(x[1], 0.5, edge_order=2)
    rows = np.gradient(np.sin(x), axis=1, edge_order=2)
    dy, dx = np.gradient(x**2, 0.5, 2.0)
    parts = np.gradient(x * x[0], axis=(1, 0))
    total = np.sum(parts[0] * parts[1])
    for part in np.gradient(np.exp(x), 0.25, axis=(0, 1), edge_order=2):
        total = total + np.sum(part**2)
    return np.sum(slope**2) + np.sum(rows * x) + np.sum(dy * dx) + total


def weighted_counts_and_choices(x):
    # np.bincount's sums of weights (differentiated) and counts (whole numbers);
    # np.choose among the rows of x, among a list of arrays and numbers (which
    # broadcast together), wrapping and clipping
    bins = np.array([0, 3, 3, 1])
    sums = np.bincount(bins, weights=x[0] ** 2, minlength=6) * np.bincount(
        bins, None, 6
    )
    picks = np.array([[2, 0, 1, 1], [0, 4, 2, -1]])
    chosen = np.choose(picks[0], x) + np.choose(picks % 2, [np.sin(x[1]), x[2] * x[0]])
    edges = np.choose(picks, x, mode="wrap") * np.choose(picks, x, mode="clip")
    edges = edges + np.choose(picks % 3, (x[0], 0.5, x[1:2] ** 2), mode="clip")
    return np.sum(sums * np.arange(6.0)) + np.sum(chosen**2) + np.sum(edges)


def ufunc_outers(x):
    # a ufunc's outer: every pair of elements, of shape a's then b's
    table = np.multiply.outer(x[0], x[1:]) + np.add.outer(x[1] ** 2, x[0]).sum()
    gaps = np.subtract.outer(x[0], x[2]) ** 2 + np.divide.outer(x[1], np.exp(x[2]))
    extremes = np.maximum.outer(x[0], x[1]) * np.minimum.outer(x[2], 0.3)
    return np.sum(table**2) + np.sum(gaps) + np.sum(extremes)


def einsum_interleaved(x):
    # np.einsum's interleaved form: each operand's axes as whole numbers (Ellipsis
    # or ... for the rest), the result's last or left implicit
    product = np.einsum(x, [0, 1], x.T, [1, 2], [0, 2])
    trace = np.einsum(x[:, :3], [0, 0]) + np.einsum(x, (0, 1), x, (0, 1), [0]).sum()
    implicit = np.einsum(x, [1, 0], x.T, [0, 2])
    stacked = np.einsum(x[None], [Ellipsis, 0, 1], x, [..., 0, 1], [..., 1])
    return np.sum(product**2) + trace + np.sum(implicit * x[0, 0]) + np.sum(stacked)


def arrays_given_for_lists(x):
    # NumPy reads an array given for a list of arrays as its rows
    joined = np.concatenate(x**2) * np.arange(12.0)
    stacked = np.stack(x * 2.0, axis=1) + np.vstack(np.sin(x)).T
    rows = np.hstack(x[1:]) + np.column_stack(x.T).ravel()[:8]
    chosen = np.select([x[0] > 0, x[0] <= 0], x[1:] ** 2)
    return np.sum(joined) + np.sum(stacked**2) + np.sum(rows**3) + np.sum(chosen)


def linalg_array_api_spellings(x):
    # NumPy 2's np.linalg spellings (each had no operator); np.linalg.trace,
    # diagonal and matrix_norm act on the last two axes, np.trace on the first
    square = x[:, :, :3]
    products = np.linalg.matmul(x, np.linalg.matrix_transpose(x))
    crossed = np.linalg.cross(square, square[::-1] * 2.0)
    outer = np.linalg.outer(x[0, 0], x[1, 1])
    paired = np.linalg.tensordot(x, x[0], axes=([1, 2], [0, 1]))
    traces = np.linalg.trace(square, offset=1) * np.linalg.diagonal(square)[:, 0]
    norms = np.linalg.matrix_norm(x) + np.linalg.matrix_norm(square, ord=2)
    return (
        np.sum(np.tanh(products))
        + np.sum(crossed**2)
        + np.sum(outer * x[0, 1])
        + np.sum(paired**2)
        + np.sum(traces)
        + np.sum(norms * np.array([1.0, 2.0]))
    )


def arrays_with_lists_and_tuples(x):
    # an array and a list or tuple of differentiated values: NumPy's elementwise
    # arithmetic, not a join or a repetition (refused before as either)
    row = x[0] * 1.0
    shifted = row + (x[1, 0], x[1, 1] ** 2, x[1, 2], 1.0)
    scaled = row[:2] * [x[2, 0], 3.0] + (x[2, 1], 1.0)
    return np.sum(shifted**2) + np.sum(scaled**3)


CASES = [
    (arrays_with_lists_and_tuples, MATRIX),
    (linalg_array_api_spellings, CUBE),
    (arrays_given_for_lists, MATRIX),
    (scattered_by_ufunc_at, MATRIX),
    (convolved_by_windows, MATRIX),
    (moving_average_of_reflected, MATRIX),
    (einsum_interleaved, MATRIX),
    (ufunc_outers, MATRIX),
    (weighted_counts_and_choices, MATRIX),
    (derivatives_by_differences, MATRIX),
    (integrals_and_polynomials, MATRIX),
    (ufunc_accumulates, MATRIX),
    (binned_weights, MATRIX),
    (turned_and_raised, MATRIX),
    (selected_pieces, MATRIX),
    (vector_products_and_cleaned_values, MATRIX),
    (appended_in_a_loop, MATRIX),
    (rounded_scales, SQUARE),
    (flipped_and_inverse_hyperbolics, MATRIX * 0.8),
    (angles_converted, MATRIX),
    (maxima_skipping_nan, SPREAD.reshape(3, 4)),
    (max_of_two, SQUARE),
    (max_of_three, SQUARE),
    (min_of_a_number_and_a_float, SQUARE * 0.5),
    (max_of_a_list, MATRIX),
    (max_of_a_list_written_out, MATRIX),
    (max_of_a_generator, MATRIX),
    (max_of_a_vector, SPREAD.reshape(3, 4)),
    (column_stack, MATRIX),
    (array_split, MATRIX),
    (partition, SPREAD.reshape(3, 4)),
    (partition_rows, SPREAD.reshape(3, 4)),
    (partition_flattened, SPREAD.reshape(3, 4)),
    (argpartition_passive, SPREAD.reshape(3, 4)),
    (ufunc_reduces, SPREAD.reshape(3, 4)),
    (fortran_order, MATRIX),
    (float_of_a_sum, MATRIX),
    (item_of_a_sum, MATRIX),
    (einsum_trace, SQUARE),
    (einsum_diagonal, SQUARE),
    (einsum_transpose, MATRIX),
    (einsum_column_sums, MATRIX),
    (einsum_middle_sums, CUBE),
    (einsum_batched_transpose, CUBE),
]


@pytest.mark.parametrize(
    "function, x", CASES, ids=[function.__name__ for function, _ in CASES]
)
def test_idiom_value_is_numpys_and_gradients_central_differences(function, x):
    value, gradient = ppto.value_and_grad(function)(x)
    assert float(value) == function(x)  # (exactly: the same NumPy calls)
    expected = central_differences(function, [x], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    direction = np.linspace(1.0, -2.0, x.size).reshape(x.shape)
    _, derivative = ppto.jvp(function, (x,), (direction,))
    assert float(derivative) == pytest.approx(np.sum(expected * direction), rel=1e-6)


@pytest.mark.parametrize(
    "function, x",
    [
        (einsum_trace, SQUARE),
        (einsum_diagonal, SQUARE),
        (max_of_three, SQUARE),
        (moving_average_of_reflected, MATRIX),
        (integrals_and_polynomials, MATRIX),
        (derivatives_by_differences, MATRIX),
        (weighted_counts_and_choices, MATRIX),
        (ufunc_outers, MATRIX),
        (einsum_interleaved, MATRIX),
    ],
    ids=[
        "einsum_trace",
        "einsum_diagonal",
        "max_of_three",
        "padded_windows",
        "integrals",
        "gradient",
        "bincount_choose",
        "ufunc_outers",
        "einsum_interleaved",
    ],
)
def test_second_derivatives_through_idioms(function, x):
    step = 1e-5
    gradient = ppto.grad(function)
    flat = x.ravel()
    columns = [
        (
            np.asarray(gradient((flat + step * e).reshape(x.shape)))
            - np.asarray(gradient((flat - step * e).reshape(x.shape)))
        ).ravel()
        / (2 * step)
        for e in np.eye(x.size)
    ]
    hessian = np.asarray(ppto.hessian(function)(x)).reshape(x.size, x.size)
    np.testing.assert_allclose(hessian, np.stack(columns, 1), rtol=1e-5, atol=1e-7)


def tied_max(x):
    return max(x[0], x[1]) + min(x[2], x[3]) * 2.0


def test_tied_max_and_min_send_the_gradient_to_the_first_as_python_returns_it():
    # Python's max(a, b) returns a unless b > a: the tie's gradient is a's
    gradient = np.asarray(ppto.grad(tied_max)(np.array([1.5, 1.5, -0.5, -0.5])))
    np.testing.assert_array_equal(gradient, [1.0, 0.0, 2.0, 0.0])


def tied_partition(x):
    return np.sum(np.partition(x, 1) * np.array([1.0, 10.0, 100.0, 1000.0]))


def test_tied_partition_gives_each_element_one_place_s_gradient():
    # ties share no gradient: each element takes the gradient of one place, tied
    # ones matched in their order (as a stable sort ranks them)
    x = np.array([2.0, 1.0, 2.0, 1.0])
    gradient = np.asarray(ppto.grad(tied_partition)(x))
    assert tied_partition(x) == pytest.approx(
        float(ppto.value_and_grad(tied_partition)(x)[0])
    )
    assert sorted(gradient) == [1.0, 10.0, 100.0, 1000.0]
    np.testing.assert_array_equal(gradient[[1, 3]], [1.0, 10.0])


def test_tied_ufunc_reduce_shares_the_gradient_as_np_max_does():
    def top(x):
        return np.sum(np.maximum.reduce(x, axis=0))

    gradient = np.asarray(ppto.grad(top)(np.array([[1.0, 2.0], [1.0, 0.0]])))
    np.testing.assert_array_equal(gradient, [[0.5, 1.0], [0.5, 0.0]])


def einsum_diagonals_of_two_operands(x):
    # an index repeated within one of two operands: its diagonal (or trace) first,
    # NumPy's implicit result (the indices met once) kept
    stack = np.stack([x, x.T * 2.0])
    return (
        np.sum(np.einsum("ii,i->i", x, x[0]) ** 2)
        + np.sum(np.einsum("ii,jk", x, x * x) * x)
        + np.sum(np.einsum("ij,kk->ij", x, x) * x)
        + np.sum(np.einsum("...ii,...i->...", stack, x[:2]) ** 2)
        + np.einsum("ii,ii->", x, np.sin(x))
    )


def test_einsum_of_two_operands_repeating_an_index():
    value, gradient = ppto.value_and_grad(einsum_diagonals_of_two_operands)(SQUARE)
    expected = einsum_diagonals_of_two_operands(SQUARE)
    assert float(value) == pytest.approx(expected, rel=1e-12)
    expected = central_differences(einsum_diagonals_of_two_operands, [SQUARE], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    direction = np.linspace(1.0, -2.0, SQUARE.size).reshape(SQUARE.shape)
    function = einsum_diagonals_of_two_operands
    _, derivative = ppto.jvp(function, (SQUARE,), (direction,))
    assert float(derivative) == pytest.approx(np.sum(expected * direction), rel=1e-6)


def einsum_generated(x):
    return np.einsum("ii->", x) + np.sum(np.einsum("ij->ji", x) ** 2)


def test_einsum_of_one_operand_shows_its_mask_and_transpose():
    source = ppto.show_grad(einsum_generated, SQUARE, file=None)
    assert "unary_einsum(x, subscripts='ii->')" in source
    assert "diagonal_mask(x, 'ii->')" in source
    assert "subscripts='ji->ij'" in source


def max_with_key(x):
    return max(np.sum(x), np.sum(x * 2), key=abs)


def max_of_unpacked(x):
    values = [np.sum(x), np.sum(x * 2)]
    return max(*values)


@pytest.mark.parametrize(
    "function, advice",
    [(max_with_key, "max has no ppto operator"), (max_of_unpacked, "one by one")],
)
def test_max_with_key_or_starred_items_is_refused_at_its_line(function, advice):
    with pytest.raises(ppto.TransformError) as raised:
        ppto.grad(function)(SQUARE)
    message = str(raised.value)
    assert "test_numpy_idioms.py" in message and advice in message


def max_of_two_arrays(x):
    return np.sum(max(x[0], x[1]))


def test_max_of_arrays_is_refused_as_python_refuses_it():
    # (Python's own error, at the user's line: not np.maximum's elementwise result)
    with pytest.raises(
        ppto.ShapeError, match=r"test_numpy_idioms\.py, line \d+.*truth value"
    ):
        ppto.grad(max_of_two_arrays)(MATRIX)


def ravel_in_memory_order(x):
    return np.sum(x.ravel(order="K") ** 2)


def reshape_in_memory_order(x):
    return np.sum(np.reshape(x, (4, 3), order="A") ** 2)


def reshape_in_order_of_a_variable(x, order):
    return np.sum(x.reshape(4, 3, order=order) ** 2)


@pytest.mark.parametrize(
    "function, args, written",
    [
        (ravel_in_memory_order, (MATRIX,), "'K'"),
        (reshape_in_memory_order, (MATRIX,), "'A'"),
        (reshape_in_order_of_a_variable, (MATRIX, "F"), "order"),
    ],
)
def test_memory_orders_are_refused_at_their_line(function, args, written):
    # 'A' and 'K' follow memory layout, which generated code does not keep
    with pytest.raises(ppto.TransformError) as raised:
        ppto.grad(function)(*args)
    message = str(raised.value)
    assert f"written out, not {written}" in message
    assert "test_numpy_idioms.py" in message and "order='F'" in message


def float_of_a_vector(x):
    return float(x[:1]) * 2.0


def test_float_of_an_array_with_axes_is_refused_as_numpy_refuses_it():
    with pytest.raises(ppto.ShapeError, match=r"float\(\) of an array.*line \d+"):
        ppto.grad(float_of_a_vector)(np.arange(3.0))


def counts_from_shapes(x):
    steps = max(x.shape[0], 2) + min(x.shape)
    total = 0.0
    for _ in range(steps):
        total = total + np.sum(x)
    return total


def test_max_of_whole_numbers_still_counts_loops():
    assert float(ppto.grad(counts_from_shapes)(MATRIX)[0, 0]) == 6.0


def part_of_an_uneven_array_split(x):
    return np.sum(np.array_split(x, 5)[1] * np.arange(5.0))


def part_of_a_split_at_indices(x):
    return np.sum(np.split(x, [3, 10])[1] ** 2) + np.sum(np.split(x, 4)[-1])


@pytest.mark.parametrize(
    "function", [part_of_an_uneven_array_split, part_of_a_split_at_indices]
)
def test_a_part_read_straight_from_a_split_call(function):
    """``np.array_split(x, 5)[1]``: the parts differ in shape, and their adjoints
    were stacked into one array (a ShapeError from the generated code: an
    inhomogeneous shape); the call is a tuple of parts now, as when named."""
    x = np.arange(24.0) / 7.0
    value, gradient = ppto.value_and_grad(function)(x)
    assert float(value) == function(x)
    expected = central_differences(function, [x], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    tangent = RNG.standard_normal(24)
    _, derivative = ppto.jvp(function, (x,), (tangent,))
    np.testing.assert_allclose(float(derivative), expected @ tangent, rtol=1e-6)


def split_at_cut_points_out_of_order(x):
    first, empty, last = np.split(x, [3, 1], axis=1)  # x[:, 1:3] in first and last
    return np.sum(np.sin(first)) + np.sum(empty) + np.sum(last**2 * 3.0)


def split_at_a_negative_cut_point_before_another(x):
    parts = np.split(x, [-1, 1], axis=-1)
    return np.sum(parts[0] * np.arange(3.0)) + np.sum(np.cos(parts[2]))


def array_split_at_cut_points_out_of_order(x):
    parts = np.array_split(x, [2, 1, 3], axis=0)
    return sum(np.sum(np.sin(part) * (i + 1.0)) for i, part in enumerate(parts))


def hsplit_and_vsplit_at_cut_points_out_of_order(x):
    left, _, right = np.hsplit(x, [3, 1])
    top, _, bottom = np.vsplit(x, [2, 1])
    return np.sum(np.sin(left) * right[:, :3]) + np.sum(top * 2.0) + np.sum(bottom**2)


@pytest.mark.parametrize(
    "function",
    [
        split_at_cut_points_out_of_order,
        split_at_a_negative_cut_point_before_another,
        array_split_at_cut_points_out_of_order,
        hsplit_and_vsplit_at_cut_points_out_of_order,
    ],
)
def test_split_pieces_that_overlap_add_their_gradients(function):
    """Cut points out of order make pieces that overlap (np.split(x, [3, 1])
    gives x[:, :3], an empty piece and x[:, 1:]): the gradient adds the pieces'
    gradients where they overlap. Joined end to end, it was wider than x (a
    GradError blaming a gradient rule)."""
    x = RNG.standard_normal((4, 4))
    value, gradient = ppto.value_and_grad(function)(x)
    assert float(value) == function(x)
    expected = central_differences(function, [x], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    tangent = RNG.standard_normal((4, 4))
    _, derivative = ppto.jvp(function, (x,), (tangent,))
    np.testing.assert_allclose(float(derivative), np.sum(expected * tangent), rtol=1e-6)
    step = 1e-5
    _, curvature = ppto.jvp(ppto.grad(function), (x,), (tangent,))
    columns = (
        np.asarray(ppto.grad(function)(x + step * tangent))
        - np.asarray(ppto.grad(function)(x - step * tangent))
    ) / (2 * step)
    np.testing.assert_allclose(np.asarray(curvature), columns, rtol=1e-5, atol=1e-7)


def sum_over_an_axis_held_in_a_0d_array(x):
    return np.sum(np.sin(np.sum(x, axis=np.array(1))) * np.arange(3.0))


def norm_and_variance_over_an_axis_held_in_a_0d_array(x):
    axis = np.array(-1)
    return np.sum(np.linalg.norm(x, axis=axis) + np.var(x, axis=axis, ddof=1))


@pytest.mark.parametrize(
    "function",
    [
        sum_over_an_axis_held_in_a_0d_array,
        norm_and_variance_over_an_axis_held_in_a_0d_array,
    ],
)
def test_a_reduction_over_an_axis_given_as_a_0d_array(function):
    """NumPy takes a 0-d integer array for an axis; the gradient of a reduction
    without keepdims iterated over it (a TypeError from the generated code)."""
    value, gradient = ppto.value_and_grad(function)(MATRIX)
    assert float(value) == function(MATRIX)
    expected = central_differences(function, [MATRIX], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    tangent = RNG.standard_normal(MATRIX.shape)
    _, derivative = ppto.jvp(function, (MATRIX,), (tangent,))
    np.testing.assert_allclose(float(derivative), np.sum(expected * tangent), rtol=1e-6)


def test_fmax_and_fmin_send_the_gradient_past_nan_to_the_other_operand():
    # np.fmax(a, nan) is a, np.fmax(nan, b) is b: the gradient goes to that one
    # (np.maximum's NaN would propagate, and its gradient go to b)
    a = np.array([1.0, np.nan, 3.0, -1.0])
    b = np.array([np.nan, 2.0, 0.5, 4.0])

    def total(a, b):
        return np.sum(np.fmax(a, b) * 2.0 + np.fmin(a, b) * 3.0)

    value, (da, db) = ppto.value_and_grad(total, wrt=(0, 1))(a, b)
    assert float(value) == total(a, b)
    np.testing.assert_array_equal(np.asarray(da), [5.0, 0.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(db), [0.0, 5.0, 3.0, 2.0])


def test_average_weights_along_a_tuple_axis_as_numpy_2_takes_them():
    # weights of the array's lengths along the axes (np.average since NumPy 2.0;
    # ppto refused them, saying NumPy did); axes out of order are refused by name
    data, weights = CUBE[:, :, :4], RNG.uniform(0.5, 1.5, (2, 4))
    expected = np.average(data, axis=(0, 2), weights=weights)
    np.testing.assert_allclose(
        np.asarray(ppto.average(data, axis=(0, 2), weights=weights)), expected
    )
    with pytest.raises(ppto.ShapeError, match="increasing order"):
        ppto.average(data, axis=(2, 0), weights=weights.T)
    with pytest.raises(ppto.ShapeError, match="in that order"):
        ppto.average(data, axis=(0, 2), weights=weights.T)


def cleaned_in_place(x):
    return np.sum(np.nan_to_num(x, False))


def test_nan_to_num_writing_into_its_argument_is_refused():
    with pytest.raises(ppto.PptoError, match="copy=False would write into x"):
        ppto.grad(cleaned_in_place)(MATRIX)


def masked_and_started_reductions(x):
    # where= and initial= of NumPy's reductions, functions and methods: entries
    # left out, and a starting value joined to the result
    kept = x > -0.3
    total = np.sum(x**2, where=kept) + np.sum(np.mean(x**3, axis=0, where=x > -0.8))
    started = np.prod(x[:2], where=kept[:2], initial=2.0) + x.max(initial=0.2)
    highest = np.max(x * 2.0, axis=1, where=kept, initial=-5.0)
    return total + started + np.sum(highest**2) + np.sum(x, axis=0, initial=1.5).sum()


def test_reductions_with_where_and_initial_as_numpy_computes_them():
    value, gradient = ppto.value_and_grad(masked_and_started_reductions)(MATRIX)
    assert float(value) == pytest.approx(masked_and_started_reductions(MATRIX), 1e-12)
    expected = central_differences(masked_and_started_reductions, [MATRIX], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-8)
    direction = np.linspace(1.0, -2.0, MATRIX.size).reshape(MATRIX.shape)
    _, derivative = ppto.jvp(masked_and_started_reductions, (MATRIX,), (direction,))
    assert float(derivative) == pytest.approx(np.sum(expected * direction), rel=1e-6)


def reduced_in_another_dtype(x):
    # dtype= of np.sum, np.mean, np.prod and their methods: x converted first, in
    # which NumPy reduces (each was "ppto.reduce_sum has no argument 'dtype'"); to
    # whole numbers (truncated) no derivative passes
    wide = np.sum(x**2, dtype=np.float64) + np.mean(x, axis=0, dtype="float64")
    counted = np.sum(x * 4.0, dtype=int) * x.prod(dtype=float, where=x > 0)
    return np.sum(wide * 2.0) + counted


def narrowed(x):
    return np.sum(np.sum(x * 3.0, axis=1, dtype=np.float32) ** 2)


def test_reductions_with_a_dtype_as_numpy_computes_them():
    x = MATRIX.astype(np.float32)
    value, gradient = ppto.value_and_grad(reduced_in_another_dtype)(x)
    assert value.dtype == reduced_in_another_dtype(x).dtype == np.float64
    assert float(value) == pytest.approx(float(reduced_in_another_dtype(x)), 1e-12)
    assert gradient.dtype == np.float32
    expected = central_differences(reduced_in_another_dtype, [MATRIX], 0)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-5, atol=1e-5)
    # (a float32 result's differences are rounding: its derivative written out)
    value, gradient = ppto.value_and_grad(narrowed)(MATRIX)
    assert value.dtype == narrowed(MATRIX).dtype == np.float32
    rows = np.sum(MATRIX * 3.0, axis=1, dtype=np.float32)
    expected = np.broadcast_to(6.0 * rows[:, None], MATRIX.shape)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6)
    with pytest.raises(ppto.TransformError, match="no argument 'dtype'"):
        ppto.grad(largest_in_float64)(MATRIX)


def largest_in_float64(x):
    return np.max(x, dtype=np.float64)  # (NumPy's np.max has no dtype either)


def rooted_where_positive(x):
    return np.sum(np.where(x > 0, np.sqrt(x), 0.0))


def rooted_where_positive_guarded(x):
    safe = np.where(x > 0, x, 1.0)
    return np.sum(np.where(x > 0, np.sqrt(safe), 0.0))


def test_a_branch_not_taken_is_differentiated_as_jax_does():
    # (README): the gradient of np.where's other branch is zero times sqrt's
    # derivative, NaN where x < 0 and infinite at 0; the argument guarded too, the
    # gradient is the derivative
    x = np.array([-1.0, 0.0, 0.25, 4.0])
    with np.errstate(invalid="ignore", divide="ignore"):
        trapped = np.asarray(ppto.grad(rooted_where_positive)(x))
    assert np.isnan(trapped[:2]).all()
    np.testing.assert_allclose(trapped[2:], [1.0, 0.25])
    guarded = np.asarray(ppto.grad(rooted_where_positive_guarded)(x))
    np.testing.assert_allclose(guarded, [0.0, 0.0, 1.0, 0.25])
    shifted = x + np.array([0.0, 1e-3, 0.0, 0.0])  # (central differences' domain)
    np.testing.assert_allclose(
        np.asarray(ppto.grad(rooted_where_positive_guarded)(shifted)),
        central_differences(rooted_where_positive_guarded, [shifted], 0),
        rtol=1e-6,
    )


def largest_kept(x):
    return np.max(x, where=x > 0)


def test_a_maximum_with_where_and_no_initial_is_refused_as_numpy_asks_for_one():
    with pytest.raises(ppto.TransformError, match="where= and no initial="):
        ppto.grad(largest_kept)(MATRIX)


def test_a_ufuncs_accumulate_of_a_tensor_runs_its_operator():
    tensor = ppto.tensor(MATRIX)
    np.testing.assert_allclose(
        np.asarray(np.add.accumulate(tensor)), np.add.accumulate(MATRIX)
    )


def integral_at_too_few_points(x):
    return np.trapezoid(x, np.arange(3.0)).sum()


def polynomial_of_a_matrix_of_coefficients(x):
    return np.polyval(x, x[0]).sum()


@pytest.mark.parametrize(
    "function, message",
    [
        (integral_at_too_few_points, "3 points for 4 samples along axis -1"),
        (polynomial_of_a_matrix_of_coefficients, "argument 1 must have 1 axes"),
    ],
)
def test_trapezoid_and_polyval_name_what_is_wrong_with_their_shapes(function, message):
    with pytest.raises(ppto.ShapeError, match=message):
        ppto.grad(function)(MATRIX)
    with pytest.raises(ppto.ShapeError, match=message):
        function(ppto.tensor(MATRIX))


def gradient_of_a_matrix_without_axis(x):
    return np.sum(np.gradient(x)[0])


def gradient_at_coordinates(x):
    return np.sum(np.gradient(x[0], np.cumsum(np.ones(4))))


def gradient_of_third_order(x):
    return np.sum(np.gradient(x[0], edge_order=3))


def gradient_of_two_samples_of_second_order(x):
    return np.sum(np.gradient(x[:2, 0], edge_order=2))


@pytest.mark.parametrize(
    "function, error, message",
    [
        (gradient_of_a_matrix_without_axis, ppto.ShapeError, r"axis=\(0, 1\) for"),
        (gradient_at_coordinates, ppto.PptoError, "coordinates of the samples"),
        (gradient_of_third_order, ppto.PptoError, "edge_order is 1 or 2, got 3"),
        (gradient_of_two_samples_of_second_order, ppto.ShapeError, "at least 3"),
    ],
)
def test_np_gradient_refuses_what_it_cannot_differentiate_saying_why(
    function, error, message
):
    with pytest.raises(error, match=message):
        ppto.grad(function)(MATRIX)


def test_np_gradient_of_a_tensor_gives_numpys_tuple_or_array():
    tensor = ppto.tensor(MATRIX)
    both = np.gradient(tensor, 0.5, edge_order=2)
    assert type(both) is type(np.gradient(MATRIX)) and len(both) == 2
    for part, expected in zip(both, np.gradient(MATRIX, 0.5, edge_order=2)):
        np.testing.assert_array_equal(np.asarray(part), expected)
    one = np.gradient(tensor, axis=(1,))
    np.testing.assert_array_equal(np.asarray(one), np.gradient(MATRIX, axis=(1,)))


def counted_reals(x):
    return np.sum(np.bincount(np.array([0.0, 2.0]), weights=x[0, :2]))


def counted_negatives(x):
    return np.sum(np.bincount(np.array([0, -1]), weights=x[0, :2]))


def counted_with_a_weight_short(x):
    return np.sum(np.bincount(np.array([0, 2, 1]), weights=x[0, :2]))


def chosen_beyond_the_choices(x):
    return np.sum(np.choose(np.array([0, 3, 1, 2]), x))


def chosen_among_unlike_shapes(x):
    return np.sum(np.choose(np.array([0, 1, 1, 0]), [x[0], x[:, :2]]))


def chosen_by_reals(x):
    return np.sum(np.choose(np.array([0.0, 1.0, 1.0, 2.0]), x))


@pytest.mark.parametrize(
    "function, error, message",
    [
        (counted_reals, ppto.DTypeError, "counts whole numbers, not dtype float64"),
        (counted_negatives, ppto.ShapeError, r"of a negative number \(-1\)"),
        (counted_with_a_weight_short, ppto.ShapeError, r"weights \(shape \(2,\)\)"),
        (chosen_beyond_the_choices, ppto.ShapeError, "number 3 among 3 choices"),
        (chosen_by_reals, ppto.DTypeError, "picks by whole numbers"),
        (chosen_among_unlike_shapes, ppto.ShapeError, r"\(4,\), \(3, 2\) do not"),
    ],
)
def test_bincount_and_choose_name_what_is_wrong_with_their_numbers(
    function, error, message
):
    with pytest.raises(error, match=message):
        ppto.grad(function)(MATRIX)


def test_a_ufuncs_outer_of_tensors_runs_its_operator_and_others_are_refused():
    tensor = ppto.tensor(MATRIX)
    np.testing.assert_array_equal(
        np.asarray(np.subtract.outer(tensor[0], tensor)),
        np.subtract.outer(MATRIX[0], MATRIX),
    )
    with pytest.raises(ppto.PptoError, match="np.power.outer has no ppto operator"):
        np.power.outer(tensor[0], tensor[1])
    with pytest.raises(ppto.PptoError, match="not 'power'"):
        ppto.ufunc_outer(tensor[0], tensor[1], ufunc="power")


def einsum_interleaved_with_an_axis_computed(x):
    k = 1
    return np.sum(np.einsum(x, [0, k], x, [0, 1], [1]))


def test_einsum_interleaved_refuses_axes_not_written_out_at_the_line():
    with pytest.raises(ppto.TransformError, match="not a list of numbers") as caught:
        ppto.grad(einsum_interleaved_with_an_axis_computed)(MATRIX)
    assert "np.einsum(x, [0, k], x, [0, 1], [1])" in str(caught.value)


def test_einsum_interleaved_of_tensors_runs_its_operators():
    tensor = ppto.tensor(MATRIX)
    np.testing.assert_allclose(
        np.asarray(np.einsum(tensor, [0, 1], tensor, [2, 1], [0, 2])),
        MATRIX @ MATRIX.T,
    )
    np.testing.assert_allclose(
        np.asarray(np.einsum(tensor[:, :3], [0, 0])), np.trace(MATRIX[:, :3])
    )
    with pytest.raises(ppto.PptoError, match="whole numbers from 0 to 51"):
        np.einsum(tensor, [0, -1])


def test_an_array_given_for_a_list_of_tensors_is_read_as_its_rows():
    # ppto.stack(tensor) refused ("expected a list of tensors") where np.stack
    # takes an array's rows
    x = ppto.tensor(MATRIX)
    for op, function in ((ppto.stack, np.stack), (ppto.concatenate, np.concatenate)):
        np.testing.assert_array_equal(op(x).numpy(), function(MATRIX))
