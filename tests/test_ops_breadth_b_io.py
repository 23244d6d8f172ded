"""mx.save / load / savez / savez_compressed / save_safetensors: every dtype, both ways with mlx."""
import io
import json
import struct

import numpy as np
import pytest

import streamlet.core as mx

NAMES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
         "float16", "bfloat16", "float32", "complex64"]
BASE = np.arange(-3, 3).reshape(2, 3)


def value(name):
    if name == "bool_":
        return BASE % 2 == 0
    if name.startswith("uint"):
        return np.abs(BASE)
    if name == "complex64":
        return BASE * (1 + 0.5j)
    return BASE * (0.5 if name.startswith(("float", "bfloat")) else 1)


def make(M, name):
    data = value(name)
    if M is mx:
        return mx.array(data, dtype=getattr(mx, name)) if name != "complex64" else mx.array(data)
    src = data.astype(np.complex64 if name == "complex64" else np.float32) \
        if data.dtype.kind in "fc" else data
    return M.array(src).astype(getattr(M, name))


def host(x):
    if "bfloat16" in repr(x.dtype):
        x = x.astype(mx.float32 if isinstance(x, mx.array) else _mlx().float32)
    return np.array(x)


def _mlx():
    import mlx.core
    return mlx.core


def same(a, b):
    assert repr(a.dtype) == repr(b.dtype)
    assert a.shape == b.shape
    np.testing.assert_array_equal(host(a), host(b))


@pytest.mark.parametrize("name", NAMES)
def test_npy_round_trips_every_dtype_both_ways(name, tmp_path, mlx):
    ours = make(mx, name)
    mx.save(tmp_path / "ours", ours)  # the suffix is added
    same(mx.load(str(tmp_path / "ours.npy")), ours)
    same(mlx.load(str(tmp_path / "ours.npy")), make(mlx, name))
    mlx.save(str(tmp_path / "theirs.npy"), make(mlx, name))
    same(mx.load(tmp_path / "theirs.npy"), ours)


def test_npz_and_compressed_round_trip(tmp_path, mlx):
    arrays = {n: make(mx, n) for n in NAMES}
    mx.savez(tmp_path / "plain", make(mx, "int8"), **arrays)
    mx.savez_compressed(str(tmp_path / "small.npz"), **arrays)
    for path in ("plain.npz", "small.npz"):
        ours, theirs = mx.load(tmp_path / path), mlx.load(str(tmp_path / path))
        for key, a in arrays.items():
            same(ours[key], a)
            same(theirs[key], make(mlx, key))
    same(mx.load(tmp_path / "plain.npz")["arr_0"], make(mx, "int8"))
    with pytest.raises(ValueError):
        mx.savez(tmp_path / "clash", make(mx, "int8"), arr_0=make(mx, "int8"))


def test_safetensors_round_trip_with_metadata(tmp_path, mlx):
    arrays = {n: make(mx, n) for n in NAMES}
    mx.save_safetensors(str(tmp_path / "w"), arrays, metadata={"format": "mlx"})
    ours, meta = mx.load(tmp_path / "w.safetensors", return_metadata=True)
    theirs, their_meta = mlx.load(str(tmp_path / "w.safetensors"), return_metadata=True)
    assert meta == their_meta == {"format": "mlx"}
    for key, a in arrays.items():
        same(ours[key], a)
        same(theirs[key], make(mlx, key))
    mlx.save_safetensors(str(tmp_path / "m.safetensors"), {k: make(mlx, k) for k in NAMES})
    loaded = mx.load(tmp_path / "m.safetensors")
    for key, a in arrays.items():
        same(loaded[key], a)


def test_safetensors_layout_and_float64(tmp_path):
    x = mx.array(np.arange(6.0).reshape(3, 2), dtype=mx.float64)
    mx.save_safetensors(tmp_path / "d.safetensors", {"x": x, "b": mx.array([1, 2], mx.bfloat16)})
    raw = (tmp_path / "d.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    assert header["x"] == {"dtype": "F64", "shape": [3, 2], "data_offsets": [4, 52]}
    assert header["b"]["dtype"] == "BF16"
    assert raw[8 + size:8 + size + 4] == b"\x80\x3f\x00\x40"  # bfloat16 1.0, 2.0 (LE)
    same(mx.load(tmp_path / "d.safetensors")["x"], x)


def test_file_objects_and_formats():
    buf = io.BytesIO()
    mx.save(buf, mx.arange(4))
    buf.seek(0)
    same(mx.load(buf, format="npy"), mx.arange(4))
    buf.seek(0)
    with pytest.raises(ValueError):
        mx.load(buf)  # no name, no format


def test_load_errors_like_mlx(tmp_path, mlx):
    mx.save(tmp_path / "a.npy", mx.ones(2))
    for M in (mx, mlx):
        with pytest.raises(RuntimeError):
            M.load(str(tmp_path / "missing.npy"))
        with pytest.raises(ValueError):
            M.load(str(tmp_path / "a.foo"))
        with pytest.raises(ValueError):
            M.load(str(tmp_path / "a.npy"), return_metadata=True)
        with pytest.raises(TypeError):
            M.save(str(tmp_path / "b.npy"), np.ones(2))
        with pytest.raises(ValueError):
            M.save_safetensors(str(tmp_path / "c"), {"a": M.ones(1)}, metadata={"a": 1})
    for M in (mx, mlx):  # a GGUF file that is not there
        with pytest.raises(ValueError, match="load_gguf"):
            M.load(str(tmp_path / "x.gguf"))


def test_save_evaluates_lazy_arrays(tmp_path):
    lazy = mx.ones((2, 2)) * 3
    mx.save(tmp_path / "l.npy", lazy)
    assert np.load(tmp_path / "l.npy").tolist() == [[3.0, 3.0], [3.0, 3.0]]
