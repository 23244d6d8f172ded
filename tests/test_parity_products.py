"""Matrix products against MLX 0.32.4: float16/bfloat16 products accumulate in float32
and round once (real half-precision data, not float32 data labelled so), complex
gemm/gemv and addmm, integer einsum, and the errors of addmm, vecdot and kron."""
import ml_dtypes
import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same


def _ramp(m, n, dtype):
    return m.arange(n).astype(dtype)


def test_bfloat16_product_is_bfloat16_data(tmp_path):
    x = mx.arange(10).astype(mx.bfloat16)
    y = x @ x
    assert y.item() == 284  # 285 rounded to bfloat16 (MLX); float32 data would say 285
    assert y.nbytes == 2 and y.dtype is mx.bfloat16
    assert y.__array__().dtype == ml_dtypes.bfloat16
    for z in (mx.einsum("i,i", x, x), mx.addmm(mx.zeros((), mx.bfloat16), x, x), mx.inner(x, x),
              mx.tensordot(x, x, 1)):
        assert z.__array__().dtype == ml_dtypes.bfloat16 and z.item() == 284
    path = str(tmp_path / "p.safetensors")
    mx.save_safetensors(path, {"y": y})
    assert mx.load(path)["y"].item() == 284


HALF = [
    lambda m: _ramp(m, 10, m.bfloat16) @ _ramp(m, 10, m.bfloat16),
    lambda m: m.matmul(m.ones((3, 4), m.float16) * 0.1, m.ones((4,), m.float16) * 0.3),
    lambda m: m.matmul(_ramp(m, 12, m.bfloat16).reshape(3, 4) * 3.3,
                       _ramp(m, 20, m.bfloat16).reshape(4, 5) * 1.7),
    lambda m: m.einsum("ij,jk->ik", m.ones((3, 4), m.float16) * 0.1,
                       m.ones((4, 5), m.float16) * 0.3),
    lambda m: m.einsum("i,i", _ramp(m, 10, m.bfloat16), _ramp(m, 10, m.bfloat16)),
    lambda m: m.tensordot(m.ones((3, 4), m.bfloat16) * 0.1, m.ones((4,), m.bfloat16) * 0.3, 1),
    lambda m: m.inner(m.ones((3, 4), m.bfloat16) * 0.1, m.ones((4,), m.bfloat16) * 0.3),
    lambda m: m.addmm(m.ones(2, m.bfloat16), _ramp(m, 6, m.bfloat16).reshape(2, 3),
                      _ramp(m, 3, m.bfloat16) * 37, 1.0, 3.0),
    lambda m: m.addmm(m.ones((3,), m.float16), m.ones((3, 4), m.float16) * 0.1,
                      m.ones((4,), m.float16) * 0.3, 0.5, 0.25),
]


@pytest.mark.parametrize("case", range(len(HALF)))
def test_half_precision_products_match_mlx(mlx, case):
    assert_same(mlx, HALF[case], what=f"half case {case}")


def _complex(m, shape, seed):
    k1, k2 = m.random.split(m.random.key(seed))
    return m.random.uniform(shape=shape, key=k1) + 1j * m.random.uniform(shape=shape, key=k2)


COMPLEX = [
    lambda m: m.matmul(_complex(m, (16, 50), 0), _complex(m, (50, 1), 1)),
    lambda m: m.matmul(_complex(m, (50, 16), 0).T, _complex(m, (50, 1), 1)),
    lambda m: m.addmm(_complex(m, (16, 32), 2), _complex(m, (16, 50), 0),
                      _complex(m, (50, 32), 1), 2.0, 2.0),
    lambda m: m.addmm(m.random.normal((2,), key=m.random.key(3)),
                      m.random.normal((2, 3), key=m.random.key(4)).astype(m.complex64),
                      m.random.normal((3,), key=m.random.key(5))),
    lambda m: m.addmm(m.array([1 + 2j, 3j]), m.ones((2, 3)), m.ones((3,)), 2.0, 0.5),
    lambda m: m.matmul(_complex(m, (4, 5), 0).real, _complex(m, (5, 3), 1)),
]


@pytest.mark.parametrize("case", range(len(COMPLEX)))
def test_complex_products_match_mlx(mlx, case):
    assert_same(mlx, COMPLEX[case], rtol=1e-5, what=f"complex case {case}")


def test_complex_addmm_against_numpy(rng):
    def c(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    a, b_, cc = c(4, 6), c(6, 3), c(4, 3)
    got = np.array(mx.addmm(mx.array(cc), mx.array(a), mx.array(b_), 0.5, -2.0))
    np.testing.assert_allclose(got, 0.5 * a @ b_ - 2.0 * cc, rtol=1e-5, atol=1e-5)


INT_EINSUM = [
    lambda m: m.einsum("ii->i", m.arange(16).reshape(4, 4)),
    lambda m: m.einsum("iii->i", m.arange(8).reshape(2, 2, 2)),
    lambda m: m.einsum("iijj->ij", m.arange(36).reshape(2, 2, 3, 3)),
    lambda m: m.einsum("ijij->j", m.arange(36).reshape(2, 3, 2, 3)),
    lambda m: m.einsum("ii", m.arange(4).reshape(2, 2)),
    lambda m: m.einsum("ij->", m.arange(8).reshape(2, 4)),
    lambda m: m.einsum("ij->j", m.arange(8).reshape(2, 4).astype(m.uint8) * 40),
    lambda m: m.einsum("ij->i", m.arange(8).reshape(2, 4).astype(m.int8) * 40),
    lambda m: m.einsum("ij->", m.ones((2, 4), m.bool_)),
    lambda m: m.einsum("ijk->jki", m.arange(24).reshape(2, 3, 4)),
    lambda m: m.einsum("i,i->i", m.arange(4), m.arange(4)),
    lambda m: m.einsum("i,j->ij", m.arange(2), m.arange(3)),
    lambda m: m.einsum("ij,k->k", m.arange(8).reshape(2, 4).astype(m.int8) * 40,
                       m.arange(3).astype(m.int16)),
    # a sum over an index two operands share is a matrix product: inexact types only
    lambda m: m.einsum("i,i", m.arange(4), m.arange(4)),
    lambda m: m.einsum("ij,jk->ik", m.arange(4).reshape(2, 2), m.arange(4).reshape(2, 2)),
]


@pytest.mark.parametrize("case", range(len(INT_EINSUM)))
def test_integer_einsum_matches_mlx(mlx, case):
    assert_same(mlx, INT_EINSUM[case], what=f"einsum case {case}")


ERRORS = [
    lambda m: m.addmm(m.zeros((2, 2, 2)), m.zeros((2, 2)), m.zeros((2, 2))),
    lambda m: m.addmm(m.zeros((2,)), m.zeros((2, 3)), m.zeros((3,))),
    lambda m: m.addmm(m.zeros((2, 2), m.int32), m.zeros((2, 3), m.int32),
                      m.zeros((3, 2), m.int32)),
    lambda m: m.addmm(m.zeros((2, 2)), m.zeros((2, 3)), m.zeros((4, 2))),
    lambda m: m.addmm(m.zeros((2, 2)), m.zeros(()), m.zeros((4, 2))),
    lambda m: m.addmm(m.ones((32, 1, 16)), m.ones((32, 128, 16)), m.ones((16, 16)), 0.5, 2.0),
    lambda m: m.vecdot(m.array(1), m.array([1])),
    lambda m: m.vecdot(m.array([1, 2]), m.array([1, 2]), axis=1),
    lambda m: m.vecdot(m.array([1, 2]), m.array([1])),
    lambda m: m.vecdot(m.array([[1, 2], [3, 4]]), m.array([1, 2]), axis=0),
    lambda m: m.vecdot(m.array([[1, 2], [3, 4]]), m.array([1, 2])),
    lambda m: m.vecdot(m.array([1 + 2j, 3 + 4j]), m.array([5 + 6j, 7 + 8j])),
    lambda m: m.kron(m.array([]), m.array([1, 2])),
    lambda m: m.kron(m.array([1, 2]), m.array([[3, 4], [5, 6]])),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_product_errors_and_shapes_match_mlx(mlx, case):
    assert_same(mlx, ERRORS[case], rtol=1e-6, what=f"case {case}")
