"""Cases a third differential fuzz of compile against MLX 0.32.4 found (captured state,
random numbers, compiled training steps, shapeless compiles)."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from parity import assert_close_outcome, outcome

# random draws from keys the function does not take as inputs: MLX's tape holds the
# unevaluated work its constants come from, and a shapeless compile refuses a primitive
# without a shape rule there as it does among the steps
CONSTANT_DRAWS = {
    "global_key": lambda M: M.random.uniform(shape=(3,)),
    "closure_key": lambda M: M.random.normal(shape=(3,), key=M.random.key(1)),
    "split_key": lambda M: M.random.gumbel(shape=(3,), key=M.random.split(M.random.key(2))[0]),
    "inverse": lambda M: M.linalg.inv(M.array([[2.0, 1.0], [1.0, 3.0]]), stream=M.cpu)[0, :1],
}


@pytest.mark.parametrize("name", sorted(CONSTANT_DRAWS))
def test_shapeless_compile_refuses_unshaped_constants(mlx, name):
    """A shapeless compile whose constants are computed by a primitive without a shape
    rule raises ValueError at the first call (streamlet computed them once and ran)."""
    draw = CONSTANT_DRAWS[name]

    def prog(M):
        M.random.seed(0)
        f = M.compile(lambda x: x + draw(M), shapeless=True)
        return f(M.ones(3))
    assert outcome(mlx, prog) is ValueError
    assert outcome(mx, prog) is ValueError

    # constants made by ops MLX gives a shape to (arange, full, tri, linspace) or by
    # evaluated work still run shapeless, and not compiled shapeless the draws run too
    def kept(M):
        M.random.seed(0)
        c = M.arange(3.0)
        f = M.compile(lambda x: x + c + M.ones(3) + M.tri(3)[1] + M.linspace(0, 1, 3),
                      shapeless=True)
        k = M.random.uniform(shape=(3,))
        M.eval(k)
        g = M.compile(lambda x: x * k, shapeless=True)
        h = M.compile(lambda x: x + M.random.uniform(shape=(3,)))
        return [f(M.ones(3)), g(M.ones(3)), g(M.ones(3)), h(M.ones(3))]
    assert_close_outcome(mlx, kept)


@pytest.mark.parametrize("norm", ["rms", "layer", "layer_bias", "layer_plain"])
def test_shapeless_compile_of_fast_norms(mlx, norm):
    """mx.fast.rms_norm and layer_norm (nn.RMSNorm, nn.LayerNorm) have a shape rule: a
    shapeless compile of them (and of their gradients) runs at new numbers of rows; it
    raised "cannot be compiled shapeless"."""
    def apply(M, x, w):
        if norm == "rms":
            return M.fast.rms_norm(x, w, 1e-5)
        if norm == "layer":
            return M.fast.layer_norm(x, w, None, 1e-5)
        if norm == "layer_bias":
            return M.fast.layer_norm(x, w, w * 0.5, 1e-5)
        return M.fast.layer_norm(x, None, None, 1e-5) * w

    def x_(M, shape, seed):
        return M.array(np.random.default_rng(seed).normal(size=shape).astype(np.float32))

    def prog(M):
        w = x_(M, (3,), 9)
        f = M.compile(lambda x, w: apply(M, x, w) * 2, shapeless=True)
        loss = lambda x, w: (apply(M, x, w) ** 2 * M.arange(3.0)).sum()
        g = M.compile(M.value_and_grad(loss, argnums=(0, 1)), shapeless=True)
        out = []
        for i, shape in enumerate([(2, 3), (4, 3), (2, 3), (1, 5, 3)]):
            out.append(f(x_(M, shape, i), w))
            v, (gx, gw) = g(x_(M, shape, i), w)
            out += [v, gx, gw]
        return out
    assert_close_outcome(mlx, prog, rtol=1e-4)


def test_shapeless_training_step_with_rms_norm(mlx):
    """A compiled shapeless training step of a model with nn.RMSNorm and nn.LayerNorm
    (state captured) trains as MLX's does."""
    def prog(M):
        mnn = nn if M is mx else __import__("mlx.nn", fromlist=["nn"])
        mopt = optim if M is mx else __import__("mlx.optimizers", fromlist=["optimizers"])
        M.random.seed(4)
        model = mnn.Sequential(mnn.Linear(4, 8), mnn.RMSNorm(8), mnn.ReLU(), mnn.Linear(8, 6),
                               mnn.LayerNorm(6), mnn.Linear(6, 2))
        opt = mopt.Adam(1e-2)
        state = [model.state, opt.state]

        def loss(m, x, y):
            return mnn.losses.mse_loss(m(x), y)

        def step(x, y):
            l, g = mnn.value_and_grad(model, loss)(model, x, y)
            opt.update(model, g)
            return l
        f = M.compile(step, inputs=state, outputs=state, shapeless=True)
        rng = np.random.default_rng(0)
        out = [f(M.array(rng.normal(size=(5, 4)).astype(np.float32)),
                 M.array(rng.normal(size=(5, 2)).astype(np.float32))) for _ in range(4)]
        return out + [p for _, p in sorted(_flat(model.parameters()))]
    assert_close_outcome(mlx, prog, rtol=1e-4)


def _flat(tree, prefix=""):
    if isinstance(tree, dict):
        return [kv for k, v in tree.items() for kv in _flat(v, f"{prefix}{k}.")]
    if isinstance(tree, list):
        return [kv for i, v in enumerate(tree) for kv in _flat(v, f"{prefix}{i}.")]
    return [(prefix, tree)]
