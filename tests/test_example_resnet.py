"""examples/resnet_block.py runs: fusion shrinks the block's forward and gradient
code, the fused forward pass is the rules' kernels, and the fused gradient agrees
with central differences."""

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "resnet_block.py"


def test_the_resnet_block_example_runs_and_its_checks_hold():
    finished = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr
    out = finished.stdout
    found = dict(re.findall(r"(forward pass|gradient):\s+(\d+ -> +\d+)", out))
    counts = {key: [int(n) for n in value.split("->")] for key, value in found.items()}
    assert set(counts) == {"forward pass", "gradient"}
    # (the forward pass: two convolutions, three CNN kernels, the classifier)
    assert counts["forward pass"][1] * 2 < counts["forward pass"][0]
    assert counts["gradient"][1] < counts["gradient"][0]
    for kernel in ("batch_norm_maximum_nhwc", "batch_norm_nhwc",
                   "global_pool_of_relu_sum", "matmul_bias"):  # fmt: skip
        assert f"= __fused_{kernel}(" in out
    differences = [float(d) for d in re.findall(r"relative difference (\S+)", out)]
    assert len(differences) == 9 and max(differences) < 1e-5
    value, numpy_value = re.search(r"Loss (\S+) \(NumPy: (\S+)\)", out).groups()
    assert value == numpy_value
