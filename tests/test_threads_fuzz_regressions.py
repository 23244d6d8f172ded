"""Regressions found by fuzzing several threads that use streamlet at once (compiled
functions shared between threads, one lazy graph evaluated by several threads).

Each test forces its interleaving with events, never with sleeps."""
import importlib
import threading

import streamlet.core as mx

from test_streams import in_thread

eval_module = importlib.import_module("streamlet.core.eval")


def test_compiled_thread_local_stream_replays_on_the_callers_own():
    """A compiled op on a ThreadLocalStream replays in another thread on that thread's stream."""
    tls = mx.new_thread_local_stream(mx.default_device())
    f = mx.compile(lambda x: mx.cumsum(x, stream=tls) * 2)
    x = mx.array([1.0, 2.0, 3.0])
    assert in_thread(lambda: f(x).tolist()) == [2.0, 6.0, 12.0]  # traced there
    assert f(x).tolist() == [2.0, 6.0, 12.0]  # replayed here
    assert in_thread(lambda: f(x).tolist()) == [2.0, 6.0, 12.0]


def test_compiled_thread_local_stream_context_replays_in_another_thread():
    """`with mx.stream(tls)` inside a compiled function traced here replays in another thread."""
    tls = mx.new_thread_local_stream(mx.default_device())

    def fun(x):
        with mx.stream(tls):
            return mx.sum(x) + 1
    f = mx.compile(fun)
    x = mx.array([1.0, 2.0, 3.0])
    assert f(x).item() == 7.0
    assert in_thread(lambda: f(x).item()) == 7.0


def test_compiled_stream_made_by_the_function_replays_in_another_thread():
    """A stream the compiled function made while traced is no other thread's stream at replay."""
    def fun(x):
        return mx.cumsum(x, stream=mx.new_stream(mx.default_device())) + 1
    f = mx.compile(fun)
    x = mx.array([1.0, 2.0, 3.0])
    assert f(x).tolist() == [2.0, 4.0, 7.0]
    assert in_thread(lambda: f(x).tolist()) == [2.0, 4.0, 7.0]
    assert f(x).tolist() == [2.0, 4.0, 7.0]


def test_one_stream_context_entered_by_two_threads_at_once_restores_each_threads_own():
    """Two threads in one StreamContext at once (first in, first out) get their defaults back."""
    dev = mx.default_device()
    ctx = mx.stream(mx.new_thread_local_stream(dev))
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def use(enter_after, entered, leave_after, left):
        assert enter_after is None or enter_after.wait(10)
        before = mx.default_stream(dev)
        with ctx:
            entered.set()
            assert leave_after.wait(10)
            inside = (mx.ones((2,)) + 1).tolist()
        left.set()
        return inside, mx.default_stream(dev) == before, (mx.ones((2,)) + 2).tolist()
    got = []
    b = threading.Thread(target=lambda: got.append(use(a_in, b_in, a_out, threading.Event())))
    b.start()
    mine = use(None, a_in, b_in, a_out)  # enters first, leaves first
    b.join(10)
    assert not b.is_alive(), "the other thread hung"
    assert mine == ([2.0, 2.0], True, [3.0, 3.0])
    assert got == [([2.0, 2.0], True, [3.0, 3.0])]


def test_eval_waits_for_a_node_another_threads_eval_is_ordering(monkeypatch):
    """A read needing a node another thread's eval has marked but not queued yet waits for it."""
    dev = mx.default_device()
    u1, u2 = mx.new_thread_unsafe_stream(dev), mx.new_thread_unsafe_stream(dev)
    x = mx.multiply(mx.add(mx.array([1.0, 2.0]), 1, stream=u1), 3, stream=u1)
    y = mx.add(x, 1, stream=u2)
    first = threading.current_thread()
    ordering, contended = threading.Event(), threading.Event()
    birth, lock = eval_module._birth, eval_module._enqueue_lock

    def paused_birth(n):  # the first eval stops while its nodes are marked
        if not ordering.is_set():
            ordering.set()
            assert contended.wait(10)
        return birth(n)

    class Lock:  # tells when the other thread asks for the eval lock
        def __enter__(self):
            if threading.current_thread() is not first:
                contended.set()
            return lock.__enter__()

        def __exit__(self, *exc):
            return lock.__exit__(*exc)
    monkeypatch.setattr(eval_module, "_birth", paused_birth)
    monkeypatch.setattr(eval_module, "_enqueue_lock", Lock())
    got = {}

    def read():
        assert ordering.wait(10)
        try:
            got["y"] = y.tolist()
        except RuntimeError as exc:  # "An input was never computed", before the fix
            got["y"] = exc
    t = threading.Thread(target=read)
    t.start()
    mx.eval(x)
    t.join(10)
    assert not t.is_alive(), "the reading thread hung"
    assert x.tolist() == [6.0, 9.0]
    assert got["y"] == [7.0, 10.0]


def _inside_a_grad_in_another_thread(then):
    """Call `then()` while another thread is inside `mx.grad`'s traced function."""
    inside, release = threading.Event(), threading.Event()
    got = []

    def traced(x):
        inside.set()
        assert release.wait(10)
        return mx.sum(x * 3)
    t = threading.Thread(target=lambda: got.append(mx.grad(traced)(mx.array([1.0])).tolist()))
    t.start()
    assert inside.wait(10)
    try:
        return then()
    finally:
        release.set()
        t.join(10)
        assert not t.is_alive(), "the other thread hung"
        assert got == [[3.0]]


def test_async_eval_of_gradients_while_another_thread_is_inside_a_transform():
    """async_eval of a finished grad's results is no error while another thread transforms."""
    g = mx.grad(lambda x: mx.sum(x * x))(mx.array([1.0, 2.0]))
    _inside_a_grad_in_another_thread(lambda: mx.async_eval(g))
    assert g.tolist() == [2.0, 4.0]


def test_compiled_call_on_gradients_replays_while_another_thread_is_inside_a_transform():
    """A compiled function given grad results replays its trace while another thread transforms."""
    calls = []

    def fun(x):
        calls.append(x.shape)
        return x * 2
    f = mx.compile(fun)
    g = mx.grad(lambda x: mx.sum(x * x))(mx.array([1.0, 2.0]))
    assert f(g).tolist() == [4.0, 8.0]
    assert _inside_a_grad_in_another_thread(lambda: f(g).tolist()) == [4.0, 8.0]
    assert calls == [(2,)]  # traced once, not run again as if called by a transform
