"""What ``import ppto`` leaves behind in the process: the cyclic garbage collector
settled (one full collection at the end of the import, so that the next one does not
fall inside some gradient's first call), unless the program turned it off."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _counts_after_import(before: str) -> tuple:
    """``gc.get_count()`` right after ``import ppto`` in a fresh process that first
    ran ``before``."""
    code = f"import gc\n{before}\nimport ppto\nprint(tuple(gc.get_count()))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_import_ends_with_a_full_collection():
    # a full collection zeroes the counts of generations 1 and 2 (collections of
    # the younger generation since): without it the import leaves them near the
    # thresholds (10, 10) at which the next full collection comes
    assert _counts_after_import("")[1:] == (0, 0)


def test_import_leaves_a_disabled_collector_alone():
    # no collection: the count of new objects keeps every one the import made
    assert _counts_after_import("gc.disable()")[0] > 5000
