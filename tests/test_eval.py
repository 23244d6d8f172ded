"""Lazy evaluation (DESIGN §4): nothing runs before eval, trees, node release, flat memory."""
import gc
import importlib
import os
import time
import weakref

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core.ops import build as b


def counting_primitive(calls):
    def kernel(xp, a):
        calls.append(1)
        return a * 2
    return b.make("count", kernel)


def counted(calls, a):
    return b.node(counting_primitive(calls), (a,), a.shape, a.dtype, b.NO_PARAMS,
                  b.resolve(None))


def test_nothing_runs_before_eval():
    calls = []
    x = counted(calls, mx.ones((3,)))
    y = x + 1
    assert calls == [] and y.shape == (3,)
    mx.eval(y)
    assert calls == [1]
    mx.eval(y, x)  # evaluated once
    assert calls == [1] and x.tolist() == [2.0] * 3


@pytest.mark.parametrize("read", [
    lambda a: a.item(), lambda a: a.tolist(), lambda a: np.array(a), lambda a: repr(a),
    lambda a: bool(a), lambda a: float(a), lambda a: np.from_dlpack(a),
    lambda a: mx.async_eval(a) or mx.synchronize(),
])
@pytest.mark.usefixtures("on_cpu")
def test_each_read_evaluates(read):
    calls = []
    x = counted(calls, mx.array([3.0]))
    assert calls == []
    read(x)
    assert calls == [1] and x.item() == 6.0


@pytest.mark.parametrize("read", [np.array, np.asarray, np.from_dlpack])
@pytest.mark.usefixtures("on_cpu")
def test_zero_dim_result_to_numpy(read):
    out = read(mx.exp(mx.array(0.0)))
    assert out.shape == () and out == 1.0


@pytest.mark.usefixtures("on_cpu")
def test_failing_op_raises_only_at_eval():
    x = mx.linalg.inv(mx.zeros((3, 3)))
    y = mx.exp(x) * 2  # nothing has run: no error yet
    with pytest.raises(RuntimeError, match=r"\[linalg\.inv\]"):
        mx.eval(y)


def test_build_errors_are_raised_when_built():
    with pytest.raises(ValueError, match=r"\[add\].*\(2,\).*\(3,\)"):
        mx.ones((2,)) + mx.ones((3,))
    with pytest.raises(ValueError, match=r"\[reshape\]"):
        mx.reshape(mx.ones((4,)), (3,))


def test_eval_trees():
    a, b_, c, d = mx.ones((2,)) + 1, mx.zeros((1,)) - 1, mx.arange(3) * 2, mx.ones(()) * 7
    mx.eval({"a": a, "nested": [b_, (c, {"d": d})]}, None)
    for x in (a, b_, c, d):
        assert x._node.prim is None and x._node.data is not None
    assert c.tolist() == [0, 2, 4] and d.item() == 7.0


def test_async_eval_trees_then_read():
    xs = {"p": [mx.ones((50, 50)) @ mx.ones((50, 50)) for _ in range(3)],
          "q": (mx.arange(10) + 1,)}
    mx.async_eval(xs)
    assert all(float(x.sum().item()) == 50.0 ** 3 for x in xs["p"])
    assert xs["q"][0].tolist() == list(range(1, 11))


def test_eval_empty_and_already_evaluated():
    mx.eval()
    mx.async_eval()
    a = mx.array([1, 2])
    mx.eval(a, [a], {"a": a})
    assert a.tolist() == [1, 2]


def test_eval_ignores_what_is_not_an_array_as_mlx_does():
    a = mx.ones((2,)) + 1
    mx.eval(object(), [a, object()])  # MLX ignores leaves that are not arrays
    mx.async_eval({"k": object()})
    assert a._node.data is not None and a.tolist() == [2.0, 2.0]


def test_graph_nodes_released_after_eval():
    a = mx.ones((4,))
    inter = mx.exp(a)
    ref = weakref.ref(inter._node)
    out = inter * 2
    del inter
    assert ref() is not None  # the graph holds it until evaluated
    mx.eval(out)
    gc.collect()
    assert ref() is None
    assert out._node.inputs == () and out._node.prim is None


def test_async_eval_releases_nodes_too():
    inter = mx.sin(mx.ones((256, 256)))
    ref = weakref.ref(inter._node)
    out = mx.sum(inter * 2)
    del inter
    mx.async_eval(out)
    out.item()
    mx.synchronize()
    deadline = time.monotonic() + 5  # a GPU stream's worker lets go as its batch ends
    while ref() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert ref() is None


def test_long_chain_does_not_grow_graph():
    x = mx.zeros((4,))
    for i in range(5000):
        x = x + 1
        if i % 100 == 99:
            mx.eval(x)
            assert x._node.inputs == ()
    assert x.tolist() == [5000.0] * 4


def test_deep_graph_evaluates_without_recursion_error():
    x = mx.zeros((2,))
    for _ in range(20000):
        x = x + 1
    assert x.tolist() == [20000.0, 20000.0]


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_many_small_graphs_hold_flat_memory():
    def step(i):
        a = mx.array([float(i), 1.0])
        c = mx.sum(mx.exp(a * 0.0) + a, keepdims=True)
        mx.eval(c)
        return c

    for i in range(5000):  # warm caches and free lists
        step(i)
    gc.collect()
    objects, rss = len(gc.get_objects()), _rss_bytes()
    for n in range(20_000):
        step(n)
    gc.collect()
    assert len(gc.get_objects()) - objects < 500
    assert _rss_bytes() - rss < 8 * 2 ** 20, _rss_bytes() - rss


def test_chains_sharing_a_stream_alternate_on_it():
    """Two chains with their heavy ops on streams of their own and a light op each on a
    shared stream: the shared stream gets A1 B1 A2 B2 ..., not all of A before B, so
    neither chain queues behind the other (stream_bench's two_stream workload)."""
    ev = importlib.import_module("streamlet.core.eval")
    s1, s2, shared = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)

    def chain(v, s):
        steps = []
        for _ in range(4):
            v = mx.multiply(mx.exp(mx.sin(v, stream=s), stream=s), 0.5, stream=shared)
            steps.append(v)
        return steps

    x, y = mx.ones((8,)), mx.full((8,), 2.0)
    a, b = chain(x, s1), chain(y, s2)
    label = {id(n._node): "A" for n in a} | {id(n._node): "B" for n in b}
    order, _ = ev._order([a[-1]._node, b[-1]._node])
    try:
        on_shared = ev._group(order)[b[0]._node.stream]
        assert [label[id(n)] for n in on_shared] == ["A", "B"] * 4
    finally:
        for n in order:
            n.seq = 0
    mx.eval(a[-1], b[-1])
    want = [np.ones(8, np.float32), np.full(8, 2.0, np.float32)]
    for _ in range(4):
        want = [(np.exp(np.sin(w)) * 0.5).astype(np.float32) for w in want]
    np.testing.assert_allclose(np.array(a[-1]), want[0], rtol=1e-6)
    np.testing.assert_allclose(np.array(b[-1]), want[1], rtol=1e-6)


def test_work_on_one_stream_keeps_build_order_in_a_multi_stream_eval():
    """Interleaving must not turn a running sum into all terms first (a buffer each)."""
    ev = importlib.import_module("streamlet.core.eval")
    s1, acc = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    total = mx.zeros((8,), stream=acc)
    built = [total]
    for i in range(6):
        term = mx.multiply(mx.exp(mx.full((8,), float(i), stream=s1), stream=s1), 2, stream=acc)
        total = mx.add(total, term, stream=acc)
        built += [term, total]
    order, _ = ev._order([total._node])
    try:
        on_acc = ev._group(order)[total._node.stream]
        assert [id(n) for n in on_acc] == [id(n._node) for n in built]
    finally:
        for n in order:
            n.seq = 0
    np.testing.assert_allclose(np.array(total), 2 * np.exp(np.arange(6.0)).sum(), rtol=1e-6)
