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


def _horner_f32(xp, coeffs, t):
    """Evaluate a polynomial in float32 as MLX does with fused multiply-adds.

    A float32 product is exact in float64, so one float64 multiply-add rounded to
    float32 reproduces the fused operation (up to a rare double rounding).
    """
    t64 = t.astype(np.float64)
    p = xp.full(t.shape, coeffs[0], dtype=np.float32)
    for c in coeffs[1:]:
        p = (p.astype(np.float64) * t64 + np.float64(np.float32(c))).astype(np.float32)
    return p


def erfinv_f32(xp, a):
    """Inverse error function of a float32 array, as MLX's CPU computes it."""
    a = a.astype(np.float32, copy=False)
    a64 = a.astype(np.float64)
    t = xp.log((1.0 - a64 * a64).astype(np.float32))
    tail = xp.abs(t) > np.float32(6.125)
    if bool(tail.any()):
        p = xp.where(tail, _horner_f32(xp, _ERFINV_TAIL, t), _horner_f32(xp, _ERFINV_CORE, t))
    else:
        p = _horner_f32(xp, _ERFINV_CORE, t)
    return a * p


def erfinv_kernel(xp, a, dtype):
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


def erf_kernel(xp, a, dtype):
    """erf computed in float64 and rounded to the input's dtype."""
    x = a.astype(np.float64)
    ax = xp.abs(x)
    small = ax < 2.5
    inner = _erf_series(xp, xp.where(small, x, 0.0))
    outer = 1.0 - _erfc_fraction(xp, xp.where(small, 2.5, ax))
    out = xp.where(small, inner, xp.copysign(outer, x))
    return out.astype(dtype)
