"""Precision settings: the mode backends and fusion honour, and the tolerance that
``ppto.allclose`` (and fused-versus-unfused verification) compares with.

``strict`` asks for bit-reproducible results (no reordering fusion, same algorithm on
every backend); ``default`` allows fusion within the tolerance; ``fast`` also allows
lower-precision accumulation where a backend offers it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppto.errors import PptoError

_MODES = ("strict", "default", "fast")
_state = {"mode": "default", "rtol": 1e-5, "atol": 1e-8}


def set_precision(mode: str) -> str:
    """Set the precision mode ('strict', 'default' or 'fast'); returns the old one."""
    if mode not in _MODES:
        raise PptoError(f"precision must be one of {_MODES}, got {mode!r}")
    previous, _state["mode"] = _state["mode"], mode
    return previous


def get_precision() -> str:
    return _state["mode"]


def set_tolerance(rtol: float | None = None, atol: float | None = None) -> tuple:
    """Set the tolerance used by ``allclose``; returns the old ``(rtol, atol)``."""
    previous = (_state["rtol"], _state["atol"])
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None:
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (value >= 0)
            ):
                raise PptoError(f"{name} must be a non-negative number, got {value!r}")
            _state[name] = float(value)
    return previous


def get_tolerance() -> tuple[float, float]:
    return _state["rtol"], _state["atol"]


def allclose(a: Any, b: Any) -> bool:
    """Whether a and b agree within the active tolerance (on the host)."""
    return bool(
        np.allclose(
            np.asarray(a), np.asarray(b), rtol=_state["rtol"], atol=_state["atol"]
        )
    )
