"""Regressions found by differential fuzzing of streamlet.nn.losses, streamlet.nn.init and
streamlet.optimizers against MLX (same inputs, CPU)."""
from __future__ import annotations

import pytest

import streamlet.core as mx
from parity import assert_same


def _nn(mod):
    if mod is mx:
        import streamlet.nn as nn
    else:
        import mlx.nn as nn
    return nn


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape, axis", [((0, 3), -1), ((3, 0, 2), -1), ((3, 0), 0)])
def test_nll_loss_grad_on_empty_batch(mlx, shape, axis, dtype):
    """The gradient of nll_loss (take_along_axis) over an empty batch is zeros, as in MLX."""
    def fn(mod):
        x = mod.zeros(shape, getattr(mod, dtype))
        targets = mod.zeros(shape[:axis % len(shape)] + shape[axis % len(shape) + 1:], mod.int32)
        loss = _nn(mod).losses.nll_loss
        return mod.grad(lambda a: loss(a, targets, axis=axis, reduction="sum"))(x)
    assert_same(mlx, fn)


@pytest.mark.parametrize("vmapped", [False, True])
def test_take_along_axis_grad_sums_over_broadcast_array(mlx, vmapped):
    """take_along_axis's gradient adds up over the axes where the array broadcasts against
    the indices (nll_loss of one row for many targets, under vmap), as in MLX."""
    def fn(mod):
        targets = mod.array([0, 3, 1, 3])
        x = mod.arange(12, dtype=mod.float32).reshape(3, 4)
        loss = _nn(mod).losses.nll_loss

        def row_loss(row):
            return loss(row[None], targets, reduction="sum")
        if vmapped:
            return mod.vmap(mod.grad(row_loss))(x)
        return mod.grad(lambda a: mod.take_along_axis(a, targets[:, None], -1).sum())(x[:1])
    assert_same(mlx, fn)
