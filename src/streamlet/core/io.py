"""Saving and loading arrays: `.npy`, `.npz`, `.safetensors` and `.gguf` (gguf.py), as
`mx.save`/`mx.load`.

bfloat16 travels in `.npy`/`.npz` as NumPy writes ml_dtypes' bfloat16 (descr '<V2', which
MLX reads back as bfloat16) and in safetensors as "BF16". Safetensors is written directly:
an 8-byte little-endian header length, a JSON header, then the raw little-endian data.

>>> import io
>>> f = io.BytesIO(); mx.save(f, mx.arange(3)); _ = f.seek(0)
>>> mx.load(f, format="npy")
array([0, 1, 2], dtype=int32)
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import struct
import weakref
import zipfile

import numpy as np

from . import dtypes as dt
from . import gguf
from .array import array
from .ops import build as ops_build
from .stream import check_usable

_ST_CODES = {"bool": "BOOL", "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64",
             "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64", "float16": "F16",
             "bfloat16": "BF16", "float32": "F32", "float64": "F64", "complex64": "C64"}
# fp8 tensors load as their uint8 bytes (mx.from_fp8 reads them), as in MLX
_ST_DTYPES = {code: dt.from_name(name) for name, code in _ST_CODES.items()} | \
    {"F8_E4M3": dt.uint8, "F8_E8M0": dt.uint8}
_FORMATS = ("npy", "npz", "safetensors", "gguf")


def _path(file, suffix):
    """A str/Path gets `suffix` appended when it lacks it; a file object stays as it is."""
    if isinstance(file, (str, os.PathLike)):
        file = os.fspath(file)
        return file if file.endswith(suffix) else file + suffix
    return file


def _writable(file, suffix, op):
    """`_path(file, suffix)` for a path; a file object as it is; None TypeError and anything
    else ValueError, as in MLX."""
    if file is None:
        raise TypeError(f"[{op}] Expected a file name or a file-like object, got None.")
    if not isinstance(file, (str, os.PathLike)) and not hasattr(file, "write"):
        raise ValueError(f"[{op}] Input must be a file-like object, or string")
    return _path(file, suffix)


def _host(arr, op) -> np.ndarray:
    if not isinstance(arr, array):
        raise TypeError(f"[{op}] Expected an mlx array, got {type(arr).__name__}.")
    return arr.__array__()  # not np.asarray: NumPy reads no bfloat16 buffer


def save(file, arr):
    """Save one array in `.npy` format (the suffix is added to a path that lacks it)."""
    data = _host(arr, "save")
    with _open(_writable(file, ".npy", "save"), "wb", "save") as f:
        np.save(f, data, allow_pickle=False)


def _named(file, args, kwargs, op):
    if file is None:
        raise TypeError(f"[{op}] Expected a file name or a file-like object, got None.")
    for a in (*args, *kwargs.values()):  # a value that is no array is the first error
        if not isinstance(a, array):
            raise TypeError(f"[{op}] Expected an mlx array, got {type(a).__name__}.")
    named = {}
    for i, a in enumerate(args):
        key = f"arr_{i}"
        if key in kwargs:
            raise ValueError(f"[{op}] Cannot use un-named variables and keyword {key}")
        named[key] = a
    named.update(kwargs)
    return {k: _host(v, op) for k, v in named.items()}


def savez(file, *args, **kwargs):
    """Save arrays in an uncompressed `.npz`; positional ones are named arr_0, arr_1, ..."""
    np.savez(_path(file, ".npz"), **_named(file, args, kwargs, "savez"))


def savez_compressed(file, *args, **kwargs):
    """Save arrays in a compressed `.npz`."""
    np.savez_compressed(_path(file, ".npz"), **_named(file, args, kwargs, "savez_compressed"))


def save_safetensors(file, arrays, metadata=None):
    """Save a dict of named arrays (and optional str -> str metadata) as `.safetensors`."""
    op = "save_safetensors"
    if file is None:
        raise TypeError(f"[{op}] Expected a file name or a file-like object, got None.")
    _check_named_arrays(arrays, op)
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"[{op}] Metadata must be a dict, got {type(metadata).__name__}.")
    if metadata is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError(f"[{op}] Metadata must be a dictionary with string keys and values")
    file = _writable(file, ".safetensors", op)
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(arrays):
        a = arrays[name]
        data = np.ascontiguousarray(a.__array__())
        raw = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _ST_CODES[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with _open(file, "wb", op) as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def save_gguf(file, arrays, metadata=None):
    """Save a dict of arrays (float32, float16, int8, int16, int32) as `.gguf`, with
    optional metadata: str, list of str, or 0-d/1-d arrays (integers, bool, float32)."""
    op = "save_gguf"
    _check_named_arrays(arrays, op)
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"[{op}] Metadata must be a dict, got {type(metadata).__name__}.")
    if file is None:
        raise TypeError(f"[{op}] Expected a file name, got None.")
    if not isinstance(file, (str, os.PathLike)):
        raise ValueError(f"[{op}] Input must be a string")
    if any(not isinstance(k, str) for k in (metadata or {})):
        raise TypeError(f"[{op}] Metadata keys must be strings.")
    named = {name: a.__array__() for name, a in arrays.items()}
    meta = {k: v.__array__() if isinstance(v, array) else v
            for k, v in (metadata or {}).items()}
    gguf.save(_path(file, ".gguf"), named, meta)


def _check_named_arrays(arrays, op):
    """A dict of str to arrays, else TypeError (MLX's cast of the argument fails)."""
    if not isinstance(arrays, dict):
        raise TypeError(f"[{op}] Expected a dict of arrays, got {type(arrays).__name__}.")
    for name, a in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"[{op}] Array names must be strings, got "
                            f"{type(name).__name__}.")
        if not isinstance(a, array):
            raise TypeError(f"[{op}] Expected mlx arrays, got {type(a).__name__} for "
                            f"{name!r}.")


class _open:
    """`open(path)` for a path, the object itself (left open) for a file object."""

    def __init__(self, file, mode, op="load"):
        self.file, self.mode, self.op, self.owned = file, mode, op, None

    def __enter__(self):
        if isinstance(self.file, (str, os.PathLike)):
            try:
                self.owned = open(self.file, self.mode)
            except OSError:
                raise RuntimeError(f"[{self.op}] Failed to open file "
                                   f"{os.fspath(self.file)}") from None
            return self.owned
        return self.file

    def __exit__(self, *exc):
        if self.owned is not None:
            self.owned.close()


def _from_numpy(data: np.ndarray) -> array:
    d = _npy_dtype(data.dtype)
    return array(data.view(d.np) if d is dt.bfloat16 else data, d)


def _npy_dtype(descr):
    """The array dtype of a stored NumPy dtype (bfloat16 is NumPy's 'V2'); complex128
    refused."""
    if descr.kind == "V" and descr.itemsize == 2:
        return dt.bfloat16
    if descr == np.complex128:
        raise ValueError("[load] complex128 arrays are not supported; save complex64.")
    return dt.from_numpy(descr.newbyteorder("="))


def _read_npy(xp, file, offset, descr, fortran, shape, close):
    """The data of an `.npy` file from `offset`, in C order and native byte order."""
    count = 1
    for n in shape:
        count *= n
    raw = np.empty(count, descr)
    try:
        file.seek(offset)
        got = file.readinto(raw.view(np.uint8)) or 0
    finally:
        if close:
            file.close()
    if got < raw.nbytes:
        raise RuntimeError(f"[load] The file ends after {got} of the array's {raw.nbytes} "
                           f"bytes.")
    data = raw.reshape(shape, order="F" if fortran else "C")
    if descr.kind == "V":
        data = data.view(dt.bfloat16.np)
    elif not descr.isnative:
        data = data.astype(descr.newbyteorder("="))
    return np.asarray(data, order="C")  # ascontiguousarray would make a 0-d array 1-d


def _unreadable(xp, message):
    raise RuntimeError(message)


_READ_NPY = ops_build.make("load", _read_npy)
_UNREADABLE = ops_build.make("load", _unreadable)


def _load_npy(f, stream, owned):
    """An `.npy` array.  From a file opened here for a CPU stream, read when evaluated, as
    MLX's lazy load does (the header, read now, gives the shape and dtype; the file is
    kept open until then); else read now.  Data cut short fails when evaluated."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        header = fmt.read_array_header_1_0 if version == (1, 0) else \
            fmt.read_array_header_2_0
        shape, fortran, descr = header(f)
    except ValueError as exc:  # not an .npy header: MLX's error is a RuntimeError
        raise RuntimeError(f"[load] Invalid header: {exc}") from None
    shape, d = tuple(shape), _npy_dtype(descr)
    params = {"file": f, "offset": f.tell(), "descr": descr, "fortran": fortran,
              "shape": shape, "close": owned}
    if owned:
        out = ops_build.node(_READ_NPY, (), shape, d, params, ops_build.resolve(stream))
        weakref.finalize(out._node, f.close)  # never evaluated: closed quietly all the same
        return out
    try:
        return array(_read_npy(np, **params), d)
    except RuntimeError as exc:
        return ops_build.node(_UNREADABLE, (), shape, d, {"message": str(exc)},
                              ops_build.resolve(stream))


def _load_safetensors(f):
    op = "[load_safetensors]"
    head = f.read(8)
    (size,) = struct.unpack("<Q", head) if len(head) == 8 else (0,)
    if not 0 < size < 100_000_000:
        raise RuntimeError(f"{op} Invalid json header length.")
    text = f.read(size)
    if len(text) < size:
        raise RuntimeError(f"{op} The JSON header is {size} bytes long but the file is "
                           f"shorter. Perhaps an incomplete download or corrupt file?")
    try:
        header = json.loads(text)
    except ValueError as exc:
        raise RuntimeError(f"{op} Invalid json metadata: {exc}") from None
    if not isinstance(header, dict):
        raise RuntimeError(f"{op} Invalid json metadata.")
    body = f.read()
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str)
                                                 for v in metadata.values()):
        # MLX reads each metadata value as a string (a tensor named __metadata__ too)
        raise RuntimeError(f"{op} The metadata values must be strings.")
    out = {}
    for name, info in header.items():
        d = _ST_DTYPES.get(info["dtype"])
        if d is None:
            raise RuntimeError(f"[safetensor] unsupported dtype {info['dtype']}")
        offsets, shape = info["data_offsets"], info["shape"]
        if len(offsets) != 2:
            raise RuntimeError(f"{op} Tensor '{name}' data_offsets must have exactly 2 "
                               f"entries but has {len(offsets)}")
        start, stop = offsets
        nbytes = d.size * int(np.prod(shape, dtype=np.int64))
        if stop < start or stop - start != nbytes:
            raise RuntimeError(f"{op} Tensor '{name}' invalid data offsets ({start}, "
                               f"{stop}). Expecting {nbytes} bytes.")
        if stop > len(body):
            raise RuntimeError(f"{op} Tensor '{name}' invalid data offsets ({start}, "
                               f"{stop}) exceeding the size of the file. Perhaps an "
                               f"incomplete download or corrupt file?")
        data = np.frombuffer(body[start:stop], dtype=d.np.newbyteorder("<"))
        out[name] = array(data.astype(d.np, copy=False).reshape(info["shape"]), d)
    return out, metadata


def _format(file, format):
    if format is not None:
        return format
    name = file if isinstance(file, (str, os.PathLike)) else getattr(file, "name", None)
    if name is None:
        raise ValueError("[load] The format must be given for a file object without a name.")
    suffix = pathlib.Path(os.fspath(name)).suffix
    return suffix[1:] if suffix else ""


def _is_zip(file):
    if isinstance(file, (str, os.PathLike)):
        return zipfile.is_zipfile(file)
    at = file.tell()
    try:
        return zipfile.is_zipfile(file)
    finally:
        file.seek(at)


def load(file, /, format=None, return_metadata=False, *, stream=None):
    """Load an array (`.npy`) or a dict of arrays (`.npz`, `.safetensors`, `.gguf`).

    With `return_metadata=True` (safetensors and gguf) the result is `(arrays, metadata)`.
    """
    if stream is not None:  # the read (now, or when evaluated) runs there: usable from here
        check_usable(ops_build.resolve(stream))
    path = isinstance(file, (str, os.PathLike))
    if not path and (isinstance(file, io.TextIOBase) or "b" not in getattr(file, "mode", "b")):
        raise ValueError("[load] Input must be a file-like object opened in binary mode, or "
                         "string")
    fmt = _format(file, format)
    if fmt not in _FORMATS:
        raise ValueError(f"[load] Unknown file format {fmt}")
    if fmt == "gguf":
        if not path:
            raise ValueError("[load_gguf] Input must be a string")
        tensors, meta = gguf.load(os.fspath(file))
        arrays = {k: _from_numpy(v) for k, v in tensors.items()}
        meta = {k: _from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in meta.items()}
        return (arrays, meta) if return_metadata else arrays
    if return_metadata and fmt != "safetensors":
        raise ValueError(f"[load] metadata not supported for format {fmt}")
    if fmt == "npy" and isinstance(file, (str, os.PathLike)) and \
            not ops_build.resolve(stream).gpu:  # a GPU stream's load is read now, on the host
        f = _open(file, "rb").__enter__()  # kept open for the lazy read, which closes it
        try:
            return _load_npy(f, stream, owned=True)
        except BaseException:
            f.close()
            raise
    if fmt == "npz" and not _is_zip(file):  # a missing file too, as in MLX
        raise ValueError("[load_npz] Input must be a zip file or a file-like object that "
                         "can be opened with zipfile.ZipFile")
    with _open(file, "rb") as f:
        if fmt == "safetensors":
            arrays, metadata = _load_safetensors(f)
            return (arrays, metadata) if return_metadata else arrays
        if fmt == "npy":
            return _load_npy(f, stream, owned=False)
        try:
            with np.load(f, allow_pickle=False) as z:
                # MLX drops a member's ".npy" only from a longer name: ".npy" stays
                return {k or ".npy": _from_numpy(z[k]) for k in z.files}
        except zipfile.BadZipFile as exc:
            raise ValueError(f"[load] Not a valid .npz file: {exc}") from None


__all__ = ["load", "save", "save_gguf", "save_safetensors", "savez", "savez_compressed"]
