"""Cases a second differential fuzz of mx.random against MLX 0.32.4 found: the result (values
bit for bit, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import pytest

from parity import assert_same_bits


@pytest.mark.parametrize("op", [
    lambda M, s: M.random.uniform(shape=s, key=M.random.key(1)),
    lambda M, s: M.random.normal(s, key=M.random.key(1)),
    lambda M, s: M.random.randint(0, 5, s, key=M.random.key(1)),
    lambda M, s: M.random.gumbel(s, key=M.random.key(1)),
    lambda M, s: M.random.laplace(s, key=M.random.key(1)),
    lambda M, s: M.random.multivariate_normal(M.zeros((2,)), M.eye(2), s, key=M.random.key(1)),
])
@pytest.mark.parametrize("shape", [None, 3])
def test_shape_must_be_a_sequence(mlx, op, shape):
    """A shape of None or an int is a TypeError (MLX's binding takes Sequence[int])."""
    assert_same_bits(mlx, lambda M: op(M, shape))


@pytest.mark.parametrize("num", [True, 2.0, None])
def test_split_takes_an_int_number_of_keys(mlx, num):
    """split's num: a bool is an int (True gives one key), a float or None a TypeError."""
    assert_same_bits(mlx, lambda M: M.random.split(M.random.key(7), num))


@pytest.mark.parametrize("num", [lambda M: M.array(3), lambda M: 2**40, lambda M: "2"])
@pytest.mark.parametrize("op", ["split", "categorical"])
def test_key_and_sample_counts_read_as_int32_arguments(mlx, num, op):
    """split's num and categorical's num_samples as MLX's binding takes an int: a 0-d
    integer array is its value, beyond 32 bits or a string a TypeError (2**40 was built)."""
    assert_same_bits(mlx, lambda M: M.random.split(M.random.key(7), num(M)) if op == "split"
                     else M.random.categorical(M.zeros((2, 3)), num_samples=num(M),
                                               key=M.random.key(1)))


@pytest.mark.parametrize("shape, kw", [((0,), {"shape": (3,)}), ((1, 0), {"num_samples": 2}),
                                       ((0, 1), {"axis": 0, "num_samples": 0})])
def test_categorical_over_an_empty_axis_is_a_value_error(mlx, shape, kw):
    """An empty category axis raises argmax's ValueError at build time (was a RuntimeError)."""
    assert_same_bits(mlx, lambda M: M.random.categorical(M.zeros(shape), **kw, key=M.random.key(1)))


@pytest.mark.parametrize("num_samples", [2.0, 1.5])
def test_categorical_num_samples_must_be_an_int(mlx, num_samples):
    """A non-integer num_samples is a TypeError (2.0 was taken as 2)."""
    assert_same_bits(mlx, lambda M: M.random.categorical(M.zeros((2, 3)), num_samples=num_samples,
                                                      key=M.random.key(1)))


@pytest.mark.parametrize("loc, scale", [(1e30, None), (0.1, 0.0), (None, 1e-3), (-2.5, 0.1)])
def test_float64_normal_takes_python_floats_as_doubles(mlx, loc, scale):
    """A Python float loc/scale becomes a float64 directly, not through float32."""
    assert_same_bits(mlx, lambda M: M.random.normal((8,), M.float64, loc, scale, key=M.random.key(3),
                                                 stream=M.cpu))


def test_multivariate_normal_dtype_none_is_float32(mlx):
    """dtype=None means float32, as for the other draws (it was a ValueError)."""
    assert_same_bits(mlx, lambda M: M.random.multivariate_normal(
        M.array([1.0]), M.array([[1.0]]), (2,), None, key=M.random.key(0), stream=M.cpu))


@pytest.mark.parametrize("mean, cov", [(1.0, None), (True, None), (None, 2.0)])
def test_multivariate_normal_refuses_scalars_with_a_type_error(mlx, mean, cov):
    """A Python scalar mean or cov is a TypeError (it was a ValueError about dimensions)."""
    assert_same_bits(mlx, lambda M: M.random.multivariate_normal(
        M.zeros((2,)) if mean is None else mean, M.eye(2) if cov is None else cov,
        key=M.random.key(0)))


@pytest.mark.parametrize("index", [0.0, "a", None, slice(0, 1)])
def test_random_state_index_must_be_an_int(mlx, index):
    """Indexing mx.random.state with a non-integer is a TypeError (was an IndexError)."""
    assert_same_bits(mlx, lambda M: M.random.state[index])
