"""Dtypes, their categories, MLX's promotion rules, finfo and iinfo."""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .errors import called


class DtypeCategory(enum.Enum):
    """Categories of data types, for `issubdtype`: `mx.floating`, `mx.integer`, ...

    >>> mx.issubdtype(mx.float16, mx.floating), mx.issubdtype(mx.int8, mx.unsignedinteger)
    (True, False)
    """

    complexfloating = 0
    floating = 1
    inexact = 2
    signedinteger = 3
    unsignedinteger = 4
    integer = 5
    number = 6
    generic = 7

    def __repr__(self):
        return f"DtypeCategory.{self.name}"


# kind: 'b' bool, 'u' unsigned, 'i' signed, 'f' float, 'c' complex
class Dtype:
    """An array element type: `mx.float32.size == 4`."""

    __slots__ = ("name", "size", "kind", "np")

    def __init__(self, name: str, npdtype):
        self.name = name
        self.np = np.dtype(npdtype)
        self.size = self.np.itemsize
        self.kind = "f" if name == "bfloat16" else self.np.kind

    def __repr__(self):
        return f"mlx.core.{self.name}"

    def __reduce__(self):
        return (from_name, (self.name,))

    @property
    def category(self) -> DtypeCategory:
        return _KIND_CATEGORY[self.kind]


_KIND_CATEGORY = {
    "b": DtypeCategory.generic,
    "u": DtypeCategory.unsignedinteger,
    "i": DtypeCategory.signedinteger,
    "f": DtypeCategory.floating,
    "c": DtypeCategory.complexfloating,
}

bool_ = Dtype("bool", np.bool_)
uint8, uint16 = Dtype("uint8", np.uint8), Dtype("uint16", np.uint16)
uint32, uint64 = Dtype("uint32", np.uint32), Dtype("uint64", np.uint64)
int8, int16 = Dtype("int8", np.int8), Dtype("int16", np.int16)
int32, int64 = Dtype("int32", np.int32), Dtype("int64", np.int64)
float16, bfloat16 = Dtype("float16", np.float16), Dtype("bfloat16", ml_dtypes.bfloat16)
float32, float64 = Dtype("float32", np.float32), Dtype("float64", np.float64)
complex64 = Dtype("complex64", np.complex64)

ALL = (bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
       float16, bfloat16, float32, float64, complex64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NP = {d.np: d for d in ALL}
_SIGNED = {1: int8, 2: int16, 4: int32, 8: int64}
_UNSIGNED = {1: uint8, 2: uint16, 4: uint32, 8: uint64}
_FLOAT_RANK = {float16: 0, bfloat16: 0, float32: 1, float64: 2}

generic, number, integer = DtypeCategory.generic, DtypeCategory.number, DtypeCategory.integer
signedinteger, unsignedinteger = DtypeCategory.signedinteger, DtypeCategory.unsignedinteger
floating, inexact = DtypeCategory.floating, DtypeCategory.inexact
complexfloating = DtypeCategory.complexfloating


def from_name(name: str) -> Dtype:
    return _BY_NAME[name]


def from_numpy(npdtype) -> Dtype:
    """The Dtype for a NumPy dtype; float64 stays float64, other unknowns raise TypeError."""
    d = _BY_NP.get(np.dtype(npdtype))
    if d is None:
        if np.dtype(npdtype) == np.complex128:
            return complex64
        raise TypeError(f"[array] Unsupported NumPy dtype {np.dtype(npdtype)}.")
    return d


def numpy_known(npdtype) -> bool:
    """Whether arrays of NumPy dtype `npdtype` convert (to its Dtype, complex128 narrowed)."""
    return npdtype in _BY_NP or npdtype == np.complex128


def as_dtype(d) -> Dtype:
    """Accept a Dtype, a NumPy dtype or a Python type (`float`, `int`, `bool`)."""
    if isinstance(d, Dtype):
        return d
    if d is float:
        return float32
    if d is int:
        return int32
    if d is bool:
        return bool_
    if d is complex:
        return complex64
    # a name is no dtype in MLX (TypeError), nor here; nor is None (NumPy's float64)
    if isinstance(d, np.dtype) or (isinstance(d, type) and issubclass(d, np.generic)):
        try:
            return from_numpy(d)
        except (TypeError, ValueError):  # (NumPy's ValueError: an array is no dtype)
            pass
    raise TypeError(f"[{called('dtype')}] Expected a dtype, got {d!r}.") from None


def promote_types(a: Dtype, b: Dtype) -> Dtype:
    """MLX's promotion of two dtypes: `promote_types(uint8, int8) == int16`."""
    if a is b:
        return a
    if a.kind == "b":
        return b
    if b.kind == "b":
        return a
    if a.kind == "c" or b.kind == "c":
        return complex64
    if a.kind == "f" and b.kind == "f":
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if _FLOAT_RANK[a] > _FLOAT_RANK[b] else b
    if a.kind == "f":
        return a
    if b.kind == "f":
        return b
    if a.kind == b.kind:
        return a if a.size >= b.size else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if u.size < s.size:
        return s
    return float32 if u.size == 8 else _SIGNED[u.size * 2]


_INT_RANGE = {d: (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))
              for d in ALL if d.kind in "iu"}


def check_int(value, d: Dtype, op: str) -> None:
    """A Python int given for integer dtype `d` must fit it: MLX's ValueError otherwise."""
    if d.kind in "iu" and isinstance(value, (int, np.integer)) and \
            not isinstance(value, bool) and not _INT_RANGE[d][0] <= value <= _INT_RANGE[d][1]:
        raise ValueError(f"[{op}] Converting {value} to {d.name} would result in overflow.")


def scalar_value(value, d: Dtype):
    """A Python float meant for float16, through float32 as MLX converts it (rounding twice:
    2049.0000001 becomes 2048, not 2050); any other value as it is."""
    if d is float16 and isinstance(value, float):
        with np.errstate(over="ignore"):
            return np.float32(value)
    return value


def check_int64(value: int, op: str = "") -> int:
    """A Python int as an operand: one beyond int64 raises MLX's RuntimeError."""
    if not _INT_RANGE[int64][0] <= value <= _INT_RANGE[int64][1]:
        raise RuntimeError(f"{f'[{op}] ' if op else ''}Cannot convert the integer {value} "
                           "to int64.")
    return value


def weak_scalar_dtype(array_dtype: Dtype, value) -> Dtype:
    """The result dtype of an array combined with a Python scalar (a 'weak' type)."""
    if isinstance(value, (bool, np.bool_)):
        return array_dtype
    if isinstance(value, (int, np.integer)):
        if isinstance(value, int):
            check_int64(value)
        d = int32 if array_dtype.kind == "b" else array_dtype
        if d.kind in "iu" and not _INT_RANGE[d][0] <= value <= _INT_RANGE[d][1]:
            raise ValueError(f"Converting {value} to {d.name} would result in overflow.")
        return d
    if isinstance(value, (float, np.floating)):
        return array_dtype if array_dtype.kind in "fc" else float32
    if isinstance(value, (complex, np.complexfloating)):
        return complex64
    raise TypeError(f"Cannot combine an array with a value of type {type(value).__name__}.")


def scalar_dtype(value) -> Dtype:
    """The dtype `array(value)` takes for a Python scalar."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int32
    if isinstance(value, float):
        return float32
    if isinstance(value, complex):
        return complex64
    raise TypeError(f"Cannot make an array from {type(value).__name__}.")


def is_float(d: Dtype) -> bool:
    return d.kind in "fc"


def to_inexact(d: Dtype) -> Dtype:
    """The floating type math ops compute in: integers and bool go to float32."""
    return d if d.kind in "fc" else float32


_CATEGORY_PARENTS = {
    complexfloating: inexact, floating: inexact, inexact: number,
    signedinteger: integer, unsignedinteger: integer, integer: number,
    number: generic, generic: None,
}


def _category_chain(c: DtypeCategory):
    while c is not None:
        yield c
        c = _CATEGORY_PARENTS[c]


def issubdtype(arg1, arg2) -> bool:
    """`issubdtype(mx.float32, mx.floating)` is True; works with Dtypes and categories."""
    a, b = arg1, arg2
    for x, which in ((a, "first"), (b, "second")):
        if x is None:  # MLX's binding refuses None before its own check
            raise TypeError(f"[issubdtype] Expected a dtype or a category for the {which} "
                            "input, got None.")
        if not isinstance(x, (Dtype, DtypeCategory)):
            raise ValueError(f"[issubdtype] Received invalid type for {which} input.")
    if isinstance(a, Dtype) and isinstance(b, Dtype):
        return a is b
    if isinstance(b, Dtype):
        return False
    if isinstance(a, Dtype):
        if a is bool_:
            return b is generic
        return b in _category_chain(a.category)
    return b in _category_chain(a)


_KINDS = {
    "bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
    "real floating": "f", "complex floating": "c", "numeric": "iufc",
}


def isdtype(dtype, kind) -> bool:
    """Whether `dtype` is one of the kinds: a Dtype, a kind name, or a tuple of those.

    `isdtype(mx.int8, "integral")` is True; kind names are the array API's
    ("bool", "signed integer", "unsigned integer", "integral", "real floating",
    "complex floating", "numeric").
    """
    dtype = as_dtype(dtype)  # no dtype (None, an array, a category): MLX's TypeError
    if kind is None:
        raise TypeError("[isdtype] Expected a dtype, a string or a tuple as `kind`, got None.")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, Dtype):
        return dtype is kind
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"[isdtype] Unknown data type kind: '{kind}'.")
        return dtype.kind in _KINDS[kind]
    raise ValueError("[isdtype] `kind` must be a dtype, a string, or a tuple of dtypes and "
                     "strings.")


class finfo:
    """Machine limits of a floating dtype: `finfo(mx.float16).max == 65504.0`."""

    def __init__(self, dtype):
        self.dtype = as_dtype(dtype)
        if self.dtype.kind not in "fc":
            raise ValueError(f"[finfo] dtype {self.dtype} is not inexact.")
        if self.dtype.kind == "c":  # MLX describes complex64 by its float32 parts
            self.dtype = float32
        info = ml_dtypes.finfo(self.dtype.np)
        self.bits = info.bits
        self.min, self.max = float(info.min), float(info.max)
        self.eps = float(info.eps)
        self.smallest_normal = float(info.smallest_normal)

    def __repr__(self):
        return f"finfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype.name})"


class iinfo:
    """Limits of an integer dtype: `iinfo(mx.int8).min == -128`."""

    def __init__(self, dtype):
        self.dtype = as_dtype(dtype)
        if self.dtype.kind not in "iu":
            raise ValueError(f"[iinfo] Only integer types supported but {self.dtype.name} was "
                             "provided")
        info = np.iinfo(self.dtype.np)
        self.min, self.max = int(info.min), int(info.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype.name})"
