"""Convolutions against the mlx oracle (randomized shapes, strides, paddings, dilations,
groups, flips) and their transform rules (adjoint identity, vmap against a loop)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from streamlet.core.array import wrap
from conftest import requires_gpu



def oracle(n):
    """Settings for a hypothesis test that also takes the (stateless) mlx fixture."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _rule(y, name, *args):
    n = y._node
    return getattr(n.prim, name)(*args, *[wrap(i) for i in n.inputs], **n.params)


@st.composite
def conv_cases(draw, transposed=False):
    nd = draw(st.integers(1, 3))
    groups = draw(st.sampled_from([1, 2, 3])) if nd < 3 and not transposed else 1
    cg = draw(st.integers(1, 3))
    og = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    kdil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    idil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    lo = tuple(draw(st.integers(-1, 3)) for _ in range(nd))
    hi = tuple(draw(st.integers(-1, 3)) for _ in range(nd))
    # inputs long enough for the kernel
    spatial = tuple(max(draw(st.integers(1, 7)), (k - 1) * d + 3) for k, d in zip(kernel, kdil))
    n = draw(st.integers(1, 2))
    return dict(nd=nd, groups=groups, x=(n,) + spatial + (groups * cg,),
                w=(groups * og,) + kernel + (cg,), stride=stride, kdil=kdil, idil=idil,
                lo=lo, hi=hi, flip=draw(st.booleans()), seed=draw(st.integers(0, 99)))


@oracle(40)
@given(conv_cases())
def test_conv_general_matches_mlx(mlx, case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x"]).astype(np.float32)
    w = rng.standard_normal(case["w"]).astype(np.float32)
    kw = dict(stride=list(case["stride"]), padding=(list(case["lo"]), list(case["hi"])),
              kernel_dilation=list(case["kdil"]), input_dilation=list(case["idil"]),
              groups=case["groups"], flip=case["flip"])
    try:
        ref = np.array(mlx.conv_general(mlx.array(x), mlx.array(w), **kw))
    except ValueError:
        with pytest.raises(ValueError, match=r"\[conv\]"):
            mx.conv_general(mx.array(x), mx.array(w), **kw)
        return
    out = mx.conv_general(mx.array(x), mx.array(w), **kw)
    assert out.shape == ref.shape and out.dtype == mx.float32
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-4, atol=1e-4)


@oracle(25)
@given(conv_cases(transposed=True), st.integers(0, 1))
def test_conv_transpose_matches_mlx(mlx, case, out_pad):
    nd = case["nd"]
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x"]).astype(np.float32)
    w = rng.standard_normal(case["w"][:1] + case["w"][1:-1] + case["x"][-1:]).astype(np.float32)
    pad = tuple(max(p, 0) for p in case["lo"])
    name = f"conv_transpose{nd}d"
    kw = dict(stride=case["stride"], padding=pad, dilation=case["kdil"],
              output_padding=(out_pad,) * nd)
    if nd == 1:
        kw = {k: v[0] for k, v in kw.items()}
    try:
        ref = np.array(getattr(mlx, name)(mlx.array(x), mlx.array(w), **kw))
    except ValueError:
        with pytest.raises(ValueError):
            getattr(mx, name)(mx.array(x), mx.array(w), **kw)
        return
    out = getattr(mx, name)(mx.array(x), mx.array(w), **kw)
    assert out.shape == ref.shape
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,wshape,kw", [
    ((2, 9, 9, 8), (8, 3, 3, 1), dict(padding=1, groups=8)),               # depthwise
    ((2, 9, 9, 8), (16, 3, 3, 2), dict(stride=2, groups=4)),               # small groups
    ((1, 6, 6, 64), (64, 3, 3, 32), dict(padding=(1, 0), groups=2)),       # large groups
    ((1, 10, 96), (96, 3, 1), dict(padding=2, dilation=2, groups=96)),     # depthwise 1d
    ((2, 8, 8, 6), (4, 1, 1, 6), {}),                                      # 1x1
])
def test_conv_forms_match_mlx(mlx, rng, shape, wshape, kw):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(wshape).astype(np.float32)
    name = "conv1d" if len(shape) == 3 else "conv2d"
    ref = np.array(getattr(mlx, name)(mlx.array(x), mlx.array(w), **kw))
    out = getattr(mx, name)(mx.array(x), mx.array(w), **kw)
    np.testing.assert_allclose(np.array(out), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_conv_dtypes(mlx, rng, dtype):
    x = rng.standard_normal((2, 6, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    ref = mlx.conv2d(mlx.array(x).astype(getattr(mlx, dtype)),
                     mlx.array(w).astype(getattr(mlx, dtype)), padding=1, stream=mlx.cpu)
    out = mx.conv2d(mx.array(x).astype(getattr(mx, dtype)),
                    mx.array(w).astype(getattr(mx, dtype)), padding=1)
    assert out.dtype == getattr(mx, dtype)
    tol = 1e-6 if dtype == "float64" else 5e-2
    np.testing.assert_allclose(np.array(out.astype(mx.float32)),
                               np.array(ref.astype(mlx.float32)), rtol=tol, atol=tol * 10)
    # mixed dtypes promote, and an integer weight is allowed (MLX checks the input only)
    assert mx.conv2d(mx.array(x), mx.array(w).astype(mx.float16)).dtype == mx.float32
    assert mx.conv2d(mx.array(x), mx.array(w).astype(mx.int32)).dtype == mx.float32


def test_conv_errors_like_mlx(mlx):
    cases = [
        ("conv2d", (1, 5, 5, 2), (3, 3, 3, 2), dict(), "int32"),           # integer input
        ("conv2d", (1, 5, 5), (3, 3, 3, 2), dict(), None),                 # input rank
        ("conv2d", (1, 5, 5, 2), (3, 3, 2), dict(), None),                 # weight rank
        ("conv2d", (1, 5, 5, 2), (3, 3, 3, 3), dict(), None),              # channels
        ("conv2d", (1, 5, 5, 4), (3, 3, 3, 2), dict(groups=2), None),      # C_out % groups
        ("conv2d", (1, 5, 5, 3), (4, 3, 3, 1), dict(groups=2), None),      # C_in % groups
        ("conv2d", (1, 2, 2, 2), (3, 3, 3, 2), dict(), None),              # kernel too big
        ("conv2d", (1, 5, 5, 2), (3, 3, 3, 2), dict(stride=0), None),      # stride
        ("conv2d", (1, 5, 5, 2), (3, 3, 3, 2), dict(dilation=0), None),    # dilation
        ("conv3d", (1, 5, 5, 5, 4), (4, 3, 3, 3, 2), dict(groups=2), None),  # groups in 3D
        ("conv_general", (1, 5, 5, 2), (3, 3, 3, 2), dict(stride=[1, 1, 1]), None),
    ]
    for name, xs, ws, kw, dtype in cases:
        for M in (mlx, mx):
            x, w = M.ones(xs), M.ones(ws)
            if dtype:
                x = x.astype(getattr(M, dtype))
            with pytest.raises(ValueError):
                getattr(M, name)(x, w, **kw)


def test_conv_general_padding_forms(mlx, rng):
    x = rng.standard_normal((1, 6, 7, 2)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    for padding in (1, [1, 2], ([0, 1], [2, 0]), ([2], [1]), ([-1, 1], [1, -2])):
        ref = np.array(mlx.conv_general(mlx.array(x), mlx.array(w), padding=padding))
        out = mx.conv_general(mx.array(x), mx.array(w), padding=padding)
        np.testing.assert_allclose(np.array(out), ref, rtol=1e-5, atol=1e-5)


def test_convolutions_run_on_named_streams():
    s = mx.new_stream(mx.cpu)
    y = mx.conv1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), stream=s)
    assert y._node.stream.stream == s
    assert y.tolist() == [[[2.0], [2.0], [2.0]]]


# -- transform rules ------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(conv_cases())
def test_conv_vjp_is_the_adjoint_of_the_jvp(case):
    """<J t, c> == <t, J^T c> for both arguments: the rules are each other's transpose,
    whatever the padding (negative included), dilation, groups and flip."""
    rng = np.random.default_rng(case["seed"])
    x = mx.array(rng.standard_normal(case["x"]).astype(np.float32))
    w = mx.array(rng.standard_normal(case["w"]).astype(np.float32))
    try:
        y = mx.conv_general(x, w, stride=list(case["stride"]),
                            padding=(list(case["lo"]), list(case["hi"])),
                            kernel_dilation=list(case["kdil"]),
                            input_dilation=list(case["idil"]), groups=case["groups"],
                            flip=case["flip"])
    except ValueError:
        return
    cot = rng.standard_normal(y.shape).astype(np.float32)
    gx, gw = _rule(y, "vjp", mx.array(cot), y)
    assert gx.shape == y._node.inputs[0].shape and gw.shape == w.shape
    for k, t in enumerate((y._node.inputs[0].shape, w.shape)):
        tan = rng.standard_normal(t).astype(np.float32)
        tangents = [None, None]
        tangents[k] = mx.array(tan)
        forward = float((np.array(_rule(y, "jvp", tangents, y)) * cot).sum())
        backward = float((np.array((gx, gw)[k]) * tan).sum())
        assert abs(forward - backward) <= 1e-4 * (1 + abs(forward))


def test_conv_vjp_matches_mlx(mlx, rng):
    for xs, ws, kw in [((2, 7, 7, 4), (6, 3, 3, 2), dict(stride=2, padding=1, groups=2)),
                       ((2, 7, 7, 4), (6, 3, 3, 4), dict(padding=([1, 0], [0, 2]),
                                                         kernel_dilation=2, flip=True)),
                       ((1, 5, 5, 5, 2), (3, 2, 2, 2, 2), dict(stride=2, padding=1))]:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        y = mx.conv_general(mx.array(x), mx.array(w), **kw)
        cot = rng.standard_normal(y.shape).astype(np.float32)
        ours = _rule(y, "vjp", mx.array(cot), y)
        _, theirs = mlx.vjp(lambda a, b: mlx.conv_general(a, b, **kw),
                            [mlx.array(x), mlx.array(w)], [mlx.array(cot)])
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(np.array(o), np.array(t), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_vmap_matches_a_loop(rng, groups):
    X = rng.standard_normal((3, 2, 7, 4)).astype(np.float32)
    W = rng.standard_normal((3, 6, 3, 4 // groups)).astype(np.float32)
    kw = dict(stride=2, padding=1, groups=groups)
    y = mx.conv_general(mx.array(X[0]), mx.array(W[0]), **kw)
    for axes in [(0, None), (None, 0), (None, 2), (0, 0), (2, None)]:
        xs = X if axes[0] is not None else X[0]
        ws = W if axes[1] is not None else W[0]
        xs = np.moveaxis(xs, 0, axes[0]) if axes[0] else xs
        ws = np.moveaxis(ws, 0, axes[1]) if axes[1] else ws
        out, ax = y._node.prim.vmap(axes, y, mx.array(xs), mx.array(ws), **y._node.params)
        ref = np.stack([np.array(mx.conv_general(
            mx.array(X[i] if axes[0] is not None else X[0]),
            mx.array(W[i] if axes[1] is not None else W[0]), **kw)) for i in range(3)])
        np.testing.assert_allclose(np.moveaxis(np.array(out), ax, 0), ref, rtol=1e-5,
                                   atol=1e-5)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_conv_on_a_gpu_stream_matches_the_cpu(rng, dtype):
    g = mx.new_stream(mx.gpu)
    cases = [((2, 9, 9, 8), (8, 3, 3, 1), dict(padding=1, groups=8)),
             ((2, 9, 9, 8), (16, 3, 3, 2), dict(stride=2, groups=4)),
             ((1, 6, 6, 64), (64, 3, 3, 32), dict(padding=(1, 0), groups=2)),
             ((2, 7, 7, 4), (6, 3, 3, 4), dict(stride=2, padding=1, dilation=2))]
    for xs, ws, kw in cases:
        x = mx.array(rng.standard_normal(xs).astype(np.float32)).astype(getattr(mx, dtype))
        w = mx.array(rng.standard_normal(ws).astype(np.float32)).astype(getattr(mx, dtype))
        cpu = mx.conv2d(x, w, **kw, stream=mx.cpu)
        gpu = mx.conv2d(x, w, **kw, stream=g)
        assert gpu.dtype == cpu.dtype
        np.testing.assert_allclose(np.array(gpu.astype(mx.float32)),
                                   np.array(cpu.astype(mx.float32)), rtol=2e-2, atol=2e-2)
    y = mx.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, stream=g)
    ref = mx.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, stream=mx.cpu)
    np.testing.assert_allclose(np.array(y.astype(mx.float32)), np.array(ref.astype(mx.float32)),
                               rtol=2e-2, atol=2e-2)
