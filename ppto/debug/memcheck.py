"""``python -m ppto.debug.memcheck script.py [args]``: which operators allocate, how
much, and what the script still holds when it ends.

The script runs as ``__main__`` (as ``python script.py [args]`` would run it) while
every tensor an operator returns, and every gradient that ``ppto.grad`` and its
relatives hand back, is recorded with its operator, its size and the script's own
line that made it (the innermost frame outside ppto). When the script ends, its
module's variables still alive, one ``[Memory Report]`` per allocation site says:

- the operator and the size of its largest result there;
- how many results it made there, and their total size;
- the **retention count**: how many of them are still alive. A site a loop runs
  more than once should retain at most one result (the one its variable holds);
  more means something keeps each iteration's result (a list that grows, a cache),
  which is how memory grows over a training run;
- the call stack: the script's frames, innermost first.

Sites are listed by the memory they retain, then by what they allocated.
``tracking()`` does the same inside a program: ``with tracking() as report: ...``
then ``print(report.text())``.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path

import ppto
from ppto.ops.primitive import OBSERVERS, camel_case
from ppto.runtime.tensor import Tensor

_PACKAGE = str(Path(ppto.__file__).resolve().parent) + os.sep
_RUNPY = runpy.__file__  # (how the script is started: not the script's own frames)


@dataclass
class Site:
    """The results one operator made at one place in the script."""

    operator: str
    stack: tuple  # (file, line, function) of the script's frames, innermost first
    allocations: int = 0
    total_bytes: int = 0
    largest_bytes: int = 0
    live: int = 0  # results made here that are still alive
    live_bytes: int = 0
    peak_live: int = 0
    calls: int = 0  # how many times the line ran the operator
    per_call: int = 0  # the most results one call made (jvp: value and tangent)

    def add(self, size: int) -> None:
        self.allocations += 1
        self.total_bytes += size
        self.largest_bytes = max(self.largest_bytes, size)
        self.live += 1
        self.live_bytes += size
        self.peak_live = max(self.peak_live, self.live)

    def release(self, size: int) -> None:
        self.live -= 1
        self.live_bytes -= size

    def suspicious(self) -> bool:
        """The line ran more than once and more than one call's results are kept."""
        return self.calls > 1 and self.live > self.per_call

    def block(self, base: Path) -> str:
        limit = f" (should be <={self.per_call})" if self.suspicious() else ""
        retention = f"{self.live}{limit}"
        frames = " <- ".join(
            f"{_shown(path, base)}:{line} in {function}"
            for path, line, function in self.stack
        )
        return "\n".join(
            [
                "[Memory Report]",
                f"Operator : {self.operator}",
                f"Allocation Size : {readable(self.largest_bytes)}",
                f"Allocations : {self.allocations} "
                f"(total {readable(self.total_bytes)})",
                f"Retention Count : {retention}"
                + (f", holding {readable(self.live_bytes)}" if self.live else ""),
                f"Call Stack : {frames or '(outside the script)'}",
            ]
        )


class Report:
    """Allocation sites recorded while tracking (see the module docstring)."""

    def __init__(self, base: Path | None = None) -> None:
        self.sites: dict[tuple, Site] = {}
        self.base = base or Path.cwd()

    def record(self, operator: str, value, stack: tuple, inputs=()) -> None:
        """Note the tensors in ``value``, made at ``stack`` by ``operator``; a view
        of one of ``inputs`` (a reshape, a transpose) allocated nothing."""
        roots = {id(_root(x.data)) for x in _tensors(inputs)}
        made = [t for t in _tensors(value) if id(_root(t.data)) not in roots]
        if not made:
            return
        site = self.sites.get((operator, stack))
        if site is None:
            site = self.sites[(operator, stack)] = Site(operator, stack)
        site.calls += 1
        site.per_call = max(site.per_call, len(made))
        for tensor in made:
            size = int(getattr(tensor.data, "nbytes", 0))
            site.add(size)
            weakref.finalize(tensor, site.release, size)

    def ordered(self) -> list[Site]:
        """Sites that keep each run's result first, then by memory held, then by
        memory allocated."""
        return sorted(
            self.sites.values(),
            key=lambda s: (not s.suspicious(), -s.live_bytes, -s.total_bytes),
        )

    def text(self, top: int | None = None) -> str:
        sites = self.ordered()[: top or None]
        if not sites:
            return "[Memory Report]\nno operator ran: nothing was allocated by ppto"
        return "\n\n".join(site.block(self.base) for site in sites)


def readable(size: float) -> str:
    """``268435456`` -> ``256MB``, ``1536`` -> ``1.5KB`` (units of 1024)."""
    unit = "B"
    for larger in ("KB", "MB", "GB"):
        if size < 1024:
            break
        size, unit = size / 1024, larger
    return f"{size:.3g}{unit}"


@contextlib.contextmanager
def tracking(base: Path | None = None):
    """Record operator results and gradients while the block runs."""
    from ppto import api

    report = Report(base)

    def on_operator(op, inputs, params, out):
        report.record(camel_case(op.name), out, _script_stack(), inputs)

    def on_gradients(what, name, value):
        report.record(f"{what}({name})", value, _script_stack())

    OBSERVERS.append(on_operator)
    api.RESULT_OBSERVERS.append(on_gradients)
    try:
        yield report
    finally:
        OBSERVERS.remove(on_operator)
        api.RESULT_OBSERVERS.remove(on_gradients)


def _root(array):
    """The array that owns ``array``'s memory (itself, or the base of a view)."""
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _tensors(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


def _script_stack(depth: int = 3) -> tuple:
    """The calling frames outside ppto (and runpy), innermost first."""
    frames = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < depth:
        path = frame.f_code.co_filename
        if not path.startswith(("<", _PACKAGE)) and path != _RUNPY:
            frames.append((path, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return tuple(frames)


def _shown(path: str, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(base.resolve()))
    except ValueError:
        return path


USAGE = """usage: python -m ppto.debug.memcheck [--top N] script.py [args ...]

Run a script and report ppto's allocations per operator and call site, with what
the script still holds when it ends. --top N: the sites shown (default 10). The
script's arguments are passed on as they are."""


def main(argv: list[str] | None = None) -> int:
    """Run the script (see USAGE); returns its exit status as Python would."""
    argv = list(sys.argv[1:] if argv is None else argv)
    top = 10
    while argv and argv[0].startswith("-"):  # options come before the script
        option = argv.pop(0)
        if option == "--":
            break
        if option in ("-h", "--help"):
            print(USAGE)
            return 0
        if option.startswith("--top=") and option[6:].isdigit():
            top = int(option[6:])
        elif option == "--top" and argv and argv[0].isdigit():
            top = int(argv.pop(0))
        else:
            print(f"{USAGE}\n\nunknown option {option!r}", file=sys.stderr)
            return 2
    if not argv or not Path(argv[0]).is_file():
        where = f"no script at {argv[0]}" if argv else "no script given"
        print(f"{USAGE}\n\n{where}", file=sys.stderr)
        return 2
    script = Path(argv[0])
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *argv[1:]]
    sys.path.insert(0, str(script.resolve().parent))
    status, module_globals, exited = 0, None, None
    with tracking() as report:
        try:
            module_globals = runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exit_:
            status = _exit_status(exit_.code)
            exited = exit_  # (its traceback holds the script's variables, which
            # are gone once the except block drops it: sys.exit() at the end of
            # a script reported every retention as 0)
        finally:  # (a failing script's report is printed before its traceback)
            sys.argv, sys.path[:] = saved_argv, saved_path
            print(report.text(top))  # the script's variables still held
        del module_globals, exited
    return status


def _exit_status(code) -> int:
    """What ``sys.exit(code)`` makes the process return (a message goes to
    stderr, as Python does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
