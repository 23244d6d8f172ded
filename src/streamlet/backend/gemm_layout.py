"""How cuBLAS reads the matrices of a strided array (`cuda_gemm`), from its shape and
strides alone, so that CPU tests check it on NumPy arrays.

A row-major matrix is the column-major matrix of its transpose: a matrix stored by rows
is cuBLAS's "N" operand with the row stride as leading dimension, one stored by columns
its "T" operand with the column stride.
"""
from __future__ import annotations

OP_N, OP_T = 0, 1  # cublasOperation_t


def layout(a):
    """(operation, leading dimension in elements) of the last two axes of `a`, or None
    where its matrices are stored neither by rows nor by columns."""
    r, c = a.shape[-2], a.shape[-1]
    item = a.itemsize
    sr, sc = a.strides[-2] // item, a.strides[-1] // item
    if (sc == 1 or c == 1) and (sr >= max(c, 1) or r == 1):
        return OP_N, max(sr if r > 1 else c, 1)
    if (sr == 1 or r == 1) and (sc >= max(r, 1) or c == 1):
        return OP_T, max(sc if c > 1 else r, 1)
    return None


def batch_stride(a, batch):
    """The one element stride between the matrices of `a` broadcast to the batch shape
    `batch` (0: one matrix for all), or None where they are not evenly spaced."""
    if not batch:
        return 0
    lead = a.ndim - 2
    strides = [0] * (len(batch) - lead) + [s // a.itemsize for s in a.strides[:lead]]
    shape = (1,) * (len(batch) - lead) + a.shape[:lead]
    step, span = None, 1  # the stack must be one arithmetic progression, innermost axis first
    for n, s, full in zip(reversed(shape), reversed(strides), reversed(batch)):
        if full == 1:
            continue
        if n == 1:
            s = 0
        if step is None:
            step = s
        elif s != step * span:
            return None
        span *= full
    return None if step is not None and step < 0 else step or 0
