"""Run one program on streamlet and on mlx.core and compare what comes out.

`outcome(mod, fn)` is what `fn(mod)` gives: the exception type it raises, or for
each array in its result the dtype's name, the shape and the values (as a NumPy
array, bfloat16 and float16 widened to float32).  `assert_same` compares the two
libraries' outcomes: the same exception type, or the same dtypes, shapes and
values (bit for bit unless `rtol` is given; NaN equals NaN).  The oracle is MLX's CPU
build: in a GPU run, streamlet's side goes on a CPU stream where the GPU refuses float64
(conftest.cpu_if_float64), as an MLX program puts its float64 work.
"""
import numpy as np

import streamlet.core as mx
from conftest import cpu_if_float64


def _values(a, mod):
    if a.dtype in (mod.bfloat16, mod.float16):
        a = a.astype(mod.float32)
    return np.array(a)


def outcome(mod, fn):
    try:
        out = cpu_if_float64(lambda: fn(mod)) if mod is mx else fn(mod)
    except Exception as exc:  # the type is the outcome
        return type(exc)
    if isinstance(out, (tuple, list)) and not isinstance(out, str):
        return type(out), [outcome(mod, lambda _m, x=x: x) for x in out]
    if hasattr(out, "dtype") and hasattr(out, "shape") and not isinstance(out, np.ndarray):
        if out.size > 1 << 24:  # never evaluated: a test of a failing build must not fill memory
            return out.dtype.__repr__().split(".")[-1], tuple(out.shape), "not evaluated"
        return out.dtype.__repr__().split(".")[-1], tuple(out.shape), _values(out, mod)
    return out


def _check(got, want, rtol, what):
    if isinstance(want, type):
        assert got is want or (isinstance(got, type) and issubclass(got, want)), \
            f"{what}: raised/returned {got}, mlx raised {want.__name__}"
        return
    if isinstance(want, tuple) and len(want) == 2 and isinstance(want[1], list):
        assert isinstance(got, tuple) and got[0] is want[0], f"{what}: {got} vs {want}"
        assert len(got[1]) == len(want[1]), what
        for g, w in zip(got[1], want[1]):
            _check(g, w, rtol, what)
        return
    if isinstance(want, tuple) and len(want) == 3 and isinstance(want[2], np.ndarray):
        assert isinstance(got, tuple) and got[:2] == want[:2], f"{what}: {got} vs {want}"
        if rtol is None:
            np.testing.assert_array_equal(got[2], want[2], err_msg=what)
        else:
            np.testing.assert_allclose(got[2], want[2], rtol=rtol, atol=rtol, err_msg=what)
        return
    assert got == want, f"{what}: {got!r} vs {want!r}"


def assert_same(mlx, fn, rtol=None, what=""):
    """`fn(streamlet.core)` gives what `fn(mlx.core)` gives (see the module's docstring)."""
    _check(outcome(mx, fn), outcome(mlx, fn), rtol, what or getattr(fn, "__name__", ""))


def bits_outcome(mod, fn):
    """What `fn(mod)` gives, compared to the bit: the exception type, or for each array its
    dtype's name, shape, values as a list (half types widened, every NaN one NaN) and, for
    floats, their sign bits (signed zeros count); complex values as their two parts."""
    try:
        r = fn(mod)
        rs = r if isinstance(r, (list, tuple)) else [r]
        mod.eval(*rs)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e)
    out = []
    for x in rs:
        d = str(x.dtype).split(".")[-1]
        v = np.array(x.astype(mod.float32) if d in ("float16", "bfloat16") else x)
        if v.dtype.kind == "c":
            v = np.stack([v.real, v.imag])
        if v.dtype.kind == "f":
            v = np.where(np.isnan(v), np.nan, v).astype(np.float64)
            out.append((d, x.shape, v.tolist(), np.signbit(v).tolist()))
        else:
            out.append((d, x.shape, v.tolist()))
    return out


def assert_same_bits(mlx, fn):
    """`fn(streamlet.core)` gives `fn(mlx.core)`'s `bits_outcome` (an exception of MLX's
    type or a subclass of it)."""
    ours, theirs = bits_outcome(mx, fn), bits_outcome(mlx, fn)
    if isinstance(theirs, type):
        assert isinstance(ours, type) and issubclass(ours, theirs), (ours, theirs)
    else:
        assert repr(ours) == repr(theirs)


def assert_close_outcome(mlx, fn, rtol=1e-5):
    """`fn(streamlet.core)` gives `fn(mlx.core)`'s dtypes and shapes, and values within
    `rtol` of the largest magnitude (at least 1)."""
    ours, theirs = bits_outcome(mx, fn), bits_outcome(mlx, fn)
    assert not isinstance(ours, type) and not isinstance(theirs, type), (ours, theirs)
    for o, t in zip(ours, theirs, strict=True):
        assert o[:2] == t[:2]
        a, b = np.array(o[2], np.float64), np.array(t[2], np.float64)
        np.testing.assert_allclose(a, b, rtol=0, atol=rtol * max(np.abs(b).max(initial=0), 1))


def described(mod, fn, describe):
    """`fn(mod)` as `describe` sees it (each item of a list, each value of a dict), or the
    name of the exception it raised: for tests that compare their own descriptions."""
    try:
        r = fn(mod)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e).__name__
    if isinstance(r, list):
        return [describe(x) for x in r]
    if isinstance(r, dict):
        return {k: describe(v) for k, v in r.items()}
    return describe(r)


def error_type(fn):
    """The type of the exception `fn()` raises (MLX's leaked C++ cast failure,
    std::bad_cast, read as the TypeError it means), or None."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 (the error's type is the outcome)
        if isinstance(exc, RuntimeError) and "bad_cast" in str(exc):
            return TypeError
        return type(exc)
    return None
