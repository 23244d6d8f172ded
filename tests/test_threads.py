"""The scheduler across streams and threads (DESIGN §4, §5, §7)."""
import threading
import time
import types

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core.ops import build as b

from test_streams import in_thread

BIG = (256, 256)  # 65 536 elements: large enough to be handed to worker threads


def test_producer_and_consumer_on_two_streams(rng):
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    a_np = rng.standard_normal((128, 128)).astype(np.float32)
    a = mx.array(a_np)
    p = mx.exp(a, stream=s1) * 2
    c = mx.sum(p, axis=0, stream=s2) - 1
    mx.async_eval(c)
    mx.eval(c)
    want = (np.exp(a_np) * 2).sum(axis=0) - 1
    np.testing.assert_allclose(np.array(c), want, rtol=1e-5)
    np.testing.assert_allclose(np.array(p), np.exp(a_np) * 2, rtol=1e-6)


@pytest.mark.parametrize("size", [(8,), BIG])
@pytest.mark.parametrize("mode", ["eval", "async_then_eval", "async_then_read"])
def test_chain_alternating_streams(size, mode):
    streams = [mx.new_stream(mx.cpu), mx.new_thread_unsafe_stream(mx.cpu),
               mx.new_thread_local_stream(mx.cpu), mx.cpu]
    x = mx.zeros(size, dtype=mx.int32)
    for i in range(40):
        x = mx.add(x, i, stream=streams[i % len(streams)])
        if i % 7 == 0:
            x = mx.multiply(x, 1, stream=streams[(i + 1) % len(streams)])
    if mode == "eval":
        mx.eval(x)
    else:
        mx.async_eval(x)
        if mode == "async_then_eval":
            mx.eval(x)
    out = np.array(x)
    assert out.shape == size and (out == sum(range(40))).all()


def test_diamond_across_streams_async():
    s = [mx.new_stream(mx.cpu) for _ in range(4)]
    base = mx.arange(BIG[0] * BIG[1], stream=s[0]).reshape(BIG)
    left = mx.multiply(base, 2, stream=s[1])
    right = mx.add(base, 3, stream=s[2])
    both = mx.subtract(left, right, stream=s[3])
    mx.async_eval(left, both)
    mx.async_eval(right)
    want = np.arange(BIG[0] * BIG[1]).reshape(BIG) - 3
    np.testing.assert_array_equal(np.array(both), want)
    np.testing.assert_array_equal(np.array(right), want + 6)


def test_consumer_of_pending_producer_in_later_eval():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    x = mx.ones(BIG, stream=s1)
    for _ in range(10):
        x = mx.add(x, 1, stream=s1)
    mx.async_eval(x)
    y = mx.multiply(x, 2, stream=s2)  # x may still be running on s1
    mx.async_eval(y)
    z = mx.sum(y, stream=s1)
    assert z.item() == 22.0 * BIG[0] * BIG[1]


def _probe_primitive(log, barrier):
    """A test kernel that records the thread it ran on and waits for its twin."""
    def kernel(xp, a):
        log.append(threading.get_ident())
        barrier.wait()  # BrokenBarrierError if the two streams did not run at the same time
        return a + 1
    return b.make("probe", kernel)


def test_two_large_independent_streams_run_on_two_threads_at_once():
    log, barrier = [], threading.Barrier(2, timeout=20)
    prim = _probe_primitive(log, barrier)
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    outs = []
    for s in (s1, s2):
        a = mx.ones(BIG, stream=s)
        outs.append(b.node(prim, (a,), a.shape, a.dtype, b.NO_PARAMS, s._state))
    mx.eval(outs)
    assert len(log) == 2 and log[0] != log[1]
    assert all(np.array(o)[0, 0] == 2.0 for o in outs)


def test_async_eval_of_two_large_streams_overlaps():
    log, barrier = [], threading.Barrier(2, timeout=20)
    prim = _probe_primitive(log, barrier)
    streams = [mx.new_thread_unsafe_stream(mx.cpu), mx.new_stream(mx.cpu)]
    outs = []
    for s in streams:
        a = mx.multiply(mx.ones(BIG, stream=s), 3, stream=s)  # every op on s: `a * 3` would
        probe = b.node(prim, (a,), a.shape, a.dtype, b.NO_PARAMS, s._state)  # use the default
        outs.append(mx.add(probe, 0, stream=s))
    mx.async_eval(outs[0])
    mx.async_eval(outs[1])
    for s in streams:
        mx.synchronize(s)
    assert len(log) == 2 and log[0] != log[1]
    assert all(np.array(o)[5, 5] == 4.0 for o in outs)


def test_stream_order_is_kept_for_many_small_evals():
    s = mx.new_thread_unsafe_stream(mx.cpu)
    seen = []
    prim = b.make("record", lambda xp, a, i: (seen.append(i), a)[1])
    x = mx.zeros((4,), stream=s)
    for i in range(50):
        x = b.node(prim, (x,), x.shape, x.dtype, {"i": i}, s._state)
        if i % 5 == 4:
            mx.async_eval(x)
    mx.synchronize(s)
    assert seen == list(range(50))


def test_sixteen_threads_mixing_stream_kinds():
    tls = mx.new_thread_local_stream(mx.cpu)
    shared_unsafe = mx.new_thread_unsafe_stream(mx.cpu)
    own_unsafe = [mx.new_thread_unsafe_stream(mx.cpu) for _ in range(16)]
    shape = (64, 48)
    base_np = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    base = mx.exp(mx.array(base_np), stream=shared_unsafe)  # pending, read by every thread
    mx.async_eval(base)
    start = threading.Barrier(16, timeout=30)
    failures = []

    def work(i):
        r = np.random.default_rng(100 + i)
        a_np = r.standard_normal(shape).astype(np.float32)
        w_np = r.standard_normal((shape[1], 8)).astype(np.float32)
        start.wait()
        total_np = np.zeros(8, np.float32)
        total = mx.zeros((8,))
        for step in range(6):
            a = mx.array(a_np + step)
            p = mx.multiply(a, base, stream=tls)  # thread-local stream
            q = mx.matmul(p, mx.array(w_np), stream=own_unsafe[i])  # unsafe stream
            r_ = mx.sum(q, axis=0)  # this thread's default stream
            h = mx.maximum(r_, 0.0, stream=shared_unsafe)  # one stream shared by all
            total = total + h
            if step % 2:
                mx.async_eval(total)
            total_np += np.maximum(((a_np + step) * np.exp(base_np) @ w_np).sum(0), 0)
        got = np.array(total)
        if not np.allclose(got, total_np, rtol=1e-4, atol=1e-3):
            failures.append((i, got, total_np))

    threads = [threading.Thread(target=lambda i=i: _catch(failures, work, i)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not failures, failures[:2]


def _catch(failures, fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # reported by the test thread
        failures.append(repr(exc))


def test_threads_eval_same_lazy_graph_on_unsafe_stream():
    u = mx.new_thread_unsafe_stream(mx.cpu)
    x = mx.arange(1000, stream=u)
    ys = [mx.multiply(x, k, stream=u) for k in range(8)]
    results = {}

    def read(k):
        results[k] = np.array(ys[k]).sum()
    threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert results == {k: k * 499500 for k in range(8)}


def test_thread_affine_error_never_hangs_with_pending_work():
    s = mx.new_stream(mx.cpu)
    x = mx.ones(BIG, stream=s)
    for _ in range(5):
        x = mx.add(x, 1, stream=s)
    mx.async_eval(x)  # the owner schedules it; another thread then uses the stream
    y = mx.multiply(x, 2, stream=s)
    with pytest.raises(RuntimeError, match=f"There is no Stream\\(cpu, {s.index}\\)"):
        in_thread(lambda: mx.eval(y), timeout=20)
    # reading the owner's evaluated result from another thread is fine (its own stream)
    assert in_thread(lambda: float(mx.sum(x).item())) == 6.0 * BIG[0] * BIG[1]
    assert float(y[0, 0].item()) == 12.0


def test_large_failure_propagates_through_parked_consumers():
    s1, s2, s3 = (mx.new_stream(mx.cpu) for _ in range(3))
    big = mx.ones(BIG, stream=s1)
    bad = mx.linalg.inv(mx.zeros((4, 4)), stream=s1)
    slow = mx.sum(mx.matmul(big, big, stream=s1), stream=s1)  # s1 busy before it fails
    poisoned = mx.add(mx.sum(bad, stream=s2), mx.ones(BIG, stream=s2), stream=s2)
    more = mx.multiply(poisoned, 2, stream=s3)
    fine = mx.exp(mx.ones(BIG, stream=s3), stream=s3)
    mx.async_eval(slow, more, fine)
    for arr in (more, poisoned, bad):
        with pytest.raises(RuntimeError, match=r"\[linalg"):
            mx.eval(arr)
    assert slow.item() == BIG[0] ** 3
    assert float(fine[0, 0].item()) == pytest.approx(np.e)
    for s in (s1, s2, s3):
        mx.synchronize(s)  # errors were reported by eval already; nothing hangs


def test_other_thread_waits_for_work_scheduled_on_an_affine_stream():
    s = mx.new_stream(mx.cpu)
    x = mx.ones(BIG, stream=s)
    for _ in range(4):
        x = mx.multiply(mx.matmul(x, mx.ones(BIG, stream=s), stream=s), 1 / 256, stream=s)
    mx.async_eval(x)  # scheduled by its owner: another thread may consume it
    y = in_thread(lambda: float(mx.sum(x + 1).item()))
    assert y == 2.0 * BIG[0] * BIG[1]


def test_input_kept_alive_for_consumers_on_other_streams():
    s = [mx.new_stream(mx.cpu) for _ in range(3)]
    producer = mx.arange(BIG[0] * BIG[1], stream=s[0]).reshape(BIG)
    consumers = [mx.multiply(producer, k, stream=s[k]) for k in (1, 2)]
    mx.async_eval(consumers)
    del producer
    import gc
    gc.collect()
    want = np.arange(BIG[0] * BIG[1]).reshape(BIG)
    for k, c in zip((1, 2), consumers):
        np.testing.assert_array_equal(np.array(c), want * k)


def test_synchronize_stream_parked_on_another_stream():
    gate = threading.Event()

    def slow(xp, a):
        gate.wait(20)
        return a + 1
    prim = b.make("slow", slow)
    s1, s2 = mx.new_thread_unsafe_stream(mx.cpu), mx.new_stream(mx.cpu)
    a = mx.ones(BIG, stream=s1)
    p = b.node(prim, (a,), a.shape, a.dtype, b.NO_PARAMS, s1._state)
    c = mx.multiply(p, 3, stream=s2)
    mx.async_eval(c)
    threading.Timer(0.2, gate.set).start()
    mx.synchronize(s2)
    assert c._node.stream.completed >= c._node.seq
    assert float(c[0, 0].item()) == 6.0


def test_a_parked_batch_resumes_where_it_stopped_even_if_woken_at_once(monkeypatch):
    """A worker parks a batch on another stream's node; that node can finish, and its
    wake-up start another worker on the batch, before the parking worker returns: the
    position to resume from must be stored first, or the batch reruns nodes it ran
    (seen once in 32 000 evals of the soak: "'NoneType' object has no attribute 'inputs'")."""
    from streamlet.core import scheduler

    ran, resumed_at = [], []
    parking = types.SimpleNamespace(backend=types.SimpleNamespace(running=None))  # consumer's

    class Finishing:  # a producer's stream whose node finishes as it is waited for
        def when_done(self, seq, resume):
            assert resume is parking
            resumed_at.append(batch.pos)  # another worker resumes the batch from here
            return True

    class Node:
        stream, seq = Finishing(), 1

    batch = scheduler.Batch([Node(), Node()], {1: [Node()]}, None, 2)
    monkeypatch.setattr(scheduler, "run_node", lambda node, state: ran.append(node))
    assert scheduler.run_batch(parking, batch, blocking=False) is False
    assert len(ran) == 1 and resumed_at == [1]


def test_a_gpu_batch_runs_its_nodes_in_the_backends_context_and_its_flush_after(monkeypatch):
    """The scheduler runs a GPU stream's batch's nodes inside `backend.running` (the GPU
    makes its stream current there once) and the backend's pass over the batch after
    leaving it (a flush reading index flags there must not wait for the stream); a
    backend without one (the CPU's: None) has no context."""
    from streamlet.core import scheduler

    depth, counts, ran, flushed = [], [], [], []

    class Context:
        def __enter__(self):
            depth.append(1)

        def __exit__(self, *exc):
            depth.pop()

    def running(state, count):
        counts.append(count)
        return Context()
    backend = types.SimpleNamespace(running=running, run_deferred=lambda state, wait=True:
                                    flushed.append(len(depth)))

    class Node:
        seq = 1
    monkeypatch.setattr(scheduler, "run_node", lambda node, state: ran.append(len(depth)))
    gpu = types.SimpleNamespace(backend=backend)
    batch = scheduler.Batch([Node(), Node(), Node()], {}, None, 3)
    assert scheduler.run_batch(gpu, batch, blocking=True) is True
    assert counts == [3] and ran == [1, 1, 1] and flushed == [0] and not depth
    assert batch.pos == 3
    cpu = types.SimpleNamespace(backend=types.SimpleNamespace(
        running=None, run_deferred=backend.run_deferred))
    assert scheduler.run_batch(cpu, scheduler.Batch([Node()], {}, None, 1), True) is True
    assert counts == [3] and ran == [1, 1, 1, 0] and flushed == [0, 0]


def test_a_batch_queued_on_a_busy_stream_waits_for_producers_queued_after_it():
    """One eval's batches enter their queues one after another; one queued behind work
    already running on its stream can start before the next is queued.  Its waits must
    find its producers numbered by then (seen in the soak: a consumer read a producer
    that had not run, "An input was never computed")."""
    gate, started = threading.Event(), threading.Event()

    def slow(xp, a):
        started.set()
        gate.wait(20)
        return a
    busy, other = mx.new_thread_unsafe_stream(mx.cpu), mx.new_thread_unsafe_stream(mx.cpu)
    held = b.node(b.make("slow", slow), (mx.ones(BIG, stream=busy),), BIG, mx.float32,
                  b.NO_PARAMS, busy._state)
    mx.async_eval(held)
    assert started.wait(10)
    state = other._state

    class Late:  # the producer's stream, entered late: the busy stream's work goes on
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if not gate.is_set():
                gate.set()
                time.sleep(0.3)
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)
    real = state.lock
    state.lock = Late(real)
    try:
        first = mx.exp(mx.zeros(BIG, stream=busy), stream=busy)  # the busy stream's first
        produced = mx.sin(mx.ones(BIG, stream=other), stream=other)
        consumer = mx.add(produced, 1.0, stream=busy)
        mx.eval(first, consumer)
    finally:
        state.lock = real
    np.testing.assert_allclose(np.array(consumer), np.sin(np.ones(BIG)) + 1, rtol=1e-6)
    assert np.array(first)[0, 0] == 1.0
