"""Regressions from a differential fuzz of streamlet.utils and array printing against MLX."""
import pytest

import streamlet.core as mx
from streamlet import utils

mlx_utils = pytest.importorskip("mlx.utils")


@pytest.mark.parametrize("pairs", [
    [("01", "a")],  # int("01") == 1: a list, padded
    [("-1", "a"), ("0", "b")],  # negative indices sort first and pad nothing
    [(" 1", "a"), ("+2", "b")],  # int() takes spaces and signs
    [("w.01.x", 1), ("w.3", 2)],
])
def test_unflatten_keys_int_parses(mlx, pairs):
    expected = mlx_utils.tree_unflatten(pairs)
    assert utils.tree_unflatten(pairs) == expected
    assert utils.tree_unflatten(dict(pairs)) == mlx_utils.tree_unflatten(dict(pairs))


def test_unflatten_leading_zero_key_is_a_list(mlx):
    assert utils.tree_unflatten([("01", "a")]) == [{}, "a"]


@pytest.mark.parametrize("a, b", [(None, None), ([None], [None]), ([], None), ({"k": None},
                                                                            {"k": {}})])
def test_merge_two_empty_subtrees_are_leaves(mlx, a, b):
    with pytest.raises(ValueError, match="no merge function"):
        mlx_utils.tree_merge(a, b)
    with pytest.raises(ValueError, match="no merge function"):
        utils.tree_merge(a, b)
    fn = lambda x, y: ("merged", x, y)  # noqa: E731
    assert utils.tree_merge(a, b, fn) == mlx_utils.tree_merge(a, b, fn)


@pytest.mark.parametrize("value", [complex(-0.0, -0.0), complex(1.5, -0.0),
                                   complex(0.0, -float("nan"))])
@pytest.mark.parametrize("precision", [-1, 2])
def test_complex_imaginary_sign(mlx, value, precision):
    with mx.printoptions(precision=precision), mlx.printoptions(precision=precision):
        for make in (lambda m: m.array(value, m.complex64),
                     lambda m: m.array([value, 1j], m.complex64)):
            assert repr(make(mx)) == repr(make(mlx))


def test_complex_negative_zero_imaginary():
    assert repr(mx.array(complex(1, -0.0))) == "array(1+-0j, dtype=complex64)"


@pytest.mark.parametrize("precision", [-2, -100])
def test_negative_precision_other_than_minus_one(mlx, precision):
    arrays = [lambda m: m.array([1.25, 1e20, -0.0]), lambda m: m.array(1 - 2j),
              lambda m: m.array([1.5], m.float16), lambda m: m.array(0.1, m.bfloat16)]
    with mx.printoptions(precision=precision), mlx.printoptions(precision=precision):
        for make in arrays:
            assert repr(make(mx)) == repr(make(mlx))
    assert repr(mx.array([1.25])) == "array([1.25], dtype=float32)"


@pytest.mark.parametrize("bad", [2.5, None, "3", 2**40, -2**31 - 1])
def test_precision_must_be_a_32_bit_int(mlx, bad):
    for m in (mx, mlx):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            m.set_printoptions(precision=bad)
        with pytest.raises(TypeError, match="incompatible function arguments"):
            with m.printoptions(precision=bad):
                pass
    assert mx.get_printoptions().precision == -1
