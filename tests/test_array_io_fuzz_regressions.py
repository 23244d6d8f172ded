"""Cases a differential fuzz of array construction, conversion, Python operators and
save/load against MLX 0.32.4 found: the result (value, dtype, shape or the error's type)
is MLX's."""
from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest

import streamlet.core as mx
from parity import described


def _outcome(M, fn):
    return described(M, fn, _described)


def _described(r):
    return repr(r.dtype), r.shape, repr(r.tolist())  # repr: NaN compares equal


def _same(mlx, fn):
    assert _outcome(mx, fn) == _outcome(mlx, fn)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint32", "uint64", "bool_"])
@pytest.mark.parametrize("value", ["[16777217.0, 1.5]", "16777217.0", "[1e10, -1e10, 300.7]",
                                   "[1.5, 2**31 + 5, 2**40 + 7, -1]", "[1e-50, 0.0]", "1e-50",
                                   "[2.0**63, 1e20, -1.0]"])
def test_python_floats_for_an_integer_dtype_are_cast_from_the_double(mlx, value, dtype):
    """`array([16777217.0], int32)` is 16777217 in MLX (each double cast to the dtype),
    where it went through float32 (16777216); `array(1e-50, bool_)` is True."""
    _same(mlx, lambda M: M.array(eval(value), getattr(M, dtype)))


@pytest.mark.parametrize("value", ["[2**64, float('nan')]", "[1.5, 2**63]", "[[2**63], [], []]",
                                   "[[-2.5], [2**64]]", "[[1j, -2**63 - 1]]",
                                   "([True, 2**63], [1.5, True, False])"])
@pytest.mark.parametrize("dtype", [None, "int64", "float32", "uint32"])
def test_an_int_beyond_int64_in_any_list_is_refused(mlx, value, dtype):
    """MLX reads every int of a list as int64 while checking the list, so one beyond int64
    is refused (before a later ragged row is noticed), in a float list too, where the
    array was made with the int cast (or the ragged row was reported).  streamlet raises
    OverflowError where MLX's error is RuntimeError, as for its other refused ints."""
    def fn(M):
        return M.array(eval(value), *([getattr(M, dtype)] if dtype else []))
    assert _outcome(mlx, fn) == "RuntimeError"
    assert _outcome(mx, fn) == "OverflowError"


@pytest.mark.parametrize("dtype", ["uint32", "uint64", "int32"])
def test_complex_values_out_of_range_for_an_integer_dtype(mlx, dtype):
    """A complex list as uint32: -inf is 2**31 in MLX, where NumPy's strided cast of the
    real parts gave 0."""
    inf = float("inf")
    values = [complex(-inf, 0), complex(inf, 0), complex(float("nan"), 0), -1e10 + 0j,
              1e10 + 0j, -1 + 0j]
    _same(mlx, lambda M: M.array(values, getattr(M, dtype)))
    _same(mlx, lambda M: M.array(np.array(values, np.complex64), getattr(M, dtype)))


@pytest.mark.parametrize("shape,strides", [((2, 0, 3), (-24, 24, 8)), ((2, 0), (-24, 8)),
                                           ((1, 0, 3), (-24, 24, 8)), ((0, 3), (-24, 8)),
                                           ((3, 0), (8, -8)), ((2, 3, 0), (24, -8, 8))])
def test_negative_strides_of_an_empty_numpy_array(mlx, shape, strides):
    """MLX refuses a negative stride met before the first axis of size 0 (ValueError), even
    for an empty array (`a.reshape(2, 3)[::-1, :0]`), where the array was made."""
    base = np.zeros(8, np.int64)[4:]
    src = np.lib.stride_tricks.as_strided(base, shape, strides)
    assert src.strides == strides
    _same(mlx, lambda M: M.array(src))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool_", "float16"])
def test_complex128_to_a_real_dtype_reads_the_real_part_as_float32(mlx, dtype):
    """MLX's complex128_t converts to a real type through float: -136.91398922791632 as
    float64 is -136.9139862060547, where it kept every digit."""
    src = np.array([-136.91398922791632 + 2j, 1e-50 + 1j, 2.5 - 1j, 0.1 + 0j])
    _same(mlx, lambda M: M.array(src, getattr(M, dtype)))


def test_float64_numpy_to_float16_rounds_through_float32(mlx):
    """1 + 2**-11 + 2**-40 is 1.0 as MLX makes float16 from a double (through float32),
    where NumPy's direct rounding gave 1.00098."""
    src = np.array([1 + 2 ** -11 + 2 ** -40, 1 - 2 ** -12 - 2 ** -40, 65519.99])
    _same(mlx, lambda M: M.array(src, M.float16))


@pytest.mark.parametrize("make", ["M.array(x)", "M.array(x, M.float32)", "M.asarray(x)",
                                  "M.array([1, 2], M.int32) + x", "M.array([1, 2]) * x"])
@pytest.mark.parametrize("code", [">i4", ">f4", ">f8", ">c8", ">u2"])
def test_numpy_arrays_of_the_other_byte_order(mlx, make, code):
    """MLX's cast of a byte-swapped NumPy array fails: RuntimeError (std::bad_cast) when an
    array is made, ValueError from an operator, where streamlet raised TypeError."""
    x = np.array([1, 2], code)
    _same(mlx, lambda M: eval(make, {"M": M, "x": x}))


@pytest.mark.parametrize("dtype", [None, "int32", "uint64", "float32", "float16", "complex64"])
@pytest.mark.parametrize("value", [1.5, -97, 65536])
def test_a_numpy_bfloat16_scalar(mlx, value, dtype):
    """`array(ml_dtypes.bfloat16(1.5))` is a bfloat16 array in MLX, where it raised
    TypeError (a NumPy bfloat16 scalar lends no buffer format)."""
    x = ml_dtypes.bfloat16(value)
    _same(mlx, lambda M: M.array(x, *([getattr(M, dtype)] if dtype else [])))


def _safetensors(path, header, body=b""):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


@pytest.mark.parametrize("case", ["tensor named __metadata__", "number in metadata",
                                  "offsets short", "offsets past the end", "three offsets",
                                  "header length 0"])
def test_safetensors_headers_mlx_refuses(mlx, tmp_path, case):
    """A safetensors header MLX refuses raises RuntimeError on load: a tensor named
    `__metadata__` (MLX's own save writes it over the metadata), non-string metadata,
    data offsets that disagree with the shape or pass the end of the file, where
    streamlet returned the tensor's header as metadata or arrays of the wrong size."""
    path = tmp_path / "f.safetensors"
    body = np.arange(3, dtype=np.int32).tobytes()
    t = {"dtype": "I32", "shape": [3], "data_offsets": [0, 12]}
    if case == "tensor named __metadata__":
        for M in (mlx, mx):
            M.save_safetensors(str(path), {"a": M.array([1]), "__metadata__": M.array([2])})
            with pytest.raises(RuntimeError):
                M.load(str(path), return_metadata=True)
        return
    if case == "number in metadata":
        _safetensors(path, {"__metadata__": {"n": 5}, "a": t}, body)
    elif case == "offsets short":
        _safetensors(path, {"a": dict(t, data_offsets=[0, 8])}, body)
    elif case == "offsets past the end":
        _safetensors(path, {"a": dict(t, data_offsets=[4, 16])}, body)
    elif case == "three offsets":
        _safetensors(path, {"a": dict(t, data_offsets=[0, 12, 12])}, body)
    else:
        path.write_bytes(struct.pack("<Q", 0) + body)
    for M in (mlx, mx):
        with pytest.raises(RuntimeError):
            M.load(str(path), return_metadata=True)


def test_an_npz_member_named_dot_npy_keeps_its_name(mlx, tmp_path):
    """`savez(f, **{"": a})` writes the member ".npy"; MLX strips ".npy" only from a longer
    name, so it loads as ".npy" (NumPy, and streamlet, gave "")."""
    for M, name in ((mx, "s.npz"), (mlx, "m.npz")):
        M.savez(str(tmp_path / name), **{"": M.array([1, 2]), "b.npy": M.array(3)})
    for name in ("s.npz", "m.npz"):
        _same(mlx, lambda M: M.load(str(tmp_path / name)))
