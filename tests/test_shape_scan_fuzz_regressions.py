"""Cases a differential fuzz of the shape, scan, sort and reduction ops (random shapes,
0-sized and 0-d included, every dtype, axes negative or out of range, keyword mixes)
against MLX 0.32.4 found: the result (value bit for bit, dtype, shape, or the error's
type) is MLX's."""
from __future__ import annotations

import math

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same_bits

inf, nan = math.inf, math.nan


@pytest.mark.parametrize("start, end", [(1, 2), (-3, -1), (-5, 0), (0, 7), (2, 1), (3, 5),
                                        (-4, -5)])
def test_flatten_clamps_axes_out_of_range(mlx, start, end):
    """MLX clamps start_axis up to 0 and end_axis down to the last axis, then refuses
    start > end (ValueError): flatten(a, 1, 2) of a 2-D array was an AxisError."""
    assert_same_bits(mlx, lambda M: M.flatten(M.zeros((2, 3)), start, end, stream=M.cpu))


def test_unstack_of_a_scalar_is_an_axis_error(mlx):
    assert_same_bits(mlx, lambda M: M.unstack(M.array(1.0), axis=0, stream=M.cpu))


def test_repeat_checks_the_axis_before_the_count(mlx):
    assert_same_bits(mlx, lambda M: M.repeat(M.zeros((2, 2)), -1, axis=3, stream=M.cpu))


@pytest.mark.parametrize("shift, axis", [((-2, -7), (1,)), ((1, -1), (0,)), ((-4,), (0, 0, 1)),
                                         ((5, 1), ()), ((2, 3, 4), (1, 0))])
def test_roll_pairs_shifts_and_axes_as_mlx(mlx, shift, axis):
    """A shift tuple along an int axis adds up; along a tuple of axes, shift i goes with
    axis i (extra shifts ignored, too few a ValueError); no axes: the array itself.  The
    axes were repeated to fit the shifts (a roll by -9 for MLX's -2)."""
    assert_same_bits(mlx, lambda M: M.roll(M.reshape(M.arange(24), (2, 3, 4)), shift, axis,
                                stream=M.cpu))


@pytest.mark.parametrize("n, m", [(-1, 3), (2, -1), (-3, None), (-2, -2)])
def test_tri_of_negative_sizes_is_empty(mlx, n, m):
    assert_same_bits(mlx, lambda M: M.tri(n, m, stream=M.cpu))


@pytest.mark.parametrize("width", [[(1,), (2,)], [(1,)], ((1,),), [(1, 2, 3)], (1, 2, 3)])
def test_pad_width_types_refused_as_mlx(mlx, width):
    """pad_width is an int, one or two ints, or a list of (low, high) pairs: others are a
    TypeError (a list of 1-tuples was taken)."""
    assert_same_bits(mlx, lambda M: M.pad(M.zeros((2, 3)), width, stream=M.cpu))


@pytest.mark.parametrize("shape, width, mode", [
    ((), 2, "edge"), ((), (2,), "symmetric"), ((), [], "reflect"), ((0,), 1, "edge"),
    ((2, 0), [(1, 0), (1, 2)], "edge"), ((0, 0, 3), (0, 2), "edge"), ((0,), (1, 0), "edge")])
def test_pad_of_scalars_and_empty_arrays(mlx, shape, width, mode):
    """A 0-d array pads to itself, and an empty axis edge-pads with zeros when padded on
    both sides (on one side: a ValueError); NumPy's pad refused both."""
    assert_same_bits(mlx, lambda M: M.pad(M.zeros(shape, M.int32) + 3, width, mode, stream=M.cpu))


@pytest.mark.parametrize("dtype, value", [
    ("int32", "M.array([[7, 8], [9, 1]])"), ("uint8", "-2.7 + 1j"),
    ("float16", "-2.7 + 1j"), ("int16", "M.array([5.5, 6.0], M.float16)")])
def test_pad_constant_values_cast_as_mlx(mlx, dtype, value):
    """MLX pads with the first element of a constant_values array of any shape (it was a
    ValueError), and casts a complex scalar (its real part) to the dtype
    (it was a TypeError)."""
    assert_same_bits(mlx, lambda M: M.pad(M.array([1, 2], getattr(M, dtype)), 1,
                               constant_values=eval(value), stream=M.cpu))


def test_pad_constant_value_out_of_the_dtypes_range(mlx):
    """An int constant_values that the dtype cannot hold is MLX's ValueError (it was
    NumPy's OverflowError)."""
    assert_same_bits(mlx, lambda M: M.pad(M.array([1, 2], M.uint8), 1, constant_values=300, stream=M.cpu))


@pytest.mark.parametrize("a, lo, hi", [
    ("M.array([1, 2], M.uint8)", "0.5", "-2"),
    ("M.array([True, False])", "M.array([3], M.uint64)", "-2"),
    ("M.array([1, 5], M.int8)", "0.5", "300")])
def test_clip_scalar_bounds_take_the_inputs_dtype(mlx, a, lo, hi):
    """Each scalar bound is converted for `a` (MLX's to_arrays), not for the result of the
    first clip: -2 for a uint8 array overflows even after a float lower bound."""
    assert_same_bits(mlx, lambda M: M.clip(eval(a), eval(lo), eval(hi), stream=M.cpu))


@pytest.mark.parametrize("axis", [-1, 0, None])
def test_logsumexp_of_complex_is_composed(mlx, axis):
    """MLX composes a complex logsumexp (max + log(sum(exp(a - max))), the max where it is
    infinite) on every axis: the last axis gave inf+0.785j for MLX's inf+1j."""
    def fn(M):
        a = M.array(np.array([[complex(inf, 1), 2, 1 - 3j], [-1 + 2j, complex(-inf, 0), 0.5j]],
                             np.complex64))
        return M.logsumexp(a, axis, stream=M.cpu)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("reverse", [False, True])
def test_exclusive_scans_start_from_the_identity(mlx, reverse):
    """An exclusive scan combines the identity with the first element as MLX does: its
    exclusive cumsum of [-0.0, -0.0, ...] is [0, +0, ...] (the inclusive scan shifted
    kept -0.0)."""
    assert_same_bits(mlx, lambda M: M.cumsum(M.array([-0.0, -0.0, 1.0, 2.0, -0.0, -0.0]),
                                  reverse=reverse, inclusive=False, stream=M.cpu))


def test_logcumsumexp_keeps_a_lone_negative_zero(mlx):
    """MLX's logaddexp with -inf is the other operand exactly: [-inf, -0.0] scans to
    [-inf, -0.0] (NumPy's logaddexp gave +0.0)."""
    assert_same_bits(mlx, lambda M: M.logcumsumexp(M.array([-inf, -0.0, -inf, 1.0]), stream=M.cpu))


@pytest.mark.parametrize("values", [[0.0, -0.0, 1.33], [-0.0, 0.0, -0.0, 2.0],
                                    [0.5, 0.0, -0.0, 3.0, -1.0]])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_cummin_keeps_the_first_of_equal_zeros(mlx, values, dtype):
    """MLX's running minimum changes only on a smaller element: after 0.0, -0.0 leaves it
    0.0 (NumPy's minimum took the newer zero)."""
    def fn(M):
        d = getattr(M, dtype)
        a = M.array(np.array(values), d) if dtype == "float64" else M.array(values).astype(d)
        return M.cummin(a, stream=M.cpu)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [False, True])
def test_complex_cummax_cummin_compare_as_mlx(mlx, op, reverse, inclusive):
    """MLX's complex scans compare by real part, then imaginary part; a NaN loses every
    comparison, so it does not stay (NumPy's maximum kept it to the end)."""
    def fn(M):
        a = M.array(np.array([2.44 - 3.43j, 2.71 - 1j, complex(nan, -1.72), 2.42 + 2.04j,
                              -0.78 + 9.18j], np.complex64))
        return getattr(M, op)(a, reverse=reverse, inclusive=inclusive, stream=M.cpu)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("values", [
    [-2.53 + 3.46j, -5.09 + 2.22j, 2.02 + 1.35j],
    [complex(-inf, 1.48), -1.09 - 2.12j, 2.02 + 0.69j]])
@pytest.mark.parametrize("inclusive", [False, True])
def test_complex_logcumsumexp_adds_as_logaddexp(mlx, values, inclusive):
    """MLX's complex logcumsumexp is logaddexp step by step, so its imaginary parts stay in
    their branch (log(cumsum(exp)) wrapped 3.46 to -2.82), and logaddexp returns the
    larger operand when the smaller is -inf (it was NaN); the math itself to a few ulps."""
    ours, theirs = (np.array(M.logcumsumexp(M.array(np.array(values, np.complex64)),
                                            inclusive=inclusive, stream=M.cpu))
                    for M in (mx, mlx))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_complex_logcumsumexp_of_one_element_is_that_element(mlx):
    assert_same_bits(mlx, lambda M: M.logcumsumexp(M.array(np.array([complex(inf, 2), 1j], np.complex64)),
                                        stream=M.cpu))


def test_complex_logaddexp_of_an_infinite_operand(mlx):
    def fn(M):
        x = M.array(np.array([complex(-inf, 0), complex(-inf, 0), complex(1, 2)], np.complex64))
        y = M.array(np.array([complex(-inf, 1.48), 1 + 2j, complex(inf, 0)], np.complex64))
        return M.logaddexp(x, y, stream=M.cpu)
    assert_same_bits(mlx, fn)


@pytest.mark.parametrize("shape, axis, keepdims", [
    ((2, 1, 0, 1), [0, 3], False), ((2, 3), [], False)])
def test_median_of_empty_kept_axes_and_of_no_axes(mlx, shape, axis, keepdims):
    """An empty kept axis gives an empty median (NumPy's median raised when evaluated); no
    axes of a non-scalar array is MLX's ValueError (flatten of no axes), not the input."""
    assert_same_bits(mlx, lambda M: M.median(M.zeros(shape, M.int8), axis, keepdims, stream=M.cpu))
