"""The arrays a NumPy call writes its result into, given by position.

``np.exp(x, y)`` is ``np.exp(x, out=y)``: a ufunc's arguments after its ``nin``
inputs are its outputs, and NumPy's functions and array methods with an ``out``
parameter take it by position too (``np.cumsum(x, 0, None, y)``,
``z.clip(0, 1, z)``). The transformer refuses a write into an array in place (the
derivative would miss the change); it looked for ``out=`` alone, and a call giving
its output by position was differentiated as if it made a new array (a zero or
wrong gradient, found by a probe of random programs)."""

from __future__ import annotations

import inspect

import gast
import numpy as np

# an array method's positional index of ``out`` (after self), as NumPy documents
# them: ndarray's methods are written in C and have no signature to read
METHOD_OUT_POSITIONS = {
    "all": 1, "any": 1, "argmax": 1, "argmin": 1, "choose": 1, "clip": 2,
    "compress": 2, "cumprod": 2, "cumsum": 2, "dot": 1, "max": 1, "mean": 2,
    "min": 1, "prod": 2, "round": 1, "std": 2, "sum": 2, "take": 2, "trace": 4,
    "var": 2,
}  # fmt: skip

_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)
_FUNCTION_OUT_POSITIONS: dict = {}  # NumPy function -> its out's index, or None


def positional_outs(node: gast.Call, callee, receiver_is_array: bool) -> list:
    """The arguments of ``node`` that are outputs given by position: ``callee`` is
    what the call's function resolves to (None where unknown), and
    ``receiver_is_array`` says whether ``node`` is a method call on an array."""
    if isinstance(callee, np.ufunc):
        return list(node.args[callee.nin :])
    position = _function_out_position(callee) if callee is not None else None
    if position is None and receiver_is_array:
        position = METHOD_OUT_POSITIONS.get(getattr(node.func, "attr", None))
    if position is None or len(node.args) <= position:
        return []
    return [node.args[position]]


def _function_out_position(function) -> int | None:
    """The positional index of a NumPy function's ``out`` parameter, else None."""
    module = getattr(function, "__module__", None) or ""
    if not module.startswith("numpy"):
        return None
    try:
        return _FUNCTION_OUT_POSITIONS[function]
    except KeyError:
        pass
    except TypeError:  # (unhashable: not a function of NumPy's)
        return None
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    positional = [p.name for p in parameters if p.kind in _POSITIONAL]
    position = positional.index("out") if "out" in positional else None
    _FUNCTION_OUT_POSITIONS[function] = position
    return position
