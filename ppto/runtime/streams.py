"""Streams: ``with ppto.stream("compute"): ...`` queues the operators issued in the
block on the stream of that name, and ``ppto.sync()`` waits for every stream.

On a GPU a stream is a queue of kernels (a CUDA stream, one per name and device,
made on first use): an operator issued on it returns at once while the GPU works, so
work on two streams overlaps (compute on one, copies and loading on another). On the
CPU, NumPy computes each operator as it is called: a stream there changes nothing,
and ``sync`` has nothing to wait for. A registered backend takes part by providing
the methods of ``Backend``'s stream protocol (``new_stream`` and the rest).

Reading a tensor is always safe, whatever stream made it: the stream (or host copy)
that reads a tensor made on another stream first waits for the work that made it (an
event recorded on that stream when the tensor was made), so a tensor is never read
half-written; ``sync`` is only needed to wait for everything.

Until a stream is first entered, operators check one flag (``in_use``) and nothing
else.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref

from ppto.errors import PptoError

in_use = False  # set once any stream is entered
_current: contextvars.ContextVar = contextvars.ContextVar("ppto_stream", default=None)
_streams: dict[tuple, tuple] = {}  # (name, kind, index) -> (backend, its stream)
_made_on: dict[int, tuple] = {}  # id(tensor) -> (stream key, backend, event)


@contextlib.contextmanager
def stream(name: str):
    """Queue the operators issued in the block on stream ``name``.

    >>> with ppto.stream("compute"):            # doctest: +SKIP
    ...     y = model(x)
    >>> with ppto.stream("io"):                  # doctest: +SKIP
    ...     x_next = ppto.tensor(batch, device="cuda")
    >>> ppto.sync()                              # doctest: +SKIP
    """
    global in_use
    if not isinstance(name, str) or not name:
        raise PptoError(f"a stream is named by a non-empty string, got {name!r}")
    in_use = True
    token = _current.set(name)
    try:
        yield name
    finally:
        _current.reset(token)


def current() -> str | None:
    """The name of the stream operators are issued on here (None: the default)."""
    return _current.get()


def sync() -> None:
    """Wait until the work queued on every stream, on every device, is done."""
    from ppto.runtime.backends import loaded_backends

    for backend, queue in list(_streams.values()):
        backend.finish(queue)
    for backend in loaded_backends():
        backend.synchronize()


def running(backend, device, inputs: list):
    """``(context, key)``: the context an operator on ``device`` runs in (its stream
    made current, after waiting for inputs made on other streams), and the key its
    results are recorded under (None: the default stream)."""
    name = _current.get()
    key = queue = None
    if name is not None:
        key = (name, device.kind, device.index)
        known = _streams.get(key)
        queue = known[1] if known is not None else backend.new_stream(device.index)
        if queue is None:  # a backend that computes as it is called
            key = None
        elif known is None:
            _streams[key] = (backend, queue)
    for value in inputs:
        made = _made_on.get(id(value))
        if made is not None and made[0] != key and made[1] is backend:
            backend.wait(queue, made[2], device.index)
    if queue is None:
        return contextlib.nullcontext(), None
    return backend.using(queue, device.index), key


def record(backend, device, key, outputs) -> None:
    """Note which stream made ``outputs`` (tensors), so that another stream, or the
    host, reading them waits for it."""
    queue = _streams[key][1] if key is not None else None
    event = backend.record(queue, device.index)
    if event is not None:
        _remember(outputs, (key, backend, event))


def run_generated(backend, device, call):
    """``call()`` (generated code on ``device``) on the current stream, returning
    once its work is done: its results are raw arrays, which carry no events."""
    context, key = running(backend, device, ())
    with context:
        result = call()
    queue = _streams[key][1] if key is not None else None
    event = backend.record(queue, device.index)
    if event is not None:
        backend.host_wait(event)
    return result


def ready(value) -> None:
    """Block the host until ``value`` (a tensor, or a list or tuple of them) is made:
    before it is copied off its device or read by generated code."""
    if isinstance(value, (list, tuple)):
        for item in value:
            ready(item)
        return
    made = _made_on.get(id(value))
    if made is not None:
        made[1].host_wait(made[2])


def _remember(value, made: tuple) -> None:
    from ppto.runtime.tensor import Tensor

    if isinstance(value, (list, tuple)):
        for item in value:
            _remember(item, made)
    elif isinstance(value, Tensor):
        if id(value) not in _made_on:
            weakref.finalize(value, _made_on.pop, id(value), None)
        _made_on[id(value)] = made
