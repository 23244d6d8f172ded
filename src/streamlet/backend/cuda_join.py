"""`concatenate` on the GPU: one 2-D copy per input (`cudaMemcpy2DAsync`), no kernel of
CuPy's.

The result, seen as rows of the product of the axes before the joined one, holds in
each row every input's row side by side: input i's rows go to its own columns of the
result's rows, a strided copy of `outer` rows.  A KV cache grows by such a join at each
decode step (twice per layer), where `cupy.concatenate` cost tens of µs of host time.
"""
from __future__ import annotations

import math

import cupy as cp
import numpy as np
from cupy.cuda import runtime

_MAX_PITCH = (1 << 31) - 1  # bytes: what cudaMemcpy2D takes as a row pitch


def concatenate(xp, *arrays, axis, dtype):
    """The GPU kernel of concatenate (bfloat16 as its bits: bytes are moved, not values)."""
    dtype = np.dtype(dtype)
    if any(a.dtype != dtype for a in arrays):  # bytes are copied: one width for all
        raise TypeError(f"[concatenate] inputs of dtypes {[str(a.dtype) for a in arrays]} "
                        f"for a result of {dtype}.")
    first = arrays[0].shape
    shape = first[:axis] + (sum(a.shape[axis] for a in arrays),) + first[axis + 1:]
    outer = math.prod(shape[:axis])
    row = math.prod(shape[axis:]) * dtype.itemsize
    if row > _MAX_PITCH:
        return cp.concatenate(arrays, axis=axis)
    out = cp.empty(shape, dtype)
    if not out.size:
        return out
    stream = cp.cuda.get_current_stream().ptr
    dst, col = out.data.ptr, 0
    for a in arrays:
        width = a.nbytes // outer
        if width:
            a = cp.ascontiguousarray(a)
            runtime.memcpy2DAsync(dst + col, row, a.data.ptr, width, width, outer,
                                  runtime.memcpyDeviceToDevice, stream)
        col += width
    return out
