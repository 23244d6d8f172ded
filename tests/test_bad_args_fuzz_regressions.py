"""Cases a differential fuzz of bad and borderline arguments to every public function of
mlx.core against MLX 0.32.4 found: the error's type (or the result) is MLX's, the error
comes when the op is built, and its message names the op."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same_bits

pytestmark = pytest.mark.usefixtures("on_cpu")

X = np.arange(6, dtype=np.float32).reshape(2, 3) / 7

# an `int` parameter given a float: MLX's binding refuses it (TypeError); it was truncated
INT_PARAMS = {
    "diff n": (lambda M, v: M.diff(M.array(X), v), "diff"),
    "eye k": (lambda M, v: M.eye(3, k=v), "eye"),
    "eye n": (lambda M, v: M.eye(v), "eye"),
    "tri k": (lambda M, v: M.tri(3, k=v), "tri"),
    "tril k": (lambda M, v: M.tril(M.array(X), v), "tril"),
    "triu k": (lambda M, v: M.triu(M.array(X), v), "triu"),
    "diag k": (lambda M, v: M.diag(M.array(X[0]), k=v), "diag"),
    "diagonal offset": (lambda M, v: M.diagonal(M.array(X), v), "diagonal"),
    "round decimals": (lambda M, v: M.round(M.array(X), v), "round"),
    "std ddof": (lambda M, v: M.std(M.array(X), ddof=v), "std"),
    "var ddof": (lambda M, v: M.var(M.array(X), ddof=v), "var"),
    "unique size": (lambda M, v: M.unique(M.array(X), v), "unique"),
    "fft n": (lambda M, v: M.fft.fft(M.array(X), n=v), "fft"),
    "irfft n": (lambda M, v: M.fft.irfft(M.array(X), n=v), "irfft"),
    "fft2 s": (lambda M, v: M.fft.fft2(M.array(X), s=(v, 2)), "fft2"),
    "stft hop_length": (lambda M, v: M.fft.stft(M.ones(16), 8, hop_length=v), "stft"),
    "fftfreq n": (lambda M, v: M.fft.fftfreq(v), "fftfreq"),
    "rfftfreq n": (lambda M, v: M.fft.rfftfreq(v), "rfftfreq"),
    "as_strided offset": (lambda M, v: M.as_strided(M.ones(4), (2,), (1,), v), "as_strided"),
    "rope dims": (lambda M, v: M.fast.rope(M.ones((1, 2, 3, 4)), v, traditional=False,
                                           base=1e4, scale=1.0, offset=0), "rope"),
}


NONE_IS_DEFAULT = {"fft n", "irfft n", "stft hop_length"}


@pytest.mark.parametrize("case, value", [
    (case, value) for case in INT_PARAMS for value in (1.5, 2.0, None, "1")
    if not (value is None and case in NONE_IS_DEFAULT)])
def test_int_parameter_refuses_a_non_integer_when_built(mlx, case, value):
    call, name = INT_PARAMS[case]
    with pytest.raises(TypeError, match=rf"\[{name}\]"):
        call(mx, value)  # no eval: refused as the op is built
    assert_same_bits(mlx, lambda M: call(M, value))


@pytest.mark.parametrize("case", ["diff n", "tril k", "fft n", "round decimals"])
def test_int_parameter_beyond_32_bits_is_refused_when_built(mlx, case):
    """MLX's `int` is 32-bit; `diff(a, 2**40)` used to build and then never finish."""
    call, name = INT_PARAMS[case]
    with pytest.raises(TypeError, match=rf"\[{name}\]"):
        call(mx, 2**40)
    assert_same_bits(mlx, lambda M: call(M, 2**40))


@pytest.mark.parametrize("value", [np.int64(1), "0-d"])
def test_integer_like_order_and_size_give_int_shapes(mlx, value):
    """A NumPy integer or 0-d integer array is taken as MLX takes it, as an int: it ended
    up in the shape (`(2, np.int64(2))`)."""
    def v(M):
        return M.array(1) if value == "0-d" else value
    for call in (lambda M: M.diff(M.array(X), v(M)), lambda M: M.unique(M.array(X), v(M))):
        assert_same_bits(mlx, call)
        assert all(type(n) is int for n in call(mx).shape)


def test_stft_n_fft_beyond_32_bits_is_a_type_error_not_a_numpy_allocation(mlx):
    for call in (lambda M: M.fft.stft(M.ones(16), n_fft=2**40),
                 lambda M: M.fft.istft(M.ones((5, 3), M.complex64), n_fft=2**40)):
        assert_same_bits(mlx, call)
        with pytest.raises(TypeError, match=r"\[i?stft\] n_fft"):
            call(mx)


@pytest.mark.parametrize("subscripts", [1, None, ("ij",), b"ij->ji"])
def test_einsum_subscripts_of_a_wrong_type(mlx, subscripts):
    assert_same_bits(mlx, lambda M: M.einsum(subscripts, M.array(X)))
    with pytest.raises(TypeError, match=r"\[einsum\]"):
        mx.einsum(subscripts, mx.array(X))


@pytest.mark.parametrize("repeats", [[], (), [2]])
def test_repeat_repeats_must_be_an_int(mlx, repeats):
    assert_same_bits(mlx, lambda M: M.repeat(M.array(X), repeats))
    with pytest.raises(TypeError, match=r"\[repeat\]"):
        mx.repeat(mx.array(X), repeats)


@pytest.mark.parametrize("call", [
    lambda M: M.count_nonzero(M.array(2.0)),
    lambda M: M.count_nonzero(M.array(X), axis=()),
    lambda M: M.count_nonzero(M.array([0, 3], M.int8), axis=[]),
])
def test_count_nonzero_is_int32_when_nothing_is_reduced(mlx, call):
    assert_same_bits(mlx, call)


@pytest.mark.parametrize("values", [[2, 3, 0], [1, 0, 5]])
def test_cumsum_to_bool_sums_the_bools_as_int32(mlx, values):
    assert_same_bits(mlx, lambda M: M.cumsum(M.array(values, M.int8), dtype=M.bool_))
    assert_same_bits(mlx, lambda M: M.cumsum(M.array(values), dtype=M.bool_, reverse=True))
    assert_same_bits(mlx, lambda M: M.cumprod(M.array(values), dtype=M.bool_))


@pytest.mark.parametrize("call, name", [
    (lambda M: M.abs(2**70), "abs"),
    (lambda M: M.where(True, -2**70, 1), "where"),
    (lambda M: M.add(M.ones(2), 2**70), "add"),
    (lambda M: M.array([1], M.int8) + 300, "add"),
    (lambda M: M.multiply(M.array([1], M.uint8), -1), "multiply"),
])
def test_an_int_no_dtype_can_hold_names_the_op(mlx, call, name):
    """MLX raises (RuntimeError std::bad_cast beyond int64, ValueError beyond the array's
    dtype); streamlet's error names the op (an int beyond int64 as an operand is its
    documented OverflowError)."""
    with pytest.raises(Exception) as theirs:
        call(mlx)
    with pytest.raises((OverflowError, type(theirs.value))) as ours:
        call(mx)
    assert f"[{name}]" in str(ours.value)


def test_array_of_an_int_beyond_int64_says_so():
    with pytest.raises(OverflowError, match=r"\[array\] Python int .* int64 range"):
        mx.array(2**70)


def test_rope_offset_beyond_int32_is_a_clear_error():
    """MLX 0.32.4 takes it (and computes with it wrapped); NumPy's message leaked here."""
    with pytest.raises(OverflowError, match=r"\[rope\] offset 1099511627776"):
        mx.fast.rope(mx.ones((1, 2, 3, 4)), 4, traditional=False, base=1e4, scale=1.0,
                     offset=2**40)
