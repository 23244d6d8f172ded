"""cuBLASLt through ctypes: a GEMM's plan (descriptors and the kernel cuBLAS picks) made
once per shape, layout and dtype, then one `cublasLtMatmul` call per product.

`cublasGemmEx` picks its kernel again at every call, about 25 µs of host time on an
H200's host where the GEMM of a small model's layer runs for a few; with the plan kept,
a call costs what the launch does.  A plan may ask for a workspace, up to what NVIDIA
recommends (32 MiB from Hopper on, 4 MiB before, as MLX allows): Hopper's own GEMM
kernels need one, and without it cuBLASLt picks Ampere's (a 4096-wide float32 MLP's
GEMMs ran 1.5x longer on an H100).  The caller gives each call its workspace from the
stream's memory pool, so GEMMs of several streams at once share nothing.  Plans assume
cuBLASLt's default 256-byte alignment of every matrix: `plan` refuses other pointers.
"""
from __future__ import annotations

import ctypes
import functools
import threading

_P, _I, _U64, _I64, _SZ = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64,
                           ctypes.c_size_t)
_TRANSA, _TRANSB = 3, 4  # cublasLtMatmulDescAttributes_t
_BATCH_COUNT, _BATCH_OFFSET = 5, 6  # cublasLtMatrixLayoutAttribute_t
_SCALE_32F = 0  # cudaDataType of alpha and beta
_MAX_WORKSPACE = 1  # cublasLtMatmulPreferenceAttributes_t
_MIB = 1 << 20
ALIGN = 256


class _Result(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: the algorithm (64 opaque bytes) and its needs."""
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


def loaded(name):
    """The shared library `name` ("libcublas.so") as this process loaded it (CuPy's)."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if f"/{name}" in line})
    return ctypes.CDLL(paths[0])


class _Lib:
    def __init__(self):
        lib = self.lib = loaded("libcublasLt.so")  # loaded with CuPy's libcublas
        self.call("cublasLtCreate", ctypes.byref(handle := _P()))
        self.handle = handle
        mm = lib.cublasLtMatmul
        mm.argtypes = (_P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _SZ, _P)
        mm.restype = ctypes.c_int
        self.matmul = mm

    def call(self, name, *args):
        status = getattr(self.lib, name)(*args)
        if status:
            raise RuntimeError(f"[matmul] {name} failed with cuBLAS status {status}.")


class Plan:
    """What one `cublasLtMatmul` call of a key takes besides the pointers: `workspace`,
    the bytes of scratch memory its kernel needs."""

    __slots__ = ("desc", "a", "b", "c", "algo", "keep", "workspace")

    def __init__(self, desc, a, b, c, algo, keep):
        self.desc, self.a, self.b, self.c, self.algo, self.keep = desc, a, b, c, algo, keep
        self.workspace = keep.workspace


@functools.cache
def workspace_limit(device):
    """The most scratch memory a plan on `device` may ask for."""
    from cupy.cuda import runtime
    return (32 if runtime.getDeviceProperties(device)["major"] >= 9 else 4) * _MIB


_lib: list = []
_plans: dict = {}
_lock = threading.RLock()  # plan() holds it while _make loads the library


def _library():
    if not _lib:
        with _lock:
            if not _lib:
                _lib.append(_Lib())
    return _lib[0]


def plan(key):
    """The Plan of a column-major `C = op(A) op(B)` described by `key` = (data type,
    compute type, opA, opB, m, n, k, lda, ldb, ldc, batch count, A, B and C batch
    strides in elements, device), or None where cuBLASLt has no algorithm for it."""
    p = _plans.get(key, False)
    if p is False:
        with _lock:
            p = _plans.get(key, False)
            if p is False:
                p = _plans[key] = _make(key)
    return p


def _make(key):
    kind, compute, op_a, op_b, m, n, k, lda, ldb, ldc, count, sa, sb, sc, device = key
    lib = _library()
    desc = _P()
    lib.call("cublasLtMatmulDescCreate", ctypes.byref(desc), _I(compute), _I(_SCALE_32F))
    for attr, value in ((_TRANSA, op_a), (_TRANSB, op_b)):
        v = ctypes.c_int32(value)
        lib.call("cublasLtMatmulDescSetAttribute", desc, _I(attr), ctypes.byref(v),
                 _SZ(ctypes.sizeof(v)))
    layouts = []
    for rows, cols, ld, stride in (((m, k) if op_a == 0 else (k, m)) + (lda, sa),
                                   ((k, n) if op_b == 0 else (n, k)) + (ldb, sb),
                                   (m, n, ldc, sc)):
        lay = _P()
        lib.call("cublasLtMatrixLayoutCreate", ctypes.byref(lay), _I(kind), _U64(rows),
                 _U64(cols), _I64(ld))
        if count > 1:
            c, s = ctypes.c_int32(count), ctypes.c_int64(stride)
            lib.call("cublasLtMatrixLayoutSetAttribute", lay, _I(_BATCH_COUNT),
                     ctypes.byref(c), _SZ(4))
            lib.call("cublasLtMatrixLayoutSetAttribute", lay, _I(_BATCH_OFFSET),
                     ctypes.byref(s), _SZ(8))
        layouts.append(lay)
    pref = _P()
    lib.call("cublasLtMatmulPreferenceCreate", ctypes.byref(pref))
    limit = _U64(workspace_limit(device))
    lib.call("cublasLtMatmulPreferenceSetAttribute", pref, _I(_MAX_WORKSPACE),
             ctypes.byref(limit), _SZ(8))
    result, found = _Result(), _I(0)
    status = lib.lib.cublasLtMatmulAlgoGetHeuristic(
        lib.handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref, _I(1),
        ctypes.byref(result), ctypes.byref(found))
    lib.call("cublasLtMatmulPreferenceDestroy", pref)
    if status or found.value < 1:
        return None
    algo = ctypes.addressof(result.algo)
    return Plan(desc.value, layouts[0].value, layouts[1].value, layouts[2].value, algo,
                result)


def matmul(p, alpha, a, b, beta, c, stream, workspace=None):
    """`c = alpha op(a) op(b) + beta c` by plan `p` (pointers; alpha and beta on the host;
    `workspace` points to `p.workspace` bytes, ordered on `stream`)."""
    lib = _lib[0]
    status = lib.matmul(lib.handle, p.desc, alpha, a, p.a, b, p.b, beta, c, p.c, c, p.c,
                        p.algo, workspace, p.workspace, stream)
    if status:
        raise RuntimeError(f"[matmul] cublasLtMatmul failed with cuBLAS status {status}.")
