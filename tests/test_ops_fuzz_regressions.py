"""Cases a differential fuzz of the core ops against MLX 0.32.4 found: the result (value,
dtype, shape or the error raised) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx


def _outcome(M, fn):
    try:
        r = fn(M)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e).__name__
    return repr(r.dtype), r.shape, r.tolist()


def _same(mlx, fn):
    assert _outcome(mx, fn) == _outcome(mlx, fn)


@pytest.mark.parametrize("op", ["logical_and", "logical_or"])
@pytest.mark.parametrize("scalar", [-3, 300, 2**40, 0.5])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint32", "bool_"])
def test_logical_ops_take_each_operand_on_its_own(mlx, op, scalar, dtype):
    """No weak scalar (so no overflow check): `logical_and(uint8_array, -3)` is the array's
    truth, as in MLX, where it raised ValueError."""
    def fn(M):
        a = M.array([1, 0, 2], getattr(M, dtype))
        return getattr(M, op)(a, scalar), getattr(M, op)(scalar, a)
    assert [_outcome(mx, lambda M: fn(M)[i]) for i in (0, 1)] == \
        [_outcome(mlx, lambda M: fn(M)[i]) for i in (0, 1)]


@pytest.mark.parametrize("index", [None, Ellipsis], ids=["None", "Ellipsis"])
@pytest.mark.parametrize("value", ["2.5", "True", "M.array([1.5, 2.5, 3.5, 4.5], M.float16)",
                                   "M.array([[1.5]])", "M.array(7, M.int8)"])
def test_setitem_with_a_bare_none_or_ellipsis_takes_the_values_dtype(mlx, index, value):
    """`a[...] = 2.5` writes no scatter in MLX: `a` becomes the value broadcast, in the
    value's dtype (float32 here), where it stayed int32 with the value truncated."""
    def fn(M):
        a = M.array([1, 2, 3, 4], M.int32)
        a[index] = eval(value)
        return a
    _same(mlx, fn)


@pytest.mark.parametrize("index", [None, Ellipsis], ids=["None", "Ellipsis"])
@pytest.mark.parametrize("method", ["add", "subtract", "multiply", "divide", "maximum",
                                    "minimum"])
@pytest.mark.parametrize("value", ["2.5", "M.array(2)", "M.array([[1.5], [0.5]])"])
def test_at_with_a_bare_none_or_ellipsis_is_the_plain_op(mlx, index, method, value):
    """`a.at[...].divide(2)` is `a / 2` in MLX (float32 for an int32 `a`), not the
    scatter's product with the reciprocal in `a`'s dtype (all 0s)."""
    def fn(M):
        a = M.array(np.arange(6).reshape(2, 3), M.int32)
        return getattr(a.at[index], method)(eval(value))
    _same(mlx, fn)


def test_a_python_int_beyond_int64_as_an_operand_raises_runtime_error(mlx):
    for M in (mx, mlx):
        for dtype in (M.float32, M.int64, M.uint64):
            with pytest.raises(RuntimeError):
                M.array([1], dtype) + 2**63
            with pytest.raises(RuntimeError):
                M.multiply(-2**63 - 1, M.array([1], dtype))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", ["bfloat16", "complex64", "bool_", "float16", "uint8"])
@pytest.mark.parametrize("reverse", [False, True])
def test_exclusive_extreme_scans_start_from_mlxs_extreme(mlx, op, dtype, reverse):
    """An exclusive cummax/cummin starts from the dtype's extreme: bfloat16 raised
    (NumPy's kind "V" is no float there) and complex started from (-inf, 0), not MLX's
    (-inf, -inf)."""
    def fn(M):
        a = M.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
        a = (a + 1j * a if dtype == "complex64" else a).astype(getattr(M, dtype))
        r = getattr(M, op)(a, axis=1, reverse=reverse, inclusive=False)
        return r.astype(M.float32) if dtype == "bfloat16" else r
    _same(mlx, fn)


@pytest.mark.parametrize("shape,axis", [((0,), None), ((0, 3), -1), ((3, 0), 0), ((2, 0), ())])
def test_logsumexp_of_an_empty_array_raises_as_mlx(mlx, shape, axis):
    for M in (mx, mlx):
        with pytest.raises(ValueError, match="empty array"):
            M.logsumexp(M.zeros(shape), axis=axis)


@pytest.mark.parametrize("value, dtype", [(300, "uint8"), (-1, "uint32"), (2**40, "int32"),
                                          (-129, "int8"), (2**40, "int64"), (255, "uint8")])
def test_full_checks_an_int_against_its_dtype_when_built(mlx, value, dtype):
    """MLX's ValueError comes from `full` itself; here it came from the kernel, at eval."""
    assert _outcome(mx, lambda M: M.full((2,), value, getattr(M, dtype))) == \
        _outcome(mlx, lambda M: M.full((2,), value, getattr(M, dtype)))
    like = mx.zeros((2,), getattr(mx, dtype))
    if _outcome(mlx, lambda M: M.full((2,), value, getattr(M, dtype))) == "ValueError":
        with pytest.raises(ValueError, match="overflow"):
            mx.full_like(like, value)  # raised when built: nothing evaluated


def test_full_of_minus_one_as_uint64_is_refused_when_built():
    """MLX wraps it (2**64 - 1); streamlet refuses ints beyond their type, as `array` does
    (docs/differences.rst), and says so when the op is built."""
    with pytest.raises(ValueError, match="overflow"):
        mx.full((2,), -1, mx.uint64)
