"""Per-statement cost of a benchmark workload's gradient: the lowered, fused CPU code
(what ppto runs with PPTO_FUSION=on, as tools/fusion_bench.py's fused column) and
the hand-written NumPy beside it, each statement timed in place.

Run: ``python tools/statement_costs.py b`` (a workload's letter; ``--dtype``,
``--calls``). Each function is copied with ``time.perf_counter_ns()`` read around
every top-level statement (the generated code is straight-line for these
workloads), then the instrumented copies and the plain functions run interleaved.
It prints the whole-function medians of the plain functions and their ratio, then
each statement's median (statements under 0.5 us left out) and the sum of the
medians. Times in place include what a statement pays after its neighbours (cold
caches), which a loop over one statement hides; the sum exceeds the plain total
by the timer's own cost. ``OPENBLAS_NUM_THREADS=1`` keeps BLAS's threads out of it.
The timed copies' gradients are checked against the plain functions' and ppto's
against the hand-written ones first (it stops with an error on a mismatch).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import statistics
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import workloads  # noqa: E402
from run import check  # noqa: E402

import ppto  # noqa: E402


def instrumented(source: str, scope: dict, name: str):
    """Function ``name`` of ``source`` with each top-level statement timed: the
    function, a list of each statement's times and each statement's first line."""
    tree = ast.parse(source)
    definition = tree.body[0]
    body, labels = [], []
    for position, statement in enumerate(definition.body):
        labels.append(ast.unparse(statement).splitlines()[0][:88])
        record = f"__times[{position}].append(__now() - __start)"
        if isinstance(statement, ast.Return):  # (time the value, then return it)
            value = ast.unparse(statement.value) if statement.value else "None"
            statement = ast.parse(f"__result = {value}").body[0]
            body += [*ast.parse("__start = __now()").body, statement]
            body += ast.parse(f"{record}\nreturn __result").body
            continue
        body += [*ast.parse("__start = __now()").body, statement]
        body += ast.parse(record).body
    definition.body = body
    definition.decorator_list = []
    ast.fix_missing_locations(tree)
    times: list[list[int]] = [[] for _ in labels]
    namespace = dict(scope, __now=time.perf_counter_ns, __times=times)
    exec(compile(tree, f"<timed {name}>", "exec"), namespace)
    return namespace[name], times, labels


def generated(workload, args):
    """The lowered, fused CPU gradient ppto runs for ``args``: (source, function)."""
    gradient = ppto.grad(workload.function, wrt=workload.wrt)
    gradient(*args)
    _, values, ranks, _, device = gradient.prepare(args, {})
    namespace = gradient.lowered(ranks, device, fused=True)
    name = f"{workload.function.__name__}_grad"
    source = next(s for s, n in gradient._lowered.values() if n is namespace)
    return source, namespace[name]


def report(workload, dtype: str, calls: int) -> None:
    args = workload.make(np.random.default_rng(0), dtype)
    source, plain = generated(workload, args)
    timed, times, labels = instrumented(source, plain.__globals__, plain.__name__)
    hand_source = textwrap.dedent(inspect.getsource(workload.hand))
    hand_name = workload.hand.__name__
    hand_timed, hand_times, hand_labels = instrumented(
        hand_source, vars(workloads), hand_name
    )
    for timed_one, plain_one in ((timed, plain), (hand_timed, workload.hand)):
        check(timed_one(*args)[1], plain_one(*args)[1], dtype, "the timed copy")
    check(plain(*args)[1], workload.hand(*args)[1], dtype)
    totals: dict[str, list[int]] = {"ppto": [], "hand": []}
    for call in range(calls):
        order = (("ppto", timed, plain), ("hand", hand_timed, workload.hand))
        for who, timed_one, plain_one in order[:: 1 if call % 2 else -1]:
            timed_one(*args)
            start = time.perf_counter_ns()
            plain_one(*args)
            totals[who].append(time.perf_counter_ns() - start)
    ppto_us, hand_us = (statistics.median(totals[w]) / 1e3 for w in ("ppto", "hand"))
    print(
        f"== {workload.name} {dtype}: medians of {calls} calls: generated "
        f"{ppto_us:.1f} us, hand {hand_us:.1f} us, ratio {ppto_us / hand_us:.3f}"
    )
    for title, each, lines in (
        ("generated", times, labels),
        ("hand", hand_times, hand_labels),
    ):
        print(f"-- {title}")
        total = 0.0
        for spent, line in zip(each, lines):
            median = statistics.median(spent) / 1e3
            total += median
            if median >= 0.5:
                print(f"{median:8.1f} us  {line}")
        print(f"{total:8.1f} us  sum of the medians")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", help="a workload's letter, e.g. b (the MLP)")
    parser.add_argument("--dtype", action="append", help="float64, float32 (both)")
    parser.add_argument("--calls", type=int, default=400)
    arguments = parser.parse_args()
    (workload,) = [w for w in workloads.WORKLOADS if w.name[0] == arguments.workload]
    for dtype in arguments.dtype or workload.dtypes:
        report(workload, dtype, arguments.calls)


if __name__ == "__main__":
    main()
