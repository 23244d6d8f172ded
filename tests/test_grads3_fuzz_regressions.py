"""Cases a second differential fuzz of grad, value_and_grad, vjp and jvp (and their
compositions) against MLX 0.32.4 found, over scans, sorts, indexing and updates,
reductions, shape ops, where and powers: the result (values, dtype, shape, or the
error's type) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

from parity import assert_close_outcome, assert_same_bits


_INDICES = {
    "argsort": lambda M, x: M.argsort(x, axis=1),
    "argmax": lambda M, x: M.argmax(x, axis=1),
    "argmin": lambda M, x: M.argmin(x),
    "floor": lambda M, x: (M.abs(M.floor(x)) % 2).astype(M.int32),
    "sign": lambda M, x: M.abs(M.sign(x)).astype(M.uint32),
    "isinf": lambda M, x: M.isinf(x).astype(M.int32),
    "not": lambda M, x: M.logical_not(x).astype(M.int32),
    "searchsorted": lambda M, x: M.searchsorted(M.array([0.0, 1.0, 2.0]), x) % 2,
}


@pytest.mark.parametrize("index", sorted(_INDICES))
@pytest.mark.parametrize("gather", ["take", "take_along_axis", "getitem", "put_along_axis"])
def test_jvp_through_indices_computed_from_the_primals_raises(mlx, index, gather):
    """A gather or scatter reading indices that depend on the primals refuses the jvp with
    MLX's ValueError (the tangent went through silently; the vjp already refused)."""
    def program(M):
        def f(x):
            i = _INDICES[index](M, x)
            if gather == "take":
                return M.take(x, i)
            if gather == "getitem":
                return x[i]
            i = i.reshape(-1, 1) if i.ndim == 1 else i
            i = i.reshape(1, 1) if i.ndim == 0 else i
            if gather == "take_along_axis":
                return M.take_along_axis(x, i, axis=1)
            return M.put_along_axis(x, i, M.array(5.0), axis=1)
        x = M.array([[3.0, 1.5, 2.0], [0.0, 5.0, -1.0]])
        return M.jvp(f, [x], [M.ones((2, 3))])[1]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("shape, axis", [((2, 1), 1), ((1, 1), None), ((1, 3), 0), ((), None)])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_an_arg_reduction_over_one_element_is_a_constant(mlx, shape, axis, op):
    """MLX's argmax over an axis of length one is zeros that do not depend on the input, so
    an index taken from them does not refuse the gradient (streamlet's vjp raised)."""
    x = np.arange(1.0, 1.0 + np.prod(shape, dtype=int)).reshape(shape).astype(np.float32)

    def program(M):
        f = lambda x: M.take(x, getattr(M, op)(x, axis=axis)) * 3  # noqa: E731
        t = M.ones(shape)
        return [M.grad(lambda x: f(x).sum())(M.array(x)), M.jvp(f, [M.array(x)], [t])[1][0],
                getattr(M, op)(M.array(x), axis=axis, keepdims=bool(shape))]  # MLX: 0-d
        # with keepdims raises "cannot create std::vector larger than max_size()"
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("index", [(), (Ellipsis,), (slice(None),), (slice(0, 2), slice(None)),
                                   (None, slice(-5, 5)), (slice(None), slice(0, 3, 1))])
@pytest.mark.parametrize("method", ["multiply", "divide", "maximum", "minimum"])
def test_an_update_of_all_of_the_array_is_the_elementwise_op(mlx, index, method):
    """Slices that pick every element: MLX combines the arrays elementwise, so multiply,
    divide, maximum and minimum have a jvp (streamlet raised) and maximum's ties send the
    cotangent to the value, not to both."""
    def program(M):
        x, u = M.array([[1.0, 2.0, 3.0], [4.0, 2.0, 6.0]]), M.array(2.0)
        f = lambda x, u: getattr(x.at[index], method)(u)  # noqa: E731
        c = M.array([[1.0, 10, 100], [1000, 1e4, 1e5]])
        return M.jvp(f, [x, u], [M.ones((2, 3)), M.array(0.5)])[1] + \
            M.vjp(f, [x, u], [c])[1]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("index", [(0,), (slice(0, 1, 2),), (-1, slice(None))])
def test_an_update_of_a_one_row_array_through_an_int_or_a_long_step(mlx, index):
    def program(M):
        x, u = M.array([[1.0, 2.0, 3.0]]), M.array([2.0, 0.5, 4.0])
        return M.jvp(lambda x, u: x.at[index].multiply(u), [x, u],
                     [M.ones((1, 3)), M.ones(3)])[1]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("x, ddof", [([1.0, 3.0], 2), ([1.0, 3.0], 5),
                                     ([[1.0, 3.0, 5.0], [2.0, 2.0, 2.0]], 3)])
def test_gradient_of_a_variance_without_degrees_of_freedom_is_nan(mlx, op, x, ddof):
    """ddof >= N: MLX's variance is scaled by inf and its gradient is NaN (streamlet's was
    finite, divided by max(N - ddof, 1))."""
    def program(M):
        a = M.array(x)
        f = lambda a: getattr(M, op)(a, axis=-1, ddof=ddof)  # noqa: E731
        return [M.vjp(f, [a], [M.ones(a.shape[:-1])])[1][0],
                M.grad(lambda a: f(a).sum())(a),
                M.compile(M.grad(lambda a: f(a).sum()), shapeless=True)(a)]
    assert_same_bits(mlx, program)


def test_where_masks_its_tangents_by_multiplying(mlx):
    """MLX multiplies each tangent by its mask: a NaN or inf tangent of the branch not taken
    gives NaN (the jvp agrees with the vjp), signed zeros as MLX's."""
    def program(M):
        c = M.array([True, False, True, False])
        x, y = M.array([0.0, 2.0, 3.0, 4.0]), M.array([5.0, 6.0, 7.0, 8.0])
        tx = M.array([-0.0, -3.0, M.inf, M.nan])
        ty = M.array([-4.0, -0.0, 0.0, -0.0])
        return [M.jvp(lambda x: M.where(c, x, y), [x], [tx])[1][0],
                M.jvp(lambda y: M.where(c, x, y), [y], [ty])[1][0],
                M.jvp(lambda x, y: M.where(c, x, y), [x, y], [tx, ty])[1][0],
                M.jvp(lambda x: M.where(x > 2, x, 1.0), [x], [tx])[1][0],
                M.jvp(lambda x: M.where(c, M.log(x) * x, 0.0), [x], [M.ones(4)])[1][0]]
    assert_same_bits(mlx, program)


def test_where_masks_its_cotangent_by_multiplying(mlx):
    def program(M):
        c = M.array([True, False, True, False])
        x, y = M.array([1.0, 2.0, 3.0, 4.0]), M.array([5.0, 6.0, 7.0, 8.0])
        ct = M.array([-0.0, -3.0, M.inf, M.nan])
        return M.vjp(lambda x, y: M.where(c, x, y), [x, y], [ct])[1] + \
            M.vjp(lambda x, y: M.where(c[:, None], x, y),
                  [x[:1].astype(M.float16), y.reshape(1, 4)], [M.ones((4, 4))])[1]
    assert_same_bits(mlx, program)


def test_partition_sends_the_gradient_back_where_it_put_each_element(mlx):
    """partition's rules used argpartition's arrangement, which NumPy may make differently
    from its partition's (the gradient went to the wrong elements)."""
    x = np.array([1.6310003, 0.07978524, 0.5823378, 0.60231674], np.float32)

    def program(M):
        a = M.array(x).astype(M.float16)
        w = M.array([1.0, 2.0, 3.0, 4.0])
        f = lambda a: (M.sort(M.partition(a, 1)) * w).sum()  # noqa: E731
        return [M.grad(f)(a), M.jvp(lambda a: M.sort(M.partition(a, 1)), [a], [w.astype(a.dtype)])[1][0]]
    assert_same_bits(mlx, program)


def test_partition_gradients_over_random_programs(mlx):
    rng = np.random.default_rng(5)
    for _ in range(60):
        n, dtype = int(rng.integers(1, 9)), str(rng.choice(["float16", "float32"]))
        k = int(rng.integers(-n, n))
        x, w = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        assert_close_outcome(mlx, lambda M: M.grad(lambda a: (M.sort(M.partition(a, k)) *
                                                             M.array(w)).sum())(
            M.array(x).astype(getattr(M, dtype))), rtol=1e-2)


@pytest.mark.parametrize("e", [2.0, 3.0, 1.0, 0.0])
def test_second_derivative_of_a_power_of_a_negative_base(mlx, e):
    """The jvp of a fused derivative node gave its exponent a zero tangent, which met the
    NaN partial in the exponent (log of a negative base): jvp of grad was NaN."""
    def program(M):
        g = M.grad(lambda a: a ** e)
        return [M.jvp(g, [M.array(-2.0)], [M.array(1.0)])[1][0],
                M.jvp(lambda x: M.vjp(lambda a: M.power(a, M.array(e)), [x],
                                      [M.ones(3) * 1.5])[1][0], [M.array([-2.0, -0.5, 3.0])],
                      [M.ones(3)])[1][0]]
    assert_close_outcome(mlx, program)


@pytest.mark.parametrize("x, e", [(0.0, 0.5), (0.0, -1.0), (-0.0, 0.5), (-0.0, -1.0),
                                  (-0.0, 3.0)])
def test_second_derivative_of_a_power_at_zero(mlx, x, e):
    """The vjp of a fused derivative node sent a zero cotangent back through the op's
    output, an input its formula does not read, and on through the op: 0 * inf was NaN
    where MLX's second derivative is infinite."""
    assert_same_bits(mlx, lambda M: M.grad(M.grad(lambda a: a ** e))(M.array(x)))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_second_derivative_through_an_infinite_product(mlx, op):
    def program(M):
        def g(y):
            return (getattr(M, op)(y, axis=-1, inclusive=False) * y).sum()
        return M.grad(lambda x: (M.grad(g)(x) * x).sum())(M.array([[2.0], [3.0]]))
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("shape,axis", [((0,), 0), ((0, 3), 1), ((3, 0), 1)])
@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_extreme_scan_derivatives_of_empty_arrays(mlx, op, inclusive, shape, axis):
    """cummax/cummin's vjp of an empty array (and its vjp again) is empty, as MLX's; the
    rule's scatter refused an empty axis."""
    def program(M):
        x = M.array(np.zeros(shape, np.float32))

        def f(y):
            return getattr(M, op)(y, axis=axis, inclusive=inclusive)

        def first(y):
            return M.vjp(f, [y], [M.ones_like(y)])[1][0]
        return first(x), M.vjp(first, [x], [M.ones_like(x)])[1][0]
    assert_close_outcome(mlx, program)
