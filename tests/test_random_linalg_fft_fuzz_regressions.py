"""Cases a differential fuzz of mx.random, mx.linalg and mx.fft against MLX 0.32.4 found:
the result (value bit for bit or to the transform's rounding, dtype, shape, or the error's
type) is MLX's."""
from __future__ import annotations

import math

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_close_outcome, assert_same_bits


@pytest.mark.parametrize("low, high, dtype", [(-2, 0.5, "int32"), (-1.5, 0.25, "int16"),
                                              (-5, 5, "bool_"), (-3, 5, "bool_")])
def test_randint_clamps_to_high_minus_one_taken_in_highs_dtype(mlx, low, high, dtype):
    """MLX clamps to `astype(high - 1, dtype)`, the subtraction in high's own dtype: a
    float high of 0.5 clamps at -0.5 -> 0 (it was int(0.5) - 1 = -1), and a bool draw is
    `max(min(bool(floor(u)), bool(high - 1)), bool(low))` (a negative low makes all True)."""
    assert_same_bits(mlx, lambda M: M.random.randint(low, high, (64,), getattr(M, dtype),
                                          key=M.random.key(3)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("loc", [0, 0.0])
def test_normal_adds_a_zero_loc(mlx, dtype, loc):
    """A given loc is added even when 0: `0 + -0.0` is 0.0 (scale 0 makes -0.0 samples)."""
    assert_same_bits(mlx, lambda M: M.random.normal((16,), getattr(M, dtype), loc, 0.0,
                                         key=M.random.key(1)))


def test_laplace_of_float64_takes_log1p_in_float64(mlx):
    """MLX's `-1 (as dtype) * |u|` promotes to float64, so log1p is float64's (it was
    float32's, off by about 1e-8 relative); the remaining difference is log1p's last bit."""
    assert_close_outcome(mlx, lambda M: M.random.laplace((256,), M.float64, 0.5, 2.0, key=M.random.key(5)),
           1e-13)


@pytest.mark.parametrize("loc, scale", [(1e-50, 0.0), (1e-50, -0.0)])
def test_laplace_compares_loc_and_scale_as_float32(mlx, loc, scale):
    """loc and scale are C floats in MLX: 1e-50 is 0 there, so nothing is added and the
    -0.0 samples of a zero scale stay -0.0."""
    assert_same_bits(mlx, lambda M: M.random.laplace((64,), M.float32, loc, scale, key=M.random.key(7)))


def test_laplace_refuses_array_loc_with_a_type_error(mlx):
    assert_same_bits(mlx, lambda M: M.random.laplace((2,), loc=M.array([1.0, 2.0]), key=M.random.key(1)))


@pytest.mark.parametrize("op", [
    lambda M: M.random.uniform(shape=(2,), dtype=M.float64, key=M.random.key(1)),
    lambda M: M.random.gumbel((2,), M.float64, key=M.random.key(1)),
    lambda M: M.random.truncated_normal(-1, 1, (2,), M.float64, key=M.random.key(1)),
    lambda M: M.random.key(-1),
    lambda M: M.random.key(2**64),
    lambda M: M.random.seed(-1),
    lambda M: M.random.permutation(2.5, key=M.random.key(1)),
])
def test_bad_random_arguments_raise_mlxs_error_type(mlx, op):
    """float64 draws raise RuntimeError ("[uniform] Unsupported type."); a seed outside
    uint64 or a float for permutation is refused by MLX's binding: TypeError."""
    assert_same_bits(mlx, op)


@pytest.mark.parametrize("op", [lambda M: M.random.key(True), lambda M: M.random.permutation(
    True, key=M.random.key(2))])
def test_bool_is_an_int_for_key_and_permutation(mlx, op):
    assert_same_bits(mlx, op)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (3, 0), (0, 3), (2, 0, 3)])
@pytest.mark.parametrize("fn", ["lu", "lu_factor"])
def test_lu_of_an_empty_matrix(fn, shape):
    """MLX 0.32.4 dies of SIGFPE here (not copied); streamlet raised "cannot reshape"."""
    m, n = shape[-2:]
    outs = getattr(mx.linalg, fn)(mx.zeros(shape), stream=mx.cpu)
    mx.eval(*outs)
    k, batch = min(m, n), shape[:-2]
    want = ([batch + (m,), batch + (m, k), batch + (k, n)] if fn == "lu" else
            [shape, batch + (k,)])
    assert [o.shape for o in outs] == want


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inv_inverts_the_factor_not_its_product(mlx, upper):
    """MLX computes inv(L)^T inv(L); forming L L^T first squares the condition number
    (relative errors up to 1.4e-3 for these factors, 2e-7 now)."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        x = np.tril(rng.normal(size=(4, 4)) * 10) + np.diag(rng.uniform(0.01, 0.1, 4))
        x = (x.T if upper else x).astype(np.float32)
        assert_close_outcome(mlx, lambda M: M.linalg.cholesky_inv(M.array(x), upper=upper, stream=M.cpu),
               1e-5)


@pytest.mark.parametrize("fn, dtype", [("det", "float32"), ("det", "float16"),
                                       ("det", "bfloat16"), ("slogdet", "float32"),
                                       ("slogdet", "float16")])
@pytest.mark.parametrize("n", [2, 3])
def test_det_up_to_three_by_three_is_mlxs_closed_form(mlx, dtype, n, fn):
    """Up to 3 x 3 MLX multiplies out the cofactor formula in the input's dtype (float32
    for integers): det of a bfloat16 3 x 3 is rounded op by op (98.5, it was 99.5)."""
    rng = np.random.default_rng(n)
    x = (rng.normal(size=(2, n, n)) * 3).astype(np.float32)
    if n >= 2:
        x[1, -1] = x[1, 0]  # singular

    def op(M):
        out = getattr(M.linalg, fn)(M.array(x).astype(getattr(M, dtype)), stream=M.cpu)
        return out[0] if fn == "slogdet" else out  # log|det| differs by log's last bit
    assert_same_bits(mlx, op)


@pytest.mark.parametrize("shape, ord, axis", [
    ((0,), math.inf, None), ((0,), -math.inf, 0), ((0, 3), 1, (1, 0)), ((0, 3), -1, (1, 0)),
    ((0, 3), 2, None), ((3, 0), -2, (0, 1)), ((0, 3), math.inf, None),
    ((2, 0, 3), -math.inf, (1, 2)), ((3, 0), 1, None)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_that_takes_a_max_or_min_over_an_empty_axis_raises(mlx, shape, ord, axis,
                                                               keepdims):
    """MLX's max and min refuse an empty axis (ValueError when the norm is built); streamlet
    gave 0 for max and a RuntimeError at eval for min."""
    assert_same_bits(mlx, lambda M: M.linalg.norm(M.zeros(shape), ord, axis, keepdims, stream=M.cpu))


@pytest.mark.parametrize("fn", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n, d", [(17, 3), (17, 0.1), (100, 1.0), (100, -2.0), (4097, 3)])
def test_fftfreq_is_float32_index_times_float32_scale(mlx, fn, n, d):
    """MLX multiplies float32 indices by float32(1 / (n d)); NumPy's float64 quotient
    rounded to float32 differs in the last bit (fftfreq(17, 3)[6])."""
    assert_same_bits(mlx, lambda M: getattr(M.fft, fn)(n, d))


@pytest.mark.parametrize("shape, axis", [((0,), 0), ((0, 2), 0), ((3, 0, 2), 1)])
def test_irfft_of_an_empty_axis_zero_padded_is_zeros(mlx, shape, axis):
    """irfft(zeros((0, 2)), 13, axis=0) read uninitialized memory (NumPy's irfftn): after
    other transforms had used the heap, it returned their leftovers."""
    for n in (13, 16, 31):
        mx.eval(mx.fft.irfft(mx.arange(2 * n, dtype=mx.float32) + 1e3, 2 * n))
        assert_close_outcome(mlx, lambda M: M.fft.irfft(M.zeros(shape), n, axis, stream=M.cpu))
