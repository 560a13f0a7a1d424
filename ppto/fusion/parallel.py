"""Worker threads for chunked passes.

NumPy's ufuncs release the GIL, so the chunks of a region (or the row blocks of a
fused kernel) can run on several cores at once. ``run_chunks`` hands chunk numbers out
one at a time to the calling thread and to workers, each with buffers of its own, that
write disjoint slices of the outputs. Which thread computes a chunk changes nothing in
its result, and partial sums are stored per chunk and added in chunk order, so a
region's results are the same on every call and for every thread count.

Handing chunks out as they are claimed (instead of fixed blocks per thread) matters on
shared and virtual machines: waking a sleeping worker can take a few hundred
microseconds and a core can be taken away for a while; the calling thread meanwhile
claims the chunks itself. A worker that has not started when the chunks run out is
cancelled rather than waited for.

The thread count is the number of cores this process may run on, or the environment
variable ``PPTO_NUM_THREADS`` (``1`` turns threading off).
"""

from __future__ import annotations

import contextvars
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

MIN_CHUNKS = 2  # chunks per thread below which a thread costs more than it saves

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _after_fork() -> None:
    """In a forked child the parent's worker threads are gone (a pool counting them
    would never run its work) and a thread of the parent may have held the lock."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size = None, 0
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def thread_count() -> int:
    """How many threads a chunked pass may use."""
    setting = os.environ.get("PPTO_NUM_THREADS", "").strip()
    if setting:
        try:
            return max(1, int(setting))
        except ValueError:
            from ppto.errors import PptoError

            raise PptoError(
                f"PPTO_NUM_THREADS={setting!r} is not a whole number of threads"
            ) from None
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity (macOS)
        return os.cpu_count() or 1


def run_chunks(
    work, count: int, min_chunks: int = MIN_CHUNKS, threads: int | None = None
) -> None:
    """``work(claim)`` in this thread and on as many workers as the thread count and
    ``count // min_chunks`` allow; ``claim()`` returns the number of a chunk no one
    has claimed yet (0 to ``count - 1``, each once) or None when all are. Returns once
    every claimed chunk is done; an error in any thread is raised here. Each worker
    runs in a copy of the caller's context: NumPy's error state (``np.errstate``)
    holds there too. ``threads``: the thread count, where the caller has it."""
    workers = min(threads or thread_count(), count // max(1, min_chunks))
    numbers = itertools.count()
    handing_out = threading.Lock()  # (itertools.count is atomic only under a GIL)
    failed = []  # once a thread fails, no more chunks are handed out

    def claim():
        with handing_out:
            number = next(numbers)
        return number if number < count and not failed else None

    def guarded(claim):
        try:
            work(claim)
        except BaseException:
            failed.append(True)
            raise

    if workers <= 1:
        work(claim)
        return
    futures = _submit(workers - 1, guarded, claim)
    try:
        guarded(claim)
    finally:
        _finish(futures, failed)
    for future in futures:
        if not future.cancelled():
            future.result()  # raises a worker's error


def _finish(futures: list, failed: list) -> None:
    """Cancel the workers still asleep (they have claimed nothing) and wait for the
    others: never return, or raise, while one still writes the outputs; an
    interruption meanwhile (Ctrl-C) stops the handing out and is raised after."""
    running = [future for future in futures if not future.cancel()]
    interrupted = None
    while True:
        try:
            wait(running)
            break
        except BaseException as error:
            failed.append(True)
            interrupted = error
    if interrupted is not None:
        raise interrupted


def _submit(count: int, work, claim) -> list:
    """``count`` calls of ``work(claim)`` on the pool, each in a copy of the
    caller's context. Under a lock: callers on several threads may need a larger
    pool at once, and a pool must not be replaced between getting and using it."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < count:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its running work still finishes
            _pool = ThreadPoolExecutor(count, thread_name_prefix="ppto-chunks")
            _pool_size = count
        return [
            _pool.submit(contextvars.copy_context().run, work, claim)
            for _ in range(count)
        ]
