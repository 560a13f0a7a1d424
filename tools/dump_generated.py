"""Dump the source ppto generates for every corpus function, golden case and
benchmark workload, to check that a change to the transform keeps its output
byte-identical:

    python tools/dump_generated.py before.txt   # (on the commit before the change)
    python tools/dump_generated.py after.txt
    diff before.txt after.txt                   # nothing: the same code

Each function is shown in reverse mode (its gradient; vjp's forward/backward pair
where the result is not a scalar), as its normalized primal and in forward mode
(jvp), each generic, fused, lowered for the CPU and both; an error is dumped as its
type and message (a change must keep those too).
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

from ppto import api  # noqa: E402
from tests import golden_cases  # noqa: E402
from tests.corpus.checks import CASES  # noqa: E402

MODES = ("combined", "primal", "jvp")
VIEWS = ((False, False), (False, True), (True, False), (True, True))  # lowered, fused


def functions():
    """``(label, function, arguments, wrt)`` of every function dumped."""
    for case in CASES:
        yield f"corpus {case.id}", case.fn, case.arguments(), case.wrt
    for case in golden_cases.CASES:
        yield f"golden {case.name}", case.function, case.args, case.wrt
    for workload in WORKLOADS:
        arguments = workload.make(np.random.default_rng(0), workload.dtypes[0])
        yield f"workload {workload.name}", workload.function, arguments, workload.wrt


def shown(function, arguments, wrt, mode: str, lowered: bool, fused: bool) -> str:
    try:
        return api._show(function, arguments, wrt, mode, io.StringIO(), lowered, fused)
    except Exception as error:  # (the same error before and after is the same)
        return f"{type(error).__name__}: {error}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="file to write the dump to")
    options = parser.parse_args()
    sections, count = [], 0
    for label, function, arguments, wrt in functions():
        count += 1
        for mode in MODES:
            for lowered, fused in VIEWS:
                text = shown(function, arguments, wrt, mode, lowered, fused)
                heading = f"### {label} | {mode} | lowered={lowered} fused={fused}"
                sections.append(f"{heading}\n{text}")
    Path(options.output).write_text("\n".join(sections))
    print(f"{count} functions, {len(sections)} sources written to {options.output}")


if __name__ == "__main__":
    main()
