"""matmul on the GPU: one cuBLAS call for float32 and bfloat16 matrices and stacks of them.

A product of matrices each stored by rows or by columns (a transpose is a view: no copy)
with one batch stride each (0 for a broadcast batch) is one `cublasGemmStridedBatchedEx`
(`cublasGemmEx` for a single product) in the node's own dtype: bfloat16 operands stay
bfloat16 (their bits), accumulate in float32 and round once, as MLX's CUDA gemm and our
CPU kernel do, and float32 uses TF32 tensor cores where MLX_ENABLE_TF32 allows, as MLX
does.  Other dtypes and layouts go to `cupy.matmul`.  This skips what CuPy's matmul and
the bfloat16 conversions cost per call: a small model's token is dozens of small GEMMs.

The calls go to cuBLASLt with a plan kept per shape and layout (`cublaslt`), else to
libcublas through ctypes on CuPy's handle: CuPy's wrappers refuse to run while a stream
captures a CUDA graph (`cuda_graph`), which cuBLAS itself supports.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os

import cupy as cp
import numpy as np
from cupy.cuda import runtime
from cupy_backends.cuda.libs import cublas

from ..core.ops.linalg import turned
from . import cublaslt
from .cuda import BF16, BF16_NP, _from_bf16, _to_bf16
from .gemm_layout import batch_stride, layout

TF32 = os.environ.get("MLX_ENABLE_TF32", "1") not in ("0", "false", "False")

_R_32F, _R_16BF = 0, 14  # cudaDataType
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32 = 68, 77  # cublasComputeType_t
_ALGO = -1  # CUBLAS_GEMM_DEFAULT
_ONE, _ZERO = np.ones((), np.float32), np.zeros((), np.float32)
_ONE_PTR, _ZERO_PTR = _ONE.ctypes.data, _ZERO.ctypes.data
_F32 = np.dtype(np.float32)
_U16 = np.dtype(np.uint16)


class _Cublas:
    """The libcublas this process loaded (CuPy's), its three calls used here."""

    def __init__(self):
        lib = cublaslt.loaded("libcublas.so")
        P, I, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        self.set_stream = self._fn(lib.cublasSetStream_v2, P, P)
        self.gemm = self._fn(lib.cublasGemmEx, P, I, I, I, I, I, P, P, I, I, P, I, I, P, P,
                             I, I, I, I)
        self.gemm_batched = self._fn(lib.cublasGemmStridedBatchedEx, P, I, I, I, I, I, P, P,
                                     I, I, L, P, I, I, L, P, P, I, I, L, I, I, I)

    @staticmethod
    def _fn(fn, *argtypes):
        fn.argtypes, fn.restype = argtypes, ctypes.c_int

        def call(*args):
            status = fn(*args)
            if status:
                raise cublas.CUBLASError(status)
        return call


@functools.cache
def _cublas():
    cp.cuda.device.get_cublas_handle()  # loads libcublas
    return _Cublas()


class _Call:
    """What a product of operands of given shapes, strides and flags launches, but its
    pointers: worked out once (`_describe`), then each call allocates and launches."""

    __slots__ = ("shape", "dtype", "empty", "zero", "plan", "args")

    def __init__(self, shape, dtype, empty, zero, plan, args):
        self.shape, self.dtype, self.empty, self.zero = shape, dtype, empty, zero
        self.plan, self.args = plan, args


_calls: dict = {}  # (shapes, strides, flags, result kind, TF32, device) -> _Call or _COPY
_CALLS_MAX = 4096  # forgotten all at once beyond this many (shapes that keep changing)
_COPY = object()  # the matrices of an operand are not evenly spaced in the batch


def gemm(x, y, out_bits, tf32=None, ta=False, tb=False):
    """`x @ y` for float32 operands, or bfloat16 ones given as their uint16 bits when
    `out_bits`; None where the layout needs `cupy.matmul` (a vector operand).  float32
    uses TF32 where `tf32` says (None: where MLX_ENABLE_TF32 allows); `ta`, `tb`: an
    operand taken with its last two axes swapped."""
    if x.ndim < 2 or y.ndim < 2:
        return None
    fast = (TF32 if tf32 is None else tf32) and not out_bits
    key = (x.shape, x.strides, y.shape, y.strides, ta, tb, out_bits, fast,
           runtime.getDevice())
    call = _calls.get(key)
    if call is None:
        if len(_calls) >= _CALLS_MAX:
            _calls.clear()
        call = _calls[key] = _describe(turned(x, ta), turned(y, tb), out_bits, fast, key[-1])
    if call is _COPY:  # a copy broadcast to the batch first (attention's shared heads)
        x, y = turned(x, ta), turned(y, tb)
        batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
        return gemm(_evenly_spaced(x, batch), _evenly_spaced(y, batch), out_bits, fast)
    out = cp.empty(call.shape, call.dtype)
    if call.empty:
        return out
    if call.zero:
        out.fill(0)
        return out
    stream = cp.cuda.get_current_stream().ptr
    # row-major C = X Y is column-major C^T = Y^T X^T: cuBLAS's A is y, its B is x
    yp, xp, op = y.data.ptr, x.data.ptr, out.data.ptr
    plan = call.plan
    if plan is not None and not (yp % cublaslt.ALIGN or xp % cublaslt.ALIGN or
                                 op % cublaslt.ALIGN):
        # the pool reuses the workspace only for work queued after this GEMM on `stream`
        ws = cp.empty(plan.workspace, np.uint8) if plan.workspace else None
        cublaslt.matmul(plan, _ONE_PTR, yp, xp, _ZERO_PTR, op, stream,
                        ws.data.ptr if ws is not None else None)
        return out
    lib = _cublas()
    handle = cp.cuda.device.get_cublas_handle()
    if cublas.getPointerMode(handle) != cublas.CUBLAS_POINTER_MODE_HOST:  # alpha, beta: host
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    lib.set_stream(handle, stream)
    a_op, b_op, n, m, k, lda, ldb, sa, sb, kind, compute, count = call.args
    if count == 1:
        lib.gemm(handle, a_op, b_op, n, m, k, _ONE_PTR, yp, kind, lda, xp, kind, ldb,
                 _ZERO_PTR, op, kind, n, compute, _ALGO)
    else:
        lib.gemm_batched(handle, a_op, b_op, n, m, k, _ONE_PTR, yp, kind, lda, sa, xp, kind,
                         ldb, sb, _ZERO_PTR, op, kind, n, m * n, count, compute, _ALGO)
    return out


def _describe(x, y, out_bits, fast, device):
    """The _Call of `x @ y` (operands as the product reads them), or _COPY."""
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    bx, by = x.shape[:-2], y.shape[:-2]
    batch = by if not bx else bx if not by or bx == by else np.broadcast_shapes(bx, by)
    shape, dtype = batch + (m, n), _U16 if out_bits else _F32
    count = math.prod(batch)
    empty = not (count and m and n)
    if empty or not k:  # nothing to launch (a zero-size operand can't be laid out evenly)
        return _Call(shape, dtype, empty, not k, None, None)
    lx, sx, ly, sy = layout(x), batch_stride(x, batch), layout(y), batch_stride(y, batch)
    if lx is None or sx is None or ly is None or sy is None:
        return _COPY
    kind = _R_16BF if out_bits else _R_32F
    compute = _COMPUTE_32F_FAST_TF32 if fast else _COMPUTE_32F
    plan = cublaslt.plan((kind, compute, ly[0], lx[0], n, m, k, ly[1], lx[1], n, count, sy,
                          sx, m * n, device))
    return _Call(shape, dtype, False, False, plan,
                 (ly[0], lx[0], n, m, k, ly[1], lx[1], sy, sx, kind, compute, count))


def _evenly_spaced(a, batch):
    """`a` broadcast to the batch and copied, where its matrices are not evenly spaced
    (a broadcast between batch axes: attention's shared key and value heads), which
    costs a copy kernel where `cupy.matmul` cost 0.2 ms of host time."""
    if layout(a) is None or batch_stride(a, batch) is None:
        a = cp.ascontiguousarray(cp.broadcast_to(a, batch + a.shape[-2:]))
    return a


def matmul(xp, x, y, dtype, ta=False, tb=False):
    """The GPU kernel of matmul (GpuKernel mode "native": bfloat16 operands arrive as
    `BF16`, a bfloat16 result leaves as its bits); `ta`, `tb`: an operand taken
    transposed (a view: cuBLAS reads it by columns)."""
    if dtype == BF16_NP:
        xb, yb = _bits(x), _bits(y)
        out = gemm(xb, yb, True, ta=ta, tb=tb)
        return out if out is not None else _to_bf16(
            _cupy_matmul(_from_bf16(turned(xb, ta)), _from_bf16(turned(yb, tb))))
    x, y = _as(x, dtype), _as(y, dtype)
    out = gemm(x, y, False, ta=ta, tb=tb) if dtype == _F32 else None
    return out if out is not None else _cupy_matmul(turned(x, ta), turned(y, tb))


def _bits(a):
    """A bfloat16 operand's bits (another dtype rounded to bfloat16 first)."""
    return a.bits if type(a) is BF16 else _to_bf16(a)


def _as(a, dtype):
    if type(a) is BF16:
        a = _from_bf16(a.bits)
    return a.astype(dtype, copy=False)


def _cupy_matmul(x, y):
    """cupy.matmul, on TF32 tensor cores for float32 where MLX_ENABLE_TF32 allows."""
    if x.dtype != _F32 or not TF32:
        return cp.matmul(x, y)
    handle = cp.cuda.device.get_cublas_handle()
    mode = cublas.getMathMode(handle)
    cublas.setMathMode(handle, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
    try:
        return cp.matmul(x, y)
    finally:
        cublas.setMathMode(handle, mode)
