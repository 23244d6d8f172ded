"""Cases a differential fuzz of the creation and shape ops (arange, linspace, eye, tri,
full and the *_like functions, meshgrid, diag, repeat, tile, split, pad, as_strided,
reshape and the rest; shapes given every way, fill values of every kind) against
MLX 0.32.4 found: the result (value bit for bit, dtype, shape, or the error's type) is
MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same_bits


@pytest.mark.parametrize("shape", ["array", "entries", "uint8", "int64"])
@pytest.mark.parametrize("op", ["zeros", "ones", "full"])
def test_a_shape_of_integer_arrays(mlx, op, shape):
    """MLX takes a 1-D integer array as a shape, or 0-d integer arrays as its entries:
    they were a TypeError."""
    def fn(M):
        s = {"array": M.array([2, 3]), "entries": [M.array(2), 3],
             "uint8": M.array([2, 1], M.uint8), "int64": M.array([3], M.int64)}[shape]
        return M.full(s, 1.5) if op == "full" else getattr(M, op)(s, M.int16)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("value", [np.float16(1.5), np.int8(-3), np.uint64(2**63),
                                   np.int64(7), np.float32(2.5),
                                   np.complex64(1 + 2j)])
@pytest.mark.parametrize("dtype", [None, "int16", "float16"])
def test_full_of_a_numpy_scalar(mlx, value, dtype):
    """A NumPy scalar that is no Python float or int (np.float16, np.int8, np.bool_) fills
    with its own dtype, cast to `dtype` when given: it was a TypeError."""
    assert_same_bits(mlx, lambda M: M.full((2, 1), value,
                                           None if dtype is None else getattr(M, dtype)))


@pytest.mark.parametrize("value", [2**31, -2**31 - 1, -2**63, 2**40])
def test_full_of_an_int_beyond_int32_is_int64(mlx, value):
    """As `array(value)`: it was a ValueError (an int32 overflow)."""
    assert_same_bits(mlx, lambda M: M.full((2,), value))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool_", "complex64", "bfloat16"])
def test_contiguous_of_a_scalar_stays_0d(mlx, dtype):
    """NumPy's ascontiguousarray makes a 0-d array 1-D: `contiguous(mx.array(2.0))` had
    shape () but held a 1-D buffer (its `tolist()` was [2.0], not 2.0)."""
    assert_same_bits(mlx, lambda M: M.contiguous(M.array(2).astype(getattr(M, dtype))) * 1)
    for M in (mx, mlx):
        assert M.contiguous(M.array(2.5)).tolist() == 2.5
        assert np.array(M.contiguous(M.array(2.5))).shape == ()


def test_to_fp8_of_a_scalar_stays_0d(mlx):
    assert_same_bits(mlx, lambda M: M.to_fp8(M.array(2.0)) + 0)
    assert mx.to_fp8(mx.array(2.0)).tolist() == 64


@pytest.mark.parametrize("op", ["broadcast_arrays", "stack"])
def test_degenerate_calls_mlx_takes(mlx, op):
    """`broadcast_arrays()` is an empty list, and `stack(..., axis=None)` stacks along
    axis 0: they were a ValueError and a TypeError."""
    if op == "broadcast_arrays":
        for M in (mx, mlx):
            assert M.broadcast_arrays() == []
    else:
        assert_same_bits(mlx, lambda M: M.stack([M.zeros((2, 3)), M.ones((2, 3))],
                                                axis=None))
        assert_same_bits(mlx, lambda M: M.stack([M.array(1)], None))


@pytest.mark.parametrize("num", [2**31, -2**31 - 1, 2**40])
def test_linspace_num_beyond_32_bits_is_a_type_error(mlx, num):
    """MLX's binding takes a 32-bit `num` only: 2**31 made 2**31 values (minutes, GiBs);
    raised when built, so nothing here is evaluated."""
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.linspace(0, 1, num)


@pytest.mark.parametrize("start, stop", [("1", 2), (0, "2.5"), (b"1", 2)])
def test_linspace_of_strings_is_a_type_error(mlx, start, stop):
    """A string was read as the number it spells (or a ValueError for 'a')."""
    assert_same_bits(mlx, lambda M: M.linspace(start, stop, 3))


_A = "M.reshape(M.arange(6), (2, 3))"


@pytest.mark.parametrize("call", [
    "M.split(A, M.array(3), axis=1)", "M.split(A, M.array(2, M.uint8))",
    "M.tile(A, M.array([2]))", "M.tile(A, M.array(2))", "M.tile(A, [M.array(2), 1])",
    "M.pad(A, M.array(1))", "M.pad(A, M.array([1, 2]))", "M.pad(A, [(M.array(1), 2), (0, 1)])",
    "M.roll(A, M.array(1))", "M.roll(A, M.array([1, 2]), axis=(0, 1))",
    "M.roll(A, 1, axis=M.array(1))", "M.expand_dims(A, M.array(0))",
    "M.squeeze(M.zeros((1, 2)), M.array(0))", "M.swapaxes(A, M.array(0), 1)"])
def test_integer_arrays_as_int_arguments(mlx, call):
    """MLX's binding reads a 0-d integer array as an int (and a 1-D one as a sequence of
    them) for counts, widths, shifts and axes: here they were a TypeError."""
    assert_same_bits(mlx, lambda M: eval(call, {"M": M, "A": eval(_A, {"M": M})}))
