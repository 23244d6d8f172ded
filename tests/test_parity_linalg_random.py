"""linalg.cholesky of matrices that are not positive definite, and randint with
low >= high, against MLX 0.32.4 (which returns values there, not errors)."""
import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same

NAN = float("nan")
NOT_PD = [
    [[1.0, 2.0], [2.0, 1.0]],
    [[-1.0, 0.0], [0.0, 1.0]],
    [[1.0, 5.0], [7.0, 9.0]],  # not symmetric: one triangle is read
    [[4.0, 2.0, 2.0], [2.0, 1.0, 5.0], [2.0, 5.0, 9.0]],
    [[4.0, 2.0, 2.0, 1.0], [2.0, 10.0, 5.0, 1.0], [2.0, 5.0, -9.0, 3.0], [1.0, 1.0, 3.0, 7.0]],
    [[NAN, 0.0], [0.0, 1.0]],
    [[4.0, NAN], [NAN, 1.0]],
    [[4.0, 2.0], [2.0, 3.0]],  # positive definite
]


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("case", range(len(NOT_PD)))
def test_cholesky_where_lapack_stops_matches_mlx(mlx, case, upper):
    assert_same(mlx, lambda m: m.linalg.cholesky(m.array(NOT_PD[case]), upper=upper,
                                                 stream=m.cpu), rtol=1e-6)


def test_cholesky_batch_with_one_bad_matrix(mlx):
    assert_same(mlx, lambda m: m.linalg.cholesky(
        m.stack([m.eye(2) * 4, m.array(NOT_PD[0])]), stream=m.cpu), rtol=1e-6)


def test_cholesky_of_a_positive_definite_matrix_still_factors(rng):
    a = rng.standard_normal((5, 5)).astype(np.float32)
    spd = a @ a.T + 5 * np.eye(5, dtype=np.float32)
    low = np.array(mx.linalg.cholesky(mx.array(spd), stream=mx.cpu))
    np.testing.assert_allclose(low @ low.T, spd, rtol=1e-4, atol=1e-4)


RANDINT = [
    lambda m: m.random.randint(10, -10, [50], key=m.random.key(0)),
    lambda m: m.random.randint(10, -10, [5], dtype=m.uint8, key=m.random.key(0)),
    lambda m: m.random.randint(5, 5, [3], key=m.random.key(1)),
    lambda m: m.random.randint(m.array([3, 10]), m.array([3, 2]), [2], key=m.random.key(0)),
]


@pytest.mark.parametrize("case", range(len(RANDINT)))
def test_randint_with_low_at_or_above_high_matches_mlx(mlx, case):
    assert_same(mlx, RANDINT[case], what=f"case {case}")
