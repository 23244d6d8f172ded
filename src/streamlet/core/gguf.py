"""The GGUF format (GGML's model files), read and written as MLX 0.32.4 does.

A file is "GGUF", a version, the tensor and key counts, then the metadata (key, type,
value), the tensor infos (name, dims in GGML's reversed order, type, offset) and the
aligned tensor data.  Tensors of types F32, F16, I8, I16 and I32 load as arrays of
those dtypes; Q4_0, Q4_1 and Q8_0 blocks load as MLX's quantized triple
`name.weight` (uint32), `name.scales`, `name.biases` (float16, groups of 32).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "w.gguf")
>>> save(path, {"w": np.arange(3, dtype=np.int32)}, {"name": "demo"})
>>> arrays, meta = load(path)
>>> arrays["w"].tolist(), meta["name"]
([0, 1, 2], 'demo')
"""
from __future__ import annotations

import struct

import numpy as np

ALIGNMENT = 32
_TENSOR = {0: np.float32, 1: np.float16, 24: np.int8, 25: np.int16, 26: np.int32}
_TENSOR_CODE = {np.dtype(d): code for code, d in _TENSOR.items()}
_Q4_0, _Q4_1, _Q8_0 = 2, 3, 8
_BLOCK_BYTES = {_Q4_0: 18, _Q4_1: 20, _Q8_0: 34}
# metadata value types: scalar NumPy types by code; 8 is a string, 9 an array
_VALUE = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
          6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}
_VALUE_CODE = {np.dtype(d): code for code, d in _VALUE.items() if code != 12}
_STRING, _ARRAY = 8, 9


class _Reader:
    def __init__(self, raw: bytes):
        self.raw, self.at = raw, 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.raw, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def string(self):
        n = self.take("Q")
        self.at += n
        return self.raw[self.at - n:self.at].decode("utf-8")

    def values(self, code, count):
        d = np.dtype(_VALUE[code]).newbyteorder("<")
        out = np.frombuffer(self.raw, d, count, self.at)
        self.at += d.itemsize * count
        return out


def _value(r: _Reader, code):
    """One metadata value as MLX gives it: str, list of str, or a NumPy array (float64
    becomes float32, as in MLX)."""
    if code == _STRING:
        return r.string()
    if code == _ARRAY:
        inner, count = r.take("IQ")
        if inner == _STRING:
            return [r.string() for _ in range(count)]
        if inner not in _VALUE:
            raise RuntimeError("[load_gguf] Multiple levels of nested arrays are not "
                               "supported.")
        return r.values(inner, count).astype(_VALUE[inner] if inner != 12 else np.float32)
    if code not in _VALUE:
        raise RuntimeError(f"[load_gguf] Received unexpected metadata type {code}.")
    return r.values(code, 1).reshape(()).astype(_VALUE[code] if code != 12 else np.float32)


def load(path):
    """`(arrays, metadata)` of a GGUF file: NumPy arrays by name, metadata by key."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ValueError(f"[load_gguf] Failed to open {path}") from None
    except OSError:  # a directory, a file not readable: MLX's gguf_init fails
        raise RuntimeError(f"[load_gguf] Failed to read {path}") from None
    r = _Reader(raw)
    if raw[:4] != b"GGUF":
        raise RuntimeError(f"[load_gguf] {path} is not a GGUF file.")
    r.at = 4
    _, n_tensors, n_kv = r.take("IQQ")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        metadata[key] = _value(r, r.take("I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = r.take("I")
        shape = tuple(reversed([r.take("Q") for _ in range(dims)]))
        infos.append((name, shape, *r.take("IQ")))
    align = int(metadata.get("general.alignment", ALIGNMENT))
    start = -(-r.at // align) * align
    arrays = {}
    for name, shape, kind, offset in infos:
        arrays.update(_tensor(raw, start + offset, name, shape, kind))
    return arrays, metadata


def _tensor(raw, at, name, shape, kind):
    count = int(np.prod(shape))
    if kind in _TENSOR:
        d = np.dtype(_TENSOR[kind]).newbyteorder("<")
        if at + count * d.itemsize > len(raw):
            raise RuntimeError(f"[load_gguf] Tensor '{name}' extends past the end of the file. "
                               "Perhaps an incomplete download or corrupt file?")
        return {name: np.frombuffer(raw, d, count, at).astype(d.newbyteorder("="))
                .reshape(shape)}
    if kind not in _BLOCK_BYTES:
        raise RuntimeError(f"[load_gguf] Tensor '{name}' has GGML type {kind}, which "
                           "streamlet does not load.")
    if shape[-1] % 32:
        raise RuntimeError(f"[load_gguf] tensor {name} has incompatible last dim shape: "
                           f"{shape[-1]}")
    blocks = np.frombuffer(raw, np.uint8, count // 32 * _BLOCK_BYTES[kind], at)
    return _quantized(blocks.reshape(-1, _BLOCK_BYTES[kind]), name, shape, kind)


def _quantized(blocks, name, shape, kind):
    """GGML blocks as MLX's (uint32 weights, float16 scales, float16 biases)."""
    scales = blocks[:, :2].copy().view(np.float16)[:, 0]
    if kind == _Q8_0:
        q = blocks[:, 2:] ^ np.uint8(0x80)  # int8 + 128
        biases = np.float16(-128) * scales
    else:
        nibbles = blocks[:, 4 if kind == _Q4_1 else 2:]
        q = np.concatenate([nibbles & 0xF, nibbles >> 4], axis=1)  # element j, j + 16
        q = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
        biases = blocks[:, 2:4].copy().view(np.float16)[:, 0] if kind == _Q4_1 else \
            np.float16(-8) * scales
    groups = shape[:-1] + (shape[-1] // 32,)
    words = np.ascontiguousarray(q).view("<u4").astype(np.uint32)
    stem = name[:-len(".weight")] if name.endswith(".weight") else name
    return {name: words.reshape(shape[:-1] + (-1,)),
            stem + ".scales": scales.reshape(groups), stem + ".biases": biases.reshape(groups)}


def _pack_string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pack_value(key, value) -> bytes:
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _pack_string(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + \
            b"".join(_pack_string(v) for v in value)
    if value is None:
        raise RuntimeError("[save_gguf] Received unexpected type in metadata")
    if not isinstance(value, np.ndarray):  # MLX's cast of the value fails
        raise TypeError(f"[save_gguf] Metadata values are str, lists of str or arrays, got "
                        f"{type(value).__name__} for {key!r}.")
    if value.ndim > 1:
        raise RuntimeError("[save_gguf] Cannot save arrays with more than one dimension.")
    if value.size == 0:
        raise RuntimeError("[save_gguf] Cannot save empty arrays.")
    code = _VALUE_CODE.get(value.dtype)
    if code is None:
        raise ValueError(f"[save_gguf] array type {value.dtype} not support for metadata "
                         f"({key!r}).")
    data = value.astype(value.dtype.newbyteorder("<")).tobytes()
    if value.ndim == 0:
        return struct.pack("<I", code) + data
    return struct.pack("<IIQ", _ARRAY, code, value.size) + data


def save(path, arrays, metadata=None):
    """Write NumPy `arrays` (F32, F16, I8, I16, I32) and `metadata` (str, list of str,
    0-d or 1-d NumPy arrays of integers, bool or float32) to a GGUF file."""
    kv = [_pack_string(k) + _pack_value(k, v) for k, v in (metadata or {}).items()]
    infos, blobs, offset = [], [], 0
    for name, a in arrays.items():
        code = _TENSOR_CODE.get(a.dtype)
        if code is None:
            raise RuntimeError(f"[save_gguf] dtype {a.dtype} is not supported")
        offset += -offset % ALIGNMENT
        infos.append(_pack_string(name) + struct.pack("<I", a.ndim) +
                     struct.pack(f"<{a.ndim}Q", *reversed(a.shape)) +
                     struct.pack("<IQ", code, offset))
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        blobs.append((offset, raw))
        offset += len(raw)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kv)) + b"".join(kv + infos)
    head += b"\0" * (-len(head) % ALIGNMENT)
    body = bytearray(offset)
    for at, raw in blobs:
        body[at:at + len(raw)] = raw
    try:
        f = open(path, "wb")
    except OSError:
        raise RuntimeError(f"[save_gguf] Failed to open {path}") from None
    with f:
        f.write(head)
        f.write(body)
