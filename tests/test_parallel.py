"""Worker threads for chunked passes: blocks cover the range in whole chunks, results
come back in block order, errors and NumPy's error state cross the threads."""

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

import ppto
from ppto.fusion.parallel import block_bounds, run_parts, thread_count


@pytest.mark.parametrize("size, chunk, workers", [
    (100, 10, 3), (101, 10, 3), (95, 10, 4), (40, 10, 4), (7, 10, 1), (1000, 7, 5),
])  # fmt: skip
def test_blocks_cover_the_range_in_whole_chunks(size, chunk, workers):
    bounds = block_bounds(size, chunk, workers)
    assert bounds[0] == 0 and bounds[-1] == size and len(bounds) == workers + 1
    assert all(a < b for a, b in zip(bounds, bounds[1:]))
    assert all(bound % chunk == 0 for bound in bounds[:-1])


def test_parts_run_on_several_threads_and_come_back_in_order(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "4")
    seen = []

    def part(begin, end):
        seen.append(threading.get_ident())
        return begin, end

    results = run_parts(part, 1000, 10)
    assert [r[0] for r in results] == sorted(r[0] for r in results)
    assert results[0][0] == 0 and results[-1][1] == 1000
    assert all(a[1] == b[0] for a, b in zip(results, results[1:]))  # no gap, no overlap
    assert len(results) == 4 and len(set(seen)) > 1


def test_small_work_stays_in_the_calling_thread(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "4")
    threads = []
    run_parts(lambda b, e: threads.append(threading.get_ident()), 30, 10)
    assert threads == [threading.get_ident()]  # fewer than MIN_CHUNKS per worker


def test_errors_reach_the_caller_only_after_every_block_ends(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")
    finished = []

    def part(begin, end):
        if begin == 0:
            raise ValueError("the first block failed")
        time.sleep(0.05)  # the workers are still writing when the first block fails
        finished.append(begin)

    with pytest.raises(ValueError, match="first block"):
        run_parts(part, 1200, 100)
    assert len(finished) == 2


def test_an_error_in_a_worker_reaches_the_caller(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")

    def part(begin, end):
        if begin:
            raise ValueError(f"block at {begin}")

    with pytest.raises(ValueError, match="block at"):
        run_parts(part, 1200, 100)


def test_numpy_error_state_holds_in_workers(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "2")

    def part(begin, end):
        if begin:  # only the worker's block divides by zero
            np.log(np.zeros(1))

    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            run_parts(part, 800, 100)


def test_a_bad_thread_setting_is_named(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "many")
    with pytest.raises(ppto.PptoError, match="PPTO_NUM_THREADS='many'"):
        thread_count()
    monkeypatch.setenv("PPTO_NUM_THREADS", "0")
    assert thread_count() == 1


def _sum_in_parts(queue):
    import os

    os.environ["PPTO_NUM_THREADS"] = "2"
    results = run_parts(lambda begin, end: end - begin, 1000, 10)
    queue.put(sum(results))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_runs_parts_with_threads_of_its_own(monkeypatch):
    """The parent's worker threads do not exist in a forked child (as in a
    multiprocessing pool or a data loader): the child must start its own."""
    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    run_parts(lambda begin, end: None, 1000, 10)  # the parent's pool is running
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_sum_in_parts, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert queue.get(timeout=5) == 1000


def test_callers_on_several_threads_share_the_workers(monkeypatch):
    """Four threads of a program compute gradients at once; each waits only for
    its own blocks and gets its own, correct result."""
    from concurrent.futures import ThreadPoolExecutor

    from ppto.fusion.kernels import CHUNK_BYTES

    def chain(x, y):
        return np.sum(np.tanh(x * y) * np.exp(-x))

    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    size = 6 * (CHUNK_BYTES // 8)
    rng = np.random.default_rng(4)
    inputs = [(rng.standard_normal(size), rng.standard_normal(size)) for _ in range(4)]
    gradient = ppto.grad(chain, wrt=(0, 1))
    expected = [[g.numpy() for g in gradient(*pair)] for pair in inputs]
    with ThreadPoolExecutor(4) as callers:
        results = list(callers.map(lambda pair: gradient(*pair), inputs * 3))
    for got, want in zip(results, expected * 3):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b)
