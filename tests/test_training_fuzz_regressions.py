"""Regressions found by differential fuzzing of whole training programs (a model, a loss,
``nn.value_and_grad``, an optimizer with a schedule, run plainly and through ``mx.compile``
with the model's and optimizer's state captured) against MLX, from the same weights."""
from __future__ import annotations

from functools import partial

import numpy as np

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from streamlet.utils import tree_flatten


def _plain_function_model(lib_nn, lib_mx):
    """A Sequential holding plain functions beside its layers, and a module whose dict
    holds a list of ints: MLX programs write both, and both end up in ``model.state``."""
    lib_mx.random.seed(0)

    class Head(lib_nn.Module):
        def __init__(self):
            super().__init__()
            self.dims = [3, 1]  # a list: kept in the module's dict, so in its state
            self.proj = lib_nn.Linear(*self.dims)

        def __call__(self, x):
            return self.proj(x)

    return lib_nn.Sequential(lib_nn.Linear(2, 3), lib_nn.relu, lambda x: x * 2, Head())


def _train(lib_mx, lib_nn, lib_optim, compiled):
    model = _plain_function_model(lib_nn, lib_mx)
    opt = lib_optim.Adam(lib_optim.cosine_decay(0.1, 5))
    loss_and_grad = lib_nn.value_and_grad(
        model, lambda m, x, y: lib_nn.losses.mse_loss(m(x), y))
    state = [model.state, opt.state]

    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        opt.update(model, grads)
        return loss

    if compiled:
        step = partial(lib_mx.compile, inputs=state, outputs=state)(step)
    x = lib_mx.array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2))
    y = lib_mx.array(np.linspace(0, 1, 4, dtype=np.float32).reshape(4, 1))
    losses = [step(x, y).item() for _ in range(3)]
    lib_mx.eval(model.parameters(), opt.state)
    return losses, [(k, np.array(v)) for k, v in tree_flatten(model.parameters())]


def test_compile_captured_state_skips_non_array_leaves(mlx):
    """``mx.compile(step, inputs=[model.state, ...])`` where the model holds plain functions
    (``nn.Sequential(nn.Linear(..), nn.relu, ...)``) or lists of ints: as in MLX, only the
    captured trees' arrays are captured, other leaves are skipped (this raised ValueError)."""
    import mlx.nn as mlx_nn
    import mlx.optimizers as mlx_optim
    want_losses, want_params = _train(mlx, mlx_nn, mlx_optim, compiled=True)
    for compiled in (False, True):
        losses, params = _train(mx, nn, optim, compiled)
        np.testing.assert_allclose(losses, want_losses, rtol=1e-5, atol=1e-6)
        assert [k for k, _ in params] == [k for k, _ in want_params]
        for (k, a), (_, b) in zip(params, want_params):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=k)


def test_compile_captured_state_with_other_leaves_only_arrays_move():
    """Non-array leaves of captured ``inputs`` / ``outputs`` trees are left as they are,
    and the arrays beside them still go in and come out."""
    class Opaque:
        pass

    marker = Opaque()
    state = {"w": mx.array(2.0), "fn": abs, "cfg": (3, "s", None), "obj": marker}

    def step(x):
        state["w"] = state["w"] * x
        return state["w"] + 1

    f = mx.compile(step, inputs=[state], outputs=[state])
    assert f(mx.array(3.0)).item() == 7.0
    assert f(mx.array(3.0)).item() == 19.0
    assert state["w"].item() == 18.0
    assert state["fn"] is abs and state["obj"] is marker and state["cfg"] == (3, "s", None)
