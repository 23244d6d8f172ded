"""Creation ops against MLX 0.32.4: arange's forms, dtypes and values, linspace,
astype's arguments, meshgrid, and shape dimensions beyond 32 bits."""
import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same

INF, NAN = float("inf"), float("nan")

ARANGE = [
    # MLX's values: start and start + step in the dtype, the difference added up
    lambda m: m.arange(0, 3, 0.2, dtype=m.int32),
    lambda m: m.arange(-1, -4, -0.9, dtype=m.int32),
    lambda m: m.arange(-1, -20, -1.2, dtype=m.int32),
    lambda m: m.arange(0.5, 3, 1, dtype=m.uint8),
    lambda m: m.arange(-3, 3, 1, dtype=m.uint8),
    lambda m: m.arange(0, 1000, 0.1),
    lambda m: m.arange(0, 100, 0.1, dtype=m.float16),
    lambda m: m.arange(0, 100, 0.1, dtype=m.bfloat16),
    lambda m: m.arange(0, 100, 0.1, dtype=m.float64),
    lambda m: m.arange(0, 5, 0.7, dtype=m.complex64),
    lambda m: m.arange(10, 0, -3, dtype=m.float16),
    # inferred dtypes: int64 beyond int32, bools count as ints with another bound
    lambda m: m.arange(2 ** 40, 2 ** 40 + 3),
    lambda m: m.arange(-(2 ** 31) - 1, -(2 ** 31) + 1),
    lambda m: m.arange(2 ** 31 - 3, 2 ** 31 - 1),
    lambda m: m.arange(stop=2, step=2 ** 40),
    lambda m: m.arange(2 ** 60 + 1, 2 ** 60 + 3),  # bounds are doubles: an empty range
    lambda m: m.arange(True, 3),
    lambda m: m.arange(1, 5, 1.0),
    lambda m: m.arange(10, dtype=m.complex64),
    # the two forms: arange(start, stop, step, dtype) and arange(stop, step, dtype)
    lambda m: m.arange(-3, step=-1),
    lambda m: m.arange(-3, None, -1),
    lambda m: m.arange(stop=2, step=0.5),
    lambda m: m.arange(5, 2, m.float16),
    lambda m: m.arange(stop=3),
    lambda m: m.arange(3, 1, stream=m.cpu),
    # infinite steps, empty ranges
    lambda m: m.arange(0, 1, INF),
    lambda m: m.arange(5, 1, INF),
    lambda m: m.arange(0, 10, 100),
    # errors
    lambda m: m.arange(start=1, step=2),
    lambda m: m.arange(),
    lambda m: m.arange(True),
    lambda m: m.arange(0, 5, dtype=m.bool_),
    lambda m: m.arange(2, 2, 0),
    lambda m: m.arange(NAN, 1, 5),
    lambda m: m.arange(0, 2, NAN),
    lambda m: m.arange(0, INF, INF),
    lambda m: m.arange(INF, 1, 5),
    lambda m: m.arange(0, 2 ** 31),
    lambda m: m.arange(0, 2 ** 40),
    lambda m: m.arange(np.int64(3)),
    lambda m: m.arange(np.float32(3)),
]


@pytest.mark.parametrize("case", range(len(ARANGE)))
def test_arange_matches_mlx(mlx, case):
    assert_same(mlx, ARANGE[case], what=f"arange case {case}")


LINSPACE = [
    lambda m: m.linspace(0, 10, 5, endpoint=False),
    lambda m: m.linspace(0, 1, 7, False, m.float16),
    lambda m: m.linspace(-2.7, -0.7, 7),
    lambda m: m.linspace(0, 1),
    lambda m: m.linspace(0.3, 1.7, 9, dtype=m.float64),
    lambda m: m.linspace(0.3, 1.7, 9, endpoint=False, dtype=m.float64),
    lambda m: m.linspace(0.1, 1, 1, dtype=m.float64),  # one sample: start, as float32
    lambda m: m.linspace(0.1, 1, 1, endpoint=False),
    lambda m: m.linspace(0, 10, 5, dtype=m.int32),
    lambda m: m.linspace(0, 1, 0),
    lambda m: m.linspace(0, 1, -1),
    lambda m: m.linspace(0, 1, 4, dtype=None),
]


@pytest.mark.parametrize("case", range(len(LINSPACE)))
def test_linspace_matches_mlx(mlx, case):
    assert_same(mlx, LINSPACE[case], what=f"linspace case {case}")


def test_linspace_endpoint_false_against_numpy():
    got = np.array(mx.linspace(-3, 5, 16, endpoint=False, dtype=mx.float64, stream=mx.cpu))
    np.testing.assert_allclose(got, np.linspace(-3, 5, 16, endpoint=False), rtol=1e-12)


def test_astype_takes_the_stream_positionally_as_the_method_does(mlx):
    assert_same(mlx, lambda m: m.array([1.5, -2.5]).astype(m.int32, m.cpu))
    s = mx.new_stream(mx.cpu)
    assert mx.array([1.5]).astype(mx.float16, s).dtype is mx.float16
    assert_same(mlx, lambda m: m.astype(m.array([1.5]), None))
    assert_same(mlx, lambda m: m.array([1.5]).astype(None))


def test_meshgrid_returns_a_tuple(mlx):
    for fn in (lambda m: m.meshgrid(m.arange(3)),
               lambda m: m.meshgrid(m.arange(3), m.arange(2)),
               lambda m: m.meshgrid(m.arange(3), m.arange(2), m.arange(2), sparse=True),
               lambda m: m.meshgrid(m.arange(2), m.arange(3), indexing="ij")):
        assert_same(mlx, fn)


TOO_BIG = [
    lambda m: m.zeros(2 ** 31),
    lambda m: m.zeros([2 ** 31]),
    lambda m: m.zeros(2 ** 62),
    lambda m: m.ones([-(2 ** 31) - 1]),  # overflow comes before the sign check
    lambda m: m.full(2 ** 31, 0.0),
    lambda m: m.full([3, 2 ** 31], 0.0),
    lambda m: m.zeros([-1]),
    lambda m: m.zeros((2 ** 16, 2 ** 16)).shape,  # 2**32 elements, dimensions that fit
    lambda m: m.reshape(m.zeros(4), [2 ** 31]),
    lambda m: m.broadcast_to(m.zeros(4), [2 ** 31, 1]),
    # computed dimensions (nothing this large is ever evaluated)
    lambda m: m.concatenate([m.zeros(2 ** 30)] * 3),
    lambda m: m.repeat(m.zeros(2 ** 30), 2),
    lambda m: m.tile(m.zeros(2 ** 30), 2),
    lambda m: m.kron(m.zeros(2 ** 16), m.zeros(2 ** 16)),
    lambda m: m.kron(m.array([]), m.array([1, 2])),
    # indices and slice bounds are 32-bit
    lambda m: m.arange(10)[:2 ** 31],
    lambda m: m.arange(10)[-(2 ** 31) - 1:],
    lambda m: m.arange(10)[::2 ** 31],
    lambda m: m.arange(10)[2 ** 32],
    lambda m: m.arange(10)[:np.int64(2 ** 32)],
    lambda m: m.arange(10)[2 ** 31 - 1:],
    lambda m: m.arange(10)[-(2 ** 31):],
    # integer arguments take NumPy integers but not floats or strings
    lambda m: m.topk(m.arange(4), np.int32(2)),
    lambda m: m.topk(m.arange(4), np.float32(2)),
    lambda m: m.topk(m.arange(4), "2"),
    lambda m: m.reshape(m.arange(4), [np.int32(2), 2]),
    lambda m: m.reshape(m.arange(4), [np.float32(2), 2]),
]


@pytest.mark.parametrize("case", range(len(TOO_BIG)))
def test_shape_dimensions_are_32_bit(mlx, case):
    assert_same(mlx, TOO_BIG[case], what=f"shape case {case}")


def test_overflow_names_the_dimension():
    with pytest.raises(OverflowError, match=str(2 ** 31)):
        mx.zeros((2, 2 ** 31))
    with pytest.raises(OverflowError, match=r"\[concatenate\].*" + str(3 * 2 ** 30)):
        mx.concatenate([mx.zeros(2 ** 30)] * 3)


@pytest.mark.parametrize("fn", [
    lambda m: m.zeros(2, dtype=None), lambda m: m.ones(2, dtype=None),
    lambda m: m.eye(2, dtype=None), lambda m: m.identity(2, dtype=None),
    lambda m: m.full((2,), 1.5, None), lambda m: m.random.randint(0, 1, dtype=None),
])
def test_dtype_none_is_the_default_dtype(mlx, fn):
    assert_same(mlx, fn)  # NumPy would read None as float64
