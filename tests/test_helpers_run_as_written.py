"""A helper of the user's whose result is unused runs as written (the fence lets
it hold what a differentiated function may not: ``with``, ``try``, ``match``);
where it changes an argument in place, NumPy changes the caller's value, which
the derivative would miss, so the call is refused at the helper's line. The check
followed ``if`` and loops only: a change inside a ``with`` block, a ``try``
statement's body, handler or ``finally`` block, or a ``match`` case ran
unnoticed (the value right, the array itself changed, but the gradient without
the change: 4x where 6x is right). Helpers changing only their own values there
still run, their gradients checked against central differences."""

import functools
import inspect

import numpy as np
import pytest

import ppto
from tests.corpus.checks import assert_gradient, central_differences

X = np.array([0.5, -1.0, 2.0])


def first_tripled_in_a_with_block(ls, x):
    with np.errstate(all="ignore"):
        ls[0] = x * 3  # <- changed


def added_into_in_a_try_body(a, x):
    try:
        a += x * 3  # <- changed
    finally:
        pass


def added_into_in_a_handler(a, x):
    try:
        raise ValueError("to the handler")
    except ValueError:
        a += x * 3  # <- changed


def added_into_in_a_finally_block(a, x):
    try:
        pass
    finally:
        a += x * 3  # <- changed


def first_tripled_in_a_match_case(ls, x):
    match len(ls):
        case 2:
            ls[0] = x * 3  # <- changed
        case _:
            pass


def list_changed(helper):
    def changed(x):
        ls = [x, x]
        helper(ls, x)
        return np.sum(ls[0] * x)

    return changed


def array_changed(helper):
    def changed(x):
        a = x * 1.0
        helper(a, x)
        return np.sum(a * x)

    return changed


CHANGING = [
    (first_tripled_in_a_with_block, list_changed),
    (added_into_in_a_try_body, array_changed),
    (added_into_in_a_handler, array_changed),
    (added_into_in_a_finally_block, array_changed),
    (first_tripled_in_a_match_case, list_changed),
]


@pytest.mark.parametrize(
    "helper, caller", CHANGING, ids=[helper.__name__ for helper, _ in CHANGING]
)
def test_a_change_to_an_argument_inside_a_compound_statement_is_refused(helper, caller):
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(caller(helper))(X.copy())
    error = caught.value
    lines, first = inspect.getsourcelines(helper)
    marked = first + next(n for n, line in enumerate(lines) if "# <- changed" in line)
    assert error.lineno == marked, str(error)
    assert "changes" in str(error) and helper.__name__ in str(error), str(error)


def own_values_in_compound_statements(x, k):
    with np.errstate(all="ignore"):
        t = x * 2.0
        t[0] = 1.0
    try:
        s = np.sum(t)
    except FloatingPointError:
        s = 0.0
    finally:
        t += 1.0
    match k:
        case 1:
            t[1] = s
    return [t, s]


def uses_a_helper_run_as_written(x):
    own_values_in_compound_statements(x, 1)
    return np.sum(np.sin(x) * x)


def test_a_helper_changing_its_own_values_runs():
    expected = central_differences(uses_a_helper_run_as_written, (X,), 0)
    gradient = ppto.grad(uses_a_helper_run_as_written)(X)
    assert_gradient(gradient, expected, "uses_a_helper_run_as_written")


def first_scaled(ls, x, k):
    ls[0] = x * k  # <- changed


def logged(values, x, k):
    print(len(values), np.sum(x) * k)


FIRST_TRIPLED = functools.partial(first_scaled, k=3.0)
LOGGED = functools.partial(logged, k=2.0)


def partial_changing_a_list(x):
    ls = [x, x]
    FIRST_TRIPLED(ls, x)
    return np.sum(ls[0] * x)


def partial_only_reading(x):
    ls = [x, x]
    LOGGED(ls, x)
    return np.sum(ls[0] * np.sin(x))


def test_a_partial_of_a_helper_changing_an_argument_is_refused():
    # (opaque to the check: the value right, the gradient 4x where 6x is right)
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(partial_changing_a_list)(X.copy())
    lines, first = inspect.getsourcelines(first_scaled)
    assert caught.value.lineno == first + 1, str(caught.value)
    assert "first_scaled" in str(caught.value), str(caught.value)


def test_a_partial_of_a_helper_only_reading_runs():
    expected = central_differences(partial_only_reading, (X,), 0)
    gradient = ppto.grad(partial_only_reading)(X)
    assert_gradient(gradient, expected, "partial_only_reading")


def tripled_first(ls, x):
    ls[0] = x * 3  # <- changed
    return True


def still_positive(values, x):
    return float(np.sum(values[0] * x)) > -1e9


def changed_in_a_while_condition(x):
    ls = [x, x]
    turns = 0
    while tripled_first(ls, x) and turns < 1:
        turns += 1
    return np.sum(ls[0] * x)


def read_in_a_while_condition(x):
    ls = [x, np.sin(x)]
    turns = 0
    while still_positive(ls, x) and turns < 2:
        ls = [ls[0] * ls[1], ls[1]]
        turns += 1
    return np.sum(ls[0] * x)


def test_a_helper_changing_an_argument_in_a_while_condition_is_refused():
    # (the conditions of if statements were checked, a while loop's not: the
    # value right, the gradient 4x where 6x is right)
    with pytest.raises(ppto.TransformError) as caught:
        ppto.grad(changed_in_a_while_condition)(X.copy())
    lines, first = inspect.getsourcelines(tripled_first)
    assert caught.value.lineno == first + 1, str(caught.value)


def test_a_helper_only_reading_in_a_while_condition_runs():
    expected = central_differences(read_in_a_while_condition, (X,), 0)
    gradient = ppto.grad(read_in_a_while_condition)(X)
    assert_gradient(gradient, expected, "read_in_a_while_condition")


# a helper ppto cannot read (made by exec, with no source kept)
exec("def first_tripled_unread(ls, x):\n    ls[0] = x * 3\n")  # noqa: S102


def calls_an_unread_helper(x):
    ls = [x, x]
    first_tripled_unread(ls, x)  # noqa: F821 (made by exec above)
    return np.sum(ls[0] * x)


def test_a_helper_whose_source_cannot_be_read_is_refused_where_it_runs_as_written():
    # its change to the list ran unseen: the value right, the gradient 4x for 6x
    assert calls_an_unread_helper(X.copy()) == pytest.approx(np.sum(3 * X * X))
    with pytest.raises(ppto.TransformError, match="cannot read the source of"):
        ppto.grad(calls_an_unread_helper)(X.copy())
