"""Instructions of each benchmark workload's first gradient call, less the run of
its generated code: the transform, fusion, lowering and compiling, counted by
callgrind. Counts hardly move between runs (hash seeds: about 0.3%), so a change to
the transform can be measured on a shared machine whose load makes times useless.

Run: ``python tools/count_first_call.py`` (``--only cd`` some workloads; needs
valgrind; each workload takes about a minute). Each count comes from a fresh process
under ``valgrind --tool=callgrind`` that first differentiates one small unrelated
function, as ``tools/first_call.py`` does (start-up is not counted). Collection is
off at start; entering ``itertools.starmap``'s iterator around the first call turns
it on, and ``itertools.dropwhile``'s around each call of generated code turns it off
meanwhile (ppto uses neither). One thread (``PPTO_NUM_THREADS=1``): a worker's
instructions would count whatever the main thread's state.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from itertools import dropwhile, starmap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _uncounted(function):
    """``function``, its calls run inside ``dropwhile``'s iterator (uncounted)."""

    def run(*args, **kwargs):
        results = []
        next(dropwhile(lambda _: results.append(function(*args, **kwargs)), [0]), None)
        return results[0]

    return run


def child(index: int, dtype: str) -> None:
    """The measured first call, in this process (under callgrind)."""
    import numpy as np
    from workloads import WORKLOADS

    import ppto
    from ppto import api
    from ppto.fusion import tuning

    choose = tuning.FusionChoice.__init__

    def choice(self, name, make, first):  # each way's code runs uncounted
        made = {way: (lambda m=m: _uncounted(m())) for way, m in make.items()}
        choose(self, name, made, first)

    tuning.FusionChoice.__init__ = choice
    enter = api.Transformed._enter

    def entering(entry, device, values, keywords):
        if not isinstance(entry, tuning.FusionChoice):  # (it lowers when called)
            entry = _uncounted(entry)
        return enter(entry, device, values, keywords)

    api.Transformed._enter = staticmethod(entering)
    workload = WORKLOADS[index]
    args = workload.make(np.random.default_rng(0), dtype)
    workload.hand(*args)
    ppto.grad(lambda x: np.sum(np.tanh(x) * x))(np.linspace(-1.0, 1.0, 5))
    gradient = ppto.grad(workload.function, wrt=workload.wrt)
    list(starmap(lambda: gradient(*args), [()]))


def count(index: int, dtype: str) -> int:
    with tempfile.TemporaryDirectory() as folder:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=starmap_next",
            "--toggle-collect=dropwhile_next",
            f"--callgrind-out-file={folder}/callgrind.out",
            sys.executable,
            __file__,
            "--child",
            str(index),
            dtype,
        ]
        environment = dict(os.environ, PPTO_NUM_THREADS="1")
        done = subprocess.run(
            command, cwd=ROOT, env=environment, capture_output=True, text=True
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="workload letters, e.g. 'cd'")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(int(options.child[0]), options.child[1])
        return
    from workloads import WORKLOADS

    print(f"{'workload':24s} {'dtype':8s} {'instructions':>14s}")
    for index, workload in enumerate(WORKLOADS):
        if options.only and workload.name[0] not in options.only:
            continue
        dtype = workload.dtypes[0]
        print(f"{workload.name:24s} {dtype:8s} {count(index, dtype):14,d}", flush=True)


if __name__ == "__main__":
    main()
