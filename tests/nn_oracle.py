"""Helpers for testing streamlet.nn / optimizers / utils against mlx.nn / optimizers / utils.

`twins(build)` builds a model with each library (`build(nn)`), gives ours MLX's initialized
parameters through NumPy, and returns both; `close(ours, theirs)` compares trees of arrays;
`requires("fast.rms_norm", "grad")` skips a test while the core lacks one of those names.
"""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from streamlet.utils import tree_flatten, tree_unflatten

try:
    import mlx.core as mlx_core
    import mlx.nn as mlx_nn
    import mlx.optimizers as mlx_optim
except ImportError:  # the oracle is optional: tests that need it skip
    mlx_core = mlx_nn = mlx_optim = None


def _has(name):
    obj = mx
    for part in name.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def requires(*names):
    """Skip while ``streamlet.core`` lacks any of ``names`` (dotted: ``"fast.rope"``)."""
    missing = [n for n in names if not _has(n)]
    return pytest.mark.skipif(bool(missing), reason="needs mx." + ", mx.".join(missing))


def skip_unless(*names):
    """Inside a test: skip it while ``streamlet.core`` lacks any of ``names``."""
    missing = [n for n in names if not _has(n)]
    if missing:
        pytest.skip("needs mx." + ", mx.".join(missing))


needs_oracle = pytest.mark.skipif(mlx_core is None, reason="mlx is not installed")


def numpy(x):
    """A NumPy copy of an array of either library (bfloat16 widened to float32)."""
    lib = mx if isinstance(x, mx.array) else mlx_core
    if x.dtype == lib.bfloat16:
        x = x.astype(lib.float32)
    return np.array(x)


def ours(x):
    """An MLX array (or NumPy array) as a streamlet array, exactly."""
    if mlx_core is not None and isinstance(x, mlx_core.array):
        if x.dtype == mlx_core.bfloat16:
            return mx.array(np.array(x.astype(mlx_core.float32))).astype(mx.bfloat16)
        return mx.array(np.array(x))
    return mx.array(x)


def theirs(x):
    """A streamlet (or NumPy) array as an MLX array, exactly."""
    if isinstance(x, mx.array):
        if x.dtype == mx.bfloat16:
            return mlx_core.array(np.array(x.astype(mx.float32))).astype(mlx_core.bfloat16)
        return mlx_core.array(np.array(x))
    return mlx_core.array(x)


def copy_parameters(src, dst):
    """Load ``src``'s (an MLX module's) parameters into ``dst`` (ours) through NumPy."""
    flat = [(k, ours(v)) for k, v in tree_flatten(src.parameters())]
    dst.update(tree_unflatten(flat), strict=True)
    return dst


def twins(build, seed=0):
    """``(build(streamlet.nn), build(mlx.nn))`` with the same parameters (MLX's)."""
    mx.random.seed(seed)
    a = build(nn)
    mlx_core.random.seed(seed)
    b = build(mlx_nn)
    assert [k for k, _ in tree_flatten(a.parameters())] == \
        [k for k, _ in tree_flatten(b.parameters())]
    return copy_parameters(b, a), b


def close(got, want, rtol=1e-5, atol=1e-6, what=""):
    """Trees ``got`` (ours) and ``want`` (MLX's) have the same paths, dtypes, shapes and values."""
    g, w = tree_flatten(got), tree_flatten(want)
    assert [k for k, _ in g] == [k for k, _ in w], f"{what}: paths differ"
    for (k, a), (_, b) in zip(g, w):
        if not hasattr(b, "shape"):
            assert a == b, f"{what} {k}: {a!r} != {b!r}"
            continue
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], \
            f"{what} {k}: dtype {a.dtype} vs {b.dtype}"
        assert tuple(a.shape) == tuple(b.shape), f"{what} {k}: shape {a.shape} vs {b.shape}"
        np.testing.assert_allclose(numpy(a), numpy(b), rtol=rtol, atol=atol,
                                   err_msg=f"{what} {k}")


def libraries():
    """The two (core, nn, optimizers) triples, ours first."""
    return (mx, nn, optim), (mlx_core, mlx_nn, mlx_optim)
