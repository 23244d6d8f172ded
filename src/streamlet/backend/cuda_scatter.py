"""`multiply.at` on the device (CuPy has none), in NumPy's order.

The caller sorts the updates stably by the element they multiply (`ops/updates.py`); here
the first thread of each run of equal positions multiplies its element by the run's
values one after another, so every product rounds as NumPy's loop rounds it (compiled
with --fmad=false: complex products are NumPy's `ar*br - ai*bi`, `ar*bi + ai*br`).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from .cuda_fuse import CTYPE

_RUN = r"""
extern "C" __global__ void runs(%(T)s* out, const long long* pos, const %(T)s* v,
                                long long n) {
  long long j = blockDim.x * (long long)blockIdx.x + threadIdx.x;
  if (j >= n || (j > 0 && pos[j] == pos[j - 1])) return;
  long long p = pos[j];
  %(ACC)s
  for (long long k = j; k < n && pos[k] == p; ++k) {
    %(STEP)s
  }
  %(STORE)s
}
"""
_REAL = {"ACC": "%(T)s acc = out[p];", "STEP": "acc = (%(T)s)(acc * v[k]);",
         "STORE": "out[p] = acc;"}
_HALF = {"ACC": "float acc = __half2float(out[p]);",
         "STEP": "acc = __half2float(__float2half_rn(acc * __half2float(v[k])));",
         "STORE": "out[p] = __float2half_rn(acc);"}
_COMPLEX = {"ACC": "%(R)s ar = out[p].x, ai = out[p].y;",
            "STEP": "%(R)s br = v[k].x, bi = v[k].y, r = ar * br - ai * bi;"
                    " ai = ar * bi + ai * br; ar = r;",
            "STORE": "out[p].x = ar; out[p].y = ai;"}


def _source(dtype):
    if dtype == np.float16:
        return "#include <cuda_fp16.h>\n" + _RUN % dict(_HALF, T="__half")
    if dtype.kind == "c":
        real = "float" if dtype == np.complex64 else "double"
        body = {k: v % {"R": real} for k, v in _COMPLEX.items()}
        return _RUN % dict(body, T=real + "2")
    t = CTYPE[dtype]
    return _RUN % {k: v % {"T": t} for k, v in dict(_REAL, T=t).items()}


_kernels: dict = {}  # (device, dtype) -> the compiled kernel


def multiply_runs(flat, positions, values):
    """`flat[p] *= v` for each (p, v) in order, `positions` sorted stably, on the current
    stream."""
    n = positions.size
    if not n:
        return
    key = (cp.cuda.runtime.getDevice(), flat.dtype)
    fn = _kernels.get(key)
    if fn is None:
        fn = _kernels[key] = cp.RawModule(code=_source(flat.dtype),
                                          options=("--fmad=false",)).get_function("runs")
    block = 256
    fn(((n + block - 1) // block,), (block,),
       (flat, cp.ascontiguousarray(positions, dtype=cp.int64),
        cp.ascontiguousarray(values, dtype=flat.dtype), np.int64(n)))
