"""`fast.scaled_dot_product_attention` as one node (without sinks): on the CPU its kernel
gives the composite of ops (`fast._attention`, MLX's CPU path) bit for bit, and its
transforms trace that composite; on a GPU it computes in float32 (checked against the
CPU within the dtype's rounding)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from conftest import requires_gpu
from streamlet.core import fast

SDPA = "scaled_dot_product_attention"


@st.composite
def attention_case(draw):
    n_kv = draw(st.sampled_from([1, 2, 3]))
    return {"B": draw(st.integers(0, 2)), "n_kv": n_kv,
            "n_q": n_kv * draw(st.sampled_from([1, 2, 4])), "l_q": draw(st.integers(0, 6)),
            "l_k": draw(st.integers(1, 9)), "D": draw(st.sampled_from([4, 8])),
            "D_v": draw(st.sampled_from([4, 6])),
            "mask": draw(st.sampled_from([None, "causal", "bool", "bool_heads", "add"])),
            "dtype": draw(st.sampled_from(["float32", "float16", "bfloat16"])),
            "seed": draw(st.integers(0, 2**16))}


def _inputs(c, stream):
    rng = np.random.default_rng(c["seed"])
    d = getattr(mx, c["dtype"])

    def arr(*shape):
        return mx.array(rng.standard_normal(shape).astype(np.float32)).astype(d, stream=stream)
    q = arr(c["B"], c["n_q"], c["l_q"], c["D"])
    k = arr(c["B"], c["n_kv"], c["l_k"], c["D"])
    v = arr(c["B"], c["n_kv"], c["l_k"], c["D_v"])
    m = c["mask"]
    if m == "causal" and c["l_q"] > c["l_k"]:
        m = None
    if m == "bool":
        m = mx.array(rng.random((c["l_q"], c["l_k"])) > 0.3)
    elif m == "bool_heads":
        m = mx.array(rng.random((c["B"], c["n_q"], c["l_q"], c["l_k"])) > 0.5)
    elif m == "add":
        m = arr(1, c["l_q"], c["l_k"])
    return q, k, v, m


def _composite(q, k, v, m, scale):
    """MLX's CPU path: the composite of ops, on the default stream."""
    if isinstance(m, mx.array):
        m = mx.broadcast_to(m, q.shape[:-1] + (k.shape[-2],))
    return fast._attention(q, k, v, scale, isinstance(m, str), None if isinstance(m, str)
                           else m, None, {})


def _bits(a):
    return np.array(a.astype(mx.float32, stream=mx.cpu))


@settings(max_examples=60, deadline=None)
@given(attention_case())
def test_the_node_gives_the_composite_bit_for_bit_on_the_cpu(c):
    with mx.stream(mx.cpu):
        q, k, v, m = _inputs(c, mx.cpu)
        scale = c["D"] ** -0.5
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m)
        assert out._node.prim.name == SDPA
        want = _composite(q, k, v, m, scale)
        assert out.shape == want.shape and out.dtype == want.dtype
        np.testing.assert_array_equal(_bits(out), _bits(want))


@settings(max_examples=25, deadline=None)
@given(attention_case())
def test_its_transforms_are_the_composites(c):
    """vjp, jvp and vmap of the node equal those of the composite (the rules trace it)."""
    with mx.stream(mx.cpu):
        q, k, v, m = _inputs(dict(c, dtype="float32"), mx.cpu)
        scale = 0.5

        def fused(q, k, v):
            return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m)

        def comp(q, k, v):
            return _composite(q, k, v, m, scale)
        cot = mx.cos(fused(q, k, v))
        got, want = mx.vjp(fused, [q, k, v], [cot])[1], mx.vjp(comp, [q, k, v], [cot])[1]
        for a, b_ in zip(got, want):
            np.testing.assert_array_equal(np.array(a), np.array(b_))
        tangents = [mx.sin(q), mx.cos(k), mx.sin(v)]
        np.testing.assert_array_equal(np.array(mx.jvp(fused, [q, k, v], tangents)[1][0]),
                                      np.array(mx.jvp(comp, [q, k, v], tangents)[1][0]))
        # a batch of queries and values over a new leading axis
        qs, vs = mx.stack([q, 2 * q]), mx.stack([v, v - 1])
        got = mx.vmap(fused, in_axes=(0, None, 0))(qs, k, vs)
        want = mx.stack([fused(q, k, v), fused(2 * q, k, v - 1)])
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(attention_case())
def test_its_vjp_is_one_node_giving_the_composites_cotangents_bit_for_bit(c):
    """Every dtype, an additive mask's cotangent too; inside another transform (a
    gradient of a gradient) the rule traces the composite instead (the test below)."""
    with mx.stream(mx.cpu):
        q, k, v, m = _inputs(c, mx.cpu)
        m = mx.broadcast_to(m, q.shape[:-1] + (k.shape[-2],)) if isinstance(m, mx.array) \
            else m
        additive = isinstance(m, mx.array) and m.dtype != mx.bool_
        primals = [q, k, v] + ([m] if additive else [])

        def fused(q, k, v, *a):
            return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.375,
                                                         mask=a[0] if a else m)

        def comp(q, k, v, *a):
            return _composite(q, k, v, a[0] if a else m, 0.375)
        cot = mx.cos(fused(*primals))
        got, want = mx.vjp(fused, primals, [cot])[1], mx.vjp(comp, primals, [cot])[1]
        if 0 not in q.shape + k.shape + v.shape:
            assert got[0]._node.inputs[0].prim.name == SDPA + "_vjp"
        for a, b_ in zip(got, want):
            assert a.dtype == b_.dtype and a.shape == b_.shape
            np.testing.assert_array_equal(_bits(a), _bits(b_))


@settings(max_examples=40, deadline=None)
@given(attention_case())
def test_stacking_the_query_heads_of_a_key_head_changes_no_value(c):
    """The GPU's form (`merge`: one product per key head), run on NumPy buffers."""
    q, k, v, m = (None if t is None or isinstance(t, str) else
                  np.array(t.astype(mx.float32, stream=mx.cpu)) for t in _inputs(c, mx.cpu))
    causal = c["mask"] == "causal" and c["l_q"] <= c["l_k"]
    if m is not None:
        m = np.broadcast_to(m, q.shape[:-1] + (k.shape[-2],))
    got, want = (fast._attend(np, np.matmul, q, k, v, m, 0.25, causal, merge=merge)
                 for merge in (True, False))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grad_of_grad_goes_through_the_node(on_cpu):
    rng = np.random.default_rng(3)
    q, k, v = (mx.array(rng.standard_normal((1, 2, 3, 4)).astype(np.float32)) for _ in "qkv")

    def loss(f):
        return lambda q: mx.sum(mx.grad(lambda q: mx.sum(f(q) ** 2))(q) ** 2)
    fused = loss(lambda q: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.7,
                                                                 mask="causal"))
    comp = loss(lambda q: _composite(q, k, v, "causal", 0.7))
    np.testing.assert_allclose(np.array(mx.grad(fused)(q)), np.array(mx.grad(comp)(q)),
                               rtol=1e-5, atol=1e-6)


def test_a_shapeless_compiled_attention_replays_at_other_lengths(on_cpu):
    rng = np.random.default_rng(4)

    def attend(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal")
    compiled = mx.compile(attend, shapeless=True)
    for l_q, l_k in ((2, 5), (4, 4), (1, 7), (3, 9)):
        q = mx.array(rng.standard_normal((1, 4, l_q, 8)).astype(np.float32))
        k, v = (mx.array(rng.standard_normal((1, 2, l_k, 8)).astype(np.float32))
                for _ in "kv")
        np.testing.assert_array_equal(np.array(compiled(q, k, v)), np.array(attend(q, k, v)))


def test_a_float16_scale_is_rounded_as_the_composites(on_cpu):
    """Through float32, as MLX converts a Python float for float16: straight to float16,
    this scale rounds the other way."""
    rng = np.random.default_rng(6)
    q, k, v = (mx.array(rng.standard_normal((1, 1, 4, 8)).astype(np.float16)) for _ in "qkv")
    scale = 1 + 2 ** -11 + 2 ** -30
    assert np.float16(scale) != np.float16(np.float32(scale))
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale)
    np.testing.assert_array_equal(_bits(out), _bits(_composite(q, k, v, None, scale)))


def test_keys_and_values_of_other_lengths_are_refused_when_built():
    q, k, v = mx.ones((1, 2, 3, 4)), mx.ones((1, 2, 5, 4)), mx.ones((1, 2, 6, 4))
    with pytest.raises(ValueError, match=r"\[scaled_dot_product_attention\].*\(1, 2, 6, 4\)"):
        mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0)


def test_sinks_keep_the_composite():
    q = k = v = mx.ones((1, 2, 3, 4))
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0, sinks=mx.zeros((2,)))
    assert out._node.prim.name != SDPA
    # one sink logit of 0 beside three of 4: the values' weight is 3 e^4 / (3 e^4 + 1)
    np.testing.assert_allclose(np.array(out), 3 * np.e ** 4 / (3 * np.e ** 4 + 1), rtol=1e-6)


@requires_gpu
@settings(max_examples=40, deadline=None)
@given(attention_case())
def test_the_gpu_node_matches_the_cpu(c):
    """On a GPU the node computes in float32 (query heads sharing a key head in one
    product): the CPU's result within the rounding of its dtype's intermediate steps."""
    q, k, v, m = _inputs(c, mx.cpu)
    scale = c["D"] ** -0.5
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m, stream=mx.cpu)
    got = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m, stream=mx.gpu)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}[c["dtype"]]
    np.testing.assert_allclose(_bits(got), _bits(want), rtol=tol, atol=tol)


@requires_gpu
@settings(max_examples=30, deadline=None)
@given(attention_case())
def test_its_vjp_on_the_gpu_matches_the_cpu(c):
    """The cotangents on a GPU (one node there too, computing in float32; an additive
    mask's cotangent with them): the CPU's within the rounding of its dtype's
    intermediate steps."""
    q, k, v, m = _inputs(c, mx.cpu)
    cot = mx.array(np.random.default_rng(c["seed"] + 1).standard_normal(
        q.shape[:-1] + v.shape[-1:]).astype(np.float32)).astype(q.dtype, stream=mx.cpu)
    additive = isinstance(m, mx.array) and m.dtype != mx.bool_

    def grads(device):
        with mx.stream(device):
            if additive:
                return mx.vjp(lambda q, k, v, m: mx.fast.scaled_dot_product_attention(
                    q, k, v, scale=0.375, mask=m), [q, k, v, m], [cot])[1]
            return mx.vjp(lambda q, k, v: mx.fast.scaled_dot_product_attention(
                q, k, v, scale=0.375, mask=m), [q, k, v], [cot])[1]
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}[c["dtype"]]
    for got, want in zip(grads(mx.gpu), grads(mx.cpu)):
        assert got.dtype == want.dtype and got.shape == want.shape
        want = _bits(want)
        np.testing.assert_allclose(_bits(got), want, rtol=tol,
                                   atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


@requires_gpu
@pytest.mark.parametrize("l_q,l_k,D,D_v,mask,dtype,one_kernel", [
    (1, 129, 64, 64, None, "bfloat16", True),
    (1, 700, 128, 128, "causal", "float32", True),
    (3, 257, 64, 48, "bool_heads", "float16", True),
    (16, 33, 80, 256, "add", "float32", True),
    (2, 5, 8, 6, "bool", "float32", True),
    (17, 40, 64, 64, "causal", "float32", False),  # longer queries: cuBLAS products
    (1, 12000, 64, 64, None, "float32", False),  # scores beyond a block's shared memory
    (1, 9, 16, 300, None, "float32", False),  # more value columns than a block's threads
])
def test_a_decode_steps_attention_is_one_kernel_on_the_gpu(monkeypatch, l_q, l_k, D, D_v,
                                                            mask, dtype, one_kernel):
    """Few query rows (a decode step) take one kernel, a block per row, reading a shared
    key head and a broadcast mask through their strides; it gives the CPU's result within
    the dtype's rounding, as the cuBLAS path does for the others."""
    from streamlet.backend import cuda_fast
    taken = []
    real = cuda_fast._rows_attention

    def spy(*args):
        out = real(*args)
        taken.append(out is not None)
        return out
    monkeypatch.setattr(cuda_fast, "_rows_attention", spy)
    c = {"B": 2, "n_kv": 2, "n_q": 8, "l_q": l_q, "l_k": l_k, "D": D, "D_v": D_v,
         "mask": mask, "dtype": dtype, "seed": l_k}
    q, k, v, m = _inputs(c, mx.cpu)
    scale = D ** -0.5
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m, stream=mx.cpu)
    got = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=m, stream=mx.gpu)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}[dtype]
    np.testing.assert_allclose(_bits(got), _bits(want), rtol=tol, atol=tol)
    assert taken == [one_kernel]


@requires_gpu
@pytest.mark.parametrize("l_q,l_k,mask,one_kernel", [
    (1, 129, None, True), (3, 40, "add", True), (2, 17, "causal", True),
    (4, 9, "bool_heads", True), (20, 33, "bool", False)])
def test_bfloat16_attention_on_the_gpu_is_the_float32_result_rounded_once(
        monkeypatch, l_q, l_k, mask, one_kernel):
    """bfloat16 queries, keys and values reach the one-kernel path as they are (no float32
    copies of the KV cache each step), and every path rounds once at the end: the bits of
    the float32 computation of the same values, rounded."""
    from streamlet.backend import cuda_fast
    seen = []
    real = cuda_fast._rows_attention

    def spy(q, *rest):
        out = real(q, *rest)
        seen.append((q.dtype.name, out is not None))
        return out
    monkeypatch.setattr(cuda_fast, "_rows_attention", spy)
    c = {"B": 2, "n_kv": 2, "n_q": 4, "l_q": l_q, "l_k": l_k, "D": 64, "D_v": 32,
         "mask": mask, "dtype": "bfloat16", "seed": l_k}
    q, k, v, m = _inputs(c, mx.gpu)
    got = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask=m, stream=mx.gpu)
    mx.eval(got)
    assert seen[0] == ("uint16", True) if one_kernel else seen[-1][1] is False

    def f32(a):
        return a.astype(mx.float32, stream=mx.gpu) if isinstance(a, mx.array) and \
            a.dtype == mx.bfloat16 else a
    want = mx.fast.scaled_dot_product_attention(f32(q), f32(k), f32(v), scale=0.125,
                                                mask=f32(m), stream=mx.gpu)
    want = want.astype(mx.bfloat16, stream=mx.gpu)
    assert got.dtype == mx.bfloat16
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_no_heads_give_an_empty_result_and_query_heads_without_key_heads_an_error():
    """MLX divides by the key heads' count (SIGFPE); here no heads at all attend to
    nothing, and query heads with no key heads are refused when built."""
    q, k = mx.zeros((1, 0, 3, 4)), mx.zeros((1, 0, 5, 4))
    out = mx.fast.scaled_dot_product_attention(q, k, mx.zeros((1, 0, 5, 6)), scale=1.0,
                                               mask="causal")
    assert out.shape == (1, 0, 3, 6) and np.array(out).size == 0
    with pytest.raises(ValueError, match="n_kv_heads 0"):
        mx.fast.scaled_dot_product_attention(mx.zeros((1, 2, 3, 4)), k, k, scale=1.0)
