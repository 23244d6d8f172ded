"""Regressions found by a second differential fuzz of streamlet.nn against MLX (recurrent,
attention, transformer, quantized, upsampling, convolution and normalization layers,
positional encodings, parametrized activations and the Module API): same weights, same
inputs, compared outputs, gradients and trees."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import copy_parameters, numpy
from streamlet.utils import tree_flatten


def _flat_values(tree):
    return [(k, v.dtype, numpy(v)) for k, v in tree_flatten(tree)]


@pytest.mark.parametrize("name, args, x_shape", [
    ("ConvTranspose1d", (4, 3, 1), (1, 1, 4)),
    ("ConvTranspose2d", (4, 2, 1), (2, 1, 1, 4)),
    ("ConvTranspose3d", (4, 1, 1), (1, 1, 4, 4, 4)),
])
def test_conv_gradient_when_the_output_reads_only_padding(mlx, name, args, x_shape):
    """A transposed convolution whose output lies wholly in its padding (padding 1, output
    padding 2, one input step) has zero gradients, as in MLX, instead of a failing vjp."""
    import mlx.nn as mlx_nn
    theirs = getattr(mlx_nn, name)(*args, padding=1, output_padding=2)
    ours = copy_parameters(theirs, getattr(nn, name)(*args, padding=1, output_padding=2))
    x = np.linspace(-1, 1, int(np.prod(x_shape)), dtype=np.float32).reshape(x_shape)

    def run(lib, core, model):
        loss, grads = lib.value_and_grad(model, lambda v: (model(v) ** 2).sum())(core.array(x))
        return [("loss", loss.dtype, numpy(loss))] + _flat_values(grads)

    got, want = run(nn, mx, ours), run(mlx_nn, mlx, theirs)
    assert [(k, str(d)[-7:]) for k, d, _ in got] == [(k, str(d)[-7:]) for k, d, _ in want]
    for (_, _, g), (_, _, w) in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_conv_gradient_of_an_empty_input(mlx):
    """conv1d over a length-0 input (all padding) differentiates to zeros and an empty
    input gradient, as in MLX."""
    def grads(core):
        g = core.grad(lambda w, x: core.conv1d(x, w, 1, 1).sum(), argnums=(0, 1))(
            core.ones((3, 1, 2)), core.zeros((1, 0, 2)))
        return [(tuple(a.shape), np.array(a).tolist()) for a in g]

    assert grads(mx) == grads(mlx)


@pytest.mark.parametrize("name, kernel", [("Conv2d", (3,)), ("Conv3d", (1, 2)),
                                          ("ConvTranspose2d", (3,)),
                                          ("ConvTranspose3d", [2, 1])])
def test_convolution_kernel_size_shorter_than_its_axes_raises(mlx, name, kernel):
    """A kernel_size tuple with fewer sizes than the layer's spatial axes is an IndexError
    when the layer is built, as in MLX, not a layer with a lower-dimensional weight."""
    import mlx.nn as mlx_nn
    with pytest.raises(IndexError):
        getattr(mlx_nn, name)(2, 4, kernel)
    with pytest.raises(IndexError):
        getattr(nn, name)(2, 4, kernel)
