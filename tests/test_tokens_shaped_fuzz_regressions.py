"""Fuzz regressions for tracer tokens (`graph._Token`): work a transform's function hands
to a helper thread (on the caller's stream) is part of that transform's graph.

A node built from a tracer in a thread outside any transform was marked with that
thread's token, None: not a tracer, so the walk stopped at it and the gradient through
it was silently zero (MLX and the earlier streamlet differentiate through it).  A compiled
function called there replayed its fused tape, unmarked, with the same result.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading

import numpy as np
import pytest

import streamlet.core as mx

_UNARY = [(mx.sin, np.sin, np.cos), (mx.tanh, np.tanh, lambda v: 1 - np.tanh(v) ** 2),
          (mx.exp, np.exp, np.exp), (mx.square, np.square, lambda v: 2 * v)]


def _in_helper(pool, fn, *args):
    """`fn(*args)` run by a pool thread on the calling thread's default stream."""
    s = mx.default_stream(mx.cpu)

    def work():
        with mx.stream(s):
            return fn(*args)
    return pool.submit(work).result()


@pytest.mark.parametrize("seed", range(6))
def test_ops_a_helper_thread_builds_from_tracers_are_differentiated(seed):
    rng = np.random.default_rng(seed)
    with cf.ThreadPoolExecutor(3) as pool:
        for it in range(8):
            n = int(rng.choice([5, 300, 20000]))  # large ones run on the pool's workers
            x = (rng.standard_normal(n) * 0.5).astype(np.float32)
            picks = [_UNARY[int(k)] for k in rng.integers(0, len(_UNARY), 3)]
            ev = it % 3

            def fun(x):
                ys = [_in_helper(pool, lambda f=f: f(x) * x) for f, _, _ in picks]
                s = ys[0] + ys[1] + ys[2]
                if ev == 1:
                    mx.eval(ys[1])  # run (inside the transform) before the walk needs it
                elif ev == 2:
                    mx.eval(s)
                return mx.sum(s * s)
            got = np.array(mx.grad(fun)(mx.array(x)))
            s = sum(f(x) * x for _, f, _ in picks)
            ds = sum(d(x) * x + f(x) for _, f, d in picks)
            np.testing.assert_allclose(got, 2 * s * ds, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("seed", range(3))
def test_compiled_function_called_in_a_helper_thread_on_tracers(seed):
    rng = np.random.default_rng(100 + seed)
    for shapeless in (False, True):
        h = mx.compile(lambda x: mx.sin(x) * x + mx.exp(x * 0.5), shapeless=shapeless)
        with cf.ThreadPoolExecutor(1) as pool:
            for n in (4, 9, 4, 5000):
                x = rng.standard_normal(n).astype(np.float32)
                got = np.array(mx.grad(lambda x: mx.sum(_in_helper(pool, h, x) * 2))(mx.array(x)))
                want = 2 * (np.cos(x) * x + np.sin(x) + 0.5 * np.exp(x * 0.5))
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                # outside a transform it still replays (the value is the function's)
                np.testing.assert_allclose(np.array(_in_helper(pool, h, mx.array(x))),
                                           np.sin(x) * x + np.exp(x * 0.5), rtol=1e-5)


def test_helper_threads_nodes_let_go_of_their_graph_after_the_transform():
    """Marked with the caller's transform, not kept forever: run after it ended, such a
    node drops its graph."""
    kept = []
    with cf.ThreadPoolExecutor(1) as pool:
        def fun(x):
            y = _in_helper(pool, lambda: mx.sin(x) * 3)
            kept.append(_in_helper(pool, lambda: y + 1))  # escapes, not run here
            return mx.sum(y)
        g = mx.grad(fun)(mx.array([1.0, 2.0]))
    np.testing.assert_allclose(np.array(g), np.cos([1.0, 2.0]) * 3, rtol=1e-6)
    (z,) = kept
    mx.eval(z)
    np.testing.assert_allclose(np.array(z), np.sin([1.0, 2.0]) * 3 + 1, rtol=1e-6)
    assert z._node.prim is None and z._node.inputs == ()


def test_helper_threads_own_transform_on_tracers_then_run_by_the_caller():
    """A helper thread differentiates the caller's tracer (its own transform); the caller
    runs the result inside its transform, then differentiates through it."""
    x = np.linspace(-1, 1, 5).astype(np.float32)
    with cf.ThreadPoolExecutor(1) as pool:
        def fun(x):
            g = _in_helper(pool, mx.grad(lambda x: mx.sum(mx.sin(x) * x)), x)
            mx.eval(g)
            return mx.sum(g * g)
        got = np.array(mx.grad(fun)(mx.array(x)))
    g = np.cos(x) * x + np.sin(x)
    np.testing.assert_allclose(got, 2 * g * (2 * np.cos(x) - x * np.sin(x)), rtol=1e-5,
                               atol=1e-6)


def test_threads_differentiating_with_helpers_concurrently():
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            with mx.stream(mx.new_stream(mx.cpu)), cf.ThreadPoolExecutor(1) as pool:
                for _ in range(10):
                    x = rng.standard_normal(int(rng.choice([3, 8000]))).astype(np.float32)

                    def fun(x):
                        y = _in_helper(pool, lambda: mx.tanh(x) * x)
                        mx.eval(y)
                        return mx.sum(y * x)
                    got = np.array(mx.grad(fun)(mx.array(x)))
                    t = np.tanh(x)
                    want = 2 * t * x + (1 - t * t) * x * x
                    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                        errors.append(seed)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
