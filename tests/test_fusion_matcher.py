"""The fusion matcher on parsed code (ppto/transform/fuse_match.py): a name assigned
several times (a gradient accumulator, ``acc = acc + t``) matched definition by
definition, copies seen through, a value of a multi-output rule matched in a
statement of its own, and the fused call moved earlier where a statement in between
reads one of its values. Each rewrite runs and equals the code it replaced; each
refusal (a definition read in between, a value still needed, arguments not ready
before a value is read) leaves the code unfused."""

import gast
import numpy as np
import pytest

import ppto
from ppto.ops import elementwise as ew
from ppto.ops import reductions
from ppto.transform.emit import render_function
from ppto.transform.fuse import Fuser
from tests.test_fusion_multi import own_rules  # noqa: F401  (a fixture)

# what generated code calls, for the matcher; and the same in NumPy, to run it
OPERATORS = {"reduce_sum": reductions.reduce_sum, "tanh": ew.tanh, "exp": ew.exp}
NUMPY = {"reduce_sum": np.sum, "tanh": np.tanh, "exp": np.exp}


def sums_and_accumulator(a, c):
    """A sum matched in a statement of its own, and an accumulated value."""
    t = a * c
    return reductions.reduce_sum(a / c), t + ew.tanh(t) + ew.exp(a)


@pytest.fixture
def rule(own_rules):  # noqa: F811
    calls = []

    @ppto.fusion_rule(sums_and_accumulator, name="sums_and_accumulator")
    def fused(a, c):
        calls.append(a.shape)
        t = a * c
        return np.sum(a / c), t + np.tanh(t) + np.exp(a)

    calls.clear()  # (its check at registration ran it)
    return calls


ACCUMULATED = """
def f(a, c):
    s = reduce_sum(a / c)
    t = a * c
    acc = t
    acc = acc + tanh(t)
    acc = acc + exp(a)
    return s, acc
"""


def fused(source: str) -> tuple[str, dict]:
    definition = gast.parse(source.strip()).body[0]
    kernels: dict = {}
    result = Fuser(dict(OPERATORS), kernels).function(definition)
    return render_function(result), kernels


def run(source: str, kernels: dict, *args):
    namespace = {**NUMPY, **kernels}
    exec(source, namespace)
    return namespace["f"](*args)


def arrays():
    rng = np.random.default_rng(0)
    return rng.uniform(0.5, 1.5, (4, 3)), rng.uniform(0.5, 1.5, (4, 3))


def body(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()[1:]]


def test_an_accumulator_assigned_three_times_is_matched_and_fused(rule):
    text, kernels = fused(ACCUMULATED)
    assert body(text) == [
        "s, acc = __fused_sums_and_accumulator(a, c)",
        "return (s, acc)",
    ]
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(ACCUMULATED, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)
    assert rule  # the rule's own implementation ran


SWAPPED = """
def f(a, c):
    s = reduce_sum(a / c)
    t = c * a
    acc = t
    acc = tanh(t) + acc
    acc = exp(a) + acc
    return s, acc
"""


def test_commutative_operands_match_swapped(rule):
    # every product and sum the other way round from the rule's pattern
    text, kernels = fused(SWAPPED)
    assert body(text) == [
        "s, acc = __fused_sums_and_accumulator(a, c)",
        "return (s, acc)",
    ]
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(SWAPPED, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)
    # a quotient swapped is another value: s = c / a stays as it is
    text, _ = fused(SWAPPED.replace("a / c", "c / a"))
    assert "__fused_sums_and_accumulator" not in text
    assert "s = reduce_sum(c / a)" in body(text)


def test_a_copy_of_a_value_read_twice_is_seen_through_at_each_read(rule):
    # t, read twice by the pattern, read through one copy u both times
    source = ACCUMULATED.replace("t = a * c\n", "t = a * c\n    u = t\n")
    source = source.replace("acc = t\n", "acc = u\n").replace("tanh(t)", "tanh(u)")
    text, kernels = fused(source)
    assert body(text) == [
        "s, acc = __fused_sums_and_accumulator(a, c)",
        "return (s, acc)",
    ]
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(source, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)


def test_copies_are_seen_through_and_dropped_where_nothing_else_reads_them(rule):
    source = ACCUMULATED.replace("t = a * c\n", "t = a * c\n    u = a\n").replace(
        "exp(a)", "exp(u)"
    )
    text, kernels = fused(source)
    assert body(text) == [
        "s, acc = __fused_sums_and_accumulator(a, c)",
        "return (s, acc)",
    ]
    read_again = source.replace("return s, acc", "return s, acc, u")
    text, _ = fused(read_again)
    assert "u = a" in body(text)  # (read by the return: kept)
    assert "s, acc = __fused_sums_and_accumulator(a, c)" in body(text)


@pytest.mark.parametrize(
    "change",
    [
        # an earlier value of the accumulator, read by a statement in between
        ("    acc = acc + exp(a)\n", "    v = acc * 2\n    acc = acc + exp(a)\n"),
        # the intermediate t, still needed after the match
        ("return s, acc", "return s, acc, t"),
        # an argument assigned again between its read and the last statement
        ("    acc = acc + exp(a)\n", "    a = c\n    acc = acc + exp(a)\n"),
    ],
    ids=["read-in-between", "still-needed", "argument-reassigned"],
)
def test_a_match_that_would_change_what_code_reads_is_refused(rule, change):
    source = ACCUMULATED.replace(*change)
    text, kernels = fused(source)
    assert "__fused_sums_and_accumulator" not in text
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(source, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)


def test_the_call_moves_earlier_where_a_statement_reads_a_value_before_the_last(rule):
    source = ACCUMULATED.replace("    t = a * c\n", "    w = s * 2\n    t = a * c\n")
    source = source.replace("return s, acc", "return w, acc")
    text, kernels = fused(source)
    assert body(text) == [
        "s, acc = __fused_sums_and_accumulator(a, c)",
        "w = s * 2",
        "return (w, acc)",
    ]
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(source, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)


def test_the_call_does_not_move_where_it_would_read_other_arguments(rule):
    # w reads s, so the call would run before w; but t reads c assigned after w,
    # and s the c before: no one place gives the call both
    source = ACCUMULATED.replace(
        "    t = a * c\n", "    w = s * 2\n    c = c + w\n    t = a * c\n"
    ).replace("return s, acc", "return w, acc")
    text, kernels = fused(source)
    assert "__fused_sums_and_accumulator" not in text
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(source, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)


def test_a_copy_of_a_name_assigned_after_it_is_not_seen_through(rule):
    # u keeps a's first value; the call must read u, not the a assigned since
    source = """
def f(a, c):
    u = a
    a = a * c
    s = reduce_sum(u / c)
    t = u * c
    acc = t
    acc = acc + tanh(t)
    acc = acc + exp(u)
    return s, acc, a
"""
    text, kernels = fused(source)
    assert "s, acc = __fused_sums_and_accumulator(u, c)" in body(text)
    args = arrays()
    for got, wanted in zip(run(text, kernels, *args), run(source, {}, *args)):
        np.testing.assert_allclose(got, wanted, rtol=1e-14)
