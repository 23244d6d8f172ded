"""Cases a differential fuzz of the convolutions and the quantization ops against MLX
0.32.4 found: the result (value, dtype, shape or the error raised) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx


def _outcome(M, fn):
    try:
        r = fn(M)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return type(e).__name__
    if isinstance(r, (tuple, list)):
        return [_value(M, v) for v in r]
    return _value(M, r)


def _value(M, v):
    """dtype, shape and exact values (bfloat16 through float32, which holds it exactly)."""
    return repr(v.dtype), v.shape, np.array(
        v.astype(M.float32) if v.dtype == M.bfloat16 else v).tolist()


def _same(mlx, fn):
    assert _outcome(mx, fn) == _outcome(mlx, fn)


_CONV_ARGS = [
    ("conv1d", 1, "stride", (2,)), ("conv1d", 1, "padding", [1]),
    ("conv1d", 1, "dilation", None), ("conv1d", 1, "stride", "2"),
    ("conv1d", 1, "padding", ([1], [1])), ("conv1d", 1, "groups", 2.0),
    ("conv2d", 2, "stride", (2.0, 1)), ("conv2d", 2, "padding", (2,)), ("conv2d", 2, "dilation", ()),
    ("conv2d", 2, "padding", ([1, 1], [0, 0])), ("conv2d", 2, "stride", 2**31),
    ("conv3d", 3, "padding", "2"), ("conv3d", 3, "stride", [2]),
    ("conv_transpose1d", 1, "stride", 2.0), ("conv_transpose1d", 1, "output_padding", "1"),
    ("conv_transpose2d", 2, "padding", (1, 2, 1)), ("conv_transpose2d", 2, "output_padding", (1,)),
    ("conv_transpose2d", 2, "dilation", (2.0, 1)), ("conv_transpose3d", 3, "padding", (2, 1)),
    ("conv_general", 2, "stride", (2.0, 1)), ("conv_general", 2, "padding", None),
    ("conv_general", 2, "kernel_dilation", "2"), ("conv_general", 2, "input_dilation", {1, 2}),
    ("conv_general", 2, "flip", 1), ("conv_general", 2, "flip", None),
    ("conv_general", 2, "groups", "1"),
    # what the binding does take: sequences (a range, an array), NumPy ints, bools
    ("conv_general", 2, "stride", range(1, 3)), ("conv2d", 2, "stride", (np.int64(1), True)),
    ("conv_general", 2, "padding", [[1, 0], [0, 1]]), ("conv1d", 1, "stride", np.int32(2)),
]


@pytest.mark.parametrize("op,nd,name,value", _CONV_ARGS,
                         ids=[f"{o}-{n}-{v!r}" for o, _, n, v in _CONV_ARGS])
def test_conv_arguments_convert_as_mlxs_binding_does(mlx, op, nd, name, value):
    """An argument the binding can't take as an int (or a sequence of them, where it takes
    one) is a TypeError before any computing: `conv2d(x, w, stride=(2.0, 1))` ran with
    stride (2, 1), `conv1d(x, w, stride=(2,))` with stride 2, `conv_transpose2d(x, w,
    padding=(1, 2, 1))` with the first two, `conv_general(x, w, flip=1)` flipped."""
    def fn(M):
        x = M.array(np.arange(2 * 5 ** nd * 2, dtype=np.float32).reshape((2,) + (5,) * nd + (2,)))
        w = M.array(np.linspace(-1, 1, 2 * 2 ** nd * 2, dtype=np.float32).reshape(
            (2,) + (2,) * nd + (2,)))
        return getattr(M, op)(x, w, **{name: value})
    ours, theirs = _outcome(mx, fn), _outcome(mlx, fn)
    if isinstance(theirs, str):
        assert ours == theirs
    else:
        assert ours[:2] == theirs[:2]
        np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,kw", [("conv1d", {"padding": -2**31}),
                                   ("conv_transpose1d", {"padding": -2**31}),
                                   ("conv_general", {"padding": ([-2**31], [0])}),
                                   ("conv_transpose2d", {"dilation": (-2**31, 1)})])
def test_conv_shape_values_beyond_int32_overflow(mlx, op, kw):
    """A padding whose crop or transposed padding leaves int32 is MLX's OverflowError
    (its safe_cast), where it was a ValueError or a RuntimeError."""
    def fn(M):
        nd = 2 if op.endswith("2d") else 1
        return getattr(M, op)(M.ones((1,) + (5,) * nd + (2,)), M.ones((2,) + (2,) * nd + (2,)),
                              **kw)
    assert _outcome(mx, fn) == _outcome(mlx, fn) == "OverflowError"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_one_bit_affine_quantization(mlx, dtype, group_size):
    """MLX 0.32.4 quantizes to 1 bit (bit 0 the group's minimum, bit 1 its maximum: scale
    max - min, bias min); it was refused ("supported bits are 2, 3, ...")."""
    rng = np.random.default_rng(group_size)
    w = rng.standard_normal((3, 256)).astype(np.float32)
    w[0, 5] = np.nan
    x = rng.standard_normal((2, 256)).astype(np.float32)

    def fn(M):
        q = M.quantize(M.array(w).astype(getattr(M, dtype)), group_size, 1)
        return [*q, M.dequantize(*q, group_size, 1)]
    _same(mlx, fn)

    def qmm(M, transpose):
        q = M.quantize(M.array(w), group_size, 1)
        return M.quantized_matmul(M.array(x if transpose else x[:, :3]), *q, transpose,
                                  group_size, 1)
    for transpose in (True, False):
        ours, theirs = qmm(mx, transpose), qmm(mlx, transpose)
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_e8m0_scale_is_the_exact_ceil_of_log2(mlx, mode, dtype):
    """The E8M0 exponent is ceil(log2(amax / max)) exactly: a log2 in the weight's dtype
    (or float32) rounds a value just above a power of two down onto it, and the exponent
    came out one short (bfloat16 12480 -> scale 2080, log2 11.0 in bfloat16: 138 for MLX's
    139; float32 scales 2^k (1 + 2^-23) likewise), the packed values with it."""
    maxval = 6.0 if mode == "mxfp4" else 448.0
    rows = [[1.0] * 32, [12480.0] + [1.0] * 31, [3e38 if dtype != "float16" else 6e4] * 32]
    for k in range(-12, 12 if dtype != "float16" else 7, 3):  # finite in the dtype
        scale = np.float32(2.0 ** k) * np.float32(1 + 2.0 ** -23)
        rows.append([float(np.float32(scale * np.float32(maxval)))] + [0.5] * 31)
    rng = np.random.default_rng(0)
    rows += (rng.standard_normal((8, 32)) * 10.0 ** rng.uniform(-6, 6, (8, 1))).tolist()
    w = np.array(rows, np.float32)
    _same(mlx, lambda M: M.quantize(M.array(w).astype(getattr(M, dtype)), mode=mode))
