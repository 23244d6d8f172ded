"""Cases a differential fuzz of `mx.array`'s methods, properties and Python protocols
against MLX 0.32.4 found: the result (value, dtype, shape or the error's type) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from parity import described


def _outcome(M, fn):
    return described(M, fn, _described)


def _described(r):  # rounded: the transcendental ops may differ from MLX's in the last bit
    v = np.array(r.tolist())
    return repr(r.dtype), r.shape, repr(np.round(v, 4).tolist() if v.dtype.kind in "fc" else
                                         v.tolist())


def _same(mlx, fn):
    assert _outcome(mx, fn) == _outcome(mlx, fn)


_X = "M.array([[1.5, -2.0, 3.0], [4.0, 0.5, -6.0]])"


@pytest.mark.parametrize("call", [
    "x.sum(axis=True)", "x.sum(True, True)", "x.sum(axis=[True, False])", "x.mean(True)",
    "x.max(axis=(False,), keepdims=True)", "x.argmax(axis=True)", "x.argmin(True, True)",
    "x.std(True)", "x.var(axis=[True])", "x.logsumexp(True)", "x.all(True)", "x.any(False)",
    "x.cumsum(axis=True)", "x.cummax(True, reverse=True)", "x.squeeze(axis=False)",
    "M.expand_dims(x, True).squeeze(False)", "x.moveaxis(True, 0)", "x.swapaxes(True, 0)",
    "x.split(3, True)", "x.diagonal(0, True, False)",
    "M.take(x, M.array([0]), axis=True)", "M.sort(x, axis=True)",
    "M.concatenate([x, x], axis=True)", "M.stack([x, x], axis=True)",
    "M.softmax(x, axis=True)", "M.roll(x, True)", "M.roll(x, 1, axis=True)",
    "M.tile(x, (True, 2))", "M.as_strided(x, (2,), (True,))", "M.repeat(x, 2, axis=True)",
    "M.fft.fft(x, axis=True)", "M.linalg.norm(x, axis=True)", "M.diff(x, axis=True)",
])
def test_a_bool_axis_is_the_int_it_stands_for(mlx, call):
    """MLX's binding reads True as the axis 1 (and False as 0), in the methods and the
    functions alike, where streamlet refused a bool axis with TypeError."""
    _same(mlx, lambda M: eval(call, {"M": M, "x": eval(_X, {"M": M})}))


@pytest.mark.parametrize("call", [
    "x.var(correction=1)", "x.std(correction=1)", "x.var(ddof=0, correction=1)",
    "x.var(ddof=2, correction=1)", "x.std(ddof=1, correction=0)", "x.var(correction=None)",
    "x.var(ddof=1, correction=None)", "x.std(correction=-1)", "x.var(correction=True)",
    "x.var(0, True, correction=1)", "x.std(axis=1, correction=2)",
    "M.var(x, correction=1)", "M.std(x, 1, False, 0, correction=1)",
])
def test_var_and_std_take_correction(mlx, call):
    """`correction=`, the array API's name for ddof, replaces ddof when it is given."""
    _same(mlx, lambda M: eval(call, {"M": M, "x": eval(_X, {"M": M})}))


@pytest.mark.parametrize("call", [
    "x.transpose(())", "M.array([[[1]]]).transpose(())", "M.array([2]).transpose(())",
])
def test_transpose_of_no_axes_given_explicitly(mlx, call):
    """`a.transpose(())` is a permutation of no axes (refused for an n-d array), where
    streamlet read it as `a.transpose()`, every axis reversed."""
    _same(mlx, lambda M: eval(call, {"M": M, "x": eval(_X, {"M": M})}))


@pytest.mark.parametrize("call", [
    "x.reshape(np.array([3, 2]))", "x.reshape(np.array([6]))", "x.reshape(np.array([-1, 3]))",
    "x.transpose(np.array([1, 0]))",
])
def test_a_shape_given_as_one_numpy_array(mlx, call):
    """A NumPy array as the one shape argument: streamlet compared it with () (NumPy's
    elementwise comparison raised ValueError)."""
    _same(mlx, lambda M: eval(call, {"M": M, "np": np, "x": eval(_X, {"M": M})}))


@pytest.mark.parametrize("call", [
    "M.zeros((0,)).argmax((0,))", "M.zeros((2, 0, 3)).argmin(axis=[0, 1])",
    "M.zeros((0,)).argmin(axis='a')", "M.zeros((0, 2)).argmax(1.0, True)",
    "M.argmax(M.zeros((0,)), (0,))",
])
def test_argmax_of_an_empty_array_checks_the_axis_type_first(mlx, call):
    """An axis that is no int is a TypeError before the empty array's ValueError."""
    _same(mlx, lambda M: eval(call, {"M": M}))
