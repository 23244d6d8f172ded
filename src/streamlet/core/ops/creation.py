"""Array creation ops; lazy like every other op, made on the op's stream."""
from __future__ import annotations

import math

from . import build as b
from .build import dt

_FULL = b.make("full", lambda xp, shape, value, dtype: xp.full(shape, value, dtype=dtype))


def _arange(xp, start, step, num, dtype):
    base = "float64" if dtype.kind in "fc" else "int64"
    return (start + step * xp.arange(num, dtype=base)).astype(dtype)


_ARANGE = b.make("arange", _arange)
_LINSPACE = b.make("linspace", lambda xp, start, stop, num, dtype:
                   xp.linspace(start, stop, num, dtype="float64").astype(dtype))
_EYE = b.make("eye", lambda xp, n, m, k, dtype: xp.eye(n, m, k, dtype=dtype))
_ASTYPE = b.make("astype", lambda xp, a, dtype: a.astype(dtype))


def _dtype(dtype, default):
    return default if dtype is None else dt.as_dtype(dtype)


def full(shape, vals, dtype=None, *, stream=None):
    """An array of `shape` filled with `vals` (a scalar or an array broadcast to it)."""
    from .shape import broadcast_to
    shape = b.check_shape(shape, "full")
    if isinstance(vals, b.array) or not b.is_scalar(vals):
        v = b.as_array(vals, "full")
        if dtype is not None:
            v = astype(v, dtype, stream=stream)
        return broadcast_to(v, shape, stream=stream)
    d = _dtype(dtype, dt.scalar_dtype(vals))
    return b.node(_FULL, (), shape, d, {"shape": shape, "value": vals, "dtype": d.np},
                  b.resolve(stream))


def zeros(shape, dtype=dt.float32, *, stream=None):
    """An array of zeros: `mx.zeros((2, 3))`."""
    return full(shape, 0, dt.as_dtype(dtype), stream=stream)


def ones(shape, dtype=dt.float32, *, stream=None):
    """An array of ones: `mx.ones((2, 3), dtype=mx.int32)`."""
    return full(shape, 1, dt.as_dtype(dtype), stream=stream)


def zeros_like(a, /, dtype=None, *, stream=None):
    """Zeros with the shape (and dtype, unless given) of `a`."""
    a = b.as_array(a, "zeros_like")
    return full(a._shape, 0, dtype or a._dtype, stream=stream)


def ones_like(a, /, dtype=None, *, stream=None):
    """Ones with the shape (and dtype, unless given) of `a`."""
    a = b.as_array(a, "ones_like")
    return full(a._shape, 1, dtype or a._dtype, stream=stream)


def full_like(a, /, fill_value, dtype=None, *, stream=None):
    """`fill_value` with the shape (and dtype, unless given) of `a`."""
    a = b.as_array(a, "full_like")
    return full(a._shape, fill_value, dtype or a._dtype, stream=stream)


def arange(start, stop=None, step=None, dtype=None, *, stream=None):
    """Evenly spaced values in [start, stop): `mx.arange(5)`, `mx.arange(0, 1, 0.25)`."""
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    for v in (start, stop, step):
        if not b.is_scalar(v):
            raise TypeError(f"[arange] Expected numbers, got {type(v).__name__}.")
    if step == 0:
        raise ValueError("[arange] Cannot compute length with step of zero.")
    is_int = all(isinstance(v, int) for v in (start, stop, step))
    d = _dtype(dtype, dt.int32 if is_int else dt.float32)
    num = max(math.ceil((stop - start) / step), 0)
    if d.kind == "b":
        raise ValueError("[arange] Cannot make a range of bool.")
    return b.node(_ARANGE, (), (num,), d, {"start": start, "step": step, "num": num,
                                           "dtype": d.np}, b.resolve(stream))


def linspace(start, stop, num=50, dtype=dt.float32, *, stream=None):
    """`num` evenly spaced values from `start` to `stop`, both included."""
    if num < 0:
        raise ValueError(f"[linspace] num must be non-negative, got {num}.")
    d = dt.as_dtype(dtype)
    return b.node(_LINSPACE, (), (int(num),), d,
                  {"start": float(start), "stop": float(stop), "num": int(num), "dtype": d.np},
                  b.resolve(stream))


def eye(n, m=None, k=0, dtype=dt.float32, *, stream=None):
    """An n x m matrix with ones on diagonal `k`."""
    m = n if m is None else m
    if n < 0 or m < 0:
        raise ValueError(f"[eye] Negative dimensions not allowed: ({n}, {m}).")
    d = dt.as_dtype(dtype)
    return b.node(_EYE, (), (int(n), int(m)), d, {"n": int(n), "m": int(m), "k": int(k),
                                                  "dtype": d.np}, b.resolve(stream))


def identity(n, dtype=dt.float32, *, stream=None):
    """The n x n identity matrix."""
    return eye(n, n, 0, dtype, stream=stream)


def astype(a, /, dtype, *, stream=None):
    """`a` converted to `dtype`."""
    a = b.as_array(a, "astype")
    d = dt.as_dtype(dtype)
    if d is a._dtype:
        return b.alias(a, b.resolve(stream))
    return b.node(_ASTYPE, (a,), a._shape, d, {"dtype": d.np}, b.resolve(stream))


def _cast(a, dtype, *, stream=None):
    """`a` as `dtype` for another op to consume: `a` itself when it has that dtype.

    Unlike `astype`, whose result the caller may assign into, this makes no new array
    (and no pass-through node) for a cast that changes nothing.
    """
    return a if a._dtype is dtype else astype(a, dtype, stream=stream)


def asarray(a, dtype=None, *, copy=None):
    """`a` as an array: an array of the right dtype is returned as is unless `copy` is True."""
    if isinstance(a, b.array):
        if dtype is not None:
            a = astype(a, dtype)
        return b.array(a) if copy else b.alias(a)
    return b.array(a, dtype)


empty, empty_like = zeros, zeros_like


def meshgrid(*arrays, sparse=False, indexing="xy", stream=None):
    """Coordinate arrays from 1-D arrays, with 'xy' (Cartesian) or 'ij' (matrix) indexing."""
    from .shape import broadcast_to, reshape
    if indexing not in ("xy", "ij"):
        raise ValueError("[meshgrid] Invalid indexing value. Valid values are 'xy' and 'ij'.")
    arrays = [b.as_array(x, "meshgrid") for x in arrays]
    if any(x.ndim != 1 for x in arrays):
        arrays = [reshape(x, (-1,), stream=stream) for x in arrays]
    n = len(arrays)
    sizes = [x._shape[0] for x in arrays]
    if indexing == "xy" and n > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(arrays):
        pos = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and n > 1 else i
        shape = tuple(x._shape[0] if j == pos else 1 for j in range(n))
        x = reshape(x, shape, stream=stream)
        out.append(x if sparse else broadcast_to(x, tuple(sizes), stream=stream))
    return out


def _window(xp, m, kind):
    return getattr(xp, kind)(m).astype("float32")


_WINDOW = b.make("window", _window)


def _make_window(kind):
    def op(M, *, stream=None):
        if not isinstance(M, int) or M < 0:
            raise ValueError(f"[{kind}] M must be a non-negative integer, got {M!r}.")
        return b.node(_WINDOW, (), (M,), dt.float32, {"m": M, "kind": kind}, b.resolve(stream))
    op.__name__ = op.__qualname__ = kind
    op.__doc__ = f"The {kind.capitalize()} window of `M` points, float32: `mx.{kind}(5)`."
    return op


bartlett, blackman = _make_window("bartlett"), _make_window("blackman")
hamming, hanning = _make_window("hamming"), _make_window("hanning")


def result_type(*arrays_and_dtypes):
    """The dtype MLX's promotion gives these arrays and dtypes together."""
    types = []
    for x in arrays_and_dtypes:
        if isinstance(x, dt.Dtype):
            types.append(x)
        elif isinstance(x, b.array):
            types.append(x._dtype)
        else:
            raise ValueError("[result_type] Inputs must be arrays or dtypes.")
    if not types:
        raise ValueError("[result_type] At least one array or dtype is required.")
    out = types[0]
    for d in types[1:]:
        out = dt.promote_types(out, d)
    return out


def can_cast(from_, to):
    """True when promoting `from_` with `to` gives `to` (a safe cast)."""
    src = from_._dtype if isinstance(from_, b.array) else dt.as_dtype(from_)
    return dt.promote_types(src, dt.as_dtype(to)) is dt.as_dtype(to)
