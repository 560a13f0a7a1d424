"""Backends: the array library behind each device kind.

A backend turns host data into its own arrays and back, names an array namespace ``xp``
that operators' generic implementations are written against, and may override any
operator with a ``<name>_impl`` function. NumPy serves ``cpu``; CuPy serves ``cuda`` and
is imported only when a CUDA device is first used; ``register_backend`` adds more.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from ppto.errors import BackendError, DeviceError, PptoError
from ppto.runtime.device import Device
from ppto.runtime.precision import _state as _precision


class Backend:
    """The array library behind one device kind (see the module docstring)."""

    kind: str = ""
    accelerator: bool = False

    @property
    def xp(self) -> ModuleType | None:
        return None

    def device_count(self) -> int:
        return 1

    def from_host(self, array: np.ndarray, index: int) -> Any:
        raise NotImplementedError

    def to_host(self, array: Any) -> np.ndarray:
        raise NotImplementedError

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is one of this backend's raw arrays."""
        return False

    def index_of(self, array: Any) -> int:
        return 0

    def override(self, op_name: str) -> Callable | None:
        """The backend's own implementation of an operator, if it has one."""
        return None

    def synchronize(self) -> None:
        """Wait for queued work; host backends have none."""

    # the stream protocol (see ppto/runtime/streams.py); a backend that computes
    # each operator as it is called has no streams: new_stream gives None. A
    # backend's queues must be ordered against its default queue (work outside
    # any stream block), as CUDA orders blocking streams against the default
    # stream: ppto orders only reads between two named queues

    def new_stream(self, index: int) -> Any:
        """A new queue of work on device ``index``, or None."""
        return None

    def using(self, queue: Any, index: int):
        """A context in which this thread's operators go to ``queue``."""
        return contextlib.nullcontext()

    def record(self, queue: Any, index: int) -> Any:
        """An event marking the work queued so far on ``queue`` (None: the default
        queue of device ``index``), or None where work is done as it is called."""
        return None

    def wait(self, queue: Any, event: Any, index: int) -> None:
        """Make ``queue`` (None: the default queue of device ``index``) wait for
        ``event``."""

    def host_wait(self, event: Any) -> None:
        """Block until ``event`` has happened."""

    def finish(self, queue: Any) -> None:
        """Block until the work on ``queue`` is done."""

    def done(self, event: Any) -> bool:
        """Whether ``event`` has happened (without waiting)."""
        return True


class NumpyBackend(Backend):
    kind = "cpu"

    @property
    def xp(self) -> ModuleType:
        return np

    def from_host(self, array: np.ndarray, index: int) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def owns(self, array: Any) -> bool:
        return isinstance(array, (np.ndarray, np.generic))

    def override(self, op_name: str) -> Callable | None:
        return _NUMPY_OWN.get(op_name)


# NumPy's own spellings of operators that most gradients run, without the
# Python-level argument handling of np.sum, np.max and np.ones_like (a microsecond
# or two each, which matters for gradients of small arrays).


def _reduce_sum(x, axis=None, keepdims=False):
    if (
        axis is not None  # (the common whole-array sum: no call to decide)
        and type(x) is np.ndarray
        and _short_rows(x, axis, _SUMMED, _SUMMED_ROW)
    ):
        return _across_short_rows(np.add, x, keepdims)
    return np.add.reduce(x, axis=axis, keepdims=keepdims)


def _reduce_max(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:  # (np.max defers to other types' own max method)
        if axis is not None and _short_rows(x, axis, _COMPARED, _COMPARED_ROW):
            return _across_short_rows(np.maximum, x, keepdims)
        return np.maximum.reduce(x, axis=axis, keepdims=keepdims)
    return np.max(x, axis=axis, keepdims=keepdims)


def _reduce_min(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:
        if axis is not None and _short_rows(x, axis, _COMPARED, _COMPARED_ROW):
            return _across_short_rows(np.minimum, x, keepdims)
        return np.minimum.reduce(x, axis=axis, keepdims=keepdims)
    return np.min(x, axis=axis, keepdims=keepdims)


# Reducing the last axis of a C-ordered array of many short rows (a batch's ten
# class scores) runs NumPy's inner loop once per row, a few elements each: the
# max of 256 rows of 10 took 9.7 us (float64) and 15 us (float32). Copied into
# column order first, the loop runs down whole columns: 2.4 us, the copy included;
# a sum of 256 rows of 4, 4.3 -> 2.7 us. Measured faster for 64 to 4096 rows of 2 to 16
# (slower for 32 and more, or fewer rows). Max and min give the same values and
# NaN in any order, but which zero a row holding both -0.0 and +0.0 gives may
# differ (IEEE 754 leaves it open; NumPy's own differs between the two layouts):
# not under precision 'strict', which asks for the same bits whatever the batch
# size. NumPy adds a row of fewer than 8 numbers one after the other, as the
# columns do, so those sums are bit for bit NumPy's (longer rows it adds in 8
# partial sums); float16 it sums in float32, which the columns would not.
_COMPARED_ROW = 16
_SUMMED_ROW = 7
_MANY_ROWS = 64
_COMPARED = frozenset(np.typecodes["Float"] + np.typecodes["AllInteger"])
_SUMMED = frozenset("fd" + np.typecodes["AllInteger"])


def _short_rows(x: np.ndarray, axis, kinds: frozenset, longest: int) -> bool:
    """Whether reducing ``axis`` of ``x`` takes ``_across_short_rows``: the last
    axis, 2 to ``longest`` long, of a C-ordered array of ``_MANY_ROWS`` or more
    rows whose dtype's type character is one of ``kinds``; for max and min
    (``_COMPARED``) not under precision 'strict' (see above)."""
    if x.ndim < 2 or (axis != -1 and axis != x.ndim - 1):
        return False
    return (
        2 <= x.shape[-1] <= longest
        and x.size >= _MANY_ROWS * x.shape[-1]
        and x.dtype.char in kinds
        and x.flags.c_contiguous
        and (kinds is not _COMPARED or _precision["mode"] != "strict")
    )


def _across_short_rows(ufunc, x: np.ndarray, keepdims: bool) -> np.ndarray:
    """``ufunc.reduce`` over the last axis of ``x`` (see ``_short_rows``), run on a
    column-ordered copy of its rows."""
    columns = np.asfortranarray(x.reshape(-1, x.shape[-1]))
    reduced = ufunc.reduce(columns, axis=1)
    return reduced.reshape(x.shape[:-1] + ((1,) if keepdims else ()))


def _reduce_mean(x, axis=None, keepdims=False):
    """np.mean's own steps for a float32 or float64 array (its sum, divided by the
    count as an intp, which NumPy divides in float64 and rounds back), without its
    Python-level dispatch and checks; np.mean for anything else."""
    if type(x) is np.ndarray and x.size and x.dtype.type in _MEAN_TYPES:
        total = np.add.reduce(x, axis=axis, keepdims=keepdims)
        if type(total) is not np.ndarray:  # (a whole array's: a NumPy float)
            # NumPy divides the float32 or float64 sum by an intp in float64,
            # as Python's float division does: no NumPy scalar arithmetic (the
            # loss of every batch: 15 -> 7 us with the caches cold)
            return type(total)(float(total) / x.size)
        count = np.intp(x.size // total.size)
        return np.true_divide(total, count, out=total, casting="unsafe")
    return np.mean(x, axis=axis, keepdims=keepdims)


_MEAN_TYPES = (np.float64, np.float32)


def _ones_like(x, dtype=None):
    if dtype is None and (type(x) is np.float64 or type(x) is np.float32):
        return np.array(1, x.dtype)  # the seed of a gradient: 0-d, like np.ones_like
    return np.ones_like(x, dtype=dtype)


def _unreduce(x, like, axis=None, keepdims=False):
    """unreduce for a 0-d value (the gradient of every mean or sum to a scalar):
    a read-only view with zero strides, as np.broadcast_to makes, made directly
    (its Python-level checks cost 3-4 us, ten times the view; the MLP's loss
    gradient spent 6 us hot and 30 us in place there). The operator's own
    implementation for anything else: a value to reshape, an array-like ``like``,
    other dtypes (an object array's buffer must not be viewed so)."""
    shape = like.shape if type(like) is np.ndarray else _shape_written(like)
    value = x if type(x) is np.ndarray else np.asarray(x) if _is_scalar(x) else None
    if shape is None or value is None or value.ndim or value.dtype.kind not in "fc":
        from ppto.ops.reductions import unreduce  # (runtime sits below the operators)

        return unreduce.impl(np, x, like, axis, keepdims)
    view = np.ndarray(shape, value.dtype, value, strides=(0,) * len(shape))
    view.flags.writeable = False
    return view


def _shape_written(like) -> tuple | None:
    """``like`` where generated code passed a shape it saved (a tuple of ints)."""
    if type(like) is tuple and all(type(n) is int for n in like):
        return like
    return None


def _is_scalar(x) -> bool:
    return isinstance(x, np.generic) or type(x) is float


def _where(condition, a, b, out=None):
    """np.where, but ``where(mask, values, 0)`` (every masked gradient: relu, max,
    clip) as the values' bits, read as integer lanes, multiplied by the mask's 1s
    and 0s: exactly np.where's result (+0.0 where masked out, infinities and NaN
    kept where not), about twice as fast (np.where branches on each element of a
    mask). (Only for +0 and arrays of native floats with at least one axis.) A
    choice between two arrays of one native float dtype is made by lanes too
    (``_selected``); np.where otherwise. ``out``: an array of the result's shape
    and dtype to write it into (np.where has no ``out=``: a fused pass's block of
    rows); an ``out`` that overlaps an operand gets the result computed aside,
    then copied in, unless it is ``a`` or ``b`` itself and the lanes route
    applies."""
    if out is not None and any(
        isinstance(v, np.ndarray) and np.may_share_memory(out, v)
        for v in (condition, a, b)
    ):  # (the masking route writes the lanes first: it would spoil the values)
        for values, zero, keep in ((a, b, True), (b, a, False)):
            if out is values and _maskable(condition, values, zero):
                lanes = values.view(_LANES[values.dtype.itemsize])
                _masked(lanes, condition, keep, lanes)  # (in place: the values' own)
                return out
        if _selected(condition, a, b, out) is None:
            np.copyto(out, _where(condition, a, b))
        return out
    for values, zero, keep in ((a, b, True), (b, a, False)):
        if _maskable(condition, values, zero) and (
            out is None or (out.shape, out.dtype) == (values.shape, values.dtype)
        ):
            lanes_type = _LANES[values.dtype.itemsize]
            lanes = None if out is None else out.view(lanes_type)
            lanes = _masked(values.view(lanes_type), condition, keep, lanes)
            return lanes.view(values.dtype) if out is None else out
    chosen = _selected(condition, a, b, out)
    if chosen is not None:
        return chosen
    if out is None:
        return np.where(condition, a, b)
    np.copyto(out, np.where(condition, a, b))
    return out


def _selected(condition, a, b, out):
    """``where(condition, a, b)`` as the bits of b, XORed with those of ``a ^ b``
    times the mask's 1s and 0s (three passes over integer lanes: a random mask's
    np.where branches on each element; 131072 float64, 155 against 457 us), where
    the mask is mixed (``_MIXED``: else np.where predicts its branches): the
    same bits as np.where's, NaN payloads and signed zeros included. For a boolean
    array ``condition`` and arrays ``a``, ``b`` of one native float dtype (a Python
    number as one of them is taken in that dtype, as NumPy takes it); into ``out``
    (None: a new array), which may be ``a`` or ``b`` itself but must not otherwise
    overlap an operand. None, nothing written, where it does not apply."""
    arrays = [v for v in (a, b) if type(v) is np.ndarray]
    if (
        not arrays
        or type(condition) is not np.ndarray
        or condition.dtype != bool
        or condition.size < _LANES_FROM
    ):
        return None
    share = np.count_nonzero(condition) / condition.size
    if not _MIXED[0] < share < _MIXED[1]:
        return None  # np.where's branches are then predicted: it is faster
    dtype = arrays[0].dtype
    if (
        dtype.kind != "f"
        or not dtype.isnative
        or dtype.itemsize not in _LANES
        or any(v.dtype != dtype for v in arrays)
        or any(type(v) not in (np.ndarray, float, int) for v in (a, b))
    ):
        return None
    a, b = (v if type(v) is np.ndarray else _as_dtype(v, dtype) for v in (a, b))
    if a is None or b is None:
        return None
    shape = np.broadcast_shapes(condition.shape, a.shape, b.shape)
    if out is None:
        out = np.empty(shape, dtype)
    elif out.shape != shape or out.dtype != dtype:
        return None
    first, second, mask = a, b, condition
    if out is b:  # b's bits are needed last: start from a's instead
        first, second, mask = b, a, np.logical_not(condition)
    if (
        np.may_share_memory(out, condition)
        or np.may_share_memory(out, second)
        or (out is not first and np.may_share_memory(out, first))
    ):
        return None
    lanes_type = _LANES[dtype.itemsize]
    lanes = out.view(lanes_type)
    np.bitwise_xor(first.view(lanes_type), second.view(lanes_type), out=lanes)
    np.multiply(lanes, mask, out=lanes)
    np.bitwise_xor(lanes, second.view(lanes_type), out=lanes)
    return out


# the share of a mask's True values within which picking by lanes beats np.where
# (131072 float64, random masks 20% to 90% True: np.where 155-440 us, the lanes
# 125-180; 1%, 5% or 99% True: np.where 80-105 us; counting them takes 6 us)
_MIXED = (0.08, 0.92)
# elements from which the lanes' checks (a few microseconds of Python) cost less
# than they save over np.where
_LANES_FROM = 1 << 14


def select_in_place(condition, a, b, into: np.ndarray) -> bool:
    """``where(condition, a, b)`` written into ``into``, which is ``a`` or ``b``
    (the caller guarantees nothing else reads it), by ``_selected``; False, nothing
    written, where that does not apply or ``into`` is read-only."""
    return into.flags.writeable and _selected(condition, a, b, into) is not None


def _as_dtype(number, dtype: np.dtype):
    """A Python number as a 0-d array of ``dtype``, as np.where takes it beside
    arrays of that dtype; None where it does not fit (an integer too large, a
    float past float32's range: np.where would warn or keep it otherwise)."""
    if math.isfinite(number) and abs(number) > np.finfo(dtype).max:
        return None
    value = np.asarray(number, dtype)
    if type(number) is int and int(value) != number:
        return None
    return value


where_into = _where  # (for fused passes, which write each value into a block)


def mask_in_place(condition, values, zero, keep: bool) -> bool:
    """``where(condition, values, zero)`` (``keep``; else ``where(condition, zero,
    values)``) written into ``values`` itself by ``_where``'s masking: NaN and
    infinities kept where not zeroed. False, nothing written, where ``_where``
    would not take its masking route for them or ``values`` is read-only (the
    caller guarantees nothing else reads ``values``)."""
    if not (_maskable(condition, values, zero) and values.flags.writeable):
        return False
    lanes = values.view(_LANES[values.dtype.itemsize])
    _masked(lanes, condition, keep, lanes)
    return True


def _masked(lanes: np.ndarray, condition, keep: bool, out) -> np.ndarray:
    """``lanes`` (a float array's bits as integers) times ``condition``'s 1s and
    0s (``keep``; else its negation's), into ``out`` (None: a new array). The
    booleans are widened inside the multiplication's loop: measured against
    ANDing lanes of all ones made from the mask (a byte pass, a widening cast,
    the AND), 256x256 float32 44 vs 50 us and 1000x1000 537 vs 699 us with the
    caches cold; in place, 36.5 vs 45 us."""
    mask = condition if keep else np.logical_not(condition)
    return np.multiply(lanes, mask, out=out)


def _maskable(condition, values, zero) -> bool:
    """Whether ``where(condition, values, zero)`` (or the two swapped) takes the
    masking route: ``zero`` is +0 (-0.0 must stay -0.0), ``values`` an array of
    native floats with at least one axis and ``condition`` a boolean array of its
    shape."""
    return (
        type(zero) in (float, int)
        and zero == 0
        and math.copysign(1.0, zero) > 0
        and type(values) is np.ndarray
        and values.ndim > 0
        and values.dtype.kind == "f"
        and values.dtype.isnative
        and values.dtype.itemsize in _LANES
        and type(condition) is np.ndarray
        and condition.dtype == bool
        and condition.shape == values.shape
    )


_LANES = {2: np.int16, 4: np.int32, 8: np.int64}  # float itemsize -> integer lanes


_NUMPY_OWN = {
    "reduce_sum": _reduce_sum,
    "reduce_mean": _reduce_mean,
    "reduce_max": _reduce_max,
    "reduce_min": _reduce_min,
    "ones_like": _ones_like,
    "where": _where,
    "unreduce": _unreduce,
}


class CupyBackend(Backend):
    """CuPy for ``cuda:N``; CuPy is imported on first use so ppto runs without it."""

    kind = "cuda"
    accelerator = True

    def __init__(self) -> None:
        self._cupy: ModuleType | None = None
        self._import_error: Exception | None = None

    def _load(self) -> ModuleType:
        if self._cupy is None:
            if self._import_error is not None:
                raise self._unavailable()
            try:
                self._cupy = importlib.import_module("cupy")
            except Exception as error:  # ImportError, or CUDA libraries missing
                self._import_error = error
                raise self._unavailable() from error
        return self._cupy

    def _unavailable(self) -> DeviceError:
        return DeviceError(
            f"device 'cuda' needs CuPy and an NVIDIA GPU ({self._import_error}); "
            "install it with pip install 'ppto[cuda]' or use device='cpu'"
        )

    @property
    def xp(self) -> ModuleType:
        return self._load()

    def is_loaded(self) -> bool:
        return self._cupy is not None

    def device_count(self) -> int:
        try:
            return self._load().cuda.runtime.getDeviceCount()
        except DeviceError:
            return 0
        except Exception:  # a CuPy install with no usable driver
            return 0

    def from_host(self, array: np.ndarray, index: int) -> Any:
        cupy = self._load()
        with cupy.cuda.Device(index):
            return cupy.asarray(array)

    def to_host(self, array: Any) -> np.ndarray:
        return self._load().asnumpy(array)

    def owns(self, array: Any) -> bool:
        return type(array).__module__.startswith("cupy")

    def index_of(self, array: Any) -> int:
        return array.device.id

    def synchronize(self) -> None:
        """Wait for every stream on every device."""
        if self._cupy is not None:
            for index in range(self.device_count()):
                self._cupy.cuda.Device(index).synchronize()

    def new_stream(self, index: int) -> Any:
        cupy = self._load()
        if os.environ.get("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "0") not in ("", "0"):
            raise DeviceError(
                "ppto.stream orders named streams against CUDA's legacy default "
                "stream, which CUPY_CUDA_PER_THREAD_DEFAULT_STREAM replaces: unset "
                "it to use ppto.stream"
            )
        with cupy.cuda.Device(index):  # (a stream belongs to the current device)
            # blocking: ordered against the default stream (see runtime/streams.py)
            return cupy.cuda.Stream(non_blocking=False)

    def using(self, queue: Any, index: int):
        stack = contextlib.ExitStack()
        stack.enter_context(self._load().cuda.Device(index))
        stack.enter_context(queue)
        return stack

    def record(self, queue: Any, index: int) -> Any:
        cupy = self._load()
        with cupy.cuda.Device(index):  # (an event, its stream and device go together)
            event = cupy.cuda.Event(disable_timing=True)
            event.record(queue or cupy.cuda.get_current_stream())
        return event

    def wait(self, queue: Any, event: Any, index: int) -> None:
        cupy = self._load()
        with cupy.cuda.Device(index):
            (queue or cupy.cuda.get_current_stream()).wait_event(event)

    def host_wait(self, event: Any) -> None:
        event.synchronize()

    def finish(self, queue: Any) -> None:
        queue.synchronize()

    def done(self, event: Any) -> bool:
        return event.done


class RegisteredBackend(Backend):
    """Adapts a user's backend class or object (see ``ppto.register_backend``).

    The user object provides ``<op>_impl`` functions and optionally ``xp`` (an array
    namespace for the operators it does not override), ``from_numpy``/``to_numpy``,
    ``device_count``, ``accelerator`` (default True: it wins over ``cpu``),
    ``synchronize``, and streams: ``new_stream`` with the other methods of the
    stream protocol (``Backend.using`` and the rest), or none of them.
    """

    def __init__(
        self,
        kind: str,
        user_backend: Any,
        names: dict | None = None,
        check: Callable | None = None,
    ) -> None:
        """``names``: an ``<op>_impl`` name's operator where it is an alias
        (``matmul`` -> ``dot``); ``check(kind, op_name, args, params, out)`` raises
        where an implementation's result is not what the operator gives."""
        self.kind = kind
        self.user = user_backend
        self.accelerator = bool(getattr(user_backend, "accelerator", True))
        self._xp = getattr(user_backend, "xp", None)
        names = names or {}
        self._overrides = {
            names.get(name, name): getattr(user_backend, f"{name}_impl")
            for name in implemented_names(user_backend)
        }
        self._check = check
        self._checked: dict[str, Callable] = {}
        if self._xp is None and not self._overrides:
            raise BackendError(
                f"backend {kind!r} defines no operator: give it functions such as "
                "dot_impl(a, b), or an array namespace attribute xp"
            )
        count = getattr(user_backend, "device_count", 1)
        if not callable(count):
            self._checked_count(count)  # (a bad one broke ppto.devices() for all)

    @property
    def xp(self) -> ModuleType | None:
        return self._xp

    def device_count(self) -> int:
        count = getattr(self.user, "device_count", 1)
        return self._checked_count(count() if callable(count) else count)

    def _checked_count(self, count: Any) -> int:
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            raise BackendError(
                f"backend {self.kind!r}: device_count must be a whole number of "
                f"devices (or a function giving one), got {count!r}"
            )
        if count < 0:
            raise BackendError(
                f"backend {self.kind!r}: device_count is {count}, a negative number"
            )
        return int(count)

    def from_host(self, array: np.ndarray, index: int) -> Any:
        convert = getattr(self.user, "from_numpy", None)
        if convert is None:
            return array.copy()
        made = convert(array)
        shape = getattr(made, "shape", None)
        if shape is None or tuple(shape) != array.shape or not hasattr(made, "dtype"):
            raise BackendError(
                f"backend {self.kind!r}: from_numpy turned an array of shape "
                f"{array.shape} into a {type(made).__name__} of shape {shape}: it "
                "must return an array of the same shape, with a dtype"
            )
        return made

    def to_host(self, array: Any) -> np.ndarray:
        convert = getattr(self.user, "to_numpy", None)
        return np.asarray(convert(array) if convert else array)

    def new_stream(self, index: int) -> Any:
        make = getattr(self.user, "new_stream", None)
        return make(index) if make is not None else None

    def using(self, queue: Any, index: int):
        return self.user.using(queue, index)

    def record(self, queue: Any, index: int) -> Any:
        record = getattr(self.user, "record", None)
        return record(queue, index) if record is not None else None

    def wait(self, queue: Any, event: Any, index: int) -> None:
        self.user.wait(queue, event, index)

    def host_wait(self, event: Any) -> None:
        self.user.host_wait(event)

    def finish(self, queue: Any) -> None:
        self.user.finish(queue)

    def done(self, event: Any) -> bool:
        done = getattr(self.user, "done", None)  # (without it: kept until sync)
        return done(event) if done is not None else False

    def synchronize(self) -> None:
        synchronize = getattr(self.user, "synchronize", None)
        if synchronize is not None:
            synchronize()

    def override(self, op_name: str) -> Callable | None:
        own = self._overrides.get(op_name)
        if own is None:
            return None
        checked = self._checked.get(op_name)
        if checked is None:
            checked = self._checked[op_name] = self._run_checked(op_name, own)
        return checked

    def _run_checked(self, op_name: str, own: Callable) -> Callable:
        """``own`` (the user's ``<op>_impl``), its result checked (``check``) and
        its errors named: NumPy's kinds of refusal of the inputs pass on (the
        operator names what its inputs lacked, as for ppto's own backends); an
        implementation that cannot take the arguments ppto passes, or raises
        anything else, is a BackendError naming the backend and the operator (its
        TypeError was a ShapeError about the inputs, a RuntimeError came out raw)."""
        kind, check = self.kind, self._check

        def checked(*args, **params):
            try:
                out = own(*args, **params)
            except (PptoError, ValueError, IndexError, OverflowError):
                raise
            except TypeError as error:
                if _binds(own, args, params):
                    raise
                given = ", ".join(["array"] * len(args) + [f"{k}=" for k in params])
                raise BackendError(
                    f"backend {kind!r}: {op_name}_impl cannot be called as ppto "
                    f"calls it, {op_name}_impl({given}): {error}; give it the "
                    f"parameters of ppto.{op_name}"
                ) from error
            except Exception as error:
                raise BackendError(
                    f"backend {kind!r}: {op_name}_impl raised "
                    f"{type(error).__name__}: {error}"
                ) from error
            if check is not None:
                check(kind, op_name, args, params, out)
            return out

        checked.__name__ = f"{op_name}_impl"
        return checked

    def operator_names(self) -> list[str]:
        return sorted(self._overrides)


def _binds(function: Callable, args: tuple, params: dict) -> bool:
    """Whether ``function`` takes ``args`` and ``params`` (True where its signature
    cannot be read: its own error then stands)."""
    try:
        inspect.signature(function).bind(*args, **params)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


_BACKENDS: dict[str, Backend] = {"cpu": NumpyBackend(), "cuda": CupyBackend()}


def loaded_backends() -> list[Backend]:
    """The backends in use (CuPy's once imported)."""
    return [
        backend
        for backend in _BACKENDS.values()
        if getattr(backend, "is_loaded", lambda: True)()
    ]


def implemented_names(user_backend: Any) -> list[str]:
    """The operator names of a user backend's ``<op>_impl`` functions (a name with
    a leading underscore is the backend's own helper)."""
    return [
        name[: -len("_impl")]
        for name in dir(user_backend)
        if name.endswith("_impl")
        and not name.startswith("_")
        and callable(getattr(user_backend, name))
    ]


def register_backend(
    name: str, backend: Any, names: dict | None = None, check: Callable | None = None
) -> None:
    """Make ``device=name`` usable, run by ``backend``'s ``<op>_impl`` functions.

    >>> class Doubler:
    ...     xp = np
    ...     def dot_impl(a, b): return 2 * (a @ b)
    >>> register_backend("doubler", Doubler)        # doctest: +SKIP
    """
    check_backend_name(name)
    _BACKENDS[name] = RegisteredBackend(name, backend, names, check)


def check_backend_name(name: Any) -> None:
    """Refuse a name that cannot be a device kind, or is a built-in one."""
    if not isinstance(name, str) or not name.isidentifier():
        raise BackendError(
            f"a backend name is an identifier such as 'my_hw', got {name!r}"
        )
    if name in ("cpu", "cuda"):
        raise BackendError(
            f"{name!r} is built in; register your backend under another name"
        )


def unregister_backend(name: str) -> None:
    """Remove a backend added with ``register_backend``."""
    if name in ("cpu", "cuda") or name not in _BACKENDS:
        raise BackendError(f"no registered backend named {name!r}")
    del _BACKENDS[name]


def backend_for(device: Device) -> Backend:
    """The backend of ``device``, checking that the device exists."""
    backend = _BACKENDS.get(device.kind)
    if backend is None:
        known = ", ".join(sorted(_BACKENDS))
        raise DeviceError(
            f"unknown device {str(device)!r}: known kinds are {known}; "
            "add one with ppto.register_backend(name, backend)"
        )
    if device.index != 0 or device.kind == "cuda":
        count = backend.device_count()
        if device.index >= count:
            if device.kind == "cuda" and count == 0:
                raise DeviceError(
                    "device 'cuda' needs CuPy and a usable NVIDIA GPU, and none was "
                    "found: install CuPy with pip install 'ppto[cuda]' on a machine "
                    "with a GPU, or use device='cpu'"
                )
            raise DeviceError(
                f"device {str(device)!r} does not exist: {device.kind} has {count} "
                f"device(s), numbered from 0"
            )
    return backend


def backend_of_array(array: Any) -> tuple[Backend, int] | None:
    """The backend owning a raw array, with its device index; None for host data."""
    cupy_backend = _BACKENDS["cuda"]
    if cupy_backend.owns(array):
        return cupy_backend, cupy_backend.index_of(array)
    return None


def device_of(value: Any) -> Any:
    """The ppto Device of a raw array, as a tensor on it reports (``x.device`` read
    in generated code, which computes on raw arrays: a CuPy array's own ``.device``
    is CuPy's, unequal to "cuda:0", so a test of it took the other branch on a
    GPU); for anything else (an object's attribute), its own ``.device``."""
    for kind, backend in _BACKENDS.items():
        if backend.owns(value):
            return (
                Device("cpu")
                if kind == "cpu"
                else Device(kind, backend.index_of(value))
            )
    return value.device


def devices() -> list[Device]:
    """Every usable device: ``cpu``, each visible GPU, and registered backends'."""
    found = [Device("cpu")]
    for kind, backend in _BACKENDS.items():
        if kind == "cpu":
            continue
        found.extend(Device(kind, index) for index in range(backend.device_count()))
    return found
