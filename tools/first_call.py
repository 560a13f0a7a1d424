"""First-call latency of each benchmark workload, each measured in fresh processes.

Run: ``python tools/first_call.py`` (``--runs N`` processes per workload, the median
reported; ``--stages`` a per-stage breakdown; ``--profile N`` cProfile's top N
functions of one run; ``--only ab`` some workloads). The first call of a gradient
pays for the transform (parse, normalize, analyze, reverse, optimize), lowering for
the device (fusion included), compiling the generated source, and the call itself;
benchmarks/run.py reports that sum as "first ms". A fresh process per measurement
keeps one workload's cached rule templates and compiled code from helping the next
(within run.py's one process they do, so its numbers are lower or equal).

Each process first differentiates one small unrelated function, as run.py does, so
that ppto's one-time start-up is not charged to the workload (reported apart as
"start-up ms"; ``--cold`` skips it, charging it to the workload). ``--after ab``
first runs those workloads as ``benchmarks/run.py --quick`` does (their gradients
checked and timed, every dtype), so that the measured one starts from the state
the full benchmark leaves it in (warm caches, a larger heap). "cpu ms" is the first
call's CPU time in its own thread (a busy machine adds less to it than to the time
that passes; fused code's worker threads are not in it), "gc ms" the time the
cyclic garbage collector took during the call.

The stage breakdown times the pipeline's entry points, each stage's own time
(a stage called inside another counts for itself only), so the stages and "other"
(the remaining glue: argument checks, caching, rule look-ups) add up to the first
call's total. Timers add a little overhead: compare totals without ``--stages``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

# stage name -> (module, attribute holding the function or class, method or None)
STAGES = {
    "parse": ("ppto.transform.pipeline", "parse_function", None),
    "checks": ("ppto.transform.pipeline", "fence", "check"),
    "aliases": ("ppto.transform.pipeline", "aliases", "check"),
    "structure": ("ppto.transform.pipeline", "loops", None),
    "ssa": ("ppto.transform.pipeline", "rename", None),
    "normalize": ("ppto.transform.pipeline", "Normalizer", "block"),
    "analyze": ("ppto.transform.pipeline", "analyze", None),
    "forward": ("ppto.transform.pipeline", "Generator", "forward"),
    "reverse": ("ppto.transform.pipeline", "Generator", "backward"),
    "optimize": ("ppto.transform.pipeline", "_cleanup", None),
    "fuse": ("ppto.transform.lower", "fuse_program", None),
    "lower": ("ppto.api", "lower", None),
    "compile": ("ppto.transform.emit", "compile", None),
    "run": ("ppto.api", "Transformed", "_enter"),
}


def _timing(stage: str, function, totals: dict, stack: list):
    """``function`` charging its own time (less that of stages it calls) to
    ``stage`` in ``totals``."""

    def timed(*args, **kwargs):
        stack.append(0.0)  # time spent in stages called from this one
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            inner = stack.pop()
            totals[stage] = totals.get(stage, 0.0) + elapsed - inner
            if stack:
                stack[-1] += elapsed

    return timed


def _install_timers(totals: dict, stack: list) -> None:
    import builtins
    import importlib

    for stage, (module_name, attribute, method) in STAGES.items():
        module = importlib.import_module(module_name)
        if stage == "compile":  # Python's compile, as emit calls it
            module.compile = _timing(stage, builtins.compile, totals, stack)
            continue
        holder = getattr(module, attribute)
        if method is None:
            setattr(module, attribute, _timing(stage, holder, totals, stack))
            continue
        original = holder.__dict__[method]
        if isinstance(original, staticmethod):
            timed = staticmethod(_timing(stage, original.__func__, totals, stack))
        else:
            timed = _timing(stage, original, totals, stack)
        setattr(holder, method, timed)


def _start_up() -> float:
    """Seconds of the process's first gradient (see the module docstring)."""
    import numpy as np

    import ppto

    start = time.perf_counter()
    ppto.grad(lambda x: np.sum(np.tanh(x) * x))(np.linspace(-1.0, 1.0, 5))
    return time.perf_counter() - start


def _run_before(letters: str, rng) -> None:
    """The workloads ``letters`` (every dtype) as ``benchmarks/run.py --quick``
    measures them, in its order."""
    import run as benchmark
    from workloads import WORKLOADS

    for workload in WORKLOADS:
        if workload.name[0] in letters:
            for dtype in workload.dtypes:
                args = workload.make(rng, dtype)
                benchmark.measure(workload, dtype, args, quick=True)
                del args  # (as run.py: each row starts from the same memory state)


def _collector_time(seconds: list):
    """A ``gc.callbacks`` entry adding each collection's duration to ``seconds[0]``."""
    started = [0.0]

    def callback(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            seconds[0] += time.perf_counter() - started[0]

    return callback


def child(
    index: int, dtype: str, stages: bool, profile: int, cold: bool, after: str = ""
) -> None:
    """One measurement in this (fresh) process, printed as a JSON line."""
    import gc

    import numpy as np
    from workloads import WORKLOADS

    import ppto
    from ppto.transform import pipeline

    workload = WORKLOADS[index]
    rng = np.random.default_rng(0)
    start_up = 0.0
    if after:  # (run.py's order: start-up, then the rows before this one)
        start_up = 0.0 if cold else _start_up()
        _run_before(after, rng)
    args = workload.make(rng, dtype)
    workload.hand(*args)  # (the heap warmed for the first call, as in run.py)
    if not cold and not after:
        start_up = _start_up()
    totals: dict = {}
    stack: list = []
    if stages:
        _install_timers(totals, stack)
    building = _timing("transform", pipeline.build, totals, [])
    pipeline_build, pipeline.build = pipeline.build, building
    import ppto.api

    ppto.api.build = building
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    collecting = [0.0]
    gc.callbacks.append(_collector_time(collecting))
    start, cpu = time.perf_counter(), time.thread_time()
    ppto.grad(workload.function, wrt=workload.wrt)(*args)
    first, cpu = time.perf_counter() - start, time.thread_time() - cpu
    gc.callbacks.pop()
    if profiler is not None:
        import pstats

        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(profile)
        stats.sort_stats("cumulative").print_stats(profile)
    pipeline.build = ppto.api.build = pipeline_build
    transform = totals.pop("transform")
    if stages:
        totals["other"] = first - sum(totals.values())
    report = {"first": first, "transform": transform, "start_up": start_up}
    report.update(cpu=cpu, gc=collecting[0])
    print(json.dumps({**report, "stages": totals}))


def _measure(index: int, dtype: str, options) -> dict:
    command = [sys.executable, __file__, "--child", str(index), dtype]
    command += ["--stages"] * options.stages + ["--cold"] * options.cold
    command += ["--after", options.after] * bool(options.after)
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(runs: list, key: str, stage: str | None = None) -> float:
    if stage is None:
        return 1e3 * statistics.median(run[key] for run in runs)
    return 1e3 * statistics.median(run["stages"].get(stage, 0.0) for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per workload")
    parser.add_argument("--only", default="", help="workload letters, e.g. 'ab'")
    parser.add_argument("--dtype", default="", help="float64 or float32 (default: "
                        "each workload's first)")  # fmt: skip
    parser.add_argument("--stages", action="store_true", help="per-stage breakdown")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print cProfile's top N functions of one run")  # fmt: skip
    parser.add_argument("--cold", action="store_true", help="no start-up first")
    parser.add_argument("--after", default="", metavar="LETTERS",
                        help="run these workloads first (run.py --quick)")  # fmt: skip
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        index, dtype = int(options.child[0]), options.child[1]
        child(index, dtype, options.stages, options.profile, options.cold,
              options.after)  # fmt: skip
        return
    from workloads import WORKLOADS

    stage_names = [*STAGES, "other"] if options.stages else []
    header = f"{'workload':24s} {'dtype':8s} {'start-up ms':>11s} "
    header += f"{'transform ms':>12s} {'first ms':>9s} {'cpu ms':>7s} {'gc ms':>6s}"
    header += "".join(f" {stage:>9s}" for stage in stage_names)
    print(f"median of {options.runs} fresh process(es) per row", end="")
    print(f", each after workloads {options.after}" if options.after else "")
    print(header)
    print("-" * len(header))
    for index, workload in enumerate(WORKLOADS):
        if options.only and workload.name[0] not in options.only:
            continue
        dtype = options.dtype or workload.dtypes[0]
        if dtype not in workload.dtypes:
            continue
        runs = [_measure(index, dtype, options) for _ in range(options.runs)]
        line = (
            f"{workload.name:24s} {dtype:8s} {_median(runs, 'start_up'):11.1f} "
            f"{_median(runs, 'transform'):12.1f} {_median(runs, 'first'):9.1f} "
            f"{_median(runs, 'cpu'):7.1f} {_median(runs, 'gc'):6.1f}"
        )
        line += "".join(f" {_median(runs, '', s):9.1f}" for s in stage_names)
        print(line, flush=True)
        if options.profile:
            command = [sys.executable, __file__, "--child", str(index), dtype]
            command += ["--profile", str(options.profile)] + ["--cold"] * options.cold
            command += ["--after", options.after] * bool(options.after)
            done = subprocess.run(
                command, cwd=ROOT, capture_output=True, text=True, check=True
            )
            print(done.stderr)


if __name__ == "__main__":
    main()
