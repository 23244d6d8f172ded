"""bfloat16 through DLPack, which NumPy's and CuPy's DLPack lack (both refuse DLPack's
bfloat16 code).

DLPack has a type code of its own for bfloat16 (kDLBfloat = 4), which PyTorch and JAX use
and MLX reads and writes.  NumPy and CuPy export and import 16-bit unsigned integers
(kDLUInt, 16 bits) with the same bytes, so streamlet goes through those and changes the
code in the capsule's DLTensor: on export after NumPy or CuPy made the capsule
(`to_bfloat16`), on import before they read it (`to_uint16`).  The structs are DLPack's
public ABI (dlpack.h), the capsule calls CPython's public API; the consumer owns a capsule
it was handed, so writing its dtype field is its right.

>>> import ml_dtypes
>>> x = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
>>> cap = export_bfloat16(x, {})
>>> import_bfloat16(cap).tolist() == x.tolist()
True
"""
from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np

__all__ = ["Handed", "export_bfloat16", "import_bfloat16", "is_bfloat16", "is_convertible",
           "to_bfloat16", "to_uint16"]

_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6  # DLDataTypeCode
# What MLX converts: DLPack (code, bits) pairs of one lane (float64 and complex128 narrow)
_CONVERTIBLE = frozenset([(_BOOL, 8)] + [(c, b) for c in (_INT, _UINT) for b in (8, 16, 32, 64)]
                         + [(_FLOAT, 16), (_FLOAT, 32), (_FLOAT, 64), (_BFLOAT, 16),
                            (_COMPLEX, 64), (_COMPLEX, 128)])
# Where DLTensor.dtype (code, bits, lanes) lies: a DLTensor starts with data (a pointer),
# device (two int32) and ndim (int32), so its dtype is 20 bytes in.  A legacy capsule holds
# a DLManagedTensor (the DLTensor first), a versioned one (DLPack 1.0) a
# DLManagedTensorVersioned: version (two uint32), manager_ctx, deleter, flags, then it.
_DTYPE_AT = {b"dltensor": 20, b"dltensor_versioned": 32 + 20}

_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype, _name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_pointer.restype, _pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _dtype_field(capsule):
    """The capsule's DLDataType as 4 writable bytes (code, bits, lanes as uint16)."""
    if type(capsule).__name__ != "PyCapsule":
        raise BufferError(f"[dlpack] Not a DLPack capsule ({type(capsule).__name__}).")
    name = _name(capsule)
    if name not in _DTYPE_AT:
        raise BufferError(f"[dlpack] Not an unused DLPack capsule ({name!r}).")
    return (ctypes.c_uint8 * 4).from_address(_pointer(capsule, name) + _DTYPE_AT[name])


def _is(field, code) -> bool:
    return tuple(field) == (code, 16, 1, 0)  # 16 bits, one lane (little-endian uint16)


def is_bfloat16(capsule) -> bool:
    """Whether an unused DLPack capsule holds bfloat16 values."""
    return _is(_dtype_field(capsule), _BFLOAT)


def is_convertible(capsule) -> bool:
    """Whether an unused DLPack capsule holds values of a type MLX converts (not DLPack's
    opaque handles, complex32, float8 kinds, vector lanes...)."""
    code, bits, lanes_lo, lanes_hi = tuple(_dtype_field(capsule))
    return (lanes_lo, lanes_hi) == (1, 0) and (code, bits) in _CONVERTIBLE


def _retype(capsule, old, new, what):
    field = _dtype_field(capsule)
    if not _is(field, old):
        raise BufferError(f"[dlpack] The capsule does not hold {what} values "
                          f"(DLDataType {tuple(field)}).")
    field[0] = new
    return capsule


def to_bfloat16(capsule):
    """An unused capsule of uint16 values (a NumPy or CuPy export of bfloat16 bits), retyped
    in place to DLPack's bfloat16; returns it."""
    return _retype(capsule, _UINT, _BFLOAT, "uint16")


def to_uint16(capsule):
    """An unused capsule of bfloat16 values, retyped in place to uint16 (what NumPy and CuPy
    read); returns it."""
    return _retype(capsule, _BFLOAT, _UINT, "bfloat16")


def export_bfloat16(data: np.ndarray, kwargs: dict):
    """`data.__dlpack__(**kwargs)` for a bfloat16 NumPy array: its uint16 view's capsule,
    retyped to DLPack's bfloat16."""
    return to_bfloat16(data.view(np.uint16).__dlpack__(**kwargs))


class Handed:
    """A capsule made already, as what np.from_dlpack and cupy.from_dlpack read one from
    (they ask an object on a device for it)."""

    def __init__(self, capsule, device=(1, 0)):  # kDLCPU
        self.capsule, self.device = capsule, tuple(device)

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def import_bfloat16(capsule) -> np.ndarray:
    """A bfloat16 NumPy array over an unused legacy or versioned capsule of CPU bfloat16
    values (a view: NumPy takes the capsule over, and calls its deleter when done)."""
    return np.from_dlpack(Handed(to_uint16(capsule))).view(ml_dtypes.bfloat16)
