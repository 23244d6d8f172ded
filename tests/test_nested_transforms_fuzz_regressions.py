"""Cases a differential fuzz of nested and advanced function transforms against MLX 0.32.4
found or guards: grad of grad, jvp of vjp, vjp of jvp, vmap of grad and grad of vmap with
in_axes/out_axes trees, argnums and argnames, auxiliary outputs, custom_function rules and
checkpoint under other transforms, and the argument checks of vjp and jvp.  The result
(values, dtypes, shapes, or the error's type) is MLX's, except where MLX has no rule (its
"not implemented" errors: streamlet's derivative is checked against finite differences)
or an evident bug (noted at each such test)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_close_outcome, assert_same, error_type

_RNG = np.random.default_rng(20261206)
X = _RNG.standard_normal((3, 4)).astype(np.float32)
T = _RNG.standard_normal((3, 4)).astype(np.float32)
V = _RNG.standard_normal(3).astype(np.float32)


def _error(mod, fn):
    return error_type(lambda: mod.eval(fn(mod)))


def _same_error(mlx, fn):
    want = _error(mlx, fn)
    assert want is not None
    got = _error(mx, fn)
    assert got is not None and issubclass(got, want), (got, want)


# -- higher orders and mixed modes over the ops the brief names --------------------------------

OPS = {
    "softmax": lambda M, a: M.softmax(a, axis=-1),
    "logsumexp": lambda M, a: M.logsumexp(a, axis=1),
    "cumsum": lambda M, a: M.cumsum(a * a, axis=1),
    "sort": lambda M, a: M.sort(a * a * a, axis=1),
    "take_along_argsort": lambda M, a: M.take_along_axis(a * a, M.argsort(a, axis=1), axis=1),
    "where": lambda M, a: M.where(a > 0, a * a * a, M.sin(a)),
    "clip": lambda M, a: M.clip(a * a, 0.2, 1.0),
    "maximum": lambda M, a: M.maximum(a * a, a),
    "abs": lambda M, a: M.abs(a) * a,
    "stop_gradient": lambda M, a: a * M.stop_gradient(a * a) + a * a * a,
    "var": lambda M, a: M.var(a * a, axis=0),
    "matmul": lambda M, a: (a @ a.T) * a[:, :3],
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_third_order_grad(mlx, op):
    def program(M):
        f = lambda a: OPS[op](M, a).sum()  # noqa: E731
        g2 = lambda a: M.grad(f)(a).sum()  # noqa: E731
        g3 = lambda a: M.grad(g2)(a).sum()  # noqa: E731
        return [M.grad(f)(M.array(X)), M.grad(g2)(M.array(X)), M.grad(g3)(M.array(X))]
    assert_same(mlx, program, rtol=2e-4, what=op)


@pytest.mark.parametrize("op", sorted(OPS))
def test_jvp_of_vjp_and_vjp_of_jvp(mlx, op):
    def program(M):
        f = lambda a: OPS[op](M, a)  # noqa: E731
        back = lambda a: M.vjp(f, [a], [M.ones_like(f(a)) * 0.5])[1][0]  # noqa: E731
        fwd = lambda a: M.jvp(f, [a], [M.array(T)])[1][0]  # noqa: E731
        return [M.jvp(back, [M.array(X)], [M.array(T)]),
                M.vjp(fwd, [M.array(X)], [M.ones_like(fwd(M.array(X)))])]
    assert_same(mlx, program, rtol=2e-4, what=op)


@pytest.mark.parametrize("op", sorted(OPS))
def test_vmap_of_grad_and_grad_of_vmap(mlx, op):
    stacked = np.stack([X, T])

    def program(M):
        f = lambda a: OPS[op](M, a)  # noqa: E731
        return [M.vmap(M.grad(lambda a: f(a).sum()))(M.array(stacked)),
                M.grad(lambda a: M.vmap(f, in_axes=1, out_axes=-1)(a).sum())(
                    M.array(np.moveaxis(stacked, 0, 1)))]
    assert_same(mlx, program, rtol=2e-4, what=op)


@pytest.mark.parametrize("in_axes", [0, -1, 1, (0, None), (None, 1), (-3, -2)])
@pytest.mark.parametrize("out_axes", [0, -1, 2])
def test_vmap_of_grad_over_argnums_with_axes(mlx, in_axes, out_axes):
    a_shape = (3, 4) if isinstance(in_axes, tuple) and in_axes[0] is None else (2, 3, 4)
    b_shape = (3, 4) if isinstance(in_axes, tuple) and in_axes[1] is None else (2, 3, 4)
    if in_axes == (None, 1):
        b_shape = (3, 2, 4)
    a = _RNG.standard_normal(a_shape).astype(np.float32)
    b = _RNG.standard_normal(b_shape).astype(np.float32)

    def program(M):
        g = M.grad(lambda p, q: (M.sin(p) * q * q).sum(), argnums=(0, 1))
        return M.vmap(lambda p, q: g(p, q)[1], in_axes=in_axes, out_axes=out_axes)(
            M.array(a), M.array(b))
    assert_same(mlx, program, rtol=1e-5)


def test_vmap_of_value_and_grad_with_aux_and_out_axes_trees(mlx):
    x = np.stack([X, T])

    def program(M):
        vg = M.value_and_grad(lambda a: ((a * a * a).sum(), {"twice": a * 2}))
        (value, aux), g = M.vmap(vg, out_axes=((0, {"twice": 1}), -1))(M.array(x))
        return [value, aux["twice"], g]
    assert_same(mlx, program, rtol=1e-5)


# -- random compositions --------------------------------------------------------------------------

_STEPS = [lambda M, a: M.sin(a) * a, lambda M, a: M.softmax(a, axis=-1) * a,
          lambda M, a: M.cumsum(a * a, axis=-1), lambda M, a: M.sort(a * a * a, axis=-1),
          lambda M, a: M.where(a > 0, a * a, M.exp(a)), lambda M, a: M.maximum(a, a * a * 0.5),
          lambda M, a: M.logsumexp(a, axis=-1, keepdims=True) * a,
          lambda M, a: M.stop_gradient(a) * a * a]


def _composed(M, rnd, depth):
    if depth == 0:
        i, j = rnd.randrange(len(_STEPS)), rnd.randrange(len(_STEPS))
        return lambda a: _STEPS[i](M, _STEPS[j](M, a))
    kind = rnd.choice(["grad", "vmap", "jvp", "vjp", "checkpoint", "custom_vjp"])
    inner = _composed(M, rnd, depth - 1)
    if kind == "grad":
        return lambda a: M.grad(lambda b: inner(b).sum())(a)
    if kind == "vmap":
        ax = rnd.choice([0, 1, -1])

        def batched(a):
            r = M.vmap(inner, in_axes=ax, out_axes=ax)(
                M.stack([a, a * 0.5 + 0.1], axis=ax % (a.ndim + 1)))
            return M.sum(r, axis=ax)
        return batched
    if kind == "jvp":
        return lambda a: M.jvp(inner, [a], [M.ones_like(a) * 0.3])[1][0] + a
    if kind == "vjp":
        return lambda a: M.vjp(inner, [a], [M.ones_like(a) * 0.7])[1][0] + a
    if kind == "checkpoint":
        return M.checkpoint(inner)
    f = M.custom_function(inner)
    f.vjp(lambda p, c, o: M.vjp(inner, [p], [c])[1][0] * 1.5)
    return f


@pytest.mark.parametrize("seed", range(12))
def test_random_composition_of_transforms(mlx, seed):
    x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)

    def program(M):
        rnd = random.Random(seed)
        f = _composed(M, rnd, 1 + seed % 3)
        if rnd.random() < 0.5:
            return M.grad(lambda a: f(a).sum())(M.array(x))
        return M.vmap(f)(M.array(x))
    assert_close_outcome(mlx, program, rtol=1e-4)


# -- argnums, argnames, trees, auxiliary values -------------------------------------------------

@pytest.mark.parametrize("argnums", [np.int64(1), np.int32(0), (np.int64(1), 0), np.array(1),
                                     np.array([0, 1]), range(2), True])
def test_argnums_takes_what_converts_to_ints(mlx, argnums):
    """A NumPy integer is an index, as MLX's binding reads it (it was refused: 'not
    iterable')."""
    assert_same(mlx, lambda M: M.value_and_grad(lambda a, b: (a * a * b).sum(), argnums=argnums)(
        M.array(V), M.array(V * 2)), rtol=1e-6)


@pytest.mark.parametrize("argnums", [{0: 1}, {0}, b"a", 1.0, (1.0,), "a"])
def test_argnums_refuses_what_is_no_int_sequence(mlx, argnums):
    """A dict, set or bytes is no sequence of argument indices: a TypeError, as MLX (a dict
    or set was read as its keys; bytes as their byte values)."""
    _same_error(mlx, lambda M: M.grad(lambda a, b: (a * b).sum(), argnums=argnums)(
        M.array(V), M.array(V)))


def test_nested_grads_over_trees_argnames_and_aux(mlx):
    def program(M):
        p = {"w": [M.array(X), M.array(T)], "n": None}

        def loss(p, s, *, k):
            return (M.sin(p["w"][0]) * p["w"][1] * s * k).sum(), {"w0": p["w"][0] * 2}
        vg = M.value_and_grad(loss, argnums=(0, 1), argnames="k")
        (value, aux), (pos, named) = vg(p, M.array(2.0), k=M.array(0.5))
        outer = M.grad(lambda s: M.grad(lambda q: loss(q, s, k=s)[0])(p)["w"][0].sum())(
            M.array(1.5))
        return [value, aux["w0"], pos[0]["w"][0], pos[0]["w"][1], pos[1], named["k"], outer]
    assert_same(mlx, program, rtol=1e-5)


# -- vjp and jvp: what they take ----------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3,), (1,), (2, 3)])
@pytest.mark.parametrize("transform", ["vjp", "jvp"])
def test_primals_given_as_one_array_are_its_rows(mlx, transform, shape):
    """MLX reads `primals: list[array]` from an array as the sequence of its rows (one
    argument per row); an array of no dimension is no sequence: a TypeError."""
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)

    def program(M):
        return getattr(M, transform)(lambda *a: [v * 2 for v in a], M.array(x), M.array(x + 1))
    assert_same(mlx, program)
    _same_error(mlx, lambda M: getattr(M, transform)(lambda a: a * 2, M.array(1.0),
                                                     M.array(1.0)))


@pytest.mark.parametrize("case", [
    lambda M: M.vjp(lambda a: a * 2, [1.0], [M.array(1.0)]),
    lambda M: M.vjp(lambda a: a * 2, [M.array(V)], [np.ones(3, np.float32)]),
    lambda M: M.vjp(lambda a: a * 2, None, None),
    lambda M: M.vjp(lambda a: a * 2, {"a": M.array(V)}, [M.array(V)]),
    lambda M: M.vjp(lambda a: a * 2, [[M.array(V)]], [M.array(V)]),
    lambda M: M.vjp(lambda a: a * 2, (v for v in [M.array(V)]), [M.array(V)]),
    lambda M: M.jvp(lambda a: a * 2, [M.array(1.0)], [1.0]),
    lambda M: M.jvp(lambda a: a * 2, [np.ones(3, np.float32)], [M.array(V)]),
])
def test_vjp_and_jvp_refuse_what_is_no_list_of_arrays(mlx, case):
    """A TypeError, as MLX's binding (it was a ValueError)."""
    _same_error(mlx, case)


@pytest.mark.parametrize("ret", [lambda M, a: {"k": a}, lambda M, a: None, lambda M, a: 2.0,
                                 lambda M, a: (a, 1), lambda M, a: [a, [a]],
                                 lambda M, a: np.ones(3)])
@pytest.mark.parametrize("transform", ["vjp", "jvp"])
def test_a_function_returning_no_arrays_is_a_type_error(mlx, transform, ret):
    """MLX's failed cast of the function's result (std::bad_cast): a TypeError here (it was a
    ValueError)."""
    _same_error(mlx, lambda M: getattr(M, transform)(lambda a: ret(M, a), [M.array(V)],
                                                     [M.array(V)]))


@pytest.mark.parametrize("tangent", ["float16", "bfloat16", "float64", "int32"])
@pytest.mark.parametrize("op", ["sum", "sin", "scale", "square", "sort", "cumsum", "reshape",
                                "negative", "add", "softmax", "matmul"])
def test_a_tangent_of_another_dtype_keeps_the_rules_dtype(mlx, op, tangent):
    """The tangent comes out in the dtype the rule's arithmetic gives, as in MLX (a float16
    tangent through a sum stays float16, a float64 one through sin is float64); it was cast
    to the result's dtype."""
    fs = {"sum": lambda M, a: a.sum(axis=0), "sin": lambda M, a: M.sin(a),
          "scale": lambda M, a: a * 2, "square": lambda M, a: M.square(a),
          "sort": lambda M, a: M.sort(a), "cumsum": lambda M, a: M.cumsum(a, axis=1),
          "reshape": lambda M, a: a.reshape(-1), "negative": lambda M, a: -a,
          "add": lambda M, a: a + 1, "softmax": lambda M, a: M.softmax(a, axis=-1),
          "matmul": lambda M, a: a @ a.T}

    def program(M):
        t = M.array(T).astype(getattr(M, tangent))
        return M.jvp(lambda a: fs[op](M, a), [M.array(X)], [t])[1]
    assert_same(mlx, program, rtol=1e-2)


def test_tangents_of_real_results_of_complex_inputs_stay_real(mlx):
    z = (X + 1j * T).astype(np.complex64)

    def program(M):
        return [M.jvp(f, [M.array(z)], [M.array(z * 0.5)])[1][0]
                for f in (M.abs, M.real, M.imag, lambda a: M.var(a))]
    assert_same(mlx, program, rtol=1e-5)


# -- custom_function and checkpoint ------------------------------------------------------------

def _custom(M, which):
    f = M.custom_function(lambda a: M.sin(a) * a)
    if "vjp" in which:
        f.vjp(lambda p, c, o: c * M.cos(p) * 3)
    if "jvp" in which:
        f.jvp(lambda p, t: t * M.cos(p) * 5)
    if "vmap" in which:
        f.vmap(lambda a, ax: (M.sin(a) * a * 7, ax))
    return f


@pytest.mark.parametrize("which", [("vjp",), ("jvp",), ("vmap",), ("vjp", "jvp", "vmap")])
def test_custom_rules_under_nested_transforms(mlx, which):
    x3 = _RNG.standard_normal((2, 2, 3)).astype(np.float32)

    def program(M):
        f = _custom(M, which)
        return [M.grad(lambda a: M.grad(lambda b: f(b).sum())(a).sum())(M.array(V)),
                M.vmap(M.grad(lambda a: f(a).sum()), in_axes=1)(M.array(X)),
                M.grad(lambda a: M.vmap(f, in_axes=1, out_axes=1)(a).sum())(M.array(X)),
                M.vjp(lambda a: M.jvp(f, [a], [M.array(V)])[1][0], [M.array(V)],
                      [M.array(V)])[1][0],
                M.jvp(lambda a: M.vjp(f, [a], [M.array(V)])[1][0], [M.array(V)],
                      [M.array(V)])[1][0],
                M.vmap(M.vmap(f))(M.array(x3))]
    assert_same(mlx, program, rtol=1e-5, what=str(which))


@pytest.mark.parametrize("rule", [lambda M, p, t: None, lambda M, p, t: t * 3,
                                  lambda M, p, t: [t * 3], lambda M, p, t: (None, t * 3)])
def test_custom_jvp_giving_fewer_tangents_than_outputs(mlx, rule):
    """The outputs a custom jvp gives no tangent for get a zero one, as in MLX (it raised
    IndexError)."""
    def program(M):
        f = M.custom_function(lambda a: (a * 2, a * a))
        f.jvp(lambda p, t: rule(M, p, t))
        return M.jvp(f, [M.array(V)], [M.array(V * 3)])
    assert_same(mlx, program)


@pytest.mark.parametrize("axes", [(0,), (0, 0, 0), [0, 0], {"a": 0}])
def test_custom_vmap_axes_that_do_not_fit_its_outputs(mlx, axes):
    """Out axes that are no prefix tree of the outputs: ValueError, as MLX (too few raised
    IndexError; a list for a tuple or too many were taken)."""
    def program(M):
        f = M.custom_function(lambda a: (a * 2, a))
        f.vmap(lambda p, ax: ((p * 2, p), axes))
        return M.vmap(f)(M.array(X))
    _same_error(mlx, program)


def test_custom_vmap_giving_fewer_outputs_is_a_value_error():
    """MLX fails later (RuntimeError: an array without a primitive, at eval); here a
    ValueError that names the rule (it was IndexError)."""
    f = mx.custom_function(lambda a: (a * 2, a))
    f.vmap(lambda p, ax: ((p * 2,), (0,)))
    with pytest.raises(ValueError, match="custom vmap"):
        mx.vmap(f)(mx.array(X))


def test_checkpoint_under_nested_transforms(mlx):
    def program(M):
        ck = M.checkpoint(lambda a, b: M.sin(a) * M.exp(b * 0.3))
        third = M.grad(lambda a: M.grad(lambda b: M.grad(
            lambda c: M.checkpoint(lambda d: M.sin(d) * d * d)(c).sum())(b).sum())(a).sum())
        return [third(M.array(V)),
                M.grad(lambda a: M.vmap(ck, in_axes=(0, None))(a, a[0]).sum())(M.array(X))]
    assert_same(mlx, program, rtol=1e-5)


# -- where MLX has no rule: checked against finite differences ---------------------------------

@pytest.mark.parametrize("fn", [
    lambda a: mx.cumprod(a, axis=1),  # MLX: "JVP is not implemented for cumulative prod"
    lambda a: mx.cummax(a, axis=1),
    lambda a: mx.vjp(lambda b: mx.prod(b * b, axis=1), [a], [mx.ones((3,), mx.float64)])[1][0],
    lambda a: mx.vjp(lambda b: b[mx.array([0, 2, 2])] * b[mx.array([1, 1, 0])], [a],
                     [mx.ones((3, 4), mx.float64)])[1][0],  # MLX: scatter has no jvp
    # MLX: "[Primitive::vmap] Not implemented for Depends" (the checkpoint's recompute)
    lambda a: mx.vmap(mx.grad(lambda b: mx.checkpoint(lambda c: mx.sin(c) * c * c)(b).sum()))(a),
    # MLX: "[Primitive::jvp] Not implemented for Depends"
    lambda a: mx.vjp(mx.checkpoint(lambda b: mx.sin(b) * b), [a], [mx.cos(a)])[1][0],
])
def test_derivatives_mlx_has_no_rule_for_match_finite_differences(on_cpu, fn):
    x, t = X.astype(np.float64), T.astype(np.float64)
    f64 = lambda v: mx.array(v, dtype=mx.float64)  # noqa: E731
    got = np.array(mx.jvp(fn, [f64(x)], [f64(t)])[1][0])
    eps = 1e-6
    want = (np.array(fn(f64(x + eps * t))) - np.array(fn(f64(x - eps * t)))) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_out_axes_none_leaves_an_unbatched_output_unbatched():
    """MLX 0.32.4 reads an out axis None as -1 and, for an output that does not depend on a
    vectorized input, stacks it along its last axis ((3,) -> (3, 2)), against its own
    documentation ("not vmapped"); streamlet returns it as it is."""
    out = mx.vmap(lambda a: (a * 2, mx.ones(3)), out_axes=(0, None))(mx.array(X[:2]))
    assert out[0].shape == (2, 4) and out[1].shape == (3,)
    aux = mx.vmap(mx.value_and_grad(lambda a: ((a * a).sum(), mx.array(3.0))),
                  out_axes=((0, None), 0))(mx.array(X))[0][1]
    assert aux.shape == () and aux.item() == 3.0
