"""Cases a differential fuzz of bad inputs to nn losses, activations, optimizers and
schedules against MLX 0.32.4 (CPU) found: the outcome (error type, or values) is MLX's."""
import pytest

import streamlet.nn as snn
import streamlet.optimizers as soptim
from parity import assert_same, error_type

_ZEROS_STATE = ["SGD", "RMSprop", "Adagrad", "AdaDelta", "Adam", "AdamW", "Adamax", "Lion",
                "Muon"]


def _modules(mod):
    import streamlet.core as smx
    if mod is smx:
        return snn, soptim
    import mlx.nn
    import mlx.optimizers
    return mlx.nn, mlx.optimizers


@pytest.mark.parametrize("name", _ZEROS_STATE)
def test_python_scalar_gradient_leaf_is_a_type_error(mlx, name):
    # MLX builds the state from the gradients with zeros_like, which refuses a float:
    # TypeError (streamlet raised AttributeError, and Muon silently updated).
    def f(m):
        _, optim = _modules(m)
        opt = getattr(optim, name)(0.1)
        return opt.apply_gradients({"w": 1.0, "b": 2.0},
                                   {"w": m.ones((2, 3)), "b": m.ones((3,))})["w"]
    assert_same(mlx, f)
    import streamlet.core as smx
    assert error_type(lambda: f(mlx)) is TypeError
    assert error_type(lambda: f(smx)) is TypeError


@pytest.mark.parametrize("name", ["SGD", "Adam", "Muon"])
def test_update_with_python_scalar_gradients_is_a_type_error(mlx, name):
    def f(m):
        nn, optim = _modules(m)
        model = nn.Linear(3, 2)
        getattr(optim, name)(0.1).update(model, {"weight": 1.0, "bias": 0.5})
        return model.weight
    assert_same(mlx, f)


@pytest.mark.parametrize("name", _ZEROS_STATE)
def test_array_gradients_still_update(mlx, name):
    def f(m):
        _, optim = _modules(m)
        opt = getattr(optim, name)(0.1)
        p = {"w": m.array([[1.0, -2.0, 3.0], [0.5, 0.1, -0.3]])}
        for _ in range(2):
            p = opt.apply_gradients({"w": m.array([[0.1, 0.2, -0.3], [1.0, -1.0, 0.5]])}, p)
        return p["w"]
    assert_same(mlx, f, rtol=1e-5)
