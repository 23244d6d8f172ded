"""Regressions found by a second round of differential fuzzing of whole training programs
(random models, losses, optimizers with schedules, ``clip_grad_norm``, plain and under
``mx.compile``, float32 and half precision) against MLX, from the same weights."""
from __future__ import annotations

import math

import numpy as np
import pytest

from parity import assert_same

_X = np.array([[0.0095, -0.019], [0.0285, 0.0]], np.float32)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("ord,axis", [(None, None), (2, -1), ("fro", (0, 1)), (1, 0),
                                      (math.inf, None), (3, 1), (1, (0, 1))])
def test_norm_of_half_arrays_rounds_in_the_half_type(mlx, dtype, ord, axis):
    """``linalg.norm`` of a bfloat16/float16 array is built from ops in that type (square,
    sum, sqrt each round), as in MLX: it was computed in float32 and rounded once, one ulp
    off (``Muon``'s Newton-Schulz step normalizes with it, so bf16 Muon training drifted)."""
    r = np.random.RandomState(3)
    for x in (_X, r.randn(6, 5).astype(np.float32) * 3):
        assert_same(mlx, lambda m: m.linalg.norm(m.array(x).astype(getattr(m, dtype)),
                                                 ord=ord, axis=axis, keepdims=True))
        assert_same(mlx, lambda m: m.linalg.norm(m.array(x).astype(getattr(m, dtype)),
                                                 ord=ord, axis=axis))
        assert_same(mlx, lambda m: m.grad(lambda t: m.linalg.norm(t, ord=ord, axis=axis).sum())(
            m.array(x).astype(getattr(m, dtype))))


def test_muon_bfloat16_steps_match(mlx):
    """Two ``Muon`` steps on bfloat16 parameters give MLX's parameters and state bits."""
    import mlx.optimizers as mlx_optim

    import streamlet.optimizers as optim

    def run(m):
        o = optim if m.__name__.startswith("streamlet") else mlx_optim
        opt = o.Muon(0.1)
        p = {"w": m.array([[1.0, 2.0], [3.0, 4.0]]).astype(m.bfloat16)}
        g = {"w": m.array([[0.1, -0.2], [0.3, 0.0]]).astype(m.bfloat16)}
        for _ in range(2):
            p = opt.apply_gradients(g, p)
        return p["w"], opt.state["w"]["v"]

    assert_same(mlx, run)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_matmul_vjp_folds_the_batch_of_a_stack_times_a_matrix(mlx, dtype):
    """The weight's gradient of ``x @ w`` (``x`` 3-D, ``w`` 2-D, a ``Linear`` on a sequence)
    is one product over all rows, as MLX folds the batch into the rows: it was a product
    per batch entry, rounded, then summed (an ulp off in half precision training)."""
    r = np.random.RandomState(0)
    x = r.randn(4, 5, 4).astype(np.float32)
    w = r.randn(4, 3).astype(np.float32)
    c = (r.randn(4, 5, 3) * 30).astype(np.float32)

    def grads(m):
        d = getattr(m, dtype)
        xs, ws, cs = (m.array(v).astype(d) for v in (x, w, c))
        return (m.vjp(lambda a, b: a @ b, [xs, ws], [cs])[1]
                + m.vjp(lambda a, b: m.addmm(b[0], a, b), [xs, ws], [cs])[1]
                + m.vjp(lambda a, b: a @ b[:, 0], [xs, ws], [cs[..., 0]])[1])
    assert_same(mlx, grads, rtol=None if dtype != "float32" else 1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_softmax_and_attention_vjp_round_as_mlx(mlx, dtype):
    """softmax's vjp is ``s * c - s * sum(s * c)`` as in MLX (it was ``s * (c - sum(s *
    c))``): in half precision the gradients of softmax and of
    ``fast.scaled_dot_product_attention`` (so of ``MultiHeadAttention``) were an ulp off."""
    r = np.random.RandomState(1)
    q, k, v = (r.randn(2, 2, 5, 4).astype(np.float32) for _ in range(3))
    c = (r.randn(2, 2, 5, 4) * 30).astype(np.float32)

    def grads(m):
        d = getattr(m, dtype)
        qs, ks, vs, cs = (m.array(t).astype(d) for t in (q, k, v, c))
        return (m.vjp(lambda a: m.softmax(a, axis=-1, precise=True), [qs], [cs])[1]
                + m.jvp(lambda a: m.softmax(a, axis=-1, precise=True), [qs], [cs])[1]
                + m.vjp(lambda a, b, e: m.fast.scaled_dot_product_attention(
                    a, b, e, scale=0.5, mask="causal"), [qs, ks, vs], [cs])[1])
    assert_same(mlx, grads)
