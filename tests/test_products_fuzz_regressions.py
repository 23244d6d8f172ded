"""Regressions found by a differential fuzz of the products (matmul, addmm, block_masked_mm,
gather_mm, einsum, einsum_path, hadamard_transform) against MLX 0.32.4 on the CPU."""
import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_close_outcome, assert_same_bits

NAN = float("nan")


def _f32(m, shape, seed=0):
    return m.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("k", [0, 2])
def test_addmm_beta_zero_does_not_read_c(mlx, k):
    """addmm with beta 0 does not read c (its NaN does not show), but with K = 0 gives 0 * c."""
    assert_same_bits(mlx, lambda m: m.addmm(m.array([[NAN, -1.0]]), m.ones((1, k)),
                                            m.ones((k, 2)), 2.0, 0.0))


def test_addmm_complex_scales_by_float32(mlx):
    """addmm with a complex c scales the float16 product by a float32 alpha, as MLX does."""
    assert_close_outcome(mlx, lambda m: m.addmm(
        m.array([[0.3 + 0.1j]]), m.array([1.3]).astype(m.float16),
        m.array([[[1.7]]]).astype(m.float16), 2.5, 2.5), rtol=1e-6)


@pytest.mark.parametrize("case", [
    dict(sa=(33,), sb=(33, 40), mask_lhs=np.array([False])),
    dict(sa=(40, 33), sb=(33,), mask_out=np.array([True, False])),
    dict(sa=(33,), sb=(2, 33, 40), mask_rhs=np.array([[[True], [False]]] * 2)),
    dict(sa=(5,), sb=(5, 3), mask_out=None, block_size=48),
])
def test_block_masked_mm_one_dimensional_operands(mlx, case):
    """block_masked_mm takes 1-D operands (and no masks with any block size) as MLX does."""
    case = dict(case)
    sa, sb, bs = case.pop("sa"), case.pop("sb"), case.pop("block_size", 32)
    assert_close_outcome(mlx, lambda m: m.block_masked_mm(
        _f32(m, sa, 1), _f32(m, sb, 2), bs,
        **{k: None if v is None else m.array(v) for k, v in case.items()}))


@pytest.mark.parametrize("name, shape", [
    ("mask_lhs", (2, 2)),  # two blocks of columns where K = 32 has one
    ("mask_out", (3, 1)),  # three blocks of rows where M = 64 has two
    ("mask_rhs", (1, 2)),  # two blocks of columns where N = 20 has one
])
def test_block_masked_mm_refuses_masks_of_more_blocks(mlx, name, shape):
    """block_masked_mm refuses a mask with more blocks than its matrix has."""
    assert_same_bits(mlx, lambda m: m.block_masked_mm(
        _f32(m, (64, 32)), _f32(m, (32, 20)), 32, **{name: m.ones(shape, dtype=m.bool_)}))


@pytest.mark.parametrize("sa, sb, lhs, rhs", [
    ((2, 3, 0), (2, 0, 4), [0, 1], [1, 1]),
    ((3, 5), (2, 5, 0), None, [1, 0]),
    ((2, 0, 5), (5, 2), [1], None),
])
def test_gather_mm_empty_matrices(mlx, sa, sb, lhs, rhs):
    """gather_mm of matrices with an empty dimension gives zeros or an empty result."""
    idx = lambda m, v: None if v is None else m.array(v, dtype=m.uint32)  # noqa: E731
    assert_same_bits(mlx, lambda m: m.gather_mm(m.ones(sa), m.ones(sb), idx(m, lhs),
                                                idx(m, rhs)))


@pytest.mark.parametrize("spec, shapes", [
    ("a,cc->c", [(2,), (3, 1)]),  # a repeated index of two sizes
    ("c,cab->cabc", [(3,), (3, 2, 4)]),  # a repeated output index
    ("...i...", [(2,)]),  # two ellipses
])
def test_einsum_bad_subscripts_raise_value_error(mlx, spec, shapes):
    """einsum refuses these subscripts with a ValueError, as MLX does."""
    assert_same_bits(mlx, lambda m: m.einsum(spec, *[m.ones(s) for s in shapes]))


@pytest.mark.parametrize("spec, shapes, dtypes", [
    ("bc,bc,a,ac", [(3, 1), (3, 1), (1,), (1, 1)], ["int8", "int8", "float16", "float16"]),
    ("ij,ij->ij", [(2, 1), (2, 0)], ["float32", "float32"]),
    ("i,i,i->i", [(0,), (1,), (1,)], ["float32", "float32", "float32"]),
    ("ij,jk->ik", [(2, 0), (1, 3)], ["float32", "float32"]),
])
def test_einsum_follows_mlx_contraction_path(mlx, spec, shapes, dtypes):
    """einsum's dtype checks and shapes follow MLX's path: an integer matrix product in the
    middle is refused, an empty axis wins over a broadcast 1 (except in a matrix product)."""
    assert_same_bits(mlx, lambda m: m.einsum(
        spec, *[m.ones(s, dtype=getattr(m, d)) for s, d in zip(shapes, dtypes)]))


@pytest.mark.parametrize("spec, shapes", [
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ab,bc,cd,de->ae", [(2, 30), (30, 2), (2, 40), (40, 3)]),
    ("a,c->az", [(1,), (2,)]),
])
def test_einsum_path_is_mlx_path_and_report(mlx, spec, shapes):
    """einsum_path gives MLX's greedy path and its report (integer FLOP counts)."""
    got = mx.einsum_path(spec, *[mx.ones(s) for s in shapes])
    assert got == mlx.einsum_path(spec, *[mlx.ones(s) for s in shapes])


@pytest.mark.parametrize("shape, scale", [((2, 1), 0.5), ((), 2.0)])
def test_hadamard_transform_size_one_keeps_complex(mlx, shape, scale):
    """hadamard_transform of size 1 multiplies a complex input by the scale, staying complex."""
    assert_same_bits(mlx, lambda m: m.hadamard_transform(
        m.array(np.full(shape, 1.5 - 2j, np.complex64)), scale=scale))
