"""Worker threads for chunked passes.

NumPy's ufuncs release the GIL, so a region's chunks can run on several cores at once:
each worker takes one contiguous block of whole chunks, with buffers of its own, and
writes a disjoint slice of the outputs. Blocks are fixed by the size and the thread
count alone (no work stealing), so a result is the same on every call; the partial
sums a pass returns are added in block order.

The thread count is the number of cores this process may run on, or the environment
variable ``PPTO_NUM_THREADS`` (``1`` turns threading off).
"""

from __future__ import annotations

import contextvars
import os
from concurrent.futures import ThreadPoolExecutor, wait

MIN_CHUNKS = 2  # whole chunks per worker below which a thread costs more than it saves

_pool: ThreadPoolExecutor | None = None
_pool_process = 0  # the process that started the pool's threads


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


def block_bounds(size: int, chunk: int, workers: int) -> list[int]:
    """``workers + 1`` increasing offsets from 0 to ``size``, each a multiple of
    ``chunk`` but the last: the blocks of whole chunks the workers take."""
    chunks = -(-size // chunk)
    return [
        min(size, chunks * block // workers * chunk) for block in range(workers + 1)
    ]


def run_parts(part, size: int, chunk: int, workers: int | None = None) -> list:
    """``part(begin, end)`` over blocks of whole chunks covering ``0..size``, the
    first in this thread and the rest on workers; their results in block order. Each
    worker runs in a copy of the caller's context: NumPy's error state
    (``np.errstate``) holds there too. ``workers`` defaults to as many threads as
    allowed, each with ``MIN_CHUNKS`` chunks at least."""
    if workers is None:
        workers = min(thread_count(), size // (chunk * MIN_CHUNKS))
    if workers <= 1:
        return [part(0, size)]
    bounds = block_bounds(size, chunk, workers)
    pool = _workers(workers - 1)
    futures = [
        pool.submit(contextvars.copy_context().run, part, bounds[i], bounds[i + 1])
        for i in range(1, workers)
    ]
    try:
        first = part(bounds[0], bounds[1])
    finally:  # never return (or raise) while a worker still writes the outputs
        wait(futures)
    return [first, *(future.result() for future in futures)]


def _workers(count: int) -> ThreadPoolExecutor:
    global _pool, _pool_process
    if _pool_process != os.getpid():  # a forked child: the parent's threads are not
        _pool = None  # here, and a pool that counts them would never run its work
    if _pool is None or _pool._max_workers < count:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool = ThreadPoolExecutor(count, thread_name_prefix="ppto-chunks")
        _pool_process = os.getpid()
    return _pool
