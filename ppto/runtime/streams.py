"""Streams: ``with ppto.stream("compute"): ...`` queues the operators issued in the
block on the stream of that name, and ``ppto.sync()`` waits for every stream.

On a GPU a stream is a queue of kernels (a CUDA stream, one per name and device,
made on first use): an operator issued on it returns at once while the GPU works, so
work on two streams overlaps (compute on one, copies and loading on another). On the
CPU, NumPy computes each operator as it is called: a stream there changes nothing,
and ``sync`` has nothing to wait for. A registered backend takes part by providing
all the methods of ``Backend``'s stream protocol (``new_stream`` and the rest).

Reading a tensor is always safe, whatever stream made it:

- Named CUDA streams are *blocking* streams: work on CUDA's default stream (what
  runs outside any ``ppto.stream`` block, copies included) waits for the work
  queued on them before it, and they wait for the default stream's. So only two
  named streams can overlap, and between them ppto orders reads itself:
- an operator on one named stream that reads a tensor made on another first waits
  for the event recorded when the tensor was made;
- and the reading stream's event keeps the tensor's memory alive until the read is
  done (CuPy's memory pool would otherwise hand a freed block back to the stream
  that made it while the other still reads it).

``sync`` waits for everything, on every device. A thread started inside a
``ppto.stream`` block issues its operators on the default stream unless it enters a
block of its own (the stream is a context variable, which threads do not inherit).

Until a stream is entered, operators check one flag (``in_use``); it drops again
once no block is open, no tensor made on a stream is alive and no read across
streams is pending.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref

from ppto.errors import PptoError

in_use = False  # a block is open, or a tensor made on a stream is alive
_current: contextvars.ContextVar = contextvars.ContextVar("ppto_stream", default=None)
_lock = threading.RLock()  # (shared tables; a finalizer may run while held)
_open = 0  # stream blocks open, in all threads
_streams: dict[tuple, tuple] = {}  # (name, kind, index) -> (backend, its stream)
_made_on: dict[int, tuple] = {}  # id(tensor) -> (stream key, backend, event)
_reading: list = []  # (backend, event, arrays): read on another stream until event

# the stream protocol's methods (Backend's; ``done`` may be left out)
PROTOCOL = ("new_stream", "using", "record", "wait", "host_wait", "finish", "done")


class stream:  # noqa: N801 (used as a function: with ppto.stream("io"): ...)
    """Queue the operators issued in the block on stream ``name``.

    One object may be entered again, and inside itself (a generator-based
    context manager was single use: the second ``with s:`` raised
    AttributeError from contextlib).

    >>> with ppto.stream("compute"):            # doctest: +SKIP
    ...     y = model(x)
    >>> with ppto.stream("io"):                  # doctest: +SKIP
    ...     x_next = ppto.tensor(batch, device="cuda")
    >>> ppto.sync()                              # doctest: +SKIP
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise PptoError(f"a stream is named by a non-empty string, got {name!r}")
        self.name = name
        self._entered = threading.local()  # (one object may be used by threads)

    def __enter__(self) -> str:
        global in_use, _open
        with _lock:
            _open += 1
            in_use = True
        tokens = self._entered.__dict__.setdefault("tokens", [])
        tokens.append(_current.set(self.name))
        return self.name

    def __exit__(self, *exc_info) -> None:
        global _open
        _current.reset(self._entered.tokens.pop())
        with _lock:
            _open -= 1
            _settle()


def current() -> str | None:
    """The name of the stream operators are issued on here (None: the default)."""
    return _current.get()


def sync() -> None:
    """Wait until the work queued on every stream, on every device, is done."""
    from ppto.runtime.backends import loaded_backends

    with _lock:
        queues, reads = list(_streams.values()), list(_reading)
    for backend, queue in queues:
        backend.finish(queue)
    for backend in loaded_backends():
        backend.synchronize()
    with _lock:  # (the reads queued before the waits are done; later ones may not)
        finished = {id(entry) for entry in reads}
        _reading[:] = [entry for entry in _reading if id(entry) not in finished]
        _settle()


def running(backend, device, inputs: list):
    """``(context, plan)``: the context an operator on ``device`` runs in (its
    stream made current, after waiting for inputs made on other named streams),
    and what ``record`` needs afterwards (None: the default stream)."""
    name = _current.get()
    if name is None:
        return contextlib.nullcontext(), None
    key = (name, device.kind, device.index)
    with _lock:
        known = _streams.get(key)
        if known is None:
            queue = backend.new_stream(device.index)
            if queue is None:  # a backend that computes as it is called
                return contextlib.nullcontext(), None
            known = _streams[key] = (backend, queue)
    queue = known[1]
    foreign = []
    for value in inputs:
        made = _made_on.get(id(value))
        if made is not None and made[0] != key and made[1] is backend:
            backend.wait(queue, made[2], device.index)
            foreign.append(value.data)
    return backend.using(queue, device.index), (key, queue, foreign)


def record(backend, device, plan, outputs) -> None:
    """After an operator ran by ``running``'s plan: note which stream made
    ``outputs``, and keep inputs read from other streams alive until it is done."""
    if plan is None:
        return
    key, queue, foreign = plan
    event = backend.record(queue, device.index)
    with _lock:
        _remember(outputs, (key, backend, event))
        if foreign:
            _reading.append((backend, event, foreign))
        _settle()


def run_generated(backend, device, call):
    """``call()`` (generated code on ``device``) on the current stream, returning
    once its work is done: its results are raw arrays, which carry no events."""
    context, plan = running(backend, device, ())
    with context:
        result = call()
    queue = plan[1] if plan is not None else None
    event = backend.record(queue, device.index)
    if event is not None:
        backend.host_wait(event)
    return result


def ready(value) -> None:
    """Block the host until ``value`` (a tensor, or a list or tuple of them) is made:
    before it is copied or read by generated code."""
    if isinstance(value, (list, tuple)):
        for item in value:
            ready(item)
        return
    made = _made_on.get(id(value))
    if made is not None:
        made[1].host_wait(made[2])


def same_origin(target, source) -> None:
    """``target`` now holds ``source``'s data (``x[i] = v`` writes a new array into
    x): it was made where, and when, that data was, so readers on other streams
    wait for it as for ``source``."""
    made = _made_on.get(id(source))
    if made is not None:
        with _lock:
            _remember(target, made)


def _remember(value, made: tuple) -> None:
    from ppto.runtime.tensor import Tensor

    if isinstance(value, (list, tuple)):
        for item in value:
            _remember(item, made)
    elif isinstance(value, Tensor):
        if id(value) not in _made_on:
            weakref.finalize(value, _forget, id(value))
        _made_on[id(value)] = made


def _forget(identity: int) -> None:
    with _lock:
        _made_on.pop(identity, None)
        _settle()


def _settle() -> None:
    """Let go of what reads have finished with, and drop ``in_use`` once nothing
    needs it (called holding ``_lock``)."""
    global in_use
    _reading[:] = [entry for entry in _reading if not entry[0].done(entry[1])]
    in_use = bool(_open or _made_on or _reading)
