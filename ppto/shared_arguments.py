"""One array passed for two parameters of a function that writes into one.

ppto's generated code never writes into the caller's arrays: ``a += np.sin(b)`` in
the user's function becomes a new array bound to ``a``. That is what the caller
sees in NumPy too, except where ``a`` and ``b`` are one array (``f(w, w)``, or two
views that overlap): there NumPy's ``+=`` changes ``b`` as well, and the generated
code, which keeps them apart, computes another function. So a call of a program
whose code writes into a parameter (``Program.written``, found by
``transform.aliases.check``) is refused when that parameter's array (a 0-d one
too) shares memory with another argument's, or its list is another argument's
too (``f(x, xs, xs)`` with ``xs[0] = v`` or ``xs += (4,)``). Programs that write
into no parameter (most) check nothing: the repeated call's ``CheckedRepeatedCall``
is made only for the others. ``check_call`` runs the checks for every path that runs
a program (``Transformed.run``, the repeated call): also for the gradient code a
derivative differentiated again calls (``ppto.hessian``, ``jvp(grad(f))``: the
program's ``inner``, whose parameters are the derivative's).
A call leaving such a parameter to the function's default array is refused too:
Python keeps the write there for the next call, the generated code changes a copy.
"""

from __future__ import annotations

import numpy as np

from ppto.errors import GradError
from ppto.runtime.tensor import Tensor
from ppto.transform.defaults import changeable_defaults, default_values


def writing(program) -> list:
    """The programs a call of ``program`` runs that write into a parameter: itself,
    and the gradient programs its code calls (``program.inner``, a derivative of
    ppto.grad(f) differentiated again: the same parameters), theirs in turn."""
    found = [program] if program.written else []
    for inner in program.inner:
        found += writing(inner)
    return found


def check_call(function, programs: list, values) -> None:
    """Refuse a call (``values`` as ``refuse_shared`` reads them) of ``function``
    that the code of ``programs`` (``writing``'s) would compute wrongly."""
    for program in programs:
        refuse_shared(program, values)
        refuse_written_default(function, program, values)


def refuse_shared(program, values) -> None:
    """Raise a ``GradError`` where a parameter in ``program.written`` is given an
    array sharing memory with another argument's, or a list or dict that another
    argument holds too (``f(w, xs, xs)``: a list changed through one parameter is
    changed for the other); ``values``: positional, one for each parameter of the
    differentiated function, ``program.spelled``'s keys."""
    names = list(program.spelled)
    for name, place in program.written.items():
        if name not in names:
            continue
        position = names.index(name)
        if position >= len(values):
            continue
        arrays, containers = _held(values[position])
        if not arrays and not containers:  # (a number: nothing to share)
            continue
        for other, (their_name, value) in enumerate(zip(names, values)):
            if other == position:
                continue
            their_arrays, their_containers = _held(value)
            theirs = program.spelled[their_name]
            if containers & their_containers:
                kind = type(values[position]).__name__  # (a list or a dict)
                _refuse(program.written_by, place, theirs, kind)
            if any(_overlap(a, b) for a in arrays for b in their_arrays):
                _refuse(program.written_by, place, theirs, "array")


def _held(value) -> tuple[list, set]:
    """The NumPy arrays in ``value`` (itself, a CPU tensor's, or those in the
    lists, tuples and dicts it is made of) and the ids of the lists and dicts it
    is made of (itself included: the objects a change in place may reach)."""
    arrays: list = []
    containers: set = set()
    pending = [value]
    while pending:
        item = pending.pop()
        array = _array(item)
        if array is not None:
            arrays.append(array)
        elif isinstance(item, (list, dict)) and id(item) not in containers:
            containers.add(id(item))
            pending.extend(item.values() if isinstance(item, dict) else item)
        elif isinstance(item, tuple):
            pending.extend(item)
    return arrays, containers


def refuse_written_default(function, program, values) -> None:
    """Raise a ``GradError`` where a parameter in ``program.written`` is given the
    default ``function`` holds for it (an array or a list: the call leaves the
    parameter out), as ``refuse_shared`` reads ``values``."""
    names = list(program.spelled)
    defaults = default_values(function)
    for name in set(changeable_defaults(function)) & set(program.written):
        if name not in names:
            continue
        position = names.index(name)
        if position < len(values) and values[position] is defaults[name]:
            filename, line, text, spelled = program.written[name]
            raise GradError(
                f"{program.written_by} writes into its parameter {spelled} in "
                f'place (File "{filename}", line {line}: {text}), and the call '
                f"leaves {spelled} to its default: Python keeps the change in "
                "that default, made once when the def ran, for the next call, "
                "but ppto's generated code changes a copy. Instead: write the "
                f"default as {spelled}=None and make a new value inside the "
                f"function (if {spelled} is None: {spelled} = np.zeros(...)), or "
                f"pass {spelled} in the call"
            )


def _array(value):
    """``value``'s NumPy array: itself, or a CPU tensor's; else None."""
    if type(value) is Tensor:
        value = value.data
    return value if isinstance(value, np.ndarray) else None


def _overlap(a, b) -> bool:
    """Whether the arrays ``a`` and ``b`` share an element:
    ``np.may_share_memory`` compares their bounds only (cheap, and false for
    most pairs), ``np.shares_memory`` then settles it exactly (interleaved views
    ``w[::2]`` and ``w[1::2]`` share bounds but no element: accepted)."""
    return np.may_share_memory(a, b) and np.shares_memory(a, b)


def _refuse(function: str, place: tuple, theirs: str, kind: str) -> None:
    """``kind``: what the two arguments share, "array" (memory), "list", "dict"."""
    filename, line, text, spelled = place
    if kind == "array":
        shared = (
            f"the array passed for {spelled} (or one it holds) shares memory with "
            f"one passed for {theirs}"
        )
        copy, new = "w.copy()", f"{spelled} = {spelled} + ... makes a new array"
    else:
        shared = f"the {kind} passed for {spelled} is passed for {theirs} too"
        copy, new = f"{kind}(w)", f"{spelled} = {kind}({spelled}) first: a new {kind}"
    raise GradError(
        f"{function} writes into its parameter {spelled} in place "
        f'(File "{filename}", line {line}: {text}), and {shared} (or held '
        f"in it): in NumPy the write changes {theirs} too, but ppto's generated "
        "code keeps them apart and would compute another result. Instead: pass "
        f"a copy ({function}(w, {copy}) rather than {function}(w, w)), or do not "
        f"write into the argument ({new})"
    )
