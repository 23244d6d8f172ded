"""Cases a differential fuzz of the elementwise ops and reductions at numeric edges (NaN,
±inf, ±0, the dtype's extremes, half precision) against MLX 0.32.4 found: the result
(value bit for bit, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import math

import numpy as np
import pytest

import streamlet.core as mx

_SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.5, -2.5, 0.5, 3.0, 65504.0, 1e-3,
            123.456, -0.7]


def _outcome(M, fn):
    try:
        r = fn(M)
        M.eval(r)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e).__name__
    d = str(r.dtype).split(".")[-1]
    v = np.array(r.astype(M.float32) if d in ("float16", "bfloat16") else r)
    if v.dtype.kind == "c":  # bits of both parts: NaN payloads aside, signed zeros kept
        v = np.stack([v.real, v.imag])
    if v.dtype.kind == "f":
        v = np.where(np.isnan(v), np.nan, v).astype(np.float64)
        return d, r.shape, v.tolist(), np.signbit(v).tolist()
    return d, r.shape, v.tolist()


def _same(mlx, fn):
    ours, theirs = _outcome(mx, fn), _outcome(mlx, fn)
    assert repr(ours) == repr(theirs)


def _arr(M, values, dtype):
    a = M.array(np.array(values, np.float64).astype(np.float32))
    return a.astype(getattr(M, dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32", "int64",
                                   "uint32", "int8", "bool_"])
@pytest.mark.parametrize("decimals", [-2, -1, 1, 3, 5, 40])
def test_round_with_decimals_scales_as_mlx(mlx, dtype, decimals):
    """round(a, d) is MLX's `a * 10**d` (a float32, then in a's float type), rounded,
    times the float32 reciprocal, cast back: round(bfloat16(1.5), 3) was 1.5078 (MLX 1.5),
    round(float16(inf), 5) nan (MLX inf: the scale overflows to inf), and integers were
    returned untouched (MLX: through float32, round(int32(1073741823), 3) is 1073741824)."""
    if dtype.startswith(("int", "uint", "bool")):
        info = np.iinfo(np.int32 if dtype == "bool_" else getattr(np, dtype))
        values = [0, 1, 7, 100, 125, -100, info.max // 2, 1234567]
        values = [v for v in values if info.min <= v <= info.max]
        if dtype == "bool_":
            values = [0, 1]

        def fn(M):
            return M.round(M.array(np.array(values).astype(np.dtype(dtype.rstrip("_")))),
                           decimals, stream=M.cpu)
    else:
        def fn(M):
            return M.round(_arr(M, _SPECIAL + [1.2345, -1.2355, 0.125], dtype), decimals,
                           stream=M.cpu)
    _same(mlx, fn)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("nan, posinf, neginf", [
    (math.inf, None, None), (0.0, -math.inf, 5.0), (-math.inf, math.inf, 1.0),
    (1e300, 1e300, -1e300), (0.1, 70000.0, None), (math.nan, 2.0, 3.0)])
def test_nan_to_num_picks_each_replacement_on_the_input(mlx, dtype, nan, posinf, neginf):
    """Each replacement is chosen on the input (nan=inf stays inf in MLX; it became the
    posinf value), and the values are rounded through float32 (1e300 is inf)."""
    if dtype == "float64" and (posinf is None or neginf is None):
        pytest.skip("MLX refuses float64 without both limits; streamlet keeps float64's own")

    def fn(M):
        a = M.array(np.array(_SPECIAL), M.float64) if dtype == "float64" else \
            _arr(M, _SPECIAL, dtype)
        return M.nan_to_num(a, nan, posinf, neginf, stream=M.cpu)
    _same(mlx, fn)


def test_nan_to_num_of_complex_with_both_limits_given(mlx):
    _same(mlx, lambda M: M.nan_to_num(
        M.array([1 + 1j, complex(math.inf, 0), complex(math.nan, 1), complex(-math.inf, 0),
                 complex(1, math.inf)]), 1.0, 2.0, 3.0, stream=M.cpu))


@pytest.mark.parametrize("a, b, kw", [
    ("M.array([-128, -128, 0, -127], M.int8)", "M.array([-128, 0, -128, 1], M.int8)", {}),
    ("M.array([0, 1], M.uint32)", "M.array([4294967295, 4294967294], M.uint32)", {}),
    ("M.array([complex(math.nan, math.inf), 1 + 1j, complex(math.inf, 1)])",
     "M.array([0j, complex(math.nan, math.inf), complex(math.inf, 1)])", {}),
    ("M.array([1.0, math.nan, math.inf], M.float16)", "M.array([1.0001, math.nan, math.inf])",
     {"equal_nan": True}),
    ("M.array([1.0, 2.0], M.float16)", "M.array([1.001, 2.002], M.float16)",
     {"rtol": 1e-3, "atol": 0.0})])
def test_isclose_is_composed_as_mlx(mlx, a, b, kw):
    """MLX's isclose: `abs(b)` in b's dtype and `a - b` in the common one (integers wrap:
    int8's -128 vs -128 is not close in MLX), a complex number infinite only when
    isposinf/isneginf say so; NumPy's isclose was used before."""
    _same(mlx, lambda M: M.isclose(eval(a), eval(b), stream=M.cpu, **kw))


def test_array_equal_with_equal_nan_of_complex_infinities(mlx):
    """array_equal(equal_nan=True) is MLX's `x == y or both NaN`, not built on isclose:
    with MLX's isclose (which the fix above brought) inf+1j would not equal itself."""
    def fn(M):
        a = M.array([complex(math.inf, 1), 1 + 1j, complex(math.nan, 2)])
        return M.array_equal(a, a, equal_nan=True, stream=M.cpu)
    _same(mlx, fn)


@pytest.mark.parametrize("op", ["minimum", "maximum"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
def test_minimum_maximum_of_signed_zeros_and_nans(mlx, op, dtype):
    """MLX's minimum is `isnan(x) ? x : (x < y ? x : y)`: minimum(0, -0) is -0, and
    minimum(-0, 0) is 0, in float16 too (NumPy's float16 minimum kept the first zero);
    complex numbers compare by real part, then imaginary part."""
    vals = [0.0, -0.0, math.nan, 1.0, -math.inf]
    x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))

    def fn(M):
        if dtype == "complex64":
            a, b = M.array(x + 0j), M.array(y + 0j)
        elif dtype == "float64":
            a, b = M.array(x, M.float64), M.array(y, M.float64)
        else:
            a, b = _arr(M, x, dtype), _arr(M, y, dtype)
        return getattr(M, op)(a, b, stream=M.cpu)
    _same(mlx, fn)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("part", [0, 1])
def test_divmod_is_floor_divide_and_remainder(mlx, dtype, part):
    """divmod's quotient of an infinity by a finite number is ±inf (floor(x / y)), as
    floor_divide; it was NumPy's divmod (nan)."""
    x, y = np.repeat(_SPECIAL[:9], 9), np.tile(_SPECIAL[:9], 9)

    def fn(M):
        if dtype == "float64":
            a, b = M.array(x, M.float64), M.array(y, M.float64)
        else:
            a, b = _arr(M, x, dtype), _arr(M, y, dtype)
        return M.divmod(a, b, stream=M.cpu)[part]
    _same(mlx, fn)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "var", "std", "logsumexp"])
@pytest.mark.parametrize("shape, axis", [((3000,), 0), ((3000, 3), 0), ((40, 30, 5), (0, 2)),
                                         ((40, 30, 5), None)])
@pytest.mark.parametrize("value", [1.0, 1.0078125, -0.3])
def test_half_precision_reductions_accumulate_in_float32(mlx, dtype, op, shape, axis, value):
    """MLX's CPU reductions of float16/bfloat16 accumulate in float32 and round once: the
    bfloat16 sum of 3000 ones was 256 (MLX 3008), its mean 0.085, and a float16 sum along
    a strided axis 2048 (MLX 3000); mean is `sum * (1/N)` in the half type."""
    if op == "prod" and value == -0.3:
        value = 1.0009765625

    def fn(M):
        return getattr(M, op)(M.full(shape, value, dtype=getattr(M, dtype)), axis=axis,
                              stream=M.cpu)
    _same(mlx, fn)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_mean_and_var_of_integers_sum_in_the_integer_type(mlx, dtype):
    """mean(int) is MLX's `sum(a) * float32(1/N)`: the sum wraps in int32/int64 (it was
    computed in float32), and the product rounds as MLX's (126.166664, not 126.16667)."""
    rng = np.random.default_rng(3)
    info = np.iinfo(getattr(np, dtype))
    big = rng.integers(info.max // 4, info.max // 2, size=(4, 6), dtype=getattr(np, dtype))
    small = rng.integers(0, 100, size=(4, 1, 3)).astype(getattr(np, dtype))
    for v in (big, small):
        for fn in (lambda M: M.mean(M.array(v), stream=M.cpu),
                   lambda M: M.mean(M.array(v), axis=0, stream=M.cpu),
                   lambda M: M.var(M.array(v), axis=0, ddof=1, stream=M.cpu)):
            _same(mlx, fn)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "bool_", "float16"])
def test_logsumexp_over_leading_axes_is_mlxs_composition(mlx, dtype):
    """Off the last axis MLX composes logsumexp in the input's dtype: `a - max(a)` wraps for
    unsigned integers (exp of it is inf), bools subtract as bools."""
    v = np.array([[3, 1, 0, 0], [2, 0, 2, 2], [0, 0, 1, 2]]).astype(
        np.dtype(dtype.rstrip("_")))
    _same(mlx, lambda M: M.logsumexp(M.array(v), axis=0, stream=M.cpu))


@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
def test_reduction_over_no_axes_keeps_negative_zero(mlx, op):
    _same(mlx, lambda M: getattr(M, op)(M.array([-0.0, 1.0, -0.0]), axis=[], stream=M.cpu))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape, axis", [((3, 0), 0), ((0, 4), 1), ((2, 0, 3), -1)])
def test_argmax_of_an_empty_array_raises_whatever_the_axis(mlx, op, shape, axis):
    """MLX refuses any empty array (ValueError), even when the reduced axis is not empty."""
    _same(mlx, lambda M: getattr(M, op)(M.zeros(shape), axis=axis, stream=M.cpu))
