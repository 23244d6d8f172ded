"""Cases a second differential fuzz of compile against MLX 0.32.4 found."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_close_outcome

# ops MLX builds from ops of its own, so that a shapeless compile of them runs
COMPOSED = {
    "diag": lambda M, x: M.diag(x),
    "diagonal": lambda M, x: M.diagonal(x, 1),
    "divmod": lambda M, x: M.divmod(x, 0.7)[1],
    "einsum": lambda M, x: M.einsum("ij,kj->ik", x, x),
    "inner": lambda M, x: M.inner(x, x),
    "kron": lambda M, x: M.kron(x, x),
    "norm": lambda M, x: M.linalg.norm(x, axis=1),
    "repeat": lambda M, x: M.repeat(x, 2, axis=0),
    "tensordot": lambda M, x: M.tensordot(x, x.T, axes=1),
    "tril": lambda M, x: M.tril(x, -1),
    "triu": lambda M, x: M.triu(x),
}


def _x(M, shape, seed=0):
    return M.array(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_shapeless_compile_of_ops_mlx_composes(mlx, name):
    """A shapeless compile of these ops runs at the traced shapes as MLX's does (it raised
    "cannot be compiled shapeless" at the first call); at other shapes it traces again and
    gives the uncompiled result (where MLX's replay may be wrong or raise)."""
    op = COMPOSED[name]

    def first(M):
        f = M.compile(lambda x: op(M, x) * 2, shapeless=True)
        return [f(_x(M, (4, 6))), f(_x(M, (4, 6), 1))]
    assert_close_outcome(mlx, first)
    calls = []
    f = mx.compile(lambda x: (calls.append(1), op(mx, x) * 2)[1], shapeless=True)
    for shape in [(4, 6), (6, 4), (4, 6), (3, 5), (6, 4)]:
        x = _x(mx, shape, len(calls))
        want = op(mx, x) * 2
        got = f(x)
        assert got.shape == want.shape and got.dtype == want.dtype, (shape, got.shape)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)
    assert len(calls) == 3  # once per new shape


def test_shapeless_composed_op_among_followed_ops(mlx):
    """Elementwise work around the op still follows new shapes through the retrace, and
    gradients of the shapeless function take the traced path."""
    def prog(M):
        f = M.compile(lambda x, y: M.triu(x) @ y + M.exp(y).sum(), shapeless=True)
        g = M.grad(lambda x, y: f(x, y).sum())
        return [f(_x(M, (3, 3)), _x(M, (3, 2), 1)), g(_x(M, (3, 3)), _x(M, (3, 2), 1))]
    assert_close_outcome(mlx, prog)
    f = mx.compile(lambda x, y: mx.triu(x) @ y + mx.exp(y).sum(), shapeless=True)
    for n in (3, 5, 3):
        x, y = _x(mx, (n, n)), _x(mx, (n, 2), 1)
        np.testing.assert_allclose(np.array(f(x, y)), np.array(mx.triu(x) @ y + mx.exp(y).sum()),
                                   rtol=1e-6, atol=1e-6)
    for M in (mx, mlx):  # as_strided has no shape rule in MLX either: refused at once
        with pytest.raises(ValueError):
            M.compile(lambda x: M.as_strided(x, (2, 2), (1, 1)), shapeless=True)(M.ones((4,)))

