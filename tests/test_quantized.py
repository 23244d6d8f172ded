"""Quantization against the mlx oracle: packed words, scales and biases bit for bit in
every mode, group size and bit width; MLX-quantized weights loaded here dequantize and
multiply to MLX's results; gathered products; fp8 codecs; errors; vjp rules."""
import itertools

import numpy as np
import pytest

import streamlet.core as mx
from conftest import requires_gpu
from nn_oracle import numpy as _host


def _to_ours(a):
    """An mlx array as a streamlet array of the same dtype and bits."""
    h = _host(a)
    out = mx.array(h)
    return out.astype(mx.bfloat16) if "bfloat16" in str(a.dtype) else out


def _same(ours, theirs):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(_host(ours), _host(theirs))


AFFINE = list(itertools.product(["float32", "float16", "bfloat16"], [32, 64, 128],
                                [2, 3, 4, 5, 6, 8]))


@pytest.mark.parametrize("dtype,gs,bits", AFFINE)
def test_affine_quantize_matches_mlx_bit_for_bit(mlx, rng, dtype, gs, bits):
    w = (rng.standard_normal((2, 3, 256)) * rng.uniform(0.01, 10)).astype(np.float32)
    w[0, 0, :gs] = 0.5  # a constant group: zero range
    w[0, 1, :gs] = np.linspace(-1, 0, gs)  # the negative edge is the larger
    ours = mx.quantize(mx.array(w).astype(getattr(mx, dtype)), gs, bits)
    theirs = mlx.quantize(mlx.array(w).astype(getattr(mlx, dtype)), gs, bits)
    assert type(ours) is type(theirs) is list
    for o, t in zip(ours, theirs):
        _same(o, t)
    # MLX's packed weights, dequantized here, give MLX's values bit for bit
    loaded = [_to_ours(t) for t in theirs]
    _same(mx.dequantize(*loaded, gs, bits), mlx.dequantize(*theirs, gs, bits))


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fp_quantize_matches_mlx_bit_for_bit(mlx, rng, mode, dtype):
    for scale in (1e-3, 1.0, 300.0):
        w = (rng.standard_normal((3, 128)) * scale).astype(np.float32)
        w[0, :8] = [0.25, 0.75, -0.25, 2.5, -5.0, 0.0, -0.1, 1.75]  # fp4 ties and zeros
        w[1, :32] = 0.0  # an all-zero group
        w[2, :4] = [1e-30, -3e4, 1e-39, 7.0]
        globals_ = [None, 2.5] if mode == "nvfp4" else [None]
        for g in globals_:
            kw_m = {} if g is None else dict(global_scale=mlx.array(g, dtype=mlx.float32))
            kw_s = {} if g is None else dict(global_scale=mx.array(g, dtype=mx.float32))
            theirs = mlx.quantize(mlx.array(w).astype(getattr(mlx, dtype)), mode=mode, **kw_m)
            ours = mx.quantize(mx.array(w).astype(getattr(mx, dtype)), mode=mode, **kw_s)
            assert len(ours) == len(theirs) == 2
            for o, t in zip(ours, theirs):
                _same(o, t)
            for out in (None, "float32", "float16"):
                kd_m = {} if out is None else dict(dtype=getattr(mlx, out))
                kd_s = {} if out is None else dict(dtype=getattr(mx, out))
                _same(mx.dequantize(*[_to_ours(t) for t in theirs], mode=mode, **kw_s, **kd_s),
                      mlx.dequantize(*theirs, mode=mode, **kw_m, **kd_m))


def test_fp8_codecs_match_mlx(mlx, rng):
    codes = np.arange(256, dtype=np.uint8)
    for d in ("float32", "float16", "bfloat16"):
        _same(mx.from_fp8(mx.array(codes), getattr(mx, d)),
              mlx.from_fp8(mlx.array(codes), getattr(mlx, d)))
    assert mx.from_fp8(mx.array(codes)).dtype == mx.bfloat16
    x = np.concatenate([rng.standard_normal(2000) * 10 ** rng.uniform(-4, 3, 2000),
                        [0.0, -0.0, 448.0, 464.0, 465.0, 1e9, np.inf, -np.inf, np.nan,
                         2.0 ** -9, 2.0 ** -10, 1.5 * 2.0 ** -10, 2.0 ** -7]]).astype(np.float32)
    for d in ("float32", "float16", "bfloat16"):
        _same(mx.to_fp8(mx.array(x).astype(getattr(mx, d))),
              mlx.to_fp8(mlx.array(x).astype(getattr(mlx, d))))


@pytest.mark.parametrize("mode,transpose", [("affine", True), ("affine", False),
                                            ("mxfp4", True), ("mxfp8", False),
                                            ("nvfp4", True)])
def test_quantized_matmul_of_mlx_weights(mlx, rng, mode, transpose):
    K, N = 128, 96
    w = rng.standard_normal((N, K) if transpose else (K, N)).astype(np.float32)
    theirs = mlx.quantize(mlx.array(w), mode=mode) if transpose or mode != "affine" else \
        mlx.quantize(mlx.array(w), group_size=32, bits=8)
    gs = None if transpose or mode != "affine" else 32
    bits = None if gs is None else 8
    if not transpose and mode != "affine":
        theirs = mlx.quantize(mlx.array(w), mode=mode)
    loaded = [_to_ours(t) for t in theirs]
    for xshape, dtype in [((K,), "float32"), ((3, K), "float32"), ((2, 5, K), "float16"),
                          ((4, K), "bfloat16")]:
        x = rng.standard_normal(xshape).astype(np.float32)
        args = (dict(biases=theirs[2]) if mode == "affine" else {})
        ref = mlx.quantized_matmul(mlx.array(x).astype(getattr(mlx, dtype)), theirs[0],
                                   theirs[1], transpose=transpose, group_size=gs, bits=bits,
                                   mode=mode, **args)
        args = (dict(biases=loaded[2]) if mode == "affine" else {})
        out = mx.quantized_matmul(mx.array(x).astype(getattr(mx, dtype)), loaded[0], loaded[1],
                                  transpose=transpose, group_size=gs, bits=bits, mode=mode,
                                  **args)
        assert out.shape == ref.shape and str(out.dtype) == str(ref.dtype)
        if dtype == "float32":
            np.testing.assert_allclose(_host(out), _host(ref), rtol=1e-4, atol=1e-4)
        else:  # MLX accumulates in half precision here: compare both with the exact product
            deq = _host(mlx.dequantize(theirs[0], theirs[1], theirs[2] if mode == "affine"
                                       else None, gs, bits, mode=mode, dtype=mlx.float32))
            xh = _host(mlx.array(x).astype(getattr(mlx, dtype))).astype(np.float64)
            exact = xh @ (deq.T if transpose else deq).astype(np.float64)
            scale = np.abs(exact).max()
            assert np.abs(_host(out) - exact).max() <= 1e-2 * scale
            assert np.abs(_host(out) - exact).max() <= np.abs(_host(ref) - exact).max() + \
                1e-3 * scale


def test_quantized_matmul_batches_broadcast(mlx, rng):
    w = rng.standard_normal((3, 1, 16, 64)).astype(np.float32)
    x = rng.standard_normal((1, 4, 5, 64)).astype(np.float32)
    theirs = mlx.quantize(mlx.array(w), 32, 4)
    ref = mlx.quantized_matmul(mlx.array(x), *theirs, group_size=32, bits=4)
    out = mx.quantized_matmul(mx.array(x), *[_to_ours(t) for t in theirs], group_size=32,
                              bits=4)
    assert out.shape == ref.shape == (3, 4, 5, 16)
    np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode", ["affine", "mxfp4", "mxfp8"])
@pytest.mark.parametrize("transpose", [True, False])
def test_half_quantized_matmul_is_the_product_of_dequantize(rng, dtype, mode, transpose):
    """In a half type, a quantized product multiplies `dequantize`'s matrix (each weight
    rounded as dequantize rounds it), summed in float32 and rounded once: within one unit
    in the last place of `x @ dequantize(w)` (the weights left unrounded were ~10 off)."""
    d = getattr(mx, dtype)
    M, K, N = 33, 512, 256
    x = mx.array((rng.standard_normal((2, M, K)) / K ** 0.5).astype(np.float32)).astype(d)
    w = mx.array((rng.standard_normal((N, K) if transpose else (K, N)) / K ** 0.5)
                 .astype(np.float32)).astype(d)
    q = mx.quantize(w, mode=mode)
    biases = q[2] if mode == "affine" else None
    got = mx.quantized_matmul(x, q[0], q[1], biases, transpose, mode=mode)
    w_hat = mx.dequantize(q[0], q[1], biases, mode=mode, dtype=d)
    want = np.array(x.astype(mx.float32), np.float64) @ np.array(
        (w_hat.T if transpose else w_hat).astype(mx.float32), np.float64)
    mantissa = 7 if dtype == "bfloat16" else 10
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -60))) - mantissa)
    err = np.abs(np.array(got.astype(mx.float32), np.float64) - want)
    assert got.dtype == d and np.all(err <= ulp + 1e-6 * np.abs(want).max())


@pytest.mark.parametrize("mode", ["affine", "mxfp4"])
def test_gather_qmm_matches_mlx(mlx, rng, mode):
    E, N, K = 6, 32, 64
    w = rng.standard_normal((E, N, K)).astype(np.float32)
    theirs = mlx.quantize(mlx.array(w), mode=mode)
    loaded = [_to_ours(t) for t in theirs]
    x = rng.standard_normal((4, 1, K)).astype(np.float32)
    for lhs, rhs in [(None, [0, 5, 5, 2]), ([3, 0], [1, 1]), ([[0], [2]], [4, 5, 0])]:
        def run(M, q, xs):
            kw = dict(lhs_indices=None if lhs is None else M.array(lhs),
                      rhs_indices=M.array(rhs), mode=mode)
            return M.gather_qmm(M.array(xs), q[0], q[1], q[2] if mode == "affine" else None,
                                **kw)
        ref, out = run(mlx, theirs, x), run(mx, loaded, x)
        assert out.shape == ref.shape
        np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-4, atol=1e-4)


def test_gather_mm_matches_mlx(mlx, rng):
    a = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
    b_ = rng.standard_normal((7, 5, 3)).astype(np.float32)
    cases = [(None, [0, 6]), ([5, 0, 1, 1, 2, 3, 4], None), ([[1], [4]], [2, 2, 0]),
             ([2, 2], [[3], [3]])]
    for lhs, rhs in cases:
        def run(M):
            return M.gather_mm(M.array(a), M.array(b_), None if lhs is None else M.array(lhs),
                               None if rhs is None else M.array(rhs))
        ref, out = run(mlx), run(mx)
        assert out.shape == ref.shape
        np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-5, atol=1e-5)
    # a 1-D operand is a matrix of one row (or column), squeezed out again
    v = rng.standard_normal(5).astype(np.float32)
    ref = mlx.gather_mm(mlx.array(v), mlx.array(b_), rhs_indices=mlx.array([1, 2]))
    out = mx.gather_mm(mx.array(v), mx.array(b_), rhs_indices=mx.array([1, 2]))
    assert out.shape == ref.shape
    np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-5, atol=1e-5)


def test_quantization_errors_like_mlx(mlx):
    def both(fn):
        for M in (mlx, mx):
            with pytest.raises(ValueError):
                fn(M)
    both(lambda M: M.quantize(M.ones((4, 64)), mode="int4"))
    both(lambda M: M.quantize(M.ones((64,))))
    both(lambda M: M.quantize(M.ones((4, 60))))
    both(lambda M: M.quantize(M.ones((4, 64), dtype=M.int32)))
    both(lambda M: M.quantize(M.ones((4, 64)), group_size=16))
    both(lambda M: M.quantize(M.ones((4, 64)), bits=7))
    both(lambda M: M.quantize(M.ones((4, 64)), mode="mxfp4", group_size=64))
    both(lambda M: M.quantize(M.ones((4, 64)), mode="mxfp8", bits=4))
    both(lambda M: M.quantize(M.ones((4, 64)), mode="mxfp4",
                              global_scale=M.array(1.0)))
    both(lambda M: M.quantize(M.ones((4, 64)), mode="nvfp4",
                              global_scale=M.array([1.0, 2.0])))
    q = {M: M.quantize(M.ones((4, 64))) for M in (mlx, mx)}
    both(lambda M: M.dequantize(q[M][0], q[M][1]))                     # no biases
    both(lambda M: M.dequantize(q[M][0].astype(M.int32), *q[M][1:]))   # not uint32
    both(lambda M: M.dequantize(q[M][0], q[M][1][:, :0], q[M][2][:, :0]))
    both(lambda M: M.dequantize(q[M][0], *q[M][1:], mode="mxfp4"))
    both(lambda M: M.quantized_matmul(M.ones((2, 32)), *q[M]))         # inner size
    f = {M: M.quantize(M.ones((4, 64)), mode="mxfp4") for M in (mlx, mx)}
    both(lambda M: M.quantized_matmul(M.ones((2, 64), dtype=M.int32), *f[M], mode="mxfp4"))
    both(lambda M: M.quantized_matmul(M.ones((2, 64)), *f[M], mode="affine"))
    both(lambda M: M.gather_qmm(M.ones((2, 1, 64)), *q[M],
                                rhs_indices=M.array([0.5])))
    both(lambda M: M.gather_mm(M.ones((2, 3)), M.ones((4, 2)), rhs_indices=M.array([0])))
    both(lambda M: M.from_fp8(M.ones((2,))))
    both(lambda M: M.to_fp8(M.ones((2,), dtype=M.int32)))


def test_quantized_matmul_vjp_matches_mlx(mlx, rng):
    w = rng.standard_normal((16, 64)).astype(np.float32)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    c = rng.standard_normal((3, 16)).astype(np.float32)
    theirs = mlx.quantize(mlx.array(w), 32, 4)
    ours = [_to_ours(t) for t in theirs]

    def f(M, q):
        return lambda x, s, b_: M.quantized_matmul(x, q[0], s, b_, group_size=32, bits=4)
    _, ref = mlx.vjp(f(mlx, theirs), [mlx.array(x), theirs[1], theirs[2]], [mlx.array(c)])
    _, got = mx.vjp(f(mx, ours), [mx.array(x), ours[1], ours[2]], [mx.array(c)])
    for g, r in zip(got, ref):
        np.testing.assert_allclose(np.array(g), np.array(r), rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError):
        mx.vjp(lambda w_: mx.quantized_matmul(mx.array(x), w_, ours[1], ours[2], group_size=32,
                                              bits=4), [ours[0]], [mx.array(c)])


def test_quantize_on_a_named_stream():
    s = mx.new_stream(mx.cpu)
    w_q, scales, biases = mx.quantize(mx.ones((2, 64)), stream=s)
    assert w_q._node.stream.stream == s
    assert mx.dequantize(w_q, scales, biases, stream=s).tolist() == [[1.0] * 64] * 2


@requires_gpu
@pytest.mark.parametrize("mode", ["affine", "mxfp4", "mxfp8", "nvfp4"])
def test_quantization_on_a_gpu_stream_matches_the_cpu(rng, mode):
    g = mx.new_stream(mx.gpu)
    w = mx.array(rng.standard_normal((4, 32, 128)).astype(np.float32))
    for dtype in ("float32", "bfloat16"):
        wd = w.astype(getattr(mx, dtype))
        q_cpu = mx.quantize(wd, mode=mode, stream=mx.cpu)
        q_gpu = mx.quantize(wd, mode=mode, stream=g)
        for a, b_ in zip(q_gpu, q_cpu):
            np.testing.assert_array_equal(_host(a), _host(b_))
        biases = q_cpu[2] if mode == "affine" else None
        np.testing.assert_array_equal(
            _host(mx.dequantize(*q_cpu, mode=mode, stream=g)),
            _host(mx.dequantize(*q_cpu, mode=mode, stream=mx.cpu)))
        x = mx.array(rng.standard_normal((4, 5, 128)).astype(np.float32))
        for gather in (False, True):
            fn = mx.gather_qmm if gather else mx.quantized_matmul
            kw = dict(rhs_indices=mx.array([0, 3, 3])) if gather else {}
            args = (x[:3, :1] if gather else x, q_cpu[0], q_cpu[1], biases)
            out_g = fn(*args, mode=mode, **kw, stream=g)
            out_c = fn(*args, mode=mode, **kw, stream=mx.cpu)
            np.testing.assert_allclose(np.array(out_g), np.array(out_c), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("bits", [3, 4, 8])
def test_numpy_and_compiled_paths_agree(mlx, rng, monkeypatch, bits):
    """The NumPy kernels (what CuPy runs, and the CPU without numba) give the compiled
    kernels' bits and products."""
    from streamlet.core.ops import quantized as q
    w = (rng.standard_normal((16, 128)) * 2).astype(np.float32)
    x = rng.standard_normal((2, 128)).astype(np.float32)
    compiled = mx.quantize(mx.array(w), 32, bits)
    ref = mx.quantized_matmul(mx.array(x), *compiled, group_size=32, bits=bits)
    monkeypatch.setattr(q, "_numba", None)
    plain = mx.quantize(mx.array(w), 32, bits)
    for a, b_ in zip(plain, compiled):
        np.testing.assert_array_equal(np.array(a), np.array(b_))
    out = mx.quantized_matmul(mx.array(x), *plain, group_size=32, bits=bits)
    np.testing.assert_allclose(np.array(out), np.array(ref), rtol=1e-5, atol=1e-5)
    for a, b_ in zip(plain, mlx.quantize(mlx.array(w), 32, bits)):
        np.testing.assert_array_equal(np.array(a), np.array(b_))
