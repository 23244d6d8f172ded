"""Cases a differential fuzz of indexing, updates, take/put along an axis, slice_update and
einsum against MLX 0.32.4 found: the result (value, dtype, shape or the error raised) is
MLX's."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamlet.core as mx


def _outcome(M, fn):
    try:
        r = fn(M)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return "ValueError" if isinstance(e, ValueError) else type(e).__name__
    return repr(r.dtype), r.shape, r.tolist()


def _same(mlx, fn):
    assert _outcome(mx, fn) == _outcome(mlx, fn)


@pytest.mark.parametrize("index", [
    "(M.array(0), 0, ..., M.array([1, 1, 0]))",
    "(None, M.array(0), 0, ..., [1, 1, 0])",
    "(slice(None), M.array([[0], [1]]), ..., 1)",
])
def test_an_ellipsis_of_no_axes_leaves_the_array_indices_side_by_side(mlx, index):
    """MLX spells an Ellipsis out as the slices it stands for: one that stands for none
    does not part the integer indices around it, whose dimensions stay in place, where
    NumPy's rule put them first ((3, 1) for MLX's (1, 3))."""
    def fn(M):
        a = M.array(np.arange(8).reshape(1, 2, 4))
        return a[eval(index)]
    _same(mlx, fn)


@pytest.mark.parametrize("index", ["'a'", "1.5", "True", "(0, 'a')", "(slice(0.5, None),)",
                                   "(slice(True, None),)"])
def test_an_index_of_no_index_type_is_a_value_error(mlx, index):
    """A string, float or bool (or such a slice bound) as an index: MLX's ValueError, where
    it was a TypeError."""
    _same(mlx, lambda M: M.array(np.arange(6).reshape(2, 3))[eval(index)])


@pytest.mark.parametrize("index", ["()", "(None,)", "(None, None)", "(Ellipsis,)",
                                   "(Ellipsis, None)"])
@pytest.mark.parametrize("value", ["2.5", "M.array(1.5, M.float16)", "M.array([[3]], M.int8)"])
@pytest.mark.parametrize("how", ["set", "add", "divide"])
def test_an_update_of_a_scalar_array_by_an_empty_index_takes_the_value(mlx, index, value,
                                                                      how):
    """`a[()] = 2.5` for an int32 scalar `a` scatters nothing in MLX: `a` becomes the
    value in its own dtype (float32 2.5, not int32 2); `.at[()].add(v)` is `a + v`."""
    def fn(M):
        a = M.array(0, M.int32)
        if how == "set":
            a[eval(index)] = eval(value)
            return a
        return getattr(a.at[eval(index)], how)(eval(value))
    _same(mlx, fn)


@pytest.mark.parametrize("target", ["int64", "complex64", "float32"])
@pytest.mark.parametrize("value", ["M.array([250, 7], M.uint8)", "M.array([True, False])",
                                   "M.array([1.5, 2.5], M.float16)"])
def test_at_subtract_adds_the_values_negation_in_its_own_dtype(mlx, target, value):
    """`a.at[i].subtract(v)` is MLX's scatter-add of `-v`, negated in v's dtype: a uint8
    250 is 6 there (int64 `a` gets 6 less, not 250 less), a bool `v` is refused."""
    def fn(M):
        a = M.array([10, 20, 30], getattr(M, target))
        return a.at[M.array([0, 2])].subtract(eval(value))
    _same(mlx, fn)


@pytest.mark.parametrize("how", ["set", "add", "maximum", "multiply"])
def test_a_python_int_that_does_not_fit_the_array_is_a_value_error(mlx, how):
    """`a[1] = -3` for a uint32 `a`: MLX's ValueError (overflow), where NumPy's
    OverflowError came through."""
    def fn(M):
        a = M.array([1, 2, 3], M.uint32)
        if how == "set":
            a[1] = -3
            return a
        return getattr(a.at[1], how)(-3)
    _same(mlx, fn)


def test_a_float_set_into_a_complex_scalar_array_is_float32(mlx):
    """`a[()] = 7.0` on a complex64 scalar array is float32 7 in MLX (its `to_array` makes
    a float into a non-real-floating array float32)."""
    def fn(M):
        a = M.array(1 + 2j, M.complex64)
        a[()] = 7.0
        return a
    _same(mlx, fn)


@pytest.mark.parametrize("method", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["int32", "float32", "int64", "uint8", "float64"])
def test_at_values_broadcast_against_a_2d_index(mlx, method, dtype):
    """`a.at[[[1, 1], [3, 1], [1, 2]]].add([1, 2])`: values broadcast over a new leading
    axis.  NumPy 2.4's `ufunc.at` read garbage there (0, 35, 3, 7 for 0, 6, 5, 8)."""
    def fn(M):
        a = M.array([0, 4, 3, 7], getattr(M, dtype))
        idx = M.array([[1, 1], [3, 1], [1, 2]])
        return getattr(a.at[idx], method)(M.array([1, 2], getattr(M, dtype)))
    _same(mlx, fn)


@pytest.mark.parametrize("op", ["take", "put"])
@pytest.mark.parametrize("indices", ["[[0, 2]]", "[0, 2]"])
def test_along_axis_none_does_not_flatten_the_indices(mlx, op, indices):
    """With axis=None MLX flattens `a` only: 2-D indices do not match the 1-D array (a
    ValueError, where they were flattened too)."""
    def fn(M):
        a = M.array(np.arange(6).reshape(2, 3))
        i = M.array(eval(indices))
        if op == "take":
            return M.take_along_axis(a, i, axis=None)
        return M.put_along_axis(a, i, M.array(-1), axis=None)
    _same(mlx, fn)


@pytest.mark.parametrize("axes", [[3, 1], [1], [0, 2]])
def test_slice_update_spreads_a_short_update_over_the_leading_axes(mlx, axes):
    """An update with fewer axes than `a` covers `a`'s whole leading axes (one wide on
    the sliced ones) in MLX, where only the first slab was written."""
    def fn(M):
        a = M.zeros((2, 2, 3, 4), M.int32)
        u = M.array(np.arange(1, 9).reshape(1, 2, 4), M.int32)
        return M.slice_update(a, u, M.array([0] * len(axes)), axes)
    _same(mlx, fn)


@pytest.mark.parametrize("spec, shapes", [
    ("cc...,...ccb->cb", [(2, 2, 3), (1, 2, 2, 4)]),
    ("i...,i...->i", [(2, 3), (2, 3)]),
    ("...,...->", [(3,), (3,)]),
])
def test_einsum_of_integers_summing_an_ellipsis_over_two_operands_is_refused(mlx, spec,
                                                                             shapes):
    """Axes of an ellipsis the output drops are summed like any index: over two operands
    a matrix product, which MLX refuses for integers (it was computed)."""
    def fn(M):
        return M.einsum(spec, *[M.ones(s, M.int32) for s in shapes])
    _same(mlx, fn)


@pytest.mark.parametrize("spec", ["...i,...j->...ij", "i...,i...->...", "...,...->..."])
def test_vmap_of_an_einsum_with_an_ellipsis(mlx, spec):
    """vmap of an einsum spells its ellipses out for the unbatched operands (the batch
    axis counted in made the terms one letter too long: a ValueError)."""
    def fn(M):
        xs = M.array(np.arange(24, dtype=np.float32).reshape(3, 4, 2))
        return M.vmap(lambda x: M.einsum(spec, x, x * 2))(xs)
    _same(mlx, fn)


@settings(max_examples=60, deadline=None,  # (`mlx` is the module: nothing to reset)
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 3), min_size=0, max_size=3),
       st.lists(st.integers(0, 3), min_size=0, max_size=3),
       st.sampled_from(["int32", "uint8", "int64", "float32"]), st.integers(0, 2**16))
def test_one_index_array_gives_mlxs_result(mlx, a_shape, i_shape, i_dtype, seed):
    """`a[i]` with one index array (an embedding's lookup, its shape found without a
    probe): MLX's shape, values or error (a 0-d array, an empty axis), negative indices
    included (out-of-range ones, which MLX reads anyway, fail in streamlet when run)."""
    rng = np.random.default_rng(seed)
    av = rng.standard_normal(a_shape).astype(np.float32)
    n = a_shape[0] if a_shape else 1
    lo = -n if i_dtype[0] == "i" else 0
    iv = rng.integers(lo, max(n, 1), i_shape).astype(i_dtype)

    def fn(M):
        r = M.array(av)[M.array(iv)]
        M.eval(r)
        return r
    _same(mlx, fn)
