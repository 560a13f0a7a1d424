"""``Tensor``: a raw array of some backend, the device it lives on, and a layout hint.

Tensors are values: operators return new tensors and never change their inputs.
Arithmetic, indexing and NumPy-style methods are installed by ``ppto.ops.methods`` so
that this module depends on no operator.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ppto.errors import DeviceError, DTypeError, PptoError, ShapeError
from ppto.runtime import ledger, streams
from ppto.runtime.backends import backend_for, backend_of_array
from ppto.runtime.device import CPU, Device
from ppto.runtime.dtypes import check_dtype

LAYOUTS = (None, "nchw", "nhwc")


class Tensor:
    """An array on a device. Build one with ``ppto.tensor``.

    >>> x = ppto.tensor([[1.0, 2.0]], device="cpu")
    >>> x.shape, x.device, (x * 2).numpy()
    ((1, 2), Device('cpu'), array([[2., 4.]]))
    """

    __slots__ = ("data", "device", "layout", "__weakref__")  # (memcheck watches them)
    __array_priority__ = 1000

    def __init__(
        self, data: Any, device: Device | None = None, layout: str | None = None
    ):
        # ppto's own code always names the device of the raw array it wraps; a
        # call without one, or with a string, or of other data, is a user's (as
        # PyTorch spells it: ppto.Tensor(np_array), ppto.Tensor([1.0], "cpu")),
        # made as ppto.tensor makes it. (The list was kept, so .shape and repr
        # raised, a device given as a string stayed one, ppto.Tensor(t) held the
        # tensor t as its array, and ppto.Tensor(np_array) shared the user's
        # array, writes to the tensor changing it, and took dtypes no tensor
        # holds: strings, complex numbers.)
        if device.__class__ is not Device or not hasattr(data, "dtype"):
            made = tensor(data, device, layout=layout)
            data, device, layout = made.data, made.device, made.layout
        self.data = data
        self.device = device
        self.layout = layout

    shape = property(lambda self: tuple(self.data.shape), doc="The shape, a tuple.")
    dtype = property(lambda self: self.data.dtype, doc="The NumPy dtype.")
    ndim = property(lambda self: self.data.ndim, doc="The number of axes.")
    size = property(lambda self: int(self.data.size), doc="The number of elements.")
    nbytes = property(lambda self: int(self.data.nbytes), doc="Bytes of memory held.")

    def numpy(self) -> np.ndarray:
        """A host copy as a NumPy array."""
        return np.array(self._to_host("numpy"), copy=True)

    def to(self, device: str | Device) -> Tensor:
        """A copy of this tensor on ``device`` (recorded in the transfer ledger)."""
        target = Device(device)
        if target == self.device:
            return self
        if streams.in_use:
            streams.ready(self)
        return Tensor(
            move(self.data, self.device, target, "to", False), target, self.layout
        )

    def item(self) -> Any:
        """The single element as a Python number."""
        if self.size != 1:
            raise ShapeError(
                f"item() needs a tensor with one element, this has shape {self.shape}"
            )
        return self._to_host("item").reshape(()).item()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The values as a NumPy array, for ``np.asarray(t)`` and ``np.array(t)``.

        NumPy passes ``copy=True`` for ``np.array(t)`` and does not copy again, so
        the tensor's own memory is handed out only where no copy is asked for
        (writes to the "copy" would change the tensor); ``copy=False`` where only a
        copy can be had raises, as NumPy's own arrays do."""
        host = self._to_host("__array__")
        if copy:
            return np.array(host, dtype=dtype, copy=True)
        array = host if dtype is None else host.astype(dtype, copy=False)
        if copy is False and not np.may_share_memory(array, self.data):
            if self.device != CPU:
                error, why = DeviceError, f"it is on {self.device}"
            else:
                error, why = DTypeError, f"it holds {self.dtype}, not {array.dtype}"
            raise error(
                f"np.array(tensor, copy=False) asks for the tensor's own memory, but "
                f"{why}, so only a copy can be had: use np.asarray(tensor)"
            )
        return array

    def _to_host(self, why: str) -> np.ndarray:
        if self.device == CPU:
            return np.asarray(self.data)
        if streams.in_use:
            streams.ready(self)  # (its stream may still be writing it)
        return move(self.data, self.device, CPU, why, False)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ShapeError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous: "
                "reduce it to one value first, e.g. x.any(), x.all() or "
                "ppto.reduce_max(x) > 0"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iu" or self.size != 1:
            raise TypeError(
                f"only a single integer tensor can be an index, not {self!r}"
            )
        return int(self.item())

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"`` formats a 0-d tensor's value, as NumPy does; a format
        of a tensor with axes is refused unless empty (then it is ``str``)."""
        if not spec:
            return str(self)
        if self.ndim != 0:
            raise ShapeError(
                f"format spec {spec!r} applies to one number, but this tensor has "
                f"shape {self.shape}: format x.item() or the elements one by one"
            )
        return format(self.item(), spec)

    def __repr__(self) -> str:
        try:
            host = self._to_host("repr")
        except PptoError:  # (a backend unregistered since: a repr must not raise,
            # debuggers and tracebacks show it)
            return f"Tensor(<unreadable>, shape={self.shape}, device='{self.device}')"
        body = np.array2string(host, separator=", ", prefix="Tensor(")
        if host.size == 0 and host.shape != (0,):  # (as NumPy: [] alone is (0,))
            body += f", shape={self.shape}"
        extra = f", layout='{self.layout}'" if self.layout else ""
        return f"Tensor({body}, device='{self.device}', dtype={self.dtype}{extra})"

    __hash__ = None  # == is elementwise, so tensors cannot be dict keys


def move(data: Any, source: Device, target: Device, op: str, implicit: bool) -> Any:
    """Copy a raw array from one device to another, recording it in the ledger."""
    # Backends first: a copy to a device that cannot be used is not a transfer.
    source_backend, target_backend = backend_for(source), backend_for(target)
    ledger.record(op, int(data.nbytes), source, target, implicit)
    if source.kind == target.kind == "cuda":
        return target_backend.from_host(data, target.index)
    return target_backend.from_host(source_backend.to_host(data), target.index)


def device_of(value: Any) -> Device | None:
    """The device of a Tensor or raw array; None for Python scalars."""
    if isinstance(value, Tensor):
        return value.device
    owner = backend_of_array(value)
    if owner is not None:
        backend, index = owner
        return Device(backend.kind, index)
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        return CPU
    return None


def array_module(value: Any):
    """The array module (numpy, or cupy for a CuPy array) of a Tensor's data or a
    raw array: where a rule helper makes masks and ranges on its input's device."""
    raw = value.data if isinstance(value, Tensor) else value
    owner = backend_of_array(raw)
    return owner[0].xp if owner is not None else np


def tensor(
    data: Any,
    device: str | Device | None = None,
    dtype: Any = None,
    layout: str | None = None,
) -> Tensor:
    """Make a tensor from lists, scalars, NumPy or CuPy arrays, or another tensor.

    dtype follows NumPy (Python floats give float64); the data is copied.

    >>> ppto.tensor([1.0, 2.0], device="cpu").dtype
    dtype('float64')
    """
    source = device_of(data) or CPU
    target = Device(device) if device is not None else source
    backend = backend_for(target)
    if layout not in LAYOUTS:
        raise ShapeError(f"layout must be None, 'nchw' or 'nhwc', got {layout!r}")
    if isinstance(data, Tensor):
        raw, source = data.data, data.device
        layout = layout or data.layout
        if streams.in_use:
            streams.ready(data)  # (its stream may still be writing it)
    else:
        raw = data
    context, plan = contextlib.nullcontext(), None
    if streams.in_use and target != CPU:  # an upload inside a stream block goes there
        context, plan = streams.running(backend, target, ())
    with context:
        array = _made(raw, source, target, backend, dtype, isinstance(data, Tensor))
    check_dtype(array.dtype, "ppto.tensor data")
    if layout is not None and array.ndim != 4:
        raise ShapeError(
            f"layout={layout!r} describes 4-D image tensors; this data has shape "
            f"{tuple(array.shape)}"
        )
    made = Tensor(array, target, layout)
    if plan is not None:
        streams.record(backend, target, plan, made)
    return made


def _made(raw, source: Device, target: Device, backend, dtype, of_tensor: bool):
    """A new raw array on ``target`` with ``raw``'s values, in ``dtype`` if given.
    A tensor's data copied to another device is a transfer, as with ``.to()``
    (host data that is not yet a tensor is not)."""
    if source == CPU:
        host = _host_array(raw, dtype)
        array = host.copy() if host is raw else host
        if target != CPU and of_tensor:
            array = move(array, CPU, target, "tensor", False)
        elif target != CPU:
            array = backend.from_host(array, target.index)
    else:
        array = move(raw, source, target, "tensor", False) if target != source else raw
        if dtype is not None:
            array = array.astype(check_dtype(dtype, "ppto.tensor dtype"))
        if array is raw:
            array = array.copy()
    return array


def _host_array(data: Any, dtype: Any) -> np.ndarray:
    if dtype is not None:
        dtype = check_dtype(dtype, "ppto.tensor dtype")
    try:
        array = np.asarray(data, dtype=dtype)
    except OverflowError as error:  # (NumPy 2 refuses ints beyond the dtype)
        raise DTypeError(
            f"ppto.tensor: {error}: use a dtype that holds the values"
        ) from error
    except (ValueError, TypeError) as error:
        raise ShapeError(
            f"ppto.tensor cannot make an array of {type(data).__name__} data: {error}; "
            "nested lists must be rectangular and hold numbers"
        ) from error
    check_dtype(array.dtype, "ppto.tensor data")
    return array


def require_device(value: Any) -> Device:
    device = device_of(value)
    if device is None:
        raise DeviceError(f"{value!r} is not on any device")
    return device
