"""sum on the GPU.

A float32 sum over the leading axes of a C-ordered array (a bias's gradient: the sum of
a batch's rows) is one product of a row of ones with the array seen as a matrix, through
cuBLAS in full float32 (no TF32), where CuPy's reduction reads each column with strided
accesses: a 4096-wide MLP's step took 0.09 ms less on an H100 with its four bias sums so.
At most `MAX_ROWS` rows: a GEMM kernel adds along the product's inner dimension in turn,
as the CPU adds an axis-0 sum row by row, which is as accurate for a batch's rows but not
for millions of them (2^25 float32 ones added in turn stop at 2^24); longer sums, and
the others, run the CPU's kernel on CuPy arrays (`reduction.KERNELS`).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from ..core.ops.reduction import KERNELS
from .cuda_constants import constant
from .cuda_gemm import gemm

_F32 = np.dtype(np.float32)
MAX_ROWS = 8192


def total(xp, a, axis, keepdims, dtype):
    """sum's GPU kernel."""
    k = len(axis)
    if 0 < k < a.ndim and a.size and a.dtype == _F32 and np.dtype(dtype) == _F32 \
            and axis == tuple(range(k)) and a.flags.c_contiguous:
        rows = 1
        for d in a.shape[:k]:
            rows *= d
        if rows <= MAX_ROWS:
            out = gemm(_row_of_ones(rows), a.reshape(rows, a.size // rows), False, tf32=False)
            if out is not None:
                return out.reshape(((1,) * k if keepdims else ()) + a.shape[k:])
    return KERNELS["sum"](xp, a, axis, keepdims, dtype)


def _row_of_ones(n):
    return constant(("ones", n), lambda: cp.ones((1, n), _F32))
