"""Precision settings: the mode backends and fusion honour, and the tolerance that
``ppto.allclose`` (and fused-versus-unfused verification) compares with.

``strict`` asks for bit-reproducible results (no reordering fusion, same algorithm on
every backend); ``default`` allows fusion within the tolerance; ``fast`` also allows
lower-precision accumulation where a backend offers it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppto.errors import DTypeError, PptoError, ShapeError

_MODES = ("strict", "default", "fast")
_state = {"mode": "default", "rtol": 1e-5, "atol": 1e-8, "changes": 0}


def set_precision(mode: str) -> str:
    """Set the precision mode ('strict', 'default' or 'fast'); returns the old one."""
    if mode not in _MODES:
        raise PptoError(f"precision must be one of {_MODES}, got {mode!r}")
    previous, _state["mode"] = _state["mode"], mode
    return previous


def get_precision() -> str:
    return _state["mode"]


def set_tolerance(rtol: float | None = None, atol: float | None = None) -> tuple:
    """Set the tolerance used by ``allclose``; returns the old ``(rtol, atol)``.

    Both values are checked before either is set, so a refused call changes nothing.

    >>> ppto.set_tolerance(rtol=1e-5, atol=1e-8)   # doctest: +SKIP
    (1e-05, 1e-08)
    """
    previous = (_state["rtol"], _state["atol"])
    given = _checked_tolerances(rtol=rtol, atol=atol)
    _state.update({name: value for name, value in given.items() if value is not None})
    if _state["rtol"] != previous[0]:  # (which fusion rules apply: see changes())
        _state["changes"] += 1
    return previous


def tolerance_changes() -> int:
    """How many times the relative tolerance has changed: code fused before a
    change may use a rule the tolerance now leaves out (ppto.fusion.registry's
    in_tolerance), so it is not reused after it."""
    return _state["changes"]


def _checked_tolerances(**given: Any) -> dict:
    """``given`` tolerances as floats (None left None), or a ppto error naming one
    that is not a non-negative finite number (NumPy's numbers are numbers)."""
    checked = {}
    for name, value in given.items():
        if value is not None and (
            isinstance(value, (bool, np.bool_))
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not (0 <= value < float("inf"))
        ):  # (an infinite one passed every fusion rule's check, however wrong)
            raise PptoError(
                f"{name} must be a non-negative finite number, got {value!r}"
            )
        checked[name] = None if value is None else float(value)
    return checked


def get_tolerance() -> tuple[float, float]:
    return _state["rtol"], _state["atol"]


def allclose(
    a: Any,
    b: Any,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
) -> bool:
    """Whether a and b agree within the active tolerance (on the host); ``rtol``
    and ``atol``, as NumPy's allclose takes them, stand for the active ones in
    this call.

    >>> ppto.allclose(ppto.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-9])
    True
    """
    given = _checked_tolerances(rtol=rtol, atol=atol)
    rtol, atol = (_state[n] if given[n] is None else given[n] for n in given)
    values = [_numbers(value, which) for value, which in ((a, "a"), (b, "b"))]
    try:
        np.broadcast_shapes(values[0].shape, values[1].shape)
    except ValueError as error:
        raise ShapeError(
            f"ppto.allclose: shapes {values[0].shape} and {values[1].shape} do not "
            "broadcast together, so the values cannot be compared"
        ) from error
    return bool(np.allclose(*values, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _numbers(value: Any, which: str) -> np.ndarray:
    """``value`` as a host array of numbers, or a ppto error naming the argument."""
    from ppto.runtime.tensor import Tensor, device_of

    device = device_of(value)
    if device is not None and device.kind != "cpu" and not isinstance(value, Tensor):
        # a device's own array (CuPy's refuses np.asarray): read as a tensor is
        value = Tensor(value, device)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:  # (ragged lists)
        raise ShapeError(f"ppto.allclose: {which} is not an array: {error}") from error
    if array.dtype.kind not in "biuf":
        raise DTypeError(
            f"ppto.allclose compares numbers, but {which} has dtype {array.dtype}"
        )
    return array
