"""A matrix product reads an operand transposed through a flag of its node (`ta`, `tb`)
instead of a transpose node: `x @ w.T` (and `addmm` with `w.T`) built on one stream is one
node, and the backward of a product takes its operands transposed the same way.  The
results are the bits of products of explicit transposes, and every rule (vjp, jvp, vmap,
the shape rule of shapeless compile) and export handle the flags."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from conftest import requires_gpu
from streamlet.core.eval import _order
from streamlet.core.ops import linalg
from streamlet.core.stream import resolve

DTYPES = {"float32": 1e-5, "float16": 2e-2, "bfloat16": 5e-2}


def _prims(*arrays):
    """The primitives and params of the unevaluated graph under `arrays`."""
    order, _ = _order([a._node for a in arrays])
    found = [(n.prim.name, dict(n.params or {})) for n in order]
    for n in order:
        n.seq = 0  # unmarked: a later eval schedules them as usual
    return found


def _loss(M, x, y):
    return M.sin(x @ y).sum()


@st.composite
def products(draw):
    m, k, n = (draw(st.integers(0, 5)) for _ in range(3))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    return x.astype(np.float32), y.astype(np.float32), dtype


def test_the_backward_of_a_matrix_product_builds_no_transposes():
    x, y = mx.array(np.ones((3, 4), np.float32)), mx.array(np.ones((4, 2), np.float32))
    gx, gy = mx.grad(lambda a, b: _loss(mx, a, b), argnums=(0, 1))(x, y)
    prims = _prims(gx, gy)
    names = [p for p, _ in prims]
    assert "transpose" not in names
    flags = sorted(tuple(sorted(k for k in params if k in ("ta", "tb")))
                   for p, params in prims if p == "matmul")
    assert flags == [(), ("ta",), ("tb",)]  # the forward product, then c y^T and x^T c


@settings(max_examples=40, deadline=None)
@given(products())
def test_gradients_are_the_bits_of_explicit_transposes(case):
    x, y, dtype = case
    a, b = (mx.array(v).astype(getattr(mx, dtype)) for v in (x, y))
    gx, gy = mx.grad(lambda p, q: _loss(mx, p, q), argnums=(0, 1))(a, b)
    c, at, bt = mx.cos(a @ b), a.T, b.T
    mx.eval(at, bt)  # evaluated views: the products below read them as the kernels did
    want_x, want_y = c @ bt, at @ c
    for got, want in ((gx, want_x), (gy, want_y)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.array(got.astype(mx.float32)),
                                      np.array(want.astype(mx.float32)))


def _second_order(M, x, y):
    """Transforms through the flagged products of a first gradient."""
    xa, ya = M.array(x), M.array(y)

    def gx(p, q):  # its graph holds the products c y^T and x^T c
        return M.grad(lambda s, t: _loss(M, s, t), argnums=(0, 1))(p, q)

    gg = M.grad(lambda p, q: (gx(p, q)[0] ** 2).sum() + (gx(p, q)[1] ** 2).sum(),
                argnums=(0, 1))(xa, ya)
    tangent = M.jvp(lambda p: gx(p, ya)[1], [xa], [M.ones_like(xa)])[1][0]
    batched = M.vmap(lambda p: gx(p, ya)[0], in_axes=1, out_axes=1)(M.stack([xa, 2 * xa], 1))
    return [np.array(v) for v in (*gg, tangent, batched)]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # `mlx`: a module
@given(products())
def test_grad_of_grad_jvp_and_vmap_through_flagged_products_match_mlx(mlx, case):
    x, y, _ = case
    ours, theirs = _second_order(mx, x, y), _second_order(mlx, x, y)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)


def test_a_shapeless_compiled_gradient_replays_at_other_shapes(on_cpu):
    grad = mx.grad(lambda a, b: _loss(mx, a, b), argnums=(0, 1))
    compiled = mx.compile(grad, shapeless=True)
    rng = np.random.default_rng(3)
    for m, k, n in ((3, 4, 2), (5, 2, 6), (1, 7, 1)):
        x, y = (mx.array(rng.standard_normal(s).astype(np.float32)) for s in ((m, k), (k, n)))
        for got, want in zip(compiled(x, y), grad(x, y)):
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.array(got), np.array(want))


def test_an_exported_gradient_keeps_the_flags():
    grad = mx.grad(lambda a, b: _loss(mx, a, b), argnums=(0, 1))
    rng = np.random.default_rng(4)
    x, y = (mx.array(rng.standard_normal(s).astype(np.float32)) for s in ((3, 4), (4, 2)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grad.fn")
        mx.export_function(path, grad, x, y)
        imported = mx.import_function(path)
        for got, want in zip(imported(x, y), grad(x, y)):
            np.testing.assert_array_equal(np.array(got), np.array(want))


@requires_gpu
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_flagged_products_on_the_gpu_match_the_cpu(dtype, flags):
    rng = np.random.default_rng(5)
    ta, tb = flags
    x = rng.standard_normal((6, 5) if ta else (5, 6)).astype(np.float32)
    y = rng.standard_normal((7, 6) if tb else (6, 7)).astype(np.float32)
    got = []
    for device in (mx.gpu, mx.cpu):
        a, b = (mx.array(v).astype(getattr(mx, dtype), stream=device) for v in (x, y))
        mx.eval(a, b)
        out = linalg._product(a._node, b._node, resolve(device), ta, tb)
        got.append(np.array(out.astype(mx.float32)))
    assert got[0].shape == (5, 7)
    tol = 5e-3 if dtype == "float32" else DTYPES[dtype]  # float32 on TF32 tensor cores
    np.testing.assert_allclose(got[0], got[1], rtol=tol, atol=tol)


@st.composite
def transposed_operands(draw):
    """Operands of a product, one or both given as transposes of the last two axes, with a
    batch, or 1-D on the side not transposed."""
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    batch = draw(st.sampled_from([(), (2,), (1, 3)]))
    turn_x, turn_y = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
    x_shape = (k,) if not turn_x and not batch and draw(st.booleans()) else batch + (m, k)
    y_shape = (k,) if not turn_y and not batch and len(x_shape) == 2 and draw(st.booleans()) \
        else batch + (k, n)
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    x = rng.standard_normal(x_shape[:-2] + x_shape[:-3:-1] if turn_x else x_shape)
    y = rng.standard_normal(y_shape[:-2] + y_shape[:-3:-1] if turn_y else y_shape)
    return x.astype(np.float32), y.astype(np.float32), turn_x, turn_y, \
        draw(st.sampled_from(sorted(DTYPES)))


@settings(max_examples=60, deadline=None)
@given(transposed_operands())
def test_a_product_of_transposes_is_one_node_with_the_bits_of_the_views(case):
    x, y, turn_x, turn_y, dtype = case
    a, b = (mx.array(v).astype(getattr(mx, dtype)) for v in (x, y))
    mx.eval(a, b)
    ta = a.swapaxes(-1, -2) if turn_x else a
    tb = b.swapaxes(-1, -2) if turn_y else b
    product, fused = ta @ tb, mx.addmm(mx.array(0.5, a.dtype), ta, tb, 2.0, 1.5)
    prims = _prims(product, fused)
    assert "transpose" not in [p for p, _ in prims]
    for name, params in prims:
        assert (params.get("ta", False), params.get("tb", False)) == (turn_x, turn_y), name
    mx.eval(ta, tb)  # now evaluated views: the products read them as they are
    for got, want in ((product, ta @ tb), (fused, mx.addmm(mx.array(0.5, a.dtype), ta, tb,
                                                            2.0, 1.5))):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.array(got.astype(mx.float32)),
                                      np.array(want.astype(mx.float32)))


def test_only_swaps_of_the_last_two_axes_on_the_products_stream_fold():
    s = mx.new_stream(mx.default_device())
    a, w = mx.ones((2, 3, 3, 3)), mx.ones((5, 4))
    mx.eval(a, w)
    names = [p for p, _ in _prims(a.transpose(0, 2, 1, 3) @ a, w.T @ w.T.T)]
    assert names.count("transpose") == 2  # (0, 2, 1, 3), and the transpose of a transpose
    across = mx.matmul(mx.ones((2, 4)), mx.transpose(w, stream=s))  # another stream's
    assert [p for p, _ in _prims(across)].count("transpose") == 1
    np.testing.assert_array_equal(np.array(across), np.full((2, 5), 4.0, np.float32))


def test_a_linear_layer_transposes_only_its_weights_cotangent():
    import streamlet.nn as nn
    layer = nn.Linear(4, 3)
    x = mx.ones((2, 4))
    mx.eval(layer.parameters())
    assert "transpose" not in [p for p, _ in _prims(layer(x))]
    loss_and_grad = nn.value_and_grad(layer, lambda m, v: m(v).sum())
    loss, grads = loss_and_grad(layer, x)
    names = [p for p, _ in _prims(loss, grads["weight"], grads["bias"])]
    assert names.count("transpose") == 1  # (x^T c)^T, as MLX computes it
    np.testing.assert_array_equal(np.array(grads["weight"]), np.full((3, 4), 2.0, np.float32))


def test_a_compiled_and_an_exported_product_of_a_transpose():
    rng = np.random.default_rng(6)
    fn = lambda x, w: mx.tanh(x @ w.T)  # noqa: E731
    shapeless = mx.compile(fn, shapeless=True)
    for m, k, n in ((3, 4, 2), (5, 2, 6)):
        x, w = (mx.array(rng.standard_normal(s).astype(np.float32)) for s in ((m, k), (n, k)))
        np.testing.assert_array_equal(np.array(shapeless(x, w)), np.array(fn(x, w)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fn.fn")
        mx.export_function(path, fn, x, w)
        np.testing.assert_array_equal(np.array(mx.import_function(path)(x, w)[0]),
                                      np.array(fn(x, w)))


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_gradients_of_a_product_of_a_transpose_at_realistic_sizes(mlx, dtype):
    """The cotangent of a transposed operand is the transpose of the product MLX computes
    (the product the other way round would sum in another order)."""
    rng = np.random.default_rng(7)
    xs, ws, cs = ((64, 300), (200, 300), (64, 200))
    x, w, c = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, cs))
    ours = mx.vjp(lambda a, b: a @ b.T, [mx.array(v).astype(getattr(mx, dtype))
                                         for v in (x, w)],
                  [mx.array(c).astype(getattr(mx, dtype))])[1]
    a, b, ct = (mx.array(v).astype(getattr(mx, dtype)) for v in (x, w, c))
    at = a.T
    mx.eval(at)  # an evaluated view, as the transpose node gave it before
    want = (ct @ b, (at @ ct).T)
    for got, expected in zip(ours, want):
        np.testing.assert_array_equal(np.array(got.astype(mx.float32)),
                                      np.array(expected.astype(mx.float32)))
    if dtype == "bfloat16":  # MLX's CPU gemm is NumPy's in bfloat16 only (float32 in float32)
        M = mlx
        theirs = M.vjp(lambda a, b: a @ b.T, [M.array(v).astype(getattr(M, dtype))
                                              for v in (x, w)],
                       [M.array(c).astype(getattr(M, dtype))])[1]
        for got, expected in zip(ours, theirs):
            np.testing.assert_array_equal(np.array(got.astype(mx.float32)),
                                          np.array(expected.astype(M.float32)))


class _HalfCleared:
    """A transpose node as another thread may read it while the worker that ran it clears
    its fields (its `prim`, then `inputs`, then `params`) after storing its data."""

    def __init__(self, node, prim, inputs, params):
        self.prim, self.inputs, self.params = prim, inputs, params
        self.stream, self.shape = node.stream, node.shape


@pytest.mark.parametrize("seen", [(True, False, False), (True, True, False),
                                  (True, False, True), (False, False, False)])
def test_a_transpose_being_finished_by_a_worker_is_not_folded(seen):
    """`x @ t` while a worker finishes `t`: whichever of its fields are read cleared, the
    product reads `t` as an input (never a half-read transpose, never an exception)."""
    t = mx.ones((3, 2)).T
    n = t._node
    keep_prim, keep_inputs, keep_params = seen
    half = _HalfCleared(n, n.prim if keep_prim else None, n.inputs if keep_inputs else (),
                        n.params if keep_params else None)
    params = {}
    assert linalg._untransposed(half, n.stream, params, "tb") is half and not params
    whole = _HalfCleared(n, n.prim, n.inputs, n.params)
    assert linalg._untransposed(whole, n.stream, params, "tb") is n.inputs[0]
    assert params == {"tb": True}


def test_the_export_callback_describes_mlxs_transposes(mlx):
    def described(M):
        records = []

        def callback(d):
            if d["type"] == "primitive":
                records.append((d["name"], [(i[0], tuple(i[1])) for i in d["inputs"]],
                                [(o[0], tuple(o[1])) for o in d["outputs"]]))
        M.export_function(callback, lambda x, w: M.swapaxes(x, -1, -2) @ w.T,
                          M.ones((4, 3)), M.ones((5, 4)))
        M.export_function(callback, lambda x, w, c: M.addmm(c, x, w.T), M.ones((3, 4)),
                          M.ones((5, 4)), M.ones((3, 5)))
        return [r for r in records if r[0] != "Broadcast"]  # MLX broadcasts addmm's c
    ours, theirs = described(mx), described(mlx)
    assert [r[0] for r in ours] == ["Transpose", "Transpose", "Matmul", "Transpose", "Addmm"]
    assert [r[0] for r in theirs] == ["Transpose", "Transpose", "Matmul", "Transpose", "AddMM"]
    assert ours[:4] == theirs[:4]
    assert sorted(ours[4][1][1:]) == sorted(theirs[4][1][:2])  # the product's operands
