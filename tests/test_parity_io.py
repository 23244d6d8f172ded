"""Loading and saving against MLX 0.32.4: safetensors fp8 tensors load as their uint8
bytes, unsupported dtypes raise RuntimeError, a truncated `.npy` fails when evaluated."""
import os

import numpy as np
import pytest

import streamlet.core as mx

# ten F8_E4M3 bytes: 0, 448, -448, -0.875, 0.4375, -0.005859, -1.25, -1.25, -1.5, -0.0039
F8 = (b'H\x00\x00\x00\x00\x00\x00\x00{"tensor":{"dtype":"F8_E4M3","shape":[10],'
      b'"data_offsets":[0,10]}}       \x00~\xfe\xb6.\x83\xba\xba\xbc\x82')


def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def test_f8_e4m3_loads_as_bytes_as_mlx_does(mlx, tmp_path):
    path = _write(tmp_path, "f8.safetensors", F8)
    ours, theirs = mx.load(path)["tensor"], mlx.load(path)["tensor"]
    assert ours.dtype is mx.uint8 and repr(theirs.dtype) == "mlx.core.uint8"
    assert ours.tolist() == theirs.tolist()
    assert mx.from_fp8(ours).tolist() == mlx.from_fp8(theirs).tolist()


def test_unsupported_safetensors_dtype_is_a_runtime_error(tmp_path):
    path = _write(tmp_path, "e5m2.safetensors", F8.replace(b"F8_E4M3", b"F8_E5M2"))
    with pytest.raises(RuntimeError, match="F8_E5M2"):
        mx.load(path)


def _truncated(tmp_path):
    path = str(tmp_path / "cut.npy")
    np.save(path, np.arange(16, dtype=np.float32))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 64)
    return path


def test_truncated_npy_fails_when_evaluated(tmp_path):
    out = mx.load(_truncated(tmp_path), stream=mx.cpu)
    assert out.shape == (16,) and out.dtype is mx.float32  # from the header
    for _ in range(2):
        with pytest.raises(RuntimeError, match="load"):
            mx.eval(out)


def test_truncated_npy_poisons_its_consumer_on_another_stream(tmp_path):
    producer, consumer = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    out = mx.add(mx.load(_truncated(tmp_path), stream=producer), 1.0, stream=consumer)
    with pytest.raises(RuntimeError, match="load"):
        mx.eval(out)
    try:
        mx.synchronize(producer)
    except RuntimeError:
        pass
    assert mx.add(mx.ones(2, stream=producer), 1, stream=consumer).tolist() == [2.0, 2.0]


def _gguf_cases(m):
    return ({"w": m.arange(6).reshape(2, 3), "h": m.ones((2, 2), m.float16) * 0.5,
             "i8": m.array([-3, 4], m.int8), "t": m.arange(4).reshape(2, 2).T},
            {"s": "x", "l": ["a", "bc"], "n": m.array([1, 2], m.uint16),
             "z": m.array(1.5), "b": m.array(True), "i": m.array(-7, m.int64)})


def _same_gguf(a, b):
    arrays_a, meta_a = a
    arrays_b, meta_b = b
    assert sorted(arrays_a) == sorted(arrays_b) and sorted(meta_a) == sorted(meta_b)
    for k in arrays_a:
        assert repr(arrays_a[k].dtype) == repr(arrays_b[k].dtype), k
        assert arrays_a[k].tolist() == arrays_b[k].tolist(), k
    for k in meta_a:
        x, y = meta_a[k], meta_b[k]
        if isinstance(x, (str, list)):
            assert x == y, k
        else:
            assert repr(x.dtype) == repr(y.dtype) and x.tolist() == y.tolist(), k


@pytest.mark.parametrize("writer", ["streamlet", "mlx"])
def test_gguf_round_trips_between_the_libraries(mlx, tmp_path, writer):
    path = str(tmp_path / "m")  # save_gguf adds the suffix
    w = mx if writer == "streamlet" else mlx
    w.save_gguf(path, *_gguf_cases(w))
    _same_gguf(mx.load(path + ".gguf", return_metadata=True),
               mlx.load(path + ".gguf", return_metadata=True))


def test_gguf_refuses_what_mlx_refuses(mlx, tmp_path):
    path = str(tmp_path / "r.gguf")
    for m in (mx, mlx):
        for bad in (m.array(1, m.float16), m.array(1, m.bfloat16), m.array(1, m.complex64)):
            with pytest.raises(ValueError):
                m.save_gguf(path, {"a": m.ones(2)}, {"meta": bad})
        with pytest.raises(RuntimeError):
            m.save_gguf(path, {"a": m.ones(2, m.uint8)})


def _quantized_file(path, type_id, blocks, rows, cols):
    import struct
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 0))
        name = b"t.weight"
        f.write(struct.pack("<Q", len(name)) + name)
        f.write(struct.pack("<IQQIQ", 2, cols, rows, type_id, 0))
        f.write(b"\x00" * (-f.tell() % 32))
        f.write(blocks.tobytes())


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q8_0"])
def test_gguf_quantized_blocks_load_as_mlx_does(mlx, tmp_path, rng, kind):
    rows, cols = 2, 64
    n = rows * cols // 32
    d = np.full((n, 1), 0.75, np.float16).view(np.uint8)
    m = np.full((n, 1), -1.5, np.float16).view(np.uint8)
    q4 = rng.integers(0, 16, (n, 32)).astype(np.uint8)
    nib = (q4[:, :16] | (q4[:, 16:] << 4)).astype(np.uint8)
    blocks, type_id = {"Q4_0": (np.concatenate([d, nib], 1), 2),
                       "Q4_1": (np.concatenate([d, m, nib], 1), 3),
                       "Q8_0": (np.concatenate([d, rng.integers(-128, 128, (n, 32))
                                                .astype(np.int8).view(np.uint8)], 1), 8)}[kind]
    path = str(tmp_path / f"{kind}.gguf")
    _quantized_file(path, type_id, blocks, rows, cols)
    ours, theirs = mx.load(path), mlx.load(path)
    assert sorted(ours) == sorted(theirs) == ["t.biases", "t.scales", "t.weight"]
    for k in ours:
        assert repr(ours[k].dtype) == repr(theirs[k].dtype) and \
            ours[k].tolist() == theirs[k].tolist(), k
