"""Regressions found by a third differential fuzz of streamlet.nn against MLX (recurrent,
pooling, upsampling, transposed convolution, positional encoding, attention and
normalization layers, and the Module API): same weights, same inputs, compared outputs,
gradients, exception types and trees."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import numpy


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("shape", [(2, 2, 3, 0, 4), (0, 3, 2, 3, 2), (0, 1, 1, 1, 2)])
def test_rope_of_an_empty_input_with_more_than_four_axes(mlx, shape, traditional):
    """RoPE over an empty input of five axes gives an empty result (and gradient), as in
    MLX, instead of failing to infer the merged heads' axis of a size-0 reshape."""
    import mlx.nn as mlx_nn

    def run(lib, core):
        rope = lib.RoPE(2, traditional=traditional)
        x = core.zeros(shape)
        y = rope(x, offset=1)
        g = core.grad(lambda v: rope(v).sum())(x)
        return [(a.shape, str(a.dtype).split(".")[-1], numpy(a).tolist()) for a in (y, g)]

    assert run(nn, mx) == run(mlx_nn, mlx)
