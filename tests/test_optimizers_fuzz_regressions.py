"""Cases a differential fuzz of streamlet.optimizers (every optimizer, schedules, state trees,
half-precision parameters, training through nn.value_and_grad) against MLX 0.32.4 found:
parameters and state after several steps, or the error's type, are MLX's."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.optimizers as optim
from streamlet.utils import tree_flatten, tree_map


def _mlx_optim():
    return pytest.importorskip("mlx.optimizers")


def _values(M, tree):
    """(path, dtype, shape, float64 values) of each array leaf of `tree`."""
    return [(k, str(v.dtype).split(".")[-1], tuple(v.shape),
             np.array(v.astype(M.float32)).astype(np.float64).tolist())
            for k, v in tree_flatten(tree)]


def _train(M, opt, params, grads, dtype):
    p = {k: M.array(v).astype(getattr(M, dtype)) for k, v in params.items()}
    for g in grads:
        p = opt.apply_gradients({k: M.array(v).astype(getattr(M, dtype))
                                 for k, v in g.items()}, p)
    return _values(M, {"params": p, "state": opt.state})


def _data(steps, shapes, seed=0):
    rng = np.random.default_rng(seed)
    make = lambda: {k: rng.normal(size=s).astype(np.float32)  # noqa: E731
                    for k, s in shapes.items()}
    return make(), [make() for _ in range(steps)]


@pytest.mark.parametrize("dtype, np_type", [("bfloat16", ml_dtypes.bfloat16),
                                            ("float16", np.float16)])
def test_rsqrt_of_a_half_type_rounds_the_root_first(mlx, dtype, np_type):
    """MLX's CPU rsqrt of float16/bfloat16 is the reciprocal of the square root rounded to
    that type: rsqrt(bfloat16(1.0703125)) is 0.96875 (0.96484375 was rounded once), over a
    quarter of the positive values differed."""
    top = 0x7C00 if dtype == "float16" else 0x7F80
    values = np.arange(0, top + 1, dtype=np.uint16).view(np_type).astype(np.float32)
    ours = mx.rsqrt(mx.array(values).astype(getattr(mx, dtype))).astype(mx.float32)
    theirs = mlx.rsqrt(mlx.array(values).astype(getattr(mlx, dtype))).astype(mlx.float32)
    assert np.array_equal(np.array(ours), np.array(theirs), equal_nan=True)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_adafactor_on_half_parameters_steps_as_mlx(mlx, dtype):
    """Adafactor scales by rsqrt of its moment averages: with half parameters every step
    drifted from MLX by a unit in the last place or more."""
    mlx_optim = _mlx_optim()
    params, grads = _data(3, {"w": (4, 2, 3), "b": (5,)}, seed=103)
    kwargs = dict(learning_rate=1, eps=(1e-30, 0.008), relative_step=False)
    ours = _train(mx, optim.Adafactor(**kwargs), params, grads, dtype)
    theirs = _train(mlx, mlx_optim.Adafactor(**kwargs), params, grads, dtype)
    assert ours == theirs


@pytest.mark.parametrize("kind", [float, np.float64])
def test_a_python_float_meets_float16_through_float32(mlx, kind):
    """A float scalar with a float16 array is MLX's float32 of it cast to float16, two
    roundings: float16(1) + 2049.0000001 was 2052 (MLX 2048), and RMSprop's `(1 - alpha)`
    came out a unit in the last place off."""
    values = [kind(v) for v in (2049.0000001, 1 - 0.5980224578343993, 0.1, 1e-5, 65519.99,
                                math.inf, 1e300)]

    def run(M):
        x = M.array([1.0, 3.0, -7.0, 0.0], M.float16)
        return [np.array(r.astype(M.float32)).tolist() for v in values
                for r in (x + v, x * v, M.maximum(x, v), M.where(x > 0, v, x))]

    assert repr(run(mx)) == repr(run(mlx))


@pytest.mark.parametrize("value", [2049.0000001, 0.1, 65519.99, 1e-8])
def test_full_of_a_python_float_in_float16_goes_through_float32(mlx, value):
    """`full` and `full_like` convert a float for float16 as the ops' scalars do: full((1,),
    2049.0000001, float16) was 2050 (MLX 2048); float64 keeps the double."""
    def run(M):
        return [np.array(r.astype(M.float32)).tolist() if r.dtype == M.float16 else
                np.array(r).tolist() for r in (
                    M.full((2,), value, M.float16),
                    M.full_like(M.zeros((2,), M.float16), value),
                    M.full((1,), value, M.float64, stream=M.cpu))]

    assert repr(run(mx)) == repr(run(mlx))


def test_float16_parameters_step_bit_for_bit_as_mlx(mlx):
    """The elementwise optimizers on float16 parameters are MLX's to the bit (their
    hyperparameters are Python floats meeting float16 arrays)."""
    mlx_optim = _mlx_optim()
    params, grads = _data(5, {"w": (4, 2, 3), "s": ()}, seed=4269)
    for name, kwargs in [
            ("RMSprop", {"learning_rate": 0.03, "alpha": 0.5980224578343993}),
            ("SGD", {"learning_rate": 0.1, "momentum": 0.7310674463953716, "dampening": 0.2,
                     "weight_decay": 0.0198459999}),
            ("Adam", {"learning_rate": 0.01, "betas": [0.8357520754181579, 0.55828591]}),
            ("AdaDelta", {"learning_rate": 0.5, "rho": 0.3229351798731423}),
            ("Lion", {"learning_rate": 0.01, "betas": [0.37, 0.59], "weight_decay": 0.11})]:
        ours = _train(mx, getattr(optim, name)(**kwargs), params, grads, "float16")
        theirs = _train(mlx, getattr(mlx_optim, name)(**kwargs), params, grads, "float16")
        assert ours == theirs, name


def _outcome(M, O, fn):
    try:
        return _values(M, fn(M, O))
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e).__name__


def test_init_over_a_shorter_list_raises_as_mlx(mlx):
    """Initializing again with a list shorter than the state's is MLX's IndexError; the state
    was silently cut to the new length."""
    mlx_optim = _mlx_optim()
    for first, second in [(2, 1), (3, 1), (1, 2), (2, 2)]:
        def fn(M, O):
            opt = O.SGD(0.1, momentum=0.5)
            opt.init({"a": [M.zeros((2,)) for _ in range(first)]})
            opt.init({"a": [M.ones((3,)) for _ in range(second)]})
            return opt.state

        ours = _outcome(mx, optim, fn)
        assert ours == _outcome(mlx, mlx_optim, fn)
        assert (ours == "IndexError") == (second < first)


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", {"momentum": math.nan, "nesterov": True}),
    ("RMSprop", {"alpha": math.nan}), ("RMSprop", {"eps": math.nan}),
    ("Adagrad", {"eps": math.nan}),
    ("AdaDelta", {"rho": math.nan}), ("AdaDelta", {"eps": math.nan}),
])
def test_hyperparameter_checks_let_nan_through_as_mlx(mlx, name, kwargs):
    """MLX refuses `alpha < 0`, `eps <= 0`, ... so a NaN passes (and the steps give NaN);
    streamlet tested the opposite condition and raised ValueError for NaN."""
    mlx_optim = _mlx_optim()

    def fn(M, O):
        opt = getattr(O, name)(0.1, **kwargs)
        p = {"w": M.array([0.5, -1.0]), "s": M.array(2.0)}
        for _ in range(2):
            p = opt.apply_gradients(tree_map(lambda x: x * 0.5 + 1, p), p)
        return {"p": p, "state": opt.state}

    ours = _outcome(mx, optim, fn)
    theirs = _outcome(mlx, mlx_optim, fn)
    assert repr(ours) == repr(theirs)
