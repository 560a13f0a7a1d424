"""The transformation corpus in reverse mode: every corpus function is differentiated
with respect to each differentiable argument (``grad`` per argument,
``value_and_grad`` and ``grad`` by parameter names for all of them, ``vjp`` for every
function: split mode, with a random cotangent for non-scalar results) and compared
with float64 central differences of the plain function evaluated on NumPy arrays.
Also: integer arguments and non-scalar results raise ``GradError``, and generating
the source twice gives the same bytes, in one process and in processes with different
hash seeds. Known failures: see tests/corpus/checks.py.
"""

import inspect
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ppto
from tests.corpus.checks import (
    CASES,
    KNOWN_FAILING,
    KNOWN_TESTS,
    assert_gradient,
    assert_value,
    central_differences,
    contracted_function,
    expect,
    plain,
    scalar_function,
)

# --- parametrization ---

SCALAR = [c for c in CASES if not c.vjp]
NON_SCALAR = [c for c in CASES if c.vjp]
PER_ARGUMENT = [
    pytest.param(case, position, id=f"{case.id}-wrt{position}")
    for case in SCALAR
    for position in case.wrt
]
INTEGER = [
    pytest.param(case, position, id=f"{case.id}-arg{position}")
    for case in CASES
    for position in case.integer_positions()
]


def ids(case):
    return case.id


def test_corpus_size():
    assert len({case.fn for case in CASES}) >= 80
    assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


@pytest.mark.parametrize("case, position", PER_ARGUMENT)
def test_grad_matches_finite_differences(case, position):
    arguments = case.arguments()
    with expect("grad", f"{case.id}-wrt{position}"):
        gradient = ppto.grad(case.fn, wrt=position)(*arguments)
        assert isinstance(gradient, ppto.Tensor)
        expected = central_differences(scalar_function(case), arguments, position)
        assert_gradient(gradient, expected, f"{case.id} d/d arg {position}")


@pytest.mark.parametrize("case", SCALAR, ids=ids)
def test_value_and_grad_matches(case):
    arguments = case.arguments()
    with expect("value_and_grad", case.id):
        value, gradients = ppto.value_and_grad(case.fn, wrt=case.wrt)(*arguments)
        assert isinstance(gradients, tuple) and len(gradients) == len(case.wrt)
        assert_value(value, plain(case, arguments), f"{case.id} value")
        for position, gradient in zip(case.wrt, gradients):
            expected = central_differences(scalar_function(case), arguments, position)
            assert_gradient(gradient, expected, f"{case.id} d/d arg {position}")


@pytest.mark.parametrize("case", NON_SCALAR, ids=ids)
def test_vjp_matches(case):
    arguments = case.arguments()
    with expect("vjp", case.id):
        out, pullback = ppto.vjp(case.fn, *arguments)
        reference = plain(case, arguments)
        rng = np.random.default_rng(7)
        if isinstance(reference, tuple):
            assert isinstance(out, tuple) and len(out) == len(reference)
            for o, r in zip(out, reference):
                assert_value(o, r, f"{case.id} value")
            cotangent = tuple(rng.standard_normal(r.shape) for r in reference)
        else:
            assert_value(out, reference, f"{case.id} value")
            cotangent = rng.standard_normal(reference.shape)
        gradients = pullback(cotangent)
        assert len(gradients) == len(arguments)
        function = contracted_function(case, cotangent)
        for position in case.wrt:
            expected = central_differences(function, arguments, position)
            assert_gradient(
                gradients[position], expected, f"{case.id} vjp arg {position}"
            )


@pytest.mark.parametrize("case", SCALAR, ids=ids)
def test_vjp_of_scalar_functions(case):
    """Split mode (forward saves, backward replays) on every scalar function, with
    a cotangent other than one; the pullback called twice gives the same (its
    loops' tapes were popped empty by the first call)."""
    arguments = case.arguments()
    with expect("vjp_scalar", case.id):
        out, pullback = ppto.vjp(case.fn, *arguments)
        assert_value(out, plain(case, arguments), f"{case.id} value")
        first = pullback(-1.5)
        gradients = pullback(-1.5)
        assert len(gradients) == len(arguments)
        for position in case.wrt:
            np.testing.assert_array_equal(
                np.asarray(gradients[position]), np.asarray(first[position])
            )
        for position in case.wrt:
            expected = -1.5 * central_differences(
                scalar_function(case), arguments, position
            )
            assert_gradient(
                gradients[position], expected, f"{case.id} vjp arg {position}"
            )


@pytest.mark.parametrize("case", [c for c in SCALAR if len(c.wrt) > 1], ids=ids)
def test_grad_by_parameter_names(case):
    """``wrt`` given as parameter names, in reverse order, gives the same gradients
    as positions."""
    arguments = case.arguments()
    names = list(inspect.signature(inspect.unwrap(case.fn)).parameters)
    with expect("grad_names", case.id):
        by_name = ppto.grad(case.fn, wrt=tuple(names[i] for i in case.wrt[::-1]))(
            *arguments
        )
        by_position = ppto.grad(case.fn, wrt=case.wrt[::-1])(*arguments)
        assert len(by_name) == len(by_position) == len(case.wrt)
        for a, b in zip(by_name, by_position):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("case", NON_SCALAR, ids=ids)
def test_grad_of_non_scalar_raises(case):
    arguments = case.arguments()
    with expect("grad_non_scalar", case.id):
        with pytest.raises(ppto.GradError, match="scalar"):
            ppto.grad(case.fn, wrt=case.wrt[0])(*arguments)


@pytest.mark.parametrize("case", NON_SCALAR, ids=ids)
def test_value_and_grad_of_non_scalar_raises(case):
    arguments = case.arguments()
    with expect("value_and_grad_non_scalar", case.id):
        with pytest.raises(ppto.GradError, match="scalar"):
            ppto.value_and_grad(case.fn, wrt=case.wrt[0])(*arguments)


@pytest.mark.parametrize("case, position", INTEGER)
def test_grad_wrt_integer_raises(case, position):
    arguments = case.arguments()
    with expect("grad_integer", f"{case.id}-arg{position}"):
        with pytest.raises(ppto.GradError):
            ppto.grad(case.fn, wrt=position)(*arguments)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_generated_source_is_deterministic(case):
    from ppto.api import _SHARED

    arguments = case.arguments()
    with expect("show_grad", case.id):
        first = ppto.show_grad(case.fn, *arguments, wrt=case.wrt, file=io.StringIO())
        _SHARED.clear()  # transform again rather than reuse the first transform
        second = ppto.show_grad(case.fn, *arguments, wrt=case.wrt, file=io.StringIO())
        assert isinstance(first, str) and first
        assert first == second


HASH_SEEDS = ("1", "2")
DIGEST_EVERY_CASE = """
import hashlib, io, json, sys
import ppto
from tests.corpus.checks import CASES
digests = {}
for case in CASES:
    try:
        text = ppto.show_grad(
            case.fn, *case.arguments(), wrt=case.wrt, file=io.StringIO()
        )
    except Exception as error:
        text = type(error).__name__
    digests[case.id] = hashlib.sha1(text.encode()).hexdigest()
json.dump(digests, sys.stdout)
"""


@pytest.fixture(scope="module")
def digests_by_hash_seed():
    """Each case's generated source (digested) from processes with different
    ``PYTHONHASHSEED``: set and dict order must not leak into the source."""
    runs = []
    for seed in HASH_SEEDS:
        done = subprocess.run(
            [sys.executable, "-c", DIGEST_EVERY_CASE],
            cwd=Path(__file__).resolve().parent.parent,
            env=dict(os.environ, PYTHONHASHSEED=seed),
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout))
    return runs


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_generated_source_does_not_depend_on_hash_seed(case, digests_by_hash_seed):
    with expect("show_grad_hash_seed", case.id):
        first, second = (digests[case.id] for digests in digests_by_hash_seed)
        assert first == second, f"PYTHONHASHSEED={HASH_SEEDS} give different sources"


def test_known_failing_entries_name_real_tests():
    for test, case_id in KNOWN_FAILING:
        assert test in KNOWN_TESTS, test
        assert any(case_id.startswith(case.id) for case in CASES), case_id


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_quick_emitter_writes_what_ast_unparse_writes(case):
    """Generated statements are written without going through ``ast``; the text must
    be exactly ``ast.unparse``'s (same parentheses, quotes and spacing)."""
    import ast

    import gast

    from ppto.api import Transformed
    from ppto.transform.emit import _TEST, _quick

    mode = "split" if case.vjp else "combined"
    gradient = Transformed(case.fn, case.wrt, mode, with_value=True)
    with expect("show_grad", case.id):
        program, _ = gradient.program(gradient.prepare(case.arguments(), {})[2])
        checked = 0
        for definition in program.functions:
            for node in gast.walk(definition):
                if isinstance(node, (gast.Assign, gast.Return, gast.Expr)):
                    quick = _quick(node, _TEST)
                    if quick is not None:
                        tree = ast.fix_missing_locations(gast.gast_to_ast(node))
                        assert quick == ast.unparse(tree)
                        checked += 1
        assert checked
