"""Cases a random-program fuzzer (straight-line programs of 3-12 ops on random shapes and
dtypes, run eagerly, compiled, shapeless, under grad/vjp/jvp and vmap) found against MLX
0.32.4: the result (values, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

from parity import assert_close_outcome, assert_same, assert_same_bits

X = np.array([1.5, -0.0139, 2.0], np.float32)
T = np.array([0.25, 3.0, -1.0], np.float32)


@pytest.mark.parametrize("dtype", ["bool_", "int32", "float16"])
def test_jvp_of_imag_of_a_real_array_keeps_its_dtype(mlx, dtype):
    """The tangent of imag of a real array is zeros of its dtype (a bool input gave int32,
    a negative float tangent -0)."""
    assert_same_bits(mlx, lambda M: M.jvp(lambda a: M.imag(a.astype(getattr(M, dtype))),
                                          [M.array(X)], [M.array(T)])[1][0])


def test_nothing_flows_back_through_imag_of_a_real_array(mlx):
    """MLX's imag of a real array is zeros_like: a gradient does not reach the gather by
    argsort's indices behind it (which raised "Cannot calculate VJP with respect to
    indices")."""
    assert_same_bits(mlx, lambda M: M.grad(lambda a: M.imag(M.take_along_axis(
        a, M.argsort(a), axis=0)).sum())(M.array(X)))


@pytest.mark.parametrize("base, exponent", [("int8", "bool_"), ("uint32", "bool_"),
                                            ("int8", "int8"), ("int32", "bool_")])
def test_jvp_of_an_integer_power_computes_in_the_result_dtype(mlx, base, exponent):
    """power(int8, bool): the exponent is promoted before the rule (its `y - 1` made the
    tangent int32, or int64 for uint32)."""
    def program(M):
        e = M.array([True, False, True]).astype(getattr(M, exponent))
        return M.jvp(lambda a: M.power(a.astype(getattr(M, base)), e), [M.array(X)],
                     [M.array(T)])[1][0]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("case", [
    lambda M, x, y: M.grad(lambda a: (a / y).sum())(x),
    lambda M, x, y: M.grad(lambda b: (x / b).sum())(y.astype(M.float16)),
    lambda M, x, y: M.grad(lambda a: M.arctan2(a, y).sum())(x),
    lambda M, x, y: M.jvp(lambda a: a / y, [x], [x])[1][0],
    lambda M, x, y: M.grad(lambda a: M.nan_to_num(a / y).sum())(M.array(-0.0)),
])
def test_derivatives_with_a_half_precision_operand_compute_in_the_result_dtype(mlx, case):
    """A float32 divided by a bfloat16: the derivative 1 / y is float32, as MLX promotes y
    first (it was rounded to bfloat16, 0.2% off near |1/y| = 72)."""
    assert_same_bits(mlx, lambda M: case(M, M.array(X), M.array(X).astype(M.bfloat16)))


@pytest.mark.parametrize("shape, k, axis", [((1, 3), 3, 1), ((1,), 1, 0), ((2, 0), 0, 1)])
def test_topk_of_the_whole_axis_compiles_shapeless(mlx, shape, k, axis):
    """topk with k the axis' length is the input itself, so a shapeless trace takes it (it
    raised "cannot be compiled shapeless")."""
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)[..., ::-1].copy()
    assert_same(mlx, lambda M: M.compile(lambda a: M.topk(a, k, axis=axis) * 2,
                                         shapeless=True)(M.array(x)))


def test_topk_of_the_whole_axis_is_a_new_handle(mlx):
    """The input itself, but a new array: writing into the result leaves the input as it
    was, as in MLX."""
    def program(M):
        a = M.array([3.0, 1.0, 2.0])
        t = M.topk(a, 3)
        t[0] = 9.0
        return a, t
    assert_same(mlx, program)


@pytest.mark.parametrize("case", [
    lambda M, x: M.where(x > 0, x.astype(M.bfloat16)[:1], 1e-3),
    lambda M, x: M.where(x > 0, 1, 2),
    lambda M, x: M.where(x > 0, x.astype(M.float16), 2),
    lambda M, x: M.pad(M.where(x > 0, M.array([0.5], M.bfloat16), 1e-3), 1, constant_values=2),
    lambda M, x: M.where(x > 0, -x, x),
    lambda M, x: M.where(x > 0, x < 0, 3),
    lambda M, x: M.where(x > 0, x.astype(M.int8), 2.5),
    lambda M, x: M.where(x > 0, x.astype(M.bfloat16), x.astype(M.float16)),
])
def test_jvp_of_where_through_its_condition_is_in_the_result_dtype(mlx, case):
    """A tangent reaching `where` only through its condition adds zeros of the result's
    dtype (they were the condition tangent's float32, promoting a bfloat16 result); a
    branch promoted inside the op has its tangent cast to the result's dtype (a bool
    branch beside an int kept its float tangent)."""
    assert_same_bits(mlx, lambda M: M.jvp(lambda a: case(M, a), [M.array(X)], [M.array(T)])[1][0])


@pytest.mark.parametrize("op", ["isnan", "isposinf", "isneginf", "isinf", "isfinite"])
@pytest.mark.parametrize("dtype", ["int32", "uint32", "bool_", "float16"])
def test_jvp_of_a_float_test_of_integers_is_bool(mlx, op, dtype):
    """isnan of an integer array is a constant in MLX: its tangent is bool zeros (the
    integer tangent came through); imag of a real array is MLX's zeros_like."""
    def program(M):
        f = lambda a: getattr(M, op)(a.astype(getattr(M, dtype)))  # noqa: E731
        return [M.jvp(f, [M.array(X)], [M.array(T)])[1][0],
                M.jvp(lambda a: M.imag(a.astype(getattr(M, dtype))) + 1, [M.array(X)],
                      [M.array(T)])[1][0]]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("shape, widths", [((2, 0), 1), ((0,), (1, 2)), ((4, 4, 0), (1, 2))])
def test_gradient_of_an_edge_pad_of_an_empty_array(mlx, shape, widths):
    """Zeros of the input's shape (NumPy's edge pad of the reads raised ValueError)."""
    def program(M):
        x = M.zeros(shape)
        out = M.pad(x, widths, mode="edge")
        return [M.grad(lambda a: (M.pad(a, widths, mode="edge") * 2).sum())(x),
                M.vjp(lambda a: M.pad(a, widths, mode="edge"), [x], [M.ones(out.shape)])[1][0]]
    assert_same_bits(mlx, program)


@pytest.mark.parametrize("spec, operand", [("a,dc->acd", 0), ("a,b->ab", 0), ("ab,cb->ac", 1),
                                           ("ab,bc->ac", 0)])
def test_gradient_of_a_complex_einsum_conjugates_the_other_operands(mlx, spec, operand):
    """As the products MLX builds an einsum from: the cotangent meets conj of the other
    operands (real(z**2 * b**2) with z**2 imaginary has gradient 0 in b, not 2b|z|**2)."""
    def program(M):
        z = M.array([[0.7 + 0.7j, 0.3 - 0.3j], [1j, 0.5]])
        y = M.array([[0.5, 1.5], [-1.0, 2.0]])
        ins = {"a,dc->acd": (z[0], y), "a,b->ab": (z[0], y[0]), "ab,cb->ac": (z, y),
               "ab,bc->ac": (z, y)}[spec]

        def f(v):
            args = list(ins)
            args[operand] = v
            return M.real(M.square(M.einsum(spec, *args)) * (1 + 2j)).sum()
        return M.grad(f)(ins[operand])
    assert_close_outcome(mlx, program)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape, widths", [((2,), (5, 5)), ((1,), (2, 3)), ((3, 2), [(1, 2), (0, 3)]),
                                           ((2, 3, 1), [(2, 0), (1, 1), (0, 2)])])
def test_vjp_of_an_edge_pad_sums_as_mlx(mlx, dtype, shape, widths):
    """Each axis' pad cells summed onto its edge row, the last axis first, high side before
    low (a scatter-add of every read rounded each addition in half precision)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    out = np.pad(x, widths, mode="edge").shape
    c = rng.standard_normal(out).astype(np.float32)
    assert_same_bits(mlx, lambda M: M.vjp(
        lambda a: M.pad(a, widths, mode="edge"), [M.array(x).astype(getattr(M, dtype))],
        [M.array(c).astype(getattr(M, dtype))])[1][0])


@pytest.mark.parametrize("spec, x_shape, y_shape", [("c,cd->d", (1,), (5, 3)),
                                                    ("ab,bd->ad", (1, 1), (5, 3)),
                                                    ("ab,bc->ac", (2, 1), (4, 3)),
                                                    ("ab,cb->ac", (2, 1), (4, 3))])
def test_gradient_of_an_einsum_broadcasting_an_index_of_length_one(mlx, spec, x_shape, y_shape):
    """An index of length one in one operand broadcast against a longer one in the other:
    each gradient has its operand's shape (the longer operand's came out of length one)."""
    def program(M):
        x = M.arange(int(np.prod(x_shape))).reshape(x_shape).astype(M.float32) + 1
        y = M.arange(int(np.prod(y_shape))).reshape(y_shape).astype(M.float32) - 4

        def f(p, q):
            out = M.einsum(spec, p, q)
            return (out * M.arange(out.size).reshape(out.shape)).sum()
        return M.grad(f, argnums=(0, 1))(x, y)
    assert_same_bits(mlx, program)


def test_gradient_of_an_integer_einsum(mlx):
    """MLX builds the einsum of integers from products and sums, which take them: the
    gradient through one is the integer cotangent's (the einsum kernel refused it)."""
    x = np.array([[0.5, 1.0], [2.0, -1.0]], np.float32)
    assert_same_bits(mlx, lambda M: M.grad(lambda a: M.einsum(
        "ab,cd->abcd", a.astype(M.int32), a.astype(M.int32) * 3).astype(M.float32).sum())(
        M.array(x)))


def test_vjp_of_imag_of_a_complex_array_has_signed_zeros_as_mlx(mlx):
    """The cotangent times conj(-i) = +i: a real cotangent's real part stays +0 (conj of
    Python's -1j, -0-1j, made it -0)."""
    assert_same_bits(mlx, lambda M: [M.vjp(M.imag, [M.array([1 + 2j, -0.5 + 1j])], [c])[1][0]
                                     for c in (M.array([1.0, -2.0]), M.array([-0.0, 0.0]))])
