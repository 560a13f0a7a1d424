"""``python -m ppto.debug.memcheck``: allocations and retention per operator and
call site, for a script run as ``__main__``."""

import subprocess
import sys

import numpy as np
import pytest

import ppto
from ppto.debug import memcheck

LEAKY = """\
import sys
import numpy as np
import ppto

W = ppto.tensor(np.ones((32, 16)))
history = []


def loss(W, x):
    return np.sum(np.tanh(x @ W) ** 2)


for step in range(int(sys.argv[1])):
    x = ppto.tensor(np.full((8, 32), 0.01 * step))
    h = ppto.relu(ppto.dot(x, W))
    history.append(h)
    W = W - 0.01 * ppto.grad(loss)(W, x)
"""


def line_of(text: str) -> str:
    """``train.py:N`` of the line of LEAKY containing ``text``."""
    number = next(n for n, line in enumerate(LEAKY.splitlines(), 1) if text in line)
    return f"train.py:{number}"


def blocks(text: str) -> dict:
    """Report blocks by operator and call stack's first line number."""
    found = {}
    for block in text.split("[Memory Report]")[1:]:
        fields = dict(
            line.split(" : ", 1) for line in block.strip().splitlines() if " : " in line
        )
        found[(fields["Operator"], fields["Call Stack"].split(" in ")[0])] = fields
    return found


def test_a_growing_list_shows_as_retention(tmp_path, capsys, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(LEAKY)
    monkeypatch.chdir(tmp_path)
    assert memcheck.main([str(script), "4"]) == 0
    report = blocks(capsys.readouterr().out)
    relu = report[("Relu", line_of("ppto.relu"))]  # appended to history each step
    assert relu["Retention Count"] == "4 (should be <=1), holding 4KB"
    assert relu["Allocation Size"] == "1KB"  # 8 x 16 float64
    assert relu["Allocations"] == "4 (total 4KB)"
    gradient = report[("Grad(loss)", line_of("ppto.grad"))]
    assert gradient["Allocation Size"] == "4KB"  # 32 x 16 float64
    assert gradient["Retention Count"] == "0"  # used, then dropped
    assert report[("Sub", line_of("W = W -"))]["Retention Count"] == "1, holding 4KB"
    assert report[("Dot", line_of("ppto.dot"))]["Retention Count"] == "0"


def test_a_script_ending_in_sys_exit_still_holds_its_variables(
    tmp_path, capsys, monkeypatch
):
    # the report was printed after the SystemExit (and its traceback, the only
    # reference left to the script's variables) was dropped: every count was 0
    # (unless a function of the script kept its globals alive in a cycle)
    script = tmp_path / "exits.py"
    script.write_text(
        "import sys\nimport ppto\nkept = []\nfor step in range(3):\n"
        "    kept.append(ppto.exp(ppto.ones(4)))\nsys.exit(0)\n"
    )
    monkeypatch.chdir(tmp_path)
    assert memcheck.main([str(script)]) == 0
    report = blocks(capsys.readouterr().out)
    exp = report[("Exp", "exits.py:5")]
    assert exp["Retention Count"] == "3 (should be <=1), holding 96B"


def test_operators_are_named_as_the_seeds_report_names_them():
    # the seed's report reads "Operator : Conv2D"; ppto wrote Conv2d (and MaxPool2d)
    image = ppto.tensor(np.ones((1, 1, 4, 4)))
    with memcheck.tracking() as report:
        kept = ppto.max_pool2d(ppto.conv2d(image, np.ones((2, 1, 3, 3)), padding=1), 2)
    assert {site.operator for site in report.sites.values()} == {"Conv2D", "MaxPool2D"}
    assert kept.shape == (1, 2, 2, 2)
    assert ppto.show_op(ppto.conv2d).startswith("Operator: Conv2D\n")


def test_the_suspicious_site_is_reported_first(tmp_path, capsys, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(LEAKY)
    monkeypatch.chdir(tmp_path)
    memcheck.main([str(script), "3"])
    text = capsys.readouterr().out
    assert text.startswith("[Memory Report]\nOperator : Relu\n")


def test_tracking_inside_a_program_and_release():
    x = ppto.tensor(np.ones(1000))
    with memcheck.tracking() as report:
        kept = ppto.exp(x)  # made once, still held: not suspicious
        for _ in range(3):
            ppto.tanh(x)  # each result dropped at once
    (exp,) = [s for s in report.sites.values() if s.operator == "Exp"]
    (tanh,) = [s for s in report.sites.values() if s.operator == "Tanh"]
    assert (exp.live, exp.allocations, exp.suspicious()) == (1, 1, False)
    assert (tanh.live, tanh.allocations, tanh.peak_live) == (0, 3, 1)
    assert tanh.largest_bytes == 8000 and tanh.total_bytes == 24000
    assert exp.stack[0][0] == __file__
    del kept
    assert exp.live == 0


def test_exit_status_and_a_failing_script(tmp_path, capsys):
    exits = tmp_path / "exits.py"
    exits.write_text(
        "import sys\nimport ppto\nppto.exp(ppto.tensor([1.0]))\nsys.exit(3)\n"
    )
    assert memcheck.main([str(exits)]) == 3
    assert "Operator : Exp" in capsys.readouterr().out
    fails = tmp_path / "fails.py"
    fails.write_text("import ppto\nkept = ppto.exp(ppto.tensor([1.0]))\n1 / 0\n")
    with pytest.raises(ZeroDivisionError):
        memcheck.main([str(fails)])
    assert "Operator : Exp" in capsys.readouterr().out  # reported before the error


def test_readable_sizes():
    assert [memcheck.readable(n) for n in (512, 1536, 256 * 2**20, 3 * 2**30)] == [
        "512B",
        "1.5KB",
        "256MB",
        "3GB",
    ]


def test_the_module_runs_from_the_command_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEAKY)
    done = subprocess.run(
        [sys.executable, "-m", "ppto.debug.memcheck", "--top", "1", str(script), "2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("[Memory Report]") == 1
    assert "Retention Count : 2 (should be <=1)" in done.stdout
    assert f"Call Stack : {line_of('ppto.relu')} in <module>" in done.stdout


def test_exit_codes_and_arguments_as_python_gives_them(tmp_path, capsys):
    # sys.exit() gave 1 (0 under python), a message was lost, a "--" dropped
    script = tmp_path / "exits.py"
    script.write_text(
        "import sys\nprint(sys.argv[1:])\nsys.exit(sys.argv[1] or None)\n"
    )
    assert memcheck.main([str(script), ""]) == 0
    assert memcheck.main([str(script), "fatal: bad config"]) == 1
    assert "fatal: bad config" in capsys.readouterr().err
    memcheck.main([str(script), "", "--", "-x"])
    assert "['', '--', '-x']" in capsys.readouterr().out


def test_views_allocate_nothing_and_other_results_are_recorded():
    x = ppto.tensor(np.ones((100, 100)))

    def loss(v):
        return ppto.reduce_sum(v * v)

    with memcheck.tracking() as report:
        views = [ppto.reshape(x, (-1,)) for _ in range(3)]
        flipped = ppto.transpose(x)
        _, pullback = ppto.vjp(loss, x)
        (gradient,) = pullback(ppto.tensor(1.0))
        _, tangent = ppto.jvp(loss, (x,), (x,))
    operators = {site.operator for site in report.sites.values()}
    assert "Reshape" not in operators and "Transpose" not in operators
    assert {"Vjp(loss)", "Jvp(loss)"} <= operators
    del views, flipped, gradient, tangent


def test_a_call_making_two_results_is_not_a_leak(tmp_path, capsys, monkeypatch):
    # jvp's value and tangent were one site retaining 2 "(should be <=1)"
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "forward.py"
    script.write_text(
        "import numpy as np\nimport ppto\n\n\ndef g(v):\n"
        "    return ppto.reduce_sum(v * v)\n\n\nx = ppto.tensor(np.ones(4))\n"
        "for _ in range(3):\n    out, t = ppto.jvp(g, (x,), (x,))\n"
        "h = ppto.hessian(g)(x)\n"
    )
    assert memcheck.main(["--top=20", "--", str(script)]) == 0
    report = blocks(capsys.readouterr().out)
    jvp = report[("Jvp(g)", "forward.py:11")]
    assert jvp["Retention Count"].startswith("2,")  # one call's two results
    assert jvp["Allocations"].startswith("6 ")  # hessian's own jvp calls not counted
    assert report[("Hessian(g)", "forward.py:12")]["Allocations"].startswith("1 ")


def test_no_script_prints_the_usage_and_exits_2(tmp_path, capsys):
    for argv in ([], ["--top", "3"], [str(tmp_path / "missing.py")]):
        assert memcheck.main(argv) == 2
        error = capsys.readouterr().err
        assert error.startswith("usage: python -m ppto.debug.memcheck")
        assert "no script" in error
