"""Tensor constructors (``zeros``, ``ones``, ``full``, ``arange``, ``eye``), each with
``device=`` and ``dtype=``. Arrays are made directly in the device's own namespace
where it has one, so nothing is copied from the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.errors import DTypeError, PptoError
from ppto.runtime.backends import backend_for
from ppto.runtime.device import Device
from ppto.runtime.dtypes import check_dtype
from ppto.runtime.tensor import Tensor, _host_array


def _create(make: Callable, device: Any, dtype: Any, what: str) -> Tensor:
    target = Device("cpu" if device is None else device)  # (device=0 is no CPU)
    backend = backend_for(target)
    resolved = None if dtype is None else check_dtype(dtype, f"ppto.{what} dtype")
    xp = backend.xp
    try:
        if xp is None:
            array = backend.from_host(make(np, resolved), target.index)
        elif target.kind == "cuda":
            with xp.cuda.Device(target.index):
                array = make(xp, resolved)
        else:
            array = make(xp, resolved)
    except OverflowError as error:  # (a fill value beyond the dtype)
        raise DTypeError(f"ppto.{what}: {error}") from error
    except (ValueError, TypeError, ZeroDivisionError) as error:  # NumPy's refusal
        raise PptoError(f"ppto.{what}: {error}") from error
    check_dtype(array.dtype, f"ppto.{what}")
    return Tensor(array, target)


def zeros(shape: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of zeros (float64 unless ``dtype`` says otherwise).

    >>> ppto.zeros((2, 3), device="cpu").shape
    (2, 3)
    """
    return _create(
        lambda xp, dt: xp.zeros(shape, dtype=dt or np.float64), device, dtype, "zeros"
    )


def ones(shape: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of ones (float64 unless ``dtype`` says otherwise)."""
    return _create(
        lambda xp, dt: xp.ones(shape, dtype=dt or np.float64), device, dtype, "ones"
    )


def full(shape: Any, fill_value: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor filled with ``fill_value`` (dtype inferred from it, as in NumPy)."""
    return _create(
        lambda xp, dt: xp.full(shape, fill_value, dtype=dt), device, dtype, "full"
    )


def arange(
    start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, device: Any = None
) -> Tensor:
    """Evenly spaced values in [start, stop), like np.arange."""
    if stop is None:
        start, stop = 0, start
    return _create(
        lambda xp, dt: xp.arange(start, stop, step, dtype=dt), device, dtype, "arange"
    )


def eye(
    n: int,
    m: int | None = None,
    k: int = 0,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """The n x m matrix of ones on diagonal ``k`` (the identity by default), float64
    unless ``dtype`` says otherwise; the arguments in NumPy's order.

    >>> ppto.eye(2, 3, 1).numpy()
    array([[0., 1., 0.],
           [0., 0., 1.]])
    """
    return _create(
        lambda xp, dt: xp.eye(n, m, k, dtype=dt or np.float64), device, dtype, "eye"
    )


def zeros_like(x: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Zeros shaped like x, on x's device unless ``device`` is given."""
    return _like("zeros_like", x, dtype, device)


def ones_like(x: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Ones shaped like x, on x's device unless ``device`` is given."""
    return _like("ones_like", x, dtype, device)


def _like(name: str, x: Any, dtype: Any, device: Any) -> Tensor:
    from ppto.ops.primitive import OPERATORS

    if device is None:
        return OPERATORS[name](x, dtype)
    # as without device=: x's dtype (a list's as NumPy reads it, not float64)
    # and its layout
    like = x if hasattr(x, "dtype") else _host_array(x, None)
    make = zeros if name == "zeros_like" else ones
    made = make(np.shape(like), dtype or like.dtype, device)
    made.layout = getattr(x, "layout", None)
    return made
