"""Threefry-2x32 random numbers as one CUDA kernel, bit for bit the CPU's (`ops/threefry.py`).

The layout is MLX's: for a key filling n words, H = ceil(n / 2), pair y < n // 2
hashes the counters (y, y + H) into words y and y + H, and when n is odd one more
pair hashes (n // 2, 0) into the middle word.  A thread hashes PER pairs, a grid's width
apart, in 32-bit index arithmetic unless the draw has 2^31 values or more.  The transforms round exactly as
the CPU's NumPy forms: float32 ops one at a time (compiled with --fmad=false), the
erfinv polynomial's fused multiply-adds as `fmaf` (the CPU rounds them once too,
`special.fma_f32`) and the float64 steps of glibc's logf, so `normal` gives the CPU's
bits.  The keys stay on the device: no host round trip.  The logf tables live in global
memory, not `__constant__`: threads index them differently, which the constant cache
would serialize.
"""
from __future__ import annotations

import math

import cupy as cp
import ml_dtypes
import numpy as np

from ..core.ops import special
from ..core.ops import threefry as tf

WORDS, UNIT, ERFINV_UNIT, NORMAL = 0, 1, 2, 3
MODES = {tf.WORDS: WORDS, tf.UNIT: UNIT, tf.ERFINV_UNIT: ERFINV_UNIT}  # the CPU's transforms
BF16 = np.dtype(ml_dtypes.bfloat16)


def _floats(values):
    return ", ".join(f"{float(np.float32(v)).hex()}" for v in values)


PER = 4  # pairs hashed by a thread (more work a thread: ~2% faster than one)
_SOURCE = r"""
#define PER %(per)s
__device__ double2 LOGT[16] = {%(logt)s};  // glibc's (invc, logc) pairs: one 16-byte load
__device__ __forceinline__ unsigned int rotl(unsigned int x, int r) {
  return __funnelshift_l(x, x, r);
}
__device__ __forceinline__ void threefry(unsigned int k0, unsigned int k1,
                                         unsigned int& x0, unsigned int& x1) {
  const unsigned int ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const int R[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  x0 += ks[0];
  x1 += ks[1];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      x0 += x1;
      x1 = rotl(x1, R[i %% 2][j]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) %% 3];
    x1 += ks[(i + 2) %% 3] + (unsigned int)(i + 1);
  }
}
__device__ float logf_glibc(float x) {
  unsigned int ix = __float_as_uint(x);
  if (ix - 0x00800000u >= 0x7F000000u) return logf(x);
  unsigned int tmp = ix - 0x3F330000u;
  int i = (tmp >> 19) & 15;
  int k = ((int)tmp) >> 23;
  double z = (double)__uint_as_float(ix - (tmp & 0xFF800000u));
  double2 c = LOGT[i];
  double r = z * c.x - 1.0;
  double r2 = r * r;
  double y = %(a0)s * r2 + (%(a1)s * r + %(a2)s);
  y = y * r2 + ((c.y + (double)k * %(ln2)s) + r);
  return (float)y;
}
__device__ __forceinline__ float horner(const float* c, int m, float t) {
  float p = c[0];
#pragma unroll
  for (int j = 1; j < m; ++j) p = fmaf(p, t, c[j]);
  return p;
}
__device__ float erfinv_f32(float a) {
  const float tail[9] = {%(tail)s};
  const float core[10] = {%(core)s};
  float t = logf_glibc(fmaf(a, -a, 1.0f));
  float p;
  if (__builtin_expect(fabsf(t) > 6.125f, 0)) p = horner(tail, 9, t);  // a branch, not both
  else p = horner(core, 10, t);
  return a * p;
}
template <int MODE, typename T>
__device__ __forceinline__ T transform(unsigned int w, float upper) {
  if (MODE == 0) return (T)w;
  float u = (float)w * 0x1p-32f;
  u = fminf(u, MODE == 1 ? upper : %(below_one)s);
  if (MODE == 1) return (T)u;
  u = u * 2.0f;
  u = u + %(normal_low)s;
  float e = erfinv_f32(u);
  if (MODE == 2) return (T)e;
  return (T)(e * %(sqrt2)s);
}
// I: the index type, 32 bits wherever the threads' numbers fit (64-bit index arithmetic
// cost a sixth of `normal`'s time); each thread hashes PER pairs, a grid's stride apart.
template <int MODE, typename T, typename I>
__device__ void fill(const unsigned int* keys, T* out, I n, I nkeys, float upper) {
  I half = n / 2, h = n - half, total = h * nkeys;
  I t0 = (I)blockIdx.x * blockDim.x + threadIdx.x, stride = (I)gridDim.x * blockDim.x;
  unsigned int k0 = keys[0], k1 = keys[1];
  T* o = out;
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    I t = t0 + p * stride;
    if (t >= total) return;
    I y = t;
    if (nkeys > 1) {
      I kid = t / h;
      y = t - kid * h;
      k0 = keys[2 * kid];
      k1 = keys[2 * kid + 1];
      o = out + kid * n;
    }
    unsigned int x0, x1;
    if (y < half) {
      x0 = (unsigned int)y;
      x1 = (unsigned int)(y + h);
      threefry(k0, k1, x0, x1);
      o[y] = transform<MODE, T>(x0, upper);
      o[y + h] = transform<MODE, T>(x1, upper);
    } else {
      x0 = (unsigned int)half;
      x1 = 0u;
      threefry(k0, k1, x0, x1);
      o[half] = transform<MODE, T>(x0, upper);
    }
  }
}
#define FILL(name, MODE, T)                                                            \
  extern "C" __global__ void name(const unsigned int* k, T* o, long long n, long long nk,  \
                                  float up) {                                            \
    fill<MODE, T, unsigned long long>(k, o, n, nk, up);                                  \
  }                                                                                      \
  extern "C" __global__ void name##32(const unsigned int* k, T* o, unsigned int n,         \
                                      unsigned int nk, float up) {                       \
    fill<MODE, T, unsigned int>(k, o, n, nk, up);                                        \
  }
FILL(words, 0, unsigned int)
FILL(unit, 1, float)
FILL(erfinv_unit, 2, float)
FILL(normal, 3, float)
extern "C" __global__ void erfinv_each(const float* a, float* o, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = erfinv_f32(a[i]);
}
"""


def _source():
    below_one = np.nextafter(np.float32(1), np.float32(0))
    normal_low = np.nextafter(np.float32(-1), np.float32(0))
    a0, a1, a2 = special._LOGF_POLY
    return _SOURCE % {
        "logt": ", ".join(f"{{{float(a).hex()}, {float(b).hex()}}}"
                          for a, b in zip(special._LOGF_INVC, special._LOGF_LOGC)),
        "per": PER,
        "a0": float(a0).hex(), "a1": float(a1).hex(), "a2": float(a2).hex(),
        "ln2": float(special._LOGF_LN2).hex(),
        "tail": _floats(special._ERFINV_TAIL), "core": _floats(special._ERFINV_CORE),
        "below_one": f"{float(below_one).hex()}f",
        "normal_low": f"{float(normal_low).hex()}f",
        "sqrt2": f"{float(np.float32(math.sqrt(2.0))).hex()}f"}


_module = {}
_NAMES = {WORDS: "words", UNIT: "unit", ERFINV_UNIT: "erfinv_unit", NORMAL: "normal"}


def _kernel(name):
    dev = cp.cuda.runtime.getDevice()
    mod = _module.get(dev)
    if mod is None:
        mod = _module[dev] = cp.RawModule(code=_source(), options=("--std=c++17",
                                                                    "--fmad=false"))
    return mod.get_function(name)


def fill(keys, n, mode, upper=None):
    """(number of keys, n) values from each key's words, on the current stream."""
    upper = 1.0 if upper is None else upper
    keys = cp.ascontiguousarray(keys.reshape(-1, 2).astype(cp.uint32, copy=False))
    nk = keys.shape[0]
    out = cp.empty((nk, n), cp.uint32 if mode == WORDS else cp.float32)
    threads = -(-(n - n // 2) * nk // PER)
    if threads:
        block = 256
        small = n * nk < 1 << 31  # every index (and a grid's stride past the last) in 32 bits
        size = np.uint32 if small else np.uint64
        _kernel(_NAMES[mode] + ("32" if small else ""))(
            (-(-threads // block),), (block,), (keys, out, size(n), size(nk), np.float32(upper)))
    return out


# -- the primitives' GPU kernels (their `gpu` column) -------------------------------------------
def bits(xp, keys, nbytes, npdtype, shape):
    n = (nbytes + 3) // 4
    raw = fill(keys, n, WORDS).view(cp.uint8)[:, :nbytes].reshape(-1)
    return raw.view(npdtype).reshape(keys.shape[:-1] + tuple(shape))


def erfinv(xp, a, dtype=None):
    """The elementwise erfinv, one kernel giving the CPU's bits (`special.erfinv_f32`);
    `dtype` as the CPU kernel's (half inputs compute in float32 and round once)."""
    out_dtype = a.dtype if dtype is None else np.dtype(dtype)
    x = cp.ascontiguousarray(a, dtype=cp.float32)
    out = cp.empty(x.shape, cp.float32)
    if x.size:
        block = 256
        _kernel("erfinv_each")(((x.size + block - 1) // block,), (block,),
                          (x, out, np.int64(x.size)))
    return out.astype(out_dtype, copy=False)


def _round_bf16(x):
    """float32 values rounded to bfloat16 (as the CPU rounds each bfloat16 step)."""
    from .cuda import _from_bf16, _to_bf16
    return _from_bf16(_to_bf16(x))


# These see the node's own dtype parameter, bfloat16 included (GpuKernel's "own"), and give
# float32 the caller rounds to bfloat16 once more, which keeps the CPU's bits.
def normal(xp, k, npdtype, shape, mode):
    """Modes as the CPU kernel's: "standard" (times sqrt(2)), "unscaled", "complex"."""
    n = math.prod(shape)
    if mode == "complex":
        return fill(k, 2 * n, ERFINV_UNIT).view(cp.complex64).reshape(shape)
    npdtype = np.dtype(npdtype)
    if npdtype == np.float32:
        return fill(k, n, NORMAL if mode == "standard" else ERFINV_UNIT).reshape(shape)
    e = fill(k, n, ERFINV_UNIT)
    if npdtype == BF16:
        e = _round_bf16(e)
        if mode == "standard":
            e *= np.float32(BF16.type(math.sqrt(2.0)))
        return e.reshape(shape)
    e = e.astype(npdtype)
    if mode == "standard":
        cp.multiply(e, npdtype.type(math.sqrt(2.0)), out=e)
    return e.reshape(shape)


def gumbel(xp, k, upper, npdtype, shape):
    """bfloat16 Gumbel samples rounded at each step as the CPU's; other dtypes are the
    generic kernel's."""
    if np.dtype(npdtype) != BF16:
        from ..core.random import _gumbel_kernel
        return _gumbel_kernel(xp, k, upper, npdtype, shape)
    u = _round_bf16(fill(k, math.prod(shape), UNIT, upper))
    inner = _round_bf16(special.logf_glibc(cp, u))
    return -_round_bf16(special.logf_glibc(cp, -inner)).reshape(shape)

