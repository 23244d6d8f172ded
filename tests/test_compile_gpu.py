"""mx.compile on the GPU: elementwise runs of a replay are single nodes whose kernels are
the backend's generated ones, cut into pieces where a run is long or reads many values,
and they give what the uncompiled program gives there."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx

from conftest import requires_gpu

pytestmark = requires_gpu


@pytest.fixture
def on_gpu():
    """The GPU as this test's default stream, whatever device the suite runs on."""
    with mx.stream(mx.gpu):
        yield

UNARY = [mx.exp, mx.tanh, mx.sin, mx.negative, mx.square, mx.sigmoid, mx.abs,
         lambda a: mx.sqrt(mx.abs(a)), lambda a: a * 0.75 + 0.1]
BINARY = [mx.add, mx.subtract, mx.multiply, mx.maximum, mx.minimum,
          lambda a, b: mx.where(a > b, a, b * 0.5), lambda a, b: a / (mx.abs(b) + 1)]


def _chain(rng, length):
    """A random elementwise program of `length` ops over its inputs and earlier values."""
    prog = [(bool(rng.random() < 0.4), int(rng.integers(1 << 30)), int(rng.integers(1 << 30)))
            for _ in range(length)]

    def fn(*xs):
        pool = list(xs)
        for binary, i, j in prog:
            a = pool[i % len(pool)]
            if binary:
                pool.append(BINARY[i % len(BINARY)](a, pool[j % len(pool)]))
            else:
                pool.append(UNARY[j % len(UNARY)](a))
            pool[-1] = mx.tanh(pool[-1])  # values stay in range over long chains
        return pool[-1], pool[len(pool) // 2]  # one result from inside the run
    return fn


def _inputs(rng, *shapes, dtype=np.float32):
    return [mx.array(rng.standard_normal(s).astype(dtype)) for s in shapes]


def _check(compiled, fn, xs, rtol=1e-5):
    """Compiled and uncompiled on the GPU give the same bits, and the CPU's values."""
    got, want = compiled(*xs), fn(*xs)
    with mx.stream(mx.cpu):
        cpu = fn(*[mx.array(x.__array__()) for x in xs])
    for g, w, c in zip(got, want, cpu):
        assert g.shape == w.shape and g.dtype == w.dtype
        g, w, c = (v.__array__() for v in (g, w, c))  # bfloat16 too (np.array refuses it)
        np.testing.assert_array_equal(g, w)
        np.testing.assert_allclose(g, c, rtol=rtol, atol=1e-6)
    return got


def _steps(out):
    """The steps of the whole program (`core.gpu_program`) whose replay made `out`."""
    box = out._node.inputs[0]
    assert box.prim.name == "compiled_graph"
    return box.params["program"].steps


def _kernels(out):
    """The count of generated kernels of the replay that made `out` (not evaluated)."""
    return sum(len(s.params["gpu_run"].pieces) for s in _steps(out)
               if s.params and "gpu_run" in s.params)


@pytest.mark.parametrize("seed", range(6))
def test_random_chains_equal_uncompiled_bit_for_bit(seed, on_gpu):
    rng = np.random.default_rng(seed)
    fn = _chain(rng, int(rng.integers(5, 60)))
    compiled = mx.compile(fn)
    for _ in range(2):  # the trace, then a replay on new values
        _check(compiled, fn, _inputs(rng, (33, 17), (33, 17), (33, 17)))


def test_a_long_chain_is_cut_into_kernels_of_the_backends_depth(on_gpu):
    from streamlet.backend import cuda_fuse
    rng = np.random.default_rng(1)

    def fn(x):
        for k in range(3 * cuda_fuse.MAX_DEPTH + 5):
            x = mx.sin(x) * 0.9 + 0.01 * k
        return (x,)
    compiled = mx.compile(fn)
    x = _inputs(rng, (1000,))
    out, = _check(compiled, fn, x)
    out, = compiled(*x)  # a replay
    assert [s.prim.name[:8] for s in _steps(out)] == ["Compiled"]
    # three values a round (sin, multiply, add), MAX_DEPTH values a kernel
    assert _kernels(out) == -(-(3 * cuda_fuse.MAX_DEPTH + 5) * 3 // cuda_fuse.MAX_DEPTH)


def test_a_run_reading_more_values_than_one_launch_takes(on_gpu):
    from streamlet.backend import cuda_fuse
    n = cuda_fuse.MAX_PARAMS + 20
    rng = np.random.default_rng(2)

    def fn(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x * 0.5
        return (total,)
    xs = _inputs(rng, *[(64,)] * n)
    compiled = mx.compile(fn)
    _check(compiled, fn, xs, rtol=1e-4)  # the trace, then a replay
    out, = compiled(*xs)
    assert _kernels(out) >= 2
    np.testing.assert_array_equal(np.array(out), np.array(fn(*xs)[0]))


def test_broadcast_inputs_and_python_scalars(on_gpu):
    rng = np.random.default_rng(3)

    def fn(a, b, c):
        y = mx.exp(a * 0.5) + b - 2.0  # (4, 1) with (1, 5): a (4, 5) run
        return y * c, mx.maximum(y, 0.25)
    _check(mx.compile(fn), fn, _inputs(rng, (4, 1), (1, 5), ()))


def test_a_broadcast_joins_the_run_it_feeds(on_gpu):
    import io
    rng = np.random.default_rng(6)

    def fn(y, z):
        yy = mx.broadcast_to(y, z.shape)
        return yy * z + 1, yy.sum()  # yy is read outside the run too: one of its results
    compiled = mx.compile(fn)
    xs = _inputs(rng, (1, 5), (3, 5))
    _check(compiled, fn, xs)
    assert "CompiledBroadcastMultiplyAdd" in [s.prim.name for s in _steps(compiled(*xs)[0])]
    f = io.StringIO()
    mx.export_to_dot(f, *compiled(*xs))
    drawn = f.getvalue()  # the whole program, one node, labelled with the steps it runs
    assert "CompiledGraph(" in drawn and "CompiledBroadcastMultiplyAdd" in drawn
    assert drawn.count("shape=rectangle") == 1


def test_integer_bool_and_half_dtypes(on_gpu):
    rng = np.random.default_rng(4)

    def fn(x, k):
        big = x > 0.1
        i = (x * 100).astype(mx.int32) + k  # float -> int as the backend converts
        h = (x.astype(mx.float16) * 3).astype(mx.float32)
        return mx.where(big, i, -i), h + 1, big & (k > 0)
    x = _inputs(rng, (7, 9))[0]
    k = mx.array(rng.integers(-5, 5, (7, 9)).astype(np.int32))
    compiled = mx.compile(fn)
    for _ in range(2):
        _check(compiled, fn, [x, k], rtol=1e-3)


def test_runs_around_other_ops_and_other_streams(on_gpu):
    rng = np.random.default_rng(5)
    side = mx.new_stream(mx.gpu)

    def fn(x):
        y = mx.tanh(x) * 2 + 1
        s = mx.sum(y, axis=-1, keepdims=True)  # not elementwise: between two runs
        with mx.stream(mx.cpu):
            z = mx.exp(y) - 1  # a CPU stream's steps stay unfused for the GPU
        with mx.stream(side):
            w = mx.sin(y) * 3  # another GPU stream: a run of its own
        return (y / s) * 0.5 + s, z, w + 1
    compiled = mx.compile(fn)
    for _ in range(2):
        xs = _inputs(rng, (6, 8))
        _check(compiled, fn, xs)
    out = compiled(*xs)
    assert out[0]._node.prim.name.startswith("Compiled")
    assert out[1]._node.stream.stream.device == mx.cpu


def test_float64_replayed_on_the_gpu_raises(on_gpu):
    c = mx.compile(lambda x: x * 2 + 1)
    x = mx.array([1.0, 2.0], dtype=mx.float64)
    with mx.stream(mx.cpu):
        assert c(x).tolist() == [3.0, 5.0]  # traced on the CPU
    with pytest.raises(ValueError, match="float64 is not supported on the GPU"):
        c(x)  # the same trace on the GPU


def test_uncompiled_on_gpu_names_no_fused_node(on_gpu):
    """Without compile the backend fuses by itself; the graph keeps the user's ops."""
    x = mx.ones((4,))
    y = mx.exp(x) + 1
    assert y._node.prim.name == "add"
    np.testing.assert_allclose(np.array(y), np.e + 1, rtol=1e-6)
