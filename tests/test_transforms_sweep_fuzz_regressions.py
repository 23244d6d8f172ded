"""Cases a systematic differential sweep of vmap (random in_axes, out_axes, nested, empty
batches), jvp, vjp and grad over the op table against MLX 0.32.4 found: the result (values,
dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

from parity import assert_close_outcome, assert_same_bits


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape, axis, keepdims", [((0, 1), 1, True), ((0, 1, 1), (1, 2), False)])
def test_jvp_of_max_and_min_over_axes_of_one_element(mlx, op, shape, axis, keepdims):
    """Reduced axes of length one: the tangent itself (the argmax picking it raised beside an
    empty kept axis)."""
    t = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    assert_same_bits(mlx, lambda M: M.jvp(lambda x: getattr(M, op)(x, axis, keepdims), [
        M.zeros(shape)], [M.array(t)])[1])


@pytest.mark.parametrize("case", [
    lambda M: M.jvp(lambda x: M.median(x, axis=1, keepdims=True), [M.zeros((0, 1))],
                    [M.zeros((0, 1))])[1],
    lambda M: M.grad(lambda x: M.median(x, axis=(1, 2)).sum())(M.zeros((0, 2, 1))),
    lambda M: M.vmap(lambda x: M.median(x, axis=-1), in_axes=-4)(M.zeros((2, 0, 1, 1))),
])
def test_derivatives_of_a_median_beside_an_empty_kept_axis(mlx, case):
    """median's rules (its composite flattened the reduced axes with a reshape to -1, which
    cannot be inferred beside an empty kept axis)."""
    assert_same_bits(mlx, case)


@pytest.mark.parametrize("shape, axis, ddof", [((0, 2), 0, 0), ((0, 2), 0, 1), ((0, 1, 1), 0, 0),
                                               ((3, 4), 0, 3), ((3, 4), None, 12)])
def test_jvp_of_a_variance_without_degrees_of_freedom(mlx, shape, axis, ddof):
    """The count factor multiplies the summed tangent, as MLX's N / max(N - ddof, 0): NaN
    over no elements (the empty sum gave 0), +-inf where ddof >= N (it was NaN)."""
    rng = np.random.default_rng(1)
    x, t = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))

    def program(M):
        xs = M.zeros(shape) if 0 in shape else M.array(x)
        ts = M.zeros(shape) if 0 in shape else M.array(t)
        return M.jvp(lambda a: M.var(a, axis=axis, ddof=ddof), [xs], [ts])[1]
    assert_close_outcome(mlx, program)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (-1, True), ((0, 1), False)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_count_nonzero_counts_in_int32_under_jvp(mlx, axis, keepdims, dtype):
    """The tangent of count_nonzero is int32, as MLX casts the comparison before summing (a
    float tangent came out)."""
    x = np.array([[1.5, 0.0, 2.0], [0.0, 0.0, -1.0]])

    def program(M):
        a = M.array(x).astype(getattr(M, dtype))
        out = M.count_nonzero(a, axis=axis, keepdims=keepdims)
        return [out, *M.jvp(lambda a: M.count_nonzero(a, axis=axis, keepdims=keepdims), [a], [
            M.array(x * 0.5 + 1).astype(M.float32)])[1]]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("fn", [
    lambda M, x: M.trace(x),
    lambda M, x: M.diag(x).sum(),
    lambda M, x: M.diagonal(x, 1).sum(),
    lambda M, x: M.diag(M.diag(x)).sum(),
])
def test_grad_of_an_integer_input_through_a_composite_rule(mlx, fn):
    """An op whose rules trace a composite (diag, diagonal, trace) passes an integer
    input's cotangent on, as MLX (it was dropped: a zero gradient)."""
    x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert_same_bits(mlx, lambda M: M.grad(lambda a: fn(M, a))(M.array(x)))
