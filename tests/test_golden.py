"""The generated backward source of every case in tests/golden_cases.py matches its
file in golden/ byte for byte; a mismatch fails with a unified diff and the command
that regenerates the files (tools/regen_golden.py, also tested here)."""

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ppto
from tests import golden_cases
from tests.golden_cases import CASES, GOLDEN_DIR, REGENERATE, golden_diff

TOOL = Path(__file__).resolve().parent.parent / "tools" / "regen_golden.py"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_generated_source_matches_golden_file(case):
    assert case.path.exists(), f"{case.path} is missing; regenerate with: {REGENERATE}"
    expected = case.path.read_text()
    actual = case.render()
    if actual != expected:
        diff = golden_diff(expected, actual, case.path)
        pytest.fail(f"{diff}\nregenerate with: {REGENERATE}", pytrace=False)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_golden_code_computes_the_gradient(case):
    """A golden file freezes correct code: each case's gradient matches central
    differences, so a wrong derivative is never recorded as the expected text."""
    names = list(inspect.signature(case.function).parameters)
    wrt = case.wrt if isinstance(case.wrt, tuple) else (case.wrt,)
    gradients = ppto.grad(case.function, wrt=case.wrt)(*case.args)
    gradients = gradients if isinstance(case.wrt, tuple) else (gradients,)
    for item, gradient in zip(wrt, gradients):
        position = item if isinstance(item, int) else names.index(item)
        if isinstance(gradient, dict):  # (a dict of parameters: key by key)
            assert list(gradient) == list(case.args[position])
            for key, leaf in gradient.items():
                expected = central_differences(
                    _with_entry(case, position, key), (case.args[position][key],), 0
                )
                np.testing.assert_allclose(np.asarray(leaf), expected, atol=1e-6)
            continue
        expected = central_differences(case.function, case.args, position)
        np.testing.assert_allclose(np.asarray(gradient), expected, atol=1e-6)


def _with_entry(case, position, key):
    """The case's function of the entry ``key`` of its dict argument ``position``."""

    def function(value):
        arguments = list(case.args)
        arguments[position] = {**arguments[position], key: value}
        return case.function(*arguments)

    return function


def central_differences(function, args, position, step=1e-6):
    point = np.asarray(args[position], dtype=np.float64)
    gradient = np.zeros_like(point)
    for index in np.ndindex(point.shape):
        values = []
        for sign in (1.0, -1.0):
            moved = point.copy()
            moved[index] += sign * step
            shifted = list(args)
            shifted[position] = moved
            values.append(float(np.asarray(function(*shifted))))
        gradient[index] = (values[0] - values[1]) / (2 * step)
    return gradient


def test_every_golden_file_has_a_case():
    names = {case.path.name for case in CASES}
    assert len(names) == len(CASES), "two cases share a name"
    stale = sorted(p.name for p in GOLDEN_DIR.glob("*.txt") if p.name not in names)
    assert not stale, f"stale golden files {stale}; regenerate with: {REGENERATE}"


def test_golden_files_match_from_a_fresh_process():
    check = subprocess.run(
        [sys.executable, str(TOOL), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{len(CASES)} golden files match" in check.stdout


@pytest.fixture
def tool(tmp_path, monkeypatch):
    """The regeneration tool, writing to an empty golden directory under tmp_path."""
    monkeypatch.setattr(golden_cases, "GOLDEN_DIR", tmp_path / "golden")
    spec = importlib.util.spec_from_file_location("regen_golden", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tool_writes_then_checks_then_reports_a_diff(tool, tmp_path, capsys):
    golden = tmp_path / "golden"
    assert tool.main([]) == 0
    assert sorted(p.name for p in golden.iterdir()) == sorted(
        case.path.name for case in CASES
    )
    assert tool.main(["--check"]) == 0

    edited = golden / f"{CASES[0].name}.txt"
    edited.write_text(edited.read_text().replace("return", "return  ", 1))
    (golden / "removed_case.txt").write_text("")
    capsys.readouterr()
    assert tool.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert f"--- {edited.name} (golden)\n+++ {edited.name} (generated)\n" in out
    assert "stale golden file: " in out and "removed_case.txt" in out
    assert out.endswith(f"regenerate with: {REGENERATE}\n")

    assert tool.main([]) == 0
    assert not (golden / "removed_case.txt").exists()
    assert edited.read_text() == CASES[0].render()
