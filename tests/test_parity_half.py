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


@pytest.mark.parametrize("dtype", HALVES + ["float32"])
def test_sorting_with_nan_matches_mlx(mlx, dtype, rng):
    """NaN sorts last; bfloat16 keys are exact float32 widenings (ml_dtypes' own sort of
    bfloat16 has misplaced NaN)."""
    vals = rng.standard_normal(24).astype(np.float32)
    vals[[3, 11]] = NAN
    vals[[5, 7]] = [INF, -INF]

    def arr(m):
        return m.array(vals.reshape(4, 6)).astype(getattr(m, dtype))
    for axis in (-1, 0, None):
        assert_same(mlx, lambda m: m.sort(arr(m), axis=axis), what=f"sort {axis}")
        assert_same(mlx, lambda m: m.argsort(arr(m), axis=axis), what=f"argsort {axis}")
    assert_same(mlx, lambda m: m.sort(m.topk(arr(m), 3, axis=-1), axis=-1), what="topk")
    assert_same(mlx, lambda m: m.sort(m.partition(arr(m), 2, axis=-1)[:, :3], axis=-1),
                what="partition")
    got = np.array(mx.argpartition(arr(mx), 2, axis=-1).astype(mx.int32))
    keys = np.array(arr(mx).astype(mx.float32))
    kth = np.take_along_axis(keys, got, -1)
    want = np.sort(keys, -1)
    np.testing.assert_array_equal(kth[:, 2], want[:, 2])
    assert_same(mlx, lambda m: m.searchsorted(m.sort(arr(m).reshape(-1)), arr(m)[0]),
                what="searchsorted")
