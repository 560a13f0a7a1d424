"""Dispatch: bring an operator's inputs onto one device and pick the implementation.

The target device is the first input on an accelerator if any, else the first input's
device. Inputs elsewhere are copied there through the ledger (which applies the transfer
policy). Python scalars travel as they are. The implementation is the backend's own
``<op>_impl`` if it has one, else the operator's generic one run on the backend's
``xp``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ppto.errors import BackendError, ShapeError
from ppto.runtime import streams
from ppto.runtime.backends import Backend, backend_for, backend_of_array
from ppto.runtime.device import CPU, Device
from ppto.runtime.dtypes import check_dtype
from ppto.runtime.tensor import Tensor, move


def _raw_and_device(value: Any, op_name: str) -> tuple[Any, Device | None]:
    if isinstance(value, Tensor):
        return value.data, value.device
    if isinstance(value, (bool, int, float)) or value is None:
        return value, None
    if isinstance(value, np.ndarray):
        check_dtype(value.dtype, f"{op_name}: a NumPy argument")
        return value, CPU
    if isinstance(value, np.generic):
        check_dtype(value.dtype, f"{op_name}: a NumPy scalar argument")
        return value, None
    owner = backend_of_array(value)
    if owner is not None:
        backend, index = owner
        return value, Device(backend.kind, index)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:
        raise ShapeError(
            f"{op_name}: argument {value!r} is not an array: {error}; nested lists "
            "must be rectangular and hold numbers"
        ) from error
    check_dtype(array.dtype, f"{op_name}: argument {value!r}")
    return array, CPU


def gather_inputs(op_name: str, values: list) -> tuple[list, Device]:
    """Raw arrays of ``values`` on one device, and that device (see module doc)."""
    raws: list = []
    devices: list[Device | None] = []
    for value in values:
        raw, device = _raw_and_device(value, op_name)
        raws.append(raw)
        devices.append(device)
    placed = [device for device in devices if device is not None]
    if not placed:
        return raws, CPU
    target = placed[0]
    if any(device != target for device in placed):
        target = _choose_target(placed)
        for position, device in enumerate(devices):
            if device is not None and device != target:
                if streams.in_use:
                    streams.ready(values[position])
                raws[position] = move(raws[position], device, target, op_name, True)
    return raws, target


def _choose_target(placed: list[Device]) -> Device:
    for device in placed:
        if backend_for(device).accelerator:
            return device
    return placed[0]


def implementation(op_name: str, generic: Callable, device: Device) -> Callable:
    """The callable that runs ``op_name`` on ``device``'s backend (arrays in, out)."""
    backend: Backend = backend_for(device)
    own = backend.override(op_name)
    if own is not None:
        return own
    xp = backend.xp
    if xp is None:
        raise BackendError(
            f"backend {device.kind!r} has no implementation of {op_name!r}: add "
            f"{op_name}_impl to it, give it an array namespace xp, or move the tensors "
            "to 'cpu' with .to('cpu')"
        )
    if device.kind == "cuda" and device.index != 0:
        return _on_gpu(xp, device.index, generic)
    return lambda *args, **params: generic(xp, *args, **params)


def _on_gpu(cupy: Any, index: int, generic: Callable) -> Callable:
    def run(*args, **params):
        with cupy.cuda.Device(index):
            return generic(cupy, *args, **params)

    return run
