"""Streams: operators issued in ``with ppto.stream(name)`` go to that stream; a
tensor read on another stream, or copied to the host, is waited for first; ``sync``
waits for every stream. Checked through a backend that logs the stream protocol
(and, under the ``gpu`` marker, on CuPy)."""

import itertools

import numpy as np
import pytest

import ppto
from ppto.runtime import streams
from tests.conftest import cuda_available


class Logged:
    """A registered device whose streams log what ppto asks of them."""

    xp = np
    log: list = []
    made = itertools.count()

    @staticmethod
    def new_stream(index):
        stream = f"stream{next(Logged.made)}"
        Logged.log.append(("new", stream, index))
        return stream

    @staticmethod
    def using(queue, index):
        import contextlib

        @contextlib.contextmanager
        def current():
            Logged.log.append(("enter", queue))
            yield
            Logged.log.append(("leave", queue))

        return current()

    @staticmethod
    def record(queue, index):
        event = f"event{next(Logged.made)}"
        Logged.log.append(("record", queue, event))
        return event

    @staticmethod
    def wait(queue, event, index):
        Logged.log.append(("wait", queue, event))

    @staticmethod
    def host_wait(event):
        Logged.log.append(("host_wait", event))

    @staticmethod
    def finish(queue):
        Logged.log.append(("finish", queue))

    finished: set = set()  # events done

    @staticmethod
    def done(event):
        return event in Logged.finished

    @staticmethod
    def synchronize():
        Logged.log.append(("synchronize",))


@pytest.fixture
def logged():
    Logged.log, Logged.made, Logged.finished = [], itertools.count(), set()
    ppto.register_backend("logged", Logged)
    yield Logged.log
    ppto.unregister_backend("logged")
    streams._streams.clear()


def queue(name):
    return streams._streams[(name, "logged", 0)][1]


def event_of(tensor):
    return streams._made_on[id(tensor)][2]


def test_operators_go_to_their_stream_and_readers_wait(logged):
    x = ppto.tensor(np.arange(4.0), device="logged")
    with ppto.stream("compute"):
        y = ppto.exp(x)
        z = y * 2.0  # the same stream: no wait
    compute = queue("compute")
    assert logged[:3] == [("new", compute, 0), ("enter", compute), ("leave", compute)]
    assert ("record", compute, event_of(y)) in logged
    assert not [e for e in logged if e[0] == "wait"]
    del logged[:]
    with ppto.stream("io"):
        w = z + 1.0  # made on "compute": "io" waits for it first
    io = queue("io")
    assert logged.index(("wait", io, event_of(z))) < logged.index(("enter", io))
    # z's memory is kept until io's read of it is done (CuPy's pool is per stream)
    assert any(entry[2][0] is z.data for entry in streams._reading)
    Logged.finished.add(event_of(w))
    del logged[:]
    total = ppto.reduce_sum(w)  # the default stream: ordered by CUDA, no event
    assert not [e for e in logged if e[0] in ("wait", "record")]
    host = w.numpy()  # the host waits for the stream that made w
    assert logged == [("host_wait", event_of(w))]
    assert float(total.numpy()) == pytest.approx(
        np.sum(np.exp(np.arange(4.0)) * 2.0 + 1.0)
    )
    np.testing.assert_allclose(host, np.exp(np.arange(4.0)) * 2.0 + 1.0)
    del logged[:]
    ppto.sync()
    assert ("finish", compute) in logged and ("finish", io) in logged
    assert ("synchronize",) in logged and not streams._reading
    del y, z, w
    assert not streams.in_use  # nothing open, no tensor made on a stream alive


def test_a_read_across_streams_is_let_go_once_done(logged):
    x = ppto.tensor(np.ones(3), device="logged")
    with ppto.stream("compute"):
        y = ppto.exp(x)
    with ppto.stream("io"):
        z = y * 2.0
    assert streams._reading and streams.in_use
    Logged.finished.update(e[2] for e in logged if e[0] == "record")
    del y, z  # the finalizers let go of the finished read
    assert not streams._reading and not streams.in_use


def test_a_write_on_a_stream_is_waited_for_by_readers_on_another(logged):
    # x[0] = 5.0 on "compute" wrote a new array into x, but the event recording
    # it went to a temporary tensor, so a read of x on "io" did not wait for it
    x = ppto.tensor(np.zeros(4), device="logged")
    with ppto.stream("compute"):
        x[0] = 5.0
    written = event_of(x)
    assert ("record", queue("compute"), written) in logged
    with ppto.stream("io"):
        y = x * 2.0
    assert logged.index(("wait", queue("io"), written)) < logged.index(
        ("enter", queue("io"))
    )
    np.testing.assert_array_equal(y.numpy(), [10.0, 0.0, 0.0, 0.0])


def test_uploads_inside_a_block_go_to_its_stream(logged):
    with ppto.stream("io"):
        batch = ppto.tensor(np.ones(3), device="logged")
    io = queue("io")
    assert ("enter", io) in logged and ("record", io, event_of(batch)) in logged


def test_a_partial_stream_protocol_is_refused():
    class Partial:
        xp = np
        new_stream = staticmethod(lambda index: "s")
        record = staticmethod(lambda queue, index: "e")

    with pytest.raises(ppto.BackendError, match="new_stream but not using, wait"):
        ppto.register_backend("partial", Partial)

    class Unrelated:  # a finish() of its own, no streams: accepted
        xp = np

        def finish(self):
            return None

    ppto.register_backend("unrelated", Unrelated)
    ppto.unregister_backend("unrelated")


def test_threads_making_one_stream_share_it(logged, monkeypatch):
    import threading
    import time

    x = ppto.tensor(np.ones(3), device="logged")
    start, failures = threading.Barrier(4), []
    making = Logged.new_stream

    def slow_to_make(index):  # (widens the window two threads could both make one)
        time.sleep(0.01)
        return making(index)

    monkeypatch.setattr(Logged, "new_stream", staticmethod(slow_to_make))

    def work():
        start.wait()
        try:
            with ppto.stream("shared"):
                ppto.exp(x)
        except Exception as error:  # (a thread's error would pass unseen)
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert len([e for e in logged if e[0] == "new"]) == 1


def test_a_stream_is_made_once_per_name_and_device(logged):
    x = ppto.tensor(np.ones(3), device="logged")
    for _ in range(3):
        with ppto.stream("compute"):
            x = ppto.tanh(x)
    assert [e for e in logged if e[0] == "new"] == [("new", "stream0", 0)]


def test_generated_code_on_a_stream_returns_when_done(logged):
    x = ppto.tensor(np.array([0.1, 0.2, 0.3]), device="logged")
    with ppto.stream("compute"):
        y = ppto.exp(x)
        gradient = ppto.grad(lambda v: ppto.reduce_sum(v * v))(y)
    entries = [e[0] for e in logged]
    # the argument made on "compute" is waited for, the code runs on the stream,
    # and the host waits for it before the gradient is handed back
    assert entries.count("host_wait") >= 2
    assert entries[-1] == "host_wait" or entries[-2] == "host_wait"
    np.testing.assert_allclose(gradient.numpy(), 2 * np.exp([0.1, 0.2, 0.3]))


def test_on_the_cpu_a_stream_changes_nothing():
    x = np.linspace(-1.0, 1.0, 5)
    expected = np.tanh(np.exp(x)) * 3.0
    with ppto.stream("compute"):
        y = ppto.tanh(ppto.exp(ppto.tensor(x))) * 3.0
    ppto.sync()
    np.testing.assert_array_equal(y.numpy(), expected)
    assert streams.current() is None


def test_a_stream_needs_a_name():
    with pytest.raises(ppto.PptoError, match="non-empty string"):
        with ppto.stream(3):
            pass


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU")
def test_cupy_streams_overlap_and_agree_with_the_cpu():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((512, 512)), rng.standard_normal((512, 512))
    A, B = ppto.tensor(a, device="cuda"), ppto.tensor(b, device="cuda")
    with ppto.stream("compute"):
        product = ppto.tanh(ppto.dot(A, B))
    with ppto.stream("io"):
        loaded = ppto.tensor(rng.standard_normal((512, 512)), device="cuda")
        moved = loaded * 2.0
    total = product + moved  # the default stream waits for both
    expected = np.tanh(a @ b) + 2.0 * np.asarray(loaded.numpy())
    np.testing.assert_allclose(total.numpy(), expected, rtol=1e-10)
    ppto.sync()


def test_per_thread_default_streams_are_refused(monkeypatch):
    # named streams rely on CUDA's legacy default stream for their ordering
    from types import SimpleNamespace

    from ppto.runtime.backends import CupyBackend

    backend = CupyBackend()
    backend._cupy = SimpleNamespace(cuda=None)  # (stands in for an imported CuPy)
    monkeypatch.setenv("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
    with pytest.raises(ppto.DeviceError, match="PER_THREAD_DEFAULT_STREAM"):
        backend.new_stream(0)


def test_one_stream_object_may_be_entered_again_and_inside_itself():
    # a generator-based context manager: the second with raised AttributeError
    # ('_GeneratorContextManager' object has no attribute 'args')
    compute = ppto.stream("compute")
    for _ in range(2):
        with compute as name:
            assert name == "compute"
            with compute:
                x = ppto.exp(ppto.tensor([0.0, 1.0]))
    ppto.sync()
    np.testing.assert_allclose(x.numpy(), np.exp([0.0, 1.0]))
    with pytest.raises(ppto.PptoError, match="non-empty string"):
        ppto.stream("")
