"""Regressions found by differential fuzzing of streamlet.nn, streamlet.optimizers and
streamlet.utils against MLX (same weights, same inputs)."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from streamlet.utils import tree_flatten


@pytest.mark.parametrize("name, kwargs", [("LeakyReLU", {"negative_slope": 0.2}),
                                          ("ELU", {"alpha": 0.5}), ("CELU", {"alpha": 0.5})])
def test_activation_array_arguments_are_not_parameters(mlx, name, kwargs):
    """An array passed as LeakyReLU's slope (ELU's, CELU's alpha) is kept privately, as MLX
    keeps it: not a parameter, so not trained, saved or expected by load_weights."""
    import mlx.nn as mlx_nn
    (key, value), = kwargs.items()
    ours = getattr(nn, name)(**{key: mx.array(value)})
    theirs = getattr(mlx_nn, name)(**{key: mlx.array(value)})
    assert tree_flatten(ours.parameters()) == [] == list(theirs.parameters())
    x = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)
    np.testing.assert_allclose(np.array(ours(mx.array(x))), np.array(theirs(mlx.array(x))),
                               rtol=1e-6)
    model = nn.Sequential(nn.Linear(4, 4), ours)
    assert [k for k, _ in tree_flatten(model.trainable_parameters())] == \
        ["layers.0.weight", "layers.0.bias"]
