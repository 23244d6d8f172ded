"""Cases a systematic sweep of argument types found against MLX 0.32.4: each `bool`,
`int`, `float`, `str` and `Sequence[int]` parameter MLX's bindings declare, across
mlx.core, linalg, fft, random and fast, given values of other types (an int or None for a
bool, a string for a float, None or an int for a str, a generator for a sequence...).
MLX's binding refuses them with TypeError before the op is built; streamlet took them
(`bool(x)`, `float("1")`, `str(x)`, `tuple(gen)`) or raised another error.  Values both
take (True, a NumPy integer, a 0-d array for a float) give MLX's result."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same

pytestmark = pytest.mark.usefixtures("on_cpu")

A = np.array([[4, 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)


def _q(M):
    return M.quantize(M.ones((8, 64)) / 3)


# name -> call(M, v) with v in a `bool` parameter
BOOLS = {
    "isclose equal_nan": lambda M, v: M.isclose(M.array(A), M.array(A), equal_nan=v),
    "allclose equal_nan": lambda M, v: M.allclose(M.array(A), M.array(A), equal_nan=v),
    "array_equal equal_nan": lambda M, v: M.array_equal(M.array(A), M.array(A),
                                                        equal_nan=v),
    "asarray copy": lambda M, v: M.asarray(M.array(A), copy=v),
    "contiguous allow_col_major": lambda M, v: M.contiguous(M.array(A), v),
    "linspace endpoint": lambda M, v: M.linspace(0, 1, 5, v),
    "meshgrid sparse": lambda M, v: M.meshgrid(M.array([1., 2.]), M.array([3.]), sparse=v),
    "median keepdims": lambda M, v: M.median(M.array(A), keepdims=v),
    "unique return_index": lambda M, v: M.unique(M.array(A), 5, return_index=v),
    "unique return_inverse": lambda M, v: M.unique(M.array(A), 5, return_inverse=v),
    "unique return_counts": lambda M, v: M.unique(M.array(A), 5, return_counts=v),
    "matrix_norm keepdims": lambda M, v: M.matrix_norm(M.array(A), keepdims=v),
    "norm keepdims": lambda M, v: M.linalg.norm(M.array(A), keepdims=v),
    "cholesky upper": lambda M, v: M.linalg.cholesky(M.array(A), v),
    "cholesky_inv upper": lambda M, v: M.linalg.cholesky_inv(M.array(np.tril(A)), v),
    "tri_inv upper": lambda M, v: M.linalg.tri_inv(M.array(np.tril(A)), v),
    "solve_triangular upper": lambda M, v: M.linalg.solve_triangular(
        M.array(np.tril(A)), M.ones(3), upper=v),
    "svd compute_uv": lambda M, v: M.linalg.svd(M.array(A), v),
    "gather_mm sorted_indices": lambda M, v: M.gather_mm(M.array(A), M.array(A),
                                                         sorted_indices=v),
    "quantized_matmul transpose": lambda M, v: M.quantized_matmul(M.ones((2, 64)), *_q(M),
                                                                  transpose=v),
    "gather_qmm transpose": lambda M, v: M.gather_qmm(M.ones((2, 64)), *_q(M), transpose=v),
    "gather_qmm sorted_indices": lambda M, v: M.gather_qmm(M.ones((2, 64)), *_q(M),
                                                           sorted_indices=v),
    "stft center": lambda M, v: M.fft.stft(M.arange(32.0), n_fft=8, center=v),
    "stft onesided": lambda M, v: M.fft.stft(M.arange(32.0), n_fft=8, onesided=v),
    "istft center": lambda M, v: M.fft.istft(M.fft.stft(M.arange(32.0), n_fft=8), n_fft=8,
                                             center=v),
    "istft onesided": lambda M, v: M.fft.istft(M.fft.stft(M.arange(32.0), n_fft=8), n_fft=8,
                                               onesided=v),
    "rope traditional": lambda M, v: M.fast.rope(M.ones((1, 2, 3, 4)), 4, traditional=v,
                                                 base=1e4, scale=1.0, offset=0),
    "sdpa force_fused": lambda M, v: M.fast.scaled_dot_product_attention(
        *(M.ones((1, 1, 2, 4)),) * 3, scale=0.5, force_fused=v),
}
NONE_TAKEN = {"asarray copy", "stft onesided", "istft onesided"}  # `bool | None`


@pytest.mark.parametrize("case, value", [
    (c, v) for c in BOOLS for v in (1, 0, None, "x", np.bool_(True), mx.array(True))
    if not (v is None and c in NONE_TAKEN)], ids=str)
def test_bool_parameter_takes_only_a_bool(mlx, case, value):
    call = BOOLS[case]
    with pytest.raises(TypeError):
        call(mx, value)  # refused as the op is built
    v = mlx.array(True) if isinstance(value, mx.array) else value
    assert_same(mlx, lambda M: call(M, value if M is mx else v), what=case)
    for ok in (True, False) if case != "sdpa force_fused" else (False,):
        assert_same(mlx, lambda M: call(M, ok), rtol=1e-5, what=f"{case}={ok}")


# name -> call(M, v) with v in a `float` parameter (None only where it is no default)
FLOATS = {
    "addmm alpha": lambda M, v: M.addmm(M.array(A), M.array(A), M.array(A), alpha=v),
    "addmm beta": lambda M, v: M.addmm(M.array(A), M.array(A), M.array(A), beta=v),
    "isclose rtol": lambda M, v: M.isclose(M.array(A), M.array(A), rtol=v),
    "allclose atol": lambda M, v: M.allclose(M.array(A), M.array(A), atol=v),
    "nan_to_num nan": lambda M, v: M.nan_to_num(M.array([np.nan, 1.0]), nan=v),
    "nan_to_num posinf": lambda M, v: M.nan_to_num(M.array([np.inf, 1.0]), posinf=v),
    "hadamard_transform scale": lambda M, v: M.hadamard_transform(M.ones((2, 4)), v),
    "fftfreq d": lambda M, v: M.fft.fftfreq(8, v),
    "rfftfreq d": lambda M, v: M.fft.rfftfreq(8, v),
    "rms_norm eps": lambda M, v: M.fast.rms_norm(M.array(A), M.ones(3), v),
    "layer_norm eps": lambda M, v: M.fast.layer_norm(M.array(A), M.ones(3), M.zeros(3), v),
    "rope base": lambda M, v: M.fast.rope(M.ones((1, 2, 3, 4)), 4, traditional=False,
                                          base=v, scale=1.0, offset=0),
    "rope scale": lambda M, v: M.fast.rope(M.ones((1, 2, 3, 4)), 4, traditional=False,
                                           base=1e4, scale=v, offset=0),
    "sdpa scale": lambda M, v: M.fast.scaled_dot_product_attention(
        *(M.ones((1, 1, 2, 4)),) * 3, scale=v),
    "laplace loc": lambda M, v: M.random.laplace((3,), loc=v, key=M.random.key(0)),
    "laplace scale": lambda M, v: M.random.laplace((3,), scale=v, key=M.random.key(0)),
}
NONE_WAS_TAKEN = {"isclose rtol", "allclose atol", "nan_to_num nan"}  # nan=None was NaN


@pytest.mark.parametrize("case, value", [
    (c, v) for c in FLOATS if not c.startswith("laplace") for v in ("1", None, b"1")
    if v is not None or c in NONE_WAS_TAKEN], ids=str)
def test_float_parameter_refuses_a_string_or_none(mlx, case, value):
    with pytest.raises(TypeError):
        FLOATS[case](mx, value)
    assert_same(mlx, lambda M: FLOATS[case](M, value), what=case)


@pytest.mark.parametrize("case", ["laplace loc", "laplace scale"])
def test_float_parameter_takes_a_0d_array_and_numpy_numbers(mlx, case):
    """MLX's `float` takes what has `__float__`: a 0-d array (laplace refused it), NumPy
    numbers, ints; a string, None, bytes or a complex number it refuses."""
    for v in ("1", None, b"1", 1 + 2j):
        assert_same(mlx, lambda M: FLOATS[case](M, v), what=case)
    for v in (lambda M: M.array(0.5), lambda M: np.float64(0.5), lambda M: 2):
        assert_same(mlx, lambda M: FLOATS[case](M, v(M)), rtol=1e-6, what=case)


# name -> call(M, v) with v in a `str` parameter
STRS = {
    "convolve mode": lambda M, v: M.convolve(M.array([1., 2., 3.]), M.array([1., 0.5]), v),
    "pad mode": lambda M, v: M.pad(M.array(A), 1, mode=v),
    "searchsorted side": lambda M, v: M.searchsorted(M.array([1., 2.]), M.array([1.5]), v),
    "meshgrid indexing": lambda M, v: M.meshgrid(M.array([1., 2.]), indexing=v),
    "quantize mode": lambda M, v: M.quantize(M.ones((8, 64)), mode=v),
    "quantized_matmul mode": lambda M, v: M.quantized_matmul(M.ones((2, 64)), *_q(M),
                                                             mode=v),
    "gather_qmm mode": lambda M, v: M.gather_qmm(M.ones((2, 64)), *_q(M), mode=v),
    "eigh UPLO": lambda M, v: M.linalg.eigh(M.array(A), v),
    "eigvalsh UPLO": lambda M, v: M.linalg.eigvalsh(M.array(A), v),
    "stft pad_mode": lambda M, v: M.fft.stft(M.arange(32.0), n_fft=8, pad_mode=v),
    "einsum_path subscripts": lambda M, v: M.einsum_path(v, M.array(A)),
}


@pytest.mark.parametrize("case, value", [
    (c, v) for c in STRS for v in (1, None, b"x") if not (c.startswith("einsum") and v)],
    ids=str)
def test_str_parameter_takes_only_a_str(mlx, case, value):
    with pytest.raises(TypeError):
        STRS[case](mx, value)
    assert_same(mlx, lambda M: STRS[case](M, value), what=case)


# name -> call(M, v) with v in an `int` parameter
INTS = {
    "bartlett M": lambda M, v: M.bartlett(v),
    "hanning M": lambda M, v: M.hanning(v),
    "block_masked_mm block_size": lambda M, v: M.block_masked_mm(
        M.ones((64, 64)), M.ones((64, 64)), v),
    "quantize group_size": lambda M, v: M.quantize(M.ones((8, 64)), group_size=v),
    "quantize bits": lambda M, v: M.quantize(M.ones((8, 64)), bits=v),
    "quantized_matmul bits": lambda M, v: M.quantized_matmul(M.ones((2, 64)), *_q(M),
                                                             bits=v),
    "gather_qmm group_size": lambda M, v: M.gather_qmm(M.ones((2, 64)), *_q(M),
                                                       group_size=v),
    "permutation axis": lambda M, v: M.random.permutation(5, axis=v, key=M.random.key(0)),
}


@pytest.mark.parametrize("case, value", [
    (c, v) for c in INTS for v in (2.0, 2.5, "2", 2**40)
    + ((None,) if c.split()[0] in ("bartlett", "hanning", "block_masked_mm",
                                   "permutation") else ())], ids=str)
def test_int_parameter_refuses_a_non_integer(mlx, case, value):
    with pytest.raises(TypeError):
        INTS[case](mx, value)
    assert_same(mlx, lambda M: INTS[case](M, value), what=case)


@pytest.mark.parametrize("value", [np.int64(3), "array", -1])
@pytest.mark.parametrize("window", ["bartlett", "blackman", "hamming", "hanning"])
def test_window_length_is_an_int_as_mlx_reads_it(mlx, window, value):
    """A NumPy integer or a 0-d integer array is an int; below 1 point the window is empty
    (these raised ValueError)."""
    assert_same(mlx, lambda M: getattr(M, window)(M.array(3) if value == "array" else value),
                rtol=1e-6)


def test_array_equal_takes_equal_nan_by_keyword_only(mlx):
    assert_same(mlx, lambda M: M.array_equal(M.array([np.nan]), M.array([np.nan]), True))


def test_key_takes_a_0d_integer_array(mlx):
    assert_same(mlx, lambda M: M.random.key(M.array(7)))
    assert_same(mlx, lambda M: M.random.key(M.array(True)))  # not an integer: TypeError


# name -> call(M, v) with v in a `Sequence[int]` parameter
SEQS = {
    "zeros shape": lambda M, v: M.zeros(v),
    "full shape": lambda M, v: M.full(v, 1.0),
    "broadcast_to shape": lambda M, v: M.broadcast_to(M.ones((1, 3)), v),
    "reshape shape": lambda M, v: M.reshape(M.ones((2, 3)), v),
    "expand_dims axis": lambda M, v: M.expand_dims(M.array(A), v),
    "roll shift": lambda M, v: M.roll(M.array(A), v),
    "tile reps": lambda M, v: M.tile(M.array(A), v),
    "unflatten shape": lambda M, v: M.unflatten(M.ones(6), 0, v),
    "split indices": lambda M, v: M.split(M.ones((6, 2)), v),
    "fft2 s": lambda M, v: M.fft.fft2(M.array(A), s=v),
    "rfftn s": lambda M, v: M.fft.rfftn(M.array(A), s=v),
    "normal shape": lambda M, v: M.random.normal(v, key=M.random.key(0)),
    "uniform shape": lambda M, v: M.random.uniform(shape=v, key=M.random.key(0)),
    "randint shape": lambda M, v: M.random.randint(0, 9, v, key=M.random.key(0)),
}
# MLX's int-or-sequence shapes (zeros, full) raise RuntimeError('std::bad_cast') for a
# generator; streamlet keeps the TypeError a wrong type gets
BAD_CAST = {"zeros shape", "full shape"}


@pytest.mark.parametrize("case", SEQS)
def test_sequence_parameter_refuses_a_generator(mlx, case):
    def gen():
        return (n for n in (2, 3))
    with pytest.raises(TypeError):
        SEQS[case](mx, gen())
    if case not in BAD_CAST:
        assert_same(mlx, lambda M: SEQS[case](M, gen()), what=case)
    assert_same(mlx, lambda M: SEQS[case](M, np.array([2, 3])), rtol=1e-6, what=case)


@pytest.mark.parametrize("case, value", [
    ("split indices", (2.0, 3.0)), ("split indices", "ab"),
    ("rfftn s", 2), ("rfftn s", (2.0, 3.0)), ("rfftn s", "ab")],
    ids=str)
def test_sequence_parameter_refuses_other_entries(mlx, case, value):
    """Float entries split as truncated ints; fftn's `s` complained of its axes first."""
    with pytest.raises(TypeError):
        SEQS[case](mx, value)
    assert_same(mlx, lambda M: SEQS[case](M, value), what=case)


@pytest.mark.parametrize("call", [
    lambda M: M.arange(0, 5, np.float64(0.5)),  # was an empty float64 array
    lambda M: M.arange(0, 5, np.int64(1)),
    lambda M: M.zeros((2,), np.float32(1.0)),  # a NumPy scalar is no dtype
    lambda M: M.ones((2,), dtype=np.int64(1)),
])
def test_a_numpy_scalar_is_no_dtype(mlx, call):
    with pytest.raises(TypeError):
        call(mx)
    assert_same(mlx, call)


def test_flatten_axis_beyond_32_bits_is_a_type_error(mlx):
    """MLX's `int` is 32-bit (an end_axis of 2**40 was clamped to the last axis)."""
    with pytest.raises(TypeError):
        mx.flatten(mx.ones((2, 3)), 0, 2**40)
    assert_same(mlx, lambda M: M.flatten(M.ones((2, 3)), 0, 2**40))
    assert_same(mlx, lambda M: M.flatten(M.ones((2, 3, 4)), np.int64(1), M.array(2)))


@pytest.mark.parametrize("axes", [1.5, "1", None, ([1],), ([1], [0], [2])])
def test_tensordot_axes_of_the_wrong_kind(mlx, axes):
    """tensordot's axes: neither an int nor a sequence is a TypeError, a sequence other
    than two lists MLX's ValueError, both naming the op (Python's unpacking errors were)."""
    assert_same(mlx, lambda M: M.tensordot(M.ones((2, 3)), M.ones((3, 2)), axes=axes))
