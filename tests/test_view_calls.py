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
from numpy.lib.stride_tricks import sliding_window_view as windows_of

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


def windows_read_after_a_write(v):
    y = v * 1.0
    w = np.lib.stride_tricks.sliding_window_view(y, 2)
    y[0] = 5.0  # <- refused
    return np.sum(w**2)


def windows_by_another_name_read_after_a_write(v):
    y = v * 1.0
    w = windows_of(y, 3)
    y[1:3] *= 2.0  # <- refused
    return np.sum(w**2)


@pytest.mark.parametrize(
    "function", [windows_read_after_a_write, windows_by_another_name_read_after_a_write]
)
def test_a_write_into_an_array_its_windows_are_read_after_is_refused(function):
    # the windows are a view of y (NumPy's, read-only): y[0] = 5.0 changes them,
    # so the gradient of the sum of their squares had x[0]'s as though it did not
    with pytest.raises(ppto.TransformError, match="shares its array with w") as error:
        ppto.grad(function)(VECTOR.copy())
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


# --- items of one array stored in turn: ``Y[0], Y[1] = Y[1] * 2.0, Y[0] * 3.0`` ------
# This was refused as "nested unpacking", which it is not. Python evaluates the
# value whole, then stores its items in turn: new arrays (``Y[0] * 3.0``) or
# numbers (the items of a vector) are stored as they were, but a row of Y stored
# after a store into Y is a view that store changed (``Y[0], Y[1] = Y[1], Y[0]``
# does not swap the rows in NumPy), which the generated code would not follow.


def rows_stored_in_turn(m):
    Y = m * 1.0
    Y[0], Y[1] = Y[1] * 2.0, Y[0] * 3.0
    return np.sum(Y * Y)


def rows_of_the_argument_stored(Y):
    Y[1], Y[0] = Y[0] * 2.0, np.tanh(Y[1])
    return np.sum(Y * Y)


def numbers_swapped(v):
    Y = v * 1.0
    Y[0], Y[1] = Y[1], Y[0]  # (items of a vector: numbers, swapped)
    return np.sum(Y * v)


def copies_swapped(m):
    Y = m * 1.0
    Y[0], Y[1] = Y[1].copy(), Y[0].copy()
    return np.sum(Y * m)


def index_bound_first(m):
    Y = m * 1.0
    i = 0
    i, Y[i] = 1, Y[2] * 2.0  # (Y[1] is written: i is bound first)
    return np.sum(Y * m)


@pytest.mark.parametrize(
    "function, argument",
    [
        (rows_stored_in_turn, SQUARE),
        (rows_of_the_argument_stored, SQUARE),
        (numbers_swapped, VECTOR),
        (copies_swapped, SQUARE),
        (index_bound_first, SQUARE),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_items_stored_in_turn_are_differentiated(function, argument):
    value, gradient = ppto.value_and_grad(function)(argument.copy())
    assert float(value) == pytest.approx(function(argument.copy()), rel=1e-12)
    expected = central_differences(lambda a: function(a.copy()), (argument,), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def rows_swapped(m):
    Y = m * 1.0
    Y[0], Y[1] = Y[1], Y[0]  # <- refused
    return np.sum(Y * m)


def test_a_row_stored_after_a_store_changed_it_is_refused():
    with pytest.raises(ppto.TransformError) as error:
        ppto.grad(rows_swapped)(SQUARE.copy())
    assert error.value.lineno == _marked_line(rows_swapped)
    message = str(error.value)
    assert "stores Y[0] into Y[1] after the store into Y[0]" in message
    assert "Y[1] = Y[0].copy()" in message


# --- the refusal names the array the item is ----------------------------------------
# After ``(w,) + (z,)`` or ``hs.insert(0, z)`` the items were no longer followed by
# position: an item taken was taken to be any of them, and the refusal named the
# first in alphabetical order (w, where the item written is z).


def item_of_joined_tuples(m):
    w = m * 1.0
    z = m * 2.0
    t = (w,) + (z,)
    u = t[1]
    u += 1.0  # <- refused
    return np.sum(z * w)


def item_inserted_first(m):
    w = m * 1.0
    z = m * 2.0
    hs = [w]
    hs.insert(0, z)
    a = hs[0]
    a += 1.0  # <- refused
    return np.sum(z * w)


def item_after_the_one_inserted(m):
    a = m * 1.0
    y = m * 2.0
    hs = [a]
    hs.insert(0, y)
    first, second = hs
    first += 1.0  # <- refused
    return np.sum(y * a)


def item_appended(m):
    w = m * 1.0
    z = m * 2.0
    hs = [z]
    hs.append(w)
    b = hs[-1]
    b += 1.0  # <- refused
    return np.sum(z * w)


@pytest.mark.parametrize(
    "function, shared",
    [
        (item_of_joined_tuples, "z"),
        (item_inserted_first, "z"),
        (item_after_the_one_inserted, "y"),
        (item_appended, "w"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_the_refusal_names_the_array_the_item_is(function, shared):
    with pytest.raises(ppto.TransformError) as error:
        ppto.grad(function)(MATRIX.copy())
    assert error.value.lineno == _marked_line(function)
    assert f"shares its array with {shared} " in str(error.value)


def joined_item_apart(m):
    w = m * 1.0
    z = m * 2.0
    t = (w,) + (z * 1.0,)
    u = t[1]  # (a new array: neither w nor z)
    u += 1.0
    return np.sum(z * w * u)


def test_an_item_of_joined_tuples_made_new_is_differentiated():
    value, gradient = ppto.value_and_grad(joined_item_apart)(MATRIX.copy())
    assert float(value) == pytest.approx(joined_item_apart(MATRIX.copy()), rel=1e-12)
    expected = central_differences(joined_item_apart, (MATRIX,), 0)
    assert_gradient(np.asarray(gradient), expected, "joined_item_apart")


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


# --- items that are numbers: ``Y[0, 0]`` of a matrix, ``y[i]`` with i a number ------
# Each was refused as a possible view, which a NumPy scalar is not (9fd2d00 knew
# only a vector's items at whole numbers written out for numbers).


def corners_swapped(v):
    Y = np.reshape(v * 1.0, (2, 2))
    Y[0, 0], Y[1, 1] = Y[1, 1], Y[0, 0]
    return np.sum(Y * Y * np.array([[1.0, 2.0], [3.0, 4.0]]))


def corners_swapped_by_the_method(v):
    Y = (v * 1.0).reshape(2, 2)
    Y[0, 1], Y[1, 0] = Y[1, 0], Y[0, 1]
    return np.sum(Y * Y * np.array([[1.0, 2.0], [3.0, 4.0]]))


def items_at_a_named_index(v):
    y = v * 1.0
    i = 1
    y[i], y[i + 1] = y[i + 1] * y[0], y[i]
    return np.sum(y**2 * np.arange(1.0, 5.0))


def items_in_a_nested_tuple(v):
    y = v * 1.0
    y[0], (a, b) = y[1] * 2.0, (y[0], y[2])
    return np.sum(y) * a * b


def items_swapped_through_a_temporary(v):
    y = v * 1.0
    t = y[0]  # (a number: writing y[0] leaves it as it was)
    y[0] = y[2]
    y[2] = t
    return np.sum(y * np.arange(1.0, 5.0))


def items_of_a_copy_swapped_through_a_temporary(v):
    y = v.copy()
    t = y[1]
    y[1] = y[3] * 2.0
    y[3] = t
    return np.sum(y * y * np.arange(1.0, 5.0)) * t


def items_unpacked_then_written(v):
    y = np.copy(v)
    a, b, c, d = y
    y[0] = d * 3.0
    return np.sum(y * np.arange(1.0, 5.0)) * a + b * c


FOUR = np.array([0.3, 0.7, 1.2, -0.4])


@pytest.mark.parametrize(
    "function",
    [
        corners_swapped,
        corners_swapped_by_the_method,
        items_at_a_named_index,
        items_in_a_nested_tuple,
        items_swapped_through_a_temporary,
        items_of_a_copy_swapped_through_a_temporary,
        items_unpacked_then_written,
    ],
    ids=lambda value: value.__name__,
)
def test_items_that_are_numbers_stored_in_turn_are_differentiated(function):
    value, gradient = ppto.value_and_grad(function)(FOUR.copy())
    assert float(value) == pytest.approx(function(FOUR.copy()), rel=1e-12)
    expected = central_differences(lambda a: function(a.copy()), (FOUR,), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def rows_of_a_reshaped_vector_swapped(v):
    Y = np.reshape(v * 1.0, (2, 2))
    Y[0], Y[1] = Y[1], Y[0]  # <- refused
    return np.sum(Y * Y)


def items_of_an_unknown_shape_swapped(v, shape):
    Y = np.reshape(v * 1.0, shape)
    Y[0, 0], Y[1, 1] = Y[1, 1], Y[0, 0]  # <- refused
    return np.sum(Y * Y)


@pytest.mark.parametrize(
    "function, rest",
    [
        (rows_of_a_reshaped_vector_swapped, ()),
        (items_of_an_unknown_shape_swapped, ((2, 2, 1),)),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_items_that_may_be_views_are_refused_still(function, rest):
    with pytest.raises(ppto.TransformError, match="after the store into") as error:
        ppto.grad(function)(FOUR.copy(), *rest)
    assert error.value.lineno == _marked_line(function)
