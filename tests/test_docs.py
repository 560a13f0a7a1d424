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


def test_the_demo_runs_and_its_checks_hold():
    """The README's first command runs examples/demo.py: it must run, train, and
    pass its own checks (gradient against central differences, the dict and
    Jacobian sections)."""
    import subprocess
    import sys
    from pathlib import Path

    demo = Path(__file__).resolve().parents[1] / "examples" / "demo.py"
    run = subprocess.run(
        [sys.executable, str(demo)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "largest relative difference over dW1" in run.stdout
    assert "dW1 agrees with the one above: True" in run.stdout
    assert "columns sum to zero (the outputs sum to 1): True" in run.stdout
    accuracies = [
        float(line.split("accuracy")[1])
        for line in run.stdout.splitlines()
        if "accuracy" in line
    ]
    assert accuracies[-1] >= 0.9


def test_the_readme_states_the_number_of_fusion_rules():
    import re

    import ppto

    text = (ROOT / "README.md").read_text()
    count = len(ppto.fusion_rules())
    assert re.findall(r"(\d+) built-in rules \(`ppto.fusion_rules\(\)`\)", text) == [
        str(count)
    ]
    from ppto.transform.fuse import implementation_for

    on_cuda = [rule for rule in ppto.fusion_rules() if implementation_for(rule, "cuda")]
    assert re.findall(r"(\d+) of\s+them have CUDA kernels", text) == [str(len(on_cuda))]


def test_the_readme_states_the_number_of_primitives():
    import re

    from ppto.ops.primitive import OPERATORS, Primitive

    text = (ROOT / "README.md").read_text()
    count = sum(  # (ppto's own: tests register operators of their own)
        isinstance(op, Primitive) and op.impl.__module__.startswith("ppto.")
        for op in OPERATORS.values()
    )
    assert re.findall(r"\*\*Operators\*\*: (\d+) primitives", text) == [str(count)]
