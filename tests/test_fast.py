"""mx.fast against the mlx oracle: norms, RoPE, attention (masks, GQA, sinks) and cross
entropy, in each dtype; their transform rules against mlx's transforms and a loop; the
custom-kernel entry points (CUDA kernels on a GPU when there is one)."""
import doctest
import itertools

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core import custom_kernel, fast
from conftest import requires_gpu
from nn_oracle import numpy as _host

DTYPES = ["float32", "float16", "bfloat16"]
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}


def _pair(mlx, x, dtype):
    """The NumPy array `x` as (ours, mlx's) arrays of `dtype`."""
    return mx.array(x).astype(getattr(mx, dtype)), mlx.array(x).astype(getattr(mlx, dtype))


def _close(ours, theirs, tol):
    assert ours.shape == theirs.shape
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(_host(ours), _host(theirs), rtol=tol, atol=tol)


# -- norms ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,wdtype", [(d, d) for d in DTYPES] + [("float16", "float32"),
                                                                     ("bfloat16", None)])
def test_rms_norm_matches_mlx(mlx, rng, dtype, wdtype):
    x = rng.standard_normal((3, 5, 48)).astype(np.float32) * 3
    ours, theirs = _pair(mlx, x, dtype)
    w = rng.uniform(0.5, 2, 48).astype(np.float32)
    wo, wt = _pair(mlx, w, wdtype) if wdtype else (None, None)
    _close(mx.fast.rms_norm(ours, wo, 1e-5), mlx.fast.rms_norm(theirs, wt, 1e-5), TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight,bias", list(itertools.product([True, False], repeat=2)))
def test_layer_norm_matches_mlx(mlx, rng, dtype, weight, bias):
    x = (rng.standard_normal((4, 33)) * 2 + 1).astype(np.float32)
    ours, theirs = _pair(mlx, x, dtype)
    w, bb = rng.uniform(0.5, 2, 33).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    wo, wt = _pair(mlx, w, dtype) if weight else (None, None)
    bo, bt = _pair(mlx, bb, dtype) if bias else (None, None)
    _close(mx.fast.layer_norm(ours, wo, bo, 1e-5), mlx.fast.layer_norm(theirs, wt, bt, 1e-5),
           TOL[dtype])


def test_norm_errors_like_mlx(mlx):
    for M in (mlx, mx):
        for fn in (lambda: M.fast.rms_norm(M.array(1.0), None, 1e-5),
                   lambda: M.fast.rms_norm(M.ones((2, 4)), M.ones((3,)), 1e-5),
                   lambda: M.fast.rms_norm(M.ones((2, 4)), M.ones((2, 4)), 1e-5),
                   lambda: M.fast.rms_norm(M.ones((2, 4), dtype=M.int32), None, 1e-5),
                   lambda: M.fast.layer_norm(M.ones((2, 4)), None, M.ones((5,)), 1e-5),
                   lambda: M.fast.layer_norm(M.ones((2, 4)), M.ones((1, 4)), None, 1e-5)):
            with pytest.raises(ValueError):
                fn()


# -- rope -------------------------------------------------------------------------------------

ROPE_CASES = [
    dict(shape=(2, 4, 8), dims=8, traditional=False, base=10000.0, scale=1.0, offset=0),
    dict(shape=(2, 4, 8), dims=8, traditional=True, base=10000.0, scale=1.0, offset=3),
    dict(shape=(1, 3, 6, 16), dims=8, traditional=False, base=1e6, scale=2.0, offset=5),
    dict(shape=(1, 3, 6, 16), dims=12, traditional=True, base=500.0, scale=0.5, offset=2),
    dict(shape=(3, 2, 5, 8), dims=8, traditional=False, base=10000.0, scale=1.0,
         offset=[0, 4, 9]),
    dict(shape=(3, 2, 5, 8), dims=6, traditional=True, base=10000.0, scale=1.0, offset=[7]),
    dict(shape=(2, 2, 3, 4, 8), dims=8, traditional=False, base=10000.0, scale=1.0,
         offset=1),
    dict(shape=(2, 1, 4, 8), dims=8, traditional=False, base=None, scale=1.0, offset=2,
         freqs=True),
    dict(shape=(1, 1, 3000, 8), dims=8, traditional=False, base=10000.0, scale=1.0,
         offset=100000),
]


@pytest.mark.parametrize("case", ROPE_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_matches_mlx(mlx, rng, case, dtype):
    x = rng.standard_normal(case["shape"]).astype(np.float32)
    ours, theirs = _pair(mlx, x, dtype)
    kw = {k: case[k] for k in ("traditional", "base", "scale")}
    off = case["offset"]
    freqs = rng.uniform(1, 100, case["dims"] // 2).astype(np.float32) if case.get("freqs") \
        else None
    out = mx.fast.rope(ours, case["dims"], offset=mx.array(off) if isinstance(off, list)
                       else off, freqs=None if freqs is None else mx.array(freqs), **kw)
    ref = mlx.fast.rope(theirs, case["dims"], offset=mlx.array(off) if isinstance(off, list)
                        else off, freqs=None if freqs is None else mlx.array(freqs), **kw)
    tol = TOL[dtype] * (20 if case["offset"] == 100000 else 1)
    _close(out, ref, tol)


def test_rope_offset_arrays_and_errors_like_mlx(mlx, rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    for off in (mx.array(3), mx.array([3]), mx.array(3, dtype=mx.int64),
                mx.array([1, 2], dtype=mx.uint32)):
        ref = mlx.fast.rope(mlx.array(x), 8, traditional=False, base=10.0, scale=1.0,
                            offset=mlx.array(np.array(off), dtype=getattr(mlx, off.dtype.name
                                                                          if hasattr(off.dtype,
                                                                                     "name")
                                                                          else "int32")))
        out = mx.fast.rope(mx.array(x), 8, traditional=False, base=10.0, scale=1.0, offset=off)
        _close(out, ref, 1e-5)
    bad = [dict(a=(2, 8), dims=8), dict(a=(1, 2, 8), dims=7), dict(a=(1, 2, 8), dims=10),
           dict(a=(1, 2, 8), dims=0), dict(a=(1, 2, 8), dims=8, base=None),
           dict(a=(1, 2, 8), dims=8, freqs=(4,)), dict(a=(1, 2, 8), dims=8, base=None,
                                                       freqs=(3,)),
           dict(a=(2, 2, 8), dims=8, offset=[1, 2, 3]), dict(a=(1, 2, 8), dims=8, offset=0.5)]
    for case in bad:
        for M in (mlx, mx):
            kw = dict(traditional=False, base=case.get("base", 10.0), scale=1.0)
            off = case.get("offset", 0)
            kw["offset"] = M.array(off) if isinstance(off, (list, float)) else off
            if "freqs" in case:
                kw["freqs"] = M.ones(case["freqs"])
            with pytest.raises(ValueError):
                M.fast.rope(M.ones(case["a"]), case["dims"], **kw)


# -- attention --------------------------------------------------------------------------------

SDPA_CASES = [
    dict(B=2, Nq=4, Nkv=4, Tq=5, Tk=5, D=8, mask=None),
    dict(B=1, Nq=4, Nkv=2, Tq=3, Tk=7, D=16, mask="causal"),
    dict(B=2, Nq=6, Nkv=1, Tq=1, Tk=9, D=8, mask="bool"),
    dict(B=1, Nq=4, Nkv=2, Tq=4, Tk=4, D=8, mask="additive"),
    dict(B=2, Nq=2, Nkv=2, Tq=3, Tk=6, D=4, mask="bool_heads"),
    dict(B=1, Nq=4, Nkv=2, Tq=5, Tk=5, D=8, mask="causal", sinks=True),
    dict(B=1, Nq=2, Nkv=2, Tq=2, Tk=3, D=8, mask="additive_2d", sinks=True),
]


def _mask(M, case, rng):
    kind, Tq, Tk = case["mask"], case["Tq"], case["Tk"]
    if kind in (None, "causal"):
        return kind
    if kind == "bool":
        m = rng.uniform(size=(case["B"], 1, Tq, Tk)) > 0.3
        m[..., 0] = True
        return M.array(m)
    if kind == "bool_heads":
        m = rng.uniform(size=(case["Nq"], Tq, Tk)) > 0.5
        m[..., -1] = True
        return M.array(m)
    shape = (Tq, Tk) if kind == "additive_2d" else (case["B"], case["Nq"], Tq, Tk)
    return M.array(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("case", SDPA_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_matches_mlx(mlx, case, dtype):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((case["B"], case["Nq"], case["Tq"], case["D"])).astype(np.float32)
    k = rng.standard_normal((case["B"], case["Nkv"], case["Tk"], case["D"])).astype(np.float32)
    v = rng.standard_normal((case["B"], case["Nkv"], case["Tk"], case["D"])).astype(np.float32)
    sinks = rng.standard_normal(case["Nq"]).astype(np.float32) if case.get("sinks") else None
    outs = []
    for M in (mx, mlx):
        mask = _mask(M, case, np.random.default_rng(2))
        if isinstance(mask, (mx.array,)) or type(mask).__module__.startswith("mlx"):
            if mask.dtype != M.bool_:
                mask = mask.astype(getattr(M, dtype))
        d = getattr(M, dtype)
        outs.append(M.fast.scaled_dot_product_attention(
            M.array(q).astype(d), M.array(k).astype(d), M.array(v).astype(d),
            scale=case["D"] ** -0.5, mask=mask,
            sinks=None if sinks is None else M.array(sinks).astype(d)))
    _close(outs[0], outs[1], TOL[dtype] * 5)


def test_sdpa_errors_like_mlx(mlx):
    def cases(M):
        q, k = M.ones((1, 4, 3, 8)), M.ones((1, 2, 5, 8))
        sdpa = M.fast.scaled_dot_product_attention
        return [lambda: sdpa(M.ones((4, 3, 8)), k, k, scale=1.0),
                lambda: sdpa(q, M.ones((1, 2, 5, 4)), k, scale=1.0),
                lambda: sdpa(q, k, M.ones((1, 1, 5, 8)), scale=1.0),
                lambda: sdpa(M.ones((1, 3, 3, 8)), k, k, scale=1.0),
                lambda: sdpa(q, M.ones((2, 2, 5, 8)), M.ones((2, 2, 5, 8)), scale=1.0),
                lambda: sdpa(q, k, k, scale=1.0, mask="full"),
                lambda: sdpa(q, k, k, scale=1.0, mask=M.ones((1, 1, 1, 3, 5))),
                lambda: sdpa(q, k, k, scale=1.0, mask=M.ones((3, 5), dtype=M.float64)),
                lambda: sdpa(q, k, k, scale=1.0, sinks=M.ones((3,))),
                lambda: sdpa(q, k, k, scale=1.0, force_fused=True)]
    for ours, theirs in zip(cases(mx), cases(mlx)):
        with pytest.raises(ValueError):
            theirs()
        with pytest.raises(ValueError):
            ours()


def test_cross_entropy_matches_mlx(mlx, rng):
    logits = rng.standard_normal((3, 4, 10)).astype(np.float32)
    t = rng.integers(0, 10, (3, 4))
    for dtype in DTYPES:
        ours = mx.fast.cross_entropy(mx.array(logits).astype(getattr(mx, dtype)), mx.array(t))
        theirs = mlx.fast.cross_entropy(mlx.array(logits).astype(getattr(mlx, dtype)),
                                        mlx.array(t))
        _close(ours, theirs, TOL[dtype] * 5)


def test_cross_entropy_of_large_logits_keeps_its_digits(rng):
    """The loss depends on the gaps between a row's logits only: a row offset by 1e4 or
    1e6 gives the float64 loss of its (rounded) logits, where MLX's CPU composite loses
    the loss in the offset's rounding (nn.losses.cross_entropy takes this path on a GPU,
    and MLX's own test asks this of it)."""
    t = rng.integers(0, 7, 5)
    for offset in (0.0, 1e4, 1e6, 1e20):
        x = (rng.standard_normal((5, 7)) + offset).astype(np.float32)
        w = x.astype(np.float64)
        top = w.max(axis=1, keepdims=True)
        want = np.log(np.exp(w - top).sum(axis=1)) - (w[np.arange(5), t] - top[:, 0])
        got = np.array(mx.fast.cross_entropy(mx.array(x), mx.array(t)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- transform rules --------------------------------------------------------------------------

def _fns(M, which):
    if which == "rms":
        return lambda x, w: M.fast.rms_norm(x, w, 1e-5)
    if which == "ln":
        return lambda x, w, b_: M.fast.layer_norm(x, w, b_, 1e-5)
    if which == "rope":
        return lambda x: M.fast.rope(x, 6, traditional=True, base=100.0, scale=0.5, offset=2)
    return lambda q, k, v: M.fast.scaled_dot_product_attention(q, k, v, scale=0.3,
                                                               mask="causal")


SHAPES = {"rms": [(3, 4, 8), (8,)], "ln": [(3, 8), (8,), (8,)], "rope": [(2, 3, 5, 8)],
          "sdpa": [(1, 4, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8)]}


@pytest.mark.parametrize("which", ["rms", "ln", "rope", "sdpa"])
def test_fast_vjp_and_jvp_match_mlx(mlx, rng, which):
    primals = [rng.standard_normal(s).astype(np.float32) for s in SHAPES[which]]
    out_shape = np.array(_fns(mlx, which)(*[mlx.array(p) for p in primals])).shape
    cot = rng.standard_normal(out_shape).astype(np.float32)
    tans = [rng.standard_normal(p.shape).astype(np.float32) for p in primals]
    _, ours = mx.vjp(_fns(mx, which), [mx.array(p) for p in primals], [mx.array(cot)])
    _, theirs = mlx.vjp(_fns(mlx, which), [mlx.array(p) for p in primals], [mlx.array(cot)])
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.array(o), np.array(t), rtol=1e-4, atol=1e-4)
    _, ours = mx.jvp(_fns(mx, which), [mx.array(p) for p in primals], [mx.array(t) for t in tans])
    _, theirs = mlx.jvp(_fns(mlx, which), [mlx.array(p) for p in primals],
                        [mlx.array(t) for t in tans])
    np.testing.assert_allclose(np.array(ours[0]), np.array(theirs[0]), rtol=1e-4, atol=1e-4)


def test_norm_second_order_grad_matches_mlx(mlx, rng):
    x = rng.standard_normal((2, 8)).astype(np.float32)
    w = rng.uniform(0.5, 2, 8).astype(np.float32)

    def outer(M):
        def f(x, w):
            gx, gw = M.grad(lambda x, w: (M.fast.rms_norm(x, w, 1e-5) ** 2).sum(),
                            argnums=(0, 1))(x, w)
            return (gx * gx).sum() + gw.sum()
        return M.grad(f, argnums=(0, 1))
    for o, t in zip(outer(mx)(mx.array(x), mx.array(w)), outer(mlx)(mlx.array(x), mlx.array(w))):
        np.testing.assert_allclose(np.array(o), np.array(t), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("which,in_axes", [("rms", (0, None)), ("rms", (1, 0)),
                                           ("ln", (2, None, 0)), ("rope", 0), ("rope", 2)])
def test_fast_vmap_matches_a_loop(rng, which, in_axes):
    shapes = SHAPES[which]
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,)
    n = 3
    batched = []
    for s, ax in zip(shapes, axes):
        p = rng.standard_normal((n,) + s).astype(np.float32)
        batched.append(p if ax is None else np.moveaxis(p, 0, ax))
    args = [mx.array(p[0] if ax is None else p) for p, ax in zip(batched, axes)]
    out = mx.vmap(_fns(mx, which), in_axes=in_axes)(*args)
    for i in range(n):
        sl = [mx.array(p[0] if ax is None else np.take(p, i, axis=ax))
              for p, ax in zip(batched, axes)]
        np.testing.assert_allclose(np.array(out[i]), np.array(_fns(mx, which)(*sl)),
                                   rtol=1e-5, atol=1e-5)


# -- custom kernels -----------------------------------------------------------------------------

def test_metal_kernel_raises_naming_cuda_kernel():
    k = mx.fast.metal_kernel(name="k", input_names=["x"], output_names=["y"],
                             source="y[0] = x[0];")
    with pytest.raises(RuntimeError, match="cuda_kernel"):
        k(inputs=[mx.ones(2)], output_shapes=[(2,)], output_dtypes=[mx.float32],
          grid=(2, 1, 1), threadgroup=(2, 1, 1))


def test_cuda_kernel_source_is_mlx_signature():
    x = mx.ones((2, 3))
    src = custom_kernel._source("custom_kernel_k_4_t", "", "out[0] = inp[0];", ["inp"], [x],
                                [(True, False, True)], ["out"], [mx.float16],
                                [("N", 4), ("FLAG", True), ("T", mx.bfloat16)])
    assert "const float* inp,\n    const int32_t* inp_shape,\n    const int inp_ndim" in src
    assert "__half* out) {" in src
    assert "constexpr int N = 4;" in src and "constexpr bool FLAG = true;" in src
    assert "using T = __nv_bfloat16;" in src
    assert custom_kernel._template_hash([("N", 4), ("FLAG", True), ("T", mx.bfloat16)]) == \
        "_4_t___nv_bfloat16"


@pytest.mark.skipif(mx.is_available(mx.gpu), reason="a GPU is present")
def test_cuda_kernel_without_a_gpu_raises():
    with pytest.raises(RuntimeError, match="No CUDA back-end"):
        mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=["y"],
                            source="y[0] = x[0];")


@requires_gpu
def test_cuda_kernel_runs_on_a_gpu_stream(rng):
    s = mx.new_stream(mx.gpu)
    source = """
        uint elem = blockIdx.x * blockDim.x + threadIdx.x;
        if (elem < inp_shape[0] * inp_shape[1]) {
            T v = inp[elem];
            out[elem] = exp(v) * SCALE;
            twice[elem] = v + v;
        }
    """
    k = mx.fast.cuda_kernel(name="myexp", input_names=["inp"], output_names=["out", "twice"],
                            source=source)
    a = rng.standard_normal((4, 33)).astype(np.float32)
    out, twice = k(inputs=[mx.array(a)], template=[("T", mx.float32), ("SCALE", 2)],
                   grid=(a.size, 1, 1), threadgroup=(64, 1, 1), output_shapes=[a.shape] * 2,
                   output_dtypes=[mx.float32, mx.float32], stream=s)
    np.testing.assert_allclose(np.array(out), np.exp(a) * 2, rtol=1e-5)
    np.testing.assert_allclose(np.array(twice), 2 * a, rtol=1e-6)
    with pytest.raises(ValueError, match="GPU"):
        k(inputs=[mx.array(a)], template=[("T", mx.float32), ("SCALE", 2)], grid=(1, 1, 1),
          threadgroup=(1, 1, 1), output_shapes=[a.shape] * 2,
          output_dtypes=[mx.float32] * 2, stream=mx.cpu)


@requires_gpu
def test_cuda_kernel_strides_init_value_and_bfloat16(rng):
    s = mx.new_stream(mx.gpu)
    source = """
        uint i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < x_shape[1]) {
            out[i] = x[i * x_strides[1]] + __float2bfloat16(1.0f);
        }
        if (i == 0) { acc[0] = acc[0] + 5.0f; }
    """
    k = mx.fast.cuda_kernel(name="strided", input_names=["x"], output_names=["out", "acc"],
                            source=source, ensure_row_contiguous=False)
    a = mx.array(rng.standard_normal((3, 8)).astype(np.float32)).astype(mx.bfloat16)
    at = mx.transpose(a, stream=s)  # (8, 3): rows of stride 1, columns of stride 8
    out, acc = k(inputs=[at], grid=(3, 1, 1), threadgroup=(32, 1, 1),
                 output_shapes=[(3,), (1,)], output_dtypes=[mx.bfloat16, mx.float32],
                 init_value=2.0, stream=s)
    assert out.dtype == mx.bfloat16
    expect = (np.array(a.astype(mx.float32))[:, 0] + 1).astype(np.float32)
    np.testing.assert_allclose(np.array(out.astype(mx.float32)), expect, rtol=1e-2)
    assert acc.tolist() == [7.0]


def test_fast_docstrings_run():
    for module in (fast, custom_kernel):
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        for test in finder.find(module, globs={"mx": mx}):
            runner.run(test)
        assert runner.failures == 0, module.__name__


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fast_on_a_gpu_stream_matches_the_cpu(rng, dtype):
    g = mx.new_stream(mx.gpu)
    d = getattr(mx, dtype)
    x = mx.array(rng.standard_normal((2, 4, 6, 16)).astype(np.float32)).astype(d)
    w = mx.array(rng.uniform(0.5, 2, 16).astype(np.float32)).astype(d)
    k = mx.array(rng.standard_normal((2, 2, 9, 16)).astype(np.float32)).astype(d)
    calls = [lambda s: mx.fast.rms_norm(x, w, 1e-5, stream=s),
             lambda s: mx.fast.layer_norm(x, w, w, 1e-5, stream=s),
             lambda s: mx.fast.rope(x, 8, traditional=True, base=1e4, scale=1.0,
                                    offset=mx.array([3, 7]), stream=s),
             lambda s: mx.fast.scaled_dot_product_attention(x, k, k, scale=0.25, mask="causal",
                                                            stream=s)]
    for call in calls:
        np.testing.assert_allclose(_host(call(g)), _host(call(mx.cpu)), rtol=3e-2, atol=3e-2)


# -- the CPU kernels' short ways give the long ways' bits --------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_the_norms_mean_is_numpys_mean(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    v = (rng.standard_normal((7, n)) * 10.0 ** rng.integers(-20, 20)).astype(np.float32)
    np.testing.assert_array_equal(fast._mean_last(np, v), np.mean(v, -1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("traditional", [False, True])
def test_rope_kept_angles_give_the_computed_ones_bits(monkeypatch, dtype, traditional):
    rng = np.random.default_rng(7)
    for _ in range(20):
        length = int(rng.integers(1, 5))
        dims = 2 * int(rng.integers(1, 9))
        x = rng.standard_normal((2, 3, length, dims + 2 * int(rng.integers(0, 2))))
        x = x.astype(dtype)
        kw = dict(dims=dims, traditional=traditional, base=float(rng.choice([1e4, 5e5])),
                  scale=float(rng.choice([1.0, 0.5])), forward=bool(rng.integers(0, 2)))
        offset = np.array(int(rng.integers(0, 100000)), np.int32)
        kept = fast._rope(np, x, offset, **kw)
        with monkeypatch.context() as m:
            m.setattr(fast, "_SMALL_ANGLES", -1)  # computed each time
            computed = fast._rope(np, x, offset, **kw)
        assert kept.dtype == computed.dtype == dtype
        np.testing.assert_array_equal(kept, computed)
