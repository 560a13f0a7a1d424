"""``for h in hs:`` whose body changes hs (appends to it, replaces or writes into
an item, pops, ``hs += [...]``): Python's loop reads the list as it is at each
turn, ppto's generated code runs over it as it was when the loop began. Such a
change is refused at its line, suggesting a loop over a copy (``for h in
list(hs):``), which runs and matches the plain function and float64 central
differences; so do loops that change another list, replace the item the turn reads
(``hs[i] = ...`` in ``enumerate(hs)``), or rebind the name."""

import numpy as np
import pytest

import ppto
from tests.test_list_sharing import assert_matches_numpy

X = np.array([0.3, -0.5])


# --- refused: the list the loop runs over changes ---------------------------------


def grown(x):
    hs = [x]
    for h in hs:
        if len(hs) < 3:
            hs.append(h * 2.0)
    return sum(np.sum(h) for h in hs)


def replaced(x):
    hs = [x * 1.0, x * 2.0]
    out = 0.0
    for h in hs:
        out = out + np.sum(h)
        hs[-1] = x * 10.0
    return out


def popped(x):
    hs = [x * 1.0, x * 2.0, x * 3.0]
    out = 0.0
    for h in hs:
        out = out + np.sum(h)
        hs.pop()
    return out


def extended_by_augmented_assignment(x):
    hs = [x * 1.0]
    for h in hs:
        if len(hs) < 3:
            hs += [h * 2.0]
    return sum(np.sum(h) for h in hs)


def later_item_replaced_in_enumerate(x):
    hs = [x * 1.0, x * 2.0]
    out = 0.0
    for i, h in enumerate(hs):
        out = out + np.sum(h) * (i + 1)
        if i == 0:
            hs[1] = x * 7.0
    return out


def grown_through_another_name(x):
    hs = [x * 1.0]
    gs = hs
    for h in hs:
        if len(gs) < 3:
            gs.append(h * 2.0)
    return sum(np.sum(h) for h in hs)


def zipped_and_grown(x):
    hs = [x * 1.0, x * 2.0]
    gs = [x * 3.0, x * 4.0]
    out = 0.0
    for h, g in zip(hs, gs):
        out = out + np.sum(h * g)
        gs.append(g)
    return out


REFUSED = [
    (grown, "hs.append(h * 2.0)", "for h in list(hs):"),
    (replaced, "hs[-1] = x * 10.0", "for h in list(hs):"),
    (popped, "hs.pop()", "for h in list(hs):"),
    (extended_by_augmented_assignment, "hs += [h * 2.0]", "for h in list(hs):"),
    (
        later_item_replaced_in_enumerate,
        "hs[1] = x * 7.0",
        "for i, h in enumerate(list(hs)):",
    ),
    (grown_through_another_name, "gs.append(h * 2.0)", "for h in list(hs):"),
    (zipped_and_grown, "gs.append(g)", "for h, g in zip(hs, list(gs)):"),
]


@pytest.mark.parametrize(
    "function, line, instead", REFUSED, ids=[f.__name__ for f, _, _ in REFUSED]
)
def test_a_list_changed_while_a_loop_runs_over_it_is_refused(function, line, instead):
    """grown gave 3 sum(x) where Python gives 7 sum(x) (the appended items never
    visited), replaced 3 where it gives 11 (the old item read), popped a
    ShapeError from the generated code, the enumerate one 5 where it gives 15."""
    with pytest.raises(ppto.TransformError) as caught:
        ppto.value_and_grad(function)(X)
    message = str(caught.value)
    assert line in message
    assert "test_list_changed_while_iterated.py" in message
    assert "while the for loop at line" in message
    assert instead in message


# --- accepted: a copy run over, another list changed, the current item replaced ---


def grown_over_a_copy(x):
    hs = [x]
    for h in list(hs):
        hs.append(h * 2.0)
    for h in hs[:]:
        hs.append(h * 3.0)
    return sum(np.sum(h * h) for h in hs)


def popped_over_a_copy(x):
    hs = [x * 1.0, x * 2.0, x * 3.0]
    out = 0.0
    for h in list(hs):
        out = out + np.sum(h * h)
        hs.pop()
    return out + len(hs)


def replaced_over_a_copy(x):
    hs = [x * 1.0, x * 2.0]
    out = 0.0
    for h in list(hs):
        out = out + np.sum(h * h)
        hs[-1] = x * 10.0
    return out + np.sum(hs[-1])


def item_replaced_at_each_turn(x):
    hs = [x * 1.0, x * 2.0]
    for i in range(2):
        hs[1] = x * (10.0 + i)
    return np.sum(hs[1] * hs[0])


def current_item_replaced(x):
    hs = [x * 1.0, x * 2.0]
    for i, h in enumerate(hs):
        hs[i] = h * 3.0
    return np.sum(hs[0] * hs[1])


def grown_by_index(x):
    hs = [x * 1.0]
    for i in range(len(hs)):
        hs.append(hs[i] * 2.0)
    return sum(np.sum(h * h) for h in hs)


def another_list_grown(x):
    hs = [x * 1.0, x * 2.0]
    gs = []
    for h in hs:
        gs.append(h * 2.0)
    return sum(np.sum(g * g) for g in gs)


def name_rebound_to_a_new_list(x):
    hs = [x * 1.0, x * 2.0]
    out = 0.0
    for h in hs:
        out = out + np.sum(h * h)
        hs = hs + [x * 5.0]
    return out + np.sum(hs[-1])


ACCEPTED = [
    grown_over_a_copy,
    popped_over_a_copy,
    replaced_over_a_copy,
    item_replaced_at_each_turn,
    current_item_replaced,
    grown_by_index,
    another_list_grown,
    name_rebound_to_a_new_list,
]


@pytest.mark.parametrize("function", ACCEPTED, ids=lambda f: f.__name__)
def test_loops_that_leave_their_list_alone_match_python(function):
    """(The two replacing an item in a loop failed with AttributeError: the
    adjoint of the item replaced by a later turn, a 0, was unbroadcast.)"""
    assert_matches_numpy(function, X)
