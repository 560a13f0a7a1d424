"""Generated code that reads as if written by hand. Common subexpressions: an
expression the forward pass already computed is read, not computed again (in the
forward pass itself or in the backward pass), and never where an operand changed in
between. Loop gradients: a reversed loop whose turns each write their own slice
writes it (``dx = setitem(dx, v, t)``) rather than adding it into new zeros. Each
case checks the shape of the generated code and its derivatives against central
differences."""

import io

import numpy as np
import pytest

import ppto
from tests.corpus.checks import central_differences
from tests.golden_cases import rows_loop


def assert_gradients_match(function, arguments, wrt):
    """Reverse mode wrt each of ``wrt``, and forward mode along one direction,
    against float64 central differences of the plain function."""
    gradients = ppto.grad(function, wrt=tuple(wrt))(*arguments)
    for position, gradient in zip(wrt, gradients):
        expected = central_differences(function, arguments, position)
        np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-6, atol=1e-9)
    point = arguments[wrt[0]]
    direction = np.linspace(1.0, -2.0, point.size).reshape(point.shape)
    primals = tuple(arguments)
    tangents = tuple(direction if i == wrt[0] else None for i in range(len(primals)))
    _, derivative = ppto.jvp(function, primals, tangents)
    expected = central_differences(function, arguments, wrt[0])
    reference = float(np.sum(expected * direction))
    assert float(derivative) == pytest.approx(reference, rel=1e-6, abs=1e-8)


def count_in_code(text: str, expression: str) -> int:
    """How often the generated code (not its ``# grad of`` comments) writes
    ``expression``."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("#")]
    return "\n".join(lines).count(expression)


def layer_norm(x, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return np.sum(np.sin((x - mu) / np.sqrt(var + eps)))


def test_layer_norm_centres_its_rows_once():
    x, eps = np.linspace(-1.0, 2.0, 12).reshape(3, 4) ** 2, 1e-3
    text = ppto.show_grad(layer_norm, x, eps, file=io.StringIO())
    assert count_in_code(text, "x - mu") == 1, text
    assert_gradients_match(layer_norm, [x, eps], [0])


def tanh_times_decay(x, y, z):
    return np.sum(np.tanh(x * y + z) * np.exp(-x))


def test_backward_reads_the_product_the_forward_summed():
    x, y, z = (np.linspace(-1.0, 1.0, 6).reshape(2, 3) + s for s in (0.1, 0.3, -0.2))
    text = ppto.show_grad(tanh_times_decay, x, y, z, file=io.StringIO())
    # the gradient of exp(-x)'s factor is tanh(.) * exp(-x) itself: the forward's
    # product, read under its name, not computed again from tanh(.)'s copy
    assert count_in_code(text, "dtanh_times_decay") == 0, text  # (the seed, one)
    assert count_in_code(text, "t3 * t5") == 1, text
    assert "dx = -t6" in text, text
    assert_gradients_match(tanh_times_decay, [x, y, z], [0, 1, 2])


def seed_times_argument(x, y):
    return np.sum(x * y)


def seed_times_argument_then_arithmetic(x, y):
    return np.sum(np.exp(x) * y)


def test_seed_times_an_argument_is_dropped_only_where_arithmetic_reads_it():
    # the seed (a 0-d one) times y: y's copy where the product is handed back
    # (the caller's y must not be the gradient), y itself where only arithmetic
    # reads it (dt1 * t1 makes a new array); the passes' check of the second
    # case runs only where a statement can ask it, so both are pinned here
    x, y = np.linspace(0.1, 1.0, 4), np.linspace(-1.0, 2.0, 4)
    text = ppto.show_grad(seed_times_argument, x, y, wrt=(0, 1), file=io.StringIO())
    assert count_in_code(text, "dx = dseed_times_argument * y") == 1, text
    dx, _ = ppto.grad(seed_times_argument, wrt=(0, 1))(x, y)
    assert not np.shares_memory(np.asarray(dx), y)
    assert_gradients_match(seed_times_argument, [x, y], [0, 1])
    function = seed_times_argument_then_arithmetic
    text = ppto.show_grad(function, x, y, wrt=(0, 1), file=io.StringIO())
    assert count_in_code(text, "dt1 = y") == 1, text
    assert count_in_code(text, "dt1 * t1") == 1, text
    assert_gradients_match(function, [x, y], [0, 1])


def square_through_two_reads(x):
    return np.sum(x[1:] * x[1:])


def test_repeated_read_is_read_once():
    x = np.linspace(0.5, 2.0, 5)
    text = ppto.show_grad(square_through_two_reads, x, file=io.StringIO())
    assert count_in_code(text, "x[1:]") == 1, text
    assert_gradients_match(square_through_two_reads, [x], [0])


def rebound_operand(x, y):
    a = x * y
    x = np.sin(x)
    b = x * y
    return np.sum(a * b)


def test_a_rebound_operand_is_computed_again():
    x, y = np.linspace(0.5, 2.0, 4), np.linspace(-1.0, 1.0, 4)
    text = ppto.show_grad(rebound_operand, x, y, wrt=(0, 1), file=io.StringIO())
    assert count_in_code(text, "x * y") == 1, text
    assert count_in_code(text, "x_1 * y") == 1, text
    assert_gradients_match(rebound_operand, [x, y], [0, 1])


def changed_in_a_loop(x, w):
    total = np.sum(x * w)
    for _ in range(3):
        x = np.tanh(x)
        total = total + np.sum(x * w)
    return total + np.sum(x * w)


def test_an_operand_a_loop_changes_is_computed_again():
    x, w = np.linspace(0.5, 2.0, 4), np.linspace(-1.0, 1.0, 4)
    assert_gradients_match(changed_in_a_loop, [x, w], [0, 1])


def read_before_and_after_append(x):
    hs = [x]
    first = hs[-1] * 2.0
    hs.append(np.sin(x))
    last = hs[-1] * 2.0
    return np.sum(first * last)


def test_a_list_grown_in_between_is_read_again():
    x = np.linspace(0.5, 2.0, 4)
    assert_gradients_match(read_before_and_after_append, [x], [0])


def computed_in_one_branch(x, flag):
    if flag:
        a = np.exp(x)
    else:
        a = x
    return np.sum(a * np.exp(x))


@pytest.mark.parametrize("flag", [True, False])
def test_a_value_computed_in_a_branch_is_computed_again_after_it(flag):
    x = np.linspace(0.5, 2.0, 4)
    text = ppto.show_grad(computed_in_one_branch, x, flag, file=io.StringIO())
    assert count_in_code(text, "exp(x)") == 2, text  # (the branch runs or not)
    assert_gradients_match(computed_in_one_branch, [x, flag], [0])


# --- loop gradients written slice by slice ---


def recurrence(x, w):
    h = np.zeros(x.shape[1])
    for t in range(x.shape[0]):
        h = np.tanh(h * w + x[t])
    return np.sum(h * h)


@pytest.mark.parametrize("function", [recurrence, rows_loop])
def test_each_turn_writes_its_own_row_of_the_gradient(function):
    x, w = np.linspace(-1.0, 1.0, 12).reshape(4, 3), np.linspace(0.5, 1.5, 3)
    text = ppto.show_grad(function, x, w, wrt=(0, 1), file=io.StringIO())
    assert count_in_code(text, "setitem(d") == 1, text
    assert count_in_code(text, "index_add") == 0, text
    assert_gradients_match(function, [x, w], [0, 1])


def row_read_twice(x):
    total = 0.0
    for t in range(x.shape[0]):
        total = total + np.sum(x[t] * np.sin(x[t]))
    return total


def rows_from_the_end_too(x):
    total = 0.0
    for t in range(-x.shape[0], x.shape[0]):  # (each row twice: -3 is row 0)
        total = total + np.sum(np.sin(x[t]))
    return total


def rows_from_a_variable_start(x, start):
    total = 0.0
    for t in range(start, x.shape[0]):
        total = total + np.sum(np.sin(x[t]))
    return total


@pytest.mark.parametrize(
    "function, arguments",
    [
        (row_read_twice, ()),
        (rows_from_the_end_too, ()),
        (rows_from_a_variable_start, (-2,)),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_a_row_a_turn_may_add_to_twice_keeps_adding(function, arguments):
    x = np.linspace(-1.0, 1.0, 9).reshape(3, 3)
    text = ppto.show_grad(function, x, *arguments, file=io.StringIO())
    assert count_in_code(text, "index_add(zeros_like(x)") >= 1, text
    assert count_in_code(text, "setitem") == 0, text
    assert_gradients_match(function, [x, *arguments], [0])


# --- np.diff's gradient with the numbers its shapes give written out ---


def squared_steps(x):
    return np.sum(np.diff(x) ** 2)


def sines_of_second_differences(x):
    return np.sum(np.sin(np.diff(x, n=2, axis=0)))


def more_differences_than_rows(x):
    return np.sum(np.sin(np.diff(x, n=5, axis=0)) * np.cos(x[:1]))


@pytest.mark.parametrize(
    "function, written",
    [
        (squared_steps, ("diff(padded)\n", "dx = -difference")),
        (sines_of_second_differences, ("dx = diff(padded, n=2, axis=0)",)),
        # 5 differences of 3 rows: the 3rd's gradient (of an odd one: minus)
        (more_differences_than_rows, ("diff(padded, n=3, axis=0)", "-difference")),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_diff_gradient_is_written_with_its_numbers(function, written):
    x = np.cos(np.linspace(-1.0, 2.0, 12)).reshape(3, 4)
    text = ppto.show_grad(function, x, file=io.StringIO())
    assert count_in_code(text, "diff_") == 0, text  # (no helper left to run)
    for line in written:
        assert count_in_code(text, line) == 1, text
    assert_gradients_match(function, [x], [0])


def steps_from_a_start(x, start):
    return np.sum(np.diff(x, prepend=start, axis=0) ** 2)


def test_diff_gradient_reaches_its_prepended_values():
    x = np.cos(np.linspace(-1.0, 2.0, 12)).reshape(3, 4)
    start = np.linspace(0.5, 1.0, 4)[None]
    text = ppto.show_grad(steps_from_a_start, x, start, wrt=(0, 1), file=io.StringIO())
    assert count_in_code(text, "is None") == 0, text  # (start is an array)
    assert_gradients_match(steps_from_a_start, [x, start], [0, 1])


def test_expression_keys_tell_numbers_apart_and_read_names_through_copies():
    """CSE's key of an expression: 1, 1.0, True and -0.0 are different values
    (x * 1 keeps an integer array whole), and a name is read through its copies."""
    import gast

    from ppto.transform.optimize_cse import _Keys

    def key(text, copies=None):
        node = gast.parse(text).body[0].value
        return _Keys(lambda name: (copies or {}).get(name, name)).of(node)

    spellings = ["x * 1", "x * 1.0", "x * True", "x * -0.0", "x * 0.0", "y * 1"]
    assert len({key(text) for text in spellings}) == len(spellings)
    assert key("np.exp(x - m)") == key("np.exp(x - m)")
    assert key("np.exp(t - m)", {"t": "x"}) == key("np.exp(x - m)")
    assert key("f(x, axis=1)") != key("f(x, axis=0)")


def test_expression_keys_are_made_anew_where_a_part_was_replaced():
    """CSE keeps each sub-expression's key while it looks at one statement; the
    statement whose part became a read of a name is known by its new spelling, so
    a later expression spelled with that name is read from it."""
    import gast

    from ppto.transform.optimize_cse import eliminate_common_subexpressions

    body = gast.parse("a = x - m\nb = (x - m) * 2\nc = a * 2\n").body
    body = eliminate_common_subexpressions(body, {}, set())
    spelled = [gast.unparse(statement).strip() for statement in body]
    assert spelled == ["a = x - m", "b = a * 2", "c = b"]
