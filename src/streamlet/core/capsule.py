"""bfloat16 through DLPack, which NumPy's DLPack lacks (it refuses DLPack's bfloat16 code).

DLPack has a type code of its own for bfloat16 (kDLBfloat = 4), which PyTorch and JAX use
and MLX reads and writes.  NumPy exports and imports 16-bit unsigned integers (kDLUInt,
16 bits) with the same bytes, so streamlet goes through those and changes the code in the
capsule's DLTensor: on export after NumPy made the capsule, on import before NumPy reads
it.  The structs are DLPack's public ABI (dlpack.h), the capsule calls CPython's public
API; the consumer owns a capsule it was handed, so writing its dtype field is its right.

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

__all__ = ["export_bfloat16", "import_bfloat16", "is_bfloat16"]

_UINT, _BFLOAT = 1, 4  # DLDataTypeCode: kDLUInt, kDLBfloat
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
    name = _name(capsule)
    if name not in _DTYPE_AT:
        raise BufferError(f"[dlpack] Not an unused DLPack capsule ({name!r}).")
    return (ctypes.c_uint8 * 4).from_address(_pointer(capsule, name) + _DTYPE_AT[name])


def _is(field, code) -> bool:
    return tuple(field) == (code, 16, 1, 0)  # 16 bits, one lane (little-endian uint16)


def is_bfloat16(capsule) -> bool:
    """Whether an unused DLPack capsule holds bfloat16 values."""
    return _is(_dtype_field(capsule), _BFLOAT)


def export_bfloat16(data: np.ndarray, kwargs: dict):
    """`data.__dlpack__(**kwargs)` for a bfloat16 NumPy array: its uint16 view's capsule,
    retyped to DLPack's bfloat16."""
    capsule = data.view(np.uint16).__dlpack__(**kwargs)
    field = _dtype_field(capsule)
    assert _is(field, _UINT), tuple(field)
    field[0] = _BFLOAT
    return capsule


class _Handed:
    """What np.from_dlpack reads a capsule from (it asks an object for one)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def import_bfloat16(capsule) -> np.ndarray:
    """A bfloat16 NumPy array over an unused legacy or versioned capsule of CPU bfloat16
    values (a view: NumPy takes the capsule over, and calls its deleter when done)."""
    field = _dtype_field(capsule)
    if not _is(field, _BFLOAT):
        raise BufferError("[dlpack] The capsule does not hold bfloat16 values.")
    field[0] = _UINT
    return np.from_dlpack(_Handed(capsule)).view(ml_dtypes.bfloat16)
