"""Fused or unfused code, chosen by timing both (ppto.fusion.tuning)."""

from __future__ import annotations

import time

import numpy as np

import ppto
from ppto.fusion.kernels import LARGE
from ppto.fusion.tuning import SETTLE_CALLS, TIMED_CALLS, FusionChoice

CALLS_TO_DECIDE = SETTLE_CALLS + 1 + 2 * TIMED_CALLS


def counted(label: str, seconds: float, log: list):
    def function(value):
        log.append(label)
        time.sleep(seconds)
        return (label, value)

    return function


def test_the_faster_code_is_kept_and_the_other_no_longer_runs():
    for slow, fast in (("fused", "unfused"), ("unfused", "fused")):
        log: list = []
        made: list = []
        functions = {slow: counted(slow, 0.004, log), fast: counted(fast, 0.0, log)}

        def make_unfused(functions=functions, made=made):
            made.append(1)
            return functions["unfused"]

        choice = FusionChoice("f_grad", functions["fused"], make_unfused)
        results = [choice(n) for n in range(CALLS_TO_DECIDE)]
        assert choice.decision == fast
        # every call returned its own argument's result, whichever code ran it
        assert [value for _, value in results] == list(range(CALLS_TO_DECIDE))
        # the fused code alone until its kernels have settled; unfused lowered once
        assert log[:SETTLE_CALLS] == ["fused"] * SETTLE_CALLS
        assert log[SETTLE_CALLS] == "unfused" and made == [1]
        assert log.count("unfused") == TIMED_CALLS + 1
        del log[:]
        for n in range(5):
            assert choice(n) == (fast, n)
        assert log == [fast] * 5


def test_no_choice_is_made_before_both_have_been_timed():
    choice = FusionChoice("f_grad", lambda v: v, lambda: lambda v: v)
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
    results = [gradient(x, y) for _ in range(CALLS_TO_DECIDE + 2)]
    (entry,) = [e for e in gradient._entries.values() if isinstance(e, FusionChoice)]
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
