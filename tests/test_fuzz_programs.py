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
from tests.fuzz import checks, generator, trees

SEEDS = range(150)
# programs drawing the idioms too (tests/fuzz/idioms.py)
IDIOM_SEEDS = range(generator.IDIOMS_FROM, generator.IDIOMS_FROM + 40)
# seeds failing for a bug not fixed yet -> what their failure says; each must still
# fail so (the test flips when the bug is fixed: then remove the entry)
KNOWN_FAILING: dict[int, str] = {}


@pytest.mark.parametrize("seeds", [SEEDS, IDIOM_SEEDS], ids=["plain", "idioms"])
def test_random_programs(seeds):
    outcomes = [checks.check(seed) for seed in seeds]
    for outcome in outcomes:
        known = KNOWN_FAILING.get(outcome.seed)
        if known is not None:
            assert outcome.kind == "failed" and known in outcome.detail, (
                f"seed {outcome.seed} no longer fails with {known!r} "
                f"({outcome.kind}): remove it from KNOWN_FAILING"
            )
    outcomes = [o for o in outcomes if o.seed not in KNOWN_FAILING]
    broken = [o for o in outcomes if o.kind in ("failed", "invalid")]
    report = "\n\n".join(
        f"seed {o.seed} ({o.kind}):\n{generator.source(o.seed)}{o.detail}"
        for o in broken
    )
    assert not broken, f"{len(broken)} programs went wrong:\n{report}"
    kinds = collections.Counter(o.kind for o in outcomes)
    # most programs are checked through: a generator whose programs ppto mostly
    # refuses, or whose points are mostly unsmooth, would test little
    assert kinds["checked"] >= 0.85 * len(outcomes), kinds


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
        "def f(x, params, W, s):",  # pytree arguments
        'params["',
        "params[0]",
        "params.items()",
        "def local",  # local functions
        "lambda v:",
        "map(local",
        "apply",  # a callable passed to a helper
        "np.linalg.solve(",
        "np.linalg.cholesky(",
        "np.linalg.slogdet(",
        "np.linalg.det(",
        "np.linalg.inv(",
        "np.sort(",
        "np.median(",
        "np.quantile(",
        "np.nanstd(",
        "np.nan,",
        "np.einsum(",
        "np.tensordot(",
        "def f_vector(",  # vector-valued: jacobians, vjp, jvp
        "return (",  # a tuple result
    ]:
        assert construct in text, construct


def test_the_generator_covers_the_idioms():
    seeds = range(generator.IDIOMS_FROM, generator.IDIOMS_FROM + 300)
    text = "\n".join(generator.source(seed) for seed in seeds)
    for construct in [
        ") & (",
        ") | (",
        ") ^ (",
        "~(",
        " &= ",
        "np.clip(",
        ".clip(",
        "a_min=",
        "'bij,bkj->bik'",  # a matrix product of a stack
        "np.take(",
        "np.argmax(",  # an index computed from the data
        "keepdims=True)",
        "while np.",  # a condition reading the data
        " for v",  # comprehensions over a list of arrays
        "np.moveaxis(",
        "np.vstack(",
        "np.hstack(",
        "np.empty_like(",
    ]:
        assert construct in text, construct
    batched = ["transpose(0, 2, 1)", "np.matmul(B"]
    assert all(form in text for form in batched), batched
    plain = "\n".join(generator.source(seed) for seed in SEEDS)
    assert "np.empty_like(" not in plain  # earlier seeds keep their programs


def test_the_same_seed_gives_the_same_program_and_arguments():
    pytree_seed = next(s for s in SEEDS if "params" in generator.source(s))
    for seed in (7, pytree_seed):
        assert generator.source(seed) == generator.source(seed)
        first, second = generator.arguments(seed), generator.arguments(seed)
        for a, b in zip(trees.leaves(first), trees.leaves(second), strict=True):
            np.testing.assert_array_equal(a, b)


def test_programs_are_valid_numpy():
    idioms = range(generator.IDIOMS_FROM, generator.IDIOMS_FROM + 300)
    for seed in [*range(500), *idioms]:
        with np.errstate(all="ignore"):
            value = checks.load(seed)(*generator.writable(generator.arguments(seed)))
        assert np.shape(value) == (), seed
        vector = checks.load(seed, "f_vector")
        if vector is not None:
            with np.errstate(all="ignore"):
                vector(*generator.writable(generator.arguments(seed)))


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
