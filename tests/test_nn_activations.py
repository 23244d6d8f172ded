"""Activation functions and modules against mlx.nn's, over float dtypes and extreme inputs."""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import close, mlx_core, mlx_nn, needs_oracle, ours, theirs

pytestmark = needs_oracle

# function name, keyword arguments
FUNCTIONS = [
    ("sigmoid", {}), ("relu", {}), ("relu2", {}), ("relu6", {}), ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}), ("log_softmax", {}), ("log_softmax", {"axis": 0}),
    ("elu", {}), ("elu", {"alpha": 0.5}), ("softmax", {}), ("softmax", {"axis": 0}),
    ("softplus", {}), ("softsign", {}), ("softshrink", {}), ("softshrink", {"lambd": 1.5}),
    ("celu", {}), ("celu", {"alpha": 2.0}), ("silu", {}), ("log_sigmoid", {}), ("gelu", {}),
    ("gelu_approx", {}), ("gelu_fast_approx", {}), ("glu", {}), ("glu", {"axis": 0}),
    ("step", {}), ("step", {"threshold": 0.5}), ("selu", {}), ("mish", {}), ("hardswish", {}),
    ("hard_tanh", {}), ("hard_tanh", {"min_val": -0.5, "max_val": 2.0}), ("hard_shrink", {}),
    ("hard_shrink", {"lambd": 1.0}), ("softmin", {}), ("softmin", {"axis": 0}), ("tanh", {}),
]

# module name, constructor arguments
MODULES = [
    ("Sigmoid", ()), ("Mish", ()), ("ReLU", ()), ("ReLU2", ()), ("ReLU6", ()),
    ("LeakyReLU", (0.3,)), ("ELU", (0.7,)), ("Softmax", ()), ("Softplus", ()), ("Softsign", ()),
    ("Softshrink", (0.25,)), ("CELU", (1.5,)), ("SiLU", ()), ("LogSoftmax", ()),
    ("LogSigmoid", ()), ("PReLU", (4, 0.1)), ("GELU", ()), ("GELU", ("precise",)),
    ("GELU", ("tanh",)), ("GELU", ("fast",)), ("Tanh", ()), ("Hardswish", ()), ("Step", (1.0,)),
    ("SELU", ()), ("HardTanh", ()), ("HardShrink", (0.75,)), ("Softmin", ()), ("GLU", (0,)),
]

TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 2e-2}


def inputs(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(scale=3.0, size=(6, 4)).astype(np.float32)
    x[0] = [0.0, -0.0, 40.0, -40.0]
    x[1] = [88.0, -88.0, 1e-3, -1e-3]
    return ours(x).astype(getattr(mx, dtype)), theirs(x).astype(getattr(mlx_core, dtype))


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("name,kwargs", FUNCTIONS, ids=[f"{n}{k or ''}" for n, k in FUNCTIONS])
def test_function_matches_mlx(name, kwargs, dtype):
    a, b = inputs(dtype)
    close(getattr(nn, name)(a, **kwargs), getattr(mlx_nn, name)(b, **kwargs),
          rtol=TOL[dtype], atol=TOL[dtype], what=name)


@pytest.mark.parametrize("name,args", MODULES, ids=[f"{n}{a or ''}" for n, a in MODULES])
def test_module_matches_mlx(name, args):
    a, b = inputs("float32")
    ours_module, mlx_module = getattr(nn, name)(*args), getattr(mlx_nn, name)(*args)
    assert repr(ours_module) == repr(mlx_module)
    close(ours_module.parameters(), mlx_module.parameters())
    close(ours_module(a), mlx_module(b), rtol=2e-6, atol=2e-6, what=name)


def test_prelu_function_with_slopes_per_channel():
    a, b = inputs("float32")
    slopes = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    close(nn.prelu(a, ours(slopes)), mlx_nn.prelu(b, theirs(slopes)))


def test_module_arguments_by_keyword():
    x = mx.array([-2.0, 0.5, 3.0])
    assert nn.LeakyReLU(negative_slope=0.5)(x).tolist() == [-1.0, 0.5, 3.0]
    assert nn.Step(threshold=1.0)(x).tolist() == [0, 0, 1]
    assert nn.Softshrink(lambd=1.0)(x).tolist() == [-1.0, 0.0, 2.0]
    with pytest.raises(TypeError):
        nn.ReLU(1.0)
    with pytest.raises(TypeError):
        nn.ELU(beta=1.0)
    with pytest.raises(ValueError, match="approximation"):
        nn.GELU("exact")


def test_activations_keep_integer_semantics():
    x_ours, x_mlx = mx.array([-3, 0, 4]), mlx_core.array([-3, 0, 4])
    for name in ("relu", "relu6", "step", "hard_shrink", "softshrink"):
        close(getattr(nn, name)(x_ours), getattr(mlx_nn, name)(x_mlx), what=name)


def test_activations_are_shapeless_compiled_and_follow_new_shapes():
    """As MLX's: one trace serves every shape of a rank; each shape still gets its own
    right values."""
    rng = np.random.default_rng(3)
    for shape in ((3,), (7,), (2, 5), (4, 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        for name in ("gelu", "silu", "relu", "softplus", "mish"):
            close(getattr(nn, name)(mx.array(x)), getattr(mlx_nn, name)(mlx_core.array(x)),
                  what=f"{name}{shape}")
