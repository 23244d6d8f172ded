"""The fast paths of the gradient walk give what MLX gives: value_and_grad substitutes
only the arguments it differentiates (the others reach the function as they are), mean's
cotangent is scaled before it is spread, subtract and negative build their cotangents
without their rules, broadcast cotangents are summed back, and 2-D matmuls take the
short vjp."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import streamlet.core as mx
from test_transforms_streams import _graph

RNG = np.random.default_rng(7)


def _data(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _both(mlx, fn, *arrays, **grad_args):
    """The gradients of `fn` at `arrays` (NumPy), from streamlet and from MLX."""
    out = []
    for M in (mx, mlx):
        g = M.grad(lambda *a: fn(M, *a), **grad_args)(*[M.array(a) for a in arrays])
        out.append([np.array(x) for x in (g if isinstance(g, tuple) else (g,))])
    return out


def test_arguments_not_differentiated_reach_the_function_as_they_are():
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    seen = {}

    def f(w, x, y):
        seen.update(x=x, y=y)
        return (w * x - y).sum()
    assert mx.grad(f)(mx.array([0.5, 0.5]), x, y).tolist() == [1.0, 2.0]
    assert seen["x"] is x and seen["y"] is y


def test_argnums_and_argnames_with_lists_filled_in_place_as_mlx(mlx):
    results = []
    for M in (mx, mlx):
        p = [M.array(1.0), (M.array(2.0), M.array(3.0))]
        d = {"a": M.array(4.0)}
        first, pair = p[0], p[1]

        def f(x, p, d):
            p.append(5)  # the caller's own list, as in MLX
            d["z"] = 1
            return p[0] * p[1][0] * x * d["a"]
        value, (gp, gd) = M.value_and_grad(f, argnums=1, argnames="d")(M.array(3.0), p, d=d)
        assert p[0] is first and p[1] is not pair and len(p) == 3 and d["z"] == 1
        results.append((value.item(), [gp[0].item(), gp[1][0].item(), gp[1][1].item(), gp[2]],
                        gd["d"]["a"].item(), gd["d"]["z"], sorted(gd)))
    assert results[0] == results[1]


def test_a_failing_function_leaves_the_arguments_as_they_were():
    p = [mx.array(1.0), {"b": mx.array(2.0)}]
    a, b = p[0], p[1]["b"]

    def f(p):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        mx.grad(f)(p)
    assert p[0] is a and p[1]["b"] is b


def _prims(*arrays):
    """The names of the primitives of the nodes not run yet behind `arrays`."""
    return {n.prim.name for a in arrays for n in _graph(a)}


def test_a_tracer_of_an_evaluated_array_holds_its_value_and_runs_nothing(mlx):
    """value_and_grad over evaluated parameters: each tracer is a leaf holding the
    parameter's buffer (no copy node to run), on the parameter's own stream; an input not
    evaluated yet gets a copy node as before.  Both give MLX's gradients."""
    s = mx.new_stream(mx.default_device())
    w = mx.add(mx.array(_data(4, 3)), 0.0, stream=s)
    b = mx.array(_data(3))
    x = mx.array(_data(5, 4))
    mx.eval(w, x)  # b is a leaf already; w ran on `s`
    seen = {}

    def loss(p, x):
        seen.update(w=p[0], b=p[1])
        return mx.tanh(x @ p[0] + p[1]).sum()
    value, grads = mx.value_and_grad(loss)([w, b], x)
    tw, tb = seen["w"]._node, seen["b"]._node
    assert tw.prim is None and tw.data is w._node.data and tw.stream is w._node.stream
    assert w._node.stream.stream == s
    assert tb.prim is None and tb.data is b._node.data
    assert "copy" not in _prims(value, *grads)
    pending = w + 0.0  # not evaluated: its tracer is a copy node
    _, g_pending = mx.value_and_grad(loss)([pending, b], x)
    assert seen["w"]._node.prim.name == "copy"
    their = mlx.value_and_grad(lambda p, x: mlx.tanh(x @ p[0] + p[1]).sum())(
        [mlx.array(np.array(w)), mlx.array(np.array(b))], mlx.array(np.array(x)))
    np.testing.assert_allclose(np.array(value), np.array(their[0]), rtol=1e-5)
    for ours in (grads, g_pending):
        for g, t in zip(ours, their[1]):
            np.testing.assert_allclose(np.array(g), np.array(t), rtol=1e-5, atol=1e-6)


def test_checkpoint_over_inputs_evaluated_on_streams_no_longer_usable(mlx):
    """A tracer of an evaluated input stays on the input's stream; what checkpoint builds
    from it (`depends`) goes to the current stream, not to a stream of another thread or
    one destroyed since (found by a review)."""
    w_np = np.array([0.5, 1.0, -2.0], np.float32)

    def loss(M, w):
        return M.checkpoint(lambda z: M.sin(z) * z)(w).sum()
    want = np.array(mlx.grad(lambda w: loss(mlx, w))(mlx.array(w_np)))
    w = mx.exp(mx.array(np.log(np.abs(w_np)))) * mx.array(np.sign(w_np))
    mx.eval(w)
    mx.clear_streams()  # w's stream is destroyed
    np.testing.assert_allclose(np.array(mx.grad(lambda w: loss(mx, w))(w)), want, rtol=1e-6)
    made = {}

    def make():
        made["w"] = mx.array(w_np) + 0.0
        mx.eval(made["w"])
    worker = threading.Thread(target=make)
    worker.start()
    worker.join()
    got = mx.grad(lambda w: loss(mx, w))(made["w"])  # its stream is the other thread's
    np.testing.assert_allclose(np.array(got), want, rtol=1e-6)


def test_grad_of_grad_through_an_argument_not_differentiated(mlx):
    def inner(M):
        return M.grad(lambda y, z: (M.sin(y) * z).sum())

    def outer(M, x):
        return (inner(M)(x, x * x) * x).sum()
    ours, theirs = _both(mlx, outer, _data(5))
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["mean", "sum"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), ((0, 1), False),
                                           (1, False), ((0, 2), False), (1, True),
                                           ((0, 1), True)])
def test_reduction_gradients_match_mlx(mlx, op, axis, keepdims):
    w = _data(*np.sum(np.zeros((3, 4, 5)), axis=axis, keepdims=keepdims).shape)

    def f(M, x):
        return (getattr(M, op)(x, axis=axis, keepdims=keepdims) * M.array(w)).sum()
    ours, theirs = _both(mlx, f, _data(3, 4, 5))
    np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("axis", [0, 1])  # spread by broadcasting alone, and through ones
def test_shapeless_compiled_sum_gradient_follows_new_shapes(axis):
    g = mx.compile(mx.grad(lambda x: mx.square(mx.sum(x, axis=axis)).sum()), shapeless=True)
    for shape in [(2, 3), (4, 5), (3, 2, 2)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        want = np.broadcast_to(2 * x.sum(axis=axis, keepdims=True), shape)
        np.testing.assert_allclose(np.array(g(mx.array(x))), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])  # float16: the rules' path
def test_subtract_and_negative_gradients_match_mlx(mlx, dtype):
    def f(M, x, y):
        return ((x - y) * -x - M.negative(y)).sum()
    ours, theirs = _both(mlx, f, _data(4, dtype=dtype), _data(4, dtype=dtype), argnums=(0, 1))
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bias", [(6,), (1, 6), (5, 1), (), (2, 1, 6)])
def test_broadcast_cotangents_are_summed_back_as_mlx(mlx, bias):
    def f(M, x, b):
        return M.square(x + b).sum()
    ours, theirs = _both(mlx, f, _data(5, 6), _data(*bias), argnums=(0, 1))
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)),
                                    ((2, 3, 4), (4, 2)), ((2, 3, 4), (2, 4)),
                                    ((2, 5, 3, 4), (2, 4))])
def test_matmul_gradients_match_mlx(mlx, shapes):
    def f(M, x, y):  # a second operand given as (out, in) is a Linear layer's weight
        return M.sin(x @ (y.T if y.shape[-1] == x.shape[-1] != y.shape[0] else y)).sum()
    ours, theirs = _both(mlx, f, *[_data(*s) for s in shapes], argnums=(0, 1))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["transposed x", "complex", "plain"])
@pytest.mark.parametrize("shapes", [((2, 3, 0), (0, 4)), ((2, 3, 5), (5, 0)),
                                    ((0, 3, 5), (5, 2))])
def test_empty_stacked_products_gradients_match_mlx(mlx, case, shapes):
    """A stack of matrices times a matrix with an empty dimension: the general rule's
    folded product (a transposed `x`, complex numbers) and the short way give MLX's
    zero-filled gradients of the inputs' shapes (the fold once asked reshape to infer
    -1 for no elements)."""
    xs, ys = shapes
    if case == "transposed x":
        xs = xs[:-2] + xs[:-3:-1]
    dtype = np.complex64 if case == "complex" else np.float32
    x, y = _data(*xs).astype(dtype), _data(*ys).astype(dtype)

    def f(M, a, b):
        a = M.swapaxes(a, -1, -2) if case == "transposed x" else a
        p = a @ b
        return (M.abs(p) if case == "complex" else M.sin(p)).sum()
    ours, theirs = _both(mlx, f, x, y, argnums=(0, 1))
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
