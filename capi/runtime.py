"""The Python half of libstreamlet_c: handles, conversions and helpers for the glue.

This file runs inside the library's interpreter (cffi's embedding init code),
before the glue that capi/gen.py writes from capi/api.txt and capi/ops.txt;
`ffi` and `lib` are the library's own. A C handle's `ctx` is a key into `H`,
which holds the Python object (an array, a Stream, a list for a vector, a
dict for a map, a `CStr` for a string). Keys are never reused, so a freed
handle cannot reach a newer object.
"""
import builtins
import copy as _copy
import itertools
import math

import numpy as np

import streamlet.core as mx

H = {}  # key -> the object a handle names
_keep = {}  # key -> buffers whose addresses the C caller holds (shape, data)
_ids = itertools.count(1)


def _put(old, value):
    """Store `value` in the handle whose key is `old` (or in a new one); return the key."""
    if old in H:
        _keep.pop(old, None)
        H[old] = value
        return old
    key = next(_ids)
    H[key] = value
    return key


def _drop(key):
    H.pop(key, None)
    _keep.pop(key, None)


class _Code(Exception):
    """A non-zero status that is not an error (MLX-C's 2: key absent, end of iteration)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _message(err):
    if isinstance(err, KeyError) and err.args and isinstance(err.args[0], str):
        return err.args[0]
    text = str(err)
    return text if text else type(err).__name__


def _fail(err, name, handles):
    """Report `err` (raised in C function `name`) through the error handler; return 1."""
    if type(err) is _Code:
        return err.code
    for key, kind in handles:
        if key not in H:
            msg = f"[{name}] expected a non-empty {kind}"
            break
    else:
        msg = _message(err)
    lib._sl_report(msg.encode("utf-8", "replace"))
    return 1


class CStr(str):
    """A str that also keeps a NUL-terminated copy whose address C code may hold."""

    __slots__ = ("buf",)


def _cs(s):
    if type(s) is CStr:
        return s
    return CStr(s)


_interned = {}


def _cbuf(s):
    """The char buffer of `s`, alive as long as `s` (or for good, for a plain str)."""
    if type(s) is not CStr:
        s = _interned.setdefault(s, CStr(s))
    try:
        return s.buf
    except AttributeError:
        s.buf = ffi.new("char[]", s.encode("utf-8"))
        return s.buf


def _str(p):
    return ffi.string(p).decode("utf-8")


def _ints(p, n):
    return ffi.unpack(p, n) if n else []


def _opt_ints(p, n):
    return None if p == ffi.NULL else _ints(p, n)


def _handles(p, n):
    return [H[k] for k in ffi.unpack(p, n)] if n else []


def _strs(p, n):
    return [_cs(_str(q)) for q in ffi.unpack(p, n)] if n else []


# the order of MLX-C's enums
_DT = [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16, mx.int32,
       mx.int64, mx.float16, mx.float32, mx.float64, mx.bfloat16, mx.complex64]
_DTI = {d: i for i, d in enumerate(_DT)}
_DEVT = [mx.cpu, mx.gpu]
_DEVTI = {d: i for i, d in enumerate(_DEVT)}
_NORM = ["backward", "ortho", "forward"]
_CTYPES = {"bool": mx.bool_, "uint8": mx.uint8, "uint16": mx.uint16, "uint32": mx.uint32,
           "uint64": mx.uint64, "int8": mx.int8, "int16": mx.int16, "int32": mx.int32,
           "int64": mx.int64, "float32": mx.float32, "float64": mx.float64,
           "complex64": mx.complex64}


def _dtype(i):
    if not 0 <= i < len(_DT):
        raise ValueError(f"Invalid mlx_dtype {i}.")
    return _DT[i]


def _device_type(i):
    if not 0 <= i < len(_DEVT):
        raise ValueError(f"Invalid mlx_device_type {i}.")
    return _DEVT[i]


def _norm(i):
    if not 0 <= i < len(_NORM):
        raise ValueError(f"Invalid mlx_fft_norm {i}.")
    return _NORM[i]


# how an output handle stores a Python value, by handle type
def _store_str(v):
    return _cs(v)


def _store_list(v):
    return list(v)


def _store_strs(v):
    return [_cs(x) for x in v]


def _store_map_arrays(v):
    return {_cs(k): x for k, x in v.items()}


def _store_map_strs(v):
    return {_cs(k): _cs(x) for k, x in v.items()}


def _store_info(v):
    return {_cs(k): (_cs(x) if isinstance(x, str) else x) for k, x in v.items()}


def _from_data(p, shape, dtype):
    """A new array holding a copy of the C buffer at `p`."""
    if any(d < 0 for d in shape):
        raise ValueError(f"[mlx_array_new_data] Negative dimension in shape {tuple(shape)}.")
    n = math.prod(shape)
    dt = np.dtype(dtype.np)
    if n and p == ffi.NULL:
        raise ValueError("[mlx_array_new_data] data is NULL.")
    buf = np.frombuffer(ffi.buffer(p, n * dt.itemsize), dtype=dt) if n else np.empty(0, dt)
    return mx.array(buf.reshape(shape).copy(), dtype)


def _kept(key, arr):
    """The buffers kept for handle `key` while it names `arr` (dropped with the handle)."""
    kept = _keep.get(key)
    if kept is None or kept[0] is not arr:
        kept = _keep[key] = (arr, {})
    return kept[1]


def _shape(key, arr):
    bufs = _kept(key, arr)
    if "shape" not in bufs:
        bufs["shape"] = ffi.new("int[]", list(arr.shape) or [0])
    return bufs["shape"]


def _strides(key, arr):
    bufs = _kept(key, arr)
    if "strides" not in bufs:
        strides, step = [], 1
        for d in reversed(arr.shape):
            strides.append(step)
            step *= d
        bufs["strides"] = ffi.new("size_t[]", strides[::-1] or [0])
    return bufs["strides"]


def _dim(arr, dim):
    n = arr.ndim
    if not -n <= dim < n:
        raise ValueError(f"[mlx_array_dim] Dimension {dim} is out of range for an array "
                         f"with {n} dimensions.")
    return arr.shape[dim]


def _check_type(arr, ctype, what):
    want = _CTYPES[ctype]
    if arr.dtype != want:
        raise ValueError(f"[mlx_array_{what}_{ctype}] The array has dtype {arr.dtype}, "
                         f"not {want}.")


def _item(arr, ctype):
    _check_type(arr, ctype, "item")
    if arr.size != 1:
        raise ValueError("[mlx_array_item] item can only be called on arrays of size 1.")
    return arr.item()


def _data(key, arr, ctype):
    _check_type(arr, ctype, "data")
    bufs = _kept(key, arr)
    if "data" not in bufs:  # contiguous host memory: a view on the CPU, a copy from a GPU
        bufs["data"] = np.ascontiguousarray(np.asarray(arr))
    return ffi.cast("void*", bufs["data"].ctypes.data)


def _info_get(info, key, kind):
    value = info.get(key)
    if value is None or isinstance(value, str) != (kind is str):
        raise _Code(2)
    return value


def _insert(mapping, key, value):
    mapping[_cs(key)] = _cs(value) if isinstance(value, str) else value


def _lookup(mapping, key):
    try:
        return mapping[key]
    except KeyError:
        raise _Code(2) from None


class _Iter:
    """A map iterator: the items when it was made, in insertion order."""

    def __init__(self, mapping):
        self.items = [(_cs(k), v) for k, v in mapping.items()]
        self.pos = 0

    def next(self):
        if self.pos >= len(self.items):
            raise _Code(2)
        self.pos += 1
        return self.items[self.pos - 1]


def _version():
    return mx.__version__


def _one(shift):
    return shift[0] if len(shift) == 1 else tuple(shift)


def _pair(keys):
    return keys[0], keys[1]


def _tolist(res):
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _pad(a, axes, low, high, value, mode, s):
    if not len(axes) == len(low) == len(high):
        raise ValueError("[pad] axes, low_pad_size and high_pad_size must have the same "
                         f"length, got {len(axes)}, {len(low)} and {len(high)}.")
    widths = [(0, 0)] * a.ndim
    for ax, lo, hi in zip(axes, low, high):
        widths[ax] = (lo, hi)
    return mx.pad(a, widths, mode, value, stream=s)


def _slices(a, start, stop, strides, name):
    if not len(start) == len(stop) == len(strides) == a.ndim:
        raise ValueError(f"[{name}] start, stop and strides must have one entry per "
                         f"dimension ({a.ndim}), got {len(start)}, {len(stop)} and "
                         f"{len(strides)}.")
    return tuple(builtins.slice(b, e, st) for b, e, st in zip(start, stop, strides))


def _slice(a, start, stop, strides, s):
    with mx.stream(s):
        return a[_slices(a, start, stop, strides, "slice")]


_AT = {"add": "add", "max": "maximum", "min": "minimum", "prod": "multiply"}


def _slice_update(src, update, start, stop, strides, s, how):
    idx = _slices(src, start, stop, strides, "slice_update")
    with mx.stream(s):
        if how is not None:
            return getattr(src.at[idx], _AT[how])(update)
        out = _copy.copy(src)
        out[idx] = update
        return out


class _CClosure:
    """A closure over a C function (kinds as in closure.h); calling it runs that function.

    Arguments go in as a new vector handle (an array handle for kind 2), the
    results come back in handles the function set; all are dropped afterwards.
    """

    def __init__(self, kind, fun, payload, dtor):
        if not 0 <= kind <= 4 or fun == ffi.NULL:
            raise ValueError(f"[mlx_closure] Invalid closure (kind {kind}).")
        self.kind, self.fun, self.payload, self.dtor = kind, fun, payload, dtor

    def __call__(self, *args):
        unary, pair = self.kind == 2, self.kind >= 3
        arg = _put(0, args[0] if unary else list(args))
        out = ffi.new("uintptr_t[2]")
        if not unary:
            out[0] = _put(0, [])
            out[1] = _put(0, []) if pair else 0
        try:
            rc = lib._sl_apply_c(self.kind, self.fun, self.payload, out, arg)
            if rc:
                raise RuntimeError(f"[mlx_closure] The closure's C function returned {rc}.")
            if unary:
                return [H[out[0]]]
            return (list(H[out[0]]), list(H[out[1]])) if pair else list(H[out[0]])
        finally:
            _drop(arg)
            _drop(out[0])
            _drop(out[1])

    def __del__(self):
        if self.dtor != ffi.NULL:
            lib._sl_call_dtor(self.dtor, self.payload)


def _value_and_grad(fun, argnums):
    """value_and_grad of a closure (vector -> vector): values are all of fun's outputs,
    gradients are of the first one with respect to the arguments in `argnums`."""
    def loss(*args):
        outs = fun(*args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    vag = mx.value_and_grad(loss, argnums=list(argnums))

    def run(*args):
        value, grads = vag(*args)
        return _tolist(value), _tolist(grads)

    return run
