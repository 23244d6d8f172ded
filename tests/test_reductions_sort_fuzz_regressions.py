"""Cases a differential fuzz of the reductions, sorts and scans (random shapes, 0-sized and
0-d included, every dtype, NaN and infinities, axes negative, out of range or repeated,
keyword mixes, `stream=`) against MLX 0.32.4 found: the error's type (or the result) is
MLX's."""
from __future__ import annotations

import pytest

from parity import assert_same


@pytest.mark.parametrize("op, k", [("partition", 1.0), ("argpartition", 1.5),
                                   ("partition", 2**40), ("topk", 2**40)])
def test_kth_and_k_are_32_bit_integers(mlx, op, k):
    """kth (and topk's k) is an int to MLX's binding: a float is a TypeError (partition(a,
    1.0) was a partition around element 1), one beyond 32 bits too (it was a ValueError)."""
    assert_same(mlx, lambda M: getattr(M, op)(M.array([3.0, 1.0, 2.0]), k))


@pytest.mark.parametrize("op", ["partition", "argpartition"])
def test_kth_type_checked_before_the_axis(mlx, op):
    assert_same(mlx, lambda M: getattr(M, op)(M.array(1.0), 1.0))


@pytest.mark.parametrize("op", ["sort", "argsort", "topk"])
@pytest.mark.parametrize("axis", [1.0, [0, 1], (0,), "0"])
def test_sort_of_a_scalar_refuses_an_axis_of_another_type_first(mlx, op, axis):
    """A non-integer axis is a TypeError (MLX's binding) even for a 0-d array, where an
    integer axis is out of range (it was an AxisError)."""
    args = (1,) if op == "topk" else ()
    assert_same(mlx, lambda M: getattr(M, op)(M.array(2.5), *args, axis=axis))


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_dtype_type_checked_before_the_axis(mlx, op):
    """A dtype that is no Dtype is a TypeError even where the axis is out of range."""
    assert_same(mlx, lambda M: getattr(M, op)(M.array(1), axis=0, dtype="float32"))


@pytest.mark.parametrize("flag", [1, 0, None, "x", "np.bool_"])
@pytest.mark.parametrize("call", [
    lambda M, f: M.sum(M.ones((2, 3)), keepdims=f),
    lambda M, f: M.ones((2, 3)).max(keepdims=f),
    lambda M, f: M.logsumexp(M.ones((2, 3)), axis=7, keepdims=f),
    lambda M, f: M.var(M.ones((2, 3)), keepdims=f),
    lambda M, f: M.argmin(M.ones((2, 3)), keepdims=f),
    lambda M, f: M.softmax(M.ones((2, 3)), precise=f),
    lambda M, f: M.cumsum(M.ones((2, 3)), reverse=f),
    lambda M, f: M.cummax(M.ones((2, 3)), inclusive=f),
])
def test_flags_are_bools_only(mlx, flag, call):
    """keepdims, precise, reverse and inclusive are bools to MLX's binding: an int, None, a
    string or a NumPy bool is a TypeError, before any axis check (they were truth-tested)."""
    import numpy as np
    f = np.bool_(True) if flag == "np.bool_" else flag
    assert_same(mlx, lambda M: call(M, f))
