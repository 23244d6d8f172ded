"""bfloat16 elementwise chains on the GPU: one generated kernel that computes each op in
float and rounds its result to bfloat16, as ml_dtypes does on the CPU, so both devices
give the same bits (transcendentals within one bfloat16 rounding: the two float32
libraries may differ in their last bit).  Two differences the GPU had before fusion
stay: its float arithmetic flushes subnormals to zero (a subnormal's truth is read from
its bits, so casts to bool see it), and a NaN it computes has CUDA's bits."""
import numpy as np
import pytest

import streamlet.core as mx
from conftest import requires_gpu

pytestmark = requires_gpu

BF = mx.bfloat16
RNG = np.random.default_rng(17)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5, 3e38, -65504.0, 7.0],
                   np.float32)
SUBNORMAL = np.array([1e-40, -3e-39, 5e-39], np.float32)  # bfloat16 subnormals


def _sample(n):
    return np.concatenate([SPECIAL, (RNG.standard_normal(n) * 4).astype(np.float32)])


def _same_bits(got, want):
    """Equal bits, a NaN of either sign and payload matching any NaN, subnormals read as
    zeros of their sign (the GPU's float arithmetic flushes them)."""
    if got.dtype == np.uint16:
        nan_g, nan_w = (got & 0x7FFF) > 0x7F80, (want & 0x7FFF) > 0x7F80
        np.testing.assert_array_equal(nan_g, nan_w)
        got, want = np.where(nan_g, 0, got), np.where(nan_w, 0, want)
        got, want = (np.where((x & 0x7F80) == 0, x & 0x8000, x) for x in (got, want))
    np.testing.assert_array_equal(got, want)


def _both(fn, *arrays):
    """fn's result on a GPU stream and on the CPU (the bfloat16 as its bits), and whether
    the GPU's was computed by a generated kernel."""
    out = {}
    for dev in (mx.cpu, mx.gpu):
        with mx.stream(dev):
            r = fn(*[mx.array(a) for a in arrays])
            mx.eval(r)
            data = r._node.data
            v = np.array(r.__array__())
            out[dev] = (v.view(np.uint16) if r.dtype == BF else v), type(data).__name__
    return out[mx.gpu][0], out[mx.cpu][0], out[mx.gpu][1] == "Lazy"


EXACT = {
    "arithmetic": lambda a, b: (a.astype(BF) * b.astype(BF) + a.astype(BF)) * 0.5 - 3,
    "divide_sqrt": lambda a, b: mx.sqrt(mx.abs(a.astype(BF))) / (b.astype(BF) + 0.25),
    "minmax_negative": lambda a, b: -mx.maximum(a.astype(BF), mx.minimum(b.astype(BF), 2)),
    "where_compare": lambda a, b: mx.where(a.astype(BF) > b.astype(BF), a.astype(BF),
                                           b.astype(BF) * 3),
    "to_float32": lambda a, b: (a.astype(BF) * 3).astype(mx.float32) + b,
    "to_int32": lambda a, b: (a.astype(BF) * 1e9).astype(mx.int32),  # beyond int32 too
    "to_bool": lambda a, b: mx.concatenate([a, b]).astype(BF).astype(mx.bool_),
    "compare_out": lambda a, b: mx.logical_and(a.astype(BF) <= b.astype(BF),
                                               a.astype(BF) != 0),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_bfloat16_chains_fuse_and_give_the_cpus_bits(name):
    a, b = _sample(61), _sample(61)[::-1].copy()
    if name == "to_bool":  # read from the bits: true
        a = np.concatenate([a, SUBNORMAL])
    got, want, fused = _both(EXACT[name], a, b)
    assert fused
    assert got.dtype == want.dtype
    _same_bits(got, want)


@pytest.mark.parametrize("fn", [lambda a: mx.exp(a.astype(BF) * 0.5),
                                lambda a: mx.sigmoid(a.astype(BF)) * 2 + 1,
                                lambda a: mx.tanh(a.astype(BF)) - mx.sin(a.astype(BF))])
def test_bfloat16_transcendentals_within_one_rounding(fn):
    a = (RNG.standard_normal(300) * 3).astype(np.float32)
    got, want, fused = _both(fn, a)
    assert fused
    ulps = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert ulps.max() <= 1, ulps.max()


def test_a_bias_row_broadcast_and_a_scalar_array():
    x = (RNG.standard_normal((8, 16)) * 2).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    got, want, fused = _both(lambda x, b, s: mx.maximum(x.astype(BF) + b.astype(BF), 0)
                             * s.astype(BF), x, bias, np.array(1.75, np.float32))
    assert fused
    _same_bits(got, want)


def test_intermediates_other_streams_and_unfused_consumers():
    x = mx.array((RNG.standard_normal(64) * 2).astype(np.float32))
    with mx.stream(mx.cpu):
        want_a = x.astype(BF) * 3
        want_m = mx.matmul(mx.reshape(want_a + 1, (8, 8)), mx.reshape(want_a, (8, 8)))
    s1, s2 = mx.new_stream(mx.gpu), mx.new_stream(mx.gpu)
    a = mx.multiply(x.astype(BF, stream=s1), 3, stream=s1)  # made on another stream
    mx.eval(a)
    b = mx.add(a, 1, stream=s2)
    c = mx.sum(b * a, stream=s2)  # a fused bfloat16 value read by a reduction
    m = mx.matmul(mx.reshape(b, (8, 8)), mx.reshape(a, (8, 8)), stream=s2)
    mx.eval(c, m)
    assert np.array_equal(np.array(a.__array__()).view(np.uint16),
                          np.array(want_a.__array__()).view(np.uint16))
    assert np.array_equal(np.array(b.__array__()).view(np.uint16),  # an intermediate
                          np.array((want_a + 1).__array__()).view(np.uint16))
    exact = np.sum(np.array(((want_a + 1) * want_a).astype(mx.float32)), dtype=np.float64)
    np.testing.assert_allclose(np.array(c.astype(mx.float32)), exact, rtol=2 ** -8)
    np.testing.assert_allclose(np.array(m.astype(mx.float32)),
                               np.array(want_m.astype(mx.float32)), rtol=2 ** -6, atol=0.1)


MOVES = {
    "transpose": lambda a: mx.transpose(a, (2, 0, 1)),
    "reshape_slice": lambda a: mx.reshape(a, (6, 20))[1:5, ::3],
    "concatenate_split": lambda a: mx.concatenate(mx.split(a, 2, axis=2)[::-1], axis=0),
    "expand_squeeze_broadcast": lambda a: mx.broadcast_to(
        mx.expand_dims(mx.squeeze(a[:1], 0), 0), (3, 4, 10)),
    "tile_repeat_roll_flip": lambda a: mx.flip(mx.roll(mx.repeat(mx.tile(a, (1, 2, 1)), 2,
                                                                 axis=0), 3, axis=1), 2),
    "diagonal": lambda a: mx.diagonal(a, 1, 1, 2),
    "gathers": lambda a: mx.take_along_axis(
        mx.take(a, mx.array([2, 0, 1, 1]), axis=1)[mx.array([0, 2, 1])],
        mx.array([[[3, 0, 9]]]), axis=2),
    "as_strided_contiguous": lambda a: mx.contiguous(mx.as_strided(a, (5, 4), (3, 7), 2)),
}


@pytest.mark.parametrize("name", sorted(MOVES))
def test_bfloat16_moves_keep_every_bit(name):
    # Raw bit patterns, signalling NaNs (0x7F81, 0xFF90) among them: an op that only
    # moves elements must not round them through float32 (which quiets such NaNs).
    bits = RNG.integers(0, 1 << 16, (3, 4, 10), dtype=np.uint16)
    bits.flat[:4] = [0x7F81, 0xFF90, 0x0001, 0x8000]

    def fn(raw):
        return MOVES[name](mx.view(raw, BF))
    got, want, _ = _both(fn, bits)
    np.testing.assert_array_equal(got, want)


def test_compiled_bfloat16_runs_are_generated_kernels():
    def f(x, b):
        h = x * mx.sigmoid(x) + b  # silu and a bias, as compiled activations do
        return mx.maximum(h, 0) * 0.5, h.astype(mx.float32)

    c = mx.compile(f)
    x = mx.array((RNG.standard_normal((16, 64)) * 3).astype(np.float32)).astype(BF)
    b = mx.array(RNG.standard_normal(64).astype(np.float32)).astype(BF)
    with mx.stream(mx.gpu):
        want = f(x, b)
        mx.eval(want)
        for call in range(3):  # run step by step, captured, replayed
            got = c(x, b)
            box = got[0]._node.inputs[0]
            steps = box.params["program"].steps
            assert any(s.prim.name.startswith("Compiled") for s in steps), \
                [s.prim.name for s in steps]
            mx.eval(got)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(np.array(g.__array__()), np.array(w.__array__()))
    with mx.stream(mx.cpu):
        cpu = f(x, b)[0]
    ulps = np.abs(np.array(got[0].__array__()).view(np.uint16).astype(np.int32)
                  - np.array(cpu.__array__()).view(np.uint16).astype(np.int32))
    assert ulps.max() <= 1
