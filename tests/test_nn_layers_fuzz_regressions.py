"""Regressions found by differential fuzzing of streamlet.nn's layers and Module machinery
against MLX (same weights, same inputs)."""
from __future__ import annotations

import pytest

import streamlet.core as mx
import streamlet.nn as nn


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("case", ["empty dict", "nested empty", "parameterless module",
                                  "frozen module"])
def test_gradient_wrt_no_arrays_raises(mlx, case):
    """Differentiating with respect to arguments that hold no arrays is an error in MLX, raised
    before the function runs; a module without trainable parameters is such a case."""
    import mlx.nn as mlx_nn

    def attempt(core, lib):
        x = core.ones((2,))
        if case == "empty dict":
            return lambda: core.value_and_grad(lambda p, x: (x * 2).sum())({}, x)
        if case == "nested empty":
            return lambda: core.grad(lambda p, x: (x * 2).sum())({"a": [], "b": {}}, x)
        model = lib.ReLU() if case == "parameterless module" else lib.Linear(2, 2).freeze()
        return lambda: lib.value_and_grad(model, lambda x: model(x).sum())(x)

    assert _error(attempt(mx, nn)) == _error(attempt(mlx, mlx_nn)) == \
        (ValueError, "[grad] Must specify at least one argument.")


@pytest.mark.parametrize("name, args", [("MaxPool1d", (2,)), ("AvgPool2d", ((2, 3), 1, 1)),
                                        ("MaxPool3d", (2, None, (0, 1, 0)))])
def test_pooling_keeps_its_settings_as_mlx_does(mlx, name, args):
    """A pooling layer's settings are lists in its dict, as in MLX, so children() (and
    leaf_modules()) show them as lists of empty entries; the repr shows tuples."""
    import mlx.nn as mlx_nn
    ours, theirs = getattr(nn, name)(*args), getattr(mlx_nn, name)(*args)
    assert ours.children() == theirs.children()
    assert ours.leaf_modules() == theirs.leaf_modules()
    assert dict(ours) == dict(theirs)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("key", ["update", "modules", "training", "state"])
def test_array_attribute_cannot_shadow_a_class_attribute(mlx, key):
    """Setting an array (or list, dict, tuple) attribute named like a method or property
    raises AttributeError, as in MLX, instead of storing an entry the method would hide."""
    import mlx.nn as mlx_nn
    ours, theirs = nn.Linear(2, 2), mlx_nn.Linear(2, 2)
    assert _error(lambda: setattr(ours, key, [mx.ones((1,))])) == \
        _error(lambda: setattr(theirs, key, [mlx.ones((1,))]))
    assert sorted(ours) == sorted(theirs) == ["bias", "weight"]
    ours.plain, theirs.plain = 1, 1
    ours.plain, theirs.plain = mx.ones((1,)), mlx.ones((1,))
    assert sorted(ours) == sorted(theirs) == ["bias", "plain", "weight"]
