"""A compiled function's whole program on the GPU (`core.gpu_program`, `backend.cuda_graph`):
one node a call, its steps run in turn at the first call on a stream, captured into a CUDA
graph at the second, the graph launched from then on.  Every call must give what the
uncompiled function gives, whatever the call before left in the program's buffers."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import streamlet.core as mx

from conftest import requires_gpu

pytestmark = requires_gpu

RNG = np.random.default_rng(11)


@pytest.fixture
def on_gpu():
    with mx.stream(mx.gpu):
        yield


def _program(out):
    box = out._node.inputs[0]
    assert box.prim.name == "compiled_graph"
    return box.params["program"]


def _states(program):
    from streamlet.backend import cuda_graph
    return [repr(s) if type(s) is cuda_graph.Steps else
            ("graph" if s.graph is not None else "slots") for s in program.native.values()]


def _mlp_step(params, x, y):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = mx.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        return mx.mean(mx.square(h @ w + b - y))
    value, grads = mx.value_and_grad(loss)(params, x, y)
    return value, [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, grads)]


def _mlp_inputs(width=24, batch=8, layers=3):
    def f(*shape):
        return mx.array((RNG.standard_normal(shape) * 0.3).astype(np.float32))
    return [(f(width, width), f(width)) for _ in range(layers)], f(batch, width), f(batch, width)


def _close(got, want, rtol=2e-5):
    for g, w in zip(_leaves(got), _leaves(want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.array(g.__array__()), np.array(w.__array__()),
                                   rtol=rtol, atol=1e-6)


def _leaves(tree):
    if isinstance(tree, mx.array):
        return [tree]
    return [a for t in tree for a in _leaves(t)]


def test_a_training_step_is_one_node_and_then_one_graph(on_gpu):
    step = mx.compile(_mlp_step)
    params, x, y = _mlp_inputs()
    kept = []
    for call in range(5):  # run, capture, then launches; each on the previous results
        want = _mlp_step(params, x, y)
        got = step(params, x, y)
        program = _program(got[0])
        mx.eval(got)
        _close(got, want)
        kept.append((got, want))
        params = got[1]
    for got, want in kept:  # earlier results were not overwritten by later calls
        _close(got, want)
    assert _states(program) == ["graph"]


def test_inputs_of_every_kind_and_results_that_are_views(on_gpu):
    def fn(a, b, s, h):
        t = (a @ b).T  # a transposed result: copied out in C order, same values
        return t, a.T, mx.sum(a * s, axis=0), (h * 2).astype(mx.bfloat16), a
    c = mx.compile(fn)
    for call in range(4):
        a = mx.array(RNG.standard_normal((5, 3)).astype(np.float32))
        b = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
        s = mx.array(np.float32(call + 0.5))  # a host scalar
        h = mx.array(RNG.standard_normal((6,)).astype(np.float32)).astype(mx.bfloat16)
        if call == 3:
            a = mx.array(RNG.standard_normal((3, 5)).astype(np.float32)).T  # a strided input
        _close(c(a, b, s, h), fn(a, b, s, h))
    program = _program(c(a, b, s, h)[0])
    assert _states(program) == ["graph"]


def test_host_constants_and_a_step_that_reads_the_host(on_gpu):
    table = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))  # a constant of the trace

    def fn(x):
        y = x * table + 1.0
        return mx.cumsum(y, axis=1), mx.sort(y, axis=0), mx.argmax(y, axis=1)
    c = mx.compile(fn)
    for _ in range(4):
        x = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
        got, want = c(x), fn(x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-6)


def test_without_graphs_the_steps_run_in_turn(on_gpu, monkeypatch):
    from streamlet.backend import cuda_graph
    monkeypatch.setattr(cuda_graph, "CAPTURE", False)
    step = mx.compile(_mlp_step)
    params, x, y = _mlp_inputs()
    for _ in range(3):
        got = step(params, x, y)
        program = _program(got[0])
        _close(got, _mlp_step(params, x, y))
        params = got[1]
    assert _states(program) == [repr(cuda_graph._OFF)]


def test_a_failed_capture_falls_back_to_running_the_steps(on_gpu, monkeypatch):
    from streamlet.backend import cuda_graph

    def refuse(self, program, stream):
        return "refused"
    monkeypatch.setattr(cuda_graph._Slots, "_capture", refuse)
    c = mx.compile(lambda x: (mx.exp(x) @ x.T, x + 1))
    for _ in range(3):
        x = mx.array(RNG.standard_normal((4, 4)).astype(np.float32))
        _close(c(x), (mx.exp(x) @ x.T, x + 1))
    assert _states(_program(c(x)[0])) == ["Steps('refused')"]


def test_streams_of_several_threads_share_one_compiled_function():
    step = mx.compile(_mlp_step)
    errors = []

    def work():
        try:
            s = mx.new_stream(mx.gpu)
            with mx.stream(s):
                params, x, y = _mlp_inputs()
                for _ in range(6):
                    got, want = step(params, x, y), _mlp_step(params, x, y)
                    _close(got, want)
                    params = got[1]
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_a_programs_state_on_a_stream_goes_with_the_stream():
    import gc
    c = mx.compile(lambda v: mx.exp(v) * 2 + v)
    x = mx.array(RNG.standard_normal((256,)).astype(np.float32))
    mx.eval(x)
    programs, states = [], []

    def work():
        with mx.stream(mx.new_stream(mx.gpu)):
            for _ in range(3):
                out = c(x)
                programs.append(_program(out))
                mx.eval(out)
            states.append(_states(programs[0]))
        mx.clear_streams()
    t = threading.Thread(target=work)
    t.start()
    t.join()
    program = programs[0]
    assert all(p is program for p in programs) and states == [["graph"]]
    gc.collect()
    assert program.native == {}


def test_an_index_checked_step_keeps_the_step_by_step_replay(on_gpu):
    c = mx.compile(lambda x, i: mx.take(x, i) * 2)
    x = mx.arange(5, dtype=mx.float32)
    out = c(x, mx.array([0, 4]))
    assert all(getattr(n.prim, "name", None) != "compiled_graph" for n in out._node.inputs)
    assert out.tolist() == [0.0, 8.0]
    with pytest.raises(Exception, match="Index out of bounds"):
        c(x, mx.array([7])).tolist()


def test_a_function_returning_its_input_and_a_constant(on_gpu):
    k = mx.array([1.0, 2.0])
    c = mx.compile(lambda x: (x, k, x * k))
    for v in range(3):
        x = mx.array([float(v), 1.0])
        a, b, p = c(x)
        assert a.tolist() == x.tolist() and b.tolist() == [1.0, 2.0]
        assert p.tolist() == [float(v), 2.0]


def test_a_graphs_buffers_count_as_active_memory_while_it_lives(on_gpu):
    import gc
    x = mx.array(RNG.standard_normal((1 << 20,)).astype(np.float32))  # 4 MiB
    mx.eval(x)
    c = mx.compile(lambda v: (mx.exp(v) @ mx.ones((1 << 20, 1)), mx.sin(v) * 2))
    mx.eval(c(x))
    before = mx.get_active_memory()
    for _ in range(2):  # the capture: the graph keeps its buffers
        mx.eval(c(x))
    held = mx.get_active_memory() - before
    assert held >= 2 * (4 << 20), held  # exp(v), then sin(v) * 2, at least
    del c
    gc.collect()
    assert mx.get_active_memory() <= before - (4 << 20)  # the graph and the input's slot


def test_arguments_the_program_does_not_read_are_left_alone(on_gpu):
    c = mx.compile(lambda unused, x, scale: (x * 2 + 1, scale))
    kept = []
    for v in range(4):
        unused = mx.full((5,), float(v))
        x = mx.arange(5, dtype=mx.float32) + v
        out, s = c(unused, x, mx.array(3.0))
        assert out.tolist() == (np.arange(5) * 2 + 1 + 2 * v).tolist() and s.item() == 3.0
        kept.append((v, unused))
    for v, unused in kept:  # never written by a later call
        assert unused.tolist() == [float(v)] * 5


def test_a_value_no_step_reads_is_not_an_input_of_the_program(on_gpu):
    # The function replaces a captured input with a traced array it never returns (as an
    # optimizer's step counter can): the next call's captured input is that leftover,
    # whose graph ends in the trace's placeholders; nothing may try to evaluate it.
    state = {"count": mx.array(0.0), "scale": mx.array(2.0)}

    def f(x):
        state["count"] = state["count"] + 1
        return x * state["scale"]

    c = mx.compile(f, inputs=state)
    for v in range(3):
        state["scale"] = mx.array(float(v + 2))
        out = c(mx.arange(4, dtype=mx.float32))
        assert _program(out).n_inputs == 2  # x and the scale: not the count
        assert out.tolist() == (np.arange(4) * (v + 2)).tolist()


def test_an_input_passed_again_is_read_from_the_last_copy_unless_shared(on_gpu, monkeypatch):
    """The weights of a decode step come back each call: the slot keeps the last copy.
    Another array, or the same array's buffer written through DLPack, is copied again."""
    import cupy as cp
    from streamlet.backend import cuda_graph

    def fn(w, x):
        return mx.tanh(x @ w) * 2.0 + 1.0
    c = mx.compile(fn)
    w = mx.array(RNG.standard_normal((4, 4)).astype(np.float32))
    copies = []
    real = cuda_graph._unchanging
    monkeypatch.setattr(cuda_graph, "_unchanging", lambda a: copies.append(a) or real(a))
    for call in range(6):
        if call == 4:
            w = mx.array(RNG.standard_normal((4, 4)).astype(np.float32))
        x = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
        _close(c(w, x), fn(w, x))
    assert len(copies) == 6 + 2  # x each call, w at the first and the fifth
    shared = cp.from_dlpack(w)  # its consumer may write the buffer: copied each call now
    shared += 1
    cp.cuda.get_current_stream().synchronize()
    x = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
    want = np.tanh(np.array(x) @ cp.asnumpy(shared)) * 2 + 1
    np.testing.assert_allclose(np.array(c(w, x)), want, rtol=1e-5, atol=1e-6)
