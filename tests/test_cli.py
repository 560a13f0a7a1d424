"""The ``ppto`` command line: ``grad`` prints show_grad's text, ``ops`` lists every
operator in aligned columns, and user mistakes exit with status 2 and one message on
stderr, never a traceback."""

import io
import os
import subprocess
import sys
import textwrap

import pytest

import ppto
from ppto.cli import main

MODEL = """\
import numpy as np


def loss(x, w):
    h = np.tanh(x @ w)
    return np.sum(h * h)


def with_lambda(x):
    doubles = [lambda v: v * 2.0]
    return np.sum(doubles[0](x))


LIMIT = 3


class Layer:
    def __init__(self, scale):
        self.scale = scale

    def forward(self, x):
        return np.sum(np.sin(x) * self.scale)


LAYER = Layer(2.0)
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def imported(name: str):
    """The function the CLI imported from tmp_path/model.py."""
    return getattr(sys.modules["_ppto_cli_model"], name)


def run_cli(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# --- ppto grad ------------------------------------------------------------------------


def test_grad_prints_show_grad_for_the_first_parameter(model, capsys):
    status, out, err = run_cli(capsys, "grad", f"{model}::loss")
    assert (status, err) == (0, "")
    assert out.startswith("def loss_grad(x, w):\n")
    assert out == ppto.show_grad(imported("loss"), wrt=0, file=io.StringIO()) + "\n"


@pytest.mark.parametrize(
    "wrt, expected",
    [(["w"], "w"), (["-1"], "w"), (["0", "w"], ("x", "w")), (["1", "x"], ("w", "x"))],
)
def test_grad_wrt_names_and_indices(model, capsys, wrt, expected):
    status, out, _ = run_cli(capsys, "grad", f"{model}::loss", "--wrt", *wrt)
    assert status == 0
    assert out == ppto.show_grad(imported("loss"), wrt=expected, file=io.StringIO()) + (
        "\n"
    )


def test_grad_of_a_function_ppto_cannot_differentiate(model, capsys):
    status, out, err = run_cli(capsys, "grad", f"{model}::with_lambda")
    assert (status, out) == (2, "")
    assert err.startswith(
        "ppto grad: TransformError: ppto cannot differentiate a lambda"
    )
    assert f'File "{model}", line 10' in err
    assert "Instead:" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "target, message",
    [
        ("missing.py::loss", "no such file: missing.py"),
        ("{model}::los", "has no function 'los'; did you mean loss?"),
        ("{model}::LIMIT", "is not a function but the int 3"),
        ("{model}", "expected FILE::FUNC"),
    ],
)
def test_grad_reports_user_mistakes_in_one_line(model, capsys, target, message):
    status, out, err = run_cli(capsys, "grad", target.format(model=model))
    assert (status, out) == (2, "")
    assert err.startswith("ppto grad: ") and message in err
    assert err.count("\n") == 1


def test_grad_of_a_method_named_through_its_class_or_an_object(model, capsys):
    """``Layer.forward`` differentiated with respect to its first parameter, self
    (zeros like the object); now it says to name it through an object, which is
    differentiated with that object as self, or to give --wrt."""
    status, out, err = run_cli(capsys, "grad", f"{model}::Layer.forward")
    assert (status, out) == (2, "")
    assert f"name it through an object of the class ({model}::LAYER.forward)" in err
    status, out, err = run_cli(capsys, "grad", f"{model}::LAYER.forward")
    assert (status, err) == (0, "") and "dx = dt1 * cos(x)" in out
    status, out, err = run_cli(capsys, "grad", f"{model}::Layer.forward", "--wrt", "x")
    assert (status, err) == (0, "") and out.startswith("def forward_grad(self, x):")


def test_grad_with_a_wrt_that_is_not_a_parameter(model, capsys):
    status, _, err = run_cli(capsys, "grad", f"{model}::loss", "--wrt", "b")
    assert status == 2
    assert "GradError: loss has no parameter named 'b'" in err


def test_grad_of_a_file_that_fails_to_import(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("def f(x):\n    return x\n\n\n1 / 0\n")
    status, _, err = run_cli(capsys, "grad", f"{path}::f")
    assert status == 2
    assert "importing" in err and "ZeroDivisionError" in err and "line 5" in err


def test_an_import_failure_names_the_files_own_line(tmp_path, capsys):
    # the innermost frame was named: importlib's "<frozen importlib._bootstrap>,
    # line 241" after a SyntaxError, NumPy's own file for an error inside NumPy
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def f(x):\n    return x +\n")
    _, _, err = run_cli(capsys, "grad", f"{syntax}::f")
    assert "SyntaxError" in err and "line 2" in err and "frozen" not in err
    library = tmp_path / "library.py"
    library.write_text("import numpy as np\n\nnp.zeros(-1)\n")
    _, _, err = run_cli(capsys, "grad", f"{library}::f")
    assert f"({library}, line 3)" in err


def test_grad_file_may_import_its_siblings(tmp_path, capsys):
    (tmp_path / "helpers.py").write_text("SCALE = 3.0\n")
    (tmp_path / "uses_helpers.py").write_text(
        textwrap.dedent(
            """\
            import numpy as np
            from helpers import SCALE


            def f(x):
                return np.sum(x * SCALE)
            """
        )
    )
    status, out, _ = run_cli(capsys, "grad", f"{tmp_path / 'uses_helpers.py'}::f")
    assert status == 0
    assert out.startswith("def f_grad(x):")
    assert str(tmp_path) not in sys.path


# --- ppto ops and --help --------------------------------------------------------------


def test_ops_lists_every_operator_sorted_with_aligned_columns(capsys):
    status, out, _ = run_cli(capsys, "ops")
    assert status == 0
    lines = out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == sorted(ppto._OPERATORS)
    assert len({line.index("  (") for line in lines}) == 1
    assert len({line.index("  grad: ") for line in lines}) == 1
    dot = lines[names.index("dot")]
    assert "(Tensor[M,K], Tensor[K,N]) -> Tensor[M,N]" in dot
    assert dot.endswith("grad: (δY @ B.T, A.T @ δY)")
    reduce_sum = lines[names.index("reduce_sum")]
    assert "(Tensor[...], axis=None, keepdims=False) -> Tensor[...]" in reduce_sum
    assert lines[names.index("floor")].endswith("grad: none (not differentiable)")


def test_ops_shortens_long_gradients(capsys):
    _, out, _ = run_cli(capsys, "ops")
    gelu = next(line for line in out.splitlines() if line.startswith("gelu "))
    assert gelu.endswith("…")
    assert len(gelu.split("grad: ")[1]) == 50


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert "grad" in out and "ops" in out


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as exit:
        main([])
    assert exit.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_python_dash_m_ppto_runs_the_command_line():
    environment = dict(os.environ, PYTHONUTF8="1")
    listing = subprocess.run(
        [sys.executable, "-m", "ppto", "ops"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines()[0].startswith("abs ")
    missing = subprocess.run(
        [sys.executable, "-m", "ppto", "grad", "missing.py::f"],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    assert missing.returncode == 2
    assert missing.stderr == "ppto grad: no such file: missing.py\n"
