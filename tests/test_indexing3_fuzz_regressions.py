"""Cases a third differential fuzz of indexing and updates against MLX 0.32.4 found (index
kinds mixed, updates under compile and grad, dtype casting on assignment): the result
(dtype, shape, values) or the error's type is MLX's.  One difference is kept on purpose:
an update through ints and slices (`a[0, :] = v`) drops the value's leading 1s as NumPy
and MLX's `a[0] = v` do, where MLX 0.32.4 refuses them."""
from __future__ import annotations

import numpy as np  # noqa: F401  (index texts name it)
import pytest

from parity import assert_same_bits


@pytest.mark.parametrize("index, value", [
    ("0", (1, 1, 3, 4)),
    ("(None, 0)", (1, 1, 3, 4)),
    ("(None, None, 0, 1)", (1, 1, 1, 1)),
    ("(slice(None),)", (1, 1, 2, 3, 4)),
    ("(M.array(0),)", (1, 3, 4)),
    ("(0, M.array(1))", (1, 4)),
])
@pytest.mark.parametrize("how", ["set", "add"])
def test_a_bare_int_as_many_nones_as_ints_or_an_index_array_drop_leading_ones(
        mlx, index, value, how):
    """These drop the value's leading 1s, as NumPy and MLX do."""
    def fn(M):
        a = M.arange(24).reshape(2, 3, 4).astype(M.float32)
        k, v = eval(index), M.ones(value, M.float16)
        if how == "set":
            a[k] = v
            return a
        return a.at[k].add(v)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("index", [(0, slice(None)), (0, 1), (None, 0, 1)])
def test_an_update_by_ints_and_slices_drops_leading_ones_as_numpy(index):
    """The difference kept on purpose (see the docstring): NumPy's result, where MLX 0.32.4
    refuses a value of more axes than `a[index]`."""
    import streamlet.core as mx
    want = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    v = np.full((1, 1) + want[index].shape, 7, np.float32)
    want[index] = v
    a = mx.arange(24).reshape(2, 3, 4).astype(mx.float32)
    a[index] = mx.array(v)
    np.testing.assert_array_equal(np.array(a), want)


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_grad_of_take_along_axis_by_uint64_indices(mlx, axis, dtype):
    """The vjp scatters by the indices beside each axis's positions: uint64 indices with
    signed positions would have no integer common type."""
    def fn(M):
        a = M.arange(12).reshape(3, 4).astype(getattr(M, dtype))
        i = M.array([[1, 0, 2, 0], [2, 2, 0, 1]], M.uint64) if axis == 0 else \
            M.array([[3, 3], [0, 1], [2, 2]], M.uint64)
        return M.grad(lambda x: M.take_along_axis(x, i, axis=axis).astype(M.float32)
                      .square().sum())(a)
    assert_same_bits(mlx, fn)


def test_grad_of_take_along_axis_by_uint64_indices_inside_compile(mlx):
    def fn(M):
        i = M.array([[0], [2], [2]], M.uint64)
        g = M.grad(lambda x: (M.take_along_axis(x, i, axis=1) * 3).sum())
        return M.compile(g)(M.ones((3, 4)))
    assert_same_bits(mlx, fn)
