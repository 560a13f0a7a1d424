"""Regenerate the golden files: ``golden/<case>.txt`` holds the backward source ppto
generates for each case in ``tests/golden_cases.py``.

    python tools/regen_golden.py           # rewrite the files, delete stale ones
    python tools/regen_golden.py --check   # exit 1 with a diff if any file differs

A golden change is reviewed like code: read the diff before committing it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import golden_cases  # noqa: E402
from tests.golden_cases import CASES, REGENERATE, golden_diff  # noqa: E402


def stale_files() -> list[Path]:
    """Golden files whose case no longer exists."""
    wanted = {case.path for case in CASES}
    return sorted(
        path for path in golden_cases.GOLDEN_DIR.glob("*.txt") if path not in wanted
    )


def check() -> int:
    problems = []
    for case in CASES:
        actual = case.render()
        expected = case.path.read_text() if case.path.exists() else ""
        if actual != expected:
            problems.append(golden_diff(expected, actual, case.path))
    problems += [f"stale golden file: {path}\n" for path in stale_files()]
    if problems:
        print("".join(problems), end="")
        print(f"{len(problems)} golden file(s) differ; regenerate with: {REGENERATE}")
        return 1
    print(f"{len(CASES)} golden files match")
    return 0


def regenerate() -> int:
    golden_cases.GOLDEN_DIR.mkdir(exist_ok=True)
    changed = 0
    for case in CASES:
        actual = case.render()
        if not case.path.exists() or case.path.read_text() != actual:
            case.path.write_text(actual)
            print(f"wrote {case.path.relative_to(golden_cases.GOLDEN_DIR.parent)}")
            changed += 1
    for path in stale_files():
        path.unlink()
        print(f"deleted {path.relative_to(golden_cases.GOLDEN_DIR.parent)}")
        changed += 1
    print(f"{len(CASES)} golden files, {changed} changed")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare instead of writing; exit 1 with a diff on any difference",
    )
    options = parser.parse_args(argv)
    return check() if options.check else regenerate()


if __name__ == "__main__":
    raise SystemExit(main())
