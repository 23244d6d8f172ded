"""erf and erfinv written against an array module (NumPy has neither)."""
from __future__ import annotations

import math

import numpy as np

# erfinv: the single-precision approximation MLX uses on its CPU (published by N. Juffa,
# "inverse error function in C", Stack Overflow answer 49743348), so that our normal
# samples match MLX's.  Coefficients are listed from the highest power down.
_ERFINV_TAIL = (3.03697567e-10, 2.93243101e-8, 1.22150334e-6, 2.84108955e-5, 3.93552968e-4,
                3.02698812e-3, 4.83185798e-3, -2.64646143e-1, 8.40016484e-1)
_ERFINV_CORE = (5.43877832e-9, 1.43285448e-7, 1.22774793e-6, 1.12963626e-7, -5.61530760e-5,
                -1.47697632e-4, 2.31468678e-3, 1.15392581e-2, -2.32015476e-1, 8.86226892e-1)


def fma_f32(xp, x, y, c):
    """x * y + c rounded to float32 once, as a fused multiply-add: float64 arrays (or
    scalars) holding float32 values.

    The product is exact in float64, so the float64 sum s is the double nearest the exact
    sum, and rounding s to float32 rounds the exact sum correctly, except where s lies
    exactly halfway between two float32 values and the exact sum does not (a double
    rounding): there the sum's rounding error, exact by Knuth's TwoSum, picks the side.
    """
    prod = x * y
    s = prod + c
    f = s.astype(np.float32)
    if xp is not np:  # no host read of a device's flags: every lane takes the exact path
        return _tie_side(xp, prod, c, s, f)
    s, f = np.asarray(s), np.asarray(f)
    # a float32 tie among normal values has float64 bits ...1000...0 (29 low bits); the
    # subnormal range is left to the exact test
    tie = ((s.view(np.uint64) & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)) | \
        (np.abs(s) < 2.0 ** -125)
    if tie.any():
        prod, c = np.broadcast_to(prod, s.shape), np.broadcast_to(c, s.shape)
        f[tie] = _tie_side(np, prod[tie], c[tie], s[tie], f[tie])
    return f


def _tie_side(xp, prod, c, s, f):
    """fma_f32's result from prod = x * y (exact), the sum s and its float32 rounding f."""
    f64 = f.astype(np.float64)
    d = s - f64  # exact: s is within half a float32 ulp of f
    g = f64 + 2 * d  # s's other float32 neighbour, when s is a tie
    tie = (d != 0) & (g.astype(np.float32).astype(np.float64) == g) & (g - s == d)
    b = s - prod
    err = (prod - (s - b)) + (c - b)  # the exact sum is s + err
    return xp.where(tie & (err != 0) & ((err > 0) == (d > 0)), g.astype(np.float32), f)


def _horner_f32(xp, coeffs, t):
    """Evaluate a polynomial in float32 as MLX does, with fused multiply-adds."""
    t64 = t.astype(np.float64)
    p = xp.full(t.shape, coeffs[0], dtype=np.float32)
    for c in coeffs[1:]:
        p = fma_f32(xp, p.astype(np.float64), t64, np.float64(np.float32(c)))
    return p


# logf as glibc computes it (MLX's CPU erfinv calls std::log; NumPy's float32 log, a SIMD
# approximation, differs from it by an ulp on ~20% of inputs).  glibc's algorithm (from Arm's
# optimized-routines): split x = 2^k z, look 1/c and log(c) up in a 16-entry table indexed by
# the top mantissa bits, and evaluate log(z/c) with a cubic in double precision.  The table
# and polynomial are glibc's data (e_logf_data.c), needed to reproduce its roundings.
_LOGF_INVC = tuple(float.fromhex(v) for v in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0",
    "0x1.3c995b0b80385p+0", "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0",
    "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0", "0x1.0953f419900a7p+0", "0x1p+0",
    "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1", "0x1.b2036576afce6p-1",
    "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1", "0x1.767dcf5534862p-1"))
_LOGF_LOGC = tuple(float.fromhex(v) for v in (
    "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2",
    "-0x1.b31d8a68224e9p-3", "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c81p-3",
    "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4", "-0x1.252f438e10c1ep-5", "0x0p+0",
    "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4", "0x1.526e57720db08p-3",
    "0x1.bc2860d22477p-3", "0x1.1058bc8a07ee1p-2", "0x1.4043057b6ee09p-2"))
_LOGF_LN2 = float.fromhex("0x1.62e42fefa39efp-1")
_LOGF_POLY = tuple(float.fromhex(v) for v in (
    "-0x1.00ea348b88334p-2", "0x1.5575b0be00b6ap-2", "-0x1.ffffef20a4123p-2"))


def logf_glibc(xp, x):
    """Natural log of a float32 array, rounded exactly as glibc's logf.

    Checked equal to MLX's CPU `log` on every 7th float32 in [2^-126, 1]; subnormals are
    scaled by 2^23 first as glibc does; zeros, negatives, infinities and NaNs take NumPy's
    log, which agrees there.
    """
    x = x.astype(np.float32, copy=False)
    ix = x.view(np.uint32)
    normal = (ix - np.uint32(0x00800000)) < np.uint32(0x7F000000)
    if xp is not np or not normal.all():  # a device's flags read here would wait for it
        sub = (ix > 0) & (ix < np.uint32(0x00800000))
        ok = normal | sub
        with np.errstate(all="ignore"):  # log(0) = -inf, log(-1) = nan; big lanes unused
            scaled = (x * np.float32(2.0 ** 23)).view(np.uint32) - np.uint32(23 << 23)
            special = xp.log(x)
        bits = xp.where(sub, scaled, xp.where(ok, ix, np.uint32(0x3F800000)))
        return xp.where(ok, _logf_bits(xp, bits), special)
    return _logf_bits(xp, ix)


def _logf_bits(xp, ix):
    """glibc's logf of the float32 values with bits `ix` (positive, normal)."""
    tmp = ix - np.uint32(0x3F330000)
    i = (tmp >> np.uint32(19)) & np.uint32(15)
    k = tmp.view(np.int32) >> np.int32(23)
    z = (ix - (tmp & np.uint32(0xFF800000))).view(np.float32).astype(np.float64)
    r = z * xp.asarray(_LOGF_INVC)[i] - 1.0
    r2 = r * r
    a0, a1, a2 = _LOGF_POLY
    y = a0 * r2 + (a1 * r + a2)
    y = y * r2 + ((xp.asarray(_LOGF_LOGC)[i] + k * _LOGF_LN2) + r)
    return y.astype(np.float32)


def erfinv_f32(xp, a):
    """Inverse error function of a float32 array, as MLX's CPU computes it (bit for bit)."""
    a = a.astype(np.float32, copy=False)
    a64 = a.astype(np.float64)
    t = logf_glibc(xp, fma_f32(xp, a64, -a64, 1.0))  # MLX's fma(a, -a, 1)
    tail = xp.abs(t) > np.float32(6.125)
    if xp is not np or tail.any():  # a device's flags read here would wait for it
        p = xp.where(tail, _horner_f32(xp, _ERFINV_TAIL, t), _horner_f32(xp, _ERFINV_CORE, t))
    else:
        p = _horner_f32(xp, _ERFINV_CORE, t)
    return a * p


def erfinv_kernel(xp, a, dtype=None):
    """erfinv in float32 (float64 inputs: rounded back up); `dtype` defaults to the input's."""
    dtype = a.dtype if dtype is None else dtype
    out = erfinv_f32(xp, a)
    return out.astype(np.float64) if dtype == np.float64 else out.astype(dtype, copy=False)


def _erf_series(xp, x):
    # erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)), good for |x| < 2.5
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for n in range(1, 60):
        term = term * (-x2 / n)
        total = total + term / (2 * n + 1)
    return total * (2.0 / math.sqrt(math.pi))


def _erfc_fraction(xp, x):
    # erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))), for x >= 2.5
    f = x.copy()
    for k in range(60, 0, -1):
        f = x + (k / 2.0) / f
    return xp.exp(-x * x) / (math.sqrt(math.pi) * f)


def erf_kernel(xp, a, dtype=None):
    """erf computed in float64 and rounded to `dtype` (by default the input's)."""
    dtype = a.dtype if dtype is None else dtype
    x = a.astype(np.float64)
    ax = xp.abs(x)
    small = ax < 2.5
    inner = _erf_series(xp, xp.where(small, x, 0.0))
    outer = 1.0 - _erfc_fraction(xp, xp.where(small, 2.5, ax))
    out = xp.where(small, inner, xp.copysign(outer, x))
    return xp.where(x == 0, x, out).astype(dtype)  # erf(-0) is -0


# MLX's CPU erf and exp (mlx/backend/cpu/simd/math.h): fast float32 approximations (erf
# from Abramowitz-Stegun 7.1.26, exp a degree-6 polynomial of the fraction of x/ln 2),
# reproduced bit for bit so that ops MLX builds on them (truncated_normal) match.
_EXP_POLY = (1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3,
             5.550332471162809e-2, 2.402264791363012e-1, 6.931472028550421e-1, 1.0)
_ERF_POLY = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def exp_f32_mlx(xp, x):
    """exp of a float32 array as MLX's CPU computes it."""
    y = x * np.float32(1.442695)
    ipart = xp.floor(y + np.float32(0.5))
    with np.errstate(invalid="ignore"):  # inf - inf: replaced below
        p = _horner_f32(xp, _EXP_POLY, y - ipart)
    big = xp.clip(xp.nan_to_num(ipart), -127, 128).astype(np.int32)
    scale = ((big + 127) << 23).astype(np.uint32).view(np.float32)
    out = xp.where(xp.isnan(x), x, scale * p)
    out = xp.where(x > np.float32(88), np.float32(np.inf), out)
    return xp.where(x < np.float32(-88), np.float32(0), out)


def erf_f32_mlx(xp, x):
    """erf of a float32 array as MLX's CPU computes it (max error about 1.5e-7)."""
    x = x.astype(np.float32, copy=False)
    d = xp.abs(x).astype(np.float64) * np.float64(np.float32(0.3275911)) + 1.0
    t = np.float32(1) / d.astype(np.float32)
    r = _horner_f32(xp, _ERF_POLY, t)
    e = -exp_f32_mlx(xp, -x * x)
    out = ((e * t).astype(np.float64) * r + 1.0).astype(np.float32)
    return xp.where(x > 0, out, -out)


# log1pf as glibc 2.36 computes it (MLX's CPU log1p calls std::log1p): the fdlibm
# single-precision algorithm (reduce 1 + x to 2^k u with u in [sqrt(2)/2, sqrt(2)), keep the
# rounding error of 1 + x as a correction c, then a degree-7 series in s = f / (2 + f)), all
# in float32 arithmetic.  Constants are fdlibm's.
_LOG1P_SERIES = (6.6666668653e-01, 4.0000000596e-01, 2.8571429849e-01, 2.2222198546e-01,
                 1.8183572590e-01, 1.5313838422e-01, 1.4798198640e-01)
_LN2_HI, _LN2_LO = np.float32(6.9313812256e-01), np.float32(9.0580006145e-06)


def log1pf_glibc(xp, x):
    """log(1 + x) of a float32 array, rounded exactly as glibc's log1pf.

    Checked equal to MLX's CPU `log1p` on every 101st float32 in [-1, 0] and every 1001st
    in [0, inf).
    """
    f32 = np.float32
    x = x.astype(f32, copy=False)
    hx = x.view(np.int32)
    ax = hx & np.int32(0x7FFFFFFF)
    with np.errstate(all="ignore"):  # the lanes that overflow or divide by 0 are replaced
        u = f32(1) + x
        hu = u.view(np.int32)
        k = (hu >> 23) - 127
        c = xp.where(k > 0, f32(1) - (u - x), x - (u - f32(1))) / u
        hu = hu & np.int32(0x7FFFFF)
        low = hu < 0x3504F4
        f = xp.where(low, hu | 0x3F800000, hu | 0x3F000000).astype(np.int32).view(f32) - f32(1)
        k = xp.where(low, k, k + 1)
        hu = xp.where(low, hu, (0x00800000 - hu) >> 2)
        near = (hx < 0x3ED413D0) & ((hx > 0) | (hx <= np.int32(-1097468391)))  # 0xbe95f619
        k, f = xp.where(near, 0, k), xp.where(near, x, f)
        hu, c = xp.where(near, 1, hu), xp.where(near, f32(0), c)
        dk = k.astype(f32)
        hfsq = f32(0.5) * f * f
        s = f / (f32(2) + f)
        z = s * s
        r = xp.full(z.shape, f32(_LOG1P_SERIES[-1]))
        for lp in _LOG1P_SERIES[-2::-1]:
            r = f32(lp) + z * r
        r = z * r
        out = xp.where(k == 0, f - (hfsq - s * (hfsq + r)),
                       dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + (dk * _LN2_LO + c))) - f))
        r0 = hfsq * (f32(1) - f32(0.66666666666666666) * f)  # |f| < 2^-20
        flat = xp.where(f == 0, xp.where(k == 0, f32(0), dk * _LN2_HI + (c + dk * _LN2_LO)),
                        xp.where(k == 0, f - r0, dk * _LN2_HI - ((r0 - (dk * _LN2_LO + c)) - f)))
        out = xp.where(hu == 0, flat, out)
        out = xp.where(ax < 0x33800000, x, out)  # |x| < 2^-24
        bad = xp.where(x == -1, f32(-np.inf), f32(np.nan))
        out = xp.where((hx < 0) & (ax >= 0x3F800000), bad, out)
        return xp.where(hx >= 0x7F800000, x + x, out)
