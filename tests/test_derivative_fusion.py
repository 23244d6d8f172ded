"""The fused derivative nodes of elementwise ops (`rules.Derivative`).

On a CPU stream the product of an elementwise op's derivative with a cotangent (or a
tangent) is one node whose kernel runs the formula with the ops' own kernels.  Its
values must be the bits the formula's nodes give one by one, for every op, dtype and
broadcast; what the graph holds must shrink to one node per derivative.
"""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core.ops import rules
from streamlet.core.ops.elementwise import BINARY, UNARY

pytestmark = pytest.mark.usefixtures("on_cpu")

UNARY_FUSED = sorted(n for n, row in UNARY.items() if callable(row[3]))
BINARY_FUSED = sorted(n for n, row in BINARY.items() if any(callable(d) for d in row[3]))
POSITIVE = {"sqrt", "rsqrt", "log", "log2", "log10", "reciprocal", "arccosh", "power"}
SHAPES = [((5, 4), (5, 4)), ((5, 4), (4,)), ((1, 4), (3, 1)), ((), (6,))]


def _draw(rng, name, shape, dtype):
    x = rng.standard_normal(shape) * 2
    if name in POSITIVE:
        x = np.abs(x) + (1.0 if name == "arccosh" else 0.1)
    if name in ("arcsin", "arccos", "arctanh", "erfinv"):
        x = np.tanh(x) * 0.95
    if rng.random() < 0.3 and x.size:  # special values: zeros, infinities, NaN
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size)] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan])
    return mx.array(x.astype(dtype))


def _both(fn):
    """`fn()`'s results evaluated with fused derivative nodes and built from ops."""
    fused = fn()
    mx.eval(fused)
    saved = rules._REAL
    rules._REAL = ()  # no dtype qualifies: every derivative is built from its ops
    try:
        built = fn()
        mx.eval(built)
    finally:
        rules._REAL = saved
    return fused, built


def _same_bits(fused, built, what):
    for f, b in zip(fused, built):
        assert f.shape == b.shape and f.dtype == b.dtype, (what, f.shape, b.shape)
        fa, ba = np.array(f), np.array(b)
        np.testing.assert_array_equal(fa.view(f"u{fa.itemsize}"), ba.view(f"u{ba.itemsize}"),
                                      err_msg=what)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY_FUSED)
def test_a_unary_derivative_node_gives_the_bits_of_its_formula(name, dtype):
    op = getattr(mx, name)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        x = _draw(rng, name, (7, 3), dtype)
        c = mx.array(rng.standard_normal((7, 3)).astype(dtype))
        t = mx.array(rng.standard_normal((7, 3)).astype(dtype))
        fused, built = _both(lambda: [mx.vjp(op, [x], [c])[1][0], mx.jvp(op, [x], [t])[1][0]])
        _same_bits(fused, built, f"{name} seed {seed}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY_FUSED)
def test_a_binary_derivative_node_gives_the_bits_of_its_formula(name, dtype):
    op = getattr(mx, name)
    for seed, (sx, sy) in enumerate(SHAPES):
        rng = np.random.default_rng(seed)
        x, y = _draw(rng, name, sx, dtype), _draw(rng, name, sy, dtype)
        out = op(x, y)
        c = mx.array(rng.standard_normal(out.shape).astype(dtype))
        tx = mx.array(rng.standard_normal(sx).astype(dtype))
        ty = mx.array(rng.standard_normal(sy).astype(dtype))
        fused, built = _both(lambda: [*mx.vjp(op, [x, y], [c])[1],
                                      mx.jvp(op, [x, y], [tx, ty])[1][0],
                                      mx.jvp(lambda a: op(a, y), [x], [tx])[1][0]])
        _same_bits(fused, built, f"{name} {sx} {sy}")


def _backward_prims(fn, x):
    """The primitives of the backward graph of `fn` at `x` (forward nodes excluded)."""
    forward = set()
    stack = [fn(x)._node]
    while stack:
        n = stack.pop()
        forward.add(id(n))
        stack.extend(n.inputs)
    grad = mx.grad(lambda a: fn(a).sum())(x)
    prims, stack, seen = [], [grad._node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen or n.prim is None:
            continue
        seen.add(id(n))
        if n.prim.name.endswith(("_derivative", "_derivative_x", "_derivative_y")) or \
                n.prim.name in ("multiply", "subtract", "square", "cos", "greater", "astype"):
            prims.append(n.prim.name)
        stack.extend(n.inputs)
    return prims


def test_each_derivative_is_one_node_in_the_backward_graph():
    x = mx.array(np.linspace(-1, 1, 8).astype(np.float32))
    assert sorted(_backward_prims(lambda a: mx.tanh(mx.sin(a)), x)) == \
        ["sin_derivative", "tanh_derivative"]
    assert _backward_prims(lambda a: mx.maximum(a, 0.0), x) == ["maximum_derivative_x"]


def test_float16_and_complex_derivatives_stay_built_from_ops():
    """Half types round each op as the CPU computes them and complex cotangents are
    conjugated: those keep the formula's own nodes."""
    for dtype in (mx.float16, mx.bfloat16, mx.complex64):
        x = mx.array([0.5, 1.0]).astype(dtype)
        _, (g,) = mx.vjp(mx.sin, [x], [mx.ones_like(x)])
        assert g._node.prim.name == "multiply", dtype


def test_second_derivatives_through_the_fused_node_match_mlx(mlx):
    xs = np.linspace(-2, 2, 9).astype(np.float32)
    for name in ("tanh", "sin", "sigmoid", "exp", "log1p", "erf"):
        def second(M):
            op = getattr(M, name)
            return M.grad(lambda b: M.grad(lambda a: op(a).sum())(b).sum())
        x = np.abs(xs) if name == "log1p" else xs
        got = np.array(second(mx)(mx.array(x)))
        want = np.array(second(mlx)(mlx.array(x)))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=name)


def test_the_walks_direct_cotangents_are_the_rules_graph(monkeypatch):
    """The vjp walk builds an elementwise op's cotangents straight from its derivative
    columns (`rules.derivative_cotangents`): the same nodes, on the same streams, with the
    same bits as applying its vjp rule, over several streams and an input used twice."""
    from streamlet.core.graph import Primitive
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    rng = np.random.default_rng(3)
    x = mx.array(rng.standard_normal((4, 5)).astype(np.float32))
    w = mx.array(rng.standard_normal((5,)).astype(np.float32))

    def f(a, b):
        h = mx.multiply(mx.sin(a), b, stream=s1)
        h = mx.add(mx.tanh(h, stream=s2), a * 1.5, stream=s2)
        return mx.sum(mx.maximum(h, 0.0) - mx.exp(b))

    def graph():
        _, grads = mx.vjp(f, [x, w], [mx.array(1.0)])
        nodes = sorted(_backward_nodes(grads))  # before eval drops the graph
        mx.eval(grads)
        return grads, nodes

    direct, direct_nodes = graph()
    monkeypatch.setattr(Primitive, "cotangents", None)  # the walk applies every rule
    ruled, ruled_nodes = graph()
    assert direct_nodes == ruled_nodes
    assert f"tanh_derivative@{s2.index}" in direct_nodes
    assert f"multiply_derivative_x@{s1.index}" in direct_nodes
    _same_bits(direct, ruled, "direct vs rule")



@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_matmuls_short_way_is_its_rules_graph(monkeypatch, argnums):
    """The walk builds a product of matrices' cotangents straight from the nodes (matmul's
    `cotangents`): the nodes its vjp rule builds, on the product's stream, same bits."""
    from streamlet.core.graph import Primitive
    s = mx.new_stream(mx.cpu)
    rng = np.random.default_rng(5)
    x = mx.array(rng.standard_normal((3, 4)).astype(np.float32))
    y = mx.array(rng.standard_normal((4, 2)).astype(np.float32))

    def graph():
        g = mx.grad(lambda a, b: mx.sin(mx.matmul(a, b, stream=s)).sum(), argnums)(x, y)
        g = g if isinstance(g, tuple) else (g,)
        nodes = sorted(_backward_nodes(g))
        mx.eval(g)
        return g, nodes

    short, short_nodes = graph()
    monkeypatch.setattr(Primitive, "cotangents", None)
    ruled, ruled_nodes = graph()
    assert short_nodes == ruled_nodes
    assert f"matmul@{s.index}" in short_nodes  # operands transposed by flags, no nodes
    assert not any(n.startswith("transpose") for n in short_nodes)
    _same_bits(short, ruled, "short vs rule")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_a_linear_layers_3d_product_takes_the_short_way(monkeypatch, dtype, transposed,
                                                         argnums):
    """`x @ w.T` (or `x @ w`) of a 3-D `x` (a Linear layer on a batch of sequences): the
    walk builds `c @ w` as one product reading `w` as it is (or by a flag) and the
    batch-folded `x.T @ c` (as MLX folds it), without the transpose nodes the general rule
    builds: fewer nodes built and evaluated (the rule's `c @ w` reads a transpose of `w`
    by a flag), the same bits."""
    from streamlet.core import graph as graph_module
    from streamlet.core.graph import Primitive
    s = mx.new_stream(mx.cpu)
    rng = np.random.default_rng(6)
    d = getattr(mx, dtype)
    x = mx.array(rng.standard_normal((2, 3, 4)).astype(np.float32)).astype(d)
    w = mx.array(rng.standard_normal((5, 4) if transposed else (4, 5)).astype(np.float32))
    w = w.astype(d)
    mx.eval(x, w)

    def graph():
        def f(a, b):  # a transpose on the product's stream: read through the `tb` flag
            return mx.sin(mx.matmul(a, mx.transpose(b, stream=s) if transposed else b,
                                    stream=s)).sum()
        first = next(graph_module._births)
        g = mx.grad(f, argnums)(x, w)
        built = next(graph_module._births) - first - 1
        g = g if isinstance(g, tuple) else (g,)
        nodes = sorted(_backward_nodes(g))
        mx.eval(g)
        return g, nodes, built

    short, short_nodes, short_built = graph()
    monkeypatch.setattr(Primitive, "cotangents", None)
    ruled, ruled_nodes, ruled_built = graph()
    assert short_built < ruled_built
    # the rule's `c @ w` reads a transpose node of `w` by a flag, the short way `w` itself
    extra = [f"transpose@{s.index}"] if transposed and argnums != 1 else []
    assert sorted(short_nodes + extra) == ruled_nodes
    assert f"matmul@{s.index}" in short_nodes
    wide = [[g.astype(mx.float32) for g in gs] for gs in (short, ruled)]  # exact for bf16
    _same_bits(*wide, "short vs rule")

def _backward_nodes(grads):
    """(primitive, stream index) of each node the gradients were computed from."""
    seen, out, stack = set(), [], [g._node for g in grads]
    while stack:
        n = stack.pop()
        if id(n) in seen or n.prim is None:
            continue
        seen.add(id(n))
        out.append(f"{n.prim.name}@{n.stream.stream.index}")
        stack.extend(n.inputs)
    return out
