"""`value_and_grad` and `grad` start the forward pass before they build the backward
graph (`core.forward_start`) when it is large or on a GPU: the results are those of a
pass that waits for the eval, errors still reach the eval, and a kept loss does not keep
its step's activations."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core import forward_start
from streamlet.core.eval import SMALL_WORK

WIDTH = 320  # a weight of WIDTH**2 elements is past the size a worker takes


def _problem(seed, width=WIDTH, batch=64):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal((width, width)).astype(np.float32) * 0.05
              for _ in range(3)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.standard_normal((batch, width)).astype(np.float32)
    return params, x, y


def _loss(M, kept=None):
    def loss(params, x, y):
        h = x
        for w in params:
            h = M.maximum(h @ w, 0.0)
            if kept is not None:
                kept.append(h)
        return M.mean(M.square(h - y))
    return loss


def _step(params, x, y, kept=None):
    return mx.value_and_grad(_loss(mx, kept))([mx.array(p) for p in params], mx.array(x),
                                              mx.array(y))


def test_the_inputs_here_are_large_enough_to_start():
    assert WIDTH * WIDTH >= SMALL_WORK and 16 * 16 * 3 < SMALL_WORK


def test_a_large_forward_pass_is_queued_before_the_gradients_are_built():
    value, grads = _step(*_problem(0))
    assert value._node.seq != 0  # queued (or run) before the eval
    assert all(g._node.seq == 0 for g in grads)  # the backward graph waits for the eval
    mx.eval(value, grads)


def test_a_small_forward_pass_waits_for_the_eval():
    value, grads = _step(*_problem(0, width=16, batch=4))
    assert value._node.seq == 0
    mx.eval(value, grads)


def _results(problem, kept=None):
    value, grads = _step(*problem, kept=kept)
    mx.eval(value, grads)
    return [np.array(value)] + [np.array(g) for g in grads]


def test_started_and_waiting_passes_give_the_same_bits(mlx):
    problem = _problem(1)
    started = _results(problem)
    forward_start.ENABLED = False
    try:
        waited = _results(problem)
    finally:
        forward_start.ENABLED = True
    for a, b in zip(started, waited):
        np.testing.assert_array_equal(a, b)
    value, grads = mlx.value_and_grad(_loss(mlx))([mlx.array(p) for p in problem[0]],
                                                 mlx.array(problem[1]), mlx.array(problem[2]))
    for a, b in zip(started, [value] + list(grads)):
        np.testing.assert_allclose(a, np.array(b), rtol=2e-4, atol=1e-6)


@mx.custom_function
def _after_the_pass(h):
    return h * 1.0


@_after_the_pass.vjp
def _after_the_pass_vjp(primals, cotangent, output):
    mx.synchronize()  # the pass has run by now, while the backward graph is being built
    return cotangent


def test_a_kept_loss_and_kept_activations_let_go_of_their_inputs():
    kept = []
    params, x, y = _problem(2)

    def loss(params, x, y):
        h = _after_the_pass(mx.maximum(x @ params[0], 0.0))
        return _loss(mx, kept)(params[1:], h, y)
    value, grads = mx.value_and_grad(loss)([mx.array(p) for p in params], mx.array(x),
                                           mx.array(y))
    mx.eval(value, grads)
    for a in [value] + kept:  # as after an eval outside a transform
        assert a._node.prim is None and a._node.inputs == ()
    np.testing.assert_allclose(np.array(kept[-1]), np.maximum(np.array(kept[-1]), 0))


def test_the_graph_is_kept_until_the_backward_graph_is_built():
    """The pass can finish while the loss function still runs (an eval inside it); the
    walk still finds every node's rule."""
    params, x, y = _problem(3)

    def loss(params, x, y):
        out = _loss(mx)(params, x, y)
        mx.eval(out)  # inside the transform: the graph stays
        return out
    value, grads = mx.value_and_grad(loss)([mx.array(p) for p in params], mx.array(x),
                                           mx.array(y))
    want = _results((params, x, y))
    for a, b in zip([value] + grads, want):
        np.testing.assert_array_equal(np.array(a), b)


def test_a_nested_transform_traces_without_running(mlx):
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) * 0.05

    def outer(M):
        def f(w):
            value, g = M.value_and_grad(lambda w: M.sum(M.tanh(w @ w)))(w)
            return value + M.sum(g * g)
        return M.grad(f)(M.array(w0))
    np.testing.assert_allclose(np.array(outer(mx)), np.array(outer(mlx)), rtol=1e-3,
                               atol=1e-3)


def test_a_failing_forward_kernel_fails_the_value_and_the_gradients():
    a = mx.zeros((WIDTH, WIDTH))  # singular: inv fails when it runs
    value, grad = mx.value_and_grad(lambda a: mx.sum(mx.linalg.inv(a, stream=mx.cpu)))(a)
    for out in (value, grad):
        with pytest.raises(RuntimeError, match="singular"):
            mx.eval(out)
    assert mx.sum(mx.ones((3,))).item() == 3.0  # the stream goes on


def test_a_stream_of_another_thread_raises_at_the_eval():
    made = {}
    t = threading.Thread(target=lambda: made.update(s=mx.new_stream(mx.cpu)))
    t.start()
    t.join()
    w = mx.ones((WIDTH, WIDTH))
    value, grad = mx.value_and_grad(lambda w: mx.sum(mx.sin(w, stream=made["s"])))(w)
    for out in (value, grad):
        with pytest.raises(RuntimeError, match="in current thread"):
            mx.eval(out)


def test_threads_start_their_passes_on_their_own_streams():
    problems = [_problem(10 + k) for k in range(4)]
    alone = [_results(p) for p in problems]
    got, errors = {}, []

    def work(k):
        try:
            with mx.stream(mx.new_stream(mx.cpu)):
                got[k] = _results(problems[k])
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(4):
        for a, b in zip(got[k], alone[k]):
            np.testing.assert_array_equal(a, b)


def test_grad_alone_starts_the_pass_too():
    params, x, y = _problem(5)
    g = mx.grad(_loss(mx))([mx.array(p) for p in params], mx.array(x), mx.array(y))
    want = _results((params, x, y))[1:]
    for a, b in zip(g, want):
        np.testing.assert_array_equal(np.array(a), b)
