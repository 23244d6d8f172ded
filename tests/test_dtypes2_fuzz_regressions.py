"""Cases a differential fuzz of dtype conversions and the dtype-level APIs (astype, view,
finfo/iinfo, issubdtype, promotion with scalars, conversions from Python and NumPy)
against MLX 0.32.4 found: the result, or the error's type, is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx


def _outcome(M, fn):
    try:
        r = fn(M)
        if isinstance(r, M.array):
            M.eval(r)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e).__name__
    if isinstance(r, M.array):
        return str(r.dtype).split(".")[-1], r.shape, r.tolist()
    return repr(r)


def _same(mlx, fn):
    assert _outcome(mx, fn) == _outcome(mlx, fn)


@pytest.mark.parametrize("call", [
    lambda M: M.zeros((4,), M.uint8).view(None),
    lambda M: M.view(M.zeros((4,), M.uint8), None),
    lambda M: M.finfo(None),
    lambda M: M.iinfo(None),
    lambda M: M.from_fp8(M.zeros((2,), M.uint8), dtype=None),
])
def test_none_is_no_dtype(mlx, call):
    """None as a dtype is MLX's TypeError: it was read as NumPy's default, float64
    (`view(None)` gave a float64 view, `finfo(None)` float64's limits)."""
    assert _outcome(mlx, call) == "TypeError"
    _same(mlx, call)


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("other", ["float32", "floating", "int8", "generic"])
def test_issubdtype_of_none_is_type_error(mlx, first, other):
    """MLX's binding refuses None (TypeError) before its own check of the arguments'
    types (ValueError, which streamlet gave)."""
    def call(M):
        d = getattr(M, other)
        return M.issubdtype(None, d) if first else M.issubdtype(d, None)
    _same(mlx, call)


@pytest.mark.parametrize("op", ["&", "|", "^", "<<", ">>"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("value", [2 ** 63, 2 ** 64, -2 ** 63 - 1])
def test_bitwise_of_float_with_int_beyond_int64(mlx, op, dtype, value):
    """The int is converted first, as in MLX: one beyond int64 fails there (RuntimeError),
    before the float operand is refused (ValueError)."""
    def call(M):
        a = M.zeros((2,), getattr(M, dtype))
        return eval(f"a {op} value", {"a": a, "value": value})
    assert _outcome(mlx, call) == "RuntimeError"
    _same(mlx, call)


_ODD = {"str": lambda: np.array(["a", "b"]), "object": lambda: np.array([1, 2], object),
        "datetime": lambda: np.array(["2020-01-01"], "datetime64[D]"),
        "longdouble": lambda: np.array([1.5, 2.5], np.longdouble),
        "clongdouble": lambda: np.array([1j], np.clongdouble)}


@pytest.mark.parametrize("kind", sorted(_ODD))
def test_array_of_numpy_dtype_mlx_has_not(mlx, kind):
    """A NumPy array of a dtype MLX has no type for fails as MLX's cast does
    (RuntimeError; it was TypeError), given to `array` with or without a dtype."""
    x = _ODD[kind]()
    _same(mlx, lambda M: M.array(x))
    _same(mlx, lambda M: M.array(x, M.float32))
    _same(mlx, lambda M: M.asarray(x))


@pytest.mark.parametrize("kind,how", [(k, h) for k in sorted(_ODD)
                                      for h in ("add", "operator", "maximum", "where")
                                      if h != "operator" or "longdouble" in k])
def test_operand_of_numpy_dtype_mlx_has_not(mlx, kind, how):
    """As an op's operand such an array is MLX's ValueError (an invalid type for the array
    it would become; the operators name the operation), where streamlet raised TypeError
    (a float128 array passed the operators' check of the kind)."""
    x = _ODD[kind]()

    def call(M):
        a = M.zeros((1,))
        if how == "add":
            return M.add(a, x)
        if how == "operator":
            return a + x
        if how == "maximum":
            return M.maximum(x, a)
        return M.where(M.array(True), x, a)
    assert _outcome(mlx, call) == "ValueError"
    _same(mlx, call)


@pytest.mark.parametrize("dtype", ["None", "1", "1.5", "[1]", "M.zeros((1,))", "M.floating"])
@pytest.mark.parametrize("kind", ["'bool'", "M.int8", "('numeric', M.float32)"])
def test_isdtype_of_no_dtype_is_type_error(mlx, dtype, kind):
    """isdtype's first argument must be a dtype (MLX's TypeError): None, a number, an array
    or a category gave False (or an AttributeError for a kind name)."""
    _same(mlx, lambda M: M.isdtype(eval(dtype, {"M": M}), eval(kind, {"M": M})))


@pytest.mark.parametrize("name", ["bool_", "int8", "float32", "complex64"])
def test_isdtype_of_kind_none_is_type_error(mlx, name):
    """A None kind is refused by MLX's binding (TypeError), not by its check (ValueError)."""
    _same(mlx, lambda M: M.isdtype(getattr(M, name), None))


@pytest.mark.parametrize("value", ["1", "1.5", "[1]", "M.floating", "'int8'"])
def test_can_cast_from_no_dtype_is_value_error(mlx, value):
    """`from_` that is neither an array nor a dtype is MLX's ValueError (it was TypeError)."""
    _same(mlx, lambda M: M.can_cast(eval(value, {"M": M}), M.float32))


@pytest.mark.parametrize("call", [
    lambda M, d: M.zeros((2,)).astype(d),
    lambda M, d: M.zeros((2,), d),
    lambda M, d: M.array([1, 2], d),
    lambda M, d: M.finfo(d),
    lambda M, d: M.iinfo(d),
    lambda M, d: M.zeros((4,), M.uint8).view(d),
])
def test_an_array_is_no_dtype(mlx, call):
    """An array given as a dtype is MLX's TypeError (NumPy's ValueError came through)."""
    _same(mlx, lambda M: call(M, M.zeros((1,), M.int32)))
