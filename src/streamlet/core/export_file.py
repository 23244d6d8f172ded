"""The file an exported function is written to, and what it names: primitives by a stable
name, their params as tagged JSON, constant arrays as raw bytes.

The format is streamlet's own (MLX's `.mlxfn` files are not read, and MLX does not read
these).  Layout: a 16-byte magic, the constants' little-endian bytes (each at a 64-byte
boundary), then a JSON footer, its length (8 bytes, little-endian) and an 8-byte end mark.
A trace added by `mx.exporter` writes its new constants over the old footer, then a new
footer, so the file is whole after every trace and each constant is stored once.  Nothing
in the file is executed: params are plain values (numbers, strings, tuples, slices, dtypes,
arrays as constant references, primitives by name, streamlet's own `__slots__` records by
their fields), and a primitive whose params hold anything else (a function, a
communication group) cannot be exported.

The primitives are found, not listed: every primitive the modules of streamlet define
(module globals, tables, and the closures of op builders) is named by where it is found,
as `core.ops.elementwise:add.direct` (the op modules first, so a primitive keeps the name
of the table that defines it).
"""
from __future__ import annotations

import importlib
import json
import math
import struct
import sys
import threading
import types

import numpy as np

from . import dtypes as dt
from .graph import Primitive

MAGIC = b"streamlet.fn\x00v1\x00"
END = b"slfn.end"
ALIGN = 64
FORMAT_VERSION = 1


class Unserializable(Exception):
    """A params value the format cannot hold (its type is the message)."""


# -- the primitives, by name ---------------------------------------------------------------
_names: dict = {}  # stable name -> Primitive
_keys: dict = {}  # id(Primitive) -> stable name
_walked: set = set()  # modules already searched
_lock = threading.Lock()  # guards the three tables above while a walk fills them


def _visit(value, path, depth, seen):
    if isinstance(value, Primitive):
        _names.setdefault(path, value)
        _keys.setdefault(id(value), path)
        return
    if depth > 4 or id(value) in seen:
        return
    if isinstance(value, dict):
        seen.add(id(value))
        for k, v in list(value.items()):
            _visit(v, f"{path}[{k!r}]", depth + 1, seen)
    elif isinstance(value, (list, tuple)):
        seen.add(id(value))
        for k, v in enumerate(value):
            _visit(v, f"{path}[{k}]", depth + 1, seen)
    elif isinstance(value, types.FunctionType) and value.__closure__ and \
            (value.__module__ or "").startswith("streamlet"):
        seen.add(id(value))  # an op builder: its primitives live in its closure
        for name, cell in zip(value.__code__.co_freevars, value.__closure__):
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            _visit(inner, f"{path}.{name}", depth + 1, seen)


def _walk_modules():
    """Search the streamlet modules not searched yet (op modules first)."""
    with _lock:
        _walk_new()


def _walk_new():
    names = [m for m in list(sys.modules) if m.startswith("streamlet.") and m not in _walked]
    names.sort(key=lambda m: (not m.startswith("streamlet.core.ops."), m))
    seen: set = set()
    for m in names:
        _walked.add(m)
        module = sys.modules.get(m)
        if module is None or hasattr(module, "__path__"):  # packages re-export, skip them
            continue
        short = m[len("streamlet."):]
        for attr, value in list(vars(module).items()):
            _visit(value, f"{short}:{attr}", 0, seen)


def key_of(prim):
    """The stable name of `prim`, or None if no module of streamlet holds it (a primitive
    made for one function, as custom_function's)."""
    key = _keys.get(id(prim))
    if key is None:
        _walk_modules()
        key = _keys.get(id(prim))
    return key


def primitive(key, name, op="import_function"):
    """The primitive named `key` (written by key_of); `name` (its own name) finds it when
    the code has moved since the file was written and no other primitive has that name."""
    prim = _names.get(key)
    if prim is None:
        _walk_modules()
        try:
            importlib.import_module("streamlet." + key.split(":")[0])
            _walk_modules()
        except ImportError:
            pass
        prim = _names.get(key)
    if prim is None:
        same = {id(p): p for p in _names.values() if p.name == name}
        if len(same) != 1:
            raise ValueError(f"[{op}] Unable to deserialize primitive {name} ({key}): this "
                             "version of streamlet has no such primitive.")
        prim = next(iter(same.values()))
    return prim


# -- params ------------------------------------------------------------------------------
def _np_dtype(name):
    try:
        return dt.from_name(name).np
    except KeyError:
        d = np.dtype(name)
    if d.kind in "OV":  # no Python objects (nor raw records) from a file
        raise ValueError(f"[import_function] Unsupported dtype {name!r} in the file.")
    return d


def encode(value, add):
    """`value` as JSON data; a NumPy array in it is stored by `add(array)`, which gives the
    index it is read back from."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if t is tuple:
        return [encode(v, add) for v in value]
    if t is list:
        return {"$": "list", "v": [encode(v, add) for v in value]}
    if t is dict:
        return {"$": "dict", "v": [[encode(k, add), encode(v, add)]
                                   for k, v in value.items()]}
    if t is complex:
        return {"$": "complex", "v": [encode(value.real, add), encode(value.imag, add)]}
    if t is slice:
        return {"$": "slice", "v": [encode(value.start, add), encode(value.stop, add),
                                    encode(value.step, add)]}
    if value is Ellipsis:
        return {"$": "ellipsis"}
    if isinstance(value, dt.Dtype):
        return {"$": "dtype", "v": value.name}
    if isinstance(value, np.dtype) and value.kind != "O":
        return {"$": "npdtype", "v": value.name}
    if isinstance(value, np.generic) and value.dtype.kind != "O":
        return {"$": "npscalar", "dtype": value.dtype.name, "v": encode(value.item(), add)}
    if isinstance(value, np.ndarray) and value.dtype.kind != "O":
        return {"$": "ndarray", "v": add(value)}
    if isinstance(value, Primitive):
        key = key_of(value)
        if key is not None:
            return {"$": "prim", "v": key, "name": value.name}
    fields = _record_fields(t)
    if fields is not None:
        return {"$": "record", "class": f"{t.__module__[len('streamlet.'):]}:{t.__qualname__}",
                "v": [encode(getattr(value, f), add) for f in fields]}
    raise Unserializable(f"{t.__module__}.{t.__qualname__}")


def _record_fields(cls):
    """The fields of a plain record class of streamlet (one with `__slots__`, as the index
    slots of a gather), or None for any other class."""
    if not isinstance(cls, type) or not cls.__module__.startswith("streamlet.") or \
            "__slots__" not in vars(cls) or cls.__new__ is not object.__new__:
        return None
    slots = vars(cls)["__slots__"]
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _record(name, values):
    """A record of the class `name` with `values`, made without running its code."""
    module, qualname = name.split(":")
    cls = importlib.import_module("streamlet." + module)
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    fields = _record_fields(cls)
    if fields is None or len(fields) != len(values):
        raise ValueError(f"[import_function] Unknown record class {name!r} in the file.")
    obj = object.__new__(cls)
    for f, v in zip(fields, values):
        object.__setattr__(obj, f, v)
    return obj


def decode(data, arrays):
    """The value `encode` wrote; `arrays` holds the NumPy arrays it named."""
    if isinstance(data, list):
        return tuple(decode(v, arrays) for v in data)
    if not isinstance(data, dict):
        return data
    tag, v = data["$"], data.get("v")
    if tag == "float":
        return float(v)
    if tag == "list":
        return [decode(x, arrays) for x in v]
    if tag == "dict":
        return {decode(k, arrays): decode(x, arrays) for k, x in v}
    if tag == "complex":
        return complex(decode(v[0], arrays), decode(v[1], arrays))
    if tag == "slice":
        return slice(*[decode(x, arrays) for x in v])
    if tag == "ellipsis":
        return Ellipsis
    if tag == "dtype":
        return dt.from_name(v)
    if tag == "npdtype":
        return np.dtype(_np_dtype(v))
    if tag == "npscalar":
        return _np_dtype(data["dtype"]).type(decode(v, arrays))
    if tag == "ndarray":
        return arrays[v]
    if tag == "prim":
        return primitive(v, data["name"])
    if tag == "record":
        return _record(data["class"], [decode(x, arrays) for x in v])
    raise ValueError(f"[import_function] Unknown value tag {tag!r} in the file.")


# -- the container ---------------------------------------------------------------------------
def describe(data):
    """The footer's entry for one constant (its offset is filled in when written)."""
    return {"dtype": data.dtype.name, "shape": list(data.shape), "offset": 0,
            "nbytes": int(data.nbytes)}


class Writer:
    """A function file being written: `write(new_constants, footer)` appends the constants
    and replaces the footer (`footer["constants"]` gets their offsets)."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "wb") as f:
                f.write(MAGIC + b"\x00" * (ALIGN - len(MAGIC)))
        except OSError:
            raise RuntimeError(f"[export_function] Failed to open {path}") from None
        self.end = ALIGN  # where the constants stop and the footer starts

    def write(self, new, footer):
        with open(self.path, "r+b") as f:
            f.seek(self.end)
            for entry, data in new:
                pad = -f.tell() % ALIGN
                f.write(b"\x00" * pad)
                entry["offset"] = f.tell()
                f.write(np.ascontiguousarray(data).tobytes())
            self.end = f.tell()
            text = json.dumps(footer, separators=(",", ":")).encode()
            f.write(text + struct.pack("<Q", len(text)) + END)
            f.truncate()


def read(path):
    """The footer of the function file at `path` and its constants as NumPy arrays."""
    try:
        f = open(path, "rb")
    except OSError:
        raise RuntimeError(f"[import_function] Failed to open {path}") from None
    with f:
        head = f.read(len(MAGIC))
        f.seek(0, 2)
        size = f.tell()
        # an unreadable file is a RuntimeError, as MLX's reading one is
        if head != MAGIC or size < ALIGN + 16:
            raise RuntimeError(f"[import_function] {path} is not a function file written by "
                               "streamlet's export_function (MLX's .mlxfn files are not read).")
        f.seek(size - 16)
        length, end = struct.unpack("<Q", f.read(8))[0], f.read(8)
        if end != END or length > size - 16:
            raise RuntimeError(f"[import_function] {path} is truncated.")
        f.seek(size - 16 - length)
        try:
            footer = json.loads(f.read(length))
        except ValueError:
            raise RuntimeError(f"[import_function] {path} is corrupt.") from None
        if footer.get("version", 0) > FORMAT_VERSION:
            raise ValueError(f"[import_function] {path} was written by a newer streamlet "
                             f"(format {footer['version']}).")
        constants = []
        for c in footer["constants"]:
            f.seek(c["offset"])
            buf = bytearray(f.read(c["nbytes"]))
            constants.append(np.frombuffer(buf, _np_dtype(c["dtype"])).reshape(c["shape"]))
    return footer, constants


__all__ = ["Unserializable", "Writer", "decode", "describe", "encode", "key_of", "primitive",
           "read"]
