"""mx.compile: compiled programs equal uncompiled ones (random programs, new inputs,
shapeless), the body is traced once per signature, captured state and random numbers
follow the uncompiled run, transforms and streams compose, and the switches work."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import streamlet.core as mx

# -- random programs --------------------------------------------------------------------------
# A program is a list of steps over a pool of values (the inputs first); each step takes
# values from the pool by index and appends its result.  All inputs have the same shape,
# so any two values broadcast; reductions keep their dimensions for the same reason.

UNARY = [mx.exp, mx.sin, mx.tanh, mx.abs, mx.negative, mx.square, mx.sigmoid,
         lambda a: mx.sqrt(mx.abs(a)), lambda a: mx.log1p(mx.abs(a)), mx.floor,
         lambda a: mx.stop_gradient(a), lambda a: a.astype(mx.float16).astype(mx.float32)]
BINARY = [mx.add, mx.subtract, mx.multiply, mx.maximum, mx.minimum,
          lambda a, b: a / (mx.abs(b) + 1), lambda a, b: mx.where(a > b, a, b * 0.5),
          lambda a, b: mx.logaddexp(a, b)]
REDUCE = [lambda a: mx.sum(a, axis=-1, keepdims=True), lambda a: mx.max(a, axis=0, keepdims=True),
          lambda a: mx.mean(a, axis=-1, keepdims=True),
          lambda a: mx.logsumexp(a, axis=0, keepdims=True)]
SHAPE = [lambda a: mx.transpose(mx.transpose(a)), lambda a: mx.squeeze(mx.expand_dims(a, 0), 0),
         lambda a: a[::-1], lambda a: mx.concatenate([a[:1], a[1:]], axis=0),
         lambda a: a.reshape(-1).reshape(a.shape)]  # last: a shape written down (not shapeless)
SCALAR = [lambda a: a * 1.5, lambda a: 2.0 - a, lambda a: a + 3]


def random_program(rng, steps=12, shapeless=False):
    shapes = len(SHAPE) - 1 if shapeless else len(SHAPE)
    prog = []
    for _ in range(steps):
        kind = rng.choice(["unary", "binary", "reduce", "shape", "scalar"],
                          p=[0.3, 0.3, 0.1, 0.15, 0.15])
        table = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE, "shape": SHAPE,
                 "scalar": SCALAR}[kind]
        prog.append((kind, int(rng.integers(shapes if kind == "shape" else len(table)))))
    picks = rng.integers(0, 1 << 30, size=(steps, 2))

    def fn(*xs):
        pool = list(xs)
        for (kind, k), (i, j) in zip(prog, picks):
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            if kind == "binary":
                pool.append(BINARY[k](a, b))
            else:
                table = {"unary": UNARY, "reduce": REDUCE, "shape": SHAPE, "scalar": SCALAR}
                pool.append(table[kind][k](a))
        return pool[-3:]  # several outputs, some of them intermediate values
    return fn


def _inputs(rng, shape, n=2):
    return [mx.array(rng.standard_normal(shape).astype(np.float32)) for _ in range(n)]


def _same(got, want):
    """Bit for bit on the CPU; a GPU's fused kernels may round a float16 cast apart."""
    gpu = mx.default_device() == mx.gpu
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-3 if gpu else 0, atol=0)


@pytest.mark.parametrize("seed", range(30))
def test_random_programs_compiled_equal_uncompiled(seed):
    """The compiled (fused) CPU runs are the same kernels in the same order."""
    rng = np.random.default_rng(seed)
    fn = random_program(rng)
    compiled = mx.compile(fn)
    for _ in range(2):  # the trace, then a replay on new values
        xs = _inputs(rng, (3, 4))
        _same(compiled(*xs), fn(*xs))


@pytest.mark.parametrize("seed", range(10))
def test_random_programs_shapeless_follow_new_shapes(seed):
    rng = np.random.default_rng(100 + seed)
    fn = random_program(rng, shapeless=True)
    traced = []
    compiled = mx.compile(lambda *xs: (traced.append(1), fn(*xs))[1], shapeless=True)
    for shape in [(3, 4), (5, 2), (1, 7)]:
        xs = _inputs(rng, shape)
        _same(compiled(*xs), fn(*xs))
    assert len(traced) == 1


@pytest.mark.parametrize("seed", range(4))
def test_shapeless_replays_at_shapes_seen_before_and_after_many_others(seed):
    """A shapeless tape keeps its steps' shapes per input shapes (`Tape.shaped`): shapes
    met again, shapes past what it keeps, and inputs that broadcast otherwise all give
    the uncompiled results."""
    import importlib
    compile_module = importlib.import_module("streamlet.core.compile")
    rng = np.random.default_rng(200 + seed)
    fn = random_program(rng, shapeless=True)
    compiled = mx.compile(fn, shapeless=True)
    n = compile_module._SHAPED_KEPT + 4
    shapes = [(1 + k % 5, 2 + k) for k in range(n)]
    for shape in shapes + shapes[::-1] + shapes[:3]:
        xs = _inputs(rng, shape)
        _same(compiled(*xs), fn(*xs))
    add = mx.compile(lambda x, y: mx.exp(x) + y, shapeless=True)
    for sx, sy in [((3, 4), (3, 4)), ((3, 4), (1, 4)), ((3, 4), (3, 4)), ((2, 5), (2, 1))]:
        x, y = mx.ones(sx), mx.full(sy, 2.0)
        out = add(x, y)
        assert out.shape == np.broadcast_shapes(sx, sy)
        np.testing.assert_allclose(np.array(out), np.exp(1.0) + 2.0, rtol=1e-6)


# -- tracing ------------------------------------------------------------------------------

def test_the_body_runs_once_per_signature():
    calls = []

    def f(x, k, opts):
        calls.append(1)
        return x * k + opts["shift"]
    c = mx.compile(f)
    x = mx.array([1.0, 2.0])
    assert c(x, 2, {"shift": x}).tolist() == [3.0, 6.0]
    assert c(mx.array([3.0, 4.0]), 2, {"shift": x}).tolist() == [7.0, 10.0]
    assert len(calls) == 1  # new values: replayed
    assert c(x, 3, {"shift": x}).tolist() == [4.0, 8.0]  # a new constant
    assert c(mx.array([1.0, 2.0, 3.0]), 3, {"shift": mx.array(0.0)}).tolist() == [3, 6, 9]
    assert c(x.astype(mx.float16), 3, {"shift": x}).dtype == mx.float32
    assert len(calls) == 4  # a new constant, new shapes, a new dtype
    assert c(x, 2, {"shift": x}).tolist() == [3.0, 6.0] and len(calls) == 4


def test_closures_are_constants_of_the_trace():
    """What the function reads from outside its arguments is frozen at trace time."""
    scale = [mx.array(2.0)]
    c = mx.compile(lambda x: x * scale[0])
    assert c(mx.array(3.0)).item() == 6.0
    scale[0] = mx.array(10.0)
    assert c(mx.array(3.0)).item() == 6.0


def test_captured_state_in_and_out():
    state = {"total": mx.array(0.0), "count": mx.array(0)}

    def step(x):
        state["total"] = state["total"] + mx.sum(x)
        state["count"] = state["count"] + 1
        return state["total"] / state["count"]
    c = mx.compile(step, inputs=state, outputs=state)
    means = [c(mx.array([float(i), float(i)])).item() for i in range(1, 5)]
    assert means == [2.0, 3.0, 4.0, 5.0]  # running means of 2, 4, 6, 8
    assert state["total"].item() == 20.0 and state["count"].item() == 4


def test_random_state_captured_draws_the_uncompiled_numbers():
    def noisy(x):
        return x + mx.random.uniform(shape=x.shape)
    x = mx.zeros((4,))
    mx.random.seed(7)
    want = [np.array(noisy(x)) for _ in range(3)]
    c = mx.compile(noisy, inputs=[mx.random.state], outputs=[mx.random.state])
    mx.random.seed(7)
    got = [np.array(c(x)) for _ in range(3)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert not np.array_equal(got[0], got[1])


def test_elementwise_runs_fuse_on_the_cpu(on_cpu):
    """The ops run on the default stream (the CPU here, whatever the suite's device)."""
    c = mx.compile(lambda x: mx.tanh(x * 0.5 + 1.0) * x)
    out = c(mx.ones((8,), stream=mx.cpu))
    assert out._node.prim.name.startswith("Compiled")
    f = io.StringIO()
    mx.export_to_dot(f, out)
    assert "Compiled" in f.getvalue() and f.getvalue().startswith("digraph")
    np.testing.assert_allclose(np.array(out), np.tanh(1.5) * np.ones(8), rtol=1e-6)


def test_export_to_dot_draws_inputs_ops_and_names():
    a, b = mx.array([1.0]), mx.array([2.0])
    f = io.StringIO()
    mx.export_to_dot(f, mx.exp(a + b) * a, a=a)
    text = f.getvalue()
    # arrays are drawn between the ops: a, b -> Add -> C -> Exp -> D; D, a -> Multiply -> E
    assert text.count("->") == 8
    for name in ("Add", "Exp", "Multiply", '"a"'):
        assert name in text


# -- composition --------------------------------------------------------------------------

def _loss(w, x):
    return mx.sum(mx.tanh(x @ w) ** 2)


def test_transforms_of_compiled_and_compiled_transforms():
    rng = np.random.default_rng(0)
    w = mx.array(rng.standard_normal((3, 2)).astype(np.float32))
    x = mx.array(rng.standard_normal((4, 3)).astype(np.float32))
    want = np.array(mx.grad(_loss)(w, x))
    for got in (mx.grad(mx.compile(_loss))(w, x), mx.compile(mx.grad(_loss))(w, x),
                mx.compile(mx.compile(mx.grad(_loss)))(w, x)):
        np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-6)
    batched = mx.vmap(mx.compile(_loss), in_axes=(None, 0))(w, mx.stack([x, 2 * x]))
    np.testing.assert_allclose(np.array(batched), [_loss(w, x).item(), _loss(w, 2 * x).item()],
                               rtol=1e-5)


def test_streams_inside_and_around_a_compiled_function():
    s, t = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    c = mx.compile(lambda x: mx.add(mx.exp(x), 1.0, stream=s) * 2)
    x = mx.array([0.0, 1.0])
    with mx.stream(t):
        out = c(x)
    assert out._node.stream is not None
    streams = set()
    stack = [out._node]
    while stack:
        n = stack.pop()
        if n.prim is not None:
            streams.add(n.stream)
            stack.extend(n.inputs)
    assert {st.stream for st in streams} == {s, t}
    np.testing.assert_allclose(np.array(out), (np.exp([0.0, 1.0]) + 1) * 2, rtol=1e-6)


def test_disable_and_enable_compile():
    calls = []
    c = mx.compile(lambda x: (calls.append(1), x + 1)[1])
    x = mx.array(1.0)
    c(x), c(x)
    assert len(calls) == 1
    mx.disable_compile()
    try:
        c(x), c(x)
        assert len(calls) == 3  # the body runs on every call
    finally:
        mx.enable_compile()
    c(x)
    assert len(calls) == 3


def test_mlx_disable_compile_environment_variable():
    prog = ("import streamlet.core as mx\ncalls = []\n"
            "c = mx.compile(lambda x: (calls.append(1), x * 2)[1])\n"
            "[c(mx.array(1.0)) for _ in range(3)]\nprint(len(calls))\n")
    env = dict(os.environ, MLX_DISABLE_COMPILE="1")
    out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "3", out.stderr


def test_errors():
    with pytest.raises(TypeError, match="compile"):
        mx.compile(3)
    c = mx.compile(lambda x: mx.exp(x))
    with pytest.raises(ValueError):
        c(mx.array([1, 2]).reshape(3))  # the body's own error reaches the caller
    assert c(mx.array(0.0)).item() == 1.0  # and the compiled function still works


@pytest.mark.parametrize("loss", [
    lambda x: mx.mean(x * x), lambda x: mx.var(x), lambda x: mx.std(x, axis=-1, ddof=1).sum(),
    lambda x: mx.mean(mx.sin(x), axis=0, keepdims=True).sum(),
], ids=["mean", "var", "std-ddof", "mean-axis0"])
@pytest.mark.parametrize("batched", [False, True])
def test_shapeless_gradients_of_means_follow_new_shapes(loss, batched):
    """The 1/N of mean's and var's cotangents comes from the input's shape at each call,
    not from the first trace's."""
    grad = mx.grad(loss)
    if batched:
        grad = mx.vmap(grad)
    compiled = mx.compile(grad, shapeless=True)
    rng = np.random.default_rng(3)
    for shape in [(3, 4), (5, 7), (2, 2)]:
        x = mx.array(rng.standard_normal(shape).astype(np.float32))
        np.testing.assert_allclose(np.array(compiled(x)), np.array(grad(x)), rtol=1e-5,
                                   atol=1e-6)


def test_a_trace_of_one_thread_replays_in_another_before_it_evaluated():
    """The constants a trace builds (here value_and_grad's seed broadcast) are computed
    when traced: a replay in another thread cannot run them on the tracer's streams."""
    def step(w, x):
        v, g = mx.value_and_grad(lambda w, x: mx.mean(mx.square(x @ w)))(w, x)
        return v, w - 0.1 * g
    c = mx.compile(step)
    w, x = mx.ones((3, 3)), mx.ones((2, 3))
    mx.eval(w, x)
    traced, got = threading.Event(), {}

    def trace():
        with mx.stream(mx.new_stream(mx.default_device())):
            got["first"] = c(w, x)  # not evaluated
        traced.set()

    def replay():
        traced.wait()
        with mx.stream(mx.new_stream(mx.default_device())):
            try:
                got["second"] = [a.tolist() for a in c(w, x)]
            except RuntimeError as exc:
                got["second"] = exc
    threads = [threading.Thread(target=trace), threading.Thread(target=replay)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = [a.tolist() for a in step(w, x)]
    assert got["second"] == want


def test_calls_of_arrays_alone_and_with_keywords_or_constants_keep_their_own_traces():
    traced = []

    def f(x, y=1.0):
        traced.append(1)  # runs when traced only
        return x * y + 1
    c = mx.compile(f)
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    for _ in range(2):
        assert c(x, y).tolist() == [4.0, 9.0]
        assert c(x, y=y).tolist() == [4.0, 9.0]
        assert c(x, 2.0).tolist() == [3.0, 5.0]
        assert c(x).tolist() == [2.0, 3.0]
        assert c(mx.array([[1.0]]), y).tolist() == [[4.0, 5.0]]
    assert len(traced) == 5


def test_a_compiled_function_keeps_no_stream_it_was_traced_on():
    """The tape keeps its result's structure, not the traced graph: a stream the function
    was traced on goes once cleared (on a GPU, with it what programs keep for it)."""
    import gc
    import weakref
    c = mx.compile(lambda v: mx.exp(v) * 2 + v)
    x = mx.array(np.linspace(-1, 1, 64).astype(np.float32))
    refs = []

    def work():
        s = mx.new_stream(mx.cpu)
        refs.append(weakref.ref(s._state))
        with mx.stream(s):
            for _ in range(3):
                mx.eval(c(x))
        mx.clear_streams()
    t = threading.Thread(target=work)
    t.start()
    t.join()
    gc.collect()
    assert refs[0]() is None
    np.testing.assert_allclose(np.array(c(x)), np.exp(np.array(x)) * 2 + np.array(x),
                               rtol=1e-6)
