"""Cases a second differential fuzz of file io against MLX 0.32.4 found: the error types
of unreadable npy/npz files.  (MLX's key order, that of libstdc++'s unordered_map, is an
accident of its build: streamlet keeps the order given.)"""
from __future__ import annotations

import pytest

import streamlet.core as mx


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e)
    return None


@pytest.mark.parametrize("case", ["missing", "npy_as_npz", "npz_as_npy", "short_npy"])
def test_unreadable_npy_and_npz_raise_mlx_s_error(mlx, tmp_path, case):
    mlx.save(str(tmp_path / "a.npy"), mlx.array([1, 2]))
    mlx.savez(str(tmp_path / "a.npz"), x=mlx.array([1]))
    (tmp_path / "short.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    path, fmt = {"missing": ("none.npz", None), "npy_as_npz": ("a.npy", "npz"),
                 "npz_as_npy": ("a.npz", "npy"), "short_npy": ("short.npy", None)}[case]
    path = str(tmp_path / path)
    want = _error(lambda: mlx.load(path, format=fmt))
    assert want is not None
    assert _error(lambda: mx.load(path, format=fmt)) is want
