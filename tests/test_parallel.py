"""Worker threads for chunked passes: every chunk is claimed once, small work stays in
the calling thread, errors and NumPy's error state cross the threads, a forked child
and several calling threads work."""

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

import ppto
from ppto.fusion.parallel import run_chunks, thread_count


def _recorder(delay=0.0):
    claimed = []

    def work(claim):
        for number in iter(claim, None):
            claimed.append((number, threading.get_ident()))
            time.sleep(delay)

    return work, claimed


@pytest.mark.parametrize("threads", ["1", "2", "4"])
@pytest.mark.parametrize("count", [1, 2, 7, 100])
def test_every_chunk_is_claimed_exactly_once(threads, count, monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", threads)
    work, claimed = _recorder()
    run_chunks(work, count)
    assert sorted(number for number, _ in claimed) == list(range(count))


def test_chunks_go_to_several_threads(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")
    work, claimed = _recorder(delay=0.01)  # slow chunks: the workers wake and claim
    run_chunks(work, 80)  # (a second of work: time for a worker on a busy machine)
    assert sorted(number for number, _ in claimed) == list(range(80))
    assert len({thread for _, thread in claimed}) > 1


def test_small_work_stays_in_the_calling_thread(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "4")
    work, claimed = _recorder(delay=0.01)
    run_chunks(work, 3)  # fewer than MIN_CHUNKS per second thread
    assert {thread for _, thread in claimed} == {threading.get_ident()}


def test_errors_reach_the_caller_only_after_every_claimed_chunk_ends(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "3")
    caller = threading.get_ident()
    started, finished = [], []

    def work(claim):
        for number in iter(claim, None):
            if threading.get_ident() == caller and started:
                raise ValueError("the calling thread failed")
            started.append(number)
            time.sleep(0.05)  # still writing when the calling thread fails
            finished.append(number)

    with pytest.raises(ValueError, match="calling thread"):
        run_chunks(work, 50)
    assert sorted(started) == sorted(finished)
    assert len(started) < 10  # no chunk handed out after the failure


def test_an_error_in_a_worker_reaches_the_caller(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    caller = threading.get_ident()

    def work(claim):
        for number in iter(claim, None):
            if threading.get_ident() != caller:
                raise ValueError(f"chunk {number} failed on a worker")
            time.sleep(0.05)  # the worker has time to wake and claim

    with pytest.raises(ValueError, match="failed on a worker"):
        run_chunks(work, 40)


def test_numpy_error_state_holds_in_workers(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    caller = threading.get_ident()

    def work(claim):
        for _ in iter(claim, None):
            if threading.get_ident() != caller:  # only a worker divides by zero
                np.log(np.zeros(1))
            time.sleep(0.05)

    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            run_chunks(work, 40)


def test_a_bad_thread_setting_is_named(monkeypatch):
    monkeypatch.setenv("PPTO_NUM_THREADS", "many")
    with pytest.raises(ppto.PptoError, match="PPTO_NUM_THREADS='many'"):
        thread_count()
    monkeypatch.setenv("PPTO_NUM_THREADS", "0")
    assert thread_count() == 1


def _claim_in_child(queue):
    os.environ["PPTO_NUM_THREADS"] = "2"
    work, claimed = _recorder(delay=0.01)
    run_chunks(work, 20)
    queue.put(sorted(number for number, _ in claimed))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_runs_chunks_with_threads_of_its_own(monkeypatch):
    """The parent's worker threads do not exist in a forked child (as in a
    multiprocessing pool or a data loader): the child must start its own."""
    monkeypatch.setenv("PPTO_NUM_THREADS", "2")
    work, _ = _recorder(delay=0.01)
    run_chunks(work, 20)  # the parent's pool is running
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_claim_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert queue.get(timeout=5) == list(range(20))


def test_callers_on_several_threads_share_the_workers(monkeypatch):
    """Four threads of a program compute gradients at once; each gets its own,
    correct result."""
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


def test_callers_needing_pools_of_different_sizes_at_once(monkeypatch):
    """Found in review: a caller replacing the pool with a larger one shut it down
    while another caller was about to submit to it ("cannot schedule new futures
    after shutdown")."""
    from concurrent.futures import ThreadPoolExecutor

    from ppto.fusion import parallel

    monkeypatch.setenv("PPTO_NUM_THREADS", "8")
    for _ in range(30):
        monkeypatch.setattr(parallel, "_pool", None)  # every round grows the pool
        monkeypatch.setattr(parallel, "_pool_size", 0)
        counts = list(range(4, 18, 2))

        def run(count):
            work, claimed = _recorder()
            run_chunks(work, count)
            return sorted(number for number, _ in claimed)

        with ThreadPoolExecutor(len(counts)) as callers:
            results = list(callers.map(run, counts))
        assert results == [list(range(count)) for count in counts]
