"""`mx.fast.rms_norm`, `mx.fast.rope`, attention and the normalizations' cotangent
(`norm_dx`) on the GPU: one generated kernel each.

Written as array code (`core.fast`), each is a dozen or more CuPy launches, and two more
per bfloat16 input and output; a Llama block calls each twice per token.  Here each is
one launch computing what the array code does, step for step: the same float32
operations, and the same roundings to bfloat16 after each step the array code rounds
(a bfloat16 product is rounded before it is summed, as the CPU's kernel does), so the
results are the array code's up to the order of the sum of squares and CUDA's cosf and
sinf.  Inputs of other dtypes (float16) go to the array code.
"""
from __future__ import annotations

import functools
import math
import struct

import cupy as cp
import numpy as np

from ..core import fast
from .cuda import BF16, BF16_BITS, BF16_NP, Lazy, _bf16_inputs, _to_bf16, computed, value
from .cuda_constants import constant
from .cuda_gemm import matmul
from . import cuda_fuse as fuse
from .cuda_fuse import CTYPE

_F32 = np.dtype(np.float32)
_BLOCK = 256

_COMMON = r"""
__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const unsigned short* p, long long i) {
  return __uint_as_float(((unsigned int)p[i]) << 16);
}
__device__ __forceinline__ float rnd(float f, const float*) { return f; }
__device__ __forceinline__ float rnd(float f, const unsigned short*) {
  return __uint_as_float(((unsigned int)bf16_bits(f)) << 16);
}
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(unsigned short* p, long long i, float v) {
  p[i] = bf16_bits(v);
}
#define NEG_INF __int_as_float(0xff800000)
__device__ __forceinline__ float block_reduce(float v, float* red, bool is_max) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, u) : v + u;
  }
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nw ? red[lane] : (is_max ? NEG_INF : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
      const float u = __shfl_xor_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, u) : v + u;
    }
    if (lane == 0) red[32] = v;
  }
  __syncthreads();
  return red[32];
}
"""

# `y` not null: the input is x + y (rounded to TX, as the fused add rounds), also stored
# to `sum` (a residual connection and the norm after it in one launch)
_RMS = r"""
extern "C" __global__ void k(const TX* x, const TX* y, TX* sum, const TW* w, TO* out,
                             long long d, float eps, int has_w) {
  const long long row = (long long)blockIdx.x * d;
  const TX* xr = x + row;
  TO* orow = out + row;
  float s = 0.0f;
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    float v = ld(xr, j);
    if (y) { v = rnd(v + ld(y + row, j), xr); st(sum + row, j, v); }
    s += v * v;
  }
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) part[0] = s;
  }
  __syncthreads();
  const float n = 1.0f / sqrtf(part[0] / (float)d + eps);
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    float v = rnd(ld(y ? (const TX*)sum + row : xr, j) * n, (const TO*)0);
    if (has_w) v = v * ld(w, j);
    st(orow, j, v);
  }
}
"""

# the cotangent for x of rms_norm (layer_norm: `centered`), core.fast._norm_dx's steps: a
# block per row, g = c * w rounded to TX, the row's sums in float32
_NORM_DX = r"""
extern "C" __global__ void k(const TX* x, const TX* c, const TX* w, TX* out, long long d,
                             float eps, int flags) {  // 1: a weight, 2: centered
  const bool has_w = flags & 1, centered = flags & 2;
  __shared__ float red[33];
  const long long row = (long long)blockIdx.x * d;
  const TX *xr = x + row, *cr = c + row;
  const TX* q = (const TX*)0;
  const float n_d = (float)d;
  float mu = 0.0f, s = 0.0f;
  if (centered) {
    for (long long j = threadIdx.x; j < d; j += blockDim.x) s += ld(xr, j);
    mu = block_reduce(s, red, false) / n_d;
    s = 0.0f;
  }
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = ld(xr, j) - mu;
    s += v * v;
  }
  const float n = 1.0f / sqrtf(block_reduce(s, red, false) / n_d + eps);
  float gy = 0.0f, gs = 0.0f;
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    const float g = has_w ? rnd(ld(cr, j) * ld(w, j), q) : ld(cr, j);
    gy += g * ((ld(xr, j) - mu) * n);
    gs += g;
  }
  const float m1 = block_reduce(gy, red, false) / n_d;
  const float m2 = centered ? block_reduce(gs, red, false) / n_d : 0.0f;
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    const float g = has_w ? rnd(ld(cr, j) * ld(w, j), q) : ld(cr, j);
    float dx = g - ((ld(xr, j) - mu) * n) * m1;
    if (centered) dx = dx - m2;
    st(out + row, j, n * dx);
  }
}
"""

_ROPE = r"""
extern "C" __global__ void k(const TX* x, const OT* offset, const float* inv, TX* out,
                             long long n, long long H, long long T, long long D,
                             long long s0, long long s1, long long s2, long long s3,
                             long long dims, long long first_offset, int per_batch,
                             int traditional, int forward, float scale) {
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  long long j = e % D, r = e / D, t = r % T, bh = r / T, h = bh % H, b = bh / H;
  const TX* xr = x + b * s0 + h * s1 + t * s2;
  if (j >= dims) { out[e] = xr[j * s3]; return; }
  const int half = (int)(dims / 2);
  int i, first;
  if (traditional) { i = (int)(j / 2); first = (j % 2) == 0; }
  else { first = j < half; i = first ? (int)j : (int)j - half; }
  const long long f1 = traditional ? 2 * i : i, f2 = traditional ? 2 * i + 1 : i + half;
  const float x1 = ld(xr, f1 * s3), x2 = ld(xr, f2 * s3);
  float pos = (float)t + (offset ? (float)offset[per_batch ? b : 0] : (float)first_offset);
  pos = pos * scale;
  const float theta = pos * inv[i];
  const TX* q = (const TX*)0;
  const float c = rnd(cosf(theta), q), s = rnd(sinf(theta), q);
  float o;
  if (forward) o = first ? rnd(x1 * c, q) - rnd(x2 * s, q) : rnd(x1 * s, q) + rnd(x2 * c, q);
  else o = first ? rnd(x2 * s, q) + rnd(x1 * c, q) : rnd(x2 * c, q) - rnd(x1 * s, q);
  st(out, e, o);
}
"""

_C = {_F32: "float", BF16_NP: "unsigned short"}
# the kernels' parameters as CUDA lays them out, each list a multiple of 8 bytes long (no
# tail padding to disagree about)
_RMS_ARGS = struct.Struct("@PPPPPqfi")
_ROPE_ARGS = struct.Struct("@PPPP10q3if")
_NORM_DX_ARGS = struct.Struct("@PPPPqfi")
_ATTEND_ARGS = struct.Struct("@5P6i16qfiif")
_SOFTMAX_ROWS_ARGS = struct.Struct("@2P3i4qfiif")
_SOFTMAX_ROWS_VJP_ARGS = struct.Struct("@4P3i4qfiif")


def launch_source(source, types, args, grid, values, shared=0):
    """Launch `source`'s kernel "k" (its `types` defined as macros; compiled once per
    device) on the current stream, its parameters packed by the struct `args` from
    `values` (pointers as integers): CuPy's own kernel call cost tens of µs of host time
    for a kernel of a dozen parameters, which a decode step pays twenty times."""
    fptr = fuse.kernel_for(("fast", source, types), cp.cuda.runtime.getDevice(),
                           lambda: "".join(f"#define {k} {v}\n" for k, v in types) +
                           BF16_BITS + _COMMON + source)
    fuse.launch_packed(fptr, args, values, grid, _BLOCK, cp.cuda.get_current_stream().ptr,
                       shared)


def _dtype(a):
    return BF16_NP if type(a) is BF16 else a.dtype


def _data(a):
    return a.bits if type(a) is BF16 else a


def _array_code(kernel, args, params, out_dtype):
    """The op as `core.fast` writes it, in float32 for bfloat16 operands."""
    args, work = _bf16_inputs(list(args), params)
    return _rounded(kernel(cp, *args, **work), out_dtype)


def rms_norm(xp, x, *rest, eps, has, dtype):
    """The GPU kernel of `fast.rms_norm` (GpuKernel mode "native"); `x` may be a fused add
    not launched yet (`lazy_first`), computed in the same launch."""
    w = rest[0] if has[0] else None
    types = [_dtype(x), dtype] + ([_dtype(w)] if w is not None else [])
    shape = x.shape if type(x) is Lazy else _data(x).shape
    if any(t not in _C for t in types) or not shape or shape[-1] == 0 or \
            (w is not None and _data(w).shape != shape[-1:]):  # vmap's batched weights
        x = value(x) if type(x) is Lazy else x
        return _array_code(fast._RMS.kernel, (x, *rest),
                           {"eps": eps, "has": has, "dtype": dtype}, dtype)
    if type(x) is Lazy:
        with x.handle.lock:  # a reader on another thread may compute it meanwhile
            pair = _sum_operands(x)
            if pair is not None:
                return _rms(*pair, w, eps, dtype, x)
        x = value(x)
    return _rms(cp.ascontiguousarray(_data(x)), None, w, eps, dtype, None)


def _sum_operands(lz):
    """The two arrays (bits for bfloat16) of which Lazy `lz` is the sum, not computed yet,
    when they are C-ordered of its shape and dtype; else None."""
    if lz.value is not None or lz.error is not None or lz.spec[1] != "add" or \
            lz.spec[2] != "float":
        return None
    kind = BF16 if lz.dtype == BF16_NP else cp.ndarray
    pair = []
    for v in lz.args:
        if type(v) is Lazy:  # one computed since (the last block's residual sum)
            v = v.value
        if type(v) is not kind:
            return None
        v = _data(v)
        if v.shape != lz.shape or not v.flags.c_contiguous or \
                (kind is cp.ndarray and v.dtype != _F32):
            return None
        pair.append(v)
    return pair


def _rms(xd, yd, w, eps, dtype, lz):
    """Launch the kernel on the C-ordered `xd` (plus `yd`: Lazy `lz` = xd + yd, computed)."""
    d = xd.shape[-1]
    out = cp.empty(xd.shape, np.uint16 if dtype == BF16_NP else _F32)
    total = cp.empty_like(xd) if yd is not None else None
    rows = xd.size // d
    if rows:
        wd = cp.ascontiguousarray(_data(w)) if w is not None else xd
        tx = BF16_NP if xd.dtype == np.uint16 else _F32
        types = (("TX", _C[tx]), ("TW", _C[_dtype(w) if w is not None else _F32]),
                 ("TO", _C[dtype]))
        launch_source(_RMS, types, _RMS_ARGS, rows,
                      (xd.data.ptr, 0 if yd is None else yd.data.ptr,
                       0 if yd is None else total.data.ptr, wd.data.ptr, out.data.ptr, d,
                       eps, w is not None))
    if lz is not None:
        computed(lz, total, lz.handle.epoch)
    return out


def norm_dx(xp, x, c, *w, eps, centered):
    """The GPU kernel of `fast.norm_dx` (GpuKernel mode "native"): one launch where x, c
    and the weight are one dtype, float32 or bfloat16, the weight a vector of x's last
    axis; else `fast._norm_dx` on CuPy's arrays."""
    dtype = _dtype(x)
    xd, cd = _data(x), _data(c)
    wd = _data(w[0]) if w else None
    if dtype not in _C or _dtype(c) != dtype or xd.shape != cd.shape or not xd.shape or \
            (w and (_dtype(w[0]) != dtype or wd.shape != xd.shape[-1:])):
        return _array_code(fast._norm_dx, (x, c, *w), {"eps": eps, "centered": centered},
                           dtype)
    xd, cd = cp.ascontiguousarray(xd), cp.ascontiguousarray(cd)
    out = cp.empty_like(xd)
    d = xd.shape[-1]
    if out.size:
        wd = cp.ascontiguousarray(wd) if w else xd
        launch_source(_NORM_DX, (("TX", _C[dtype]),), _NORM_DX_ARGS, out.size // d,
                      (xd.data.ptr, cd.data.ptr, wd.data.ptr, out.data.ptr, d, eps,
                       bool(w) | 2 * bool(centered)))
    return out


def _inverse_frequencies(half, base, freqs):
    if freqs:
        f = freqs[0]
        f = _bf16_inputs([f], {})[0][0] if type(f) is BF16 else f
        return np.float32(1) / f.astype(_F32)
    return constant(("rope", half, base),
                    lambda: cp.ascontiguousarray(fast._inv_freqs(cp, half, base)))


def rope(xp, x, offset, *freqs, dims, traditional, base, scale, forward):
    """The GPU kernel of `fast.rope` (GpuKernel mode "native")."""
    params = {"dims": dims, "traditional": traditional, "base": base, "scale": scale,
              "forward": forward}
    dtype = _dtype(x)
    if dtype not in _C or CTYPE.get(offset.dtype) is None or _data(x).ndim < 3:
        return _array_code(fast._ROPE.kernel, (x, offset, *freqs), params, dtype)
    xd = _data(x)
    shape = xd.shape
    if xd.ndim == 3:
        xd = xd[:, None]
    elif xd.ndim > 4:  # the heads' axes as one (counted: -1 can't be inferred for size 0)
        xd = xd.reshape(shape[0], math.prod(shape[1:-2]), shape[-2], shape[-1])
    out = cp.empty(xd.shape, xd.dtype)
    n = out.size
    if n:
        inv = _inverse_frequencies(dims // 2, base, freqs)
        _, H, T, D = xd.shape
        item = xd.itemsize
        if isinstance(offset, np.generic):  # an int offset, a launch parameter
            pointer, first, per_batch = 0, int(offset), False
        else:
            offset = cp.ascontiguousarray(offset)
            pointer, first, per_batch = offset.data.ptr, 0, offset.size > 1
        launch_source(_ROPE, (("TX", _C[dtype]), ("OT", CTYPE[offset.dtype])), _ROPE_ARGS,
                      (n + _BLOCK - 1) // _BLOCK,
                      (xd.data.ptr, pointer, inv.data.ptr, out.data.ptr, n, H, T, D,
                       *[s // item for s in xd.strides], dims, first, per_batch,
                       bool(traditional), bool(forward), scale))
    return out.reshape(shape)


_ATTEND = r"""
extern "C" __global__ void k(const QT* q, const QT* kk, const QT* v, const MT* mask,
                             QT* out, int n_q, int l_q, int l_k, int D, int Dv, int rep,
                             long long q0, long long q1, long long q2, long long q3,
                             long long k0, long long k1, long long k2, long long k3,
                             long long v0, long long v1, long long v2, long long v3,
                             long long m0, long long m1, long long m2, long long m3,
                             float scale, int causal, int has_mask, float fill) {
  extern __shared__ float sm[];
  float* qr = sm;          // the query row, scaled
  float* p = sm + D;       // its scores, then their softmax
  float* red = p + l_k;    // blockDim.x floats: reductions and the output's partial sums
  const int t = threadIdx.x, nt = blockDim.x, lane = t & 31, nw = nt >> 5;
  const long long r = blockIdx.x;
  const int i = (int)(r % l_q), h = (int)((r / l_q) % n_q);
  const long long b = r / ((long long)l_q * n_q);
  const QT* qp = q + b * q0 + h * q1 + i * q2;
  const QT* kp = kk + b * k0 + (h / rep) * k1;
  const QT* vp = v + b * v0 + (h / rep) * v1;
  for (int d = t; d < D; d += nt) qr[d] = scale * ld(qp, d * q3);
  __syncthreads();
  const int last = i + l_k - l_q;  // the last key a causal row sees
  for (int j = t >> 5; j < l_k; j += nw) {
    const QT* kr = kp + j * k2;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) s += qr[d] * ld(kr, d * k3);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) {
      if (causal && j > last) s = fill;
      if (has_mask) s = MASK(s, mask[b * m0 + h * m1 + i * m2 + j * m3], fill);
      p[j] = s;
    }
  }
  __syncthreads();
  float m = NEG_INF;
  for (int j = t; j < l_k; j += nt) m = fmaxf(m, p[j]);
  m = block_reduce(m, red, true);
  float total = 0.0f;
  for (int j = t; j < l_k; j += nt) { const float e = expf(p[j] - m); p[j] = e; total += e; }
  total = block_reduce(total, red, false);
  for (int j = t; j < l_k; j += nt) p[j] = p[j] / total;
  __syncthreads();
  const int groups = nt / Dv, d = t % Dv, g = t / Dv;
  float acc = 0.0f;
  if (g < groups)
    for (int j = g; j < l_k; j += groups) acc += p[j] * ld(vp, j * v2 + d * v3);
  red[t] = acc;
  __syncthreads();
  if (t < Dv) {
    float o = 0.0f;
    for (int e = 0; e < groups; ++e) o += red[e * Dv + t];
    st(out, r * Dv + t, o);
  }
}
"""
# The cuBLAS path's steps between its products, on float32 scores of the query heads that
# share a key head stacked (rows b, h, i in order): a block per row; the mask read through
# its strides, a causal row's keys beyond its position masked as the array code does.
_ROWS_PARAMS = """const MT* mask, int n_q, int l_q, int l_k, long long m0, long long m1,
                  long long m2, long long m3, float scale, int causal, int has_mask,
                  float fill) {
  __shared__ float red[33];
  const long long r = blockIdx.x;
  const int i = (int)(r % l_q), h = (int)((r / l_q) % n_q);
  const long long b = r / ((long long)l_q * n_q), at = b * m0 + h * m1 + i * m2;
  const int last = i + l_k - l_q;  // the last key a causal row sees
"""
# the scores times `scale`, masked, then their softmax, in place
_SOFTMAX_ROWS = r"""
extern "C" __global__ void k(float* s, """ + _ROWS_PARAMS + r"""
  float* p = s + r * l_k;
  float m = NEG_INF;
  for (int j = threadIdx.x; j < l_k; j += blockDim.x) {
    float v = p[j] * scale;
    if (causal && j > last) v = fill;
    if (has_mask) v = MASK(v, mask[at + j * m3], fill);
    p[j] = v;
    m = fmaxf(m, v);
  }
  m = block_reduce(m, red, true);
  float total = 0.0f;
  for (int j = threadIdx.x; j < l_k; j += blockDim.x) {
    const float e = expf(p[j] - m);
    p[j] = e;
    total += e;
  }
  total = block_reduce(total, red, false);
  for (int j = threadIdx.x; j < l_k; j += blockDim.x) p[j] = p[j] / total;
}
"""
# the scores' cotangent from the softmax's `p` and the probabilities' cotangent `g`
# (replaced by it times `scale`; unscaled also to `dm` if not null: an additive mask's)
_SOFTMAX_ROWS_VJP = r"""
extern "C" __global__ void k(const float* p, float* g, float* dm, """ + _ROWS_PARAMS + r"""
  const float* pr = p + r * l_k;
  float* gr = g + r * l_k;
  float t = 0.0f;
  for (int j = threadIdx.x; j < l_k; j += blockDim.x) t += pr[j] * gr[j];
  t = block_reduce(t, red, false);
  for (int j = threadIdx.x; j < l_k; j += blockDim.x) {
    float ds = pr[j] * gr[j] - pr[j] * t;
    if ((causal && j > last) || (has_mask && !KEEP(mask[at + j * m3]))) ds = 0.0f;
    if (dm) dm[r * l_k + j] = ds;
    gr[j] = ds * scale;
  }
}
"""
_MASKS = {None: ("float", "(s)", "true"),
          np.dtype(np.bool_): ("bool", "((m) ? (s) : (f))", "(m)"),
          _F32: ("float", "((s) + (m))", "true")}
_FLOAT32_MIN = float(np.finfo(np.float32).min)  # a masked-out score, as the array code
_SHARED = 48 * 1024  # bytes of shared memory a block may use without opting in
_ROWS_MAX = 16  # query rows per head the one-kernel path takes (longer: cuBLAS products)


def _rows_attention(q, k, v, mask, scale, causal):
    """Attention of few query rows (a decode step) as one kernel: a block per query row
    computes its scores, their softmax and its output in float32, reading float32 or
    bfloat16 queries, keys and values and the mask through their strides (a key head
    shared by query heads, a broadcast mask: no copies) and rounding the output once.
    None where the shapes need the cuBLAS path."""
    n_b, n_q, l_q, dim = q.shape
    n_kv, l_k, dv = k.shape[1], k.shape[2], v.shape[-1]
    rows = n_b * n_q * l_q
    shared = (dim + l_k + _BLOCK) * 4  # bytes: the query row, the scores, the partial sums
    if not (0 < l_q <= _ROWS_MAX and rows and l_k and n_kv and 0 < dv <= _BLOCK) or \
            shared > _SHARED:
        return None
    mask, mask_types = _mask_types(mask)
    out = cp.empty((n_b, n_q, l_q, dv), q.dtype)
    steps = [s // q.itemsize for a in (q, k, v) for s in a.strides]
    steps += [s // mask.itemsize for s in mask.strides] if mask is not None else [0] * 4
    types = (("QT", _C[q.dtype if q.dtype == _F32 else BF16_NP]), *mask_types)
    launch_source(_ATTEND, types, _ATTEND_ARGS, rows,
                  (q.data.ptr, k.data.ptr, v.data.ptr,
                   (mask if mask is not None else q).data.ptr, out.data.ptr, n_q, l_q, l_k,
                   dim, dv, n_q // n_kv, *steps, scale, bool(causal), mask is not None,
                   _FLOAT32_MIN), shared)
    return out


def _mask_types(mask):
    """The mask (float32 if additive) and the kernels' macros for it."""
    if mask is not None and mask.dtype not in _MASKS:
        mask = mask.astype(_F32)
    mtype, rule, keep = _MASKS[None if mask is None else mask.dtype]
    return mask, (("MT", mtype), ("MASK(s, m, f)", rule), ("KEEP(m)", keep))


def _float32_inputs(*arrays):
    """bfloat16 (its bits), float16 or float32 operands as float32 arrays."""
    arrays, _ = _bf16_inputs(list(arrays), {})
    return [a.astype(_F32, copy=False) for a in arrays]


def _stacked(a, n_kv):
    """(batch, query heads, rows, d) as (batch, key heads, rows of the heads sharing it, d)."""
    n_b, n_q, l, d = a.shape
    return a.reshape(n_b, n_kv, n_q // n_kv * l, d)


def _row_steps(source, args, q_shape, l_k, mask, pointers, scale, causal):
    """Launch a row kernel (its `pointers` first) over the stacked scores of queries of
    `q_shape` and `l_k` keys."""
    n_b, n_q, l_q, _ = q_shape
    mask, types = _mask_types(mask)
    strides = [s // mask.itemsize for s in mask.strides] if mask is not None else [0] * 4
    launch_source(source, types, args, n_b * n_q * l_q,
                  (*pointers, pointers[0] if mask is None else mask.data.ptr, n_q, l_q, l_k,
                   *strides, scale, bool(causal), mask is not None, _FLOAT32_MIN))


def _probabilities(q, k, mask, scale, causal):
    """The stacked float32 queries and their softmax of masked scores (cuBLAS, then a
    row kernel)."""
    qm = _stacked(q, k.shape[1])
    p = cp.ascontiguousarray(matmul(cp, qm, cp.swapaxes(k, -1, -2), _F32))
    _row_steps(_SOFTMAX_ROWS, _SOFTMAX_ROWS_ARGS, q.shape, k.shape[2], mask,
               (p.data.ptr,), scale, causal)
    return qm, p


def _with_mask(mask):
    mask = mask[0] if mask else None
    return _bf16_inputs([mask], {})[0][0] if type(mask) is BF16 else mask


def attention(xp, q, k, v, *mask, scale, causal):
    """The GPU kernel of `fast.scaled_dot_product_attention` (GpuKernel mode "native"),
    computing half precision in float32 and rounding once at the end: a decode step's
    few query rows of float32 or bfloat16 in one kernel (`_rows_attention`), else cuBLAS
    products around a row kernel (the mask and the softmax), the rows of the query heads
    that share a key head in one product (no copy of the keys per query head)."""
    out = _dtype(q)
    mask = _with_mask(mask)  # an additive bfloat16 mask exactly, in float32
    if out in _C:
        rows = _rows_attention(_data(q), _data(k), _data(v), mask, scale, causal)
        if rows is not None:
            return rows
    q, k, v = _float32_inputs(q, k, v)
    if out not in _C:  # float16, in float32
        rows = _rows_attention(q, k, v, mask, scale, causal)
        if rows is not None:
            return _rounded(rows, out)
    if not (q.size and k.size and v.size):
        mm = functools.partial(matmul, cp, dtype=_F32)
        return _rounded(fast._attend(cp, mm, q, k, v, mask, scale, causal, merge=True), out)
    _, p = _probabilities(q, k, mask, scale, causal)
    return _rounded(matmul(cp, p, v, _F32).reshape(q.shape[:-1] + v.shape[-1:]), out)


def attention_vjp(xp, q, k, v, c, *mask, scale, causal, outs):
    """The GPU kernel of `fast.scaled_dot_product_attention_vjp` (GpuKernel mode "native",
    every size non-zero): the cotangents of q, k, v (and of an additive mask) in float32,
    rounded once: the probabilities again (`_probabilities`), then cuBLAS products around
    a row kernel, a key head's cotangents summed over its query heads by the products of
    the stacked rows."""
    d = _dtype(q)
    mask = _with_mask(mask)
    q, k, v, c = _float32_inputs(q, k, v, c)
    n_kv, l_k = k.shape[1], k.shape[2]
    qm, p = _probabilities(q, k, mask, scale, causal)
    cm = _stacked(c, n_kv)
    dv = matmul(cp, cp.swapaxes(p, -1, -2), cm, _F32)
    g = cp.ascontiguousarray(matmul(cp, cm, cp.swapaxes(v, -1, -2), _F32))
    additive = mask is not None and mask.dtype != np.bool_
    dm = cp.empty(g.shape, _F32) if additive else None
    _row_steps(_SOFTMAX_ROWS_VJP, _SOFTMAX_ROWS_VJP_ARGS, q.shape, l_k, mask,
               (p.data.ptr, g.data.ptr, 0 if dm is None else dm.data.ptr), scale, causal)
    grads = [matmul(cp, g, k, _F32).reshape(q.shape),
             matmul(cp, cp.swapaxes(g, -1, -2), qm, _F32), dv]
    if dm is not None:
        grads.append(dm.reshape(q.shape[:-1] + (l_k,)))
    box = np.empty((), dtype=object)
    box[()] = tuple(BF16(_to_bf16(a)) if d == BF16_NP else a.astype(d, copy=False)
                    for a in grads)
    return box


def _rounded(x, dtype):
    """A float32 result as `dtype` (bfloat16: its bits)."""
    return _to_bf16(x) if dtype == BF16_NP else x.astype(dtype, copy=False)
