"""Streams (DESIGN §2, §3): every call of the table, contexts, and `stream=` resolution."""
import threading

import numpy as np
import pytest

import streamlet.core as mx


def in_thread(fn, timeout=30):
    """Run fn in a new thread; return its result or re-raise its exception there."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test thread
            box["error"] = exc
    t = threading.Thread(target=target)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the thread hung"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_stream_values():
    s = mx.new_stream(mx.cpu)
    assert s.device == mx.Device(mx.cpu) and s.device == mx.cpu
    assert isinstance(s.index, int)
    assert repr(s) == f"Stream(Device(cpu, 0), {s.index})"
    with pytest.raises(AttributeError):
        s.index = 0
    with pytest.raises(AttributeError):
        s.device = mx.cpu
    with pytest.raises(TypeError):
        mx.Stream()


def test_stream_indices_unique_across_kinds_and_threads():
    made = [mx.new_stream(mx.cpu), mx.new_thread_unsafe_stream(mx.cpu),
            mx.default_stream(mx.cpu)]
    made += in_thread(lambda: [mx.new_stream(mx.cpu), mx.default_stream(mx.cpu)])
    tls = mx.new_thread_local_stream(mx.cpu)
    made.append(mx.stream_from_thread_local_stream(tls))
    indices = [s.index for s in made]
    assert len(set(indices)) == len(indices)


def test_stream_equality_and_hash():
    s, t = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    assert s == s and s != t
    assert hash(s) == hash(s)
    assert {s: 1, t: 2}[s] == 1
    same = [x for x in mx.get_streams() if x.index == s.index]
    assert same == [s] and hash(same[0]) == hash(s)
    assert s != s.index and s != mx.cpu


def test_thread_local_stream_repr_and_index_space():
    a, b = mx.new_thread_local_stream(mx.cpu), mx.new_thread_local_stream(mx.cpu)
    assert repr(a) == f"ThreadLocalStream(Device(cpu, 0), {a.index})"
    assert b.index == a.index + 1
    assert a == a and a != b and hash(a) == hash(a)
    assert a.device == mx.cpu


def test_thread_local_resolution_per_thread():
    tls = mx.new_thread_local_stream(mx.cpu)
    mine = mx.stream_from_thread_local_stream(tls)
    assert isinstance(mine, mx.Stream)
    assert mx.stream_from_thread_local_stream(tls) == mine
    others = [in_thread(lambda: (mx.stream_from_thread_local_stream(tls),
                                 mx.stream_from_thread_local_stream(tls))) for _ in range(3)]
    for first, second in others:
        assert first == second
    concrete = {mine.index} | {o[0].index for o in others}
    assert len(concrete) == 4
    # each thread evaluates on its own stream
    x = mx.ones((3,), stream=tls) * 2
    assert x.tolist() == [2.0] * 3
    assert in_thread(lambda: (mx.ones((3,), stream=tls) + 1).tolist()) == [2.0] * 3


def test_stream_from_thread_local_rejects_other_types():
    with pytest.raises(TypeError, match="Stream"):
        mx.stream_from_thread_local_stream(mx.new_stream(mx.cpu))


def test_default_stream_per_thread():
    d = mx.default_stream(mx.cpu)
    assert mx.default_stream(mx.cpu) == d
    assert mx.default_stream(mx.Device(mx.cpu)) == d
    o1, o2 = in_thread(lambda: (mx.default_stream(mx.cpu), mx.default_stream(mx.cpu)))
    assert o1 == o2 and o1 != d
    assert in_thread(lambda: mx.default_stream(mx.cpu)) not in (d, o1)


@pytest.mark.usefixtures("on_cpu")
def test_set_default_stream_keeps_device_and_is_per_thread():
    old = mx.default_stream(mx.cpu)
    s = mx.new_stream(mx.cpu)
    dev = mx.default_device()
    try:
        mx.set_default_stream(s)
        assert mx.default_stream(mx.cpu) == s
        assert mx.default_device() == dev
        x = mx.ones((2,))
        assert x._node.stream is s._state
        assert in_thread(lambda: mx.default_stream(mx.cpu)) != s
    finally:
        mx.set_default_stream(old)
    assert mx.default_stream(mx.cpu) == old


def test_get_streams_lists_every_kind():
    s = mx.new_stream(mx.cpu)
    u = mx.new_thread_unsafe_stream(mx.cpu)
    o = in_thread(lambda: mx.new_stream(mx.cpu))
    tl = mx.stream_from_thread_local_stream(mx.new_thread_local_stream(mx.cpu))
    streams = mx.get_streams()
    assert all(isinstance(x, mx.Stream) for x in streams)
    for x in (s, u, o, tl, mx.default_stream(mx.cpu)):
        assert x in streams


def test_thread_unsafe_stream_usable_anywhere():
    u = mx.new_thread_unsafe_stream(mx.cpu)
    x = mx.arange(4, stream=u)
    assert in_thread(lambda: (x * 2).tolist()) == [0, 2, 4, 6]
    assert in_thread(lambda: (mx.arange(3, stream=u) + 1).tolist()) == [1, 2, 3]
    mx.synchronize(u)
    in_thread(lambda: mx.synchronize(u))
    assert (x + mx.ones((4,), dtype=mx.int32, stream=u)).tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("read", ["eval", "tolist"])
def test_new_stream_is_thread_affine(read):
    s = mx.new_stream(mx.cpu)
    x = mx.ones((3,), stream=s) + 1

    def other():
        if read == "eval":
            mx.eval(x)
        else:
            x.tolist()
    msg = f"There is no Stream(cpu, {s.index}) in current thread."
    with pytest.raises(RuntimeError) as info:
        in_thread(other)
    assert str(info.value) == msg
    assert x.tolist() == [2.0] * 3  # the owner still can
    # an op built elsewhere on this stream fails there too
    with pytest.raises(RuntimeError, match="There is no Stream"):
        in_thread(lambda: mx.eval(mx.zeros((2,), stream=s)))


def test_evaluated_array_of_affine_stream_is_readable_anywhere():
    s = mx.new_stream(mx.cpu)
    x = mx.arange(3, stream=s)
    mx.eval(x)
    assert in_thread(lambda: (x + 1).tolist()) == [1, 2, 3]


# ---- stream() / StreamContext --------------------------------------------------------

def _state():
    return mx.default_device(), mx.default_stream(mx.cpu)


@pytest.mark.parametrize("kind", ["stream", "thread_unsafe", "thread_local", "device",
                                  "device_type"])
def test_stream_context_accepts_every_kind(kind):
    before = _state()
    target = {"stream": lambda: mx.new_stream(mx.cpu),
              "thread_unsafe": lambda: mx.new_thread_unsafe_stream(mx.cpu),
              "thread_local": lambda: mx.new_thread_local_stream(mx.cpu),
              "device": lambda: mx.Device(mx.cpu),
              "device_type": lambda: mx.cpu}[kind]()
    with mx.stream(target) as ctx:
        assert isinstance(ctx, mx.StreamContext)
        assert mx.default_device() == mx.cpu
        inside = mx.default_stream(mx.cpu)
        if kind in ("stream", "thread_unsafe"):
            assert inside == target
        elif kind == "thread_local":
            assert inside == mx.stream_from_thread_local_stream(target)
        else:
            assert inside == before[1]
        x = mx.ones((2,)) + 1
        assert x._node.stream is inside._state
        assert x.tolist() == [2.0, 2.0]
    assert _state() == before


def test_stream_context_class_directly_and_nesting():
    before = _state()
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    with mx.StreamContext(s1):
        assert mx.default_stream(mx.cpu) == s1
        with mx.stream(s2):
            assert mx.default_stream(mx.cpu) == s2
            with mx.stream(mx.cpu):
                assert mx.default_stream(mx.cpu) == s2
        assert mx.default_stream(mx.cpu) == s1
    assert _state() == before


def test_stream_context_restores_on_exception():
    before = _state()
    s = mx.new_stream(mx.cpu)
    with pytest.raises(KeyError):
        with mx.stream(s):
            with mx.stream(mx.new_stream(mx.cpu)):
                raise KeyError("boom")
    assert _state() == before


def test_stream_context_is_per_thread():
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        other = in_thread(lambda: mx.default_stream(mx.cpu))
        assert other != s
        assert in_thread(lambda: mx.ones((1,))._node.stream.stream) != s


def test_context_undoes_a_default_set_inside_in_a_thread_without_one():
    """A thread that never used its default stream enters a context and sets one inside:
    on exit its own default comes back (it was kept when the thread had none yet)."""
    def run():
        s = mx.new_stream(mx.cpu)
        with mx.stream(mx.cpu):
            mx.set_default_stream(s)
            inside = mx.default_stream(mx.cpu) == s
        return inside, mx.default_stream(mx.cpu) == s
    assert in_thread(run) == (True, False)


@pytest.mark.parametrize("bad", [None, "cpu", 0, 1.5])
def test_stream_context_rejects(bad):
    with pytest.raises(TypeError):
        with mx.stream(bad):
            pass


# ---- synchronize --------------------------------------------------------------------

def test_synchronize_every_argument_kind():
    tls = mx.new_thread_local_stream(mx.cpu)
    s = mx.new_stream(mx.cpu)
    arrays = [mx.ones((64, 64)) * 2, mx.ones((64, 64), stream=s) * 3,
              mx.ones((64, 64), stream=tls) * 4, mx.ones((64, 64), stream=mx.cpu) * 5]
    mx.async_eval(arrays)
    mx.synchronize()
    mx.synchronize(None)
    mx.synchronize(s)
    mx.synchronize(mx.cpu)
    mx.synchronize(mx.Device(mx.cpu))
    mx.synchronize(tls)
    for a, v in zip(arrays, (2, 3, 4, 5)):
        assert a._node.seq and a._node.stream.completed >= a._node.seq
        assert float(a[0, 0].item()) == v


def test_synchronize_another_threads_stream(mlx):
    """As MLX, any thread may synchronize a thread-affine stream: it waits for the work
    scheduled on it before the call and reports its failure (once)."""
    for M in (mx, mlx):
        s = M.new_stream(M.cpu)
        x = M.ones((256, 256), stream=s) @ M.ones((256, 256), stream=s)
        M.async_eval(x)
        in_thread(lambda: M.synchronize(s))
        assert x[0, 0].item() == 256.0
    s = mx.new_stream(mx.cpu)
    bad = mx.linalg.inv(mx.zeros((2, 2)), stream=s)
    mx.async_eval(bad)
    with pytest.raises(RuntimeError, match="singular"):
        in_thread(lambda: mx.synchronize(s))
    in_thread(lambda: mx.synchronize(s))  # reported once
    with pytest.raises(RuntimeError, match="singular"):
        bad.tolist()  # the array keeps its failure


def test_synchronize_rejects_other_types():
    with pytest.raises(TypeError, match="str"):
        mx.synchronize("cpu")


# ---- clear_streams ------------------------------------------------------------------

def test_clear_streams_finishes_and_destroys():
    def body():
        s = mx.new_stream(mx.cpu)
        d = mx.default_stream(mx.cpu)
        tls = mx.new_thread_local_stream(mx.cpu)
        t = mx.stream_from_thread_local_stream(tls)
        x = mx.ones((200, 200), stream=s) @ mx.ones((200, 200), stream=s)
        mx.async_eval(x)
        mx.clear_streams()
        assert x._node.stream.completed >= x._node.seq  # work finished first
        assert float(x[0, 0].item()) == 200.0
        live = mx.get_streams()
        assert s not in live and d not in live and t not in live
        with pytest.raises(RuntimeError):
            (mx.ones((2,), stream=s) + 1).tolist()
        d2 = mx.default_stream(mx.cpu)
        t2 = mx.stream_from_thread_local_stream(tls)
        assert d2 != d and t2 != t and d2 in mx.get_streams()
        assert (mx.ones((2,)) + mx.ones((2,), stream=tls)).tolist() == [2.0, 2.0]
        return True
    assert in_thread(body)


def test_clear_streams_leaves_other_threads_streams():
    mine = mx.new_stream(mx.cpu)
    in_thread(mx.clear_streams)
    assert mine in mx.get_streams()
    assert (mx.ones((2,), stream=mine) * 3).tolist() == [3.0, 3.0]


def test_clear_streams_with_pending_async_eval_from_context():
    def body():
        s = mx.new_stream(mx.cpu)
        with mx.stream(s):
            y = mx.ones((300, 300)) @ mx.ones((300, 300))
            mx.async_eval(y)
            mx.clear_streams()
        assert float(y.sum().item()) == 300.0 * 300 * 300
        return mx.default_stream(mx.cpu) != s
    assert in_thread(body)


# ---- many streams ---------------------------------------------------------------------

def test_ten_thousand_streams_without_a_thread_each():
    threads_before = threading.active_count()

    def body():
        streams = [mx.new_stream(mx.cpu) for _ in range(10_000)]
        assert len({s.index for s in streams}) == 10_000
        outs = [mx.full((2,), i, stream=s) + 1 for i, s in enumerate(streams)]
        mx.eval(outs)
        assert threading.active_count() <= threads_before + 1 + 16
        for s in streams[::997]:
            mx.synchronize(s)
        total = sum(o[0].item() for o in outs[::100])
        mx.clear_streams()
        return total
    assert in_thread(body, timeout=120) == sum(i + 1 for i in range(0, 10_000, 100))
    assert threading.active_count() <= threads_before + 16


# ---- stream= resolution (DESIGN §3) -----------------------------------------------------

def test_stream_keyword_resolution_every_kind():
    s = mx.new_stream(mx.cpu)
    u = mx.new_thread_unsafe_stream(mx.cpu)
    tls = mx.new_thread_local_stream(mx.cpu)
    default = mx.default_stream(mx.default_device())
    cases = [(None, default), (mx.cpu, mx.default_stream(mx.cpu)),
             (mx.Device(mx.cpu), mx.default_stream(mx.cpu)), (s, s), (u, u),
             (tls, mx.stream_from_thread_local_stream(tls))]
    for arg, want in cases:
        for make in (lambda: mx.zeros((2,), stream=arg), lambda: mx.add(1, 2, stream=arg),
                     lambda: mx.sum(mx.ones((3,)), stream=arg),
                     lambda: mx.reshape(mx.ones((4,)), (2, 2), stream=arg),
                     lambda: mx.matmul(mx.ones((2, 2)), mx.ones((2, 2)), stream=arg)):
            out = make()
            assert out._node.stream.stream == want, (arg, want)
    in_other = in_thread(lambda: mx.zeros((1,), stream=tls)._node.stream.stream)
    assert in_other != mx.stream_from_thread_local_stream(tls)


class Weird:
    pass


@pytest.mark.parametrize("bad", ["cpu", 0, 1.5, Weird(), [mx.cpu]])
@pytest.mark.parametrize("op", [
    lambda st: mx.zeros((2,), stream=st),
    lambda st: mx.add(mx.ones((2,)), 1, stream=st),
    lambda st: mx.exp(mx.ones((2,)), stream=st),
    lambda st: mx.sum(mx.ones((2,)), stream=st),
    lambda st: mx.transpose(mx.ones((2, 3)), stream=st),
    lambda st: mx.linalg.inv(mx.eye(2), stream=st),
], ids=["zeros", "add", "exp", "sum", "transpose", "inv"])
def test_stream_keyword_type_error_names_type(bad, op):
    with pytest.raises(TypeError, match=type(bad).__name__):
        op(bad)


@pytest.mark.usefixtures("on_cpu")
def test_stream_resolved_when_op_is_built():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    old = mx.default_stream(mx.cpu)
    with mx.stream(s1):
        x = mx.ones((3,)) * 2
    try:
        mx.set_default_stream(s2)
        y = mx.ones((3,)) + 1
        mx.set_default_stream(s1)
        assert x._node.stream.stream == s1 and y._node.stream.stream == s2
        mx.eval(x, y)
        assert x._node.stream.stream == s1 and y._node.stream.stream == s2
        assert np.array_equal(np.array(x + y), [4.0] * 3)
    finally:
        mx.set_default_stream(old)


def test_default_device_change_moves_new_ops_only():
    before = mx.default_device()
    x = mx.ones((2,))
    try:
        mx.set_default_device(mx.cpu)
        y = mx.ones((2,))
        assert y._node.stream.stream == mx.default_stream(mx.cpu)
        assert x._node.stream.stream.device == before
    finally:
        mx.set_default_device(before)


def test_stream_of_finished_thread_stays_foreign():
    s = in_thread(lambda: mx.new_stream(mx.cpu))
    with pytest.raises(RuntimeError, match=f"There is no Stream\\(cpu, {s.index}\\)"):
        (mx.ones((2,), stream=s) + 1).tolist()
    x = in_thread(lambda: mx.arange(3, stream=mx.new_stream(mx.cpu)) * 2)  # never evaluated
    with pytest.raises(RuntimeError, match="There is no Stream"):
        x.tolist()


@pytest.mark.parametrize("target", ["stream", "device"])
def test_set_default_stream_inside_context_is_undone_on_exit(target):
    # as in MLX 0.32.4 (checked by hand: making MLX streams here can hang MLX's later evals)
    before = mx.default_stream(mx.cpu)
    inner = mx.new_stream(mx.cpu)
    with mx.stream(mx.new_stream(mx.cpu) if target == "stream" else mx.cpu):
        mx.set_default_stream(inner)
        assert mx.default_stream(mx.cpu) == inner
    assert mx.default_stream(mx.cpu) == before
