"""float16 and bfloat16 against MLX 0.32.4: unary ops computed in float32 and rounded
once, predicates that see NaN and infinities in bfloat16, median with NaN."""
import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same

NAN, INF = float("nan"), float("inf")
HALVES = ["float16", "bfloat16"]
ULP = {"float16": 2 ** -10, "bfloat16": 2 ** -7}
VALUES = [0.0, -0.0, 1.0, -2.5, 8.0, -8.0, 3.3, 20.0, 0.7, NAN, INF, -INF]


def test_sigmoid_of_eight_in_float16_is_not_one():
    assert mx.sigmoid(mx.array(8.0).astype(mx.float16)).item() == 0.99951171875
    assert mx.sigmoid(mx.array(-8.0).astype(mx.float16)).item() != 0.0


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", ["sigmoid", "isnan", "isinf", "isfinite", "isposinf",
                                "isneginf", "exp", "tanh", "erf", "log1p", "abs", "sign"])
def test_half_unary_matches_mlx(mlx, op, dtype):
    # one ulp where MLX's own exp and erf approximations round the other way
    rtol = None if op.startswith("is") or op in ("abs", "sign") else ULP[dtype]
    assert_same(mlx, lambda m: getattr(m, op)(m.array(VALUES).astype(getattr(m, dtype))),
                rtol=rtol, what=f"{op} {dtype}")


@pytest.mark.parametrize("dtype", HALVES + ["float32"])
def test_median_with_nan_is_nan(mlx, dtype):
    for vals in ([1.0, NAN, 0.0], [NAN, 1.0, 0.0], [1.0, 2.0, NAN, 4.0], [1.0, 2.0, 3.0, 4.0]):
        assert_same(mlx, lambda m: m.median(m.array(vals, dtype=getattr(m, dtype))),
                    what=f"{vals} {dtype}")
    x = np.array([[1.5, NAN, 3.0], [4.0, 5.0, 7.0]], np.float32)
    for axis in (0, 1, None):
        assert_same(mlx, lambda m: m.median(m.array(x).astype(getattr(m, dtype)), axis=axis))
