"""Compiled affine quantization kernels (numba) for the CPU.

NumPy's version of affine quantization and of a product with few rows re-reads the
weight matrix a dozen times (unpack, cast, scale, shift, multiply); one compiled loop
reads the packed words once.  `quantize` gives the NumPy path's bits exactly (the same
float32 operations in the same order); `matmul` sums each group's products with x and
applies its scale and bias once, `s * sum(x q) + b * sum(x)`, in float32 (sums
reassociated for SIMD, as MLX's own kernel does).
"""
from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(nogil=True, cache=True)
_F = np.float32


@_jit
def quantize(w, group_size, bits, packed, scales, biases):
    """Rows of float32 `w` into `packed` words and float32 `scales` and `biases`."""
    n_bins = _F((1 << bits) - 1)
    eps = _F(1e-7)
    rows, k = w.shape
    for r in range(rows):
        for g in range(k // group_size):
            lo = np.inf
            hi = -np.inf
            for j in range(g * group_size, (g + 1) * group_size):
                v = w[r, j]
                if v == v:  # NaNs are skipped, as MLX's std::min and std::max do
                    lo = min(lo, v)
                    hi = max(hi, v)
            lo, hi = _F(lo), _F(hi)
            scale = max(_F(_F(hi - lo) / n_bins), eps)
            lower = abs(lo) > abs(hi)
            if not lower:
                scale = -scale
            edge = lo if lower else hi
            q0 = _F(np.rint(_F(edge / scale)))
            bias = _F(0)
            if q0 != 0:
                scale = _F(edge / q0)
                bias = edge
            scales[r, g] = scale
            biases[r, g] = bias
            for j in range(g * group_size, (g + 1) * group_size):
                q = _F(np.rint(_F(_F(w[r, j] - bias) / scale)))
                q = min(max(q, _F(0)), n_bins)
                if q != q:
                    q = _F(0)
                at = j * bits
                word, shift = at >> 5, at & 31
                v = np.uint64(np.uint32(q)) << np.uint64(shift)
                packed[r, word] |= np.uint32(v & np.uint64(0xFFFFFFFF))
                if shift + bits > 32:
                    packed[r, word + 1] |= np.uint32(v >> np.uint64(32))


@numba.njit(nogil=True, cache=True, fastmath=True)
def _matmul_packs(xd, wb, pack_bytes, bits, scales, biases, sums, out):
    """`matmul` over packs (whole bytes holding `per` values each): xd[m, p, t] is value p
    of pack t's x, so every pass over a row's packs is a contiguous, vectorized run."""
    m_rows, per, n_packs = xd.shape
    n_cols, groups = scales.shape
    ppg = n_packs // groups
    mask = np.uint64((1 << bits) - 1)
    words = np.empty(n_packs, np.uint64)
    y = np.empty(n_packs, np.float32)
    for n in range(n_cols):
        row = wb[n]
        for t in range(n_packs):
            word = np.uint64(0)
            for i in range(pack_bytes):
                word |= np.uint64(row[t * pack_bytes + i]) << np.uint64(8 * i)
            words[t] = word
        for m in range(m_rows):
            y[:] = 0
            for p in range(per):
                sh = np.uint64(p * bits)
                for t in range(n_packs):
                    y[t] += xd[m, p, t] * _F((words[t] >> sh) & mask)
            total = _F(0)
            for g in range(groups):
                acc = _F(0)
                for t in range(g * ppg, (g + 1) * ppg):
                    acc += y[t]
                total += scales[n, g] * acc + biases[n, g] * sums[m, g]
            out[m, n] = total


def matmul(x, w, scales, biases, group_size, bits):
    """x (M, K) float32 times the transposed affine-quantized rows of w: (M, N) float32,
    each group's products with x summed first, then `scale * sum + bias * sum(x)`."""
    m, k = x.shape
    x = np.ascontiguousarray(x, np.float32)
    sums = x.reshape(m, -1, group_size).sum(-1, dtype=np.float32)
    out = np.empty((m, w.shape[0]), np.float32)
    scales, biases = (np.ascontiguousarray(v, np.float32) for v in (scales, biases))
    if 32 % bits == 0:
        per, nbytes = 32 // bits, 4
    else:
        g = np.gcd(bits, 8)
        per, nbytes = 8 // g, bits // g
    xd = np.ascontiguousarray(x.reshape(m, -1, per).transpose(0, 2, 1))
    wb = np.ascontiguousarray(w).view(np.uint8)
    _matmul_packs(xd, wb, nbytes, bits, scales, biases, sums, out)
    return out
