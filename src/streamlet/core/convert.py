"""Python values to arrays and arrays to NumPy, as MLX 0.32.4 converts them.

`create(v, dtype, copy)` is what `array(v, dtype)` (copy=True), `asarray(v, dtype, copy=)`
and `from_dlpack(v, copy=)` make of `v` (MLX's python/src/convert.cpp, `create_array`):
- objects with `__dlpack__` or the buffer protocol (NumPy arrays and scalars, bytes,
  memoryview, ...) are copied, keeping their strides (a transposed or broadcast source
  stays so); float64 becomes float32 and complex128 complex64 unless `dtype` says
  otherwise; negative strides and dimensions beyond 32 bits raise.  `copy=False` raises
  on the CPU, as MLX's CPU build does (only unified memory lets MLX adopt a host
  buffer); a CUDA source is shared with `copy=False`, copied otherwise;
- Python scalars take bool, int32 (int64 when the value needs it), float32, complex64;
- nested lists and tuples of Python scalars take the widest of those kinds; lists
  holding arrays are `stack`ed (so the result stays in the graph and promotes as `stack`
  does: uint8 with int8 is int16); anything else in a list raises ValueError;
- arrays are cast to `dtype` (copied when `copy` is True), objects with `__mlx_array__`
  are what it returns.

`numpy_view(owner, data)` is the NumPy array `np.asarray(a)` hands out: a view of the
array's buffer (writable, as in MLX, unless the buffer is read-only) that keeps the
array handle alive while it lives.
"""
from __future__ import annotations

import numpy as np

from . import array as _arrays  # the module: it imports this one
from . import dtypes as dt

_BOOL, _INT, _FLOAT, _COMPLEX = range(4)  # kinds of Python scalars, in promotion order
_KIND = {bool: _BOOL, int: _INT, float: _FLOAT, complex: _COMPLEX}
_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_NARROW = {np.dtype(np.float64): dt.float32, np.dtype(np.complex128): dt.complex64}
_HEAPTYPE = 1 << 9
_CUDA = 2


def type_name(x) -> str:
    """The name MLX's messages give the type of `x` (`str`, `ndarray`, `__main__.A`)."""
    t = type(x)
    return f"{t.__module__}.{t.__name__}" if t.__flags__ & _HEAPTYPE else t.__name__


def _invalid(x):
    return ValueError(f"Invalid type {type_name(x)} received in array initialization.")


def create(v, dtype=None, copy=None):
    """`v` as a NumPy array (the data of a new array) or an array (a lazy op): what
    `mx.array(v, dtype)` holds, `create([1, 2.5])` a float32 NumPy array."""
    t = type(v)
    if t is list or t is tuple:
        _no_copy(copy)
        return _from_sequence(v, dtype)
    if t in _KIND:
        _no_copy(copy)
        return _from_scalar(v, t, dtype)
    if isinstance(v, _arrays.array):
        _no_copy(copy)
        return _cast(v, dtype, copy)
    if is_buffer(v):
        return from_buffer(v, dtype, copy)
    _no_copy(copy)
    for kind in (bool, int, float, complex):  # subclasses of the Python scalars
        if isinstance(v, kind):
            return _from_scalar(v, kind, dtype)
    if isinstance(v, (list, tuple)):
        return _from_sequence(v, dtype)
    if hasattr(v, "__mlx_array__"):
        return _cast(v.__mlx_array__(), dtype, False)
    if v is None:
        raise TypeError("[array] Cannot make an array from None.")
    raise _invalid(v)


def _no_copy(copy):
    if copy is False:
        raise ValueError("Unable to avoid copy while creating an array as requested.")


def _cast(a, dtype, copy):
    from .ops.creation import _ASTYPE, astype
    from .ops.build import node, resolve
    d = a._dtype if dtype is None else dt.as_dtype(dtype)
    if not copy:
        return astype(a, d)
    return node(_ASTYPE, (a,), a._shape, d, {"dtype": d.np}, resolve(None))


# -- Python scalars, lists and tuples --------------------------------------------------
def _from_scalar(v, kind, dtype):
    if kind is bool:
        return _convert(np.array(v, np.bool_), dtype or dt.bool_)
    if kind is int:
        wide = not _INT32_MIN <= v <= _INT32_MAX
        if wide:
            _int64(v)
        return _ints(v, dtype or (dt.int64 if wide else dt.int32), wide, False)
    if kind is float:
        return _floats(v, dtype or dt.float32)
    return _complexes(v, dtype or dt.complex64)


def _convert(values, d):
    if values.dtype == d.np:
        return values
    with np.errstate(all="ignore"):  # C's conversions, as MLX's: no warnings
        return values.astype(d.np)


# A list of ints for these dtypes is read as C ints by MLX (`array_from_list_impl`)
_VIA_C_INT = frozenset((dt.bool_, dt.int8, dt.int16, dt.int32, dt.uint8, dt.uint16))


def _ints(values, d, wide, sequence):
    """Python ints (`wide`: some beyond int32) as `d`.  Where MLX refuses them, so do we,
    with OverflowError: any beyond int64 (MLX reads every int as int64 first), and in a list
    for a type of `_VIA_C_INT`, any beyond int32.  A value the dtype cannot hold raises too
    (MLX casts it as C does: `array(300, int8)` is 44 there)."""
    if wide:
        as64 = np.array(values, np.int64)  # OverflowError beyond int64
        if sequence and d in _VIA_C_INT:
            raise OverflowError(f"[array] A list of Python ints for {d.name} must hold "
                                f"32-bit ints (MLX reads it as C ints); it holds "
                                f"{as64.min() if as64.min() < _INT32_MIN else as64.max()}.")
    if d.kind in "iu":
        return np.array(values, d.np)  # OverflowError for a value the dtype cannot hold
    if d is dt.float64 or d.kind == "b":
        return _convert(np.array(values, np.int64 if d.kind == "b" else np.float64), d)
    return _convert(np.array(values, np.float32), d)  # as MLX: through float32


def _floats(values, d):
    """Python floats as `d`: float64 exactly, the other float types through float32 (as MLX
    reads them), integer and bool types from the exact values (MLX casts each double: so
    `array([16777217.0], int32)` is 16777217 and `array(1e-50, bool_)` True)."""
    if d is dt.float64:
        return np.array(values, np.float64)
    if d.kind in "iub":
        return _convert(np.array(values, np.float64), d)
    if type(values) is float and -_FLOAT32_MAX <= values <= _FLOAT32_MAX:
        return _convert(np.array(values, np.float32), d)
    with np.errstate(over="ignore"):  # as MLX: through float32, large values to inf
        return _convert(np.array(values, np.float32), d)


def _complexes(values, d):
    data = np.array(values, np.complex64)
    # the real parts contiguous: NumPy's strided float -> int cast gives other values for
    # floats out of range (-inf as uint32 is 0 there, 2**31 in MLX and NumPy's contiguous one)
    return _convert(data if d.kind == "c" else data.real.copy(), d)


_BUILD = {_BOOL: lambda s, d: _convert(np.array(s, np.bool_), d or dt.bool_),
          _FLOAT: lambda s, d: _floats(s, d or dt.float32),
          _COMPLEX: lambda s, d: _complexes(s, d or dt.complex64)}


def _from_sequence(seq, dtype):
    d = None if dtype is None else dt.as_dtype(dtype)
    shape = _sequence_shape(seq)
    scan = _Scan(shape)
    kind = scan.check(seq, 0)
    if not scan.arrays:
        if kind == _INT:
            return _ints(seq, d or (dt.int64 if scan.wide else dt.int32), scan.wide, True)
        return _BUILD[kind](seq, d)
    from .ops import stack
    return stack([_arrays.to_array(create(x, d)) for x in seq])


def _sequence_shape(seq) -> tuple:
    """The shape the first elements give, as MLX reads it (a list of arrays takes their
    shape after its length)."""
    shape = []
    while True:
        shape.append(check_dim(len(seq)))
        if not seq:
            return tuple(shape)
        first = seq[0]
        if isinstance(first, (list, tuple)):
            seq = first
            continue
        if isinstance(first, _arrays.array):
            shape.extend(first._shape)
        return tuple(shape)


def _scalar_kind(t):
    """The kind of a Python scalar type (or subclass: NumPy's float64 is a float), else
    None."""
    kind = _KIND.get(t)
    if kind is None:
        for base, k in _KIND.items():
            if issubclass(t, base):
                return k
    return kind


_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _int64(x):
    """MLX reads each int of a list as int64 while it checks the list, whatever the list's
    kind: one beyond it is refused there (before any later element is looked at)."""
    if not _INT64_MIN <= x <= _INT64_MAX:
        raise OverflowError(f"[array] Python int {x} is outside the int64 range.")


class _Scan:
    """MLX's check of a nested sequence against its shape: the widest scalar kind in it,
    whether it holds an int beyond int32 and whether it holds arrays."""

    def __init__(self, shape):
        self.shape, self.wide, self.arrays = shape, False, False

    def check(self, seq, depth) -> int:
        shape = self.shape
        if depth >= len(shape):
            raise ValueError("Initialization encountered extra dimension.")
        if len(seq) != shape[depth]:
            raise ValueError("Initialization encountered non-uniform length.")
        if not seq:
            return _FLOAT
        leaf = depth + 1 == len(shape)
        if leaf:  # the common case, a row of scalars, judged by the types in it
            kinds = [_scalar_kind(t) for t in set(map(type, seq))]
            if None not in kinds:
                kind = max(kinds)
                if kind == _INT:
                    lo, hi = min(seq), max(seq)
                    if not _INT32_MIN <= lo <= hi <= _INT32_MAX:
                        self.wide = True
                        _int64(lo), _int64(hi)
                elif _INT in kinds:  # MLX reads every int as int64 first
                    for x in seq:
                        if type(x) is not bool and isinstance(x, int):
                            _int64(x)
                return kind
        return max(self._element(x, depth, leaf, isinstance(seq[0], tuple)) for x in seq)

    def _element(self, x, depth, leaf, tuples) -> int:
        # MLX takes a tuple as a row only where the first element of its sequence is one
        if isinstance(x, list) or (tuples and isinstance(x, tuple)):
            return self.check(x, depth + 1)
        if isinstance(x, _arrays.array):
            self.arrays = True
            if x._shape != self.shape[depth + 1:]:
                raise ValueError("Initialization encountered non-uniform length.")
            return _BOOL
        if isinstance(x, bool):
            kind = _BOOL
        elif isinstance(x, int):
            kind = _INT
            self.wide = self.wide or not _INT32_MIN <= x <= _INT32_MAX
            if self.wide:
                _int64(x)
        elif isinstance(x, float):
            kind = _FLOAT
        elif isinstance(x, complex):
            kind = _COMPLEX
        else:
            raise _invalid(x)
        if not leaf:
            raise ValueError("Initialization encountered non-uniform length.")
        return kind


# -- buffers and DLPack -----------------------------------------------------------------
def is_buffer(v) -> bool:
    """What MLX (nanobind) takes as an n-dimensional array: DLPack or the buffer protocol."""
    if isinstance(v, (np.ndarray, np.generic, bytes, bytearray, memoryview)):
        return True
    if hasattr(v, "__dlpack__"):
        return True
    if isinstance(v, (str, list, tuple, dict)) or v is None:
        return False
    try:
        memoryview(v)
    except TypeError:
        return False
    return True


def check_dim(n: int) -> int:
    """A dimension as MLX's 32-bit shapes hold it, else MLX's OverflowError."""
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise OverflowError(f"Shape dimension {n} is outside the supported range "
                            f"[{_INT32_MIN}, {_INT32_MAX}]. MLX currently uses 32-bit "
                            "integers for shape dimensions.")
    return n


def from_buffer(v, dtype=None, copy=None):
    """An object with `__dlpack__` or the buffer protocol as a NumPy array (a copy that
    keeps its layout) or, for a CUDA source, an array on the GPU."""
    if isinstance(v, np.generic):  # a NumPy scalar (bfloat16 has no buffer format)
        v = np.asarray(v)
    elif not isinstance(v, np.ndarray):
        if hasattr(v, "__dlpack__"):
            device = v.__dlpack_device__()[0] if hasattr(v, "__dlpack_device__") else 1
            if device == _CUDA:
                return _from_cuda(v, dtype, copy)
            v = _from_dlpack(v)
        else:
            v = np.asarray(memoryview(v))
    if not v.dtype.isnative and v.dtype.itemsize > 1:  # nanobind's cast fails (bad_cast)
        raise RuntimeError(f"[convert] Cannot convert an array of non-native byte order "
                           f"({v.dtype.str}) to mlx.")
    try:
        src = _NARROW.get(v.dtype) or dt.from_numpy(v.dtype)
    except TypeError:  # str, object, float128, ...: nanobind's cast fails there too
        raise RuntimeError(f"[convert] Cannot convert an array of NumPy dtype {v.dtype} to "
                           "mlx.") from None
    d = src if dtype is None else dt.as_dtype(dtype)
    if copy is False and d is not src:
        raise ValueError("[convert] Cannot convert array to the requested dtype without a "
                         "copy.")
    for n in v.shape:
        check_dim(n)
    if copy is False:
        raise ValueError("[convert] Cannot import a CPU array without a copy.")
    return copy_layout(v, d.np)


def _detached(v):
    """A PyTorch tensor that requires grad as its values (PyTorch refuses to export it)."""
    if getattr(v, "requires_grad", False) and callable(getattr(v, "detach", None)):
        return v.detach()
    return v


def _not_convertible():
    return ValueError("[convert] Cannot convert array to mlx.")  # MLX's words


def _from_dlpack(v) -> np.ndarray:
    """`np.from_dlpack(v)`, and what MLX takes that NumPy does not: a PyTorch tensor that
    requires grad (its values) and DLPack's bfloat16.  A type MLX has no dtype for
    (torch.complex32, an opaque handle) raises MLX's ValueError, whichever error NumPy
    gave (RuntimeError before NumPy 2.5, BufferError since)."""
    v = _detached(v)
    try:
        return np.from_dlpack(v)
    except (BufferError, RuntimeError, TypeError) as exc:
        from . import capsule
        try:
            handed = v.__dlpack__()  # legacy: what every producer gives without max_version
            bf16 = capsule.is_bfloat16(handed)
            convertible = bf16 or capsule.is_convertible(handed)
        except Exception:
            raise exc from None
        if bf16:
            return capsule.import_bfloat16(handed)
        if not convertible:
            raise _not_convertible() from None
        raise


def copy_layout(src: np.ndarray, npdtype) -> np.ndarray:
    """A copy of `src` in `npdtype` with `src`'s strides (MLX copies the memory the strides
    span, so a broadcast source stays broadcast)."""
    for n, stride in zip(src.shape, src.strides):  # as MLX checks: up to the first 0 size
        if n == 0:
            break
        if stride < 0:
            raise ValueError("Cannot convert DLPack arrays with negative strides to mlx "
                             "array.")
    if src.flags.c_contiguous or any(s % src.itemsize for s in src.strides):
        return _copy(src, npdtype)
    steps = [s // src.itemsize for s in src.strides]
    span = 1 + sum((n - 1) * s for n, s in zip(src.shape, steps))
    data = _copy(np.lib.stride_tricks.as_strided(src, (span,), (src.itemsize,)), npdtype)
    return np.lib.stride_tricks.as_strided(data, src.shape, [s * data.itemsize for s in steps])


def _copy(src, npdtype):
    if src.dtype == npdtype:
        return src.copy(order="K")
    npdtype = np.dtype(npdtype)
    with np.errstate(all="ignore"):  # C's conversions, as MLX's: no warnings
        if src.dtype.kind == "c" and npdtype.kind != "c":
            # a complex value cast to a real type keeps its real part, as a float32 (MLX's
            # complex128_t converts through float), copied first: NumPy's strided float ->
            # int cast differs from its contiguous one out of range
            src = src.real.astype(np.float32, order="K")
        elif src.dtype == np.float64 and npdtype == np.float16:
            src = src.astype(np.float32, order="K")  # MLX's float16_t rounds a double so
        return src.astype(npdtype, order="K")


def _cuda_capsule(v, stream_ptr):
    """`v`'s DLPack capsule for a consumer on the CUDA stream `stream_ptr` (the producer
    orders its work before that stream), as cupy.from_dlpack asks for one."""
    try:
        return v.__dlpack__(stream=stream_ptr, max_version=(1, 0))
    except TypeError:  # a producer of DLPack before 1.0
        return v.__dlpack__(stream=stream_ptr)


def _from_cuda(v, dtype, copy):
    """A CUDA source as an array on the GPU: copied on the GPU stream the array belongs to
    (shared with `copy=False`).  bfloat16, which CuPy does not read, is imported as its
    uint16 bits (the capsule retyped) and held as the backend holds bfloat16 (`BF16`)."""
    from ..backend import gpu_count
    if gpu_count() == 0:
        raise ValueError("[from_dlpack] The object lives on a CUDA device but streamlet has no "
                         "GPU backend here.")
    import cupy

    from ..backend import cuda
    from . import capsule
    from .device import gpu
    from .graph import Node
    from .stream import default_stream, resolve
    state = resolve(default_stream(gpu))
    h = cuda.handle(state)
    v = _detached(v)
    device = v.__dlpack_device__()
    with h.device, h.stream:
        cap = _cuda_capsule(v, h.stream.ptr)
        bf16 = capsule.is_bfloat16(cap)
        if bf16:
            capsule.to_uint16(cap)
        elif not capsule.is_convertible(cap):
            raise _not_convertible()
        data = cupy.from_dlpack(capsule.Handed(cap, device))  # CuPy reads it as it is
        src = dt.bfloat16 if bf16 else _NARROW.get(np.dtype(data.dtype)) or \
            dt.from_numpy(data.dtype)
        d = src if dtype is None else dt.as_dtype(dtype)
        if copy is False and (d is not src or not bf16 and data.dtype != d.np):  # float64
            raise ValueError("[convert] Cannot convert array to the requested dtype without "
                             "a copy.")
        for n in data.shape:
            check_dim(n)
        if copy is not False:  # the source may change later: the array must not follow it
            if d is src:
                data = data.astype(data.dtype if bf16 else d.np, copy=True)
            elif bf16:
                data = cuda._from_bf16(data).astype(d.np)
            elif d is dt.bfloat16:
                data = cuda._to_bf16(data.real if data.dtype.kind == "c" else data)
            else:
                data = data.astype(d.np, copy=True)
            # done before returning: the producer's later work (a write, a free of the
            # source) is not ordered after this stream's
            h.stream.synchronize()
    if d is dt.bfloat16:
        return _arrays.wrap(Node(tuple(data.shape), dt.bfloat16, stream=state,
                                 data=cuda.BF16(data)))
    return _arrays.leaf(data, state)


# -- arrays to NumPy ---------------------------------------------------------------------
class _Owner:
    """The base of a NumPy view handed out for an array: the array and its buffer."""

    __slots__ = ("__array_struct__", "array")


def numpy_view(owner, data):
    """A view of `data` whose base keeps the array `owner` alive (the buffer stays the
    array's: writing to the view writes to the array, as in MLX)."""
    if not isinstance(data, np.ndarray):  # a NumPy scalar: a 0-d copy
        return np.array(data)
    keep = _Owner()
    keep.__array_struct__, keep.array = data.__array_struct__, owner
    view = np.asarray(keep)
    return view if view.dtype == data.dtype else view.view(data.dtype)
