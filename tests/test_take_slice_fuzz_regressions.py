"""Cases a differential fuzz of take, slice, slice_update and clip against MLX 0.32.4
found: the result (dtype, shape, values, signed zeros) or the error's type is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same_bits


@pytest.mark.parametrize("index, axis", [(3, 0), (-4, 0), (5, None), (True, 0), (-2, 0)])
def test_take_of_a_python_int_is_a_squeezed_one_wide_slice(mlx, index, axis):
    """MLX takes [i, i + 1) and squeezes it: an index out of range leaves an empty slice,
    which fails to squeeze when built; a bool is an int."""
    def fn(M):
        a = M.array([1, 2, 3])
        return M.take(a, index) if axis is None else M.take(a, index, axis)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_take_of_minus_one_is_the_last_element(axis):
    """-1 is the last element, as NumPy's and as every other negative index (MLX 0.32.4's
    slice for it, [n - 1, 0), is empty and fails to squeeze)."""
    a = mx.array([1, 2, 3])
    got = mx.take(a, -1) if axis is None else mx.take(a, -1, axis)
    assert got.shape == () and got.item() == 3


@pytest.mark.parametrize("shape, axis", [((), None), ((0, 3), 1), ((2, 0), 0)])
def test_take_of_a_python_int_checks_the_whole_array(mlx, shape, axis):
    """A 0-d array's flattened index 1 fails; so does any take from an array with no
    elements, whatever the taken axis's length."""
    def fn(M):
        a = M.zeros(shape)
        return M.take(a, 1 if shape == () else 0, *(() if axis is None else (axis,)))
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64"])
def test_slice_takes_a_0d_start(mlx, dtype):
    """One axis, one start: a 0-d start array is enough."""
    def fn(M):
        a = M.arange(12).reshape(3, 4)
        return M.slice(a, M.array(1).astype(getattr(M, dtype)), [1], [3, 2])
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64"])
def test_slice_update_takes_a_0d_start(mlx, dtype):
    def fn(M):
        a = M.zeros((3, 4), M.float16)
        return M.slice_update(a, M.array([[5, 6]], M.int16), M.array(2).astype(getattr(M, dtype)),
                              [-1])
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("start, axes", [
    ("M.array([], M.float32)", []),      # an empty start still needs an integer type
    ("M.array([0, 0])", [0, 0]),         # repeated axes
])
@pytest.mark.parametrize("op", ["slice", "slice_update"])
def test_bad_dynamic_starts_are_value_errors(mlx, start, axes, op):
    def fn(M):
        a = M.zeros((3, 3))
        if op == "slice":
            return M.slice(a, eval(start), axes, [1, 1])
        return M.slice_update(a, M.ones((1, 1)), eval(start), axes)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("shape, update, axes", [
    ((0, 2), (1, 1), [0]),
    ((2, 0), (2, 1), [0]),
    ((0, 0, 0), (0, 1, 1), [2, 1]),
])
def test_slice_update_cuts_a_one_wide_update_to_an_empty_axis(mlx, shape, update, axes):
    """An update axis longer than the array's is cut to it: a 1 broadcasts to a 0."""
    def fn(M):
        return M.slice_update(M.zeros(shape, M.int8), M.ones(update, M.int8),
                              M.array([0] * len(axes), M.uint32), axes)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("lo, hi", [(3, None), (None, -2.5), (3, 57), (1.0, 2.0)])
def test_clip_keeps_a_complex_nan_in_either_part(mlx, lo, hi):
    """maximum/minimum keep their first operand where it is NaN: for a complex number,
    where either part is."""
    def fn(M):
        a = M.array(np.array([complex(-0.0, np.nan), complex(1, np.nan), complex(np.nan, 0),
                              2 - 1j], np.complex64))
        return M.clip(a, lo, hi)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_extremes_of_a_complex_nan_in_the_imaginary_part(mlx, op):
    def fn(M):
        x = M.array(np.array([complex(-0.0, np.nan), complex(1, np.nan)] * 2, np.complex64))
        y = M.array(np.array([3, 0, -3, 5j], np.complex64))
        return getattr(M, op)(x, y)
    assert_same_bits(mlx, fn)
