"""The benchmark scripts run: each checks ppto's gradient of every workload against
the hand-written NumPy one (float64 and float32, full size, fused and unfused) before
timing, and stops with an error on a mismatch. Timings are printed, not asserted."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ["a logsumexp", "b MLP", "c chain 1e6", "d RNN", "e branch", "f chain 10"]


def _run(script: str, *arguments: str) -> str:
    """The script's output, run with ``arguments`` (``--quick`` where none)."""
    done = subprocess.run(
        [sys.executable, script, *(arguments or ["--quick"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("script", ["benchmarks/run.py", "tools/fusion_bench.py"])
def test_benchmark_checks_every_workload_and_prints_its_table(script):
    output = _run(script)
    rows = [line for line in output.splitlines() if line[:1] in "abcdefr"]
    expected = (
        WORKLOADS
        if script.startswith("benchmarks")
        else [*WORKLOADS[:3], "r residual block"]  # (the fusion benchmark's own)
    )
    for workload in expected:
        assert any(row.startswith(workload) for row in rows), workload
    assert "row(s) miss" in output  # the targets are judged
    assert output.startswith("heap:")  # which heap the numbers come from


def test_more_workloads_are_checked_and_timed():
    output = _run("benchmarks/more.py")
    names = ("cross-entropy", "layer norm", "attention", "least squares", "embed")
    for name in names + ("conv",):
        rows = [line for line in output.splitlines() if line.startswith(name)]
        assert len(rows) == 1 and float(rows[0].split()[-1]) > 0, name


def test_the_fusion_benchmark_runs_on_a_gpu_or_says_it_needs_one():
    from tests.conftest import cuda_available

    done = subprocess.run(
        [sys.executable, "tools/fusion_bench.py", "--quick", "--device", "cuda"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if cuda_available():  # the fused CUDA kernels checked, then timed
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "calls on cuda;" in done.stdout
    else:
        assert done.returncode != 0
        assert "--device cuda needs CuPy and a GPU" in done.stderr


def test_statement_costs_time_each_statement_of_both_gradients():
    output = _run("tools/statement_costs.py", "b", "--calls", "3")
    for dtype in ("float64", "float32"):  # (each copy checked against its original)
        report = output.split(f"== b MLP 256x784-256-10 {dtype}")[1]
        generated, hand = report.split("-- generated")[1].split("-- hand")
        assert "__fused_matmul_bias(x, W1, b1)" in generated  # the fused code runs
        assert " us  dW1 = x.T @ " in generated and " us  dW1 = x.T @ da" in hand
        assert "sum of the medians" in hand.split("==")[0]


def test_first_call_tool_reports_every_workload_and_its_stages():
    lines = _run("tools/first_call.py", "--runs", "1", "--stages").splitlines()
    header = next(line for line in lines if line.startswith("workload"))
    for column in ("transform ms", "first ms", "parse", "reverse", "lower", "other"):
        assert column in header, column
    for workload in WORKLOADS:
        rows = [line for line in lines if line.startswith(workload)]
        assert rows, workload
        words = rows[0].split()
        numbers = [float(word) for word in words[words.index("float64") + 1 :]]
        # start-up, transform, first, its CPU time and the collector's; the stages
        assert len(numbers) == 5 + 15
        transform, first, collecting = numbers[1], numbers[2], numbers[4]
        assert 0 < transform <= first, rows[0]  # the transform is part of the call
        assert collecting <= first, rows[0]  # (a collection during the call)


def test_first_call_tool_measures_after_other_workloads():
    """``--after e``: the chain of 10 measured where workload e ran first (as
    benchmarks/run.py --quick runs it), which the tool says."""
    output = _run("tools/first_call.py", "--runs", "1", "--only", "f", "--after", "e")
    assert "each after workloads e" in output
    row = next(line for line in output.splitlines() if line.startswith("f chain"))
    numbers = [float(word) for word in row.split()[4:]]
    assert len(numbers) == 5 and 0 < numbers[1] <= numbers[2], row
