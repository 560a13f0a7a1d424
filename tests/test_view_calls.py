"""Writes through the result of a call that returns a view of its argument (or the
argument itself): NumPy changes the argument's array, ppto's generated code gives
each assignment a new array, so such a write is refused where the array written
into is read afterwards (aliases.py), and differentiated where it is not. Each
case below was silently wrong (value and gradient) before it was refused: found
by review (one-operand np.einsum, np.split and its kin, Python's max, unpacking
the rows of an array of unknown rank, np.flip and the conversions that return
their argument as it is)."""

import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

MATRIX = np.array([[0.3, -1.2, 2.0], [0.5, 1.1, -0.7]])
SQUARE = np.array([[1.0, 2.0, -0.5], [3.0, 4.0, 0.25], [-1.5, 0.75, 2.5]])
VECTOR = np.array([0.3, 1.7, -0.4, 2.2, 0.9, -1.1])


# --- refused: the write would change y, read afterwards ---------------------------


def einsum_diagonal(m):
    y = m * 1.0
    d = np.einsum("ii->i", y)  # (a view of y's diagonal)
    d += 1.0  # <- refused
    return np.sum(y * m)


def einsum_transposed(m):
    y = m * 1.0
    t = np.einsum("ij->ji", y)
    t[0, 0] = 7.0  # <- refused
    return np.sum(y * m)


def einsum_implicit(m):
    y = m * 1.0
    e = np.einsum("ij", y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def einsum_ellipsis(m):
    y = m * 1.0
    e = np.einsum("...->...", y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def array_split_unpacked(x):
    y = x * 1.0
    a, b = np.array_split(y, 2)
    a += 10.0  # <- refused
    return np.sum(y * x)


def array_split_item(x):
    y = x * 1.0
    parts = np.array_split(y, 3)
    parts[1] *= 3.0  # <- refused
    return np.sum(y * x)


def array_split_item_written(x):
    y = x * 1.0
    p = np.array_split(y, 3)[2]
    p[0] = 10.0  # <- refused
    return np.sum(y * x)


def split_unpacked(x):
    y = x * 1.0
    a, b = np.split(y, [2])
    b *= 2.0  # <- refused
    return np.sum(y * x)


def hsplit_unpacked(x):
    y = x * 1.0
    a, b = np.hsplit(y, 2)
    b *= 2.0  # <- refused
    return np.sum(y * x)


def vsplit_unpacked(m):
    y = m * 1.0
    a, b = np.vsplit(y, 2)
    a *= 3.0  # <- refused
    return np.sum(y * m)


def unstack_unpacked(m):
    y = m * 1.0
    a, b = np.unstack(y)
    a *= 3.0  # <- refused
    return np.sum(y * m)


def max_of_slices(x):
    y = x * 1.0
    m = max(y[0:1], y[1:2])  # (y[1:2] itself)
    m += 10.0  # <- refused
    return np.sum(y * x)


def min_of_named_slices(x):
    y = x * 1.0
    a, b = y[0:1], y[1:2]
    m = min(a, b)
    m += 10.0  # <- refused
    return np.sum(y * x)


def rows_of_a_stack_unpacked(x):
    y = np.stack([x, x * 2.0])  # (its number of axes is not known here)
    a, b = y
    b *= 3.0  # <- refused
    return np.sum(y * y)


def rows_of_an_outer_product_unpacked(x):
    y = np.outer(x[:2], x)
    a, b = y
    a += 1.0  # <- refused
    return np.sum(y * y)


def rows_of_a_reshape_unpacked(x):
    y = x.reshape(2, 3) * 1.0
    a, b = y
    a += 1.0  # <- refused
    return np.sum(y * y)


def second_name_of_a_row(x):
    y = np.stack([x, x * 2.0])
    r = y[1]
    c = r  # (the same row: a view of y)
    c += 1.0  # <- refused
    return np.sum(y * y)


def second_name_of_a_slice(x):
    y = np.stack([x, x * 2.0])
    r = y[1:]
    c = r
    c += 1.0  # <- refused
    return np.sum(y * y)


def flipped(m):
    y = m * 1.0
    e = np.flip(y, 0)
    e += 1.0  # <- refused
    return np.sum(y * m)


def flipped_left_right(m):
    y = m * 1.0
    e = np.fliplr(y)
    e[0, 0] = 5.0  # <- refused
    return np.sum(y * m)


def flipped_up_down(m):
    y = m * 1.0
    e = np.flipud(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def rotated(m):
    y = m * 1.0
    e = np.rot90(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def axes_permuted(m):
    y = m * 1.0
    e = np.permute_dims(y, (1, 0))
    e *= 2.0  # <- refused
    return np.sum(y * m)


def matrix_transposed(m):
    y = m * 1.0
    e = np.matrix_transpose(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def matrix_transposed_by_linalg(m):
    y = m * 1.0
    e = np.linalg.matrix_transpose(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def axis_rolled(m):
    y = m * 1.0
    e = np.rollaxis(y, 1)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def made_contiguous(m):
    y = m * 1.0
    e = np.ascontiguousarray(y)  # (y itself: it is contiguous already)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def made_fortran_ordered(m):
    y = m * 1.0
    e = np.asfortranarray(y.T)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def as_any_array(m):
    y = m * 1.0
    e = np.asanyarray(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def required(m):
    y = m * 1.0
    e = np.require(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def real_part(m):
    y = m * 1.0
    e = np.real(y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def array_not_copied(m):
    y = m * 1.0
    e = np.array(y, copy=False)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def array_copied_if_needed(m):
    y = m * 1.0
    e = np.array(y, copy=None)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def second_of_atleast_2d(m):
    y = m * 1.0
    a, e = np.atleast_2d(m[0] * 2.0, y)
    e *= 2.0  # <- refused
    return np.sum(y * m)


def zero_d_array_under_two_names(x):
    y = np.array(x[0] * 2.0)  # (a 0-d array: += writes into it)
    t = y
    t += 1.0  # <- refused
    return y * x[1]


def zero_d_reshape_under_two_names(x):
    y = np.sum(x, keepdims=True).reshape(())
    t = y
    t += 1.0  # <- refused
    return y * x[1]


def outer_product_under_two_names(x):
    y = np.outer(x, x)  # (its number of axes is not known here)
    t = y
    t += 1.0  # <- refused
    return np.sum(y * x)


REFUSED = [
    (einsum_diagonal, SQUARE),
    (einsum_transposed, MATRIX),
    (einsum_implicit, MATRIX),
    (einsum_ellipsis, MATRIX),
    (array_split_unpacked, VECTOR),
    (array_split_item, VECTOR),
    (array_split_item_written, VECTOR),
    (split_unpacked, VECTOR),
    (hsplit_unpacked, VECTOR),
    (vsplit_unpacked, MATRIX),
    (unstack_unpacked, MATRIX),
    (max_of_slices, VECTOR),
    (min_of_named_slices, VECTOR),
    (rows_of_a_stack_unpacked, VECTOR),
    (rows_of_an_outer_product_unpacked, VECTOR),
    (rows_of_a_reshape_unpacked, VECTOR),
    (second_name_of_a_row, VECTOR),
    (second_name_of_a_slice, VECTOR),
    (flipped, MATRIX),
    (flipped_left_right, MATRIX),
    (flipped_up_down, MATRIX),
    (rotated, MATRIX),
    (axes_permuted, MATRIX),
    (matrix_transposed, MATRIX),
    (matrix_transposed_by_linalg, MATRIX),
    (axis_rolled, MATRIX),
    (made_contiguous, MATRIX),
    (made_fortran_ordered, MATRIX),
    (as_any_array, MATRIX),
    (required, MATRIX),
    (real_part, MATRIX),
    (array_not_copied, MATRIX),
    (array_copied_if_needed, MATRIX),
    (second_of_atleast_2d, MATRIX),
    (zero_d_array_under_two_names, VECTOR),
    (zero_d_reshape_under_two_names, VECTOR),
    (outer_product_under_two_names, VECTOR),
]


def _marked_line(function) -> int:
    lines, first = inspect.getsourcelines(function)
    marked = [n for n, line in enumerate(lines) if line.rstrip().endswith("refused")]
    assert len(marked) == 1
    return first + marked[0]


@pytest.mark.parametrize(
    "function, argument", [pytest.param(f, a, id=f.__name__) for f, a in REFUSED]
)
def test_a_write_through_a_view_of_an_array_read_later_is_refused(function, argument):
    with pytest.raises(ppto.TransformError, match="shares its array with y") as error:
        ppto.value_and_grad(function)(argument.copy())
    assert error.value.lineno == _marked_line(function)


# --- differentiated: nothing reads y after the write --------------------------------


def einsum_diagonal_alone(m):
    y = m * 1.0
    d = np.einsum("ii->i", y)
    d += 1.0  # (y is not read again)
    return np.sum(d * d)


def array_split_part_alone(x):
    y = x * 1.0
    a, b = np.array_split(y, 2)
    a += 10.0  # (nor is b: the parts are taken to overlap)
    return np.sum(a * a)


def max_of_slices_alone(x):
    y = x * 1.0
    m = max(y[0:1], y[1:2])
    m += 10.0
    return np.sum(m * x[2:3])


def max_of_items_of_a_vector(x):
    y = x * 1.0
    s = max(x[0], x[1])  # (a number: x has one axis)
    s += 1.0
    return s * np.sum(y * x)


def rows_of_a_stack_alone(x):
    y = np.stack([x, x * 2.0])
    a, b = y
    b *= 3.0
    return np.sum(b * b)


def flipped_alone(m):
    y = m * 1.0
    e = np.flip(y, 0)
    e += 1.0
    return np.sum(e * m)


def copies_written(m):
    y = m * 1.0
    a = np.array(y)  # (copies)
    a *= 2.0
    b = np.einsum("ij,kj->ik", y, y)  # (two operands: a new array)
    b += 1.0
    return np.sum(y * m) + np.sum(a * m) + np.sum(b)


def numbers_under_two_names(x):
    y = np.sum(x)  # (a number: += rebinds t)
    t = y
    t += 1.0
    a = 2.0
    b = a
    b *= x[0]
    return y * t + a * b


ACCEPTED = [
    (einsum_diagonal_alone, SQUARE),
    (array_split_part_alone, VECTOR),
    (max_of_slices_alone, VECTOR),
    (max_of_items_of_a_vector, VECTOR),
    (rows_of_a_stack_alone, VECTOR),
    (flipped_alone, MATRIX),
    (copies_written, MATRIX),
    (numbers_under_two_names, VECTOR),
]


@pytest.mark.parametrize(
    "function, argument", [pytest.param(f, a, id=f.__name__) for f, a in ACCEPTED]
)
def test_a_write_through_a_view_nothing_reads_later_is_differentiated(
    function, argument
):
    value, gradient = ppto.value_and_grad(function)(argument.copy())
    assert float(value) == pytest.approx(function(argument.copy()), rel=1e-12)
    expected = central_differences(function, (argument,), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


# --- a row taken by position while another name views the array -------------------
# (review: ``c = y[i]`` was taken for a row apart from the rest of y, so a write
# through ``z = y``, ``y[1:]``, ``y[:, 0]``, ``y.reshape(-1)`` or ``y.T``, made before
# or after, did not reach c: silently wrong value and gradient)


def row_after_another_name(x):
    y = np.outer(x, x) * 1.0
    z = y
    c = y[0]
    z += 1.0  # <- refused
    return np.sum(c * x)


def row_after_a_slice(x):
    y = np.outer(x, x) * 1.0
    s = y[1:]
    c = y[1]
    s += 1.0  # <- refused
    return np.sum(c * x)


def row_after_a_reshape(x):
    y = np.outer(x, x) * 1.0
    s = y.reshape(-1)
    c = y[2]
    s += 1.0  # <- refused
    return np.sum(c * x)


def row_before_a_reshape(x):
    y = np.outer(x, x) * 1.0
    c = y[2]
    s = y.reshape(-1)
    s += 1.0  # <- refused
    return np.sum(c * x)


def row_before_a_transpose(x):
    y = np.outer(x, x) * 1.0
    c = y[2]
    t = y.T
    t += 1.0  # <- refused
    return np.sum(c * x)


def rows_unpacked_after_a_slice(x):
    y = np.outer(x, x) * 1.0
    s = y[1:]
    a, c, b = y
    s += 1.0  # <- refused
    return np.sum(c * x)


def row_of_an_argument_after_a_column(x, m):
    s = m[:, 0]
    c = m[0]
    s += x  # <- refused
    return np.sum(c * x)


@pytest.mark.parametrize(
    "function",
    [
        row_after_another_name,
        row_after_a_slice,
        row_after_a_reshape,
        row_before_a_reshape,
        row_before_a_transpose,
        rows_unpacked_after_a_slice,
        row_of_an_argument_after_a_column,
    ],
)
def test_a_write_through_a_view_into_a_row_taken_by_position_is_refused(function):
    arguments = (VECTOR[:3], SQUARE.copy())[: function.__code__.co_argcount]
    with pytest.raises(ppto.TransformError, match="shares its array with c") as error:
        ppto.value_and_grad(function)(*arguments)
    assert error.value.lineno == _marked_line(function)


def rows_taken_then_the_view_rebound(x):
    y = np.outer(x, x) * 1.0
    s = y[1:]
    s = s * 2.0  # (a new array: y's rows are apart again)
    c = y[1]
    d = y[2]
    c += 1.0
    return np.sum(c * x) + np.sum(d * s[0])


def test_rows_taken_after_a_view_is_rebound_are_apart():
    x = VECTOR[:3]
    value, gradient = ppto.value_and_grad(rows_taken_then_the_view_rebound)(x)
    function = rows_taken_then_the_view_rebound
    assert float(value) == pytest.approx(function(x.copy()), rel=1e-12)
    expected = central_differences(function, (x,), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)
