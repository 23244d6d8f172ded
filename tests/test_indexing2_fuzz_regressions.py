"""Cases a second differential fuzz of indexing and updates against MLX 0.32.4 found: the
result (dtype, shape, values) or the error's type is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

from parity import assert_same_bits


@pytest.mark.parametrize("index", [
    "(..., 1, np.array(0), ...)",
    "(..., M.array(0), 1, ...)",
])
def test_two_ellipses_beside_index_arrays_are_a_value_error(mlx, index):
    """An index takes one Ellipsis, whatever else it holds."""
    def fn(M):
        return M.arange(12).reshape(3, 4)[eval(index)]
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("index", [
    "(M.array([0, 1], M.uint64), M.array([1], M.int32))",
    "(M.array([1], M.int8), M.array(0, M.uint64))",
    "(M.array([0], M.uint64), slice(None), [1, 0])",
])
@pytest.mark.parametrize("how", ["get", "set", "add"])
def test_uint64_and_signed_index_arrays_have_no_integer_common_type(mlx, index, how):
    """MLX's indices share one type; uint64 with a signed integer makes it a float, which
    gather and scatter refuse.  A NumPy 0-d array is a plain int (uint32 in MLX)."""
    def fn(M):
        a = M.arange(24).reshape(2, 3, 4)
        k = eval(index)
        if how == "get":
            return a[k]
        if how == "set":
            a[k] = 5
            return a
        return a.at[k].add(1)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("index", ["np.array(1.5)", "np.array(True)",
                                   "(np.array(2.0), M.array([0]))"])
def test_a_numpy_0d_array_index_that_is_not_an_integer_is_a_type_error(mlx, index):
    def fn(M):
        return M.arange(12).reshape(3, 4)[eval(index)]
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("shape, index", [
    ((0, 3), "M.array([], M.int32)"),
    ((0, 3), "(M.array([], M.int32),)"),
    ((2, 0), "(slice(None), M.array([], M.int32))"),
])
@pytest.mark.parametrize("how", ["set", "add", "maximum"])
def test_scatter_by_an_index_array_along_an_empty_axis_is_a_value_error(mlx, shape, index,
                                                                         how):
    """MLX scatters a block of length 1 along an axis an index array picks from: too large
    for an axis of length 0."""
    def fn(M):
        a = M.zeros(shape, M.float32)
        if how == "set":
            a[eval(index)] = 1.0
            return a
        return getattr(a.at[eval(index)], how)(1.0)
    assert_same_bits(mlx, fn)
