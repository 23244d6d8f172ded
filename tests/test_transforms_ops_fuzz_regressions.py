"""Cases a differential fuzz of vmap, jvp, vjp and grad applied to many ops against MLX 0.32.4
found: the result (values, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

from parity import assert_close_outcome, assert_same_bits


@pytest.mark.parametrize("case", ["vjp", "jvp"])
def test_scatter_without_a_rule_raises_a_runtime_error(mlx, case):
    def program(M):
        f = lambda x, v: x.at[M.array([0, 0])].multiply(v)  # noqa: E731
        x, v = M.array([1.0, 2.0, 3.0]), M.array([2.0, 3.0])
        if case == "vjp":
            return M.vjp(f, [x, v], [x])[1]
        return M.jvp(lambda x, v: x.at[M.array([0])].maximum(v), [x, v[:1]], [x, v[:1]])[1]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("dtype", ["uint8", "int32"])
def test_jvp_of_a_variance_of_integers_keeps_the_float_tangent(mlx, op, dtype):
    """A rule derived from the vjp no longer casts the vjp to the integer input's dtype
    (the tangent was 0)."""
    assert_close_outcome(mlx, lambda M: M.jvp(lambda x: getattr(M, op)(x, axis=0), [
        M.array(np.array([[1, 3], [4, 2]], dtype))], [M.array([[0.5, -0.25], [1.0, 2.0]])])[1])


@pytest.mark.parametrize("op", ["prod", "max", "min"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool_"])
def test_jvp_of_a_reduction_of_integers_with_float_tangents(mlx, op, dtype):
    """The tangent of an integer reduction stays float, as MLX's (prod's was truncated)."""
    x = np.array([1, 2, 3]) if dtype != "bool_" else np.array([True, False, True])
    assert_close_outcome(mlx, lambda M: M.jvp(lambda x: getattr(M, op)(x), [
        M.array(x).astype(getattr(M, dtype))], [M.array([0.5, 1.0, 2.0])])[1])


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True),
                                            ((2, 0), False)])
def test_jvp_of_max_and_min_takes_the_first_extreme(mlx, op, axis, keepdims):
    """Ties: the tangent of the first element reaching the extreme, as MLX's argmax (it was
    the ties' average, from the vjp)."""
    x = np.random.default_rng(0).integers(0, 3, (3, 4, 2)).astype(np.float32)
    t = np.random.default_rng(1).standard_normal((3, 4, 2)).astype(np.float32)
    assert_same_bits(mlx, lambda M: M.jvp(lambda x: getattr(M, op)(x, axis, keepdims), [
        M.array(x)], [M.array(t)])[1])


@pytest.mark.parametrize("shape, axis", [((0, 4), -1), ((0, 4, 1), (1, 2))])
def test_gradients_of_prod_with_an_empty_kept_axis(mlx, shape, axis):
    def program(M):
        x = M.ones(shape)
        return M.jvp(lambda x: M.prod(x, axis), [x], [x])[1] + \
            M.vjp(lambda x: M.prod(x, -1), [x], [M.ones(shape[:-1])])[1]
    assert_same_bits(mlx, program)


def test_vmap_of_jvp_of_prod_over_an_empty_kept_axis(mlx):
    assert_same_bits(mlx, lambda M: M.vmap(lambda x, t: M.jvp(
        lambda x: M.prod(x, axis=-1), [x], [t])[1][0], in_axes=-1)(M.ones((0, 4, 2)),
                                                                  M.ones((0, 4, 2))))


@pytest.mark.parametrize("program", [
    lambda M: M.vmap(lambda b: M.inner(M.zeros((3, 0)), b), in_axes=-1)(M.zeros((3, 0, 2))),
    lambda M: M.vmap(lambda b: M.tensordot(M.zeros((3, 0)), b, axes=1),
                     in_axes=-1)(M.zeros((0, 4, 2))),
    lambda M: M.vmap(lambda x, t: M.jvp(lambda x: M.inner(M.ones((3, 0)), x), [x], [t])[1][0],
                     in_axes=(-1, -3))(M.ones((3, 0, 2)), M.ones((2, 3, 0))),
])
def test_batched_products_over_an_empty_contraction(mlx, program):
    """inner and tensordot batched with a contracted axis of length 0 (a reshape to -1 beside
    it raised)."""
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("op", ["all", "any"])
@pytest.mark.parametrize("shape, axis, keepdims", [((), None, False), ((1,), None, False),
                                                   ((2, 1), 1, False), ((2, 1), 1, True),
                                                   ((2, 3), (), False)])
def test_all_and_any_over_unit_axes_derive_as_a_cast(mlx, op, shape, axis, keepdims):
    """MLX's all/any over no axis or axes of length one is astype(bool): the cotangent comes
    back cast (1.0 where it is nonzero), the tangent is the tangent cast to bool."""
    x = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape) - 1

    def program(M):
        f = lambda x: getattr(M, op)(x, axis=axis, keepdims=keepdims)  # noqa: E731
        a = M.array(x)
        out = f(a)
        grad = M.grad(lambda a: (f(a) * M.full(out.shape, 0.7)).sum())(a)
        tangent = M.jvp(f, [a], [M.full(shape, 0.5)])[1][0]
        batched = M.vmap(M.grad(lambda a: (f(a) * 1.5).sum()))(M.stack([a, a + 1]))
        return grad, tangent, batched
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("dtype", ["uint8", "bool_"])
def test_derivatives_of_integer_inputs_are_taken_in_float(mlx, dtype):
    """The derivative of an op with an inexact result reads an integer input as that result's
    dtype, as MLX casts it first (erf's -x**2 wrapped around in uint8, and negating a bool
    raised)."""
    x = np.array([1, 2, 3]) if dtype != "bool_" else np.array([True, False, True])

    def program(M):
        a = M.array(x).astype(getattr(M, dtype))
        return M.jvp(M.erf, [a], [M.array([0.5, 1.0, 2.0])])[1]
    assert_close_outcome(mlx, program)


_PIECEWISE = {
    "argmax": lambda M, x: M.argmax(x, axis=0), "argmin": lambda M, x: M.argmin(x),
    "argpartition": lambda M, x: M.argpartition(x, 1), "not": lambda M, x: M.logical_not(x),
    "and": lambda M, x: M.logical_and(x, x), "or": lambda M, x: M.logical_or(x, True),
    "isinf": lambda M, x: M.isinf(x), "isfinite": lambda M, x: M.isfinite(x),
    "not+2": lambda M, x: M.logical_not(x) + 2, "gt+2": lambda M, x: (x > 1) + 2,
    "gt+int16": lambda M, x: (x > 1) + M.array(2, M.int16),
    "equal": lambda M, x: M.equal(x, 1.0),
}


@pytest.mark.parametrize("dtype, name", [
    *(("float32", n) for n in ["argmax", "argmin", "argpartition", "not", "and", "or",
                               "isinf", "isfinite", "not+2", "gt+2", "gt+int16"]),
    *(("int32", n) for n in ["argmax", "argpartition", "not", "and", "isinf", "gt+int16",
                             "equal"]),
    *(("bool_", n) for n in ["argmax", "argpartition", "gt+2", "equal"])])
def test_tangent_dtypes_of_piecewise_constant_ops(mlx, dtype, name):
    """The tangent's dtype as MLX's rules give it: uint32 for argmax, the tangent's for
    argpartition and comparisons, bool for the logical ops (their operands cast to bool), an
    operand's tangent cast where the operand is promoted."""
    x = np.array([1.5, -0.5, 2.0]) if dtype == "float32" else np.array([1, 0, 2])

    def program(M):
        a = M.array(x).astype(getattr(M, dtype))
        return M.jvp(lambda a: _PIECEWISE[name](M, a), [a], [a])[1]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("norm, axes, shapes", [
    ("rms_norm", ((0, 0), (None, 0)), ((3, 2, 4), (2, 3, 4))),
    ("rms_norm", ((None, 0), (0, -1)), ((2, 4), (3, 4, 2))),
    ("layer_norm", ((None, -1), (-1, -3)), ((2, 4, 2), (2, 4, 3)))])
def test_vmap_of_vmap_of_a_norm_with_a_batched_weight(mlx, norm, axes, shapes):
    """A weight batched by both vmaps keeps its inner batch axis (the rule reshaped it to
    (batch, 1, ..., 1, D), which raised)."""
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in shapes)

    def program(M):
        if norm == "rms_norm":
            f = lambda x, w: M.fast.rms_norm(x, w, 1e-5)  # noqa: E731
        else:
            f = lambda x, w: M.fast.layer_norm(x, None, w, 1e-5)  # noqa: E731
        inner = M.vmap(f, in_axes=axes[0])
        return M.vmap(inner, in_axes=axes[1])(M.array(x), M.array(w))
    assert_close_outcome(mlx, program)
