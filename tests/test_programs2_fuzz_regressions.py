"""Cases a second round of the random-program fuzzer (fft, linalg, conv, quantization,
random, scatter updates, views, integer ops; run eagerly, compiled, shapeless, under
grad/vjp/jvp, vmap (also with in_axes=1, out_axes=-1) and grad of vmap) found against MLX
0.32.4: the result (values, dtype, shape, or the error's type) is MLX's."""
from __future__ import annotations

import pytest

from parity import assert_close_outcome, assert_same


def _w(M, shape, phase=0.37):
    n = 1
    for d in shape:
        n *= d
    return M.reshape(M.cos(M.arange(n).astype(M.float32) * phase), shape)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("case", ["grad", "jvp", "vjp_scales"])
def test_derivatives_pass_through_quantize(mlx, case, bits):
    """MLX differentiates quantize through its scales and biases (the group's max and min;
    the packed integers have none): grad, vjp and jvp raised "has no vjp/jvp rule"."""
    def program(M):
        w = _w(M, (2, 64))
        q = lambda s: M.quantize(w * s, group_size=32, bits=bits)  # noqa: E731
        s = M.array(1.5)
        if case == "grad":
            return M.grad(lambda s: (M.dequantize(*q(s), group_size=32, bits=bits)
                                     * _w(M, (2, 64), 0.3)).sum())(s)
        if case == "jvp":
            return M.jvp(q, [s], [M.array(0.5)])[1]
        return M.vjp(lambda s: q(s)[1:], [s], [_w(M, (2, 2)), _w(M, (2, 2), 1.1)])[1]
    assert_close_outcome(mlx, program)


def test_jvp_of_quantize_in_half_precision(mlx):
    assert_close_outcome(mlx, lambda M: M.jvp(
        lambda w: M.quantize(w, group_size=64, bits=4)[1:],
        [_w(M, (2, 64)).astype(M.bfloat16)], [_w(M, (2, 64), 0.5).astype(M.bfloat16)])[1],
        rtol=1e-2)


@pytest.mark.parametrize("part", [0, 1, 2, "dequantize"])
def test_quantize_compiles_shapeless(mlx, part):
    """quantize and dequantize have shape rules (a shapeless compile raised "cannot be
    compiled shapeless")."""
    def program(M):
        def f(w):
            q = M.quantize(w, group_size=64, bits=4)
            return M.dequantize(*q, group_size=64, bits=4) if part == "dequantize" else q[part]
        return M.compile(f, shapeless=True)(_w(M, (3, 128)))
    assert_same(mlx, program)


@pytest.mark.parametrize("shape", [(2, 64), (3, 5, 64)])
def test_quantized_matmul_compiles_shapeless(mlx, shape):
    """quantized_matmul has a shape rule: one shapeless trace serves inputs of other
    shapes."""
    def program(M):
        q = M.quantize(_w(M, (4, 64)), group_size=64, bits=4)
        f = M.compile(lambda x: M.quantized_matmul(x, *q, group_size=64, bits=4),
                      shapeless=True)
        f(M.ones((2, 64)))
        return f(_w(M, shape, 0.3))
    assert_close_outcome(mlx, program)


@pytest.mark.parametrize("case", ["grad", "jvp"])
def test_nothing_flows_back_through_a_categorical_draw(mlx, case):
    """A draw from one distribution (an index, MLX's argmax of perturbed logits) passes no
    gradient and a zero tangent (it raised "The primitive categorical has no vjp rule")."""
    def program(M):
        x = M.array([[-0.5, -0.5, -1.0]])
        draw = lambda x: M.random.categorical(x, axis=1, key=M.random.key(1))  # noqa: E731
        if case == "grad":
            return M.grad(lambda x: (draw(x).astype(M.float32) * x.sum()).sum())(x)
        return M.jvp(draw, [x], [x])[1]
    assert_same(mlx, program)


def test_hadamard_transform_compiles_shapeless(mlx):
    """hadamard_transform keeps its input's shape (a shapeless compile raised); the scale
    stays the traced one."""
    def program(M):
        f = M.compile(lambda x: M.hadamard_transform(x * 2), shapeless=True)
        return [f(M.arange(8.0).reshape(2, 4)), f(M.arange(12.0).reshape(3, 4)),
                f(M.arange(8.0).reshape(1, 8))]
    assert_same(mlx, program)


def test_slice_by_an_array_start_compiles_shapeless(mlx):
    """mx.slice (starts read at run time) gives a block of its own size, so a shapeless
    trace takes it (it raised), and its gradient too."""
    def program(M):
        f = M.compile(lambda x: M.slice(x * 2, M.array([1]), [0], [2]), shapeless=True)
        g = M.compile(lambda x: M.grad(lambda y: M.slice(y, M.array([1]), [0], [2]).sum())(x),
                      shapeless=True)
        return [f(M.arange(4.0)), f(M.arange(5.0)), g(M.arange(4.0)), g(M.arange(5.0))]
    assert_same(mlx, program)


@pytest.mark.parametrize("case", ["grad", "jvp", "grad_vmap"])
def test_a_permutation_of_an_array_is_differentiable(mlx, case):
    """MLX's permutation of an array is a take: its gradient goes back by the inverse
    permutation (it raised "The primitive permutation_take has no vjp rule")."""
    def program(M):
        x = M.arange(6.0).reshape(2, 3)
        w = M.cos(M.arange(6.0)).reshape(2, 3)
        perm = lambda x: M.random.permutation(x, axis=1, key=M.random.key(0))  # noqa: E731
        if case == "grad":
            return M.grad(lambda x: (perm(x) * w).sum())(x)
        if case == "jvp":
            return M.jvp(perm, [x], [w])[1]
        return M.grad(lambda x: (M.vmap(lambda r: M.random.permutation(
            r, key=M.random.key(3)))(x) * w).sum())(x)
    assert_same(mlx, program)
