"""Random programs (tests/fuzz/): each of a fixed range of seeds is a NumPy function
written as source, differentiated by ppto and checked against central differences,
forward mode, second order, fused and unfused code and float32
(tests/fuzz/checks.py says what exactly). ``python -m tests.fuzz --seeds 0:5000``
runs many more by hand.

A program may be refused (a ``TransformError`` at its own line) or be at a point
where differences are no reference (``unstable``); any other exception, a wrong
number or a program NumPy itself cannot run fails the test.
"""

import collections

import numpy as np
import pytest

import ppto
from tests.fuzz import checks, generator

SEEDS = range(150)


def test_random_programs():
    outcomes = [checks.check(seed) for seed in SEEDS]
    broken = [o for o in outcomes if o.kind in ("failed", "invalid")]
    report = "\n\n".join(
        f"seed {o.seed} ({o.kind}):\n{generator.source(o.seed)}{o.detail}"
        for o in broken
    )
    assert not broken, f"{len(broken)} programs went wrong:\n{report}"
    kinds = collections.Counter(o.kind for o in outcomes)
    # most programs are checked through: a generator whose programs ppto mostly
    # refuses, or whose points are mostly unsmooth, would test little
    assert kinds["checked"] >= 0.85 * len(SEEDS), kinds


def test_the_generator_covers_what_a_body_may_use():
    text = "\n".join(generator.source(seed) for seed in SEEDS)
    for construct in [
        "def helper",
        "for ",
        "while ",
        "break",
        "continue",
        "        return ",  # an early return inside a block
        "elif ",
        " if ",  # a conditional expression
        ".append(",
        "np.stack(",
        "np.concatenate(",
        " @ ",
        ".T",
        ".reshape(",
        "keepdims=True",
        "] = ",
        "] += ",
        " += ",
        ", t",  # tuple unpacking
        "np.zeros_like(",
        "enumerate(",
        "[None]",
        "[::-1]",
        ".shape[0]",
        "np.broadcast_to(",
    ]:
        assert construct in text, construct


def test_the_same_seed_gives_the_same_program_and_arguments():
    assert generator.source(7) == generator.source(7)
    first, second = generator.arguments(7), generator.arguments(7)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_programs_are_valid_numpy():
    for seed in range(500):
        with np.errstate(all="ignore"):
            value = checks.load(seed)(*generator.writable(generator.arguments(seed)))
        assert np.shape(value) == (), seed


@ppto.operator
def doubled(x):
    return x * 2.0


@ppto.grad_rule
def _(x):
    def backward(dy):
        return dy * 3.0  # wrong on purpose: the checks must see it

    return backward


def wrong_gradient(x, y, W, s):
    return np.sum(doubled(x)) + np.sum(y) + np.sum(W) * s


def test_the_checks_catch_a_wrong_gradient():
    args = generator.arguments(0)
    with pytest.raises(AssertionError, match="d/d arg 0"):
        checks.check_gradients(wrong_gradient, args)
