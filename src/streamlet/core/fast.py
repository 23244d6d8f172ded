"""`mx.fast`: fused operations, as MLX 0.32.4 defines them.

On the CPU MLX computes these with its fallback compositions; streamlet follows them
step for step, dtypes included (normalizations in float32 for every input dtype, then
the output dtype before the weight; RoPE's angles in float32, the rotation in the
input's dtype; attention's softmax in float32).

- `rms_norm`, `layer_norm` and `rope` are primitives, one node each (a fused kernel),
  with vjp, jvp and vmap rules built from ops; the normalizations' cotangent for x is one
  node too (`norm_dx`, one kernel on a GPU).
- `scaled_dot_product_attention` is one node too (without `sinks`: then a composite),
  whose kernel takes `_attention`'s steps and whose jvp and vmap trace `_attention`, as
  MLX differentiates its fallback; its vjp is one node too, giving on the CPU the
  cotangents that tracing would, bit for bit, and on a GPU the same in float32 (inside
  another transform it traces them).
  `cross_entropy` is a composite of ops, so its transforms come from those ops' rules.
- `cuda_kernel` runs CUDA source through CuPy's RawKernel on GPU streams;
  `metal_kernel` raises (there is no Metal backend).

>>> x = mx.array([[1.0, 2.0, 3.0, 4.0]])
>>> mx.fast.rms_norm(x, None, 1e-5)
array([[0.365148, 0.730296, 1.09544, 1.46059]], dtype=float32)
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import _public
from .ops import build as b
from .ops import rules
from .array import const
from .graph import TRACING
from .ops.build import dt

_F32 = np.float32


def _stream_of(out):
    state = out._node.stream
    return None if state is None else state.stream


def _out_type(op, x, *others):
    d = x._dtype
    for o in others:
        if o is not None:
            d = dt.promote_types(d, o._dtype)
    if d.kind != "f":
        raise ValueError(f"[{op}] Received unsupported type {d.name}.")
    return d


def _check_vector(op, what, v, x):
    if v is None:
        return None
    v = b.as_array(v, op)
    if v.ndim != 1:
        raise ValueError(f"[{op}] {what} must have 1 dimension but has {v.ndim} dimensions.")
    if v.size != x._shape[-1]:
        raise ValueError(f"[{op}] {what} must have the same size as the last dimension of x "
                         f"but has {v.size} elements.")
    return v


def _at_least_1d(op, x):
    x = b.as_array(x, op)
    if x.ndim == 0:
        raise ValueError(f"[{op}] Input must have at least 1 dimension but got input with 0 "
                         "dimensions.")
    return x


# -- normalizations ---------------------------------------------------------------------------

def _mean_last(xp, v):
    """The float32 mean of `v` over its last axis, kept.  On NumPy its sum over the count:
    NumPy's mean divides that sum in float64 and rounds once, which gives the same float32
    (a correctly rounded quotient), without the mean's wrapper per call."""
    n = v.shape[-1]
    if xp is np and 0 < n < 1 << 24:
        return v.sum(axis=-1, keepdims=True) / _F32(n)
    return xp.mean(v, axis=-1, keepdims=True)


def _deviation(xp, x, eps, centered):
    """x in float32 (less its mean over the last axis if `centered`) and the inverse of
    its root mean square there, eps added under the root."""
    x = x.astype(_F32, copy=False)
    if centered:
        x = x - _mean_last(xp, x)
    return x, _F32(1) / xp.sqrt(_mean_last(xp, x * x) + _F32(eps))


def _rms_norm(xp, x, w, eps, dtype):
    x, n = _deviation(xp, x, eps, False)
    y = (x * n).astype(dtype, copy=False)
    return y if w is None else y * w


def _layer_norm(xp, x, w, bias, eps, dtype):
    xc, n = _deviation(xp, x, eps, True)
    y = (xc * n).astype(dtype, copy=False)
    if w is not None:
        y = y * w
    return y if bias is None else y + bias


def _norm_kernel(fn):
    """A kernel taking the inputs present (x, then weight and bias as `has` says)."""
    def kernel(xp, x, *rest, eps, has, dtype):
        it = iter(rest)
        args = [next(it) if h else None for h in has]
        return fn(xp, x, *args, eps, dtype)
    return kernel


def _inputs(node_inputs, has):
    """(x, weight or None, bias or None) from a normalization node's inputs."""
    it = iter(node_inputs[1:])
    found = tuple(next(it) if h else None for h in has)
    return (node_inputs[0],) + found + (None,) * (2 - len(found))


def _normalized(x, eps, centered, st):
    """(x in float32, its normalized value y0, the inverse deviation n), with ops."""
    from .ops import astype, mean, multiply, rsqrt, subtract
    xf = astype(x, dt.float32, stream=st)
    if centered:
        xf = subtract(xf, mean(xf, -1, keepdims=True, stream=st), stream=st)
    n = rsqrt(mean(multiply(xf, xf, stream=st), -1, keepdims=True, stream=st) + eps,
              stream=st)
    return xf, multiply(xf, n, stream=st), n


def _norm_dx(xp, x, c, *w, eps, centered):
    """The kernel of a normalization's cotangent for x, given the output's `c` (and the
    weight, if any): `_norm_dx_ops`'s steps on buffers, in float32."""
    xf, n = _deviation(xp, x, eps, centered)
    y0 = xf * n
    g = (c * w[0] if w else c).astype(_F32, copy=False)
    dx = g - y0 * _mean_last(xp, g * y0)
    if centered:
        dx = dx - _mean_last(xp, g)
    return (n * dx).astype(x.dtype, copy=False)


def _norm_dx_ops(x, c, *w, eps, centered):
    """The cotangent for x of `x * n` (n = rsqrt(mean(x^2) + eps), x centered first for
    layer_norm): n g - x n^3 mean(g x), less mean(g) when centered, g = c * weight; the
    rules of `_NORM_DX` trace it (a gradient of a gradient, a vmap of one)."""
    from .ops import astype, mean, multiply, subtract
    _, y0, n = _normalized(x, eps, centered, None)
    g = astype(multiply(c, w[0]) if w else c, dt.float32)
    dx = subtract(g, multiply(y0, mean(multiply(g, y0), -1, keepdims=True)))
    if centered:
        dx = subtract(dx, mean(g, -1, keepdims=True))
    return astype(multiply(n, dx), x._dtype)


# the cotangent for x of rms_norm and layer_norm: one node (x, the output's cotangent, the
# weight if any) instead of the dozen of `_norm_dx_ops`
_NORM_DX = b.make("norm_dx", _norm_dx, shape=rules.broadcast_shape,
                  gpu=b.GpuKernel("streamlet.backend.cuda_fast:norm_dx", bfloat16="native"),
                  **rules.via(_norm_dx_ops))


def _norm_vjp(centered):
    def vjp(c, out, x, *rest, eps, has, dtype):
        from .ops import multiply
        st = _stream_of(out)
        _, w, bias = _inputs((x, *rest), has)
        ins = (x, c) if w is None else (x, c, w)
        grads = [lambda: b.node(_NORM_DX, ins, x._shape, x._dtype,
                                {"eps": eps, "centered": centered}, b.resolve(st))]
        if w is not None:  # summed over x's rows by the transform: c times x normalized
            # in the output's dtype, the normalization's node without weight or bias
            grads.append(lambda: multiply(c, b.node(
                out._node.prim, (x,), x._shape, out._dtype,
                {"eps": eps, "has": (False,) * len(has), "dtype": out._dtype.np},
                b.resolve(st)), stream=st))
        if bias is not None:
            grads.append(c)
        return grads
    return vjp


def _norm_jvp(centered):
    def jvp(tangents, out, x, *rest, eps, has, dtype):
        from .ops import add, astype, mean, multiply, subtract
        st = _stream_of(out)
        _, w, bias = _inputs((x, *rest), has)
        tx, tw, tb = _inputs(tangents, has)
        xf, y0, n = _normalized(x, eps, centered, st)
        terms = []
        if tx is not None:
            t = astype(tx, dt.float32, stream=st)
            if centered:
                t = subtract(t, mean(t, -1, keepdims=True, stream=st), stream=st)
            inner = mean(multiply(y0, t, stream=st), -1, keepdims=True, stream=st)
            dy = multiply(n, subtract(t, multiply(y0, inner, stream=st), stream=st), stream=st)
            dy = astype(dy, out._dtype, stream=st)
            terms.append(multiply(dy, w, stream=st) if w is not None else dy)
        if tw is not None:
            terms.append(multiply(astype(y0, out._dtype, stream=st), tw, stream=st))
        if tb is not None:
            terms.append(tb)
        total = terms[0]
        for t in terms[1:]:
            total = add(total, t, stream=st)
        return total
    return jvp


def _norm_vmap(axes, out, x, *rest, eps, has, dtype):
    """The batch axis goes first (an unbatched x gets a unit one); a batched weight or
    bias gets unit axes after its batch axis, (batch, 1, ..., 1, D), to broadcast over x's
    rows (a vmap of a vmap batches it again: (batch, inner batch, 1, ..., 1, D))."""
    from .ops import expand_dims, moveaxis, reshape
    st = _stream_of(out)
    x = moveaxis(x, axes[0], 0, stream=st) if axes[0] is not None else \
        expand_dims(x, 0, stream=st)
    params = []
    for v, a in zip(rest, axes[1:]):
        if a is not None:
            v = moveaxis(v, a, 0, stream=st)
            v = reshape(v, v._shape[:1] + (1,) * (x.ndim - v.ndim) + v._shape[1:], stream=st)
        params.append(v)
    shape = b.broadcast_shapes(x._shape, *[p._shape for p in params], op="vmap")
    n = out._node
    return b.node(n.prim, (x, *params), shape, out._dtype, n.params, b.resolve(st)), 0


# shapeless: x's shape (the weight and bias, vectors over its last axis, broadcast to it)
_RMS = b.make("rms_norm", _norm_kernel(_rms_norm), vjp=_norm_vjp(False),
              gpu=b.GpuKernel("streamlet.backend.cuda_fast:rms_norm", bfloat16="native",
                                lazy_first=True),
              jvp=_norm_jvp(False), vmap=_norm_vmap, shape=rules.broadcast_shape)
_LN = b.make("layer_norm", _norm_kernel(_layer_norm), vjp=_norm_vjp(True),
             jvp=_norm_jvp(True), vmap=_norm_vmap, shape=rules.broadcast_shape)


def rms_norm(x, weight, eps, *, stream=None):
    """Root mean square normalization over the last axis, times `weight` (None: no
    scaling); computed in float32, cast to the output dtype before the weight.

    A primitive (one node) with its own vjp, jvp and vmap rules.

    >>> mx.fast.rms_norm(mx.array([[3.0, 4.0]]), mx.array([1.0, 2.0]), 0.0)
    array([[0.848528, 2.26274]], dtype=float32)
    """
    from .ops import astype
    x = _at_least_1d("rms_norm", x)
    eps = b.float_arg(eps, "rms_norm", "eps")
    w = _check_vector("rms_norm", "(*weight)", weight, x)
    d = _out_type("rms_norm", x, w)
    ins = (x,) if w is None else (x, astype(w, d, stream=stream))
    return b.node(_RMS, ins, x._shape, d, {"eps": float(eps), "has": (w is not None,),
                                           "dtype": d.np}, b.resolve(stream))


def layer_norm(x, weight, bias, eps, *, stream=None):
    """Layer normalization over the last axis (mean and variance in float32), then
    `weight` and `bias` (None: left out) in the output dtype.

    A primitive (one node) with its own vjp, jvp and vmap rules.

    >>> mx.fast.layer_norm(mx.array([[1.0, 3.0]]), None, None, 0.0).tolist()
    [[-1.0, 1.0]]
    """
    from .ops import astype
    x = _at_least_1d("layer_norm", x)
    eps = b.float_arg(eps, "layer_norm", "eps")
    w = _check_vector("layer_norm", "weight", weight, x)
    bias = _check_vector("layer_norm", "bias", bias, x)
    # MLX's output dtype: x's with no weight (the bias is then cast to it), else x's,
    # the weight's and the bias's promoted
    d = _out_type("layer_norm", x, w, None if w is None else bias)
    ins = (x,) + tuple(astype(v, d, stream=stream) for v in (w, bias) if v is not None)
    return b.node(_LN, ins, x._shape, d, {"eps": float(eps), "has": (w is not None,
                                                                     bias is not None),
                                          "dtype": d.np}, b.resolve(stream))


# -- rotary positional encoding ---------------------------------------------------------------

_EXP_POLY = tuple(np.float32(c) for c in (
    1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2,
    2.402264791363012e-1, 6.931472028550421e-1, 1.0))


def _exp_as_mlx(xp, x):
    """float32 exp as MLX's CPU computes it (2^round(x log2 e) times the Cephes
    polynomial of the remainder, fused multiply-adds in float64 then rounded).

    NOTE: RoPE's angles are position times frequency: at position 10^5 one ulp of a
    frequency moves the angle by 10^-2, so the frequencies must be MLX's bit for bit,
    and MLX's exp is not correctly rounded.
    """
    y = x * np.float32(1.442695)
    whole = xp.floor(y + np.float32(0.5))
    frac = (y - whole).astype(np.float64)
    p = np.float64(_EXP_POLY[0])
    for c in _EXP_POLY[1:]:
        p = (p * frac + np.float64(c)).astype(np.float32).astype(np.float64)
    scale = ((whole.astype(np.int32) + 127) << 23).view(np.float32)
    out = scale * p.astype(np.float32)
    out = xp.where(xp.isnan(x), x, out)
    return xp.where(x > 88, np.float32(np.inf), xp.where(x < -88, np.float32(0), out))


def _inv_freqs(xp, half, base):
    """RoPE's default frequencies, base^(-i / half): the same for every call of a layer
    (kept on the host; a GPU's are kept by its backend, `cuda_constants`)."""
    return _host_inv_freqs(half, base) if xp is np else _frequencies(xp, half, base)


@functools.lru_cache(maxsize=64)
def _host_inv_freqs(half, base):
    inv = _frequencies(np, half, base)
    inv.flags.writeable = False
    return inv


def _frequencies(xp, half, base):
    # MLX takes the log of the float32 base in float32 (0: -inf, negative: NaN), then / half
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = _F32(np.log(np.float64(_F32(base)))) / _F32(half)
        return _exp_as_mlx(xp, xp.arange(0, -half, -1, dtype=_F32) * rate)


def _rope(xp, x, offset, *freqs, dims, traditional, base, scale, forward):
    shape = x.shape
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim > 4:  # the heads' axes as one (counted: -1 can't be inferred for size 0)
        x = x.reshape(shape[0], math.prod(shape[1:-2]), shape[-2], shape[-1])
    half = dims // 2
    length = x.shape[2]
    if xp is np and not freqs and offset.size == 1 and length * half <= _SMALL_ANGLES:
        cos, sin = _rotation(length, _F32(offset.item()), _F32(scale), half, base, x.dtype)
    else:
        cos, sin = _cos_sin(xp, _angles(xp, length, offset, scale, half, base, freqs), x.dtype)
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
    else:
        x1, x2 = x[..., :half], x[..., half:dims]
    if forward:
        o1, o2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    else:
        o1, o2 = x2 * sin + x1 * cos, x2 * cos - x1 * sin
    if not traditional:
        return xp.concatenate((o1, o2, x[..., dims:]), axis=-1).reshape(shape)
    out = xp.empty(x.shape, x.dtype)
    out[..., 0:dims:2], out[..., 1:dims:2] = o1, o2
    out[..., dims:] = x[..., dims:]
    return out.reshape(shape)


_SMALL_ANGLES = 1 << 12  # a step's table of angles (decoding: one position) worth keeping


def _angles(xp, length, offset, scale, half, base, freqs):
    """RoPE's float32 angles, positions `offset + arange(length)` times the frequencies:
    (length, half), or (batch, 1, length, half) for one offset per batch entry."""
    pos = xp.arange(length, dtype=_F32)
    off = xp.asarray(offset).astype(_F32)
    pos = pos + (off.reshape(-1, 1, 1) if off.size != 1 else off.reshape(()))
    pos = pos * _F32(scale)
    inv = _F32(1) / freqs[0].astype(_F32) if freqs else _inv_freqs(xp, half, base)
    return pos[..., None] * inv


def _cos_sin(xp, theta, dtype):
    return xp.cos(theta).astype(dtype), xp.sin(theta).astype(dtype)


@functools.lru_cache(maxsize=16)
def _rotation(length, offset, scale, half, base, dtype):
    """cos and sin of the default angles at a scalar offset (NumPy), read-only: every
    layer's queries and keys of a decoding step rotate by the same ones."""
    out = _cos_sin(np, _angles(np, length, offset, scale, half, base, ()), dtype)
    for a in out:
        a.flags.writeable = False
    return out


def _rope_node(x, offset, freqs, params, st):
    ins = (x, offset) if freqs is None else (x, offset, freqs)
    return b.node(_ROPE, ins, x._shape, x._dtype, params, b.resolve(st))


def _rope_pairs(v, dims, traditional):
    """The two halves of each rotated pair of features of `v`."""
    if traditional:
        return v[..., 0:dims:2], v[..., 1:dims:2]
    return v[..., :dims // 2], v[..., dims // 2:dims]


def _rope_angle_rate(out, offset, f, params):
    """d out / d freqs as (rate, pair derivatives): the angles are positions over the
    frequencies, so d angle / d freqs = -position / freqs^2; a rotation's derivative in
    its angle is the rotation of the output by a right angle."""
    from .ops import arange, reshape
    sign = 1.0 if params["forward"] else -1.0
    o1, o2 = _rope_pairs(out.astype(dt.float32), params["dims"], params["traditional"])
    t = out._shape[-2]
    pos = reshape(arange(t, dtype=dt.float32), (t, 1))
    off = offset.astype(dt.float32)
    if off.size > 1:
        pos = pos + reshape(off, (-1,) + (1,) * (out.ndim - 1))
    else:
        pos = pos + reshape(off, ())
    rate = pos * params["scale"] * -(1.0 / (f * f))
    return rate, (o2 * -sign, o1 * sign)


def _rope_offset_rate(out, offset, freqs, params):
    """d out / d offset as (rate, pair derivatives): the angles are (position + offset)
    times scale over the frequencies, so d angle / d offset = scale / freqs (per pair,
    the same at every position)."""
    from .ops import reciprocal
    sign = 1.0 if params["forward"] else -1.0
    o1, o2 = _rope_pairs(out.astype(dt.float32), params["dims"], params["traditional"])
    inv = reciprocal(freqs[0]) if freqs else \
        b.array(np.array(_inv_freqs(np, params["dims"] // 2, params["base"])))
    return inv * params["scale"], (o2 * -sign, o1 * sign)


def _offset_shaped(v, out):
    """An offset-shaped array (a scalar, or one value per row of axis 0) shaped to
    broadcast against `out`'s pairs."""
    from .ops import reshape
    v = v.astype(dt.float32)
    return reshape(v, (-1,) + (1,) * (out.ndim - 1)) if v.size > 1 else reshape(v, ())


def _rope_vjp(c, out, x, offset, *freqs, **params):
    """RoPE is a rotation: its transpose is the inverse rotation (as MLX's RoPE::vjp); the
    offset and the frequencies get the gradient of the angles, as MLX's CPU composite
    gives them (the offset's in its integer dtype, truncated)."""
    from .ops import sum as sum_
    inverse = {**params, "forward": not params["forward"]}
    dx = _rope_node(c, offset, freqs[0] if freqs else None, inverse, _stream_of(out))

    def per_pair(rate, d1, d2):
        c1, c2 = _rope_pairs(c.astype(dt.float32), params["dims"], params["traditional"])
        return (c1 * d1 + c2 * d2) * rate

    def d_freqs():
        rate, (d1, d2) = _rope_angle_rate(out, offset, freqs[0], params)
        per = per_pair(rate, d1, d2)
        return sum_(per, tuple(range(per.ndim - 1)))

    def d_offset():
        rate, (d1, d2) = _rope_offset_rate(out, offset, freqs, params)
        per = per_pair(rate, d1, d2)
        g = sum_(per, tuple(range(1, per.ndim))) if offset.size > 1 else sum_(per)
        return g.astype(offset._dtype)
    return [dx, d_offset] + ([d_freqs] if freqs else [])


def _rope_jvp(tangents, out, x, offset, *freqs, **params):
    from .ops import concatenate, reshape, stack, zeros
    toff = tangents[1]
    tf = tangents[2] if freqs else None
    moved = None if tangents[0] is None else _rope_node(
        tangents[0], offset, freqs[0] if freqs else None, params, _stream_of(out))
    if tf is None and toff is None:
        return moved
    dims, trad = params["dims"], params["traditional"]
    step, pairs_d = None, None
    if tf is not None:
        rate, pairs_d = _rope_angle_rate(out, offset, freqs[0], params)
        step = rate * tf
    if toff is not None:
        rate, pairs_d = _rope_offset_rate(out, offset, freqs, params)
        part = rate * _offset_shaped(toff, out)
        step = part if step is None else step + part
    d1, d2 = pairs_d
    p1, p2 = (v * step for v in (d1, d2))
    lead = out._shape[:-1]
    pairs = reshape(stack([p1, p2], -1), lead + (dims,)) if trad else \
        concatenate([p1, p2], -1)
    if dims < out._shape[-1]:
        pairs = concatenate([pairs, zeros(lead + (out._shape[-1] - dims,), pairs._dtype)], -1)
    pairs = pairs.astype(out._dtype)
    return pairs if moved is None else moved + pairs


def _rope_vmap(axes, out, x, offset, *freqs, **params):
    """A batched input gets its batch axis right after the first (the one a vector offset
    indexes), where the rotation treats it as one more head axis; batched offsets or
    frequencies (MLX's CPU composite takes them) go slice by slice."""
    from .ops import moveaxis
    if any(a is not None for a in axes[1:]):
        from .vmap import batch_by_loop
        return batch_by_loop(axes, out, x, offset, *freqs, **params)
    st = _stream_of(out)
    moved = moveaxis(x, axes[0], 1, stream=st) if axes[0] != 1 else x
    return _rope_node(moved, offset, freqs[0] if freqs else None, params, st), 1


_ROPE = b.make("rope", _rope, vjp=_rope_vjp, jvp=_rope_jvp, vmap=_rope_vmap,
               gpu=b.GpuKernel("streamlet.backend.cuda_fast:rope", bfloat16="native",
                               host_scalars=True))


def rope(a, dims, *, traditional, base, scale, offset, freqs=None, stream=None):
    """Rotary positional encoding of the first `dims` features of `a` (B, ..., T, D),
    positions `offset + arange(T)` times `scale`; frequencies from `base` or `freqs`
    (exactly one of them); `traditional` rotates consecutive pairs.

    A primitive (one node): its vjp is the inverse rotation, its jvp the same rotation
    (the offset's and the frequencies' derivatives as MLX's CPU composite gives them).

    >>> x = mx.ones((1, 2, 4))
    >>> mx.fast.rope(x, 4, traditional=False, base=10000.0, scale=1.0, offset=0)[0, 0].tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    from .ops import astype
    x = b.as_array(a, "rope")
    traditional = b.bool_arg(traditional, "rope", "traditional")
    scale = b.float_arg(scale, "rope", "scale")
    if base is not None:
        base = b.float_arg(base, "rope", "base")
    if freqs is not None and base is not None:
        raise ValueError("[rope] Only one of base or freqs can have a value.")
    if freqs is None and base is None:
        raise ValueError("[rope] Neither base nor freqs has a value.")
    # a Python int (not a bool: MLX makes that a bool array, refused below); one beyond
    # int32 raises, where MLX wraps it (docs/differences.rst: ints a dtype cannot hold)
    if isinstance(offset, (int, np.integer)) and not isinstance(offset, (bool, np.bool_)):
        if not -2**31 <= offset < 2**31:
            raise OverflowError(f"[rope] offset {offset} is outside the int32 range.")
        off = const(offset, dt.int32)  # a scalar: a launch parameter on the GPU
    else:
        off = b.as_array(offset, "rope")
    if x.ndim < 3:
        raise ValueError(f"[rope] Input must have at least 3 dimensions but got input with "
                         f"{x.ndim} dimensions.")
    if x._dtype.kind != "f":
        raise ValueError(f"[rope] Input must be a floating type but got {x._dtype.name}.")
    if off.ndim > 1:
        raise ValueError(f"[rope] offset must have at most one dimension but has shape "
                         f"{off._shape}.")
    if off.size != 1 and off.size != x._shape[0]:
        raise ValueError(f"[rope] offset must be a scalar or vector with {x._shape[0]} elements "
                         f"but has shape {off._shape}.")
    if off._dtype.kind not in "iu":
        raise ValueError(f"[rope] offset must be an integer but got type {off._dtype.name}.")
    if off.size == 0 and x._shape[-2] not in (0, 1):
        # MLX adds the offset to the positions arange(T): (0,) does not broadcast with (T,)
        raise ValueError(f"[broadcast_shapes] Shapes ({x._shape[-2]}) and (0) cannot be "
                         "broadcast.")
    if off._dtype.size != 4:
        off = astype(off, dt.int32, stream=stream)
    dims = b.int_arg(dims, "rope", "dims")
    if dims <= 0:
        raise ValueError(f"[rope] dims must be positive but got {dims}.")
    if dims % 2:
        raise ValueError(f"[rope] dims must be even but got {dims}.")
    if dims > x._shape[-1]:
        raise ValueError(f"[rope] dims must not exceed the input's last dimension "
                         f"({x._shape[-1]}) but got {dims}.")
    f = None
    if freqs is not None:
        f = astype(b.as_array(freqs, "rope"), dt.float32, stream=stream)
        if f.ndim != 1 or f._shape[0] != dims // 2:
            raise ValueError(f"[rope] freqs must be one dimensional with size {dims // 2} but "
                             f"got shape {f._shape}.")
    params = {"dims": dims, "traditional": traditional,
              "base": 1.0 if base is None else float(base), "scale": float(scale),
              "forward": True}
    return _rope_node(x, off, f, params, stream)


# -- attention --------------------------------------------------------------------------------

def _check_sdpa(qs, ks, vs):
    """MLX's checks of the shapes of queries, keys and values (and the keys' and values'
    lengths, which MLX's fallback leaves to its matmul)."""
    op = "scaled_dot_product_attention"
    for s in (qs, ks, vs):
        if len(s) != 4:
            raise ValueError(f"[{op}] input with shape {s} expected to be rank 4")
    for s in (ks, vs):
        if s[0] != qs[0]:
            raise ValueError(f"[{op}] mismatching batch dimension for input with shape {s}.")
    if qs[-1] != ks[-1]:
        raise ValueError(f"[{op}] query, keys expected to have matching last dimension; found "
                         f"query shape {qs} for keys shape {ks}.")
    if ks[-3] != vs[-3]:
        raise ValueError(f"[{op}] keys, values expected to have matching n_kv_heads; found "
                         f"keys with n_heads {ks[-3]} for values with n_heads {vs[-3]}.")
    if (qs[-3] % ks[-3]) if ks[-3] else qs[-3]:
        raise ValueError(f"[{op}] n_heads must be a multiple of n_kv_heads, found n_heads "
                         f"{qs[-3]} for n_kv_heads {ks[-3]}.")
    if ks[-2] != vs[-2]:
        raise ValueError(f"[{op}] keys and values expected to have the same length; found "
                         f"keys shape {ks} for values shape {vs}.")


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None,
                                 force_fused=False, stream=None):
    """`softmax(scale * q @ k.T + mask) @ v` over heads: q (B, N_q, T_q, D), k and v
    (B, N_kv, T_kv, D) with N_q a multiple of N_kv (grouped-query attention, k and v not
    tiled); `mask` is None, "causal" (the last query aligned with the last key), a
    boolean mask (False: left out) or an additive one; `sinks` (N_q,) adds one logit per
    head that takes softmax mass and no value.

    One node computing MLX's CPU composite step for step (the softmax in float32), its
    transforms those of the composite (the vjp one node computing the composite's
    cotangents); with `sinks`, that composite of ops.  On a GPU the node and its vjp's
    node compute in float32 and round once.

    >>> q = k = v = mx.ones((1, 1, 2, 4))
    >>> mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask="causal").tolist()
    [[[[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]]]
    """
    from . import ops as o
    op = "scaled_dot_product_attention"
    q, k, v = (b.as_array(t, op) for t in (q, k, v))
    scale = b.float_arg(scale, op, "scale")
    force_fused = b.bool_arg(force_fused, op, "force_fused")
    causal = False
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"[{op}] invalid mask option '{mask}'. Must be 'causal', or an "
                             "array.")
        causal, mask = True, None
    elif mask is not None:
        mask = b.as_array(mask, op)
    if mask is not None and mask.ndim > 4:
        raise ValueError(f"[{op}] the mask with shape {mask._shape} expected to have at most "
                         "rank 4.")
    _check_sdpa(q._shape, k._shape, v._shape)
    final = dt.promote_types(dt.promote_types(q._dtype, k._dtype), v._dtype)
    if final.kind != "f":
        raise ValueError(f"[{op}] Received unsupported type {final.name}.")
    s = dict(stream=stream)
    q, k, v = (o.astype(t, final, **s) if t._dtype is not final else t for t in (q, k, v))
    if mask is not None:
        if dt.promote_types(mask._dtype, final) is not final:
            raise ValueError(f"[{op}] Mask type must promote to output type {final.name}.")
        if mask._dtype.kind != "b" and mask._dtype is not final:
            mask = o.astype(mask, final, **s)
        mask_shape = q._shape[:-1] + (k._shape[-2],)
        if mask._shape != mask_shape:
            mask = o.broadcast_to(mask, mask_shape, **s)
    if sinks is not None:
        sinks = b.as_array(sinks, op)
        if dt.promote_types(sinks._dtype, final) is not final:
            raise ValueError(f"[{op}] Type of sinks must promote to output type {final.name}.")
        if sinks.ndim != 1 or sinks._shape[0] != q._shape[1]:
            raise ValueError(f"[{op}] Received invalid shape for sinks {sinks._shape}.")
        sinks = o.astype(sinks, final, **s) if sinks._dtype is not final else sinks
    if force_fused:
        raise ValueError(f"[{op}] force_fused=True but no fused kernel is available in "
                         f"{'CPU' if b.resolve(stream).stream.device.type.value == 0 else 'GPU'}"
                         " backend.")
    if sinks is not None:
        return _attention(q, k, v, float(scale), causal, mask, sinks, s)
    ins = (q, k, v) if mask is None else (q, k, v, mask)
    return b.node(_SDPA, ins, q._shape[:-1] + v._shape[-1:], final,
                  {"scale": float(scale), "causal": causal}, b.resolve(stream))


def _attention(q, k, v, scale, causal, mask, sinks, s):
    """MLX's fallback attention, op for op."""
    from . import ops as o
    n_q, n_kv = q._shape[1], k._shape[1]
    rep = n_q // n_kv if n_kv else 1  # no heads at all: an empty result
    q = o.multiply(b.scalar(scale, q._dtype), q, **s)
    if rep > 1:
        q = o.unflatten(q, 1, (n_kv, rep), **s)
        k, v = o.expand_dims(k, 2, **s), o.expand_dims(v, 2, **s)
    scores = o.matmul(q, o.swapaxes(k, -1, -2, **s), **s)
    if causal:
        lq, lk = q._shape[-2], k._shape[-2]
        mask = o.greater_equal(o.expand_dims(o.arange(lk - lq, lk, **s), 1, **s),
                               o.expand_dims(o.arange(0, lk, **s), 0, **s), **s)
    if mask is not None:
        if rep > 1 and mask.ndim >= 3:
            mask = o.expand_dims(mask, -3, **s) if mask._shape[-3] == 1 else \
                o.unflatten(mask, -3, (n_kv, rep), **s)
        if mask._dtype.kind == "b":
            low = b.scalar(float(dt.finfo(scores._dtype).min), scores._dtype)
            scores = o.where(mask, scores, low, **s)
        else:
            scores = o.add(scores, mask, **s)
    if sinks is not None:
        sk = o.expand_dims(sinks, (0, 2, 3), **s)
        if scores.ndim == 5:
            sk = o.unflatten(sk, 1, (n_kv, rep), **s)
        sk = o.broadcast_to(sk, scores._shape[:-1] + (1,), **s)
        scores = o.concatenate([sk, scores], -1, **s)
    scores = o.softmax(scores, -1, precise=True, **s)
    if sinks is not None:
        scores = o.getitem(scores, (Ellipsis, slice(1, None)), **s)
    out = o.matmul(scores, v, **s)
    return o.flatten(out, 1, 2, **s) if rep > 1 else out


def _attend(xp, mm, q, k, v, mask, scale, causal, merge=False):
    """The attention node's kernel: `_attention`'s steps on buffers (q, k and v of one
    dtype, the mask broadcast to the scores' shape), `mm` their products.  A query head's
    rows meet their key head's matrix in a product of their own, as in MLX's CPU path;
    `merge` stacks the rows of the query heads sharing a key head into one product."""
    from .ops.reduction import _softmax
    d = q.dtype
    n_b, n_q, l_q, dim = q.shape
    n_kv, l_k = k.shape[1], k.shape[2]
    rep = n_q // n_kv if n_kv else 1  # no heads at all: an empty result
    q = xp.multiply(_scale_of(scale, d), q)
    kt = xp.swapaxes(k, -1, -2)
    if rep == 1:
        scores = mm(q, kt)
    elif merge:
        scores = mm(q.reshape(n_b, n_kv, rep * l_q, dim), kt).reshape(n_b, n_kv, rep, l_q, l_k)
    else:
        scores = mm(q.reshape(n_b, n_kv, rep, l_q, dim), kt[:, :, None])
    if mask is not None and rep > 1:
        mask = mask.reshape(scores.shape)
    scores, _ = _masked(xp, scores, mask, causal, d)
    p = _softmax(xp, scores, (scores.ndim - 1,), d, True)
    if rep == 1:
        return mm(p, v)
    out = mm(p.reshape(n_b, n_kv, rep * l_q, l_k), v) if merge else mm(p, v[:, :, None])
    return out.reshape(n_b, n_q, l_q, v.shape[-1])


def _scale_of(scale, d):
    """Attention's scale in the NumPy dtype `d`, as the composite's scalar is (float16
    through float32)."""
    return d.type(dt.scalar_value(scale, dt.from_numpy(d)))


def _masked(xp, scores, mask, causal, d):
    """(`scores` with attention's mask applied, that mask or None): causal (the last
    query row aligned with the last key), boolean (False: the dtype's lowest value) or
    additive (`mask` of the scores' shape, or broadcasting to it); `d` the inputs' dtype."""
    if causal:
        l_q, l_k = scores.shape[-2:]
        mask = xp.arange(l_k - l_q, l_k)[:, None] >= xp.arange(l_k)[None, :]
    if mask is not None:
        scores = xp.where(mask, scores, d.type(dt.finfo(dt.from_numpy(d)).min)) \
            if mask.dtype == bool else xp.add(scores, mask)
    return scores, mask


def _sdpa_kernel(xp, q, k, v, *mask, scale, causal):
    from .ops.linalg import _matmul
    return _attend(xp, functools.partial(_matmul, xp, dtype=q.dtype), q, k, v,
                   mask[0] if mask else None, scale, causal)


def _sdpa_composite(q, k, v, *mask, scale, causal):
    return _attention(q, k, v, scale, causal, mask[0] if mask else None, None, {})


def _sdpa_shape(params, qs, ks, vs, *ms):
    _check_sdpa(qs, ks, vs)
    if ms and ms[0] != qs[:-1] + ks[2:3]:  # the builder broadcast it to the scores' shape
        raise ValueError(f"[scaled_dot_product_attention] a mask of shape {ms[0]} for "
                         f"scores of shape {qs[:-1] + ks[2:3]}.")
    return qs[:-1] + vs[-1:], params


def _sdpa_cotangents(xp, q, k, v, c, *mask, scale, causal):
    """The kernel of `_SDPA_VJP`: the cotangents of q, k, v (and of an additive mask) that
    the vjp of `_attention` computes from the output's `c`, step for step on buffers (the
    scores and the softmax again, then their transposes; a key head's cotangents summed
    over the query heads sharing it)."""
    from .ops.linalg import _matmul
    from .ops.reduction import _softmax, _total
    d = q.dtype
    mm = functools.partial(_matmul, xp, dtype=d)

    def over_heads(a):  # a key head's cotangent: summed as the sum op does
        return _total(xp, a, (2,), False, d)
    n_b, n_q, l_q, dim = q.shape
    group = (n_b, k.shape[1], n_q // k.shape[1])
    sc = _scale_of(scale, d)
    qs = xp.multiply(sc, q).reshape(group + (l_q, dim))
    c = c.reshape(group + (l_q, v.shape[-1]))
    k, v = k[:, :, None], v[:, :, None]
    scores = mm(qs, xp.swapaxes(k, -1, -2))
    scores, m = _masked(xp, scores, mask[0].reshape(scores.shape) if mask else None, causal,
                        d)
    p = _softmax(xp, scores, (scores.ndim - 1,), d, True)
    dv = over_heads(mm(xp.swapaxes(p, -1, -2), c))
    sv = p * mm(c, xp.swapaxes(v, -1, -2))
    ds = sv - p * _total(xp, sv, (sv.ndim - 1,), True, d)
    if m is not None and m.dtype == bool:
        ds = xp.where(m, ds, d.type(0))
    dk = over_heads(xp.swapaxes(mm(xp.swapaxes(qs, -1, -2), ds), -1, -2))
    out = [(mm(ds, k) * sc).reshape(q.shape), dk, dv]
    if mask and mask[0].dtype != bool:
        out.append(ds.reshape(mask[0].shape))
    return [o.astype(d, copy=False) for o in out]


# the cotangents of an attention node in one node (no rules: built only where no other
# transform will walk them, `_sdpa_vjp`)
_SDPA_VJP = b.make("scaled_dot_product_attention_vjp", _sdpa_cotangents, multi=True,
                   gpu=b.GpuKernel("streamlet.backend.cuda_fast:attention_vjp",
                                   bfloat16="native"))
_VIA = rules.via(_sdpa_composite)


def _sdpa_vjp(c, out, q, k, v, *mask, scale, causal):
    """One node for the cotangents where only this transform runs on this thread (its
    cotangents are not differentiated or batched again) and every size is non-zero; else
    the vjp of `_attention` traced, as MLX's fallback."""
    d = q._dtype
    if TRACING.nesting() > 1 or c._dtype is not d or 0 in q._shape or 0 in k._shape or \
            0 in v._shape:
        return _VIA["vjp"](c, out, q, k, v, *mask, scale=scale, causal=causal)
    on = b.resolve(None)
    outs = [(x._shape, d) for x in (q, k, v)]
    if mask and mask[0]._dtype.kind != "b":
        outs.append((mask[0]._shape, d))
    grads = b.multi(_SDPA_VJP, (q, k, v, c) + mask, outs, {"scale": scale, "causal": causal},
                    on)
    return tuple(grads) + (None,) * (3 + len(mask) - len(grads))


# one node where there are no sinks; its jvp and vmap trace `_attention`, as MLX's
# fallback, and so does its vjp inside other transforms (`_sdpa_vjp`)
_SDPA = b.make("scaled_dot_product_attention", _sdpa_kernel,
               gpu=b.GpuKernel("streamlet.backend.cuda_fast:attention", bfloat16="native"),
               **{**_VIA, "vjp": _sdpa_vjp}, shape=_sdpa_shape)


def cross_entropy(logits, targets, *, stream=None):
    """`logsumexp(logits, -1) - logits[..., target]` per element, in float32: a composite
    of ops reducing in the logits' dtype, as MLX's CPU path, over the logits less their
    row's maximum (MLX's CPU path loses the loss of logits near 1e6 in their rounding).

    >>> mx.fast.cross_entropy(mx.zeros((1, 4)), mx.array([2]))
    array([1.38629], dtype=float32)
    """
    from . import ops as o
    from .transforms import stop_gradient
    op = "cross_entropy"
    logits, targets = b.as_array(logits, op), b.as_array(targets, op)
    if logits.ndim < 1 or targets._shape != logits._shape[:-1]:
        raise ValueError(f"[{op}] targets of shape {targets._shape} must have the shape of "
                         f"the logits {logits._shape} without the last axis.")
    if targets._dtype.kind not in "iu":
        raise ValueError(f"[{op}] targets must be integers, got {targets._dtype.name}.")
    s = dict(stream=stream)
    # from logits less their maximum, so that a large offset shared by a row changes nothing
    logits = o.subtract(logits, stop_gradient(o.max(logits, -1, keepdims=True, **s), **s), **s)
    picked = o.squeeze(o.take_along_axis(logits, o.expand_dims(targets, -1, **s), -1, **s),
                       -1, **s)
    return o.astype(o.subtract(o.logsumexp(logits, -1, **s), picked, **s), dt.float32, **s)


# -- custom kernels ---------------------------------------------------------------------------

from .custom_kernel import cuda_kernel, metal_kernel  # noqa: E402,F401

__all__ = ["cross_entropy", "cuda_kernel", "layer_norm", "metal_kernel", "rms_norm", "rope",
           "scaled_dot_product_attention"]


def __dir__():
    return _public.names(globals())
