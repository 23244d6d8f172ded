"""Transforms compiled shapeless follow new shapes (cases a differential fuzzer found):
what the rules computed from the traced shapes (zeros to scatter a cotangent into, the
bounds of concatenate's pieces and split's, the shape a reshape's cotangent takes back,
the axes a broadcast cotangent is summed along) is not replayed at other shapes."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx

RNG = np.random.default_rng(11)


def _follows(fn, shapes, transform=None):
    """`transform(fn)` compiled shapeless, called at each of `shapes`, gives what the
    uncompiled `transform(fn)` gives (MLX raises or goes wrong in most of these cases)."""
    transform = transform or (lambda f: mx.grad(lambda x: (f(x) * mx.cos(f(x))).sum()))
    g = transform(fn)
    compiled = mx.compile(g, shapeless=True)
    for shape in shapes:
        x = mx.array(RNG.standard_normal(shape).astype(np.float32))
        got, want = np.array(compiled(x)), np.array(g(x))
        assert got.shape == want.shape, shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", [lambda x: x[:2], lambda x: x[1:],
                                lambda x: mx.take(x, mx.array([0, 1]), axis=0),
                                lambda x: x[mx.array([1, 0])], lambda x: x[0] * x])
def test_shapeless_gradients_of_slices_and_gathers(fn):
    _follows(fn, [(4, 2), (5, 2), (3, 3)])


@pytest.mark.parametrize("fn", [lambda x: mx.concatenate([x, 2 * x]),
                                lambda x: mx.concatenate([x, x[:1]]),
                                lambda x: mx.split(x, 2, axis=1)[0],
                                lambda x: mx.concatenate(mx.split(x, [1])[::-1])])
def test_shapeless_gradients_of_concatenate_and_split(fn):
    _follows(fn, [(3, 2), (4, 4), (2, 6)])


@pytest.mark.parametrize("fn", [lambda x: mx.split(x, [1])[1],
                                lambda x: mx.concatenate(mx.split(x, 2, axis=1)[::-1])])
def test_shapeless_split_follows_new_shapes(fn):
    _follows(fn, [(3, 2), (4, 4), (2, 6)], transform=lambda f: f)


@pytest.mark.parametrize("fn", [lambda x: mx.sin(x.reshape(-1)),
                                lambda x: mx.flatten(x) * mx.arange(12)])
def test_shapeless_gradient_of_reshape_takes_the_new_shape(fn):
    _follows(fn, [(3, 4), (4, 3), (2, 6)])


@pytest.mark.parametrize("shapes", [[(1,), (3,)], [(3,), (1,)]])
def test_shapeless_gradient_broadcast_along_other_axes(shapes):
    _follows(lambda x: x * mx.arange(3), shapes)


def test_shapeless_gradient_of_an_operand_broadcast_only_at_some_shapes():
    _follows(lambda x: mx.minimum(x, x.T.sum(axis=0)), [(1, 3), (3, 3), (1, 3)])


def test_shapeless_jvp_tangent_broadcast_to_the_new_shape():
    def f(x, y):
        return mx.jvp(lambda x: x + mx.stop_gradient(y), [x], [mx.ones_like(x)])[1][0]
    compiled = mx.compile(f, shapeless=True)
    for n in (3, 5):
        x, y = mx.array([2.0]), mx.arange(n, dtype=mx.float32)
        assert compiled(x, y).tolist() == f(x, y).tolist() == [1.0] * n


def test_forward_programs_are_traced_once_whatever_they_broadcast():
    traced = []
    f = mx.compile(lambda x, y: (traced.append(1), x * y)[1], shapeless=True)
    for shape in [(1, 3), (2, 3), (2, 1)]:
        f(mx.ones(shape), mx.ones((2, 3)))
    assert len(traced) == 1


@pytest.mark.parametrize("fn", [
    lambda x: mx.take_along_axis(x, mx.stop_gradient(mx.argmax(x, -1, keepdims=True)), -1),
    lambda x: mx.take_along_axis(x, mx.zeros((1, 2), mx.int32), 1),
])
def test_shapeless_gradient_of_take_along_axis_follows_new_shapes(fn):
    """Its cotangent is scattered through index arrays built for the traced shape: a
    replay at another shape traces again rather than reuse them."""
    _follows(fn, [(1, 3), (3, 3), (2, 4), (1, 3)])


def test_shapeless_jvp_of_scatter_into_an_array_without_tangent():
    def f(x, v):
        return mx.jvp(lambda v: mx.stop_gradient(x).at[mx.array([0])].add(v), [v],
                      [mx.ones_like(v)])[1][0]
    compiled = mx.compile(f, shapeless=True)
    for n in (3, 5, 2):
        x, v = mx.arange(n, dtype=mx.float32), mx.array([2.0])
        assert compiled(x, v).tolist() == f(x, v).tolist() == [1.0] + [0.0] * (n - 1)


SHAPELESS_NOW = [lambda x: mx.tile(x, (2, 1)), lambda x: mx.tile(x, 3),
                 lambda x: mx.pad(x, ((1, 0), (0, 2))), lambda x: mx.pad(x, 1, mode="edge"),
                 lambda x: mx.roll(x, 1, axis=0), lambda x: mx.roll(x, -2)]


@pytest.mark.parametrize("fn", SHAPELESS_NOW, ids=["tile", "tile-int", "pad", "pad-edge",
                                                   "roll", "roll-flat"])
def test_tile_pad_and_roll_compile_shapeless(fn):
    """Their shapes follow the input's; their gradients trace again where they read a
    shape (tile's split, pad's bounds)."""
    compiled = mx.compile(fn, shapeless=True)
    for shape in [(3, 4), (5, 2), (3, 4)]:
        x = mx.array(RNG.standard_normal(shape).astype(np.float32))
        np.testing.assert_array_equal(np.array(compiled(x)), np.array(fn(x)))
    _follows(fn, [(3, 4), (5, 2), (2, 3)])


@pytest.mark.parametrize("fn", [lambda x: mx.sort(x, axis=-1) * mx.arange(1, 1 + x.shape[-1]),
                                lambda x: mx.sort(x, axis=0)[:1],
                                lambda x: mx.put_along_axis(x, mx.zeros((1, 1), mx.int32),
                                                            mx.array(7.0), axis=0)],
                         ids=["sort", "sort-axis0", "put_along_axis"])
def test_sort_and_put_along_axis_compile_shapeless(fn):
    """put_along_axis (and through it sort's gradient) has a shape rule: its broadcast
    shape is worked out anew at each call's shapes."""
    compiled = mx.compile(fn, shapeless=True)
    for shape in [(3, 4), (5, 4), (3, 4)]:
        x = mx.array(RNG.standard_normal(shape).astype(np.float32))
        np.testing.assert_array_equal(np.array(compiled(x)), np.array(fn(x)))
    _follows(fn, [(3, 4), (5, 4), (2, 4)])
