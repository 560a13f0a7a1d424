"""An error raised while generated code runs names the user's own file and line (and
quotes it), not the function's ``def`` line: the statement's origin, kept beside the
compiled code, says which user line a generated statement computes, or computes the
gradient or tangent of. NumPy's exception stays the ``__cause__``."""

from functools import partial

import numpy as np
import pytest

import ppto
from tests import origin_helpers

HERE = "test_error_origins.py"


def line_of(function, text: str) -> int:
    """The file line of ``function`` whose text contains ``text``."""
    import inspect

    lines, first = inspect.getsourcelines(function)
    (offset,) = [n for n, line in enumerate(lines) if text in line]
    return first + offset


def indexed(x, i):
    a = np.sin(x)
    b = a[i] * 2.0
    c = np.log(b)
    return float(np.sum(c))


def test_an_index_out_of_range_names_the_users_line():
    grad = ppto.grad(indexed)
    line = line_of(indexed, "b = a[i] * 2.0")
    for _ in range(2):  # (the first call, then the fast path's)
        with pytest.raises(ppto.ShapeError) as raised:
            grad(np.ones((3, 4)), 7)
        message = str(raised.value)
        assert f"failed at {HERE}, line {line} (`b = a[i] * 2.0`)" in message
        assert "generated statement `t1 = a[i]`" in message  # (and what ran)
        assert "index 7 is out of bounds" in message
        assert isinstance(raised.value.__cause__, IndexError)
        np.asarray(grad(np.full((3, 4), 0.5), 1))  # (a good call in between)


def as_number(x):
    y = np.tanh(x)
    return float(y)


def test_float_of_an_array_with_axes_names_the_users_line():
    line = line_of(as_number, "return float(y)")
    with pytest.raises(ppto.ShapeError) as raised:
        ppto.grad(as_number)(np.ones(3))
    message = str(raised.value)
    assert "float(x[0])" in message  # (the error's own words stay first)
    assert f"failed at {HERE}, line {line} (`return float(y)`)" in message


def summed_rows(x, rows):
    total = 0.0
    for k in rows:
        total = total + np.sum(x[k] * 2.0)
    return total


def test_a_failure_inside_a_loop_body_names_the_line_in_the_loop():
    line = line_of(summed_rows, "total = total + np.sum")
    for derivative in (ppto.grad, ppto.value_and_grad):
        with pytest.raises(ppto.ShapeError) as raised:
            derivative(summed_rows)(np.ones((3, 4)), [0, 5])
        assert (
            f"failed at {HERE}, line {line} (`total = total + np.sum(x[k] * 2.0)`)"
            in str(raised.value)
        )


def through_a_helper(x, i):
    a = np.cos(x)
    b = origin_helpers.scaled_row(a, i)
    return np.sum(b)


def test_a_failure_in_a_helper_names_the_helpers_line_and_the_call():
    helper = line_of(origin_helpers.scaled_row, "row = a[i] * 2.0")
    call = line_of(through_a_helper, "b = origin_helpers.scaled_row(a, i)")
    with pytest.raises(ppto.ShapeError) as raised:
        ppto.grad(through_a_helper)(np.ones((2, 3)), 4)
    assert (
        f"failed at origin_helpers.py, line {helper} (`row = a[i] * 2.0`), called at "
        f"{HERE}, line {call} (`b = origin_helpers.scaled_row(a, i)`)"
    ) in str(raised.value)


def with_a_local_function(x):
    def inner(a):
        b = a[ROW] * 2.0
        return b

    return np.sum(inner(np.sin(x)))


def test_a_failure_in_a_local_function_names_its_line_and_the_call():
    inner = line_of(with_a_local_function, "b = a[ROW] * 2.0")
    call = line_of(with_a_local_function, "return np.sum(inner(")
    with pytest.raises(ppto.ShapeError) as raised:
        ppto.grad(with_a_local_function)(np.ones(3))
    assert (
        f"failed at {HERE}, line {inner} (`b = a[ROW] * 2.0`), called at {HERE}, "
        f"line {call} (`return np.sum(inner(np.sin(x)))`)"
    ) in str(raised.value)


@ppto.operator
def doubled(x):
    return x * 2.0


@ppto.grad_rule
def _(x):
    def backward(dy):
        return np.reshape(dy, (7, 7))  # wrong: fails when the gradient runs

    return backward


def through_a_faulty_rule(x):
    y = doubled(np.sin(x))
    return np.sum(y)


def test_a_failure_in_backward_code_names_the_line_whose_gradient_it_computes():
    line = line_of(through_a_faulty_rule, "y = doubled(np.sin(x))")
    with pytest.raises(ppto.ShapeError) as raised:
        ppto.grad(through_a_faulty_rule)(np.ones(3))
    message = str(raised.value)
    assert (
        f"failed in the gradient of {HERE}, line {line} (`y = doubled(np.sin(x))`)"
        in message
    )
    # (a user's rule's gradient is checked for its input's shape around it)
    assert "`dt1 = rule_gradient_impl(xp, reshape(dy, (7, 7)), t1," in message
    assert isinstance(raised.value.__cause__, ValueError)


ROW = 9  # (read by picked_row: out of range for its arguments)


def picked_row(x):
    a = np.sin(x)
    return a[ROW] * 2.0


def test_vjp_and_jvp_name_the_users_line():
    line = line_of(picked_row, "return a[ROW] * 2.0")
    x = np.ones((3, 4))
    for run, what in (
        (lambda: ppto.vjp(picked_row, x), "vjp"),
        (lambda: ppto.jvp(picked_row, (x,), (x,)), "jvp"),
    ):
        with pytest.raises(ppto.ShapeError) as raised:
            run()
        assert (
            f"picked_row's {what} failed at {HERE}, line {line} (`return a[ROW] * 2.0`)"
            in str(raised.value)
        )


def cubed_row(x):
    a = np.sin(x)
    return np.sum(a[ROW] ** 3)


def test_a_derivative_differentiated_again_names_the_users_line():
    # (not the first derivative's generated line it ran)
    line = line_of(cubed_row, "return np.sum(a[ROW] ** 3)")
    x = np.ones(3)
    for run in (
        lambda: ppto.grad(ppto.grad(cubed_row))(x),
        lambda: ppto.jvp(ppto.grad(cubed_row), (x,), (x,)),
    ):
        with pytest.raises(ppto.ShapeError) as raised:
            run()
        message = str(raised.value)
        assert (
            f"failed at {HERE}, line {line} (`return np.sum(a[ROW] ** 3)`)" in message
        )
        assert "ppto generated" not in message.split("generated statement")[0]


def test_the_generated_code_is_the_same_text():
    # the origins live beside the code, not in it: show_grad shows no line numbers
    text = ppto.show_grad(indexed, np.ones((3, 4)), 1, file=open("/dev/null", "w"))
    assert "test_error_origins" not in text and "line" not in text


def chained(x):
    a = np.exp(x)
    b = a * 2.0 + 1.0
    return np.sum(np.tanh(b))


def test_a_fused_statement_names_every_line_it_computes():
    # a region kernel's call computes the three lines and their gradients: an
    # error raised in it names them all (from the origins kept for its line)
    import linecache

    from ppto.runtime.device import CPU
    from ppto.transform.origins import TABLE, describe

    grad = ppto.grad(chained)
    grad(np.ones(100_000))
    (ranks,) = grad._programs
    namespace = grad.lowered(ranks, CPU, fused=True)
    ((filename, table),) = namespace[TABLE].items()
    lines = linecache.getlines(filename)
    (fused,) = [n for n, text in enumerate(lines) if "= __fused_region_1(" in text]
    first = line_of(chained, "a = np.exp(x)")
    assert describe(table[fused]) == (
        f"at {HERE}, line {first} (`a = np.exp(x)`), line {first + 1} "
        f"(`b = a * 2.0 + 1.0`) and line {first + 2} (`return np.sum(np.tanh(b))`); "
        f"in the gradient of {HERE}, line {first + 2} (`return np.sum(np.tanh(b))`), "
        f"line {first + 1} (`b = a * 2.0 + 1.0`) and line {first} (`a = np.exp(x)`)"
    )


def grown_while_small(x, i):
    h = x * 1.0
    while h[i] < 4.0:
        h = h * 2.0
    return np.sum(h)


def test_a_failing_loop_test_names_the_loops_line():
    # (the loop's own statements had no origin: the def line was named)
    line = line_of(grown_while_small, "while h[i] < 4.0:")
    for run, what in (
        (lambda: ppto.grad(grown_while_small)(np.ones(3), 7), "gradient"),
        (
            lambda: ppto.jvp(grown_while_small, (np.ones(3), 7), (np.ones(3), None)),
            "jvp",
        ),
    ):
        with pytest.raises(ppto.ShapeError) as raised:
            run()
        message = str(raised.value)
        assert f"{what} failed at {HERE}, line {line} (`while h[i] < 4.0:`)" in message
        assert "index 7 is out of bounds" in message


def test_every_generated_line_of_loops_and_the_seed_has_an_origin():
    """What a loop's reverse and the gradient's seed run (the loop headers, the
    iteration counter, the seed ``ones_like``) names the user's line it serves."""
    import linecache

    from ppto.runtime.device import CPU
    from ppto.transform.origins import TABLE

    grad = ppto.grad(grown_while_small)
    grad(np.ones(3), 0)
    (ranks,) = grad._programs
    namespace = grad.lowered(ranks, CPU, fused=False)
    ((filename, table),) = namespace[TABLE].items()
    lines = [text.strip() for text in linecache.getlines(filename)]
    loop = line_of(grown_while_small, "while h[i] < 4.0:")
    for text, origin in zip(lines, table):
        if text.startswith(("while ", "for ", "iterations")):
            assert origin is not None and origin[0].line == loop, text
        if "ones_like" in text:
            assert origin is not None and origin[0].line == loop + 2, text


def ratio(x):
    y = x / (x - x)
    return np.sum(y)


def rows(x, n):
    return np.sum(np.reshape(x, (n, -1)) ** 2)


class Settings:
    pass


def scaled(x, settings):
    return np.sum(x * settings.scale)


SIX = np.arange(1.0, 7.0)


@pytest.mark.parametrize(
    "kind, function, text, make",
    [
        (FloatingPointError, ratio, "y = x /", lambda f: partial(ppto.grad(f), SIX)),
        (
            FloatingPointError,
            ratio,
            "y = x /",
            lambda f: partial(ppto.jvp, f, (SIX,), (SIX,)),
        ),
        (TypeError, rows, "np.reshape", lambda f: partial(ppto.grad(f), SIX, 2.0)),
        (
            AttributeError,
            scaled,
            "x *",
            lambda f: partial(ppto.grad(f), SIX, Settings()),
        ),
    ],
)
def test_other_runtime_errors_name_the_users_line_and_keep_their_type(
    kind, function, text, make
):
    """0/0 under np.seterr(all='raise'), a float NumPy wants an int for, an
    attribute the argument lacks: the same type of error (``except TypeError``
    catches it), saying at which line of the user's, NumPy's own as its cause."""
    line, call = line_of(function, text), make(function)
    for _ in range(2):  # (the first call, then the fast path's)
        with np.errstate(all="raise"), pytest.raises(kind) as raised:
            call()
        assert type(raised.value) is kind
        assert f"failed at {HERE}, line {line} (`" in str(raised.value)
        assert type(raised.value.__cause__) is kind
