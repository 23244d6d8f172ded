"""Cases a second differential fuzz of mx.linalg and mx.fft against MLX 0.32.4 found (norm's
axes, solve's dtypes, singular triangles, eig's order, fft's norm, cross's axis): the
result (value to the op's rounding, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import math

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_close_outcome, assert_same_bits


@pytest.mark.parametrize("shape, ord, axis", [
    ((), None, ()), ((3,), None, []), ((2, 3), None, ()), ((), 3, None), ((), "fro", None),
    ((), "nuc", ()), ((2, 3), 0.5, ()), ((3,), 0, []), ((2, 3), "fro", [])])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_over_no_axes(mlx, shape, ord, axis, keepdims):
    """The 2-norm over no axes is |x| elementwise; any other norm (and a 0-d input with an
    ord) raises ValueError when built (it raised RuntimeError at eval)."""
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape) - 2
    assert_same_bits(mlx, lambda M: M.linalg.norm(M.array(x), ord, axis, keepdims, stream=M.cpu))


@pytest.mark.parametrize("a_dtype, b_dtype", [("int32", "float32"), ("bfloat16", "float32"),
                                              ("float16", "float64"), ("int32", "float64")])
@pytest.mark.parametrize("fn", ["solve", "solve_triangular"])
def test_solve_factors_a_in_its_own_dtype(mlx, fn, a_dtype, b_dtype):
    """MLX factors (or inverts) `a` before promoting: a non-float `a` raises ValueError."""
    a = np.eye(3, dtype=np.float32) * 2
    assert_same_bits(mlx, lambda M: getattr(M.linalg, fn)(
        M.array(a).astype(getattr(M, a_dtype)), M.ones((3, 2), getattr(M, b_dtype)), stream=M.cpu))


@pytest.mark.parametrize("op", [
    lambda M, a: M.linalg.tri_inv(a, stream=M.cpu),
    lambda M, a: M.linalg.solve_triangular(a, M.ones((4,)), stream=M.cpu),
    lambda M, a: M.linalg.cholesky_inv(a, stream=M.cpu)])
def test_a_zero_on_a_triangles_diagonal_fails(mlx, op):
    """A zero on the diagonal fails at eval (RuntimeError), as LAPACK's trtri: NumPy's LU of
    this triangle rounds past its zero pivot and gave numbers."""
    a = np.array([[1, 0, 0, 0], [-1, -1, 0, 0], [0, 1, 0, 0], [-3, 2, -1, 1]], np.float32)
    assert_same_bits(mlx, lambda M: op(M, M.array(a)))


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("fn", ["eigvals", "eig"])
def test_eigenvalues_come_in_mlxs_order(mlx, fn, dtype):
    """MLX's geev reads the transpose of its row-major matrix and finds the eigenvalues in
    that matrix's order (NumPy's order of `a` itself differed in most of these 3 x 3s)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3, 3)) + (1j * rng.normal(size=(32, 3, 3)) if dtype == "complex64" else 0)
    x = x.astype(dtype)
    assert_close_outcome(mlx, lambda M: getattr(M.linalg, fn)(M.array(x), stream=M.cpu)[0]
                         if fn == "eig" else M.linalg.eigvals(M.array(x), stream=M.cpu))
    if fn == "eig":  # the vectors go with their values (MLX's complex ones do not: not copied)
        w, v = (np.array(o) for o in mx.linalg.eig(mx.array(x), stream=mx.cpu))
        np.testing.assert_allclose(x @ v, v * w[:, None, :], atol=1e-4)


@pytest.mark.parametrize("fn", ["fft", "irfft", "fft2", "rfftn", "stft"])
def test_fft_norm_none_is_a_type_error(mlx, fn):
    """MLX's binding takes only a string for `norm` (it was a ValueError)."""
    args = (16,) if fn == "stft" else ()
    assert_same_bits(mlx, lambda M: getattr(M.fft, fn)(M.ones((4, 64)), *args, norm=None))


@pytest.mark.parametrize("a, b, axis, dtype", [
    ((2, 3), (3,), -2, "float32"), ((3, 1), (1,), -2, "int32"), ((2, 3), (3,), 1, "float32"),
    ((2, 1, 3), (1, 3), 2, "float32"), ((3, 2), (2, 2), 0, "bool_"), ((2,), (3,), 0, "bool_")])
def test_cross_checks_the_axis_of_each_input(mlx, a, b, axis, dtype):
    """The axis must exist in each input (IndexError; it was checked in the broadcast shape);
    bool vectors of sizes 2 and 3 meet MLX's bool negative (ValueError)."""
    assert_same_bits(mlx, lambda M: M.linalg.cross(M.ones(a, getattr(M, dtype)),
                                                   M.ones(b, getattr(M, dtype)), axis))
