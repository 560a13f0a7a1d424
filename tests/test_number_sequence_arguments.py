"""A tuple or list of Python numbers passed as an argument (``size = (2, 3)``): its
items are numbers, so ``h, w = size`` then ``h += 1`` rebinds h and changes nothing
else. The alias check took them for the rows of an array of unknown rank (views,
written into by ``+=``) and refused this once rows of such arrays were views (commit
e2ea125), as the specialisation key said nothing of arguments that are not arrays.
The key now tells such a tuple from a tuple of arrays (``api.NUMBERS``), and a call
passing one on to a helper says so: a tuple of arrays is still refused where a row
is written and the tuple read afterwards."""

import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

VECTOR = np.array([0.3, 1.7, -0.4])


# --- accepted: the items are numbers ------------------------------------------------


def unpacked_and_incremented(x, size):
    h, w = size
    h += 1
    return np.sum(x * h) + size[0]


def items_taken_every_way(x, size):
    s = size  # (another name for the same numbers)
    for v in size[1:]:
        v += 1
    n = size[len(size) - 1]
    n *= 2
    a, b = s[-2:]
    a += 1
    largest = max(size)
    largest += 0.5
    return np.sum(x * (n + a + v + largest)) + size[0] + s[1]


def grown_then_unpacked(x, size):
    size += (4,)
    first, second, third = size
    first += 1
    return np.sum(x * first) * third + size[-1]


def repeated(x, size):
    t = size * 2  # (a tuple repeated, not an array doubled)
    return np.sum(x * t[len(size)]) + len(t)


def of_the_shape(x, size):
    h, w = x.shape + size
    h += 1
    return np.sum(x * h * w)


def _increments_its_first(x, size):
    h, w = size
    h += 1
    return np.sum(x * h) + size[0]


def helper_given_them(x, size):
    return _increments_its_first(x, size)


def helper_given_numbers_written_out(x, size):
    return _increments_its_first(x, (2, 3)) + _increments_its_first(x, x.shape + (1,))


ACCEPTED = [
    (unpacked_and_incremented, (2, 3)),
    (unpacked_and_incremented, [2, 3]),
    (unpacked_and_incremented, (2.5, 3.0)),
    (unpacked_and_incremented, (np.int64(2), True)),
    (items_taken_every_way, (2, 3, 4)),
    (grown_then_unpacked, (2, 3)),
    (repeated, (2, 3)),
    (of_the_shape, (5,)),
    (helper_given_them, (2, 3)),
    (helper_given_numbers_written_out, (2, 3)),
]


@pytest.mark.parametrize(
    "function, size",
    [pytest.param(f, s, id=f"{f.__name__}-{type(s).__name__}{s}") for f, s in ACCEPTED],
)
def test_the_items_of_a_tuple_of_numbers_are_numbers(function, size):
    value, gradient = ppto.value_and_grad(function)(VECTOR.copy(), size)
    expected_value = function(VECTOR.copy(), type(size)(size))
    assert float(value) == pytest.approx(float(expected_value), rel=1e-12)
    expected = central_differences(function, (VECTOR, size), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def test_the_rows_of_an_array_shape_are_numbers():
    def scaled_by_rows(m):
        h, w = m.shape
        h += 1
        return np.sum(m * h) + w

    matrix = np.arange(6.0).reshape(2, 3)
    value, gradient = ppto.value_and_grad(scaled_by_rows)(matrix)
    assert float(value) == pytest.approx(scaled_by_rows(matrix))
    np.testing.assert_allclose(gradient, np.full((2, 3), 3.0))


# --- refused: the items are arrays, written into and read afterwards ----------------


def first_of_a_pair_incremented(x, pair):
    a, b = pair
    a += 1.0  # <- refused
    return np.sum(x * a) + np.sum(pair[0])


def rebound_to_arrays(x, size):
    size = (x * 1.0, x * 2.0)  # (no longer the numbers passed)
    h, w = size
    h += 1.0  # <- refused
    return np.sum(h * w) + np.sum(size[0])


def _increments_its_first_array(x, pair):
    a, b = pair
    a += 1.0  # <- refused
    return np.sum(x * a)


def helper_given_arrays(x, pair):
    return _increments_its_first_array(x, pair) + np.sum(pair[0])


def _marked_line(function) -> int:
    lines, first = inspect.getsourcelines(function)
    marked = [n for n, line in enumerate(lines) if line.rstrip().endswith("refused")]
    assert len(marked) == 1
    return first + marked[0]


def test_a_row_of_a_tuple_of_arrays_written_is_refused():
    pair = (VECTOR * 2.0, VECTOR * 3.0)
    with pytest.raises(ppto.TransformError, match="shares its array with pair") as e:
        ppto.grad(first_of_a_pair_incremented)(VECTOR.copy(), pair)
    assert e.value.lineno == _marked_line(first_of_a_pair_incremented)


def test_one_function_gets_code_for_numbers_and_a_refusal_for_arrays():
    # the same grad object: numbers first (accepted), then arrays (another key)
    gradient = ppto.grad(first_of_a_pair_incremented)
    np.testing.assert_allclose(gradient(VECTOR.copy(), (2.0, 3.0)), np.full(3, 3.0))
    with pytest.raises(ppto.TransformError, match="shares its array with pair"):
        gradient(VECTOR.copy(), (VECTOR * 2.0, VECTOR * 3.0))


def test_a_parameter_rebound_to_arrays_holds_numbers_no_longer():
    with pytest.raises(ppto.TransformError, match="shares its array with size") as e:
        ppto.grad(rebound_to_arrays)(VECTOR.copy(), (2, 3))
    assert e.value.lineno == _marked_line(rebound_to_arrays)


def test_a_helper_given_a_tuple_of_arrays_is_refused():
    pair = (VECTOR * 2.0, VECTOR * 3.0)
    with pytest.raises(ppto.TransformError, match="argument pair of _increments") as e:
        ppto.grad(helper_given_arrays)(VECTOR.copy(), pair)
    assert e.value.lineno == _marked_line(_increments_its_first_array)


# --- an item replaced by an array: the list holds that very array -------------------
# ``size[0] = y`` puts y's array itself in the list (as ``size.append(y)`` does), so
# ``h, w = size`` then ``h += 1`` writes into y in NumPy. This ran, and gave y's
# value before the write: value 3.2 where NumPy gives 9.2 (and a wrong gradient
# where the write matters), as the alias check did not record what the list held.


def replaced_then_unpacked(y, size):
    size[0] = y
    h, w = size
    h += 1.0  # <- refused
    return np.sum(y * y)


def local_list_replaced_then_unpacked(y):
    size = [2.0, 3.0]
    size[0] = y
    h, w = size
    h += 1.0  # <- refused
    return np.sum(y * y)


def replaced_then_indexed(y, size):
    size[0] = y
    h = size[0]
    h += 1.0  # <- refused
    return np.sum(y * y)


def replaced_pairwise_then_unpacked(y, size):
    size[0], size[1] = size[1], y
    w, h = size
    h *= 2.0  # <- refused
    return np.sum(y * y)


def list_of_arrays_replaced(y, params):
    params[1] = y
    a, b = params
    b += 1.0  # <- refused
    return np.sum(y * a)


@pytest.mark.parametrize(
    "function, arguments",
    [
        pytest.param(function, arguments, id=function.__name__)
        for function, arguments in [
            (replaced_then_unpacked, ([2.0, 3.0],)),
            (local_list_replaced_then_unpacked, ()),
            (replaced_then_indexed, ([2.0, 3.0],)),
            (replaced_pairwise_then_unpacked, ([2.0, 3.0],)),
            (list_of_arrays_replaced, ([VECTOR * 2.0, VECTOR * 3.0],)),
        ]
    ],
)
def test_an_item_replaced_by_an_array_then_written_is_refused(function, arguments):
    with pytest.raises(ppto.TransformError, match="shares its array with y") as e:
        ppto.grad(function)(VECTOR.copy(), *arguments)
    assert e.value.lineno == _marked_line(function)
    written = "b" if function is list_of_arrays_replaced else "h"
    assert f"make {written} an array of its own first" in str(e.value)


def replaced_nothing_read_later(y, size):
    size[0] = y
    h, w = size
    h += 1.0  # (y's array, but neither y nor size is read afterwards)
    return np.sum(h * h)


def replaced_by_a_copy(y, size):
    size[0] = y.copy()
    h, w = size
    h += 1.0  # (the copy's array: y is not changed)
    return np.sum(y * y) + np.sum(h * h) * w


def replaced_by_a_new_array(y, size):
    size[0] = y * 2.0
    h, w = size
    h += 1.0  # (the new array's: y is not changed)
    return np.sum(y * y) + np.sum(h * y)


@pytest.mark.parametrize(
    "function",
    [replaced_nothing_read_later, replaced_by_a_copy, replaced_by_a_new_array],
)
def test_an_item_replaced_and_written_but_not_read_later_is_accepted(function):
    def in_numpy(y, size):  # (each call its own list: the function changes it)
        return function(np.array(y, dtype=np.float64), list(size))

    value, gradient = ppto.value_and_grad(function)(VECTOR.copy(), [2.0, 3.0])
    assert float(value) == pytest.approx(float(in_numpy(VECTOR, [2.0, 3.0])))
    expected = central_differences(in_numpy, (VECTOR, [2.0, 3.0]), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def accumulated_onto_an_argument(y, start):
    h = start  # a number: += rebinds h; an array: += writes into the caller's
    h += np.tanh(y)
    return np.sum(h * h) * np.sum(start)


def test_a_number_argument_is_told_from_an_array_given_in_its_place():
    """A Python number not differentiated is described as one (the alias check
    then knows ``h = start; h += ...`` rebinds h); an array given there gets code
    of its own, which refuses the write into start that NumPy's start would see."""
    grad = ppto.value_and_grad(accumulated_onto_an_argument)
    value, gradient = grad(VECTOR.copy(), 0.3)
    assert float(value) == pytest.approx(accumulated_onto_an_argument(VECTOR, 0.3))
    expected = central_differences(accumulated_onto_an_argument, (VECTOR, 0.3), 0)
    assert_gradient(np.asarray(gradient), expected, "number start")
    with pytest.raises(ppto.TransformError, match="shares its array with start"):
        grad(VECTOR.copy(), np.full(3, 0.3))


# --- a list of numbers extended through one of two names ------------------------------
# ``t = size; size += (4,)`` extends the list itself where size is a list (a tuple is
# rebound), so t sees the new item. The generated code dropped the ``+=`` (size
# was not read again), and the gradient followed t's two items: 2.0 for each
# component of x where NumPy gives 3.0 (``size += [4]`` was refused, as a write
# into an array).


def extended_by_a_tuple(x, size):
    t = size
    size += (4,)  # <- refused
    return np.sum(x) * len(t)


def extended_by_a_list(x, size):
    t = size
    size += [4.0]  # <- refused
    return np.sum(x * t[-1])


def extended_through_the_other_name(x, size):
    s = size
    s += (4.0,)  # <- refused
    return np.sum(x * size[-1])


EXTENDED = [extended_by_a_tuple, extended_by_a_list, extended_through_the_other_name]


@pytest.mark.parametrize("function", EXTENDED)
def test_a_list_extended_through_one_of_two_names_is_refused(function):
    with pytest.raises(ppto.TransformError, match=r"\+= extends it in place") as e:
        ppto.grad(function)(VECTOR.copy(), [2.0, 3.0])
    assert e.value.lineno == _marked_line(function)
    assert "also named" in str(e.value)


def test_a_list_extended_by_a_tuple_alone_is_extended():
    # ``+=`` extends a list by any iterable, where ``+`` of a list and a tuple
    # raises: the generated ``size + (4,)`` raised TypeError for a list
    def in_numpy(x, size):  # (each call its own list: the function extends it)
        return grown_then_unpacked(x, list(size))

    grad = ppto.value_and_grad(grown_then_unpacked)
    value, gradient = grad(VECTOR.copy(), [2, 3])
    assert float(value) == pytest.approx(in_numpy(VECTOR, [2, 3]), rel=1e-12)
    expected = central_differences(in_numpy, (VECTOR, [2, 3]), 0)
    assert_gradient(np.asarray(gradient), expected, "grown_then_unpacked")


def test_a_tuple_extended_under_one_name_only_is_accepted():
    def extended_alone(x, size):
        t = size[:]  # (a copy: the += below does not reach it)
        size += (4.0,)
        return np.sum(x * len(t)) * size[-1]

    value, gradient = ppto.value_and_grad(extended_alone)(VECTOR.copy(), (2.0, 3.0))
    assert float(value) == pytest.approx(extended_alone(VECTOR, (2.0, 3.0)))
    expected = central_differences(extended_alone, (VECTOR, (2.0, 3.0)), 0)
    assert_gradient(np.asarray(gradient), expected, "extended_alone")


def local_tuple_extended_through_another_name(x):
    size = (1.0, 2.0)
    s = size
    s += (4.0,)  # (a tuple for sure: s is rebound, size unchanged)
    return np.sum(x * s[-1]) + np.sum(x * len(size))


def local_list_extended_not_read_again(x):
    size = [1.0, 2.0]
    s = size
    s += (4.0,)  # (the list extended, but size is not read afterwards)
    return np.sum(x * s[-1])


@pytest.mark.parametrize(
    "function",
    [local_tuple_extended_through_another_name, local_list_extended_not_read_again],
)
def test_an_extension_no_other_name_sees_is_accepted(function):
    """Refused since 46d922c as a list change another name reads: a tuple written
    out is rebound, and ``s = size`` reads no item of size (the list is not
    read after the +=)."""
    value, gradient = ppto.value_and_grad(function)(VECTOR.copy())
    assert float(value) == pytest.approx(function(VECTOR.copy()), rel=1e-12)
    expected = central_differences(function, (VECTOR,), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def local_list_extended_then_read(x):
    size = [1.0, 2.0]
    s = size
    s += (4.0,)  # <- refused
    return np.sum(x * s[-1]) + np.sum(x * len(size))


def test_a_local_list_extended_then_read_through_another_name_is_refused():
    with pytest.raises(ppto.TransformError, match=r"\+= extends it in place") as e:
        ppto.grad(local_list_extended_then_read)(VECTOR.copy())
    assert e.value.lineno == _marked_line(local_list_extended_then_read)


# --- an item replaced, the others numbers still ------------------------------------
# ``size[1] = y`` forgot what each item of size was: ``h, w = size`` then made both
# h and w possible views of y, and ``h += 1`` (h a number, rebound) was refused as a
# write into y. The items are followed by position: the one replaced is y's array,
# the others are what they were.


def other_item_incremented(y, size):
    size[1] = y
    h, w = size
    h += 1  # (h is the number 2.0: rebound)
    return np.sum(y * h * w)


def other_item_of_a_local_list(y):
    size = [2.0, 3.0]
    size[1] = y
    h, w = size
    h += 1
    return np.sum(y * h * w)


def replaced_item_written_nothing_else_read(y, size):
    size[0] = y
    h, w = size
    h += 1  # (y's array, but neither y nor size is read afterwards)
    return np.sum(h * h) * w


def other_item_read_by_position(y, size):
    size[0] = y
    h = size[0]
    w = size[1]
    w += 1
    return np.sum(y * h * w)


@pytest.mark.parametrize(
    "function, rest",
    [
        (other_item_incremented, ([2.0, 3.0],)),
        (other_item_of_a_local_list, ()),
        (replaced_item_written_nothing_else_read, ([2.0, 3.0],)),
        (other_item_read_by_position, ([2.0, 3.0],)),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_the_items_not_replaced_are_numbers_still(function, rest):
    def in_numpy(
        y, *others
    ):  # (each call its own list and y: the function changes them)
        return function(np.array(y, dtype=np.float64), *[list(o) for o in others])

    copies = [list(other) for other in rest]
    value, gradient = ppto.value_and_grad(function)(VECTOR.copy(), *copies)
    assert float(value) == pytest.approx(float(in_numpy(VECTOR, *rest)), rel=1e-12)
    expected = central_differences(in_numpy, (VECTOR, *rest), 0)
    assert_gradient(np.asarray(gradient), expected, function.__name__)


def replaced_on_one_path(y, size, flag):
    if flag:
        size[0] = y
    h, w = size
    h += 1.0  # <- refused
    return np.sum(y * y) * w


def replaced_at_the_end(y, size):
    size[-1] = y
    h, w = size
    w += 1.0  # <- refused
    return np.sum(y * y) * h


def each_item_replaced(y, z, size):
    size[0] = y
    size[1] = z
    h, w = size
    w += 1.0  # <- refused
    return np.sum(y * y) * np.sum(z)


@pytest.mark.parametrize(
    "function, rest, shared",
    [
        (replaced_on_one_path, ([2.0, 3.0], True), "y"),
        (replaced_at_the_end, ([2.0, 3.0],), "y"),
        (each_item_replaced, (VECTOR * 2.0, [2.0, 3.0]), "z"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_the_item_replaced_written_and_read_is_refused(function, rest, shared):
    with pytest.raises(
        ppto.TransformError, match=f"shares its array with {shared}"
    ) as e:
        ppto.grad(function)(VECTOR.copy(), *rest)
    assert e.value.lineno == _marked_line(function)


# --- an item of a list of numbers changed in place -----------------------------------


def item_incremented(x, s):
    s[0] += 1.0
    s[1] *= x[0]
    return np.sum(x * s[0]) + s[1]


def whole_item_incremented(x, s):
    s[0] += 1
    return np.sum(x * s[0] * s[1])


@pytest.mark.parametrize(
    ("function", "items"),
    [(item_incremented, [1.0, 2.0]), (whole_item_incremented, [1, 2])],
    ids=["floats", "integers"],
)
def test_an_item_of_a_list_of_numbers_changed_in_place(function, items):
    # the generated setitem read the list's dtype: a raw AttributeError
    value, gradient = ppto.value_and_grad(function)(VECTOR[:2], list(items))
    assert float(value) == pytest.approx(function(VECTOR[:2], list(items)))
    expected = central_differences(lambda x: function(x, list(items)), (VECTOR[:2],), 0)
    assert_gradient(gradient, expected, "gradient")


def test_an_item_of_a_tuple_of_numbers_is_refused_as_python_does():
    with pytest.raises(TypeError, match="does not support item assignment"):
        item_incremented(VECTOR[:2], (1.0, 2.0))
    with pytest.raises(TypeError, match="does not support item assignment"):
        ppto.grad(item_incremented)(VECTOR[:2], (1.0, 2.0))


def accumulated_onto_a_scalar_argument(y, start):
    h = start  # a number: += rebinds h; a 0-d array: += writes into start's
    h += np.sum(np.tanh(y))
    return h * h * start


def test_a_zero_d_array_argument_is_told_from_a_number():
    """Review: a 0-d array given for start (differentiated or not) was taken for a
    number (rank 0), so ``h = start; h += ...`` rebound h alone where NumPy changes
    start: silently wrong. The key tells a Python number (NUMBERS, or a weak
    float's dtype) from a 0-d NumPy value, which may be an array: refused."""
    function = accumulated_onto_a_scalar_argument
    for wrt in (0, 1):
        grad = ppto.value_and_grad(function, wrt=wrt)
        with pytest.raises(ppto.TransformError, match="shares its array with start"):
            grad(VECTOR.copy(), np.array(0.3))
    for wrt in (0, 1):  # a Python float, differentiated or not, is a number still
        value, gradient = ppto.value_and_grad(function, wrt=wrt)(VECTOR.copy(), 0.3)
        assert float(value) == pytest.approx(function(VECTOR, 0.3))
        expected = central_differences(function, (VECTOR, 0.3), wrt)
        assert_gradient(np.asarray(gradient), np.asarray(expected), f"d/d arg {wrt}")
