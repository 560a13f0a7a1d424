"""One array passed for two parameters of a function that writes into one.

ppto's generated code never writes into the caller's arrays: ``a += np.sin(b)`` in
the user's function becomes a new array bound to ``a``. That is what the caller
sees in NumPy too, except where ``a`` and ``b`` are one array (``f(w, w)``, or two
views that overlap): there NumPy's ``+=`` changes ``b`` as well, and the generated
code, which keeps them apart, computes another function. So a call of a program
whose code writes into a parameter (``Program.written``, found by
``transform.aliases.check``) is refused when that parameter's array shares memory
with another argument's. Programs that write into no parameter (most) check
nothing: the repeated call's ``CheckedRepeatedCall`` is made only for the others.
A call leaving such a parameter to the function's default array is refused too:
Python keeps the write there for the next call, the generated code changes a copy.
"""

from __future__ import annotations

import numpy as np

from ppto.errors import GradError
from ppto.runtime.tensor import Tensor
from ppto.transform.defaults import changeable_defaults, default_values


def refuse_shared(program, values) -> None:
    """Raise a ``GradError`` where a parameter in ``program.written`` is given an
    array sharing memory with another argument (``values``: positional, one for
    each parameter of the differentiated function, ``program.spelled``'s keys)."""
    names = list(program.spelled)
    for name, place in program.written.items():
        if name not in names:
            continue
        position = names.index(name)
        mine = _array(values[position]) if position < len(values) else None
        if mine is None:  # (a number or a list: no array of its own to share)
            continue
        for other, (their_name, value) in enumerate(zip(names, values)):
            theirs = _array(value) if other != position else None
            if theirs is not None and _overlap(mine, theirs):
                _refuse(program.written_by, place, program.spelled[their_name])


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


def _refuse(function: str, place: tuple, theirs: str) -> None:
    filename, line, text, spelled = place
    raise GradError(
        f"{function} writes into its parameter {spelled} in place "
        f'(File "{filename}", line {line}: {text}), and the array passed for '
        f"{spelled} shares memory with the one passed for {theirs}: in NumPy the "
        f"write changes {theirs} too, but ppto's generated code keeps them apart "
        "and would compute another result. Instead: pass a copy "
        f"({function}(w, w.copy()) rather than {function}(w, w)), or do not "
        f"write into the argument ({spelled} = {spelled} + ... makes a new array)"
    )
