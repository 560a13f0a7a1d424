"""The ``ppto`` command: ``ppto grad FILE::FUNC`` prints a function's generated
backward source, ``ppto ops`` lists the operators with their signatures and gradients.

Problems the user can fix (a missing file or function, code ppto cannot differentiate)
print one clear message to stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import ppto
from ppto.errors import PptoError
from ppto.ops.show import grad_text, signature_text

USAGE_ERROR = 2
GRAD_WIDTH = 50  # a longer gradient is cut; ppto.show_op(op) prints it in full


class CommandError(Exception):
    """A problem with the command's input, reported as one line on stderr."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ppto`` command line and return its exit status.

    >>> main(["grad", "model.py::loss", "--wrt", "w"])  # doctest: +SKIP
    def loss_grad(x, w):
        ...
    0
    """
    parser = _parser()
    options = parser.parse_args(argv)
    try:
        return options.run(options)
    except BrokenPipeError:  # ``ppto ops | head``: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CommandError as error:
        print(f"ppto {options.command}: {error}", file=sys.stderr)
    except PptoError as error:
        message = error.msg if isinstance(error, SyntaxError) else str(error)
        print(
            f"ppto {options.command}: {type(error).__name__}: {message}",
            file=sys.stderr,
        )
    return USAGE_ERROR


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ppto",
        description="ppto: tensors, operators and source-to-source differentiation.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    grad = commands.add_parser(
        "grad",
        help="print the generated backward source of a function",
        description="Print the source ppto generates for the gradient of FUNC, "
        "defined in FILE (the same text as ppto.show_grad).",
    )
    grad.add_argument(
        "target", metavar="FILE::FUNC", help="a Python file and a function in it"
    )
    grad.add_argument(
        "--wrt",
        nargs="+",
        metavar="NAME_OR_INDEX",
        help="the parameters to differentiate with respect to (default: 0)",
    )
    grad.set_defaults(run=_grad)
    ops = commands.add_parser(
        "ops",
        help="list the operators with their signatures and gradients",
        description="One line per operator: name, signature and gradient rule.",
    )
    ops.set_defaults(run=_ops)
    return parser


# --- ppto grad ------------------------------------------------------------------------


def _grad(options: argparse.Namespace) -> int:
    path, function_name = _split_target(options.target)
    module = _load_module(path)
    function = _find_function(module, function_name, path)
    _refuse_self_by_default(module, function_name, path, options.wrt is not None)
    wrt = [int(item) if _is_index(item) else item for item in options.wrt or ["0"]]
    ppto.show_grad(
        function, wrt=wrt[0] if len(wrt) == 1 else tuple(wrt), file=sys.stdout
    )
    return 0


def _split_target(target: str) -> tuple[Path, str]:
    file_name, separator, function_name = target.rpartition("::")
    if not separator or not file_name or not function_name:
        raise CommandError(
            f"expected FILE::FUNC, such as model.py::loss, but got {target!r}"
        )
    return Path(file_name), function_name


def _load_module(path: Path) -> ModuleType:
    """Import ``path`` as a module (not as ``__main__``), so its functions' source is
    available to ppto and its sibling imports work as when running it."""
    if not path.is_file():
        raise CommandError(f"no such file: {path}")
    name = f"_ppto_cli_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CommandError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise CommandError(
            f"importing {path} failed: {type(error).__name__}: {error}"
            f"{_where_it_failed(error, path)}"
        ) from error
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module


def _where_it_failed(error: Exception, path: Path) -> str:
    """`` (file, line N)`` of the file's own line that raised ``error`` (the
    innermost frame was importlib's for a SyntaxError, which names its line
    itself, and a library's for an error inside one)."""
    if isinstance(error, SyntaxError):
        return ""
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if Path(f.filename).resolve() == path.resolve()]
    frame = (own or frames)[-1]
    return f" ({frame.filename}, line {frame.lineno})"


def _find_function(module: ModuleType, dotted_name: str, path: Path):
    value = module
    for part in dotted_name.split("."):
        if not hasattr(value, part):
            raise CommandError(
                f"{path} has no function {dotted_name!r}"
                + _suggest(dotted_name, _functions_of(module))
            )
        value = getattr(value, part)
    if not callable(value):
        raise CommandError(
            f"{path}::{dotted_name} is not a function but the "
            f"{type(value).__name__} {value!r}"
        )
    return value


def _refuse_self_by_default(module, dotted_name: str, path: Path, given: bool):
    """``K.method`` names a method through its class: its first parameter, the
    default ``--wrt``, is ``self`` (a gradient with respect to the object). Unless
    ``--wrt`` was given, say how to name it through an object (whose method is
    differentiated with that object as self) or which parameter to give."""
    *owner, method = dotted_name.split(".")
    cls = module
    for part in owner:
        cls = getattr(cls, part)
    if given or not owner or not isinstance(cls, type):
        return
    if isinstance(inspect.getattr_static(cls, method, None), staticmethod):
        return
    objects = sorted(n for n, v in vars(module).items() if isinstance(v, cls))
    named = f" ({path}::{objects[0]}.{method})" if objects else ""
    raise CommandError(
        f"{path}::{dotted_name} is a method named through its class {cls.__name__}, "
        f"so its first parameter is self: name it through an object of the "
        f"class{named}, or give --wrt with the parameter to differentiate"
    )


def _functions_of(module: ModuleType) -> list[str]:
    return sorted(
        name
        for name, item in vars(module).items()
        if callable(item) and getattr(item, "__module__", None) == module.__name__
    )


def _suggest(name: str, candidates: list[str], shown: int = 8) -> str:
    close = difflib.get_close_matches(name, candidates, n=3)
    if close:
        return f"; did you mean {' or '.join(close)}?"
    if not candidates:
        return "; it defines no functions"
    more = f" and {len(candidates) - shown} more" if len(candidates) > shown else ""
    return f"; it defines {', '.join(candidates[:shown])}{more}"


def _is_index(text: str) -> bool:
    return text.removeprefix("-").isdigit()


# --- ppto ops -------------------------------------------------------------------------


def _ops(options: argparse.Namespace) -> int:
    rows = []
    for name, op in sorted(ppto._OPERATORS.items()):
        inputs, output = signature_text(op)
        rows.append((name, f"{inputs} -> {output}", f"grad: {_shorten(grad_text(op))}"))
    name_width = max(len(row[0]) for row in rows)
    signature_width = max(len(row[1]) for row in rows)
    for name, signature, grad in rows:
        print(f"{name:<{name_width}}  {signature:<{signature_width}}  {grad}")
    return 0


def _shorten(text: str) -> str:
    return text if len(text) <= GRAD_WIDTH else text[: GRAD_WIDTH - 1] + "…"
