"""The dtype of the array a NumPy constructor call makes: ``np.zeros(n)`` float64,
``np.zeros(n, np.int32)`` the dtype written, ``np.arange(3)`` of whole numbers
written out integers, ``np.array([1, 2])`` that of the numbers written,
``np.float32(v)`` float32.

The Normalizer works it out as it emits a passive ``t = np.zeros(...)`` (it resolves
the callee and a dtype's name in the function's namespace, as for ``dtype=`` of an
operator) and keeps it on the statement, so that the analysis knows what is written
into such an array stays floats, or is truncated to integers (no derivative)."""

from __future__ import annotations

from collections.abc import Callable

import gast
import numpy as np

from ppto.transform.analyze import literal

# NumPy's array constructors whose result is float64 unless a dtype is written,
# with the position their dtype may be passed at (compared by identity: the
# callee may be any value, an array too)
_FLOAT64_UNLESS_TOLD = (
    (np.zeros, 1),
    (np.ones, 1),
    (np.empty, 1),
    (np.identity, 1),
    (np.eye, 3),
)


def constructed_dtype(call: gast.Call, function, named_dtype: Callable):
    """The dtype of the array ``call`` makes, where it calls (resolved) ``function``;
    ``named_dtype(node)`` is the dtype a dtype argument names, or None. None for a
    call of anything else, or a dtype not known."""
    if _number_type(function) and len(call.args) == 1 and not call.keywords:
        return np.dtype(function)  # np.float32(v): a number (or array) of that dtype
    asked = [k.value for k in call.keywords if k.arg == "dtype"]
    if (function is np.array or function is np.asarray) and len(call.args) == 1:
        if asked:
            return None
        written = literal(call.args[0])  # (numbers written out: np.array([1, 2]))
        numbers = isinstance(written, (list, tuple)) and all(
            type(n) in (int, float, bool) for n in np.ravel(np.asarray(written, object))
        )
        return np.asarray(written).dtype if numbers and written else None
    if function is np.arange:
        whole = all(
            isinstance(a, gast.Constant) and type(a.value) is int for a in call.args
        )
        return np.dtype(np.intp) if whole and call.args and not asked else None
    position = next((p for f, p in _FLOAT64_UNLESS_TOLD if f is function), None)
    if position is None:
        return None
    asked += call.args[position : position + 1]
    return named_dtype(asked[0]) if asked else np.dtype(np.float64)


def _number_type(function) -> bool:
    """Whether ``function`` is one of NumPy's number types (``np.float32``)."""
    return isinstance(function, type) and issubclass(function, np.number)
