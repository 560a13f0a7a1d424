"""Benchmark ppto's generated gradients against hand-written NumPy, in one process.

Run: ``python benchmarks/run.py`` (``--quick`` for fewer repetitions). For each
workload it checks ppto's gradient against the hand-written one, then reports the
median time of many calls of each (after ``WARM_UP_CALLS`` of each: the steady
state) and their ratio, the first-call latency (transform +
compile + first call; measured after one call of the hand-written version, so that
the process's first touch of that much memory is charged to neither), and the peak
memory of one call (tracemalloc sees NumPy's allocations), and says which targets
hold. Before the table it differentiates one small unrelated function and prints how
long that took: ppto's one-time start-up in a process (reading the source of the
gradient rules it uses first), which would otherwise be charged to whichever workload
runs first.

On Linux with glibc the benchmark runs itself again with glibc's heap told to keep
freed memory (``GLIBC_TUNABLES``: mmap and trim thresholds of 64 and 256 MB). With the
defaults, whether a call's megabyte-sized arrays come from reused heap or from fresh
pages the kernel must zero depends on what ran before and on the order of frees: the
same hand-written float32 chain measured 3 ms and 8.5 ms in two runs of this script.
Keeping freed memory charges neither side for page faults, so the ratios measure the
computation. ``--system-heap`` keeps the defaults.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from others import Unsupported, available  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import ppto  # noqa: E402
from ppto.fusion import tuning  # noqa: E402

# calls of each function before the timed ones: a gradient's first calls time its
# fused code against its unfused code and settle on the faster (ppto.fusion.tuning),
# each alternation a call of one or the other code; the timed calls measure the
# steady state that follows (the first call has a column of its own)
WARM_UP_CALLS = tuning.SETTLE_CALLS + 2 * tuning.TIMED_CALLS + 2

TARGETS = {"a": 1.05, "b": 1.05, "c": 0.5, "d": 1.05, "e": 2.0, "f": 2.0}


def median_times(functions, args, repeats: int) -> list[float]:
    """The median time of each function, their calls interleaved (one of each per
    round, the order rotating) so that a shared machine's changing load falls on
    all of them alike rather than on whichever ran during a busy spell."""
    times: list[list[float]] = [[] for _ in functions]
    for round_ in range(repeats):
        for offset in range(len(functions)):
            which = (round_ + offset) % len(functions)
            start = time.perf_counter()
            functions[which](*args)
            times[which].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def peak_memory(function, args) -> int:
    tracemalloc.start()
    function(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def check(ppto_grads, hand_grads, dtype, who: str = "ppto") -> float:
    worst = 0.0
    for mine, theirs in zip(ppto_grads, hand_grads):
        mine, theirs = (
            np.asarray(mine, dtype=np.float64),
            np.asarray(theirs, np.float64),
        )
        scale = max(1e-30, float(np.max(np.abs(theirs))))
        worst = max(worst, float(np.max(np.abs(mine - theirs))) / scale)
    limit = 1e-9 if dtype == "float64" else 1e-3
    if worst > limit:
        raise SystemExit(f"{who}: gradient mismatch {worst:.2e} > {limit}")
    return worst


HEAP_TUNABLES = (
    "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"
)


def steady_heap(system_heap: bool) -> str:
    """Re-run this process with glibc keeping freed memory (see the module
    docstring) unless asked not to, not on glibc, or GLIBC_TUNABLES is set; returns
    the line that says which heap the numbers come from."""
    current = os.environ.get("GLIBC_TUNABLES")
    if current == HEAP_TUNABLES:
        return "heap: glibc keeping freed memory (GLIBC_TUNABLES, see --help)"
    if current is not None:
        return f"heap: as set, GLIBC_TUNABLES={current}"
    if system_heap or platform.libc_ver()[0] != "glibc":
        return "heap: the system's defaults"
    sys.stdout.flush()
    environment = dict(os.environ, GLIBC_TUNABLES=HEAP_TUNABLES)
    os.execve(sys.executable, [sys.executable, *sys.argv], environment)
    raise AssertionError("unreachable: execve replaces the process")


def start_up() -> float:
    """Seconds for the process's first gradient (see the module docstring)."""

    def first(x):
        return np.sum(np.tanh(x) * x)

    start = time.perf_counter()
    ppto.grad(first)(np.linspace(-1.0, 1.0, 5))
    return time.perf_counter() - start


def run(quick: bool, only: str = "", heap: str = "") -> int:
    rng = np.random.default_rng(0)
    if heap:
        print(heap)
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"NumPy {np.__version__}; first gradient in this process (start-up): "
        f"{start_up() * 1e3:.1f} ms"
    )
    frameworks = available()
    header = (
        f"{'workload':24s} {'dtype':8s} {'ppto ms':>9s} {'numpy ms':>9s} "
        f"{'ratio':>6s} {'target':>6s} {'first ms':>9s} {'peak ratio':>10s}  ok"
        + "".join(f" {name:>8s}" for name in frameworks)
    )
    rows = []
    for workload in WORKLOADS:
        if only and workload.name[0] not in only:
            continue
        for dtype in workload.dtypes:
            args = workload.make(rng, dtype)
            rows.append((workload, dtype, measure(workload, dtype, args, quick)))
            del args  # each row starts from the same memory state
    # Other frameworks after every ppto measurement: their thread pools keep
    # spinning after a call and would slow whatever runs next.
    lines, failures = [header, "-" * len(header)], 0
    for workload, dtype, (text, ok, repeats) in rows:
        columns, notes = "", []
        if frameworks:
            args = workload.make(rng, dtype)
            columns, notes = compare(frameworks, workload, dtype, args, repeats)
        lines.append(text + columns)
        lines += [f"    {note}" for note in notes]
        failures += not ok
    print("\n".join(lines))
    print(
        f"\ntargets: ratio <= target, first call <= 20 ms, peak memory <= 1.2x; "
        f"{failures} row(s) miss"
    )
    if frameworks:
        print(f"{', '.join(frameworks)}: median time as a ratio to NumPy's")
    return failures


def measure(workload, dtype, args, quick: bool) -> tuple[str, bool, int]:
    """ppto against the hand-written gradient: the row's text, whether it meets its
    targets, and the repetitions used."""
    _, hand = workload.hand(*args)  # warms the heap for both (see docstring)
    start = time.perf_counter()
    gradient = ppto.grad(workload.function, wrt=workload.wrt)
    grads = gradient(*args)
    first = time.perf_counter() - start
    check(grads, hand, dtype)
    big = args[0].size >= 100_000 or workload.name.startswith(("b", "d"))
    repeats = (5 if quick else 41) if big else (200 if quick else 2001)
    if not quick:  # (steady state: see WARM_UP_CALLS)
        median_times((gradient, workload.hand), args, WARM_UP_CALLS)
    mine, theirs = median_times((gradient, workload.hand), args, repeats)
    check(gradient(*args), hand, dtype)  # and as it runs after its first calls
    ratio = mine / theirs
    memory = peak_memory(gradient, args) / max(1, peak_memory(workload.hand, args))
    target = TARGETS[workload.name[0]]
    ok = ratio <= target and first <= 0.020 and memory <= 1.2
    text = (
        f"{workload.name:24s} {dtype:8s} {mine * 1e3:9.3f} {theirs * 1e3:9.3f} "
        f"{ratio:6.2f} {target:6.2f} {first * 1e3:9.1f} {memory:10.2f}  "
        f"{'yes' if ok else 'NO '}"
    )
    return text, ok, repeats


def compare(frameworks: dict, workload, dtype, args, repeats: int):
    """Each framework's time as a ratio to the hand-written gradient's (timed
    together), checked against it first; notes say why one cannot run."""
    _, hand = workload.hand(*args)
    columns, notes = "", []
    for name, prepare in frameworks.items():
        try:
            other = prepare(workload, args)
            check(other(), hand, dtype, name)
            pair = median_times((other, workload.hand), args, repeats)
            columns += f" {pair[0] / pair[1]:8.2f}"
        except Unsupported as reason:
            notes.append(f"{name}: {reason}")
            columns += f" {'n/a':>8s}"
    return columns, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", default="", help="workload letters, e.g. 'ef'")
    parser.add_argument(
        "--system-heap", action="store_true", help="keep glibc's heap defaults"
    )
    arguments = parser.parse_args()
    heap = steady_heap(arguments.system_heap)
    run(arguments.quick, arguments.only, heap)


if __name__ == "__main__":
    main()
