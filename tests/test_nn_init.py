"""nn.init against mlx.nn.init: with the same seed, the same initial values."""
import pytest

import streamlet.core as mx
import streamlet.nn.init as init
from nn_oracle import close, mlx_core, needs_oracle

mlx_init = pytest.importorskip("mlx.nn.init")
pytestmark = needs_oracle

# initializer name, constructor arguments (dtype names become dtypes), call keyword arguments
CASES = [
    ("constant", (0.5,), {}), ("constant", (-2, "float16"), {}),
    ("normal", (), {}), ("normal", (1.0, 0.1, "bfloat16"), {}),
    ("uniform", (), {}), ("uniform", (-3.0, 2.0, "float16"), {}),
    ("identity", (), {}), ("glorot_normal", (), {}), ("glorot_normal", (), {"gain": 2.0}),
    ("glorot_uniform", (), {}), ("glorot_uniform", ("float16",), {"gain": 0.5}),
    ("he_normal", (), {}), ("he_normal", (), {"mode": "fan_out", "gain": 3.0}),
    ("he_uniform", (), {}), ("he_uniform", (), {"mode": "fan_out"}),
    ("sparse", (0.5,), {}), ("sparse", (0.3, 1.0, 0.2, "float16"), {}),
    ("orthogonal", (), {}), ("orthogonal", (2.0,), {}),
]


def _args(lib, args):
    return [getattr(lib, a) if isinstance(a, str) else a for a in args]


@pytest.mark.parametrize("shape", [(4, 4), (3, 6), (6, 3)])
@pytest.mark.parametrize("name,args,kwargs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_initializer_matches_mlx(name, args, kwargs, shape):
    if name == "identity" and shape[0] != shape[1]:
        for build, core in ((init, mx), (mlx_init, mlx_core)):
            with pytest.raises(ValueError):
                build.identity()(core.zeros(shape))
        return
    mx.random.seed(7)
    got = getattr(init, name)(*_args(mx, args))(mx.zeros(shape), **kwargs)
    mlx_core.random.seed(7)
    want = getattr(mlx_init, name)(*_args(mlx_core, args))(mlx_core.zeros(shape), **kwargs)
    tol = 1e-5 if name == "orthogonal" else 1e-6
    close(got, want, rtol=tol, atol=tol, what=name)


def test_fans_of_convolution_weights():
    for name in ("glorot_normal", "glorot_uniform", "he_normal", "he_uniform"):
        mx.random.seed(1)
        got = getattr(init, name)()(mx.zeros((8, 3, 3, 4)))
        mlx_core.random.seed(1)
        want = getattr(mlx_init, name)()(mlx_core.zeros((8, 3, 3, 4)))
        close(got, want, rtol=1e-6, atol=1e-6, what=name)


def test_errors_match_mlx():
    cases = [("glorot_normal", (), (3,), {}), ("he_uniform", (), (3, 3), {"mode": "fan"}),
             ("sparse", (0.5,), (2, 3, 4), {}), ("orthogonal", (), (2, 3, 4), {})]
    for name, args, shape, kwargs in cases:
        for lib, core in ((init, mx), (mlx_init, mlx_core)):
            with pytest.raises(ValueError):
                getattr(lib, name)(*args)(core.zeros(shape), **kwargs)
