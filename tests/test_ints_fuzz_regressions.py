"""Cases a differential fuzz of integer arithmetic and bitwise ops against MLX 0.32.4 found
(every integer dtype and bool, mixed signedness, Python ints and 0-d arrays as operands):
the result (value, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import pytest

from parity import assert_same_bits, bits_outcome


@pytest.mark.parametrize("op", ["logical_and", "logical_or"])
@pytest.mark.parametrize("value", [2 ** 63, 2 ** 64, -2 ** 63 - 1])
@pytest.mark.parametrize("dtype", ["bool_", "uint64", "int8"])
@pytest.mark.parametrize("first", [False, True])
def test_logical_op_with_an_int_beyond_int64_raises_runtime_error(mlx, op, value, dtype,
                                                                  first):
    """logical_and/logical_or make each operand an array on its own; an int beyond int64
    failed there with OverflowError, where MLX's binary ops (these too) raise RuntimeError."""
    def fn(M):
        a = M.array([1, 0], getattr(M, dtype))
        return getattr(M, op)(value, a) if first else getattr(M, op)(a, value)
    assert bits_outcome(mlx, fn) is RuntimeError
    assert_same_bits(mlx, fn)

