"""The CUDA backend (issues 5 and 6): GPU streams, fusion, cross-stream order, failures.

Everything here needs CuPy and a CUDA GPU; CI has neither, so the module skips there.
"""
import threading
import time
import traceback

import numpy as np
import pytest

import streamlet.core as mx
from conftest import fresh_default_device, requires_gpu

cp = pytest.importorskip("cupy")
pytestmark = requires_gpu

G = mx.gpu
RNG = np.random.default_rng(5)


def gpu_and_cpu(fn, *arrays):
    """fn on the GPU default stream and on the CPU stream, as NumPy arrays (bfloat16 as
    ml_dtypes': `__array__`, since NumPy's own reading refuses MLX's bfloat16 buffer)."""
    with mx.stream(mx.cpu):
        want = np.array(fn(*[mx.array(a) for a in arrays]).__array__())
    with mx.stream(G):
        got = np.array(fn(*[mx.array(a) for a in arrays]).__array__())
    return got, want


def sample(shape, dtype):
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(1, 50, shape).astype(dtype)
    return (RNG.standard_normal(shape) * 3).astype(dtype)


# -- devices ------------------------------------------------------------------------------
def test_gpu_is_the_default_device_and_described():
    assert mx.is_available(G) and mx.device_count(G) >= 1
    assert fresh_default_device() == "Device(gpu, 0)"
    info = mx.device_info(G)
    assert info["device_name"] and info["architecture"].startswith("sm_")
    assert info["memory_size"] > 1 << 30


def test_gpu_arrays_are_cupy_arrays_inside():
    a = mx.multiply(mx.arange(10, stream=G), 2, stream=G)
    mx.eval(a)
    assert a.tolist() == list(range(0, 20, 2))
    assert np.array_equal(cp.asnumpy(cp.from_dlpack(a)), np.arange(0, 20, 2))


# -- elementwise ops, fused ----------------------------------------------------------------
UNARY = ["abs", "negative", "sign", "square", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p",
         "sin", "cos", "tanh", "sigmoid", "floor", "ceil", "isnan", "isfinite", "logical_not",
         "reciprocal", "trunc"]
BINARY = ["add", "subtract", "multiply", "divide", "minimum", "maximum", "equal", "less",
          "greater_equal", "logical_and", "power", "arctan2", "floor_divide", "remainder"]
DTYPES = [np.float32, np.int32, np.float16, np.float64, np.uint8, np.bool_]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_unary_matches_cpu(name, dtype):
    x = sample((33, 7), dtype)
    if name in ("sqrt", "rsqrt", "log", "log1p"):
        x = np.abs(x) + dtype(1)
    got, want = gpu_and_cpu(getattr(mx, name), x)
    assert got.dtype == want.dtype
    if got.dtype != np.float64:  # mx.array makes float64 data float32, as MLX does
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_matches_cpu_with_broadcasting(name, dtype):
    if name in ("power", "arctan2") and dtype in (np.bool_, np.uint8):
        pytest.skip("not a meaningful pair")
    x, y = sample((5, 1, 6), dtype), sample((4, 6), dtype)
    if dtype == np.bool_ and name in ("subtract", "floor_divide", "remainder", "divide"):
        pytest.skip("refused for bool")
    got, want = gpu_and_cpu(getattr(mx, name), x, y)
    assert got.dtype == want.dtype and got.shape == (5, 4, 6)
    tol = 1e-3 if dtype == np.float16 else 2e-6
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol)


def test_arithmetic_chain_is_bit_exact_with_scalars():
    x = sample((1000,), np.float32)

    def chain(a):
        for i in range(50):
            a = a * 1.0001 + 0.5 - i * 0.25
        return mx.where(a > 0, a, -a) / 3
    got, want = gpu_and_cpu(chain, x)
    assert np.array_equal(got, want)


def test_mixed_dtype_chain():
    x, y = sample((64,), np.int32), sample((64,), np.float32)

    def chain(a, b):
        c = (a + 3) * 2  # int32
        return mx.astype(c, mx.float32) * b + mx.astype(a > 10, mx.float32)
    got, want = gpu_and_cpu(chain, x, y)
    assert np.array_equal(got, want)


def test_intermediates_read_after_the_eval_that_fused_them():
    x = mx.array(np.arange(8, dtype=np.float32))
    a = x * 2
    b = a + 1
    c = b * b
    mx.eval(c)
    assert c.tolist() == [(2 * i + 1) ** 2 for i in range(8)]
    assert b.tolist() == [2 * i + 1 for i in range(8)]
    assert a.tolist() == [2 * i for i in range(8)]
    d = a - 1  # an intermediate of a finished eval feeding a new chain
    assert d.tolist() == [2 * i - 1 for i in range(8)]


def test_eval_of_two_outputs_of_one_chain():
    x = mx.array(np.ones(5, np.float32))
    a = x + 1
    b = a * 3
    c = a * 5
    mx.eval(b, c)
    assert b.tolist() == [6.0] * 5 and c.tolist() == [10.0] * 5


def test_one_kernel_per_structure_whatever_the_constants():
    from streamlet.backend import cuda_fuse
    x = mx.array(np.ones(16, np.float32))
    mx.eval(x * 2.5 + 1.25)
    n = len(cuda_fuse._kernels)
    for k in range(2, 7):
        y = x * float(k) + 0.5 * k
        mx.eval(y)
        assert y.tolist() == [k + 0.5 * k] * 16
    assert len(cuda_fuse._kernels) == n


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_subnormals_read_as_true(dtype):
    """A subnormal is a true value as NumPy and MLX read it, though CuPy's kernels flush
    subnormals to zero: casts, conditions and logical ops read the bits."""
    raw = np.array([1, 0, 3], dtype=np.uint32 if dtype == "float32" else np.uint16)
    fns = [lambda t: t.astype(mx.bool_), lambda t: mx.where(t, 1, 2),
           lambda t: mx.logical_not(t), lambda t: mx.logical_and(t, t),
           lambda t: mx.any(t[:1]), lambda t: mx.all(t[:1]), lambda t: mx.all(t, axis=0)]
    for fn in fns:
        with mx.stream(mx.cpu):
            want = fn(mx.array(raw).view(getattr(mx, dtype))).tolist()
        with mx.stream(G):
            got = fn(mx.array(raw).view(getattr(mx, dtype))).tolist()
        assert got == want


def test_odd_sizes_strides_and_broadcast_leaves():
    for n in (1, 3, 5, 1023, 4097):
        a = sample((n,), np.float32)
        got, want = gpu_and_cpu(lambda t: t * 2 + 1, a)
        assert np.array_equal(got, want)
    m = sample((6, 9), np.float32)
    got, want = gpu_and_cpu(lambda t: mx.transpose(t) * 2 + t[0:1, 0:6].reshape(6, 1)[0], m)
    np.testing.assert_array_equal(got, want)
    got, want = gpu_and_cpu(lambda t: t[::2, 1::3] + 1, m)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("leaf", [(7,), (5, 7), (1, 7), (1, 1, 7), (3, 5, 1), (3, 1, 7),
                                  (1,), "strided row"])
@pytest.mark.parametrize("rows", [1, 5, 1031])
def test_a_broadcast_leaf_is_read_in_place_or_copied(leaf, rows):
    """A row repeated along leading axes (a bias) is read at the index modulo its size,
    other broadcasts are copied to the output's shape: both as the CPU computes."""
    x = sample((3, rows, 7), np.float32)
    if leaf == "strided row":
        b = sample((7, 2), np.float32)
        got, want = gpu_and_cpu(lambda t, u: mx.tanh(t) * u[:, 0] + 1, x, b)
    else:
        if rows != 5 and len(leaf) > 1 and leaf[-2] == 5:
            leaf = leaf[:-2] + (rows,) + leaf[-1:]
        b = sample(leaf, np.float32)
        got, want = gpu_and_cpu(lambda t, u: mx.tanh(t) * u + u, x, b)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# -- other ops -------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda a: mx.sum(a, axis=1), lambda a: mx.mean(a), lambda a: mx.max(a, axis=0),
    lambda a: mx.argmax(a, axis=1), lambda a: mx.cumsum(a, axis=1),
    lambda a: mx.reshape(a, (9, 6)), lambda a: mx.concatenate([a, a * 2], axis=0),
    lambda a: mx.sort(a, axis=1), lambda a: a[1:4, ::2], lambda a: mx.softmax(a, axis=-1),
    lambda a: mx.take(a, mx.array([0, 2, 5]), axis=0), lambda a: mx.tile(a, (2, 1)),
], ids=["sum", "mean", "max", "argmax", "cumsum", "reshape", "concat", "sort", "slice",
        "softmax", "take", "tile"])
def test_other_ops_match_cpu(fn):
    got, want = gpu_and_cpu(fn, sample((6, 9), np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_matmul_uses_tf32_within_its_precision():
    a, b = sample((64, 96), np.float32), sample((96, 32), np.float32)
    got = np.array(mx.matmul(mx.array(a), mx.array(b), stream=G))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-3 * np.abs(want).max())
    # float64 is no GPU work (MLX's rule): the GPU refuses it, a CPU stream computes it
    a64, b64 = mx.array(a, mx.float64), mx.array(b, mx.float64)
    with pytest.raises(ValueError, match="float64 is not supported on the GPU"):
        mx.matmul(a64, b64, stream=G)
    got64 = np.array(mx.matmul(a64, b64, stream=mx.cpu))
    np.testing.assert_allclose(got64, want, rtol=1e-12)


@pytest.mark.parametrize("shape,axis,keepdims", [
    ((1024, 4096), 0, False), ((64, 3, 50), (0, 1), True), ((7, 5), 0, False),
    ((300, 1), 0, True), ((5, 6, 7), (-3,), False), ((3, 4096, 2), (0, 1), False)])
def test_sums_over_leading_axes_are_full_float32(shape, axis, keepdims, monkeypatch):
    """Such sums are products with a row of ones (`cuda_reduce`): in float32, never TF32,
    whatever MLX_ENABLE_TF32 says of matmul; offset views and bfloat16 too; more rows than
    `MAX_ROWS` go to CuPy's reduction."""
    from streamlet.backend import cuda_gemm
    monkeypatch.setattr(cuda_gemm, "TF32", True)
    x = sample(shape, np.float32) * 100 + np.float32(1 / 3)
    want = x.astype(np.float64).sum(axis, keepdims=keepdims)
    got = np.array(mx.sum(mx.array(x), axis, keepdims, stream=G))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(x).sum(axis).max())
    tail = np.array(mx.sum(mx.array(x)[1:], axis, keepdims, stream=G))  # not 256-byte aligned
    np.testing.assert_allclose(tail, x[1:].astype(np.float64).sum(axis, keepdims=keepdims),
                               rtol=1e-5, atol=1e-5 * np.abs(x).sum(axis).max())
    got, want = gpu_and_cpu(lambda a: mx.sum(a.astype(mx.bfloat16), axis, keepdims), x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                               rtol=2.0 ** -7, atol=2.0 ** -7 * np.abs(x).sum(axis).max())


def test_a_kept_row_of_ones_is_filled_after_its_streams_queued_work():
    """The row of ones a sum multiplies by is made on the current stream: a block CuPy's
    pool recycles for it, whose last writer is still queued behind long GEMMs, is written
    by that writer first (a copy from the host on the legacy stream came before it, and
    the row became 7s for the rest of the process)."""
    from streamlet.backend import cuda_constants, cuda_reduce
    n = 3001  # a row length no other test sums over: its block is alone in its bin
    key = (cp.cuda.runtime.getDevice(), ("ones", n))
    cuda_constants._kept.pop(key, None)
    s = cp.cuda.Stream(non_blocking=True)  # as the backend's streams (a pool arena of its own)
    try:
        with s:
            a = cp.ones((4096, 4096), cp.float32)
            b = cp.empty_like(a)
            for _ in range(10):  # tens of ms queued, freeing nothing
                cp.matmul(a, a, out=b)
                cp.matmul(b, b, out=a)
            tmp = cp.empty((1, n), cp.float32)
            tmp.fill(7)  # queued behind the GEMMs
            del tmp  # the block goes back to s's arena with its write still queued
            row = cuda_reduce._row_of_ones(n)
            s.synchronize()
        assert (row.get() == 1).all(), row.get()[0, :8]
    finally:
        cuda_constants._kept.pop(key, None)


def test_a_fused_kernel_run_on_demand_keeps_its_input_from_another_stream():
    """A Lazy of s2 reading a value of s1, launched on demand (a matmul reads it) behind
    long GEMMs: the value, released on the host meanwhile, is not reused by s1 early."""
    s1, s2 = mx.new_stream(G), mx.new_stream(G)
    big = mx.ones((2048, 2048), stream=s2)
    ones = mx.ones((1024, 1), stream=s2)
    mx.eval(big, ones)
    for _ in range(5):
        a = mx.full((1024, 1024), 3.0, stream=s1)
        mx.eval(a)
        slow = mx.matmul(mx.matmul(big, big, stream=s2), big, stream=s2)
        e = mx.multiply(a, 2.0, stream=s2) + mx.sum(slow, stream=s2) * 0
        b = mx.matmul(e, ones, stream=s2)
        mx.async_eval(b)
        del a, e
        c = mx.full((1024, 1024), 7.0, stream=s1)  # may reuse a's block on s1
        mx.eval(c)
        assert (np.array(b) == 6.0 * 1024).all()
        assert c[0, 0].item() == 7.0


def test_gemms_with_workspaces_on_several_streams_at_once():
    """Plans may take a workspace (Hopper's GEMM kernels need one, cublaslt); each call
    gets its own from its stream's pool, so products running at once on four streams,
    in all four layouts of their operands, each give their own result."""
    from streamlet.backend import cublaslt
    n = 1024
    mats = [sample((n, n), np.float32) / 8 for _ in range(4)]
    streams = [mx.new_stream(G) for _ in mats]
    outs = []
    for i, s in enumerate(streams):
        a, b = mx.array(mats[i]), mx.array(mats[(i + 1) % 4])
        a, b = (a.T if i & 1 else a), (b.T if i & 2 else b)
        outs.append(mx.matmul(mx.matmul(a, b, stream=s), b, stream=s))
    mx.eval(outs)
    for i, got in enumerate(outs):
        a, b = mats[i].astype(np.float64), mats[(i + 1) % 4].astype(np.float64)
        a, b = (a.T if i & 1 else a), (b.T if i & 2 else b)
        want = a @ b @ b
        np.testing.assert_allclose(np.array(got), want, rtol=0, atol=1e-2 * np.abs(want).max())
    used = [p.workspace for p in cublaslt._plans.values() if p is not None]
    assert max(used) <= cublaslt.workspace_limit(cp.cuda.Device().id)


LAYOUTS = {  # name: (x, y) from operands a (.., 24, 16), b (.., 16, 8) and their transposes
    "rows": lambda a, b, at, bt: (a, b),
    "transposed views": lambda a, b, at, bt: (mx.swapaxes(at, -1, -2), mx.swapaxes(bt, -1, -2)),
    "one transposed": lambda a, b, at, bt: (a, mx.swapaxes(bt, -1, -2)),
    "strided slice": lambda a, b, at, bt: (a[..., ::2, :], b),
    "column slice": lambda a, b, at, bt: (a[..., :, 1:9], b[..., 1:9, :]),
    "vector": lambda a, b, at, bt: (mx.reshape(a, (-1, 16))[0], b),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3), "broadcast", "inner broadcast"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_matmul_layouts_and_stacks_give_the_cpu_product(layout, batch, dtype):
    """One cuBLAS call per product or stack (cuda_gemm; operands whose matrices are not
    evenly spaced in the batch, as shared attention heads, copied first), CuPy's matmul
    for vectors: either way the CPU's product, bfloat16 within one rounding."""
    lead_a, lead_b = {"broadcast": ((2, 3), (3,)), "inner broadcast": ((2, 3), (2, 1))}.get(
        batch, (batch, batch))
    a, b = sample(lead_a + (24, 16), np.float32), sample(lead_b + (16, 8), np.float32)

    def f(a, b):
        d = getattr(mx, dtype)
        a, b = a.astype(d), b.astype(d)
        at, bt = mx.contiguous(mx.swapaxes(a, -1, -2)), mx.contiguous(mx.swapaxes(b, -1, -2))
        return mx.matmul(*LAYOUTS[layout](a, b, at, bt))
    got, want = gpu_and_cpu(f, a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == "bfloat16":
        got, want = got.astype(np.float32), want.astype(np.float32)
    rtol = 2.0 ** -7 if dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("shapes", [((2, 1, 4, 5), (1, 0, 5, 6)), ((2, 1, 3, 0), (1, 2, 0, 4)),
                                    ((0, 3, 4), (4, 2)), ((3, 0), (0, 2))])
def test_empty_products_and_empty_sums_over_broadcast_batches(shapes):
    """No elements in the batch, or none summed over: the CPU's shape and zeros, whatever
    the batch broadcasts (a zero-size operand has no evenly spaced layout to copy to)."""
    x, y = (RNG.standard_normal(s).astype(np.float32) for s in shapes)
    got, want = gpu_and_cpu(mx.matmul, x, y)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_matmul_of_bfloat16_with_float32_promotes_as_the_cpu():
    a, b = sample((5, 7), np.float32), sample((7, 3), np.float32)
    got, want = gpu_and_cpu(lambda a, b: mx.matmul(a.astype(mx.bfloat16), b), a, b)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _close_to_cpu(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = 2.0 ** -7 if dtype == "bfloat16" else 1e-5
    got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("weight", ["same", "float32", None])
def test_rms_norm_kernel_gives_the_cpu_values(dtype, weight):
    x, w = sample((3, 5, 200), np.float32), sample((200,), np.float32)

    def f(x, w):
        d = getattr(mx, dtype)
        wt = None if weight is None else w.astype(d if weight == "same" else mx.float32)
        return mx.fast.rms_norm(x.astype(d), wt, 1e-5)
    _close_to_cpu(*gpu_and_cpu(f, x, w), dtype)


def _bits(a):
    v = np.asarray(a.__array__())
    return v.view(np.uint16) if v.dtype.itemsize == 2 else v.view(np.uint32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("second", ["same shape", "same shape, wide", "broadcast row",
                                    "scalar"])
def test_rms_norm_of_a_residual_sum_computes_the_sum_in_its_launch(dtype, second,
                                                                   monkeypatch):
    """A Llama block's `h = x + attention(...)`, then `rms_norm(h)`: one launch computes
    the sum and the norm, bit for bit what they are when the sum is evaluated first; a sum
    the kernel can't read (broadcast, a scalar) is launched as before."""
    from streamlet.backend import cuda_fuse
    d = getattr(mx, dtype)
    d_ = 4096 if "wide" in second else 200  # wider than a block: a thread per 16 columns
    shape = {"broadcast row": (d_,), "scalar": None}.get(second, (3, 4, d_))
    values = [sample((3, 4, d_), np.float32), sample((d_,), np.float32),
              0.5 if shape is None else sample(shape, np.float32)]

    def arrays():
        return [v if isinstance(v, float) else mx.array(v).astype(d) for v in values]
    with mx.stream(mx.cpu):
        x, w, y = arrays()
        cpu = np.asarray(mx.fast.rms_norm(x + y, w, 1e-5).__array__())
    with mx.stream(G):
        x, w, y = arrays()
        mx.eval(x, w, y)
        launches = []
        real = cuda_fuse.launch
        monkeypatch.setattr(cuda_fuse, "launch", lambda *a: launches.append(a) or real(*a))
        h = x + y
        got = mx.fast.rms_norm(h, w, 1e-5)
        h2 = h + y  # the next block's residual: its operand `h` computed by the norm
        got2 = mx.fast.rms_norm(h2, w, 1e-5)
        mx.eval(got, h, got2, h2)
        assert len(launches) == (0 if second.startswith("same shape") else 2)
        alone = x + y
        mx.eval(alone)
        alone2 = alone + y
        mx.eval(alone2)
        for a, b in ((h, alone), (h2, alone2), (got, mx.fast.rms_norm(alone, w, 1e-5)),
                     (got2, mx.fast.rms_norm(alone2, w, 1e-5))):
            np.testing.assert_array_equal(_bits(a), _bits(b))
    _close_to_cpu(np.asarray(got.__array__()), cpu, dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("case", ["transposed", "vector offset", "array offset",
                                  "partial dims", "freqs", "three axes"])
def test_rope_kernel_gives_the_cpu_values(dtype, traditional, case):
    x = sample((2, 7, 4, 16), np.float32)  # (B, T, H, D): transposed to (B, H, T, D)
    freqs = np.abs(sample((4,), np.float32)) + 1

    def f(x, fr):
        x = x.astype(getattr(mx, dtype))
        kw = dict(traditional=traditional, base=10000.0, scale=0.5, offset=3)
        dims = 16
        if case == "transposed":
            x = mx.swapaxes(x, 1, 2)
        elif case == "vector offset":
            x, kw["offset"] = mx.contiguous(mx.swapaxes(x, 1, 2)), mx.array([5, 9])
        elif case == "array offset":  # read from the device, as a vector is
            kw["offset"] = mx.array(3, dtype=mx.int64)
        elif case == "partial dims":
            dims = 8
        elif case == "freqs":
            dims, kw["base"], kw["freqs"] = 8, None, fr
        else:
            x = mx.reshape(x, (2, 7, 64))[..., :16]
        return mx.fast.rope(x, dims, **kw)
    _close_to_cpu(*gpu_and_cpu(f, x, freqs), dtype)


def test_an_int_rope_offset_is_a_launch_parameter(monkeypatch):
    """A decode step's int offset reaches the kernel as a parameter: no host-to-device copy
    (each step has a new one), and the values of an offset read from the device."""
    from streamlet.backend import cuda, cuda_fast
    x = mx.add(mx.array(sample((1, 4, 3, 16), np.float32)), 0, stream=G)
    mx.eval(x)
    copies, launches = [], []
    real, launch = cuda._host_to_device, cuda_fast.launch_source
    monkeypatch.setattr(cuda, "_host_to_device", lambda *a: copies.append(a) or real(*a))
    monkeypatch.setattr(cuda_fast, "launch_source", lambda source, types, args, grid, values, *r:
                        launches.append(values) or launch(source, types, args, grid, values, *r))
    kw = dict(traditional=False, base=10000.0, scale=1.0)
    got = mx.fast.rope(x, 16, offset=129, stream=G, **kw)
    mx.eval(got)
    assert copies == []
    assert len(launches) == 1 and launches[0][1] == 0 and launches[0][13] == 129  # no pointer
    want = mx.fast.rope(x, 16, offset=mx.array(129), stream=G, **kw)
    np.testing.assert_array_equal(np.array(got), np.array(want))


def test_rope_gradient_on_the_gpu_is_the_cpus():
    x = sample((1, 2, 5, 8), np.float32)

    def f(x):
        return mx.grad(lambda v: (mx.fast.rope(v, 8, traditional=False, base=100.0,
                                               scale=1.0, offset=2) * v[..., ::-1]).sum())(x)
    _close_to_cpu(*gpu_and_cpu(f, x), "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("norm", ["rms_norm", "layer_norm"])
@pytest.mark.parametrize("d,weighted", [(64, True), (300, True), (300, False)])
def test_normalization_gradients_on_the_gpu_are_the_cpus(dtype, norm, d, weighted):
    """The cotangents of x (`norm_dx`: the GPU's kernel, a block per row, for float32 and
    bfloat16; rows longer than a block; without a weight) and of the weight (the norm's
    own kernel without weight)."""
    x, w, c = (sample(s, np.float32) for s in ((3, 5, d), (d,), (3, 5, d)))

    def f(x, w, c):
        dt = getattr(mx, dtype)
        x, w, c = x.astype(dt), w.astype(dt), c.astype(dt)
        v = w if weighted else None
        fn = (lambda a, v: mx.fast.rms_norm(a, v, 1e-5)) if norm == "rms_norm" else \
            (lambda a, v: mx.fast.layer_norm(a, v, None, 1e-5))
        if not weighted:
            return mx.vjp(lambda a: fn(a, None), [x], [c])[1][0]
        gx, gw = mx.vjp(fn, [x, w], [c])[1]
        return mx.concatenate([gx.reshape(-1), gw])
    _close_to_cpu(*gpu_and_cpu(f, x, w, c), "float32" if dtype == "float32" else "bfloat16")


def test_bfloat16_gives_the_cpu_bits():
    x, y = sample((40,), np.float32), sample((40,), np.float32)

    def f(a, b):
        a, b = mx.astype(a, mx.bfloat16), mx.astype(b, mx.bfloat16)
        return mx.max(mx.reshape(a * b + a, (8, 5)), axis=1) * 0.5 - b[:8]
    got, want = gpu_and_cpu(f, x, y)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_linalg_refuses_the_gpu_as_mlx_does():
    with pytest.raises(ValueError):
        mx.linalg.inv(mx.eye(3), stream=G)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
@pytest.mark.parametrize("shape,axis,keepdims", [
    ((1, 4096), -1, False), ((7, 300), 1, True), ((3, 5, 33), None, False),
    ((1, 300_000), 1, False),  # longer than one block scans: CuPy's reduction
    ((3, 5, 33), None, True), ((6, 40), 0, False), ((2, 1, 1000), 2, False)])
def test_argmax_and_argmin_on_the_gpu_are_the_cpus(op, dtype, shape, axis, keepdims):
    """Ties (the first wins), NaNs (the first NaN wins) and infinities, as NumPy decides;
    the kernel of its own (float32 and bfloat16 rows of the last axis) and the fallback."""
    values = RNG.integers(-3, 4, shape).astype(np.float32)  # many ties
    if dtype in ("float32", "bfloat16", "float16"):
        flat = values.reshape(-1)
        flat[RNG.integers(0, flat.size, 3)] = np.inf
        flat[RNG.integers(0, flat.size, 2)] = -np.inf
        if shape[0] > 2:
            flat[RNG.integers(0, flat.size, 2)] = np.nan
    fn = getattr(mx, op)
    got, want = gpu_and_cpu(lambda a: fn(a.astype(getattr(mx, dtype)), axis=axis,
                                         keepdims=keepdims), values)
    assert got.dtype == want.dtype == np.uint32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "complex64", "bool_"])
@pytest.mark.parametrize("index_dtype", ["int32", "uint32", "int64", "uint8", "int16"])
@pytest.mark.parametrize("table_shape,index_shape", [
    ((50, 7), (1, 1)), ((50,), (6,)), ((12, 3, 5), (2, 3)), ((9, 4), ())])
def test_a_row_gather_on_the_gpu_is_the_cpus(dtype, index_dtype, table_shape, index_shape):
    """`table[i]` with one integer array: the GPU's own kernel, negative indices too."""
    n = table_shape[0]
    low = 0 if index_dtype.startswith("u") else -n
    index = RNG.integers(low, n, index_shape)
    got, want = gpu_and_cpu(lambda t, i: t.astype(getattr(mx, dtype))[
        i.astype(getattr(mx, index_dtype))], sample(table_shape, np.float32), index)
    assert got.shape == want.shape == index_shape + table_shape[1:]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("index", [[0, 50], [-51], [3, 2**31 - 1]])
def test_a_row_gather_out_of_bounds_on_the_gpu_fails_it_and_its_consumers(index):
    with mx.stream(G):
        table = mx.array(sample((50, 4), np.float32))
        bad = table[mx.array(index)]
        after = mx.sum(bad * 2)
        for a in (after, bad):
            with pytest.raises(RuntimeError, match="(?i)out of bounds"):
                mx.eval(a)
        assert table[mx.array([49, -50])].tolist() == np.array(table)[[49, -50]].tolist()


def test_argmax_and_an_embedding_lookup_launch_kernels_of_their_own(monkeypatch):
    from streamlet.backend import cuda_pick
    launched = []
    real = cuda_pick.launch_source
    monkeypatch.setattr(cuda_pick, "launch_source",
                        lambda source, *a: launched.append(source) or real(source, *a))
    with mx.stream(G):
        table = mx.array(sample((10, 4), np.float32))
        token = mx.argmax(table[3:4], axis=-1)
        rows = table[token[:, None]]
        mx.eval(rows)
    assert launched == [cuda_pick._PICK, cuda_pick._GATHER]
    values = np.array(table)
    np.testing.assert_array_equal(np.array(rows)[0, 0], values[values[3].argmax()])


def test_argmax_of_a_transposed_view_on_the_gpu():
    values = RNG.standard_normal((50, 70)).astype(np.float32)
    got, want = gpu_and_cpu(lambda a: mx.argmax(a.T, axis=-1), values)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, values.argmax(0))


# -- streams and order -------------------------------------------------------------------------
def test_gpu_to_gpu_across_streams_waits_for_the_producer():
    s1, s2 = mx.new_stream(G), mx.new_stream(G)
    x = mx.ones((1 << 22,), stream=s1)
    for _ in range(30):
        x = mx.sin(x, stream=s1) + 1
    m = mx.matmul(mx.ones((1024, 1024), stream=s1), mx.ones((1024, 1024), stream=s1), stream=s1)
    y = mx.sum(x, stream=s2) + mx.sum(m, stream=s2)
    with mx.stream(mx.cpu):
        xc = mx.ones((1 << 22,))
        for _ in range(30):
            xc = mx.sin(xc) + 1
        want = float(mx.sum(xc)) + 1024.0 ** 3
    assert y.item() == pytest.approx(want, rel=1e-4)


def test_memory_read_by_another_stream_is_not_reused_early():
    s1, s2 = mx.new_stream(G), mx.new_stream(G)
    for _ in range(5):
        a = mx.full((1 << 24,), 3.0, stream=s1)
        mx.eval(a)
        big = mx.ones((2048, 2048), stream=s2)
        slow = mx.matmul(big, big, stream=s2)
        b = mx.sum(a, stream=s2) + mx.sum(slow, stream=s2) * 0
        mx.async_eval(b)
        del a
        c = mx.full((1 << 24,), 7.0, stream=s1)  # may reuse a's block on s1
        mx.eval(c)
        assert b.item() == 3.0 * (1 << 24)
        assert c[0].item() == 7.0


@pytest.mark.parametrize("made", ["filled", "fused"])
def test_an_input_whose_stream_has_finished_needs_no_event(monkeypatch, made):
    """Weights made on one stream and evaluated there, then read by another stream (a
    generation stream's matmuls): no CUDA event is recorded or waited for, and the reads
    still see the weights' values after their blocks could be reused.  Weights computed by
    a fused kernel at their eval's flush (initializers, dtype conversions) too."""
    s1, s2 = mx.new_stream(G), mx.new_stream(G)
    w = mx.full((256, 256), 0.5, stream=s1)
    if made == "fused":
        w = mx.multiply(mx.full((256, 256), 0.25, stream=s1), 2, stream=s1)
    mx.eval(w)
    assert (type(w._node.data).__name__ == "Lazy") == (made == "fused")
    made, me = [], threading.get_ident()
    real = cp.cuda.Event

    def event(*a, **k):  # only this thread's: one stream's eval runs in the caller
        if threading.get_ident() == me:
            made.append("".join(traceback.format_stack(limit=8)))
        return real(*a, **k)
    monkeypatch.setattr(cp.cuda, "Event", event)
    x = mx.ones((4, 256), stream=s2)
    for _ in range(3):
        x = mx.multiply(mx.matmul(x, w, stream=s2), 1 / 128, stream=s2)
    mx.eval(x)
    assert not made, made[0]
    np.testing.assert_allclose(np.array(x), np.ones((4, 256)), rtol=1e-3)


@pytest.mark.parametrize("by", ["reduction", "rms_norm"])
def test_a_fused_value_computed_after_its_flush_is_waited_for_by_another_stream(
        monkeypatch, by):
    """An intermediate of a fused kernel that a flush left uncomputed, computed later on its
    stream behind slow work (by an op reading it, or by the norm that computes the residual
    sum it reads), then read by another stream: its stream's last flush does not cover it,
    so the reader waits for its kernel by an event."""
    from streamlet.backend import cuda, cuda_fast
    s1, s2 = mx.new_stream(G), mx.new_stream(G)
    waits, sums = [], []
    real, rms = cuda._recorded, cuda_fast._rms
    monkeypatch.setattr(cuda, "_recorded", lambda h: waits.append(h) or real(h))
    monkeypatch.setattr(cuda_fast, "_rms", lambda *a: sums.append(a[-1]) or rms(*a))
    n = 1 << 22
    for i in range(3):
        a = mx.full((n,), 2.0 + i, stream=s1)
        b = mx.full((n,), 1.0, stream=s1)
        mx.eval(a, b)
        t = mx.add(mx.exp(a, stream=s1), b, stream=s1) if by == "reduction" else \
            mx.add(a, b, stream=s1)
        mx.eval(mx.multiply(t, 2, stream=s1))  # t: an intermediate the flush leaves
        lz = t._node.data
        assert type(lz) is cuda.Lazy and lz.value is None
        big = mx.ones((4096, 4096), stream=s1)
        slow = mx.sum(mx.matmul(mx.matmul(big, big, stream=s1), big, stream=s1), stream=s1)
        use = mx.sum(t, stream=s1) if by == "reduction" else \
            mx.sum(mx.fast.rms_norm(t, None, 1e-5, stream=s1), stream=s1)
        mx.async_eval(slow + use)  # t computed after the matmuls
        del waits[:]
        got = mx.sum(t, stream=s2).item()
        want = (float(np.exp(np.float32(2 + i))) if by == "reduction" else 2.0 + i) + 1
        assert got == pytest.approx(want * n, rel=1e-4)
        assert lz.late and any(h is lz.handle for h in waits)
        assert (lz in sums) == (by == "rms_norm")  # the norm's launch computed the sum


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "bool_", "complex64"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concatenate_joins_strided_and_empty_inputs_as_the_cpu(dtype, axis):
    """A join is one 2-D copy per input on the GPU: inputs transposed or sliced (copied
    first), of zero length along the axis, or three of them, give the CPU's bytes."""
    x = RNG.standard_normal((3, 4, 5)) * 4

    def join(a):
        a = a.astype(getattr(mx, dtype))
        t = mx.transpose(mx.transpose(a, (2, 1, 0)) + 0, (2, 1, 0))  # strided values
        empty = mx.split(a, [0], axis=axis)[0]
        return mx.concatenate([a, t[:, :, ::-1], empty, a * 0 + 1], axis=axis)
    got, want = gpu_and_cpu(join, x.astype(np.float32))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_cpu_to_gpu_to_cpu():
    c = mx.arange(1000, stream=mx.cpu) * 2
    g = mx.sqrt(mx.astype(c, mx.float32), stream=G) + 1
    back = mx.multiply(g, 3, stream=mx.cpu)
    want = (np.sqrt(np.arange(1000) * 2.0).astype(np.float32) + 1) * 3
    np.testing.assert_allclose(np.array(back), want, rtol=1e-6)


def test_async_eval_then_read():
    x = mx.ones((1 << 20,), stream=G)
    y = mx.exp(x) * 2
    mx.async_eval(y)
    assert y[5].item() == pytest.approx(2 * np.e)
    mx.synchronize(G)


def test_synchronize_idle_and_busy_gpu_streams():
    s = mx.new_stream(G)
    mx.synchronize(s)
    a = mx.matmul(mx.ones((512, 512), stream=s), mx.ones((512, 512), stream=s), stream=s)
    mx.async_eval(a)
    mx.synchronize(s)
    assert a[0, 0].item() == 512.0


# -- threads -------------------------------------------------------------------------------------
def run_in_thread(fn):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
    t = threading.Thread(target=target)
    t.start()
    t.join(60)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_thread_affine_gpu_stream_refuses_other_threads():
    s = mx.new_stream(G)
    a = mx.ones((4,), stream=s) + 1
    with pytest.raises(RuntimeError, match="in current thread"):
        run_in_thread(lambda: mx.eval(a))
    mx.eval(a)
    assert a.tolist() == [2.0] * 4


def test_thread_unsafe_and_thread_local_gpu_streams():
    u = mx.new_thread_unsafe_stream(G)
    assert run_in_thread(lambda: (mx.ones((3,), stream=u) * 4).tolist()) == [4.0] * 3
    tls = mx.new_thread_local_stream(G)
    results = {}

    def work(i):
        with mx.stream(tls):
            y = mx.full((100,), float(i))
            for _ in range(50):
                y = y + 1
                mx.eval(y)
        results[i] = (y.tolist()[0], mx.stream_from_thread_local_stream(tls).index)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert {i: v for i, (v, _) in results.items()} == {i: i + 50.0 for i in range(4)}
    assert len({idx for _, idx in results.values()}) == 4


# -- failures --------------------------------------------------------------------------------------
HUGE = (1 << 20, 1 << 20)  # 4 TiB of float32, no dimension beyond MLX's 32-bit sizes
def test_out_of_memory_is_a_runtime_error_and_the_process_goes_on():
    z = mx.zeros(HUGE, stream=G)
    with pytest.raises(RuntimeError, match=r"zeros|full") as err:
        mx.eval(z)
    assert "bytes" in str(err.value) and str(4 << 40) in str(err.value)
    with pytest.raises(RuntimeError):
        np.array(z)
    w = z + 1
    with pytest.raises(RuntimeError):
        mx.eval(w)
    with pytest.raises(RuntimeError):
        w.tolist()
    ok = mx.ones((1000,), stream=G) * 3
    assert float(mx.sum(ok)) == 3000.0
    mx.synchronize(G)


def test_out_of_memory_inside_a_fused_chain():
    s = mx.new_stream(G)
    v = mx.broadcast_to(mx.array([1.0]), HUGE)
    y = mx.multiply(v, 2, stream=s) + 1
    with pytest.raises(RuntimeError, match="bytes"):
        mx.eval(y)
    with pytest.raises(RuntimeError):
        y.tolist()
    assert (mx.ones((3,), stream=s) + 1).tolist() == [2.0] * 3


def test_fused_outputs_count_in_active_and_peak_memory():
    x = mx.ones((1 << 20,), stream=G)
    mx.eval(x)
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    y = mx.sin(x) * 2 + 1  # one fused kernel, 4 MiB out
    mx.eval(y)
    assert mx.get_active_memory() - base == y.nbytes
    assert mx.get_peak_memory() >= base + y.nbytes
    del y
    assert mx.get_active_memory() == base


def test_failure_reaches_dependents_on_other_streams_only():
    s1, s2 = mx.new_stream(G), mx.new_stream(G)
    bad = mx.zeros(HUGE, stream=s1)
    dep = mx.sum(bad, stream=s2)
    fine = mx.ones((5,), stream=s2) * 2
    with pytest.raises(RuntimeError):
        mx.eval(dep)
    assert fine.tolist() == [2.0] * 5
    try:
        mx.synchronize(s1)  # the failure was reported by the eval above already
    except RuntimeError:
        pass
    mx.synchronize(s1)  # reported once: the stream is usable again


# -- random ----------------------------------------------------------------------------------------
def test_random_numbers_match_the_cpu():
    if not hasattr(mx.random, "key"):
        pytest.skip("no random module yet")
    k = mx.random.key(7)
    for n in (1, 5, 1000, 4097):
        for fn in (lambda s: mx.random.bits((n,), key=k, stream=s),
                   lambda s: mx.random.uniform(shape=(n,), key=k, stream=s)):
            np.testing.assert_array_equal(np.array(fn(G)), np.array(fn(mx.cpu)))
        g = np.array(mx.random.normal(shape=(n,), key=k, stream=G))
        c = np.array(mx.random.normal(shape=(n,), key=k, stream=mx.cpu))
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("n", [1, 2, 7, 2047, 4099])
def test_normal_gives_the_cpus_bits_for_one_key_and_many(n):
    """One key and a batch of keys (a vmapped draw), sizes around the kernel's 4 pairs per
    thread: the GPU's bits are the CPU's."""
    k = mx.random.key(11)
    draw = lambda s: mx.random.normal(shape=(n,), key=k, stream=s)  # noqa: E731
    np.testing.assert_array_equal(np.array(draw(G)).view(np.uint32),
                                  np.array(draw(mx.cpu)).view(np.uint32))
    keys = mx.random.split(k, 3)
    many = lambda s: mx.vmap(lambda kk: mx.random.normal((n,), key=kk, stream=s))(keys)  # noqa: E731
    np.testing.assert_array_equal(np.array(many(G)).view(np.uint32),
                                  np.array(many(mx.cpu)).view(np.uint32))


def test_random_kernels_with_64_bit_indices_match_the_32_bit_ones():
    """Draws of 2^31 values or more index in 64 bits: the same kernels otherwise."""
    from streamlet.backend import cuda_random as cr
    keys = cp.asarray(np.array([[5, 6], [7, 8]], np.uint32))
    for mode in (cr.WORDS, cr.UNIT, cr.NORMAL):
        n = 4099
        short = cr.fill(keys, n, mode)
        wide = cp.empty_like(short)
        threads = -(-(n - n // 2) * 2 // cr.PER)
        cr._kernel(cr._NAMES[mode])((-(-threads // 128),), (128,), (
            keys, wide, np.uint64(n), np.uint64(2), np.float32(1.0)))
        np.testing.assert_array_equal(cp.asnumpy(wide).view(np.uint32),
                                      cp.asnumpy(short).view(np.uint32))


# -- several GPUs (issue 6) ------------------------------------------------------------------
requires_two = pytest.mark.skipif(mx.device_count(G) < 2, reason="needs two GPUs")


@requires_two
def test_second_gpu_streams_and_peer_dependencies():
    d1 = mx.Device(G, 1)
    s0, s1 = mx.new_stream(mx.Device(G, 0)), mx.new_stream(d1)
    a = mx.arange(1 << 20, stream=s0).astype(mx.float32) * 2
    b = mx.sqrt(a, stream=s1) + 1  # made on GPU 0, read on GPU 1
    want = np.sqrt(np.arange(1 << 20) * 2.0).astype(np.float32) + 1
    np.testing.assert_allclose(np.array(b), want, rtol=1e-6)
    assert mx.default_stream(d1).device == d1
    bad = mx.zeros(HUGE, stream=s0)
    with pytest.raises(RuntimeError):
        mx.eval(mx.sum(bad, stream=s1))
    assert (mx.ones((2,), stream=s1) * 5).tolist() == [5.0, 5.0]


@requires_two
def test_random_is_the_same_on_every_gpu():
    if not hasattr(mx.random, "key"):
        pytest.skip("no random module yet")
    k = mx.random.key(3)
    a = np.array(mx.random.uniform(shape=(999,), key=k, stream=mx.Device(G, 0)))
    b = np.array(mx.random.uniform(shape=(999,), key=k, stream=mx.Device(G, 1)))
    np.testing.assert_array_equal(a, b)


# -- no host round trip while a stream runs (issue 13) ---------------------------------------
_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""

NO_HOST_READ = {
    "uniform": lambda a: mx.random.uniform(shape=(1000,), key=a.key),
    "normal": lambda a: mx.random.normal((1000,), key=a.key),
    "gumbel": lambda a: mx.random.gumbel((1000,), key=a.key),
    "categorical": lambda a: mx.random.categorical(a.x, key=a.key),
    "permutation": lambda a: mx.random.permutation(1000, key=a.key),
    "randint": lambda a: mx.random.randint(0, 9, (1000,), key=a.key),
    "bernoulli": lambda a: mx.random.bernoulli(0.3, (1000,), key=a.key),
    "truncated_normal": lambda a: mx.random.truncated_normal(-1, 1, (1000,), key=a.key),
    "laplace": lambda a: mx.random.laplace((1000,), key=a.key),
    "split": lambda a: mx.random.split(a.key, 3),
    "slice": lambda a: mx.slice(a.x, a.starts, (0, 1), (2, 3)),
    "slice_update": lambda a: mx.slice_update(a.x, a.ones, a.starts, (0, 1)),
    "segmented_mm": lambda a: mx.segmented_mm(a.x, a.x.T, a.segments),
    "take": lambda a: mx.take(a.x, a.index, axis=1),
    "at multiply": lambda a: a.x.at[a.repeat].multiply(1.5),
    "array from the host": lambda a: mx.array(np.arange(10)) + 1,
}


def _busy(s, seconds):
    """Queue `seconds` of device work on the CUDA stream of streamlet stream `s`."""
    from streamlet.backend import cuda
    h = cuda.handle(s._state)
    with h.device, h.stream:
        cp.RawKernel(_SPIN, "spin")((1,), (1,), (np.int64(seconds * 1e9),))


@pytest.mark.parametrize("name", list(NO_HOST_READ))
def test_running_an_op_does_not_wait_for_the_device(name, monkeypatch):
    """The op's kernel runs while the stream is still busy with 0.5 s of earlier work: had
    it read a key, start or bound on the host, it would have waited for that work."""
    from types import SimpleNamespace

    from streamlet.backend import cuda
    s = mx.new_stream(G)
    with mx.stream(s):
        a = SimpleNamespace(key=mx.random.key(3), starts=mx.array([1, 2]), ones=mx.ones((2, 3)),
                            x=mx.array(RNG.standard_normal((4, 8)).astype(np.float32)),
                            segments=mx.array([[0, 3], [3, 8]]), index=mx.array([0, 3, 1]),
                            repeat=mx.array([0, 3, 0, 0]))
        mx.eval(*vars(a).values())
        want = np.array(NO_HOST_READ[name](a))  # compiles its kernels: not timed
        spent = []
        real = cuda.execute

        def timed(node, args):
            start = time.perf_counter()
            try:
                return real(node, args)
            finally:
                spent.append(time.perf_counter() - start)
        monkeypatch.setattr(cuda, "execute", timed)
        _busy(s, 0.5)
        y = NO_HOST_READ[name](a)
        mx.eval(y)  # its end waits for the device, as MLX's eval does; its kernels must not
        assert spent and sum(spent) < 0.25, f"{name}: its kernels took {sum(spent):.2f} s"
        np.testing.assert_array_equal(np.array(y), want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "bool_", "complex64"])
def test_at_multiply_on_the_gpu_gives_the_cpus_bits(dtype):
    """Repeated indices multiply in the CPU's order (floats round in that order, int8
    wraps), by the device's own kernel."""
    d = getattr(mx, dtype)
    x = RNG.standard_normal((5, 3)) * 3
    v = RNG.standard_normal((6, 3)) * 3
    if dtype == "complex64":
        x, v = x + 1j * RNG.standard_normal((5, 3)), v + 1j * RNG.standard_normal((6, 3))
    rows = mx.array([4, 0, 4, 4, 1, 0])
    got = {}
    for dev in (mx.cpu, G):
        with mx.stream(dev):
            a, b = mx.array(x).astype(d), mx.array(v).astype(d)
            got[dev] = np.array(a.at[rows].multiply(b))
    np.testing.assert_array_equal(got[G].view(np.uint8), got[mx.cpu].view(np.uint8))


def test_async_eval_returns_while_the_device_is_busy():
    """The kernel is loaded first: loading one (CUDA's lazy loading) may wait for the
    device, as the launch runs on the calling thread."""
    s = mx.new_stream(G)
    with mx.stream(s):
        x = mx.arange(16)
        mx.eval(x, x * 2 + 1)
        _busy(s, 0.5)
        start = time.perf_counter()
        y = x * 2 + 1
        mx.async_eval(y)
        issued = time.perf_counter() - start
        assert issued < 0.25, f"async_eval took {issued:.2f} s"
        assert y.tolist() == list(range(1, 33, 2))


def test_async_eval_launches_on_the_calling_thread_and_eval_waits_for_the_device(
        monkeypatch):
    """As MLX: async_eval issues the GPU work itself and returns while the device still
    runs it (no worker thread, no wait); a later eval waits for the device."""
    from streamlet.backend import cuda
    threads = []
    real = cuda.execute
    monkeypatch.setattr(cuda, "execute",
                        lambda node, args: (threads.append(threading.get_ident()),
                                            real(node, args))[1])
    s = mx.new_stream(G)
    h = cuda.handle(s._state)
    def f(x):
        return mx.matmul(mx.reshape(x, (8, 8)), mx.reshape(x, (8, 8))) + 1
    with mx.stream(s):
        x = mx.arange(64, dtype=mx.float32)
        mx.eval(x, f(x))  # its kernels loaded (a first load may wait for the device)
        threads.clear()
        _busy(s, 0.5)
        y = f(x)
        mx.async_eval(y)
        assert y._node.data.value is not None  # its fused kernel launched by this call ...
        assert set(threads) == {threading.get_ident()}
        assert not h.stream.done  # ... which did not wait for the device
        mx.eval(y)
        assert h.stream.done
    want = np.arange(64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_allclose(np.array(y), want @ want + 1, rtol=1e-3)


def test_reading_an_async_result_waits_for_its_own_work_not_for_what_came_after():
    """The generation loop of mlx-lm: step n+1 is built and launched (async_eval) before
    step n's token is read; the read waits for step n's work only."""
    s = mx.new_stream(G)
    with mx.stream(s):
        x = mx.arange(16, dtype=mx.float32)
        mx.eval(x, mx.sum(x * 2))  # kernels loaded
        y = mx.sum(x * 2)
        mx.async_eval(y)
        _busy(s, 0.5)  # the next step's work, queued behind y's
        start = time.perf_counter()
        assert y.item() == 240.0
        waited = time.perf_counter() - start
        assert waited < 0.25, f"the read waited {waited:.2f} s"
        mx.synchronize(s)


def test_a_cuda_error_met_by_the_flush_surfaces_from_eval(monkeypatch):
    """The flush at the end of an eval runs on the stream's timeline, which cannot raise:
    the error it meets fails the eval's arrays, and is reported once."""
    from streamlet.backend import cuda

    def failing(*args):
        raise cp.cuda.runtime.CUDARuntimeError(700)  # cudaErrorIllegalAddress
    s = mx.new_stream(G)
    x = mx.arange(8, stream=s)
    mx.eval(x)
    monkeypatch.setattr(cuda.checks, "settle_watched", failing)
    y = mx.take(x, mx.array([1, 2]), stream=s)  # an op whose flush reads checks
    with pytest.raises(RuntimeError, match=r"\[eval\] CUDA error"):
        mx.eval(y)
    with pytest.raises(RuntimeError, match=r"\[eval\] CUDA error"):
        y.tolist()
    monkeypatch.undo()
    mx.synchronize(s)  # reported by the eval already, and the flush works again
    monkeypatch.setattr(cuda.checks, "settle_watched", failing)  # async_eval's flush too
    w = mx.take(x, mx.array([3]), stream=s)
    mx.async_eval(w)
    with pytest.raises(RuntimeError, match=r"\[synchronize\] CUDA error"):
        mx.synchronize(s)  # nothing read it: synchronize reports it
    monkeypatch.undo()
    mx.synchronize(s)  # reported once: the stream goes on
    assert (x + 1).tolist() == list(range(1, 9))


def test_tracers_of_values_of_the_gpu_are_leaves_and_of_the_cpu_copies():
    """value_and_grad on the GPU: a parameter computed on a GPU stream is traced by a leaf
    holding its buffer (nothing to run); one computed on a CPU stream by a copy node,
    which brings it over once for all its readers.  Both give the CPU's gradients."""
    rng = np.random.default_rng(3)
    w_np, x_np = rng.standard_normal((4, 3)).astype(np.float32), \
        rng.standard_normal((5, 4)).astype(np.float32)
    on_gpu = mx.add(mx.array(w_np), 0.0, stream=G)
    on_cpu = mx.add(mx.array(w_np), 0.0, stream=mx.cpu)
    x = mx.array(x_np)
    mx.eval(on_gpu, on_cpu, x)
    seen = {}

    def loss(w, x):
        seen["w"] = w
        return mx.tanh(x @ w).sum()
    grads = []
    with mx.stream(G):
        for w, kind in ((on_gpu, None), (on_cpu, "copy")):
            _, g = mx.value_and_grad(loss)(w, x)
            n = seen["w"]._node
            assert (n.prim.name if n.prim is not None else None) == kind
            grads.append(np.array(g))
    with mx.stream(mx.cpu):
        want = np.array(mx.grad(lambda w, x: mx.tanh(x @ w).sum())(mx.array(w_np),
                                                                   mx.array(x_np)))
    for g in grads:
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)
