"""Array creation ops; lazy like every other op, made on the op's stream."""
from __future__ import annotations

import functools
import math

import numpy as np

from . import build as b
from . import cforms, rules
from . import dims
from .build import dt

_FULL = b.make("full", lambda xp, shape, value, dtype: xp.full(shape, value, dtype=dtype))


def _arange(xp, start, step, num, dtype):
    """MLX's Arange: `start` and `start + step` in the dtype, then the difference of the two
    added up one element after another (the rounding of floats is MLX's, bit for bit)."""
    if dtype.kind in "iu":  # wraps around as C's integer arithmetic does
        first, nxt = int(start), int(start + step)
        return (first + (nxt - first) * xp.arange(num, dtype="int64")).astype(dtype)
    first, nxt = dtype.type(start), dtype.type(start + step)
    steps = xp.full(num, nxt - first, dtype=dtype)
    if num:
        steps[0] = first
    return xp.cumsum(steps, dtype=dtype)


def _linspace(xp, start, stop, num, endpoint, inner, dtype):
    """MLX's linspace: `(1 - t) * start + t * stop` in float32 (float64 for float64)."""
    if num == 1:
        return xp.asarray([start], dtype=inner).astype(dtype)
    t = xp.arange(num, dtype=inner) / inner.type(num - 1 if endpoint else num)
    one = inner.type(1)
    return ((one - t) * inner.type(start) + t * inner.type(stop)).astype(dtype)


def _arange_gpu(xp, **p):
    """On a GPU too the values are added up one after another, on the host (a device scan
    associates differently and rounds other values), in the array's dtype, bfloat16 too
    (handed over as float32, which the backend rounds back exactly)."""
    values = _arange(np, **p)
    return xp.asarray(values.astype(np.float32) if values.dtype.name == "bfloat16" else values)


_ARANGE = b.make("arange", _arange, gpu=b.GpuKernel(_arange_gpu, bfloat16="own"))
_LINSPACE = b.make("linspace", _linspace)
_EYE = b.make("eye", lambda xp, n, m, k, dtype: xp.eye(n, m, k, dtype=dtype))
_ASTYPE = b.make("astype", lambda xp, a, dtype: a.astype(dtype),
                 gpu=b.GpuKernel("streamlet.backend.cuda:astype_x86"),
                 vjp=lambda c, out, x, dtype: (c,),  # the transform casts it back to x's
                 jvp=lambda t, out, x, dtype: t[0].astype(out._dtype),
                 vmap=lambda axes, out, x, dtype: (astype(x, out._dtype), axes[0]),
                 shape=rules.same_shape, cform=cforms.ASTYPE)


def _dtype(dtype, default):
    return default if dtype is None else dt.as_dtype(dtype)


def full(shape, vals, dtype=None, *, stream=None):
    """An array of `shape` filled with `vals` (a scalar or an array broadcast to it)."""
    shape = dims.shape(shape, "full")
    # a NumPy scalar no Python type takes in (np.float16, np.int8, np.bool_) keeps its dtype,
    # as MLX makes an array of it; np.float64 is a Python float
    if isinstance(vals, b.array) or not b.is_scalar(vals) or \
            (isinstance(vals, np.generic) and not isinstance(vals, (int, float, complex))):
        from .shape import broadcast_to
        v = b.as_array(vals, "full")
        if dtype is not None:
            v = astype(v, dtype, stream=stream)
        return broadcast_to(v, shape, stream=stream)
    if dtype is None:
        d = dt.scalar_dtype(vals)
        if d is dt.int32 and not dims.LOW <= vals <= dims.HIGH:  # as array(): int64
            d = dt.int64
    else:
        d = dt.as_dtype(dtype)
    dt.check_int(vals, d, "full")  # when built, not when the kernel meets it
    return filled(shape, dt.scalar_value(vals, d), d, b.resolve(stream))


def filled(shape, value, d, state):
    """`full` of a checked shape tuple and a scalar `value` in Dtype `d` on stream `state`."""
    return b.node(_FULL, (), shape, d, {"shape": shape, "value": value, "dtype": d.np}, state)


def zeros(shape, dtype=dt.float32, *, stream=None):
    """An array of zeros: `mx.zeros((2, 3))`."""
    return full(shape, 0, _dtype(dtype, dt.float32), stream=stream)


def ones(shape, dtype=dt.float32, *, stream=None):
    """An array of ones: `mx.ones((2, 3), dtype=mx.int32)`."""
    return full(shape, 1, _dtype(dtype, dt.float32), stream=stream)


# `a` is an input (its value unread) so that a shapeless compiled function follows its shape
_FULL_LIKE = b.make("full_like", lambda xp, a, value, dtype: xp.full(a.shape, value, dtype),
                    vjp=lambda c, out, a, **p: (None,),
                    jvp=lambda t, out, a, **p: rules.zero_tangent(t, out),
                    vmap=lambda axes, out, a, **p: (full_like(a, p["value"], out._dtype),
                                                    axes[0]),
                    shape=rules.same_shape)


def zeros_like(a, /, dtype=None, *, stream=None):
    """Zeros with the shape (and dtype, unless given) of `a`."""
    return full_like(a, 0, dtype, stream=stream)


def ones_like(a, /, dtype=None, *, stream=None):
    """Ones with the shape (and dtype, unless given) of `a`."""
    return full_like(a, 1, dtype, stream=stream)


def full_like(a, /, fill_value, dtype=None, *, stream=None):
    """`fill_value` with the shape (and dtype, unless given) of `a`."""
    a = b.as_array(a, "full_like")
    d = dt.as_dtype(dtype) if dtype is not None else a._dtype
    if isinstance(fill_value, b.array) or not b.is_scalar(fill_value):
        return full(a._shape, fill_value, d, stream=stream)
    dt.check_int(fill_value, d, "full_like")
    return b.node(_FULL_LIKE, (a,), a._shape, d, {"value": dt.scalar_value(fill_value, d),
                                                  "dtype": d.np},
                  b.resolve(stream))


def _range_dtype(value):
    """MLX's type of an arange bound: bool, int32, int64 (beyond int32) or float32."""
    if type(value) is bool:
        return dt.bool_
    if type(value) is int:
        if not -2 ** 63 <= value < 2 ** 63:
            raise TypeError(f"[arange] {value} does not fit in a 64-bit integer.")
        return dt.int32 if dims.LOW <= value <= dims.HIGH else dt.int64
    if type(value) is float:  # as MLX, not NumPy's scalars
        return dt.float32
    raise TypeError(f"[arange] Expected an int or a float, got {type(value).__name__}.")


def _bounds(*values):
    """(start, stop, step) and their common dtype; TypeError for a value of another type."""
    kind = functools.reduce(dt.promote_types, [_range_dtype(v) for v in values if v is not None])
    return values, kind


# MLX's two forms of arange, tried in this order, as its bindings do; a TypeError
# (a missing argument, a bound of the wrong type) moves on to the next.
def _range_form(start, stop, step=None, dtype=None, *, stream=None):
    return (_bounds(start, stop, step) if stop is not None else _bounds(0, start, step),
            dtype, stream)


def _stop_form(stop, step=None, dtype=None, *, stream=None):
    bounds, kind = _bounds(stop, step)
    return ((0, stop, step), kind), dtype, stream


def arange(*args, **kwargs):
    """Evenly spaced values in [start, stop): `mx.arange(5)`, `mx.arange(0, 1, 0.25)`.

    Called as `arange(start, stop, step=None, dtype=None)` or `arange(stop, step=None,
    dtype=None)`, with keyword `stream`. The values are MLX's: `start` and `start + step`
    cast to the dtype, their difference added up (`arange(0, 3, 0.2, dtype=mx.int32)`
    is fifteen zeros).
    """
    try:
        ((start, stop, step), kind), dtype, stream = _range_form(*args, **kwargs)
    except TypeError:
        try:
            ((start, stop, step), kind), dtype, stream = _stop_form(*args, **kwargs)
        except TypeError:
            raise TypeError("[arange] Expected arange(start, stop, step=None, dtype=None) or "
                            "arange(stop, step=None, dtype=None), with int or float bounds "
                            f"and keyword stream; got {args} and {kwargs}.") from None
    d = _dtype(dtype, kind)
    if d.kind == "b":
        raise ValueError("[arange] bool not supported for arange.")
    start, stop, step = float(start), float(stop), 1.0 if step is None else float(step)
    if math.isnan(start) or math.isnan(stop) or math.isnan(step) or \
            math.isinf(start) or math.isinf(stop):
        raise ValueError("[arange] Cannot compute length.")
    if step == 0:
        raise ValueError("[arange] step must be nonzero.")
    if math.isinf(step):  # one element if the range is not empty
        num = int(start < stop if step > 0 else start > stop)
    else:
        size = math.ceil((stop - start) / step)
        if size > dims.HIGH:
            raise ValueError("[arange] Maximum size exceeded.")
        num = max(size, 0)
    return b.node(_ARANGE, (), (num,), d, {"start": start, "step": 0.0 if num < 2 else step,
                                           "num": num, "dtype": d.np}, b.resolve(stream))


def linspace(start, stop, num=50, endpoint=True, dtype=dt.float32, stream=None):
    """`num` evenly spaced values from `start` to `stop`, which is included if `endpoint`.

    `mx.linspace(0, 1, 5)` is [0, 0.25, 0.5, 0.75, 1]; `mx.linspace(0, 1, 4,
    endpoint=False)` is [0, 0.25, 0.5, 0.75].
    """
    num = b.int_arg(num, "linspace", "num")  # beyond 32 bits a TypeError, as MLX's
    if num < 0:
        raise ValueError(f"[linspace] number of samples, {num}, must be non-negative.")
    d = dt.float32 if dtype is None else dt.as_dtype(dtype)
    if isinstance(start, (str, bytes)) or isinstance(stop, (str, bytes)):
        raise TypeError("[linspace] start and stop must be scalars, got a string.")
    start, stop = float(start), float(stop)
    if num == 1:  # MLX: `start` as float32, whatever the dtype
        start = float(dt.float32.np.type(start))
    inner = dt.float64.np if d is dt.float64 else dt.float32.np
    return b.node(_LINSPACE, (), (num,), d,
                  {"start": start, "stop": stop, "num": num,
                   "endpoint": b.bool_arg(endpoint, "linspace", "endpoint"),
                   "inner": inner, "dtype": d.np}, b.resolve(stream))


def eye(n, m=None, k=0, dtype=dt.float32, *, stream=None):
    """An n x m matrix with ones on diagonal `k`."""
    n = b.int_arg(n, "eye", "n")
    m = n if m is None else b.int_arg(m, "eye", "m")
    k = b.int_arg(k, "eye", "k")
    if n < 0 or m < 0:
        raise ValueError(f"[eye] Negative dimensions not allowed: ({n}, {m}).")
    d = _dtype(dtype, dt.float32)
    return b.node(_EYE, (), (int(n), int(m)), d, {"n": int(n), "m": int(m), "k": int(k),
                                                  "dtype": d.np}, b.resolve(stream))


def identity(n, dtype=dt.float32, *, stream=None):
    """The n x n identity matrix."""
    return eye(n, n, 0, dtype, stream=stream)


def astype(a, /, dtype, stream=None):
    """`a` converted to `dtype`: `mx.astype(mx.array([1.5]), mx.int32)` is [1].

    NOTE: `stream` may be positional because the method `a.astype(dtype, stream)` takes
    it so in MLX and is this function (operators.py); MLX's `mx.astype` itself wants it
    by keyword.
    """
    if dtype is None:
        raise TypeError("[astype] Expected a dtype, got None.")
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
    """`a` as an array, as MLX 0.32.4: an array is cast to `dtype` (copied if `copy`),
    anything else is converted as `mx.array` converts it.  `copy=False` raises
    ValueError wherever a copy is needed, which on the CPU is everywhere (MLX's CPU build
    adopts no buffer either).

    >>> x = mx.array([1, 2]); mx.asarray(x).tolist(), mx.asarray([1.5], mx.int32).tolist()
    ([1, 2], [1])
    """
    from ..array import to_array
    from ..convert import create
    if copy is not None:
        b.bool_arg(copy, "asarray", "copy")
    return to_array(create(a, dtype, copy))


empty, empty_like = zeros, zeros_like


def meshgrid(*arrays, sparse=False, indexing="xy", stream=None):
    """Coordinate arrays (a tuple) from 1-D arrays, with 'xy' (Cartesian) or 'ij' (matrix)
    indexing: `X, Y = mx.meshgrid(mx.arange(3), mx.arange(2))` gives X and Y of shape (2, 3)."""
    from .shape import broadcast_to, reshape
    b.resolve(stream)  # checked also when no op is made (1-D inputs), as MLX checks it
    sparse = b.bool_arg(sparse, "meshgrid", "sparse")
    if b.str_arg(indexing, "meshgrid", "indexing") not in ("xy", "ij"):
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
    return tuple(out)


def _window(xp, m, kind):
    return getattr(xp, kind)(m).astype("float32")


_WINDOW = b.make("window", _window)


def _make_window(kind):
    def op(M, *, stream=None):
        M = max(b.int_arg(M, kind, "M"), 0)  # as MLX (and NumPy): no points below 1
        return b.node(_WINDOW, (), (M,), dt.float32, {"m": M, "kind": kind}, b.resolve(stream))
    b.rename(op, kind)
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
    if isinstance(from_, b.array):
        src = from_._dtype
    elif from_ is None:  # MLX's binding refuses None (TypeError) before its own check
        raise TypeError("[can_cast] Expected an array or a dtype as `from_`, got None.")
    else:
        try:
            src = dt.as_dtype(from_)
        except TypeError:
            raise ValueError("[can_cast] `from_` must be an array or a dtype.") from None
    return dt.promote_types(src, dt.as_dtype(to)) is dt.as_dtype(to)
