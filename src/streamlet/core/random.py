"""Random numbers: MLX's key-based Threefry generator, bit for bit (DESIGN §6).

>>> import streamlet.core as mx
>>> mx.random.split(mx.random.key(0)).tolist()
[[4146024105, 967050713], [2718843009, 1272950319]]

Every draw is a lazy op whose inputs include its key, so a key made on one stream and
used on another is ordered like any other input.  The global key sequence (`seed`,
draws without `key=`) is per thread and advances eagerly on the host: a tiny pure-Python
hash, so long unevaluated chains of split keys never build up in the graph.
"""
from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np

from .. import _public
from . import stream as _stream
from .ops import build as b
from .ops import elementwise as ew
from .ops import rules
from .ops import threefry as tf
from .ops.build import BadType, dt
from .ops.creation import _cast
from .ops.linalg import matmul
from .ops.reduction import argmax
from .ops.shape import expand_dims, squeeze
from .ops.special import erf_f32_mlx, log1pf_glibc, logf_glibc

_M32 = 0xFFFFFFFF
_BERNOULLI_UPPER = np.nextafter(np.float32(_M32), np.float32(np.inf))  # 2^32 + 512


# -- keys and the per-thread sequence ------------------------------------------------------
def _hash_py(key, c0, c1):
    """One Threefry-2x32 hash in Python ints (for the host-side key sequence)."""
    ks = tf.key_schedule(*key)
    x0, x1 = (c0 + ks[0]) & _M32, (c1 + ks[1]) & _M32
    for i in range(5):
        for r in tf.ROTATIONS[i % 2]:
            x0 = (x0 + x1) & _M32
            x1 = (((x1 << r) | (x1 >> (32 - r))) & _M32) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & _M32
        x1 = (x1 + ks[(i + 2) % 3] + i + 1) & _M32
    return x0, x1


def _split_py(key):
    """`split(key)` on the host: (next key, subkey) as pairs of ints."""
    fast = tf.compiled(0)  # the compiled hash if loaded already: one is not worth loading it
    if fast is not None:
        return fast.split_pair(key)
    a = _hash_py(key, 0, 2)
    c = _hash_py(key, 1, 3)
    return (a[0], c[0]), (a[1], c[1])


class _Local(threading.local):
    # this thread's key: (k0, k1), made from the clock on first use as MLX does, or a key
    # array once `state[0]` is set (compile traces the sequence through the graph so)
    key = None


_local = _Local()


def _check_seed(seed, op):
    if isinstance(seed, b.array) and seed.ndim == 0:
        seed = b.ints_of(seed)  # a 0-d integer array is its int, as MLX's binding reads it
    if not isinstance(seed, (int, np.integer)):
        raise TypeError(f"[{op}] Expected an integer seed, got {type(seed).__name__}.")
    if not 0 <= int(seed) < 1 << 64:  # MLX's binding refuses it as a uint64: a TypeError
        raise BadType(f"[{op}] Seed {seed} is outside [0, 2**64).")
    return int(seed)


def _key_pair(seed):
    return seed >> 32 & _M32, seed & _M32


def _key_array(pair):
    return b.array(np.array(pair, np.uint32))


def key(seed: int):
    """A PRNG key from a seed: the words (seed >> 32, seed & 0xffffffff).

    >>> key(2**32 + 5).tolist()
    [1, 5]
    """
    return _key_array(_key_pair(_check_seed(seed, "key")))


def seed(seed: int) -> None:
    """Seed this thread's global key sequence; the next draw uses `split(key(seed))[1]`.

    >>> seed(3); a = uniform(); seed(3); a.item() == uniform().item()
    True
    """
    _local.key = _key_pair(_check_seed(seed, "seed"))


_unseeded = itertools.count()  # how many threads have keyed themselves from the clock


def _current():
    """This thread's key: unseeded, key(time in ms) as in MLX, made distinct per thread."""
    if _local.key is None:
        clock = _key_pair(time.time_ns() // 1_000_000)
        n = next(_unseeded)
        # NOTE: threads started in the same millisecond must not share a sequence
        _local.key = clock if n == 0 else _hash_py(clock, n, 0)
    return _local.key


def _next_key():
    k = _current()
    if isinstance(k, b.array):
        both = split(k)
        _local.key = both[0]
        return both[1]
    _local.key, sub = _split_py(k)
    return _key_array(sub)


class _RandomState:
    """`random.state`: MLX's one-element list holding the global key, here this thread's.

    >>> seed(9); state[0].tolist() == key(9).tolist()
    True
    """

    def __len__(self):
        return 1

    def __getitem__(self, i):
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"[state] Expected an integer index, got {type(i).__name__}.")
        if i not in (0, -1):
            raise IndexError(f"[state] Index {i} out of range for the one key.")
        k = _current()
        return k if isinstance(k, b.array) else _key_array(k)

    def __setitem__(self, i, value):
        self[i]  # noqa: B018 (checks the index)
        _local.key = _get_key(value, "state")  # kept as an array: it may be pending


state = _RandomState()


def _reset():
    _local.key = None


_stream._clear_hooks.append(_reset)


def _get_key(k, op):
    """The key a draw uses: `k` checked, or the next of this thread's sequence."""
    if k is None:
        return _next_key()
    if isinstance(k, np.ndarray):
        k = b.array(k)
    if not isinstance(k, b.array):
        shown = repr(k) if len(repr(k)) < 40 else repr(k)[:37] + "..."
        raise TypeError(f"[{op}] Expected a key array for key=, got {type(k).__name__} {shown}.")
    if k.dtype is not dt.uint32:
        raise ValueError(f"[{op}] Expected key type uint32 but received {k.dtype}.")
    if k.shape != (2,):
        raise ValueError(f"[{op}] Expected key shape (2,) but received {k.shape}.")
    return k


def _shape(shape, op):
    if shape is None or isinstance(shape, (int, np.integer)):  # MLX takes a sequence
        raise TypeError(f"[{op}] Expected a sequence of ints for the shape, got {shape!r}.")
    return b.check_shape(shape, op)


def _float_dtype(dtype, op, complex_ok=False):
    d = dt.float32 if dtype is None else dt.as_dtype(dtype)
    if d.kind != "f" and not (complex_ok and d is dt.complex64):
        raise ValueError(f"[{op}] Can only generate random numbers with a real floating "
                         f"point type, got {d}.")
    return d


# -- primitives ------------------------------------------------------------------------------
def _bits_kernel(xp, keys, nbytes, npdtype, shape):
    raw = tf.key_bytes(xp, keys.reshape(-1, 2), nbytes)
    return raw.view(npdtype).reshape(keys.shape[:-1] + shape)


def _fill(xp, k, n, transform=tf.WORDS, param=None):
    """`n` values from the key `k` (an array of two words), in MLX's order.  A GPU's key
    stays there: reading it on the host would wait for everything queued before."""
    if xp is np:
        return tf.fill(np, k.tolist(), n, transform, param)
    from ..backend import cuda_random
    return cuda_random.fill(k, n, cuda_random.MODES[transform], param)[0]


def _unit_kernel(xp, k, upper, npdtype, shape):
    """MLX's uniform on [0, 1) of `npdtype` (before low/high are applied)."""
    u = _fill(xp, k, math.prod(shape), tf.UNIT, upper)
    return u.astype(npdtype, copy=False).reshape(shape)


def _normal_kernel(xp, k, npdtype, shape, mode):
    """erfinv(uniform(-1, 1)) cast to the dtype; times sqrt(2) in mode "standard".

    Mode "complex" views pairs as complex64 and does not scale them, as MLX does.
    """
    e = _fill(xp, k, math.prod(shape) * (2 if mode == "complex" else 1), tf.ERFINV_UNIT)
    if mode == "complex":
        return e.view(np.complex64).reshape(shape)
    e = e.astype(npdtype, copy=False)
    if mode == "standard":
        xp.multiply(e, npdtype.type(math.sqrt(2.0)), out=e)
    return e.reshape(shape)


def _log_as_mlx(xp, x):
    """MLX's CPU log: glibc's logf, rounded back to half types."""
    if xp is not np:
        return logf_glibc(xp, x).astype(x.dtype, copy=False)
    fast = tf.compiled(x.size)
    if fast is not None:
        return fast.logf(x).astype(x.dtype, copy=False)
    return tf.map_chunks(lambda c: logf_glibc(np, c), x, np.empty_like(x))


def _gumbel_kernel(xp, k, upper, npdtype, shape):
    u = _unit_kernel(xp, k, upper, npdtype, shape)
    return -_log_as_mlx(xp, -_log_as_mlx(xp, u))


def _permutation_kernel(xp, k, n):
    w = _fill(xp, k, n)
    return xp.argsort(w, kind="stable").astype(np.uint32)


def _erf_kernel(xp, a):
    """MLX's CPU erf (truncated_normal's CDF bounds), in float32, rounded to the input type."""
    return erf_f32_mlx(xp, a).astype(a.dtype, copy=False)


def _take_kernel(xp, a, idx, axis):
    return xp.take(a, idx.astype(np.int64), axis=axis)


def _sqrt_cov_kernel(xp, cov):
    """U sqrt(S) Vt of each covariance matrix, in float32 as MLX computes it."""
    u, s, vt = xp.linalg.svd(cov.astype(np.float32), full_matrices=True)
    return ((u * xp.sqrt(s)[..., None, :]) @ vt).astype(np.float32)


_ON_GPU = "streamlet.backend.cuda_random:"
RANDOM_BITS = b.make("random_bits", _bits_kernel, gpu=b.GpuKernel(_ON_GPU + "bits"))
UNIFORM = b.make("uniform", _unit_kernel)
NORMAL = b.make("normal", _normal_kernel, gpu=b.GpuKernel(_ON_GPU + "normal", bfloat16="own"))
GUMBEL = b.make("gumbel", _gumbel_kernel, gpu=b.GpuKernel(_ON_GPU + "gumbel", bfloat16="own"))
PERMUTATION = b.make("permutation", _permutation_kernel)


def _take_vjp(c, out, a, idx, axis):
    """The cotangent taken back by the inverse permutation (each slot gets one value)."""
    from .ops.indexing import take
    from .ops.sorting import argsort
    return (lambda: take(c, argsort(idx), axis), None)


# MLX's permutation of an array is a take by the permuted indices: differentiable in it
TAKE = b.make("permutation_take", _take_kernel, vjp=_take_vjp,
              jvp=lambda t, out, a, idx, axis: None if t[0] is None else
              _permuted(t[0], idx, axis, b.resolve(None)))


def _permuted(a, idx, axis, st):
    return b.node(TAKE, (a, idx), a._shape, a._dtype, {"axis": axis}, st)


def _erf_derivative(m, x, y):
    return (2 / math.sqrt(math.pi)) * m.exp(-m.square(x))


# truncated_normal's bounds are differentiable, as MLX's (its CDF is an erf of them)
ERF = b.make("truncated_normal_erf", _erf_kernel, vmap=rules.elementwise_vmap,
             shape=rules.broadcast_shape, **rules.from_derivative(_erf_derivative, "truncated_normal_erf"))
LOG1P = b.make("laplace_log1p", lambda xp, a: log1pf_glibc(xp, a))  # MLX's CPU log1p
SQRT_COV = b.make("multivariate_normal_sqrt_cov", _sqrt_cov_kernel)

_BELOW_ONE = {dt.float32: tf.BELOW_ONE}


def _upper(d, op):
    """The largest value below 1 in dtype `d`, as float32 (MLX clamps uniform draws to it)."""
    if d.size > 4:
        raise RuntimeError(f"[{op}] Unsupported type {d}: uniform draws are float32 at most.")
    if d not in _BELOW_ONE:
        _BELOW_ONE[d] = np.float32(np.nextafter(d.np.type(1), d.np.type(0)))
    return _BELOW_ONE[d]


# -- public functions ------------------------------------------------------------------------
def bits(shape=(), width=4, key=None, *, stream=None):
    """Raw random bits: unsigned integers of `width` bytes (1, 2 or 4).

    >>> bits((2,), 4, key(0)).tolist() == split(key(0), 1).tolist()[0]
    True
    """
    shape = _shape(shape, "bits")
    kinds = {4: dt.uint32, 2: dt.uint16, 1: dt.uint8}
    if width not in kinds:
        raise ValueError(f"[bits] Bit width must be in {{1, 2, 4}} but got {width}.")
    k = _get_key(key, "bits")
    d = kinds[width]
    params = {"nbytes": width * math.prod(shape), "npdtype": d.np, "shape": shape}
    return b.node(RANDOM_BITS, (k,), shape, d, params, b.resolve(stream))


def split(key, num=2, *, stream=None):
    """`num` new keys from `key`, as an array of shape (num, 2).

    >>> split(key(1), 3).shape
    (3, 2)
    """
    num = b.int_arg(num, "split", "num")
    if num < 0:
        raise ValueError(f"[split] Expected a non-negative number of keys, got {num!r}.")
    if key is None:
        raise TypeError("[split] Expected a key array, got None.")
    return bits((num, 2), 4, _get_key(key, "split"), stream=stream)


def _bound(x, d, op, stream):
    """A bound (scalar or array) converted as MLX does: to an array, then to `d` (a Python
    float straight to float64, not through float32)."""
    if d is dt.float64 and isinstance(x, float):
        return b.const(x, d)
    return _cast(b.as_array(x, op), d, stream=stream)


def uniform(low=0, high=1, shape=(), dtype=dt.float32, key=None, *, stream=None):
    """Uniform samples in [low, high) of a real floating dtype.

    >>> uniform(shape=(2,), key=key(0)).tolist()
    [0.21629545092582703, 0.8041241765022278]
    """
    shape = _shape(shape, "uniform")
    d = _float_dtype(dtype, "uniform")
    k = _get_key(key, "uniform")
    st = b.resolve(stream)
    default = _is_number(low, 0) and _is_number(high, 1)
    if not default:
        lo, hi = _bound(low, d, "uniform", stream), _bound(high, d, "uniform", stream)
        rng = ew.subtract(hi, lo, stream=stream)
        out_shape = b.broadcast_shapes(shape, rng.shape, op="uniform")
        if out_shape != shape:
            raise ValueError(f"[uniform] Cannot generate random values of shape {shape} "
                             f"from broadcasted shape {out_shape}.")
    params = {"upper": _upper(d, "uniform"), "npdtype": d.np, "shape": shape}
    u = b.node(UNIFORM, (k,), shape, d, params, st)
    if default:  # 1 * u + 0 == u exactly
        return u
    return ew.add(ew.multiply(rng, u, stream=stream), lo, stream=stream)


def _is_number(x, value):
    return b.is_scalar(x) and not isinstance(x, bool) and x == value


def normal(shape=(), dtype=dt.float32, loc=None, scale=None, key=None, *, stream=None):
    """Normal samples: erfinv of a uniform draw times sqrt(2), then `* scale + loc`.

    >>> normal((3,), key=key(0)).tolist()
    [1.8160871267318726, -0.48262301087379456, 0.339889258146286]
    """
    shape = _shape(shape, "normal")
    d = _float_dtype(dtype, "normal", complex_ok=True)
    k = _get_key(key, "normal")
    st = b.resolve(stream)
    if d is dt.complex64:
        out = _normal_node(k, shape, d, st, "complex")
        if scale is not None:
            out = ew.multiply(scale, out, stream=stream)
        return out if loc is None else ew.add(loc, out, stream=stream)
    if scale is not None and not _is_number(scale, 1):
        # MLX scales sqrt(2) first: (sqrt(2) * scale) * erfinv(u)
        e = _normal_node(k, shape, d, st, "unscaled")
        scale = _bound(scale, d, "normal", stream)
        applied = ew.multiply(b.const(math.sqrt(2.0), d), scale, stream=stream)
        out = ew.multiply(applied, e, stream=stream)
    else:
        out = _normal_node(k, shape, d, st, "standard")
    if loc is not None:  # even 0: 0 + -0.0 is 0.0
        out = ew.add(_bound(loc, d, "normal", stream), out, stream=stream)
    return out


def _normal_node(k, shape, d, st, mode):
    return b.node(NORMAL, (k,), shape, d, {"npdtype": d.np, "shape": shape, "mode": mode}, st)


def randint(low, high, shape=(), dtype=dt.int32, key=None, *, stream=None):
    """Integers in [low, high): floor of a uniform draw, clamped to [low, high - 1] (so
    all `low` where `low >= high`, as in MLX).

    >>> randint(0, 10, (5,), key=key(0)).tolist()
    [5, 0, 3, 8, 5]
    """
    shape = _shape(shape, "randint")
    d = dt.int32 if dtype is None else dt.as_dtype(dtype)
    if d.kind not in "biu":
        raise ValueError(f"[randint] randint only accepts integer dtypes and bool, got {d}.")
    k = _get_key(key, "randint")
    lo, hi = b.as_array(low, "randint"), b.as_array(high, "randint")
    u = ew.floor(uniform(lo, hi, shape, dt.float32, k, stream=stream), stream=stream)
    # NOTE: MLX 0.32.4 rounds down, then clamps to [low, high - 1] in the output dtype
    # (float32 rounding can reach `high`); `high - 1` is taken in high's dtype, then cast
    top = _cast(ew.subtract(hi, b.const(1, hi.dtype), stream=stream), d, stream=stream)
    x = ew.minimum(_cast(u, d, stream=stream), top, stream=stream)
    return ew.maximum(x, _cast(lo, d, stream=stream), stream=stream)


def bernoulli(p=0.5, shape=None, key=None, *, stream=None):
    """Booleans that are True with probability `p` (a float or a float array).

    >>> bernoulli(0.5, (4,), key=key(0)).tolist()
    [False, True, False, True]
    """
    if b.is_scalar(p) and not 0.0 <= p <= 1.0:
        raise ValueError(f"[bernoulli] p must be in [0, 1], got {p}.")
    p = b.as_array(p, "bernoulli")
    if p.dtype.kind != "f":
        raise ValueError(f"[bernoulli] bernoulli probability `p` must be a float type, "
                         f"got {p.dtype}.")
    shape = p.shape if shape is None else _shape(shape, "bernoulli")
    if b.broadcast_shapes(shape, p.shape, op="bernoulli") != shape:
        raise ValueError(f"[bernoulli] shape of `p` {p.shape} is incompatible with "
                         f"argument `shape` {shape}.")
    k = _get_key(key, "bernoulli")
    upper = b.array(np.float32(_BERNOULLI_UPPER))
    threshold = ew.multiply(p, upper, stream=stream)
    return ew.less(bits(shape, 4, k, stream=stream), threshold, stream=stream)


def truncated_normal(lower, upper, shape=None, dtype=dt.float32, key=None, *, stream=None):
    """Normal samples conditioned on (lower, upper), by inverting the CDF as MLX does.

    >>> truncated_normal(-1, 1, (2,), key=key(0)).tolist()
    [-0.5063146352767944, 0.546451985836029]
    """
    d = _float_dtype(dtype, "truncated_normal")
    k = _get_key(key, "truncated_normal")
    lo = _bound(lower, d, "truncated_normal", stream)
    hi = _bound(upper, d, "truncated_normal", stream)
    if shape is None:
        shape = b.broadcast_shapes(lo.shape, hi.shape, op="truncated_normal")
    shape = _shape(shape, "truncated_normal")
    sqrt2 = b.const(math.sqrt(2.0), d)
    a, c = (ew.divide(x, sqrt2, stream=stream) for x in (lo, hi))
    a, c = (b.node(ERF, (x,), x.shape, d, b.NO_PARAMS, b.resolve(stream)) for x in (a, c))
    u = uniform(a, c, shape, d, k, stream=stream)
    out = ew.multiply(sqrt2, ew.erfinv(u, stream=stream), stream=stream)
    return ew.maximum(ew.minimum(hi, out, stream=stream), lo, stream=stream)


def gumbel(shape=(), dtype=dt.float32, key=None, *, stream=None):
    """Standard Gumbel samples: -log(-log(uniform)) with MLX's log.

    >>> gumbel((2,), key=key(0)).tolist()
    [-0.4259929060935974, 1.5232529640197754]
    """
    shape = _shape(shape, "gumbel")
    d = _float_dtype(dtype, "gumbel")
    k = _get_key(key, "gumbel")
    params = {"upper": _upper(d, "gumbel"), "npdtype": d.np, "shape": shape}
    return b.node(GUMBEL, (k,), shape, d, params, b.resolve(stream))


def categorical(logits, axis=-1, shape=None, num_samples=None, key=None, *, stream=None):
    """Indices sampled from the unnormalized log-probabilities `logits` along `axis`.

    >>> categorical(b.array([0.0, 0.0, 5.0]), num_samples=4, key=key(0)).tolist()
    [2, 2, 2, 2]
    """
    logits = b.as_array(logits, "categorical")
    if shape is not None and num_samples is not None:
        raise ValueError("[categorical] At most one of shape or num_samples can be specified.")
    ax = b.normalize_axis(axis, logits.ndim, "categorical")
    reduced = logits.shape[:ax] + logits.shape[ax + 1:]
    if num_samples is not None:
        num_samples = b.int_arg(num_samples, "categorical", "num_samples")
        if num_samples < 0:
            raise ValueError(f"[categorical] num_samples must be >= 0, got {num_samples}.")
        shape = reduced + (num_samples,)
    elif shape is None:
        shape = reduced
    else:
        shape = _shape(shape, "categorical")
        if b.broadcast_shapes(shape, reduced, op="categorical") != shape:
            raise ValueError(f"[categorical] Requested shape {shape} is not broadcast "
                             f"compatible with reduced logits shape {reduced}.")
    k = _get_key(key, "categorical")
    if shape and math.prod(reduced) == 1 and logits.shape[ax]:
        # one distribution drawn into an array: MLX inverts its CDF at uniform draws
        u = uniform(0.0, 1.0, shape, dt.float32, k, stream=stream)
        return b.node(_INVERSE_CDF, (logits, u), shape, dt.uint32, b.NO_PARAMS,
                      b.resolve(stream))
    if num_samples is not None:
        logits = expand_dims(logits, -1, stream=stream)
    offset = ax + len(shape) - logits.ndim + 1
    g_shape = shape[:offset] + (logits.shape[ax],) + shape[offset:]
    g = gumbel(g_shape, dt.float32, k, stream=stream)
    return argmax(ew.add(g, logits, stream=stream), offset, stream=stream)


def _inverse_cdf(xp, logits, u):
    """Category indices of the uniform draws `u` under softmax(`logits`), a single
    distribution (all other axes of `logits` have size 1)."""
    x = logits.astype(xp.float32).reshape(-1)
    top = x.max()
    p = xp.exp(xp.where(x == top, xp.float32(0), x - top))  # tied infinities share, as in MLX
    cdf = xp.cumsum(p / p.sum(dtype=xp.float32), dtype=xp.float32)
    # the index is the count of CDF values not above u; a NaN (which then fills the rest
    # of the CDF) is never above it, as in MLX
    finite = int((~xp.isnan(cdf)).sum())
    idx = x.size - finite + xp.searchsorted(cdf[:finite], u.reshape(-1), side="right")
    return xp.minimum(idx, x.size - 1).astype(xp.uint32).reshape(u.shape)


# an index, as MLX's argmax of the perturbed logits: no gradient reaches the logits (nor
# the draws), and a tangent is zeros of the index dtype
_INVERSE_CDF = b.make("categorical", _inverse_cdf, vjp=lambda c, out, x, u: (None, None),
                      jvp=lambda t, out, x, u: rules.inert_tangent(t, out))


def laplace(shape=(), dtype=dt.float32, loc=0.0, scale=1.0, key=None, *, stream=None):
    """Laplace samples by inverting the CDF of a uniform draw in (-1, 1), as MLX does.

    >>> laplace((2,), key=key(0)).tolist()
    [0.8379626274108887, -0.9371273517608643]
    """
    shape = _shape(shape, "laplace")
    d = _float_dtype(dtype, "laplace")
    # MLX's `float`s: a number or a 0-d array (not a string, None or a complex number)
    loc = float(b.float_arg(loc, "laplace", "loc"))
    scale = float(b.float_arg(scale, "laplace", "scale"))
    u = uniform(tf.NORMAL_LOW, 1.0, shape, dt.float32, _get_key(key, "laplace"), stream=stream)
    neg = ew.negative(ew.abs(u, stream=stream), stream=stream)
    if d is dt.float64:  # MLX's `-1 (as dtype) * |u|` promotes: log1p is float64's
        mag = ew.log1p(_cast(neg, d, stream=stream), stream=stream)
    else:
        mag = b.node(LOG1P, (neg,), shape, dt.float32, b.NO_PARAMS, b.resolve(stream))
    out = _cast(ew.multiply(ew.sign(u, stream=stream), mag, stream=stream), d, stream=stream)
    if np.float32(scale) != 1.0:  # MLX takes loc and scale as C floats
        out = ew.multiply(b.const(np.float32(scale), d), out, stream=stream)
    if np.float32(loc) != 0.0:
        out = ew.add(b.const(np.float32(loc), d), out, stream=stream)
    return out


def multivariate_normal(mean, cov, shape=(), dtype=dt.float32, key=None, *, stream=None):
    """Jointly normal samples: mean + z @ (U sqrt(S) Vt) with (U, S, Vt) the SVD of `cov`.

    >>> multivariate_normal(b.array([0.0, 1.0]), b.array([[1.0, 0], [0, 1]]), (4,)).shape
    (4, 2)
    """
    d = dt.float32 if dtype is None else dt.as_dtype(dtype)
    if d is not dt.float32:
        raise ValueError(f"[multivariate_normal] dtype must be float32, got {d}.")
    if b.is_scalar(mean) or b.is_scalar(cov):
        raise TypeError("[multivariate_normal] mean and cov must be arrays, not scalars.")
    mean, cov = b.as_array(mean, "multivariate_normal"), b.as_array(cov, "multivariate_normal")
    if mean.ndim < 1 or cov.ndim < 2:
        raise ValueError(f"[multivariate_normal] mean needs >= 1 and cov >= 2 dimensions, "
                         f"got shapes {mean.shape} and {cov.shape}.")
    n = mean.shape[-1]
    if cov.shape[-1] != cov.shape[-2] or cov.shape[-1] != n:
        raise ValueError(f"[multivariate_normal] mean and cov have incompatible shapes "
                         f"{mean.shape} and {cov.shape}.")
    shape = _shape(shape, "multivariate_normal")
    out = b.broadcast_shapes(cov.shape[:-2], mean.shape[:-1], op="multivariate_normal")
    out = b.broadcast_shapes(out, shape, op="multivariate_normal") + (n,)
    st = b.resolve(stream)
    std = b.node(SQRT_COV, (cov,), cov.shape, dt.float32, b.NO_PARAMS, st)
    z = normal(out, d, key=_get_key(key, "multivariate_normal"), stream=stream)
    row = expand_dims(z, -2, stream=stream)
    scaled = squeeze(matmul(row, std, stream=stream), -2, stream=stream)
    return ew.add(mean, scaled, stream=stream)


def permutation(x, axis=0, key=None, *, stream=None):
    """A random permutation of range(x), or of `x`'s entries along `axis`.

    >>> sorted(permutation(5, key=key(0)).tolist())
    [0, 1, 2, 3, 4]
    """
    st = b.resolve(stream)
    axis = b.int_arg(axis, "permutation", "axis")
    if b.is_scalar(x):
        if not isinstance(x, (int, np.integer)):
            raise BadType(f"[permutation] Expected an integer or an array, got {x!r}.")
        if x < 0:
            raise ValueError(f"[permutation] Expected a non-negative integer, got {x!r}.")
        k = _get_key(key, "permutation")
        return b.node(PERMUTATION, (k,), (int(x),), dt.uint32, {"n": int(x)}, st)
    x = b.as_array(x, "permutation")
    ax = b.normalize_axis(axis, x.ndim, "permutation")
    idx = permutation(x.shape[ax], key=key, stream=stream)
    return _permuted(x, idx, ax, st)


__all__ = ["bernoulli", "bits", "categorical", "gumbel", "key", "laplace",
           "multivariate_normal", "normal", "permutation", "randint", "seed", "split", "state",
           "truncated_normal", "uniform"]


def __dir__():
    return _public.names(globals())
