"""Fused or unfused code, chosen by timing both (ppto.fusion.tuning)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import ppto
from ppto.fusion.kernels import LARGE
from ppto.fusion.tuning import (
    FUSED_FIRST,
    SETTLE_CALLS,
    TIMED_CALLS,
    FusionChoice,
)

CALLS_TO_DECIDE = 1 + SETTLE_CALLS + 2 * TIMED_CALLS


@pytest.fixture(autouse=True)
def timed_policy(monkeypatch):
    monkeypatch.setenv("PPTO_FUSION", "timed")  # the default (conftest sets "on")


def counted(label: str, seconds: float, log: list):
    def function(value):
        log.append(label)
        time.sleep(seconds)
        return (label, value)

    return function


@pytest.mark.parametrize("first", ["unfused", "fused"])
def test_the_faster_code_is_kept_and_the_other_no_longer_runs(first):
    for slow, fast in (("fused", "unfused"), ("unfused", "fused")):
        log: list = []
        made: list = []
        functions = {slow: counted(slow, 0.004, log), fast: counted(fast, 0.0, log)}
        make = {
            way: (lambda way=way: made.append(way) or functions[way])
            for way in functions
        }
        choice = FusionChoice("f_grad", make, first)
        assert choice(0) == (first, 0) and made == [first]  # lowered when needed
        results = [choice(n) for n in range(1, CALLS_TO_DECIDE)]
        if first == "fused":  # the unfused code's first call, untimed, comes later
            results.append(choice(CALLS_TO_DECIDE))
        assert choice.decision == fast
        # every call returned its own argument's result, whichever code ran it
        assert [value for _, value in results] == list(range(1, len(results) + 1))
        # each code lowered once; the fused code alone until its kernels settled
        assert sorted(made) == ["fused", "unfused"]
        assert log[1 : 1 + SETTLE_CALLS] == ["fused"] * SETTLE_CALLS
        assert log.count("unfused") == TIMED_CALLS + 1
        assert log.count("fused") == SETTLE_CALLS + TIMED_CALLS + (first == "fused")
        del log[:]
        for n in range(5):
            assert choice(n) == (fast, n)
        assert log == [fast] * 5


def test_a_burst_of_load_during_the_faster_codes_calls_does_not_choose_the_slower():
    """Other work on the machine only adds time: the faster code keeps running when
    half of its timed calls were slowed (a median of them chose the slower code)."""
    timed = 0

    def fast(value):
        nonlocal timed
        timed += 1
        # its calls after settling alternate with the other's: slow down every other
        if timed > SETTLE_CALLS + 1 and timed % 2:
            time.sleep(0.012)
        return value

    def slow(value):
        time.sleep(0.004)
        return value

    choice = FusionChoice(
        "f_grad", {"fused": lambda: fast, "unfused": lambda: slow}, "fused"
    )
    for n in range(CALLS_TO_DECIDE + 1):
        choice(n)
    assert choice.decision == "fused"
    fused = sorted(choice.times["fused"])
    assert fused[-1] > 0.01 and fused[len(fused) // 2] > 0.004  # (a median lost)


def test_no_choice_is_made_before_both_have_been_timed():
    same = {"fused": lambda: lambda v: v, "unfused": lambda: lambda v: v}
    choice = FusionChoice("f_grad", same, "unfused")
    for n in range(CALLS_TO_DECIDE - 1):
        choice(n)
        assert choice.decision is None
    choice(0)
    assert choice.decision in ("fused", "unfused")


def chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def directional_derivative(function, args, direction, position, step=1e-6):
    """Central differences of ``function`` along ``direction`` in one argument."""
    values = []
    for sign in (1.0, -1.0):
        moved = list(args)
        moved[position] = args[position] + sign * step * direction
        values.append(float(function(*moved)))
    return (values[0] - values[1]) / (2 * step)


def test_a_large_gradient_keeps_its_derivative_whichever_code_it_keeps():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, LARGE * 2))
    gradient = ppto.grad(chain, wrt=(0, 1))
    results = [gradient(x, y)]
    (entry,) = [e for e in gradient._entries.values() if isinstance(e, FusionChoice)]
    assert list(entry.functions) == ["unfused"]  # the first call ran it alone
    results += [gradient(x, y) for _ in range(CALLS_TO_DECIDE + 1)]
    assert entry.decision in ("fused", "unfused")
    directions = rng.standard_normal((2, x.size))
    for dx, dy in results:
        for position, computed in ((0, dx), (1, dy)):
            for direction in directions:
                expected = directional_derivative(chain, (x, y), direction, position)
                assert np.isclose(
                    np.dot(np.asarray(computed), direction), expected, rtol=1e-5
                )


def small_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def strict_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def test_small_arrays_and_strict_precision_run_one_code_untimed():
    rng = np.random.default_rng(4)
    small = rng.standard_normal((2, 100))
    gradient = ppto.grad(small_chain, wrt=(0, 1))
    gradient(*small)
    assert gradient._entries  # (the entries looked at below exist)
    assert not any(isinstance(e, FusionChoice) for e in gradient._entries.values())
    previous = ppto.set_precision("strict")
    try:
        large = rng.standard_normal((2, LARGE * 2))
        strict = ppto.grad(strict_chain, wrt=(0, 1))
        strict(*large)
        assert strict._entries
        assert not any(isinstance(e, FusionChoice) for e in strict._entries.values())
    finally:
        ppto.set_precision(previous)


def on_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def off_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def test_the_policy_can_ask_for_fused_or_unfused_code_untimed(monkeypatch):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((2, LARGE * 2))
    expected = ppto.grad(chain, wrt=(0, 1))(x, y)
    for policy, function, fused in (("on", on_chain, True), ("off", off_chain, False)):
        monkeypatch.setenv("PPTO_FUSION", policy)
        gradient = ppto.grad(function, wrt=(0, 1))
        for computed, reference in zip(gradient(x, y), expected):
            np.testing.assert_allclose(computed, reference, rtol=1e-12)
        (entry,) = gradient._entries.values()
        assert not isinstance(entry, FusionChoice)
        assert any(name.startswith("__fused") for name in entry.__globals__) is fused


def unknown_policy_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def test_an_unknown_policy_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("PPTO_FUSION", "sometimes")
    rng = np.random.default_rng(6)
    gradient = ppto.grad(unknown_policy_chain, wrt=(0, 1))
    with pytest.raises(ppto.PptoError, match="PPTO_FUSION='sometimes'.*timed, on, off"):
        gradient(*rng.standard_normal((2, LARGE * 2)))


def large_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def test_a_first_call_on_large_arrays_runs_the_fused_code():
    # fusing costs less than a pass over large temporaries
    x, y = np.random.default_rng(7).standard_normal((2, FUSED_FIRST))
    gradient = ppto.grad(large_chain, wrt=(0, 1))
    gradient(x, y)
    (entry,) = gradient._entries.values()
    assert list(entry.functions) == ["fused"]


def numbers_only(a, b):
    return a * b + np.sin(a) * np.exp(b)


def any_shape(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def test_code_for_numbers_or_for_any_shape_is_not_timed():
    from ppto.api import SHAPE_SPECIALISATIONS

    gradient = ppto.grad(numbers_only, wrt=(0, 1))
    for _ in range(3):
        gradient(0.3, 0.7)
    assert gradient._entries
    assert not any(isinstance(e, FusionChoice) for e in gradient._entries.values())
    # once shapes stop being specialised, calls of different sizes share one code,
    # whose timings could not be compared
    rng = np.random.default_rng(8)
    gradient = ppto.grad(any_shape, wrt=(0, 1))
    for size in range(LARGE, LARGE + SHAPE_SPECIALISATIONS + 2):
        gradient(*rng.standard_normal((2, size)))
    generic = [key for key in gradient._entries if key[0][0][1] is None]
    assert generic
    assert not any(isinstance(gradient._entries[key], FusionChoice) for key in generic)


def shown_chain(x, y):
    return np.sum(np.tanh(x * y + 0.5) * np.exp(-x))


def test_show_grad_says_when_calls_run_the_unfused_code():
    import io

    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((2, LARGE * 2))
    gradient = ppto.grad(shown_chain, wrt=(0, 1))

    def header():
        text = ppto.show_grad(
            shown_chain, x, y, wrt=(0, 1), fused=True, file=io.StringIO()
        )
        return text.splitlines()[1]

    assert header().startswith("def ")  # nothing timed yet: no note
    gradient(x, y)
    assert "are timing this code against the unfused" in header()
    for _ in range(CALLS_TO_DECIDE):
        gradient(x, y)
    (entry,) = gradient._entries.values()
    entry.times = {"fused": [0.004] * 4, "unfused": [0.002] * 4}  # as if measured
    entry.decide()
    assert entry.decision == "unfused"
    assert "run the unfused code: it timed faster here (2 ms against 4 ms" in header()
    entry.times = {"fused": [0.001] * 4, "unfused": [0.002] * 4}
    entry.decide()
    assert header().startswith("def ")  # the fused code shown is what runs
