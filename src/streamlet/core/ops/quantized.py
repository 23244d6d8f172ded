"""Quantization as MLX 0.32.4 defines it: `quantize`, `dequantize`, `quantized_matmul`,
`gather_qmm`, `gather_mm`, and the fp8 codecs `to_fp8` / `from_fp8`.

Modes (default group size, bits): affine (64, 4; also 1, 2, 3, 5, 6, 8 bits and groups
of 32 or 128), mxfp4 (32, 4), mxfp8 (32, 8), nvfp4 (16, 4).  Packing is MLX's, bit
for bit: every row of quantized values is one little-endian bit stream (value i at bit
i * bits) read as uint32 words, so weights quantized by MLX load here and back.

Affine: per group, `w ~ scale * q + bias` with `q` in [0, 2^bits - 1]; the scale and
bias are computed in float32 as MLX's CPU kernel does (the edge of larger magnitude is
represented exactly) and stored in the weight's dtype.  The fp modes store E2M1 (fp4)
or E4M3 (fp8) values with a power-of-two E8M0 scale (mx*) or an E4M3 scale (nvfp4,
optionally over a global float32 scale); their quantize and dequantize are composites
of ops following MLX's CPU path step for step, dtypes included.

Primitives: `quantize.params` (affine scales and biases, float32), `quantize.pack`,
`dequantize` (affine), `fp4.pack` / `fp4.unpack`, `to_fp8` / `from_fp8`,
`quantized_matmul` and `gather_qmm` (they dequantize to float32 and multiply).
"""
from __future__ import annotations

import math

import numpy as np

from . import build as b
from . import rules
from .build import dt

MODES = {"affine": (64, 4), "mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _mode(mode, op):
    if b.str_arg(mode, op, "mode") not in MODES:
        raise ValueError(f"[{op}] Invalid quantization mode '{mode}'.")
    return mode


def _params(mode, group_size, bits, op):
    gs, nb = MODES[mode]
    return (gs if group_size is None else b.int_arg(group_size, op, "group_size")), \
        (nb if bits is None else b.int_arg(bits, op, "bits"))


def _stream_of(out):
    state = out._node.stream
    return None if state is None else state.stream


# -- bit streams ------------------------------------------------------------------------------

def _pack_shape(bits):
    """(values, bytes) of the smallest whole-byte pack of `bits`-bit values."""
    g = math.gcd(bits, 8)
    return 8 // g, bits // g


def _pack(xp, q, bits):
    """uint32 words holding the rows of `q` (non-negative ints < 2^bits) as bit streams."""
    if 32 % bits == 0:
        n = 32 // bits
        q = q.astype(xp.uint32).reshape(q.shape[:-1] + (-1, n))
        return (q << (xp.arange(n, dtype=xp.uint32) * bits)).sum(-1, dtype=xp.uint32)
    n, nbytes = _pack_shape(bits)
    q = q.astype(xp.uint64).reshape(q.shape[:-1] + (-1, n))
    word = (q << (xp.arange(n, dtype=xp.uint64) * bits)).sum(-1, dtype=xp.uint64)
    parts = (word[..., None] >> (xp.arange(nbytes, dtype=xp.uint64) * 8)) & 0xFF
    by = xp.ascontiguousarray(parts.astype(xp.uint8).reshape(word.shape[:-1] + (-1,)))
    return by.view(xp.uint32)


def _unpack(xp, w, bits):
    """The `bits`-bit values (uint32) of the bit streams in the rows of uint32 `w`."""
    if 32 % bits == 0:
        shifts = xp.arange(0, 32, bits, dtype=xp.uint32)
        q = (w[..., None] >> shifts) & xp.uint32((1 << bits) - 1)
        return q.reshape(w.shape[:-1] + (-1,))
    n, nbytes = _pack_shape(bits)
    by = xp.ascontiguousarray(w).view(xp.uint8).reshape(w.shape[:-1] + (-1, nbytes))
    word = (by.astype(xp.uint64) << (xp.arange(nbytes, dtype=xp.uint64) * 8)).sum(
        -1, dtype=xp.uint64)
    q = (word[..., None] >> (xp.arange(n, dtype=xp.uint64) * bits)) & ((1 << bits) - 1)
    return q.astype(xp.uint32).reshape(w.shape[:-1] + (-1,))


# -- affine -----------------------------------------------------------------------------------

_UNLOADED = object()
_numba = _UNLOADED  # quantized_numba, loaded on first use; None without numba


def _compiled(xp):
    """The compiled CPU kernels, or None (no numba, or not running on NumPy)."""
    global _numba
    if xp is not np:
        return None
    if _numba is _UNLOADED:
        try:
            from . import quantized_numba as module
        except ImportError:
            module = None
        _numba = module
    return _numba


def _quantize_compiled(c, w, group_size, bits):
    """(packed words, float32 params) of `w` by the compiled kernel (the same bits)."""
    rows = np.ascontiguousarray(w, np.float32).reshape(-1, w.shape[-1])
    k = rows.shape[1]
    packed = np.zeros((rows.shape[0], k * bits // 32), np.uint32)
    scales = np.empty((rows.shape[0], k // group_size), np.float32)
    biases = np.empty_like(scales)
    c.quantize(rows, group_size, bits, packed, scales, biases)
    lead = w.shape[:-1]
    return packed.reshape(lead + (-1,)), np.stack([scales, biases], -1).reshape(
        lead + (-1, 2))

def _affine_params(xp, w, group_size, bits):
    """(..., groups, 2) float32 scale and bias per group, as MLX's CPU kernel finds them:
    the edge of larger magnitude maps exactly onto a grid point; NaNs are skipped."""
    c = _compiled(xp) if bits > 1 else None
    if c is not None:
        return _quantize_compiled(c, w, group_size, bits)[1]
    f32 = np.float32
    g = w.astype(f32).reshape(w.shape[:-1] + (-1, group_size))
    nan = xp.isnan(g)
    wmax = xp.where(nan, -np.inf, g).max(-1)
    wmin = xp.where(nan, np.inf, g).min(-1)
    if bits == 1:  # bit 0 is the group's minimum, bit 1 its maximum
        scale = xp.maximum(wmax - wmin, f32(1e-7))
        return xp.stack([scale, wmin], -1).astype(f32)
    n_bins = f32((1 << bits) - 1)
    scale = xp.maximum((wmax - wmin) / n_bins, f32(1e-7))
    lower = xp.abs(wmin) > xp.abs(wmax)
    scale = xp.where(lower, scale, -scale)
    edge = xp.where(lower, wmin, wmax)
    q0 = xp.rint(edge / scale)
    exact = q0 != 0
    scale = xp.where(exact, edge / xp.where(exact, q0, f32(1)), scale)
    bias = xp.where(exact, edge, f32(0))
    return xp.stack([scale, bias], -1).astype(f32)


def _affine_pack(xp, w, params, group_size, bits):
    c = _compiled(xp) if bits > 1 else None
    if c is not None:
        return _quantize_compiled(c, w, group_size, bits)[0]
    g = w.astype(np.float32).reshape(w.shape[:-1] + (-1, group_size))
    q = xp.rint((g - params[..., 1:]) / params[..., :1])
    q = xp.clip(q, 0, (1 << bits) - 1)
    q = xp.where(xp.isnan(q), 0, q).astype(xp.uint32).reshape(w.shape)
    return _pack(xp, q, bits)


def _component(xp, params, index, dtype):
    return params[..., index].astype(dtype)


def _affine_dequantize(xp, w, scales, biases, group_size, bits, dtype, names):
    """MLX's CPU dequantization: `q * scale` in the scales' dtype, `+ bias` in the
    promoted one, then the output dtype.  `names` holds those two dtypes' names in a
    tuple: the GPU backend widens a bfloat16 dtype param (even a bare name) to float32."""
    sname, bname = names
    q = _unpack(xp, w, bits)
    q = q.reshape(q.shape[:-1] + (-1, group_size))
    sd, bd = dt.from_name(sname).np, dt.from_name(bname).np
    if xp is np:
        out = (q.astype(sd) * b.cast(scales, sd)[..., None]).astype(bd) + \
            b.cast(biases, bd)[..., None]
    else:
        out = _rounded(xp, q.astype(np.float32) * scales.astype(np.float32)[..., None], sname)
        out = _rounded(xp, out + biases.astype(np.float32)[..., None], bname)
    return out.reshape(w.shape[:-1] + (-1,)).astype(dtype)


def _rounded(xp, x, name):
    """float32 `x` rounded to the dtype `name` (bfloat16 by its bits, to nearest even)."""
    if name == "bfloat16":
        u = x.view(xp.uint32)
        u = (u + xp.uint32(0x7FFF) + ((u >> 16) & xp.uint32(1))) & xp.uint32(0xFFFF0000)
        return xp.where(xp.isnan(x), x, u.view(np.float32))
    return x.astype(dt.from_name(name).np).astype(np.float32)


def _params_composite(w, group_size, bits):
    """`quantize.params` built from ops with rules, as MLX's fallback finds the scales and
    biases: its derivatives (through the group's max and min, the rounding's zero) are
    what MLX's grad, vjp and jvp of quantize give."""
    from . import elementwise as el
    from .creation import astype
    from .reduction import max as max_, min as min_
    from .shape import concatenate, unflatten
    f32 = dt.float32
    g = unflatten(w, -1, (-1, group_size))
    wmax, wmin = astype(max_(g, -1, True), f32), astype(min_(g, -1, True), f32)
    if bits == 1:
        return concatenate([el.maximum(wmax - wmin, b.scalar(1e-7, f32)), wmin], -1)
    scale = el.maximum((wmax - wmin) / b.scalar((1 << bits) - 1, f32), b.scalar(1e-7, f32))
    lower = el.greater(el.abs(wmin), el.abs(wmax))
    scale = el.where(lower, scale, -scale)
    edge = el.where(lower, wmin, wmax)
    q0 = el.round(edge / scale)
    zero = b.scalar(0, f32)
    scale = el.where(el.not_equal(q0, zero), edge / q0, scale)
    return concatenate([scale, el.where(el.equal(q0, zero), zero, edge)], -1)


def _component_composite(params, index, dtype):
    from .creation import astype
    return astype(params[..., index], dt.as_dtype(dtype))


def _groups_of(shape, group_size):
    """The number of groups along the last axis of `shape` (it must divide)."""
    if group_size <= 0 or shape[-1] % group_size:
        raise ValueError(f"[quantize] The last dimension of the matrix needs to be divisible "
                         f"by the quantization group size {group_size}. However the provided "
                         f" matrix has shape {shape}")
    return shape[-1] // group_size


def _params_shape(params, shape):
    return shape[:-1] + (_groups_of(shape, params["group_size"]), 2), params


def _pack_shape_rule(params, shape, params_shape=None):
    _groups_of(shape, params["group_size"])
    return shape[:-1] + (shape[-1] * params["bits"] // 32,), params


def _dequantize_shape(params, shape, *others):
    return shape[:-1] + (shape[-1] * 32 // params["bits"],), params


_PARAMS_RULES = rules.via(_params_composite)
_COMPONENT_RULES = rules.via(_component_composite)
_PARAMS = b.make("quantize.params", _affine_params, vjp=_PARAMS_RULES["vjp"],
                 jvp=_PARAMS_RULES["jvp"], shape=_params_shape)
_PACK = b.make("quantize.pack", _affine_pack, vjp=lambda c, out, w, p, **_: (None, None),
               jvp=lambda t, out, w, p, **_: rules.inert_tangent(t, out),
               shape=_pack_shape_rule)
_COMPONENT = b.make("quantize.component", _component, vjp=_COMPONENT_RULES["vjp"],
                    jvp=_COMPONENT_RULES["jvp"],
                    shape=lambda params, shape: (shape[:-1], params))


def _dequantize_vjp(c, out, w, scales, biases, group_size, bits, dtype, names):
    """Per group, the scale's cotangent is the cotangent dotted with the unscaled values,
    the bias's its sum; none for the packed integers."""
    from .creation import ones_like, zeros_like
    from .reduction import sum as sum_
    from .shape import unflatten
    grouped = unflatten(c, -1, (-1, group_size))

    def d_scales():
        q = dequantize(w, ones_like(scales), zeros_like(biases), group_size, bits,
                       dtype=c._dtype)
        return sum_(grouped * unflatten(q, -1, (-1, group_size)), -1)
    return None, d_scales, lambda: sum_(grouped, -1)


def _dequantize_jvp(t, out, w, scales, biases, group_size, bits, dtype, names):
    from .creation import ones_like, zeros_like
    from .shape import expand_dims, flatten, unflatten
    total = None
    if t[1] is not None:
        q = dequantize(w, ones_like(scales), zeros_like(biases), group_size, bits,
                       dtype=t[1]._dtype)
        total = unflatten(q, -1, (-1, group_size)) * expand_dims(t[1], -1)
    if t[2] is not None:
        shift = expand_dims(t[2], -1)
        total = shift if total is None else total + shift
    if total is None:
        return None
    grouped = unflatten(zeros_like(out), -1, (-1, group_size)) + total  # the full shape
    return flatten(grouped, -2, -1)


def _dequantize_vmap(axes, out, *inputs, **params):
    """The batch axis first in every input (the unbatched ones broadcast to it): the kernel
    takes any leading axes."""
    from .rules import batch_size, rebuild, to_front
    from .shape import broadcast_to, expand_dims
    size = batch_size(inputs, axes)
    moved = [to_front(v, ax) if ax is not None else
             broadcast_to(expand_dims(v, 0), (size,) + v._shape) for v, ax in zip(inputs, axes)]
    return rebuild(out, moved, (size,) + out._shape), 0


_DEQUANTIZE = b.make("dequantize", _affine_dequantize, vjp=_dequantize_vjp,
                     jvp=_dequantize_jvp, vmap=_dequantize_vmap, shape=_dequantize_shape)


# -- fp8 (E4M3, saturating) and fp4 (E2M1) ------------------------------------------------

def _to_fp8(xp, x):
    """E4M3 bits of `x`, rounded to nearest even; beyond the largest value (and inf, NaN)
    saturates to +-448, as MLX's ToFP8."""
    u32 = xp.uint32
    bits = xp.ascontiguousarray(x.astype(np.float32)).reshape(x.shape).view(u32)  # 0-d too
    sign = bits & u32(0x80000000)
    mag = bits ^ sign
    # below 2^-6 the result is subnormal: adding 2^14 lines the fp8 mantissa up with the
    # float's lowest bits, and the float addition rounds to nearest even
    low = (mag.view(np.float32) + np.float32(2.0 ** 14)).view(u32) - u32(141 << 23)
    # normal: rebias the exponent (127 -> 7) and round the 20 dropped bits to even
    odd = (mag >> u32(20)) & u32(1)
    high = (mag + u32(((7 - 127) << 23) & 0xFFFFFFFF) + u32(0x7FFFF) + odd) >> u32(20)
    out = xp.where(mag < u32(121 << 23), low, high) & u32(0xFF)
    out = xp.where(mag >= u32(543 << 21), u32(0x7E), out)
    return (out | (sign >> u32(24))).astype(xp.uint8)


def _from_fp8(xp, x, dtype):
    """Values of E4M3 bits: the low seven bits placed in a float16 and scaled by 2^8;
    0x7F and 0xFF are NaN."""
    low = x & 127
    half = (low.astype(xp.uint16) << 7).view(xp.float16).astype(np.float32) * 256
    half = xp.where(low == 127, np.float32(np.nan), half)
    return xp.where((x & 128) != 0, -half, half).astype(dtype)


def _fp4_codes(xp, v):
    """E2M1 codes nearest to `v`, ties to the smaller magnitude and signed zeros to +0,
    as MLX's argmin over its table finds them (a non-finite value gives 0)."""
    mid = xp.asarray(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32))
    a = xp.abs(v.astype(np.float32))
    mag = (a[..., None] > mid).sum(-1).astype(xp.uint32)
    code = xp.where((v < 0) & (mag > 0), mag + 8, mag)
    return xp.where(xp.isfinite(v), code, 0).astype(xp.uint32)


def _fp4_pack(xp, v):
    return _pack(xp, _fp4_codes(xp, v), 4)


def _fp4_unpack(xp, w, dtype):
    table = xp.asarray(np.array(FP4_VALUES, np.float32)).astype(dtype)
    return table[_unpack(xp, w, 4)]


_TO_FP8 = b.make("to_fp8", _to_fp8)
_FROM_FP8 = b.make("from_fp8", _from_fp8)
_FP4_PACK = b.make("fp4.pack", _fp4_pack)
_FP4_UNPACK = b.make("fp4.unpack", _fp4_unpack)


def to_fp8(x, *, stream=None):
    """E4M3 fp8 bits (uint8) of a floating array, rounded to nearest even and saturated
    at +-448.

    >>> mx.to_fp8(mx.array([1.0, -0.5, 1000.0])).tolist()
    [56, 176, 126]
    """
    x = b.as_array(x, "to_fp8")
    if x._dtype.kind != "f":
        raise ValueError(f"[to_fp8] Only real floating types are supported but x.dtype() == "
                         f"{x._dtype.name}.")
    return b.node(_TO_FP8, (x,), x._shape, dt.uint8, b.NO_PARAMS, b.resolve(stream))


def from_fp8(x, dtype=dt.bfloat16, *, stream=None):
    """The values of E4M3 fp8 bits (uint8) in a floating dtype (bfloat16 by default).

    >>> mx.from_fp8(mx.array([56, 176], dtype=mx.uint8), mx.float32).tolist()
    [1.0, -0.5]
    """
    x = b.as_array(x, "from_fp8")
    d = dt.as_dtype(dtype)
    if x._dtype is not dt.uint8:
        raise ValueError(f"[from_fp8] Input must have type uint8 but x.dtype() == "
                         f"{x._dtype.name}.")
    if d.kind != "f":
        raise ValueError(f"[from_fp8] Only real floating types are supported but dtype == "
                         f"{d.name}.")
    return b.node(_FROM_FP8, (x,), x._shape, d, {"dtype": d.np}, b.resolve(stream))


# -- quantize / dequantize --------------------------------------------------------------------

def _check_global(global_scale, mode, op):
    if global_scale is None:
        return None
    if mode != "nvfp4":
        raise ValueError(f"[{op}] Global scale is only supported for 'nvfp4' quantization "
                         "mode.")
    g = b.as_array(global_scale, op)
    if g.size != 1:
        raise ValueError(f"[{op}] Global scale must be a scalar but got shape {g._shape}.")
    if g._dtype is not dt.float32:
        raise ValueError(f"[{op}] Global scale must have dtype float32 but got "
                         f"{g._dtype.name}.")
    return g


def quantize(w, /, group_size=None, bits=None, mode="affine", *, global_scale=None,
             stream=None):
    """Quantize the rows of `w` (at least 2-D) in groups of `group_size` along the last
    axis: `[w_q, scales, biases]` for 'affine', `[w_q, scales]` for the fp modes.

    >>> w = mx.arange(64, dtype=mx.float32).reshape(1, 64)
    >>> w_q, scales, biases = mx.quantize(w, group_size=32, bits=8)
    >>> w_q.shape, w_q.dtype, scales.shape
    ((1, 16), mlx.core.uint32, (1, 2))
    >>> (mx.abs(mx.dequantize(w_q, scales, biases, 32, 8) - w).max() < 0.1).item()
    True
    """
    mode = _mode(mode, "quantize")
    gs, nb = _params(mode, group_size, bits, "quantize")
    w = b.as_array(w, "quantize")
    if w._dtype.kind != "f":
        raise ValueError(f"[quantize] Only real floating types can be quantized but w has "
                         f"type {w._dtype.name}.")
    if w.ndim < 2:
        raise ValueError(f"[quantize] The matrix to be quantized must have at least 2 "
                         f"dimension but it has only {w.ndim}.")
    _groups_of(w._shape, gs)
    g = _check_global(global_scale, mode, "quantize")
    if mode == "affine":
        return _affine_quantize(w, gs, nb, b.resolve(stream))
    return _fp_quantize(w, gs, nb, mode, g, stream)


def _affine_quantize(w, gs, nb, st):
    if gs not in (32, 64, 128):
        raise ValueError(f"[quantize] The requested group size {gs} is not supported. The "
                         "supported group sizes are 32, 64, and 128.")
    if nb not in (1, 2, 3, 4, 5, 6, 8):
        raise ValueError(f"[quantize] The requested number of bits {nb} is not supported. "
                         "The supported bits are 1, 2, 3, 4, 5, 6 and 8.")
    shape = _params_shape({"group_size": gs}, w._shape)[0]  # the shape rules' arithmetic
    params = b.node(_PARAMS, (w,), shape, dt.float32, {"group_size": gs, "bits": nb}, st)
    packed = _pack_shape_rule({"group_size": gs, "bits": nb}, w._shape)[0]
    wq = b.node(_PACK, (w, params), packed, dt.uint32, {"group_size": gs, "bits": nb}, st)
    scales, biases = (b.node(_COMPONENT, (params,), shape[:-1], w._dtype,
                             {"index": i, "dtype": w._dtype.np}, st) for i in (0, 1))
    return [wq, scales, biases]  # a list, as MLX's


def _fp_check(mode, gs, nb, op):
    egs, enb = MODES[mode]
    if gs != egs:
        raise ValueError(f"[{op}] {mode} quantization requires group size {egs} but got "
                         f"{gs}.")
    if nb != enb:
        raise ValueError(f"[{op}] {mode} quantization requires bits to be {enb} but got "
                         f"{nb}.")


def _fp_quantize(w, gs, nb, mode, global_scale, stream):
    """MLX's fp quantization, op for op (it is what MLX runs on the CPU).  The E8M0
    exponent is ceil(log2(amax / max value)), exact, as MLX 0.32.4 computes it (its source
    before 0.32.2 rounded instead)."""
    from . import elementwise as el
    from .arrange import view
    from .creation import astype
    from .reduction import max as max_
    from .shape import reshape
    _fp_check(mode, gs, nb, "quantize")
    s = dict(stream=stream)
    shape = w._shape[:-1] + (-1,)
    wq = reshape(w, w._shape[:-1] + (w._shape[-1] // gs, gs), **s)
    scales = el.divide(max_(el.abs(wq, **s), -1, True, **s),
                       b.scalar(6.0 if nb == 4 else 448.0, w._dtype), **s)
    if gs == 16:
        encode = b.scalar(1.0, dt.float32) if global_scale is None else \
            el.divide(b.scalar(448.0 * 6.0, dt.float32), global_scale, **s)
        scales = to_fp8(el.multiply(scales, encode, **s), **s)
        wq = el.multiply(el.divide(wq, from_fp8(scales, w._dtype, **s), **s), encode, **s)
    else:
        zero = b.scalar(0, scales._dtype)
        exps = _ceil_log2(scales, stream)
        scales = el.where(el.equal(scales, zero, **s), zero, exps, **s)
        wq = el.divide(wq, el.power(b.scalar(2.0, w._dtype), scales, **s), **s)
        scales = astype(el.add(scales, b.scalar(127, dt.int32), **s), dt.uint8, **s)
    if nb == 4:
        wq = b.node(_FP4_PACK, (wq,), wq._shape[:-1] + (gs // 8,), dt.uint32, b.NO_PARAMS,
                    b.resolve(stream))
    else:
        wq = view(to_fp8(wq, **s), dt.uint32, **s)
    return [reshape(wq, shape, **s), reshape(scales, shape, **s)]


def _ceil_log2(x, stream):
    """int32 ceil(log2(x)) of positive floats, exactly (as MLX 0.32.4's E8M0 exponent): from
    the float32 bits, the exponent plus one when the mantissa is not zero.  A float32
    log2 can't be used: just above a power of two it rounds down onto the integer (in
    bfloat16 even well above it), and its ceil is one short.  Subnormals are first scaled
    by 2^64 (exactly)."""
    from . import elementwise as el
    from .arrange import view
    from .creation import astype
    s = dict(stream=stream)
    u32 = lambda v: b.scalar(v, dt.uint32)  # noqa: E731
    x = astype(x, dt.float32, **s)
    tiny = el.less(x, b.scalar(2.0 ** -126, dt.float32), **s)
    x = el.where(tiny, el.multiply(x, b.scalar(2.0 ** 64, dt.float32), **s), x, **s)
    bits = view(x, dt.uint32, **s)
    expo = el.bitwise_and(el.right_shift(bits, u32(23), **s), u32(0xFF), **s)
    inexact = el.not_equal(el.bitwise_and(bits, u32(0x7FFFFF), **s), u32(0), **s)
    e = el.add(astype(expo, dt.int32, **s), astype(inexact, dt.int32, **s), **s)
    return el.subtract(e, el.where(tiny, b.scalar(127 + 64, dt.int32),
                                   b.scalar(127, dt.int32), **s), **s)


def _check_packed(op, w, scales, gs, nb, biases=None):
    if w._dtype is not dt.uint32:
        raise ValueError(f"[{op}] The weight matrix should be uint32 but received "
                         f"{w._dtype.name}")
    if biases is not None and scales._shape != biases._shape:
        raise ValueError(f"[{op}] Scales and biases should have the same shape. Received "
                         f"scales with shape {scales._shape} and biases with {biases._shape}")
    if w.ndim < 2 or scales.ndim < w.ndim - 2 or \
            tuple(w._shape[:-2]) != tuple(scales._shape[:w.ndim - 2]):
        raise ValueError(f"[{op}] Weight and scales should have the same batch shape. "
                         f"Received weight with shape {w._shape}, scales with "
                         f"{scales._shape}.")
    if w._shape[-1] * 32 // nb != scales._shape[-1] * gs:
        raise ValueError(f"[{op}] The shapes of the weight and scales are incompatible based "
                         f"on bits and group_size. w.shape() == {w._shape} and scales.shape() "
                         f"== {scales._shape} with group_size={gs} and bits={nb}")


def _mode_dtype(op, mode, scales, biases, dtype):
    """The output dtype and the checks of MLX's validate_mode_with_type."""
    if dtype is not None and dtype.kind != "f":
        raise ValueError(f"[{op}] Only real floating types are supported but output dtype "
                         f"== {dtype.name}.")
    if mode == "affine":
        if biases is None:
            raise ValueError(f"[{op}] Biases must be provided for affine quantization.")
        d = dt.promote_types(scales._dtype, biases._dtype)
        if d.kind != "f":
            raise ValueError(f"[{op}] Only real floating types are supported but "
                             f"scales.dtype() == {scales._dtype.name} and biases.dtype() == "
                             f"{biases._dtype.name}.")
        return dtype or d
    if scales._dtype is not dt.uint8:
        raise ValueError(f"[{op}] Scale type must be uint8 but received type "
                         f"{scales._dtype.name}.")
    if biases is not None:
        raise ValueError(f"[{op}] Biases must be null for quantization mode '{mode}'.")
    return dtype or dt.bfloat16


def _opt(x, op):
    return None if x is None else b.as_array(x, op)


def dequantize(w, /, scales, biases=None, group_size=None, bits=None, mode="affine",
               global_scale=None, dtype=None, *, stream=None):
    """The floating matrix that `quantize` packed into `w`, given its scales (and biases
    for 'affine'); in the scales' dtype unless `dtype` is given (bfloat16 for fp modes).

    >>> w_q, s, b_ = mx.quantize(mx.ones((2, 64)), group_size=64, bits=4)
    >>> mx.dequantize(w_q, s, b_).sum().item()
    128.0
    """
    mode = _mode(mode, "dequantize")
    w, scales, biases = b.as_array(w, "dequantize"), b.as_array(scales, "dequantize"), \
        _opt(biases, "dequantize")
    out = _mode_dtype("dequantize", mode, scales, biases,
                      None if dtype is None else dt.as_dtype(dtype))
    gs, nb = _params(mode, group_size, bits, "dequantize")
    if nb <= 0:
        raise ValueError(f"[dequantize] Invalid value for bits: {nb}")
    if gs <= 0:
        raise ValueError(f"[dequantize] Invalid value for group_size: {gs}")
    if w._dtype is not dt.uint32:
        raise ValueError("[dequantize] The matrix should be given as a uint32")
    if w.ndim < 2:
        raise ValueError(f"[dequantize] The matrix to be dequantized must have at least 2 "
                         f"dimension but it has only {w.ndim}.")
    g = _check_global(global_scale, mode, "dequantize")
    if mode != "affine":
        _fp_check(mode, gs, nb, "dequantize")
    what = "scales and biases" if mode == "affine" else "scales"
    others = (scales, biases) if mode == "affine" else (scales,)
    if any(x.ndim != w.ndim or x._shape[:-1] != w._shape[:-1] for x in others):
        raise ValueError(f"[dequantize] Shape of {what} does not match the matrix")
    size = w._shape[-1] * 32 // nb
    if size != scales._shape[-1] * gs:
        raise ValueError(f"[dequantize] Shape of {what} does not match the matrix given the "
                         f"quantization parameters. Provided matrix of shape {w._shape} and "
                         f"{what.replace(' and ', '/')} of shape {scales._shape}"
                         + (f" with group_size={gs} and bits={nb}." if mode == "affine"
                            else "."))
    if nb > 8:
        raise ValueError(f"[dequantize] Bits above 8 are not supported, got {nb}.")
    shape = w._shape[:-1] + (size,)
    if mode == "affine":
        bd = dt.promote_types(scales._dtype, biases._dtype)
        return b.node(_DEQUANTIZE, (w, scales, biases), shape, out,
                      {"group_size": gs, "bits": nb, "dtype": out.np,
                       "names": (scales._dtype.name, bd.name)}, b.resolve(stream))
    return _fp_dequantize(w, scales, gs, nb, out, g, shape, stream)


def _fp_dequantize(w, scales, gs, nb, out, global_scale, shape, stream):
    """MLX's fp dequantization, op for op (with a global scale the result is float32)."""
    from . import elementwise as el
    from .arrange import view
    from .creation import astype
    from .shape import expand_dims, reshape
    s = dict(stream=stream)
    if nb == 4:
        values = b.node(_FP4_UNPACK, (w,), shape, out, {"dtype": out.np}, b.resolve(stream))
    else:
        values = reshape(from_fp8(view(w, dt.uint8, **s), out, **s), shape, **s)
    values = reshape(values, shape[:-1] + (shape[-1] // gs, gs), **s)
    if gs == 16:
        inv = b.scalar(1.0, out) if global_scale is None else \
            el.divide(global_scale, b.scalar(448.0 * 6.0, out), **s)
        sc = el.multiply(from_fp8(scales, out, **s), inv, **s)
    else:
        sc = el.power(b.scalar(2.0, out),
                      el.subtract(astype(scales, out, **s), b.scalar(127, out), **s), **s)
    return reshape(el.multiply(values, expand_dims(sc, -1, **s), **s), shape, **s)


# -- matrix products with quantized weights -------------------------------------------------

def _decode_scales(xp, scales, gs):
    """fp-mode scales as float32 multipliers, as MLX's quantized matmul decodes them."""
    if gs == 16:
        return _from_fp8(xp, scales, np.float32)
    e = scales.astype(np.int32) - 127
    return xp.where(scales == 0, np.float32(2.0 ** -127), xp.ldexp(np.float32(1), e))


def _weights(xp, w, scales, biases, gs, nb, mode, gscale=None, half=None):
    """The float32 matrices packed in `w` (batch axes kept); for a `half` dtype (its name),
    rounded at each step as `dequantize` rounds them in that dtype, so a quantized product
    is the product of `dequantize`'s matrix, as MLX's kernels compute it."""
    if mode == "affine":
        q = _unpack(xp, w, nb).astype(np.float32)
        q = q.reshape(q.shape[:-1] + (-1, gs))
        deq = q * scales.astype(np.float32)[..., None]
        if half:
            deq = _rounded(xp, deq, half)
        deq = deq + biases.astype(np.float32)[..., None]
    else:
        if nb == 4:
            q = _fp4_unpack(xp, w, np.float32)
        else:
            q = _from_fp8(xp, xp.ascontiguousarray(w).view(xp.uint8), np.float32)
        q = q.reshape(q.shape[:-1] + (-1, gs))
        sc = _decode_scales(xp, scales, gs)
        if gscale is not None:
            sc = sc * (gscale.astype(np.float32) / np.float32(448.0 * 6.0)).reshape(
                gscale.shape + (1,) * (sc.ndim - gscale.ndim))
        deq = q * sc[..., None]
        half = half if gscale is None else None  # with a global scale, float32 (MLX's)
    if half:
        deq = _rounded(xp, deq, half)
    return deq.reshape(deq.shape[:-2] + (-1,))


def _half(dtype):
    """The name of a half-precision dtype param (bfloat16 as the GPU sees it in "own"
    mode too), else None."""
    name = np.dtype(dtype).name
    return name if name in ("float16", "bfloat16") else None


def _result(xp, y, dtype):
    """A float32 product in the node's dtype; bfloat16 on a GPU stays float32, which the
    backend rounds (GpuKernel "own")."""
    return y if xp is not np and _half(dtype) == "bfloat16" else y.astype(dtype)


_FEW_ROWS = 8  # up to this many rows of x, the compiled kernel beats dequantize + BLAS


def _qmm(xp, x, w, scales, *rest, gs, bits, mode, transpose, dtype):
    biases = rest[0] if mode == "affine" else None
    half = _half(dtype)
    c = _compiled(xp) if mode == "affine" and transpose and w.ndim == 2 and not half else None
    rows = math.prod(x.shape[:-1])
    if c is not None and 0 < rows <= _FEW_ROWS and x.shape[-1] % gs == 0:
        out = c.matmul(x.reshape(rows, -1).astype(np.float32), w, scales, biases, gs, bits)
        return out.reshape(x.shape[:-1] + (w.shape[0],)).astype(dtype)
    wf = _weights(xp, w, scales, biases, gs, bits, mode, half=half)
    if transpose:
        wf = xp.swapaxes(wf, -1, -2)
    if x.ndim <= 2 and wf.ndim > 2:  # MLX multiplies by the first matrix then
        wf = wf.reshape((-1,) + wf.shape[-2:])[0]
    return _result(xp, xp.matmul(x.astype(np.float32), wf), dtype)


def _gather_qmm(xp, x, w, scales, *rest, gs, bits, mode, transpose, dtype):
    lhs, rhs = rest[-2], rest[-1]
    biases = rest[0] if mode == "affine" else None
    gscale = rest[-3] if len(rest) == (4 if mode == "affine" else 3) else None
    experts, inverse = xp.unique(rhs.reshape(-1), return_inverse=True)
    batch = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    wf = _weights(xp, batch(w)[experts], batch(scales)[experts],
                  None if biases is None else batch(biases)[experts], gs, bits, mode,
                  None if gscale is None else gscale.reshape(-1)[experts], _half(dtype))
    if transpose:
        wf = xp.swapaxes(wf, -1, -2)
    xs = batch(x)[lhs.reshape(-1)].astype(np.float32)
    out = xp.matmul(xs, wf[inverse.reshape(-1)])
    return _result(xp, out.reshape(lhs.shape + out.shape[-2:]), dtype)


def _qmm_vjp(cot, out, x, w, scales, *rest, gs, bits, mode, transpose, dtype):
    """As MLX: the input's cotangent is a quantized product with the other orientation;
    the scales' and biases' come from the dense weight gradient; none for `w`."""
    from . import elementwise as el
    from .creation import ones_like, zeros_like
    from .linalg import matmul
    from .reduction import sum as sum_
    from .shape import flatten, swapaxes, unflatten
    st = _stream_of(out)
    biases = rest[0] if mode == "affine" else None
    dx = quantized_matmul(cot, w, scales, biases, not transpose, gs, bits, mode, stream=st)

    def dense():
        nd = w.ndim
        fc, fx = flatten(cot, 0, -nd, stream=st), flatten(x, 0, -nd, stream=st)
        dw = matmul(swapaxes(fc, -1, -2, stream=st), fx, stream=st) if transpose else \
            matmul(swapaxes(fx, -1, -2, stream=st), fc, stream=st)
        return unflatten(dw, -1, (-1, gs), stream=st)

    def d_scales():
        _affine_only(mode, "QuantizedMatmul")
        wq = dequantize(w, ones_like(scales, stream=st), zeros_like(biases, stream=st), gs,
                        bits, stream=st)
        return sum_(el.multiply(dense(), unflatten(wq, -1, (-1, gs), stream=st), stream=st),
                    -1, stream=st)

    def d_biases():
        return sum_(dense(), -1, stream=st)

    grads = [dx, _no_weight_grad("QuantizedMatmul"), d_scales]
    return grads + ([d_biases] if mode == "affine" else [])


def _affine_only(mode, name):
    if mode != "affine":
        raise ValueError(f"[{name}::vjp] no gradient wrt scales in {mode} quantization.")


def _no_weight_grad(name):
    def thunk():
        raise RuntimeError(f"[{name}::vjp] no gradient wrt the quantized weights.")
    return thunk


def _qmm_jvp(tangents, out, x, w, scales, *rest, gs, bits, mode, transpose, dtype):
    if any(t is not None for t in tangents[1:]):
        raise RuntimeError("[QuantizedMatmul::jvp] No JVP wrt the quantized matrix yet.")
    return quantized_matmul(tangents[0], w, scales, rest[0] if mode == "affine" else None,
                            transpose, gs, bits, mode, stream=_stream_of(out))


def _qmm_vmap(axes, out, x, w, *rest, **params):
    """A batched input with a matrix of weights: the batch is one more leading axis of x;
    batched weights go slice by slice."""
    from .rules import rebuild, to_front
    if any(a is not None for a in axes[1:]) or w.ndim != 2:
        from ..vmap import batch_by_loop
        return batch_by_loop(axes, out, x, w, *rest, **params)
    x = to_front(x, axes[0])
    return rebuild(out, (x, w, *rest), (x._shape[0],) + out._shape), 0


def _qmm_shape(params, xs, ws, *others):
    """The product's shape for the inputs' shapes (affine weights packed `bits` per word)."""
    inner = ws[-1] * 32 // params["bits"] if params["transpose"] else ws[-2]
    if xs[-1] != inner:
        raise ValueError(f"[quantized_matmul] Last dimension of first input with shape {xs} "
                         f"must match the quantized matrix's {inner}.")
    lead = xs[:-1]
    if len(xs) > 2 and len(ws) > 2:
        lead = b.broadcast_shapes(xs[:-2], ws[:-2], op="quantized_matmul") + xs[-2:-1]
    return lead + (ws[-2] if params["transpose"] else ws[-1] * 32 // params["bits"],), params


_QMM = b.make("quantized_matmul", _qmm, gpu=b.GpuKernel(_qmm, bfloat16="own"), vjp=_qmm_vjp,
              jvp=_qmm_jvp, vmap=_qmm_vmap, shape=_qmm_shape)


def _qmm_dims(op, x, w, scales, biases, transpose, gs, nb):
    _check_packed(op, w, scales, gs, nb, biases)
    inner = w._shape[-1] * 32 // nb if transpose else w._shape[-2]
    outer = w._shape[-2] if transpose else w._shape[-1] * 32 // nb
    if x._shape[-1] != inner:
        raise ValueError(f"[{op}] Last dimension of first input with shape (..., "
                         f"{x._shape[-1]}) does not match the expanded quantized matrix "
                         f"({inner}, {outer}) computed from shape {w._shape} with "
                         f"group_size={gs}, bits={nb} and transpose={str(transpose).lower()}")
    return outer


def _qmm_inputs(op, x, w, scales, biases, mode, group_size, bits, transpose):
    x, w, scales = (b.as_array(v, op) for v in (x, w, scales))
    biases = _opt(biases, op)
    d = _mode_dtype(op, _mode(mode, op), scales, biases, None)
    gs, nb = _params(mode, group_size, bits, op)
    transpose = b.bool_arg(transpose, op, "transpose")
    if x.ndim < 1:
        raise ValueError(f"[{op}] The input must have at least one dimension.")
    outer = _qmm_dims(op, x, w, scales, biases, transpose, gs, nb)
    d = dt.promote_types(x._dtype, d) if mode == "affine" else x._dtype
    if d.kind != "f":
        raise ValueError(f"[{op}] Only real floating types are supported but x.dtype() == "
                         f"{x._dtype.name}.")
    return x, w, scales, biases, d, gs, nb, outer


def quantized_matmul(x, w, /, scales, biases=None, transpose=True, group_size=None, bits=None,
                     mode="affine", *, stream=None):
    """`x @ dequantize(w).T` (or `x @ dequantize(w)` with `transpose=False`), without
    keeping the dense weight.

    >>> w = mx.random.normal((8, 64), key=mx.random.key(0))
    >>> w_q, s, b_ = mx.quantize(w)
    >>> x = mx.ones((2, 64))
    >>> mx.allclose(mx.quantized_matmul(x, w_q, s, b_), x @ mx.dequantize(w_q, s, b_).T,
    ...             atol=1e-4).item()
    True
    """
    from .creation import astype
    from .shape import broadcast_to
    x, w, scales, biases, d, gs, nb, outer = _qmm_inputs(
        "quantized_matmul", x, w, scales, biases, mode, group_size, bits, transpose)
    ins = [astype(x, d, stream=stream), w]
    ins += [astype(scales, d, stream=stream), astype(biases, d, stream=stream)] \
        if mode == "affine" else [scales]
    if x.ndim > 2 and w.ndim > 2:  # batch axes broadcast, the matrices stay
        batch = b.broadcast_shapes(x._shape[:-2], w._shape[:-2], op="quantized_matmul")
        ins = [v if v._shape[:-2] == batch else broadcast_to(v, batch + v._shape[-2:],
                                                                stream=stream) for v in ins]
    shape = ins[0]._shape[:-1] + (outer,)
    return b.node(_QMM, tuple(ins), shape, d,
                  {"gs": gs, "bits": nb, "mode": mode, "transpose": bool(transpose),
                   "dtype": d.np}, b.resolve(stream))


def _indices(op, idx, x, stream):
    """MLX's indices_or_default: integer indices as uint32, or every batch matrix."""
    from .creation import arange, astype
    from .shape import reshape
    if x.ndim < 2:
        raise ValueError(f"{op} Input must have at least two dimensions but got input with "
                         f"shape {x._shape}.")
    if idx is not None:
        idx = b.as_array(idx, op)
        if idx._dtype.kind not in "iu":
            raise ValueError(f"{op} Got indices with invalid dtype. Indices must be integral.")
        return astype(idx, dt.uint32, stream=stream)
    batch = x._shape[:-2]
    return reshape(arange(math.prod(batch), dtype=dt.uint32, stream=stream), batch,
                   stream=stream)


def _broadcast_indices(lhs, rhs, stream):
    from .shape import broadcast_to
    shape = b.broadcast_shapes(lhs._shape, rhs._shape, op="gather")
    return [broadcast_to(i, shape, stream=stream) if i._shape != shape else i
            for i in (lhs, rhs)]


def _batched(v, st):
    """`v` as a stack of its matrices (one for a 2-D `v`)."""
    from .shape import reshape
    n = -1 if math.prod(v._shape[-2:]) else math.prod(v._shape[:-2])  # -1 for shapeless
    return reshape(v, (n,) + v._shape[-2:], stream=st)


def _scatter_rows(shape, idx, rows, st):
    """Zeros of `shape` plus `rows` (one matrix per index) added at the flat batch indices
    `idx`, repeated indices accumulating."""
    from .creation import zeros
    from .shape import flatten, reshape
    from .updates import scatter
    acc = zeros((math.prod(shape[:-2]),) + tuple(shape[-2:]), rows._dtype, stream=st)
    acc = scatter(acc, flatten(idx, stream=st), _batched(rows, st), "add", stream=st)
    return reshape(acc, tuple(shape), stream=st)


def _gather_qmm_vjp(cot, out, x, w, scales, *rest, gs, bits, mode, transpose, dtype):
    """The input's cotangent as a gathered quantized product scattered back to `x`'s
    matrices; the scales' and biases' from the gathered dense weight gradient."""
    from . import elementwise as el
    from .creation import ones_like, zeros_like
    from .reduction import sum as sum_
    from .shape import unflatten
    st = _stream_of(out)
    lhs, rhs = rest[-2], rest[-1]
    biases = rest[0] if mode == "affine" else None

    def d_x():
        g = gather_qmm(cot, w, scales, biases, None, rhs, not transpose, gs, bits, mode,
                       stream=st)
        return _scatter_rows(x._shape, lhs, g, st)

    def dense():
        per, idx = _gather_weight_grad(x, cot, lhs, rhs, w, transpose, st)
        full = _scatter_rows(w._shape[:-2] + per._shape[-2:], idx, per, st)
        return unflatten(full, -1, (-1, gs), stream=st)

    def d_scales():
        _affine_only(mode, "GatherQMM")
        wq = dequantize(w, ones_like(scales, stream=st), zeros_like(biases, stream=st), gs,
                        bits, stream=st)
        return sum_(el.multiply(dense(), unflatten(wq, -1, (-1, gs), stream=st), stream=st),
                    -1, stream=st)

    grads = [d_x, _no_weight_grad("GatherQMM"), d_scales]
    if mode == "affine":
        grads.append(lambda: sum_(dense(), -1, stream=st))
    return grads + [None] * (len(rest) + 3 - len(grads))


def _gather_weight_grad(x, cot, lhs, rhs, w, transpose, st):
    """The dense gradient of the gathered matrices of `w`: per product x^T cot (or
    cot^T x), added into the matrix its rhs index picked."""
    from .linalg import matmul
    from .shape import swapaxes
    xs = _take_batch(x, lhs, st)
    per = matmul(swapaxes(cot, -1, -2, stream=st), xs, stream=st) if transpose else \
        matmul(swapaxes(xs, -1, -2, stream=st), cot, stream=st)
    return per, rhs


def _gather_qmm_shape(params, xs, *rest):
    """The index arrays (last two inputs) give the batch; x its rows; w its outputs."""
    ws, lhs = rest[0], rest[-2]
    outer = ws[-2] if params["transpose"] else ws[-1] * 32 // params["bits"]
    return lhs + (xs[-2], outer), params


_GATHER_QMM = b.make("gather_qmm", _gather_qmm, gpu=b.GpuKernel(_gather_qmm, bfloat16="own"),
                     vjp=_gather_qmm_vjp, shape=_gather_qmm_shape)


def gather_qmm(x, w, /, scales, biases=None, lhs_indices=None, rhs_indices=None,
               transpose=True, group_size=None, bits=None, mode="affine", global_scale=None,
               *, sorted_indices=False, stream=None):
    """`quantized_matmul` with matrix-level gather: the matrices of `x` and of the packed
    `w` picked by `lhs_indices` and `rhs_indices` (flat indices over their batch axes).

    >>> w_q, s, b_ = mx.quantize(mx.ones((4, 8, 64)))
    >>> mx.gather_qmm(mx.ones((1, 64)), w_q, s, b_, rhs_indices=mx.array([0, 3])).shape
    (2, 1, 8)
    """
    from .creation import astype
    sorted_indices = b.bool_arg(sorted_indices, "gather_qmm", "sorted_indices")
    if lhs_indices is None and rhs_indices is None:
        return quantized_matmul(x, w, scales, biases, transpose, group_size, bits, mode,
                                stream=stream)
    op = "gather_qmm"
    x, w, scales, biases, d, gs, nb, outer = _qmm_inputs(
        op, x, w, scales, biases, mode, group_size, bits, transpose)
    g = None
    if global_scale is not None:
        if mode != "nvfp4":
            raise ValueError(f"[{op}] Global scale is only supported for 'nvfp4' "
                             "quantization mode.")
        g = b.as_array(global_scale, op)
        experts = math.prod(w._shape[:-2])
        if g._shape != (experts,) or g._dtype is not dt.float32:
            raise ValueError(f"[{op}] Global scale must have one entry per expert with shape "
                             f"({experts}) but got {g._shape}.")
    lhs = _indices(f"[{op}]", lhs_indices, x, stream)
    rhs = _indices(f"[{op}]", rhs_indices, w, stream)
    lhs, rhs = _broadcast_indices(lhs, rhs, stream)
    ins = [astype(x, d, stream=stream), w]
    ins += [astype(scales, d, stream=stream), astype(biases, d, stream=stream)] \
        if mode == "affine" else [scales]
    ins += ([g] if g is not None else []) + [lhs, rhs]
    shape = lhs._shape + (x._shape[-2], outer)
    return b.node(_GATHER_QMM, tuple(ins), shape, d,
                  {"gs": gs, "bits": nb, "mode": mode, "transpose": bool(transpose),
                   "dtype": d.np}, b.resolve(stream))


def qqmm(x, w, scales=None, group_size=None, bits=None, mode="nvfp4", global_scale_x=None,
         global_scale_w=None, *, stream=None):
    """`x @ w.T` with both operands quantized in an fp mode: `x` is quantized and
    dequantized on the fly, `w` is given packed (with its `scales`) or as floats; the
    result has `x`'s dtype.

    >>> w_q, s = mx.quantize(mx.ones((4, 32)), mode="mxfp8")
    >>> mx.qqmm(mx.ones((1, 32)), w_q, s, mode="mxfp8").tolist()
    [[32.0, 32.0, 32.0, 32.0]]
    """
    from .creation import astype
    from .linalg import matmul
    from .shape import expand_dims, flatten, reshape, squeeze, swapaxes
    op = "qqmm"
    mode = _mode(mode, op)
    if mode == "affine":
        raise ValueError(f"[{op}] Only fp quantization modes are supported, got 'affine'.")
    gs, nb = _params(mode, group_size, bits, op)
    x0 = b.as_array(x, op)
    w = b.as_array(w, op)
    xx = expand_dims(x0, 0, stream=stream) if x0.ndim == 1 else \
        (flatten(x0, 0, -2, stream=stream) if x0.ndim > 2 and w.ndim == 2 else x0)
    if xx.ndim > 2 or w.ndim > 2:
        raise ValueError(f"[{op}] Only 2D inputs are supported but x.ndim() == {xx.ndim} and "
                         f"w.ndim() == {w.ndim}.")
    for name, v in (("first", xx), ("second", w)):
        if v is w and w._dtype is dt.uint32:
            continue
        if v._dtype.kind != "f" or v._dtype is dt.float64:
            raise ValueError(f"[{op}] Only real floating types except float64 are supported "
                             f"but {name} argument dtype == {v._dtype.name}.")
    gx = _check_global(global_scale_x, mode, op)
    gw = _check_global(global_scale_w, mode, op)
    if mode == "nvfp4" and (gx is None) != (gw is None):
        raise ValueError(f"[{op}] For nvfp4 mode, either both global_scale_x and "
                         "global_scale_w must be provided, or neither.")
    if w._dtype is dt.uint32:
        if scales is None:
            raise ValueError(f"[{op}] Scales must be provided if second argument is "
                             "quantized.")
        scales = b.as_array(scales, op)
        _qmm_dims(op, xx, w, scales, None, True, gs, nb)
        wq, ws = w, scales
    else:
        if xx._shape[-1] != w._shape[-1]:
            raise ValueError(f"[{op}] Last dimension of first input with shape {xx._shape} "
                             f"must match last dimension of second input with shape "
                             f"{w._shape}.")
        wq, ws = quantize(w, gs, nb, mode, global_scale=gw, stream=stream)
    kw = dict(mode=mode, dtype=dt.float32, stream=stream)
    xq, xs = quantize(xx, gs, nb, mode, global_scale=gx, stream=stream)
    x_hat = dequantize(xq, xs, None, gs, nb, global_scale=gx, **kw)
    w_hat = dequantize(wq, ws, None, gs, nb, global_scale=gw, **kw)
    out = astype(matmul(x_hat, swapaxes(w_hat, -1, -2, stream=stream), stream=stream),
                 x0._dtype, stream=stream)
    if x0.ndim > 2:
        return reshape(out, x0._shape[:-1] + out._shape[-1:], stream=stream)
    return squeeze(out, 0, stream=stream) if x0.ndim == 1 else out


# -- gather_mm --------------------------------------------------------------------------------

def _gather_mm(xp, a, b_, lhs, rhs, dtype):
    batch = lambda v: v.reshape((math.prod(v.shape[:-2]),) + v.shape[-2:])  # noqa: E731
    out = xp.matmul(b.cast(batch(a)[lhs.reshape(-1)], dtype),
                    b.cast(batch(b_)[rhs.reshape(-1)], dtype))
    return out.reshape(lhs.shape + out.shape[-2:])


def _gather_mm_vjp(cot, out, a, b_, lhs, rhs, dtype):
    from .linalg import matmul
    from .shape import swapaxes
    st = _stream_of(out)
    d_a = lambda: _scatter_rows(a._shape, lhs, matmul(  # noqa: E731
        cot, swapaxes(_take_batch(b_, rhs, st), -1, -2, stream=st), stream=st), st)
    d_b = lambda: _scatter_rows(b_._shape, rhs, matmul(  # noqa: E731
        swapaxes(_take_batch(a, lhs, st), -1, -2, stream=st), cot, stream=st), st)
    from .rules import no_index_grad
    return [d_a, d_b, no_index_grad("gather_mm"), no_index_grad("gather_mm")]


def _take_batch(v, idx, st):
    """The matrices of `v` at the flat batch indices `idx` (shape idx.shape + matrix)."""
    from .indexing import take
    return take(_batched(v, st), idx, 0, stream=st)


_GATHER_MM = b.make("gather_mm", _gather_mm, vjp=_gather_mm_vjp,
                    shape=lambda params, xs, ys, ls, rs: (ls + (xs[-2], ys[-1]), params))


def gather_mm(a, b_, /, lhs_indices=None, rhs_indices=None, *, sorted_indices=False,
              stream=None):
    """Matrix products of the matrices of `a` and `b` picked by the index arrays (flat
    indices into their batch axes); the index arrays broadcast, and give the batch shape.

    >>> a, b_ = mx.ones((3, 2, 4)), mx.ones((5, 4, 2))
    >>> mx.gather_mm(a, b_, mx.array([0, 2]), mx.array([4, 1])).shape
    (2, 2, 2)
    """
    from .creation import astype
    from .linalg import matmul
    from .products import float_matrices
    from .shape import squeeze
    sorted_indices = b.bool_arg(sorted_indices, "gather_mm", "sorted_indices")
    if lhs_indices is None and rhs_indices is None:
        return matmul(a, b_, stream=stream)
    x, y, xa, ya, d = float_matrices(b.as_array(a, "gather_mm"), b.as_array(b_, "gather_mm"),
                                     "gather_mm", stream)
    x, y = astype(x, d, stream=stream), astype(y, d, stream=stream)
    lhs = _indices("[gather_mm]", lhs_indices, x, stream)
    rhs = _indices("[gather_mm]", rhs_indices, y, stream)
    lhs, rhs = _broadcast_indices(lhs, rhs, stream)
    shape = lhs._shape + (x._shape[-2], y._shape[-1])
    out = b.node(_GATHER_MM, (x, y, lhs, rhs), shape, d, {"dtype": d.np}, b.resolve(stream))
    axes = ([out.ndim - 2] if xa == 1 else []) + ([out.ndim - 1] if ya == 1 else [])
    return squeeze(out, tuple(axes), stream=stream) if axes else out


__all__ = ["dequantize", "from_fp8", "gather_mm", "gather_qmm", "qqmm", "quantize",
           "quantized_matmul", "to_fp8"]
