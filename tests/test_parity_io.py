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
