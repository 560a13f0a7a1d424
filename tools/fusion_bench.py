"""Fusion evidence: unfused vs fused ppto gradients vs hand-written NumPy, one process.

Run: ``python tools/fusion_bench.py`` (``--quick`` for fewer repetitions). For the
elementwise chain ``sum(tanh(x*y + z) * exp(-x))`` at 1e6 elements, the two-layer MLP,
logsumexp over 1000x1000 and a ResNet basic block on 16x16x16x32 NHWC images with its
classifier (examples/resnet_block.py; float64 and float32) it prints the operator
count of the generated gradient before and after fusion, the median time of unfused
ppto, fused ppto and the hand-written NumPy gradient, and the ratios to NumPy against
the targets (chain <= 0.5x, MLP and logsumexp <= 1.0x; the block has none). Unfused
means precision 'strict', which turns fusion off; fused means ``PPTO_FUSION=on``, set
here (by default ppto times the fused and unfused code on a gradient's first calls and
keeps the faster, so the fused column could otherwise be either).

``--device cuda`` runs the same on a GPU (the arguments and the hand-written gradient
on CuPy, each call waited for), checking every gradient against NumPy's on the CPU
first: the fused CUDA kernels' evidence. Without CuPy and a GPU it says so and fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from others import rebound  # noqa: E402
from residual_block import RESIDUAL_BLOCK  # noqa: E402
from run import WARM_UP_CALLS, check, median_times, steady_heap  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import ppto  # noqa: E402

TARGETS = {"a": 1.0, "b": 1.0, "c": 0.5, "r": None}  # (None: timed, not judged)
os.environ["PPTO_FUSION"] = "on"  # the fused column runs fused code (see above)


def unfused(gradient):
    """``gradient`` run with fusion off (precision 'strict')."""

    def run(*args):
        previous = ppto.set_precision("strict")
        try:
            return gradient(*args)
        finally:
            ppto.set_precision(previous)

    return run


class Device:
    """Where a run's arrays live: ``move`` puts arrays there, ``finished`` waits for
    the work queued there, ``host`` brings results back, ``hand`` rebinds a
    hand-written gradient to the device's NumPy."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "cpu":
            self.xp = np
            return
        try:
            import cupy

            cupy.cuda.runtime.getDeviceCount()
        except Exception as error:  # no CuPy, no driver or no GPU
            raise SystemExit(f"--device {name} needs CuPy and a GPU: {error}") from None
        self.xp = cupy

    def move(self, args: tuple) -> tuple:
        return tuple(self.xp.asarray(a) for a in args)

    def finished(self, function):
        if self.xp is np:
            return function

        def run(*args):
            result = function(*args)
            self.xp.cuda.get_current_stream().synchronize()
            return result

        return run

    def host(self, values) -> list:
        return [
            v.numpy() if isinstance(v, ppto.Tensor) else self.xp.asnumpy(v)
            if self.xp is not np else np.asarray(v)
            for v in values
        ]  # fmt: skip

    def hand(self, workload):
        return workload.hand if self.xp is np else rebound(workload.hand, self.xp)


def run(quick: bool, device_name: str = "cpu") -> int:
    device = Device(device_name)
    rng = np.random.default_rng(0)
    repeats = 5 if quick else 41
    header = (
        f"{'workload':22s} {'dtype':8s} {'ops':>4s} {'fused':>5s} "
        f"{'unfused ms':>10s} {'fused ms':>9s} {'numpy ms':>9s} "
        f"{'unfused/np':>10s} {'fused/np':>8s} {'target':>6s}  ok"
    )
    print(header)
    print("-" * len(header))
    misses = 0
    for workload in [*WORKLOADS, RESIDUAL_BLOCK]:
        if workload.name[0] not in TARGETS:
            continue
        for dtype in workload.dtypes:
            cpu_args = workload.make(rng, dtype)
            _, hand = workload.hand(*cpu_args)  # NumPy's, on the CPU: the reference
            args = device.move(cpu_args)
            gradient = ppto.grad(workload.function, wrt=workload.wrt)
            before, after = gradient.operator_counts(*args)
            # (a grad object of its own: calls at another precision would each
            # replace the fused one's record of its last call, see
            # ppto/repeated_call.py, and send it the slower keyed way)
            plain = unfused(ppto.grad(workload.function, wrt=workload.wrt))
            theirs = device.hand(workload)
            for function in (plain, gradient, lambda *a: theirs(*a)[1]):
                check(device.host(function(*args)), hand, dtype)  # before timing
            functions = [device.finished(f) for f in (plain, gradient, theirs)]
            if not quick:  # the steady state, as benchmarks/run.py times it: a
                # fused kernel's first calls time its ways (kernels._Plan.run)
                median_times(functions, args, WARM_UP_CALLS)
            times = median_times(functions, args, repeats)
            check(device.host(gradient(*args)), hand, dtype)  # after its first calls
            unfused_ms, fused, numpy = (t * 1e3 for t in times)
            target = TARGETS[workload.name[0]]
            ok = target is None or fused / numpy <= target
            misses += not ok
            judged = (
                "     -   -"
                if target is None
                else f"{target:6.2f}  " + ("yes" if ok else "NO")
            )
            print(
                f"{workload.name:22s} {dtype:8s} {before:4d} {after:5d} "
                f"{unfused_ms:10.2f} {fused:9.2f} {numpy:9.2f} "
                f"{unfused_ms / numpy:10.2f} {fused / numpy:8.2f} {judged}"
            )
    where = "" if device.name == "cpu" else f" on {device.name}"
    print(f"\nmedians of {repeats} calls{where}; {misses} row(s) miss their target")
    return misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--system-heap", action="store_true", help="keep glibc's heap defaults"
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu (default) or cuda: where the arrays live"
    )
    arguments = parser.parse_args()
    print(steady_heap(arguments.system_heap))  # see benchmarks/run.py
    run(arguments.quick, arguments.device)


if __name__ == "__main__":
    main()
