"""Cases a second differential fuzz of `mx.fast` against MLX 0.32.4 found: the result (value,
dtype, shape or the error raised) is MLX's."""
import pytest

import streamlet.core as mx
from parity import assert_close_outcome, assert_same_bits, bits_outcome


def _same(mlx, fn):
    """MLX's error, or its dtypes and shapes with values within float32 rounding (RoPE's sin
    and cos may differ from MLX's by an ulp)."""
    if isinstance(bits_outcome(mlx, fn), type):
        assert_same_bits(mlx, fn)
    else:
        assert_close_outcome(mlx, fn, rtol=1e-6)


def _rope(X, offset=0, base=10.0, **kw):
    return X.fast.rope(X.ones((2, 3, 6)), 6, traditional=kw.pop("traditional", False),
                       base=base, scale=1.0, offset=offset, **kw)


def test_rope_bool_offset_like_mlx(mlx):
    # a bool is a bool array to MLX: not an integer offset
    _same(mlx, lambda X: _rope(X, True))


@pytest.mark.parametrize("offset", [2**31, -2**31 - 1, 2**40])
def test_rope_offset_beyond_int32_raises(offset):
    # MLX wraps it to int32; an int its dtype cannot hold raises here (docs/differences.rst)
    with pytest.raises(OverflowError, match="rope"):
        _rope(mx, offset)


@pytest.mark.parametrize("base", [0.0, -2.0])
def test_rope_base_zero_and_negative_like_mlx(mlx, base):
    _same(mlx, lambda X: _rope(X, 0, base))


@pytest.mark.parametrize("t", [0, 1, 3])
def test_rope_empty_offset_vector_like_mlx(mlx, t):
    _same(mlx, lambda X: X.fast.rope(
        X.ones((0, t, 4)), 4, traditional=False, base=10.0, scale=1.0,
        offset=X.zeros((0,), X.int32)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_sdpa_with_no_keys_like_mlx(mlx, dtype):
    # the softmax over an empty key axis is empty, and the attention zeros
    def fn(X):
        d = getattr(X, dtype)
        return X.fast.scaled_dot_product_attention(
            X.ones((1, 2, 2, 2), d), X.ones((1, 1, 0, 2), d), X.ones((1, 1, 0, 3), d),
            scale=1.0)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("shape,axis", [((2, 0), -1), ((0, 3), 0), ((2, 0, 3), (0, 1))])
def test_softmax_of_an_empty_array_like_mlx(mlx, shape, axis):
    assert_same_bits(mlx, lambda X: X.softmax(X.zeros(shape), axis, precise=True))
