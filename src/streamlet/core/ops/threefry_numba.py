"""Compiled Threefry and transforms (numba): the NumPy path, fused.

Pure NumPy spends most of its time re-reading buffers (about 110 passes per chunk for the
hash and 60 for erfinv), which caps it at about MLX's speed; one compiled loop per chunk
keeps each value in registers.  Every function rounds as its NumPy twin in threefry.py and
special.py does (float32 products, fused multiply-adds rounded once as special.fma_f32), and
tests/test_random.py checks that the two paths give identical bits.

NOTE: erfinv's multiply-adds here are a float64 multiply-add rounded to float32, not `_fma`:
over erfinv's whole domain the two agree (every float32 in [0, 1) was checked, 0
mismatches; erfinv is odd), and `_fma`'s tie branches stop LLVM from vectorizing the loops,
which made `normal` 3x slower.
"""
from __future__ import annotations

import numba
import numpy as np

from .special import _ERFINV_CORE, _ERFINV_TAIL, _LOGF_INVC, _LOGF_LN2, _LOGF_LOGC, \
    _LOGF_POLY
from .threefry import BELOW_ONE, CHUNK, NORMAL_LOW, TWO_M32, in_parts, key_schedule

_jit = numba.njit(nogil=True, cache=True)
_M = np.uint64(0xFFFFFFFF)
_ROT = tuple(np.uint64(r) for r in (13, 15, 26, 6, 17, 29, 16, 24))
_INVC = np.array(_LOGF_INVC)
_LOGC = np.array(_LOGF_LOGC)
_TAIL = tuple(float(np.float32(c)) for c in _ERFINV_TAIL)
_CORE = tuple(float(np.float32(c)) for c in _ERFINV_CORE)


@_jit
def _hash_span(k0, k1, k2, h, a, b, w0, w1):
    """Words of the counter pairs (y, y + h), y in [a, b), into w0[y - a], w1[y - a]."""
    ks = (k0, k1, k2)
    for y in range(a, b):
        x0 = (np.uint64(y) + k0) & _M
        x1 = (np.uint64(y + h) + k1) & _M
        for i in range(5):
            base = 4 * (i % 2)
            for j in range(4):
                r = _ROT[base + j]
                x0 = (x0 + x1) & _M
                x1 = ((x1 << r) | (x1 >> (np.uint64(32) - r))) & _M
                x1 ^= x0
            x0 = (x0 + ks[(i + 1) % 3]) & _M
            x1 = (x1 + ks[(i + 2) % 3] + np.uint64(i + 1)) & _M
        w0[y - a] = np.uint32(x0)
        w1[y - a] = np.uint32(x1)


@_jit
def _unit(w, out, upper):
    for j in range(w.shape[0]):
        u = np.float32(w[j]) * TWO_M32
        out[j] = u if u < upper else upper


@_jit
def _logf(t, tbits):
    """glibc's logf of t (a positive normal float32), as special.logf_glibc computes it."""
    ix = np.int64(tbits)
    tmp = (ix - 0x3F330000) & 0xFFFFFFFF
    i = (tmp >> 19) & 15
    k = (tmp - (tmp >> 31) * 0x100000000) >> 23
    iz = (ix - (tmp & 0xFF800000)) & 0xFFFFFFFF
    # z lies in [0x3F330000, 0x3FB30000) as bits: exponent 126 or 127
    z = np.float64((iz & 0x7FFFFF) | 0x800000) * (2.0 ** -24 if iz >> 23 == 126 else 2.0 ** -23)
    r = z * _INVC[i] - 1.0
    r2 = r * r
    y = _LOGF_POLY[0] * r2 + (_LOGF_POLY[1] * r + _LOGF_POLY[2])
    y = y * r2 + ((_LOGF_LOGC[i] + k * _LOGF_LN2) + r)
    return np.float32(y)


@_jit
def _erfinv_signed_unit(w, out, tbuf):
    """erfinv(2 u - 0.99999994) for u = MLX's uniform of each word (threefry.ERFINV_UNIT)."""
    n = w.shape[0]
    for j in range(n):
        u = np.float32(w[j]) * TWO_M32
        u = u if u < BELOW_ONE else BELOW_ONE
        a = u * np.float32(2) + NORMAL_LOW
        out[j] = a
        a64 = np.float64(a)
        tbuf[j] = np.float32(1.0 - a64 * a64)
    tbits = tbuf.view(np.uint32)
    for j in range(n):
        t = tbuf[j]
        if t > 0:
            tbuf[j] = _logf(t, tbits[j])
        else:
            tbuf[j] = -np.inf if t == 0 else np.nan
    for j in range(n):
        t64 = np.float64(tbuf[j])
        if abs(tbuf[j]) > np.float32(6.125):
            p = _horner(_TAIL, t64)
        else:
            p = _horner(_CORE, t64)
        out[j] = out[j] * p


@numba.njit(nogil=True, cache=True, inline="always")
def _horner(c, t64):
    """A float32 polynomial with fused multiply-adds, as special._horner_f32 (see NOTE)."""
    p = np.float32(c[0])
    for m in range(1, len(c)):
        p = np.float32(np.float64(p) * t64 + c[m])
    return p


@numba.njit(nogil=True, cache=True, inline="always")
def _fma(x, y, c):
    """special.fma_f32 of one value: x * y + c (float32 values) rounded once to float32."""
    prod = x * y
    s = prod + c
    f = np.float32(s)
    f64 = np.float64(f)
    d = s - f64
    if d == 0:
        return f
    g = f64 + 2 * d
    if np.float64(np.float32(g)) != g or g - s != d:  # s is no float32 tie
        return f
    b = s - prod
    err = (prod - (s - b)) + (c - b)
    return np.float32(g) if err != 0 and (err > 0) == (d > 0) else f


@_jit
def _logf_into(x, xbits, out):
    scaled = np.empty(1, np.float32)
    for j in range(x.shape[0]):
        t = x[j]
        if 1.1754944e-38 <= t < np.inf:
            out[j] = _logf(t, xbits[j])
        elif 0 < t < 1.1754944e-38:  # subnormal: scaled by 2^23 first, as glibc does
            scaled[0] = t * np.float32(2.0 ** 23)
            out[j] = _logf(t, scaled.view(np.uint32)[0] - (23 << 23))
        else:
            out[j] = np.log(t) if t == t else t


def logf(x):
    """special.logf_glibc of a float32 NumPy array, compiled."""
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty_like(x)
    flat, dst = x.reshape(-1), out.reshape(-1)
    bits = flat.view(np.uint32)
    in_parts(flat.shape[0], lambda a, b: _logf_into(flat[a:b], bits[a:b], dst[a:b]))
    return out


def _apply(transform, param, w, out, tbuf):
    if transform.element == "unit":
        _unit(w, out, np.float32(param))
    elif transform.element == "erfinv_unit":
        _erfinv_signed_unit(w, out, tbuf)
    else:
        out[:] = w


def _schedule(key):
    return tuple(np.uint64(k) for k in key_schedule(*key))


def span(xp, key, transform, param, out, half, a, b):
    """threefry._span_numpy, compiled."""
    k0, k1, k2 = _schedule(key)
    h = out.shape[0] - half
    m = min(CHUNK, b - a)
    w0, w1 = np.empty(m, np.uint32), np.empty(m, np.uint32)
    tbuf = np.empty(m, np.float32)
    for s in range(a, b, CHUNK):
        e = min(s + CHUNK, b)
        if transform.element == "words":
            _hash_span(k0, k1, k2, h, s, e, out[s:e], out[h + s:h + e])
            continue
        _hash_span(k0, k1, k2, h, s, e, w0, w1)
        _apply(transform, param, w0[: e - s], out[s:e], tbuf[: e - s])
        _apply(transform, param, w1[: e - s], out[h + s:h + e], tbuf[: e - s])


def middle(xp, key, transform, param, out, half):
    """threefry._middle, compiled: the odd word, from the counters (half, 0)."""
    w0, w1 = np.empty(1, np.uint32), np.empty(1, np.uint32)
    _hash_span(*_schedule(key), -half, half, half + 1, w0, w1)
    _apply(transform, param, w0, out[half:half + 1], np.empty(1, np.float32))


def split_pair(key):
    """`split(key)` as ((next key), (subkey)) of ints: random._split_py, compiled."""
    w0, w1 = np.empty(2, np.uint32), np.empty(2, np.uint32)
    _hash_span(*_schedule(key), 2, 0, 2, w0, w1)
    return (int(w0[0]), int(w0[1])), (int(w1[0]), int(w1[1]))
