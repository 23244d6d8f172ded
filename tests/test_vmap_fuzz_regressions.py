"""Cases a differential fuzz of `mx.vmap` (over elementwise, reduction, sort, scan, shape,
indexing, product, conv, linalg and random ops, nested and mixed with grad, vjp and jvp)
against MLX 0.32.4 found: the values, dtypes, shapes or the error raised are MLX's."""
from __future__ import annotations

import pytest

import streamlet.core as mx
from parity import assert_same_bits


@pytest.mark.parametrize("vmapped", [False, True])
def test_conj_of_bool_is_bool(mlx, vmapped):
    """conj leaves a bool array's values bools (NumPy's conj made them int8)."""
    def fn(m):
        x = m.array([[True, False, True], [False, False, True]])
        return m.vmap(m.conj)(x) if vmapped else m.conj(x)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("case", [
    lambda m, a, i: m.take(a, i, axis=1),  # a batched index: the slice-by-slice loop
    lambda m, a, i: a[i],
    lambda m, a, i: m.take(a, i[None], axis=0),
])
def test_loop_rule_over_an_empty_batch(mlx, case):
    """An op batched slice by slice over a batch of size 0 gives its empty result."""
    assert_same_bits(mlx, lambda m: m.vmap(lambda a, i: case(m, a, i))(
        m.zeros((0, 2, 3)), m.zeros((0,), m.int32)))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape, axis", [((0, 3, 4), 0), ((0, 3, 4), -1), ((0, 1), None)])
def test_arg_reduction_over_an_empty_batch(mlx, op, shape, axis):
    """argmax/argmin over a batch of size 0 raise MLX's ValueError, but where each item
    reduces one element (empty indices, as MLX)."""
    assert_same_bits(mlx, lambda m: m.vmap(lambda a: getattr(m, op)(a, axis=axis))(
        m.zeros(shape)))


@pytest.mark.parametrize("case", [
    lambda m, a, b: m.outer(a[0], b[0]),
    lambda m, a, b: m.inner(a[0], b[0]),
    lambda m, a, b: m.tensordot(a, b.T, axes=[[0, 1], [1, 0]]),
])
def test_reshape_to_minus_one_over_an_empty_batch(mlx, case):
    """outer, inner and tensordot build a reshape with -1, which batched over a batch of
    size 0 keeps each item's traced shape (MLX's products give these shapes)."""
    assert_same_bits(mlx, lambda m: m.vmap(lambda a, b: case(m, a, b))(
        m.zeros((0, 2, 3)), m.zeros((0, 2, 3))))


def test_a_users_reshape_to_minus_one_over_an_empty_batch():
    """The same for the user's own reshape, where MLX 0.32.4 cannot infer the -1 and
    raises: the items' shape is known, so streamlet gives it."""
    out = mx.vmap(lambda a: mx.reshape(a, (3, -1)))(mx.zeros((0, 2, 3)))
    assert out.shape == (0, 3, 2)
