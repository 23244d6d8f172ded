"""argmax, argmin and row gathers on the GPU: one launch each.

CuPy's own argmax is a reduction kernel giving int64, then a cast to uint32, and for
bfloat16 two more launches widening the bits to float32 first: about 90 µs of host time
for a decode step's one row of logits (150 in bfloat16).  Here one block reduces each
row, reading float32, float16 or bfloat16 as it is, with NumPy's rules: the first of equal
values, and the first NaN wherever there is one.  Other dtypes and layouts (an inner
axis, a strided row, a row longer than `_ROW_MAX`) run the CPU's kernel on CuPy arrays.

`a[i]` with one integer array `i` (an embedding lookup) copies the rows `i` picks and
flags an index outside [-n, n) in the same launch (`cuda_checks.Checked`), where CuPy's
advanced indexing and the separate reduction checking the indices took about 150 µs of
host time a decode step.  Other indexings go to CuPy.
"""
from __future__ import annotations

import struct

import cupy as cp
import numpy as np

from ..core.ops.indexing import _gather, _Slot
from ..core.ops.reduction import KERNELS
from .cuda import BF16, _bf16_inputs
from .cuda_checks import Checked
from .cuda_fast import _BLOCK, launch_source
from .cuda_fuse import CTYPE

_C = {np.dtype(np.float32): "float", np.dtype(np.float16): "__half"}
_ARGS = struct.Struct("@PPq")
_ROW_MAX = 1 << 18  # elements: one block scans a row; longer ones go to CuPy's reduction
_GATHER_ARGS = struct.Struct("@4P3q")
_WORD = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}

_PICK = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ float ld(const __half* p, long long i) { return __half2float(p[i]); }

__device__ __forceinline__ bool first_wins(float a, long long i, float b, long long j) {
  const bool na = a != a, nb = b != b;
  if (na || nb) return na && (!nb || i < j);
  if (a != b) return LARGEST ? a > b : a < b;
  return i < j;
}

extern "C" __global__ void k(const TX* x, unsigned int* out, long long d) {
  const TX* row = x + (long long)blockIdx.x * d;
  float best = 0.0f;
  long long at = -1;
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = ld(row, j);
    if (at < 0 || first_wins(v, j, best, at)) { best = v; at = j; }
  }
  __shared__ float bests[32];
  __shared__ long long ats[32];
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_down_sync(0xffffffffu, best, o);
    const long long i = __shfl_down_sync(0xffffffffu, at, o);
    if (i >= 0 && (at < 0 || first_wins(v, i, best, at))) { best = v; at = i; }
  }
  if ((threadIdx.x & 31) == 0) { bests[threadIdx.x >> 5] = best; ats[threadIdx.x >> 5] = at; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
      if (ats[w] >= 0 && first_wins(bests[w], ats[w], best, at)) { best = bests[w]; at = ats[w]; }
    out[blockIdx.x] = (unsigned int)at;
  }
}
"""


def argmax(xp, a, axis, keepdims):
    return _pick(a, axis, keepdims, True)


def argmin(xp, a, axis, keepdims):
    return _pick(a, axis, keepdims, False)


def _pick(a, axis, keepdims, largest):
    bf16 = type(a) is BF16
    data = a.bits if bf16 else a
    shape = data.shape
    ctype = "unsigned short" if bf16 else _C.get(data.dtype)
    d = data.size if axis is None else shape[-1]
    if not ((axis is None or axis == len(shape) - 1) and data.flags.c_contiguous and
            data.size and ctype and d <= _ROW_MAX):
        args, _ = _bf16_inputs([a], None)
        return KERNELS["argmax" if largest else "argmin"](cp, args[0], axis, keepdims)
    rows = data.size // d
    out = cp.empty(rows, np.uint32)
    launch_source(_PICK, (("TX", ctype), ("LARGEST", int(largest))),
                  _ARGS, rows, (data.data.ptr, out.data.ptr, d))
    if axis is None:
        return out.reshape((1,) * len(shape) if keepdims else ())
    return out.reshape(shape[:-1] + ((1,) if keepdims else ()))


_GATHER = r"""
extern "C" __global__ void k(const TV* table, const TI* idx, TV* out, bool* bad,
                             long long n, long long width, long long total) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const long long r = e / width, j = e - r * width;
  const TI raw = idx[r];
  long long i = (long long)raw;
  if (SIGNED ? (i < -n || i >= n) : ((unsigned long long)raw >= (unsigned long long)n)) {
    if (j == 0) *bad = true;
    i = 0;  // the node fails: what it holds is never read, but nothing outside is read
  } else if (i < 0) {
    i += n;
  }
  out[e] = table[i * width + j];
}
"""


def gather(xp, a, *arrays, index):
    """getitem's GPU kernel: rows of a C-ordered `a` picked by one integer array here,
    any other index through CuPy (its bounds checked apart, `cuda_checks.watch`)."""
    word = _WORD.get(a.itemsize)
    i = arrays[0] if len(arrays) == 1 else None
    if not (len(index) == 1 and type(index[0]) is _Slot and word and a.ndim and a.size and
            a.flags.c_contiguous and i is not None and i.dtype.kind in "iu" and i.size):
        return _gather(xp, a, *arrays, index=index)  # (a zero-width row: its check apart)
    out = cp.empty(i.shape + a.shape[1:], a.dtype)  # (ascontiguousarray makes 0-d 1-d)
    i = cp.ascontiguousarray(i)
    width = a.size // a.shape[0]
    bad = cp.zeros((), np.bool_)
    launch_source(_GATHER, (("TV", word), ("TI", CTYPE[i.dtype]),
                            ("SIGNED", int(i.dtype.kind == "i"))),
                  _GATHER_ARGS, (out.size + _BLOCK - 1) // _BLOCK,
                  (a.data.ptr, i.data.ptr, out.data.ptr, bad.data.ptr, a.shape[0], width,
                   out.size))
    return Checked(out, bad)
