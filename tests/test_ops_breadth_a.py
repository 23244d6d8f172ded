"""Ops breadth (a): creation, shape, indexing and updates, math, sorting, scans, products.

Differential tests against mlx (values, dtypes, shapes, exception types) and NumPy
(randomized shapes, axes and dtypes with hypothesis)."""
import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import streamlet.core as mx

X = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
BM = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float32)
MASK = [[True, False, True, True], [False, True, True, False]]

# name: f(M) building the same computation with M = streamlet.core or mlx.core
CASES = {
    "tile": lambda M: M.tile(M.array(X), (2, 1, 2)),
    "tile_scalar": lambda M: M.tile(M.array(3), 2),
    "repeat_axis": lambda M: M.repeat(M.array(X), 2, axis=1),
    "repeat_flat": lambda M: M.repeat(M.array(X), 3),
    "pad_constant": lambda M: M.pad(M.array(X), [(1, 2), (0, 3)], constant_values=2.5),
    "pad_int_value": lambda M: M.pad(M.array([[1, 2]]), 1, constant_values=2.7),
    "pad_edge": lambda M: M.pad(M.array(X), 2, mode="edge"),
    "pad_reflect": lambda M: M.pad(M.array(X), 2, mode="reflect"),
    "pad_symmetric": lambda M: M.pad(M.array(X), (1, 2), mode="symmetric"),
    "roll_flat": lambda M: M.roll(M.array(X), 3),
    "roll_axes": lambda M: M.roll(M.array(X), (1, -2), axis=(0, 1)),
    "flip": lambda M: M.flip(M.array(X), axis=1),
    "diag_of_matrix": lambda M: M.diag(M.array(X), 1),
    "diag_of_vector": lambda M: M.diag(M.array(X)[0], -2),
    "diagonal": lambda M: M.diagonal(M.array(X).reshape(2, 3, 4), 1, 2, 0),
    "tri": lambda M: M.tri(3, 5, -1, dtype=M.int32),
    "tril": lambda M: M.tril(M.array(X), 1),
    "triu": lambda M: M.triu(M.array(X), -1),
    "as_strided": lambda M: M.as_strided(M.array(X), (3, 3), (1, 6), 2),
    "as_strided_default": lambda M: M.as_strided(M.array(X).T),
    "view_int8": lambda M: M.view(M.array(X), M.int8),
    "view_float16": lambda M: M.view(M.array(X), M.float16),
    "view_bfloat16_bits": lambda M: M.view(M.array(X).astype(M.bfloat16), M.uint16),
    "view_through_bfloat16": lambda M: M.view(M.view(M.array(X), M.bfloat16), M.int16),
    "moveaxis": lambda M: M.moveaxis(M.array(X).reshape(2, 3, 4), 0, -1),
    "permute_dims": lambda M: M.permute_dims(M.array(X).reshape(2, 3, 4), (2, 0, 1)),
    "matrix_transpose": lambda M: M.matrix_transpose(M.array(X).reshape(2, 3, 4)),
    "unflatten": lambda M: M.unflatten(M.array(X), 1, (2, -1)),
    "unstack": lambda M: M.unstack(M.array(X), axis=1),
    "atleast_3d": lambda M: M.atleast_3d(M.array(X)[0]),
    "atleast_2d": lambda M: M.atleast_2d(M.array(1.0)),
    "meshgrid_xy": lambda M: M.meshgrid(M.array(X)[0], M.array(X)[1, :3]),
    "meshgrid_ij_sparse": lambda M: M.meshgrid(M.arange(2), M.arange(3), M.arange(4),
                                               indexing="ij", sparse=True),
    "concat": lambda M: M.concat([M.array(X), M.array(X)], axis=1),
    "contiguous": lambda M: M.contiguous(M.array(X).T),
    "windows": lambda M: [M.bartlett(5), M.blackman(6), M.hamming(7), M.hanning(4)],
    "take": lambda M: M.take(M.array(X), M.array([[0, -1], [2, 3]]), axis=1),
    "take_scalar": lambda M: M.take(M.array(X), 3),
    "take_along_axis": lambda M: M.take_along_axis(M.array(X), M.array([[0], [1], [5], [2]]),
                                                   axis=1),
    "take_along_broadcast": lambda M: M.take_along_axis(M.array(X), M.array([[0]]), axis=1),
    "take_along_none": lambda M: M.take_along_axis(M.array(X), M.array([0, 23]), axis=None),
    "put_along_axis": lambda M: M.put_along_axis(M.array(X), M.array([[0], [1], [5], [2]]),
                                                 M.array(7.0), axis=1),
    "put_along_none": lambda M: M.put_along_axis(M.array(X), M.array([0, 1]), M.array(-1.0)),
    "slice": lambda M: M.slice(M.array(X), M.array([1, 2]), [0, 1], [2, 3]),
    "slice_one_axis": lambda M: M.slice(M.array(X), M.array([1]), [1], [2, 3]),
    "slice_update_one_axis": lambda M: M.slice_update(M.array(X), M.zeros((1, 3)),
                                                      M.array([2]), [1]),
    "flip_scalar": lambda M: M.flip(M.array(2.0)),
    "einsum_to_scalar": lambda M: M.einsum("ij->", M.array(X)),
    "einsum_trace": lambda M: M.einsum("ii", M.array(X)[:4, :4]),
    "inner_vectors": lambda M: M.inner(M.array(X)[0], M.array(X)[1]),
    "getitem_scalar": lambda M: M.array(X)[1, 2],
    "slice_update": lambda M: M.slice_update(M.array(X), M.zeros((2, 3)), M.array([1, 2]),
                                             [0, 1]),
    "unique_all": lambda M: M.unique(M.array([3, 1, 3, 2, 1]), 5, True, True, True),
    "unique_truncated": lambda M: M.unique(M.array([3, 1, 3, 2, 1]), 2, True, True, True),
    "unique_fill": lambda M: M.unique(M.array([[3, 1], [3, 2]]), 4, fill_value=-1),
    "count_nonzero": lambda M: M.count_nonzero(M.array([[0, 1, 2], [0, 0, 3]]), axis=1,
                                               keepdims=True),
    "softmax": lambda M: M.softmax(M.array(X), axis=1),
    "softmax_precise": lambda M: M.softmax(M.array(X).astype(M.float16), precise=True),
    "softmax_int": lambda M: M.softmax(M.array([1, 2, 3]), axis=0),
    "sort": lambda M: M.sort(M.array(X), axis=0),
    "sort_flat": lambda M: M.sort(M.array(X), axis=None),
    "argsort": lambda M: M.argsort(M.array(X), axis=None),
    "argsort_ties": lambda M: M.argsort(M.array([1, 0] * 10)),
    "topk_sorted": lambda M: M.sort(M.topk(M.array(X), 2)),
    "partition_kth": lambda M: M.partition(M.array(X), 2)[:, 2],
    "searchsorted": lambda M: M.searchsorted(M.array([1, 2, 2, 5]), M.array([[2, 6], [0, 2]]),
                                             side="right"),
    "searchsorted_float": lambda M: M.searchsorted(M.array([1.0, 2.5, 3]), M.array([2.5])),
    "median": lambda M: M.median(M.array(X), axis=1),
    "median_int": lambda M: M.median(M.array([1, 2, 3, 4])),
    "minmax": lambda M: M.minmax(M.array(X), axis=0),
    "diff": lambda M: M.diff(M.array(X), 2, axis=1),
    "diff_bool": lambda M: M.diff(M.array(X) > 0),
    "diff_long": lambda M: M.diff(M.array(X), 10),
    "cumsum_bool": lambda M: M.cumsum(M.array(X) > 0, axis=0),
    "cumsum_dtype": lambda M: M.cumsum(M.array([1, 2, 3], dtype=M.int8), dtype=M.float32),
    "cumulative_sum": lambda M: M.cumulative_sum(M.array(X), axis=0, reverse=True),
    "cumulative_prod": lambda M: M.cumulative_prod(M.array(X), axis=1, inclusive=False),
    "logcumsumexp_int": lambda M: M.logcumsumexp(M.array([1, 2, 3])),
    "inner": lambda M: M.inner(M.array(X), M.array(X)),
    "inner_scalar": lambda M: M.inner(M.array(2.0), M.array([1.0, 2])),
    "outer": lambda M: M.outer(M.array([[1, 2]]), M.array([3, 4])),
    "tensordot_lists": lambda M: M.tensordot(M.array(X), M.array(X), axes=[[0], [0]]),
    "tensordot_int": lambda M: M.tensordot(M.array(X), M.array(X).T, axes=1),
    "einsum_matmul": lambda M: M.einsum("ij,kj->ik", M.array(X), M.array(X)),
    "einsum_ellipsis": lambda M: M.einsum("...j,ij", M.array(X), M.array(X)),
    "einsum_diag": lambda M: M.einsum("ii->i", M.array(X)[:4, :4]),
    "einsum_outer": lambda M: M.einsum("i,j", M.array(X)[0], M.array(X)[1]),
    "einsum_batch": lambda M: M.einsum("bij,bjk->bik", M.array(X).reshape(2, 2, 6),
                                       M.array(X).reshape(2, 6, 2)),
    "kron": lambda M: M.kron(M.array([1, 2]), M.array([[1], [2]])),
    "kron_float": lambda M: M.kron(M.array(X)[:2, :2], M.array(X)[:3]),
    "trace": lambda M: M.trace(M.array(X), 1),
    "trace_int8": lambda M: M.trace(M.array([[1, 2], [3, 4]], dtype=M.int8)),
    "vecdot_complex": lambda M: M.vecdot(M.array([1j, 2]), M.array([1j, 1])),
    "addmm": lambda M: M.addmm(M.array(X)[:, :4], M.array(X), M.array(X).T, alpha=2.0,
                               beta=0.5),
    "gather_mm": lambda M: M.gather_mm(M.array(X).reshape(2, 2, 6), M.array(X).reshape(2, 6, 2),
                                       M.array([1, 0, 1]), M.array([0, 0, 1])),
    "segmented_mm": lambda M: M.segmented_mm(M.array(X), M.array(X).T,
                                             M.array([[0, 2], [2, 6], [1, 1]])),
    "block_masked_lhs": lambda M: M.block_masked_mm(M.array(BM), M.ones((128, 64)), 32,
                                                    mask_lhs=M.array(MASK)),
    "block_masked_none": lambda M: M.block_masked_mm(M.array(BM), M.array(BM.T), 16),
    "block_masked_out": lambda M: M.block_masked_mm(M.array(BM), M.array(BM.T), 64,
                                                    mask_out=M.array([[True]]),
                                                    mask_rhs=M.array([[True], [False]])),
    "convolve_same": lambda M: M.convolve(M.array(X)[0], M.array(X)[1, :3], mode="same"),
    "convolve_valid": lambda M: M.convolve(M.array([1.0, 2]), M.array([1.0, 0, -1, 2]),
                                           mode="valid"),
    "hadamard": lambda M: M.hadamard_transform(M.array(X)[:, :4]),
    "nan_to_num": lambda M: M.nan_to_num(M.array([np.nan, np.inf, -np.inf, 1.0]), 1.0,
                                         neginf=-5),
    "nan_to_num_f16": lambda M: M.nan_to_num(M.array([np.nan, np.inf], dtype=M.float16)),
    "isposinf": lambda M: M.isposinf(M.array([np.nan, np.inf, -np.inf, 1.0])),
    "isneginf": lambda M: M.isneginf(M.array([np.nan, np.inf, -np.inf, 1.0])),
    "divmod": lambda M: M.divmod(M.array([7, -7]), 3),
    "logaddexp": lambda M: M.logaddexp(M.array(X), 1.0),
    "logical_xor": lambda M: M.logical_xor(M.array(X) > 0, M.array([True] * 6)),
    "bitwise_left_shift": lambda M: M.bitwise_left_shift(M.array([1, 2]), 3),
    "degrees_radians": lambda M: [M.degrees(M.array(X)), M.radians(M.array([1, 2]))],
    "real_imag_conj": lambda M: [M.real(M.array([1 + 2j])), M.imag(M.array([1 + 2j])),
                                 M.conj(M.array([1 + 2j])), M.imag(M.array([1, 2]))],
    "trunc_positive": lambda M: [M.trunc(M.array([-1.5, 2.7])), M.positive(M.array([1, 2]))],
    "inverse_trig": lambda M: [getattr(M, n)(M.array([0.25, 0.5])) for n in
                               ("asin", "acos", "atan", "asinh", "atanh", "sinh", "cosh")],
    "arccosh_atan2_pow": lambda M: [M.arccosh(M.array([1.5])), M.atan2(M.array([1.0]), 2.0),
                                    M.pow(M.array([2, 3]), 2)],
    "reciprocal": lambda M: M.reciprocal(M.array([1, 2, 4])),
    "matrix_norm": lambda M: M.matrix_norm(M.array(X), "fro", axis=(0, 1)),
}
for _s in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
    CASES[f"{_s}_reverse_exclusive"] = (
        lambda s: lambda M: getattr(M, s)(M.array(X), axis=1, reverse=True, inclusive=False))(_s)
    CASES[f"{_s}_flat"] = (lambda s: lambda M: getattr(M, s)(M.array(X)))(_s)


def _dtype_name(d):
    return str(d).rsplit(".", 1)[-1]


def _check_same(ours, theirs):
    assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(np.array(ours).astype(np.float64) if ours.dtype != mx.complex64
                               else np.array(ours), np.array(theirs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mlx(name, mlx):
    ours, theirs = CASES[name](mx), CASES[name](mlx)
    if isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _check_same(o, t)
    else:
        _check_same(ours, theirs)


# Bad inputs: ours must raise an exception of the type mlx raises (AxisError is both
# ValueError and IndexError, so either mlx choice for an invalid axis is matched).
BAD = {
    "tril_1d": lambda M: M.tril(M.arange(3)),
    "diag_3d": lambda M: M.diag(M.zeros((2, 2, 2))),
    "diagonal_1d": lambda M: M.diagonal(M.arange(3)),
    "tile_negative": lambda M: M.tile(M.zeros((2, 3)), -1),
    "repeat_negative": lambda M: M.repeat(M.zeros((2, 3)), -1),
    "repeat_axis": lambda M: M.repeat(M.zeros((2, 3)), 2, axis=5),
    "roll_axis": lambda M: M.roll(M.zeros((2, 3)), 1, axis=5),
    "flip_axis": lambda M: M.flip(M.zeros((2, 3)), axis=5),
    "pad_mode": lambda M: M.pad(M.zeros((2, 3)), 1, mode="wrap"),
    "pad_widths": lambda M: M.pad(M.zeros((2, 3)), [(1, 2), (0, 1), (1, 1)]),
    "pad_negative": lambda M: M.pad(M.zeros((2, 3)), -1),
    "moveaxis_axis": lambda M: M.moveaxis(M.zeros((2, 3)), 0, 5),
    "unflatten_shape": lambda M: M.unflatten(M.zeros((2, 3)), 1, (2, -1)),
    "unflatten_two_infer": lambda M: M.unflatten(M.zeros((2, 3)), 1, (-1, -1)),
    "view_scalar": lambda M: M.view(M.array(1), M.int8),
    "view_size": lambda M: M.view(M.arange(3), M.int64),
    "meshgrid_indexing": lambda M: M.meshgrid(M.arange(2), indexing="foo"),
    "matrix_transpose_1d": lambda M: M.matrix_transpose(M.arange(3)),
    "result_type_scalar": lambda M: M.result_type(M.zeros(2), 1.0),
    "take_float_indices": lambda M: M.take(M.zeros((2, 3)), M.array([0.5]), axis=1),
    "sort_axis": lambda M: M.sort(M.zeros((2, 3)), axis=2),
    "argsort_axis": lambda M: M.argsort(M.zeros((2, 3)), axis=-3),
    "cumsum_axis": lambda M: M.cumsum(M.zeros((2, 3)), axis=2),
    "softmax_axis": lambda M: M.softmax(M.zeros((2, 3)), axis=2),
    "topk_k": lambda M: M.topk(M.zeros((2, 3)), 4),
    "inner_int": lambda M: M.inner(M.zeros((2, 3), M.int32), M.zeros((2, 3), M.int32)),
    "einsum_int": lambda M: M.einsum("ij,kj->ik", M.zeros((2, 3), M.int32),
                                     M.zeros((2, 3), M.int32)),
    "addmm_int": lambda M: M.addmm(M.zeros((2, 2), M.int32), M.zeros((2, 3), M.int32),
                                   M.zeros((3, 2), M.int32)),
    "convolve_int": lambda M: M.convolve(M.zeros(3, M.int32), M.zeros(2, M.int32)),
    "trunc_complex": lambda M: M.trunc(M.array([1j])),
    "nan_to_num_complex": lambda M: M.nan_to_num(M.array([1j])),
    "block_size": lambda M: M.block_masked_mm(M.zeros((4, 4)), M.zeros((4, 4)), 16,
                                              mask_out=M.array([[True]])),
    "slice_size": lambda M: M.slice(M.zeros((4, 6)), M.array([1]), [1], [2, 30]),
    "setitem_shape": lambda M: M.zeros((3, 4)).__setitem__(0, M.zeros((2, 4))),
    "diff_negative": lambda M: M.diff(M.zeros(3), -1),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_like_mlx(name, mlx):
    with pytest.raises(Exception) as theirs:
        BAD[name](mlx)
    with pytest.raises(theirs.type):
        BAD[name](mx)


# ---- randomized against NumPy ------------------------------------------------------------
DTYPES = ["float32", "int32", "int16", "uint8"]


def _arrays(dtypes=DTYPES, min_dims=1):
    return st.sampled_from(dtypes).flatmap(lambda d: hnp.arrays(
        d, hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=1, max_side=5),
        elements=hnp.from_dtype(np.dtype(d), min_value=0, max_value=50)))


@settings(max_examples=30, deadline=None)
@given(_arrays(), st.data())
def test_sort_argsort_match_numpy(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    np.testing.assert_array_equal(mx.sort(mx.array(a), axis), np.sort(a, axis))
    np.testing.assert_array_equal(mx.argsort(mx.array(a), axis),
                                  np.argsort(a, axis, kind="stable"))


@settings(max_examples=30, deadline=None)
@given(_arrays(["float32", "int32"]), st.data())
def test_scans_match_numpy(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    reverse, inclusive = data.draw(st.booleans()), data.draw(st.booleans())
    for ours, ufunc in ((mx.cumsum, np.add), (mx.cummax, np.maximum), (mx.cummin, np.minimum)):
        x = np.flip(a, axis) if reverse else a
        want = ufunc.accumulate(x, axis)
        if not inclusive:
            first = np.take(want, [0], axis) * 0 + {np.add: 0}.get(ufunc, 0)
            want = np.concatenate([first, np.take(want, range(want.shape[axis] - 1), axis)],
                                  axis)
        want = np.flip(want, axis) if reverse else want
        got = np.array(ours(mx.array(a), axis, reverse=reverse, inclusive=inclusive))
        if ufunc is np.add or inclusive:
            np.testing.assert_allclose(got, want, rtol=1e-5)
        else:  # exclusive max/min: the first element is the identity (dtype's extreme)
            rest = [slice(None)] * a.ndim
            rest[axis] = slice(0, -1) if reverse else slice(1, None)
            np.testing.assert_allclose(got[tuple(rest)], want[tuple(rest)], rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(_arrays(), st.data())
def test_rearrangements_match_numpy(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    reps = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    shift = data.draw(st.integers(-7, 7))
    n = data.draw(st.integers(0, 3))
    x = mx.array(a)
    np.testing.assert_array_equal(mx.tile(x, reps), np.tile(a, reps))
    np.testing.assert_array_equal(mx.repeat(x, n, axis), np.repeat(a, n, axis))
    np.testing.assert_array_equal(mx.roll(x, shift, axis), np.roll(a, shift, axis))
    np.testing.assert_array_equal(mx.flip(x, axis), np.flip(a, axis))
    np.testing.assert_array_equal(mx.diff(x, n, axis), np.diff(a, n, axis))
    np.testing.assert_array_equal(mx.pad(x, n, mode="edge"), np.pad(a, n, mode="edge"))
    np.testing.assert_array_equal(mx.moveaxis(x, axis, 0), np.moveaxis(a, axis, 0))


@settings(max_examples=30, deadline=None)
@given(_arrays(), st.data())
def test_take_and_updates_match_numpy(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=6)))
    x = mx.array(a)
    np.testing.assert_array_equal(mx.take(x, mx.array(idx), axis), np.take(a, idx, axis))
    index = (slice(None),) * (axis % a.ndim) + (mx.array(idx),)
    np_index = (slice(None),) * (axis % a.ndim) + (idx,)
    want = a.copy()
    np.add.at(want, np_index, 1)
    np.testing.assert_array_equal(x.at[index].add(1), want)
    want = a.copy()
    np.maximum.at(want, np_index, 7)
    np.testing.assert_array_equal(x.at[index].maximum(7), want)
    np.testing.assert_array_equal(x, a)  # the input itself is never written


# ---- __setitem__ semantics -----------------------------------------------------------------
def test_setitem_rebinds_and_earlier_results_keep_old_value():
    a = mx.zeros((3, 4))
    before = a * 2 + 1
    alias = a
    a[1] = mx.array([1.0, 2, 3, 4])
    a[a > 2] = -1
    a[:, mx.array([0, 0])] = 5
    want = np.zeros((3, 4), np.float32)
    want[1] = [1, 2, -1, -1]
    want[:, 0] = 5
    np.testing.assert_array_equal(a, want)
    assert alias is a
    np.testing.assert_array_equal(before, np.ones((3, 4)))


def test_setitem_through_every_reference_of_the_handle(mlx):
    """`buf[i] = v` inside a function changes the caller's array (one handle, as in MLX),
    while arrays computed from it before keep the old value."""
    def fill(buf, n):
        for i in range(n):
            buf[i] = i
    results = []
    for M in (mx, mlx):
        a = M.zeros((8,))
        fill(a, 8)
        doubled = a * 2
        fill(a, 1)
        a[0] = 9
        results.append((np.array(a), np.array(doubled)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], 2 * np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_setitem_casts_and_broadcasts_like_mlx(mlx):
    for M in (mx, mlx):
        b = M.arange(12).reshape(3, 4)
        b[..., 1:3] = 2.7
        b[::-1, 1] = M.array([1, 2, 3])
        b[1:, M.array([0, 2])] = M.array([[7], [8]])
        if M is mx:
            ours = b
        else:
            _check_same(ours, b)


def test_at_divide_multiplies_by_reciprocal_in_dtype(mlx):
    for M in (mx, mlx):
        r = M.arange(12).reshape(3, 4).at[0].divide(2)
        if M is mx:
            ours = r
    _check_same(ours, r)


def test_ops_take_a_stream_and_run_there():
    s = mx.new_stream(mx.cpu)
    a = mx.array(X)
    outs = [mx.sort(a, stream=s), mx.cumsum(a, axis=0, stream=s), mx.take(a, 1, stream=s),
            mx.einsum("ij->j", a, stream=s), mx.pad(a, 1, stream=s), mx.tril(a, stream=s)]
    mx.eval(outs)
    np.testing.assert_allclose(outs[3], X.sum(0), rtol=1e-5)


def test_depends_keeps_values():
    a, b_ = mx.ones(3), mx.zeros(2)
    out = mx.depends([a], [b_])
    np.testing.assert_array_equal(out[0], np.ones(3))
    np.testing.assert_array_equal(mx.depends(a, b_), np.ones(3))


def test_result_type_and_can_cast(mlx):
    pairs = [(mx.int64, mx.float32), (mx.uint64, mx.int64), (mx.bool_, mx.int8),
             (mx.float16, mx.bfloat16), (mx.int8, mx.uint8)]
    for a, b_ in pairs:
        ma, mb = getattr(mlx, a.name if a.name != "bool" else "bool_"), \
            getattr(mlx, b_.name if b_.name != "bool" else "bool_")
        assert mx.can_cast(a, b_) == mlx.can_cast(ma, mb)
        assert mx.result_type(a, b_).name == _dtype_name(mlx.result_type(ma, mb))


def test_array_methods_mirror_functions():
    a = mx.array(X)
    np.testing.assert_array_equal(a.reshape(2, 12), X.reshape(2, 12))
    np.testing.assert_array_equal(a.reshape((2, 12)), X.reshape(2, 12))
    np.testing.assert_array_equal(a.transpose(1, 0), X.T)
    np.testing.assert_array_equal(a.mT, X.T)
    np.testing.assert_array_equal(a.diagonal(), np.diagonal(X))
    np.testing.assert_allclose(a.cumsum(1), np.cumsum(X, 1), rtol=1e-5)
    np.testing.assert_array_equal(a.view(mx.int32), X.view(np.int32))
    c = mx.array([1 + 2j])
    np.testing.assert_array_equal(c.real, [1.0])
    np.testing.assert_array_equal(c.imag, [2.0])


def test_setitem_with_masks_matches_mlx(mlx):
    results = []
    for M in (mx, mlx):
        b = M.arange(12).reshape(3, 4)
        b[M.array([True, False, True])] = M.array([9, 8, 7, 6])
        results.append(b)
    _check_same(*results)
    b = mx.arange(12).reshape(3, 4)  # mlx 0.32.4 crashes on this one; NumPy is the oracle
    b[..., mx.array([True, False, True, False])] = mx.array([[1], [2], [3]])
    want = np.arange(12).reshape(3, 4)
    want[:, [0, 2]] = [[1], [2], [3]]
    np.testing.assert_array_equal(b, want)


UNARY_MATH = {"arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
              "arcsinh": np.arcsinh, "arctanh": np.arctanh, "sinh": np.sinh, "cosh": np.cosh,
              "degrees": np.degrees, "radians": np.radians, "trunc": np.trunc,
              "reciprocal": np.reciprocal}


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=3, max_side=5),
                  elements=st.floats(-0.9375, 0.9375, width=32).filter(lambda v: abs(v) > 1e-3)))
def test_unary_math_matches_numpy(a):
    for name, ref in UNARY_MATH.items():
        got = getattr(mx, name)(mx.array(a))
        assert got.dtype == mx.float32
        np.testing.assert_allclose(got, ref(a), rtol=2e-6, atol=1e-6, err_msg=name)


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.int32, hnp.array_shapes(max_dims=2, max_side=6),
                  elements=st.integers(-3, 3)), st.integers(0, 8))
def test_unique_matches_numpy(a, size):
    values, index, inverse, counts = mx.unique(mx.array(a), size, True, True, True)
    v, i, inv, c = np.unique(a, return_index=True, return_inverse=True, return_counts=True)
    m = min(size, v.size)
    np.testing.assert_array_equal(np.array(values)[:m], v[:m])
    np.testing.assert_array_equal(np.array(index)[:m], i[:m])
    np.testing.assert_array_equal(np.array(counts)[:m], c[:m])
    assert (np.array(counts)[m:] == 0).all()
    if size >= v.size and size:
        np.testing.assert_array_equal(np.array(inverse), inv.reshape(a.shape))


def test_einsum_path_reports_a_contraction_order():
    a, b_, c = mx.ones((4, 5)), mx.ones((5, 6)), mx.ones((6, 3))
    path, text = mx.einsum_path("ij,jk,kl->il", a, b_, c)
    assert len(path) == 2 and all(isinstance(p, tuple) for p in path)
    assert "ij,jk,kl->il" in text


def test_bytes_and_array_namespace(mlx):
    a = mx.array([1, 2, 300], dtype=mx.uint16)
    assert bytes(a) == bytes(mlx.array([1, 2, 300], dtype=mlx.uint16))
    assert a.__array_namespace__() is mx


@settings(max_examples=25, deadline=None)
@given(_arrays(["float32", "int32"], min_dims=1), st.data())
def test_along_axis_match_numpy(a, data):
    axis = data.draw(st.integers(0, a.ndim - 1))
    n = a.shape[axis]
    shape = a.shape[:axis] + (data.draw(st.integers(1, 4)),) + a.shape[axis + 1:]
    idx = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(0, n - 1)))
    got = mx.take_along_axis(mx.array(a), mx.array(idx), axis)
    np.testing.assert_array_equal(got, np.take_along_axis(a, idx, axis))
    want = a.copy()
    np.put_along_axis(want, idx, 99, axis)
    got = mx.put_along_axis(mx.array(a), mx.array(idx), mx.array(99, mx.int32), axis)
    np.testing.assert_array_equal(got, want)


HADAMARD_SIZES = st.sampled_from([1, 2, 4, 64]).flatmap(
    lambda p: st.sampled_from([p, 12 * p, 20 * p, 28 * p]))


@settings(max_examples=30, deadline=None)
@given(HADAMARD_SIZES, st.lists(st.integers(1, 3), max_size=2),
       st.sampled_from(["float32", "float16", "int32"]), st.sampled_from([None, 0.25]),
       st.integers(0, 2**32 - 1))
def test_hadamard_sizes_m_times_power_of_two(n, lead, dtype, scale, seed):
    """Every n = m * 2^k (m in 1, 12, 20, 28): orthogonal with the default scale, and the
    same values and dtype as MLX where it is installed."""
    from conftest import mlx_core
    x = (np.random.default_rng(seed).standard_normal(tuple(lead) + (n,)) * 4).astype(dtype)
    got = mx.hadamard_transform(mx.array(x), scale=scale)
    wide = np.array(got.astype(mx.float32), dtype=np.float64)
    if scale is None:
        np.testing.assert_allclose(np.linalg.norm(wide, axis=-1),
                                   np.linalg.norm(x.astype(np.float64), axis=-1),
                                   rtol=2e-3 if dtype == "float16" else 1e-5)
    if mlx_core is not None:
        want = mlx_core.hadamard_transform(mlx_core.array(x), scale=scale)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(
            wide, np.array(want.astype(mlx_core.float32)), rtol=2e-3 if dtype == "float16"
            else 1e-5, atol=(1e-2 if dtype == "float16" else 1e-4) * np.sqrt(n))


@pytest.mark.parametrize("n", [3, 6, 36, 72, 0])
def test_hadamard_other_sizes_raise_when_built(n):
    with pytest.raises(ValueError, match="hadamard_transform"):
        mx.hadamard_transform(mx.ones((2, n)))


NO_OP_CALLS = {
    "astype": lambda a: mx.astype(a, mx.float32), "asarray": lambda a: mx.asarray(a),
    "reshape": lambda a: mx.reshape(a, (2, 3)),
    "broadcast_to": lambda a: mx.broadcast_to(a, (2, 3)),
    "view": lambda a: mx.view(a, mx.float32), "squeeze": lambda a: mx.squeeze(a),
    "expand_dims": lambda a: mx.expand_dims(a, ()), "atleast_2d": lambda a: mx.atleast_2d(a),
    "diff0": lambda a: mx.diff(a, 0), "pos": lambda a: +a, "copy": lambda a: copy.copy(a),
    "broadcast_arrays": lambda a: mx.broadcast_arrays(a)[0],
    "unflatten": lambda a: mx.unflatten(a, 1, (3,)), "method_reshape": lambda a: a.reshape(2, 3),
    "nan_to_num_int": lambda a: mx.nan_to_num(mx.astype(a, mx.int32)),
    "hadamard_1": lambda a: mx.hadamard_transform(mx.reshape(a, (6, 1))),
}


@pytest.mark.parametrize("pending", [False, True])
@pytest.mark.parametrize("name", sorted(NO_OP_CALLS))
def test_ops_that_change_nothing_return_a_new_array(name, pending):
    """As in MLX: assigning into the result leaves the input alone."""
    a = mx.ones((2, 3))
    if pending:
        a = a * 1.0
    r = NO_OP_CALLS[name](a)
    r[0] = 7
    assert a.tolist() == [[1.0] * 3] * 2
    assert np.array(r).ravel()[0] == 7


@settings(max_examples=25, deadline=None)
@given(_arrays(["float32", "int32"], min_dims=1), st.data())
def test_argpartition_puts_the_kth_value_in_place(a, data):
    """Indices whose values are partitioned around the k-th smallest along the axis (the
    order inside each side is unspecified, in MLX as in NumPy)."""
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    kth = data.draw(st.integers(0, a.shape[axis] - 1))
    idx = np.array(mx.argpartition(mx.array(a), kth, axis=axis))
    assert idx.dtype == np.uint32 and idx.shape == a.shape
    got = np.take_along_axis(a, idx.astype(np.int64), axis)
    np.testing.assert_array_equal(np.sort(got, axis), np.sort(a, axis))  # a permutation
    pivot = np.take(np.sort(a, axis), [kth], axis)
    np.testing.assert_array_equal(np.take(got, [kth], axis), pivot)
    assert (np.take(got, range(kth), axis) <= pivot).all()
    assert (np.take(got, range(kth + 1, a.shape[axis]), axis) >= pivot).all()


def test_softmax_of_integers_over_several_axes_is_float(mlx):
    """MLX 0.32.4's softmax of an integer array over more than one axis keeps the integer
    dtype (every probability truncated to 0); streamlet gives float32 probabilities, what
    MLX gives over one axis and for the same values as floats."""
    x = [[1, 2], [3, 4]]
    ours = mx.softmax(mx.array(x))
    want = mlx.softmax(mlx.array(x, mlx.float32))
    assert ours.dtype == mx.float32
    np.testing.assert_allclose(np.array(ours), np.array(want), rtol=1e-6)
    assert mlx.softmax(mlx.array(x)).dtype == mlx.int32  # the bug this departs from
