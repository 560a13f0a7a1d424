"""The examples in ppto's docstrings run and print what they say. They run in a
separate process: some register operators, backends or fusion rules."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNNER = """
import doctest, importlib, pathlib, sys
import numpy as np
import ppto

failed = attempted = 0
for path in sorted(pathlib.Path("ppto").rglob("*.py")):
    if ">>>" not in path.read_text():
        continue
    name = ".".join(path.with_suffix("").parts).removesuffix(".__init__")
    module = importlib.import_module(name)
    result = doctest.testmod(
        module,
        extraglobs={"np": np, "ppto": ppto},
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    failed += result.failed
    attempted += result.attempted
print(f"attempted={attempted} failed={failed}")
sys.exit(1 if failed else 0)
"""


def test_docstring_examples_run():
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    attempted = int(done.stdout.rsplit("attempted=", 1)[1].split()[0])
    assert attempted >= 25  # the examples were found, not skipped
