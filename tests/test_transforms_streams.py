"""The transforms and the stream model: backward ops run on their forward op's stream
(with the waits between streams that the forward graph had), several threads
differentiate at once on their own streams, random draws inside a transformed function
are the draws outside it, `eval`/`async_eval` inside one keep the graph, and arrays that
escape a transform behave as in MLX.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import streamlet.core as mx
from conftest import errors_of_threads
from parity import assert_same


def _graph(a):
    """Every node of `a`'s graph that still has a primitive (not yet run)."""
    stack, seen, nodes = [a._node], set(), []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.prim is not None:
            nodes.append(n)
        stack.extend(n.inputs)
    return nodes


def _stream(n):
    return n.stream.stream


def _streams(a):
    """The streams of `a`'s graph, but the tracers' copies of the inputs (made on the
    default stream when the input is a leaf)."""
    return {_stream(n) for n in _graph(a) if n.prim.name != "copy"}


# -- streams of the backward graph -------------------------------------------------------------

def test_backward_ops_run_on_their_forward_ops_streams():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    x0 = np.linspace(-1, 1, 6).astype(np.float32)

    def f(x):
        a = mx.multiply(mx.sin(x, stream=s1), 3.0, stream=s1)
        with mx.stream(s2):
            b = mx.exp(a) + mx.sum(a * a)
        return mx.sum(mx.multiply(b, x, stream=s1), stream=s1)
    (g,) = mx.vjp(f, [mx.array(x0)], [mx.array(1.0)])[1]
    nodes = [n for n in _graph(g) if n.prim.name != "copy"]
    assert _streams(g) == {s1, s2}, _streams(g)  # never the default stream
    assert _stream(g._node) == s1  # the last op: sin's or the sum's rule
    by_name = {}
    for n in nodes:
        by_name.setdefault(n.prim.name, set()).add(_stream(n))
    # on CPU streams each derivative is one node (`rules.Derivative`)
    assert by_name["sin_derivative"] == {s1}
    assert by_name["exp_derivative"] == {s2}  # the cotangent times exp(a)
    a = np.sin(x0) * 3
    want = np.exp(a) + np.sum(a * a) + 3 * np.cos(x0) * (x0 * np.exp(a) + 2 * a * x0.sum())
    np.testing.assert_allclose(np.array(g), want, rtol=1e-5)


def test_jvp_and_vmap_ops_run_on_their_forward_ops_streams():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)

    def f(x):
        return mx.cos(mx.multiply(mx.tanh(x, stream=s1), 2, stream=s1), stream=s2)
    x = mx.array([0.1, 0.2, 0.3])
    _, (t,) = mx.jvp(f, [x], [mx.array([1.0, 1.0, 1.0])])
    assert _streams(t) == {s1, s2}
    y = mx.vmap(f)(mx.array([[0.1, 0.2], [0.3, 0.4]]))
    assert _streams(y) == {s1, s2}
    np.testing.assert_allclose(np.array(t), -np.sin(np.tanh([0.1, 0.2, 0.3]) * 2) * 2 *
                               (1 - np.tanh([0.1, 0.2, 0.3]) ** 2), rtol=1e-5)


def test_a_two_stream_training_step_gives_the_one_stream_gradients():
    """Large enough to run on worker threads: the backward graph crosses streams by the
    forward graph's events, and the values are those of a single stream."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((256, 256)) * 0.05, rng.standard_normal((256, 64)) * 0.05
    x = rng.standard_normal((512, 256))

    def loss(params, x, s1, s2):
        h = mx.tanh(mx.matmul(x, params[0], stream=s1), stream=s1)
        out = mx.matmul(h, params[1], stream=s2)
        return mx.mean(mx.square(out, stream=s2), stream=s2)
    params = [mx.array(w1), mx.array(w2)]
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    split = mx.value_and_grad(loss)(params, mx.array(x), s1, s2)
    d = mx.default_stream(mx.cpu)
    single = mx.value_and_grad(loss)(params, mx.array(x), d, d)
    mx.eval(split, single)
    for a, b in zip([split[0], *split[1]], [single[0], *single[1]]):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-7)


def _descend(k, check_streams=None):
    w = mx.array(np.full((64, 64), 0.01 * (k + 1), np.float32))
    x = mx.array(np.arange(64 * 8, dtype=np.float32).reshape(8, 64) / 512)
    for _ in range(20):
        value, g = mx.value_and_grad(lambda w: mx.sum(mx.tanh(x @ w) ** 2))(w)
        if check_streams is not None:
            assert _streams(g) == {check_streams}
        w = w - 0.1 * g
        mx.eval(w)
    return np.array(w)


def test_several_threads_differentiate_at_once_on_their_own_streams():
    with mx.stream(mx.cpu):  # where the threads descend
        alone = [_descend(k) for k in range(4)]
    results = {}

    def work(k):
        s = mx.new_stream(mx.cpu)
        with mx.stream(s):
            results[k] = _descend(k, check_streams=s)
    errors = errors_of_threads(work, 4)
    assert not errors, errors
    for k in range(4):  # each thread's descent is the one it makes alone
        np.testing.assert_allclose(results[k], alone[k], rtol=1e-6, atol=1e-7)


def test_a_stream_of_another_thread_raises_inside_a_transform():
    made = {}
    t = threading.Thread(target=lambda: made.update(s=mx.new_stream(mx.cpu)))
    t.start()
    t.join()
    g = mx.grad(lambda x: mx.sum(mx.sin(x, stream=made["s"])))(mx.array([1.0]))
    with pytest.raises(RuntimeError, match="in current thread"):
        mx.eval(g)


# -- random numbers ----------------------------------------------------------------------------

def test_random_draws_inside_a_transform_are_those_outside(mlx):
    def program(mod):
        mod.random.seed(7)
        outside = mod.random.normal((3,))
        after_outside = mod.random.uniform(shape=(2,))
        mod.random.seed(7)
        noise = []

        def f(x):
            n = mod.random.normal((3,))
            noise.append(n)
            return mod.sum(x * n)
        value, g = mod.value_and_grad(f)(mod.ones((3,)))
        after_inside = mod.random.uniform(shape=(2,))
        mod.random.seed(7)
        _, t = mod.jvp(lambda x: x * mod.random.normal((3,)), [mod.ones((3,))],
                       [mod.ones((3,))])
        mod.random.seed(7)
        batched = mod.vmap(lambda x: x + mod.random.uniform(shape=(3,)))(mod.zeros((2, 3)))
        keyed = mod.grad(lambda x: mod.sum(x * mod.random.normal((3,), key=mod.random.key(5))))(
            mod.ones((3,)))
        return [outside, after_outside, noise[0], value, g, after_inside, *t, batched, keyed]
    assert_same(mlx, program, rtol=1e-6)
    got = program(mx)
    np.testing.assert_array_equal(np.array(got[0]), np.array(got[4]))  # the gradient is the draw
    np.testing.assert_array_equal(np.array(got[1]), np.array(got[5]))  # the key moved alike


def test_each_threads_random_sequence_under_transforms():
    """The global key is per thread: a thread's draws inside grad are its own sequence."""
    out = {}

    def work(k):
        mx.random.seed(100 + k)
        plain = np.array(mx.random.normal((4,)))
        mx.random.seed(100 + k)
        g = mx.grad(lambda x: mx.sum(x * mx.random.normal((4,))))(mx.ones((4,)))
        out[k] = (plain, np.array(g))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        np.testing.assert_array_equal(*out[k])
    assert not np.array_equal(out[0][0], out[1][0])


# -- eval inside a transform; escaping arrays ---------------------------------------------------

def test_eval_and_reads_inside_a_transformed_function(mlx):
    def program(mod):
        def f(x):
            y = mod.sin(x) * x
            mod.eval(y)
            z = mod.exp(y)
            mod.eval([z, {"y": y}])
            scale = z.sum().item()  # a read inside the transform
            return mod.sum(z * y) * (1.0 if scale > 0 else 2.0)
        x = mod.array([0.3, -0.4, 1.2])
        value, g = mod.value_and_grad(f)(x)
        _, t = mod.jvp(f, [x], [mod.ones_like(x)])
        h = mod.grad(mod.grad(lambda x: f(x) * 0.5))(mod.array(0.7))
        return [value, g, *t, h]
    assert_same(mlx, program, rtol=1e-5)


def test_async_eval_inside_a_transform_raises_as_in_mlx(mlx):
    def program(mod):
        def f(x):
            y = mod.sin(x)
            mod.async_eval(y)
            return mod.sum(y)
        return mod.grad(f)(mod.array([0.3]))
    assert_same(mlx, program)


def test_eval_of_a_multi_output_primitive_inside_a_transform(mlx):
    def program(mod):
        def f(x):
            q, r = mod.divmod(x * 3, 1.5)
            mod.eval(q, r)
            w, v = mod.linalg.eigh(mod.array([[2.0, 1.0], [1.0, 3.0]]), stream=mod.cpu)
            mod.eval(w)
            return mod.sum(q * x + r * x + w[0])
        return mod.value_and_grad(f)(mod.array([0.4, 1.7]))
    assert_same(mlx, program, rtol=1e-5)


def test_arrays_escaping_a_transform(mlx):
    def program(mod):
        kept = []

        def f(x):
            y = mod.tanh(x) * 2
            kept.append(y)
            kept.append(mod.grad(lambda z: mod.sum(z * y))(x))  # an inner transform's result
            return mod.sum(y * y)
        x = mod.array([0.5, -1.0])
        g = mod.grad(f)(x)
        y, inner = kept
        later = mod.grad(lambda z: mod.sum(z * y))(mod.ones((2,)))  # y is a constant now
        return [g, y, inner, later, y + 1, mod.vmap(lambda r: r * y)(mod.ones((3, 2)))]
    assert_same(mlx, program, rtol=1e-6)


def test_graph_of_an_escaped_tracer_is_freed_after_eval():
    kept = []

    def f(x):
        y = mx.sin(x) * 3
        kept.append(y)
        return mx.sum(y)
    mx.grad(f)(mx.array([1.0, 2.0]))
    y = kept[0]
    assert y._node.prim is not None  # not run yet: its graph is there
    mx.eval(y)
    np.testing.assert_allclose(np.array(y), np.sin([1.0, 2.0]) * 3, rtol=1e-6)
    assert y._node.prim is None and y._node.inputs == ()  # no transform keeps it now


def test_another_threads_transform_keeps_no_graph_of_this_threads_results():
    """A tracer keeps its graph once run only while its own transform runs: a training
    thread's kept losses let go of their activations though another thread is inside a
    transform meanwhile."""
    inside, leave = threading.Event(), threading.Event()

    def held_open(x):
        inside.set()
        assert leave.wait(30)
        return mx.sum(x * x)
    other = threading.Thread(target=lambda: mx.grad(held_open)(mx.ones((3,))))
    other.start()
    try:
        assert inside.wait(30)
        kept = []
        for k in range(3):
            w = mx.array(np.full((4, 4), k + 1.0, np.float32))
            loss, g = mx.value_and_grad(lambda w: mx.sum(mx.tanh(w @ w)))(w)
            mx.eval(loss, g)
            kept.append(loss)
        for loss in kept:
            assert loss._node.prim is None and loss._node.inputs == ()
        np.testing.assert_allclose(np.array(kept[0]), np.tanh(np.full((4, 4), 4.0)).sum(),
                                   rtol=1e-6)
    finally:
        leave.set()
        other.join()
