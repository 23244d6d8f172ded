"""Convolutions as MLX 0.32.4 defines them: `conv1d/2d/3d`, `conv_general` and
`conv_transpose1d/2d/3d`, with inputs laid out (N, *spatial, C_in) and weights
(C_out, *kernel, C_in / groups).

Everything is one primitive, `conv`: inputs already of the output dtype, and per
spatial axis a stride, a low and a high padding, a kernel and an input dilation, plus
`groups` and `flip`.  Its padding may be negative (a crop of the dilated input), which
its own vjp needs; the public `conv_general` slices the input for a negative padding
before it makes the node, as MLX does.

The kernel (NumPy and CuPy alike) dilates and pads the input, takes every window as one
strided view (`as_strided`, no copy) and contracts it with the weight:
one GEMM over (window, channel) for `groups == 1` (measured against a sum of shifted
matmuls and `tensordot`, bench/bench_conv.py), and for grouped convolutions whichever
of three forms is fastest for the group shape (see `_grouped`).  Half-precision inputs
are computed in float32.
"""
from __future__ import annotations

import math

import numpy as np

from . import build as b
from .build import dt


# -- the kernel ---------------------------------------------------------------------------

def _windows(xp, x, kernel, stride, kdil):
    """All windows of `x` (N, *S, C) as a view (N, *out, *kernel, C)."""
    st = x.strides
    spatial = x.shape[1:-1]
    out = tuple((n - (k - 1) * d - 1) // s + 1
                for n, k, d, s in zip(spatial, kernel, kdil, stride))
    shape = (x.shape[0],) + out + tuple(kernel) + (x.shape[-1],)
    strides = (st[0],) + tuple(st[i + 1] * s for i, s in enumerate(stride)) + \
        tuple(st[i + 1] * d for i, d in enumerate(kdil)) + (st[-1],)
    return xp.lib.stride_tricks.as_strided(x, shape, strides), out


def _prepare(xp, x, lo, hi, idil):
    """`x` dilated by `idil`, then padded by lo/hi (a negative amount crops)."""
    if any(d > 1 for d in idil):
        shape = (x.shape[0],) + tuple((n - 1) * d + 1 if n else 0
                                      for n, d in zip(x.shape[1:-1], idil)) + x.shape[-1:]
        spread = xp.zeros(shape, x.dtype)
        spread[(slice(None),) + tuple(slice(None, None, d) for d in idil)] = x
        x = spread
    if any(p < 0 for p in lo + hi):
        x = x[(slice(None),) + tuple(slice(max(-p, 0), n - max(-q, 0))
                                     for p, q, n in zip(lo, hi, x.shape[1:-1]))]
    if any(p > 0 for p in lo + hi):
        x = xp.pad(x, [(0, 0)] + [(max(p, 0), max(q, 0)) for p, q in zip(lo, hi)] + [(0, 0)])
    return x


def _grouped(xp, win, w, groups, m, kp):
    """The grouped contraction of windows (m, kp, G, Cg) with weights (G, Og, kp, Cg).

    A loop of per-group GEMMs pays when each group's GEMM is big; depthwise-like groups
    (tiny kp * Cg) go faster as kp * Cg broadcast multiply-adds, and a few small groups
    as one GEMM with a block-diagonal weight (G times the work, BLAS speed).
    """
    G, og, _, cg = w.shape
    if kp * cg < 64 and (cg == 1 or G > 32):
        out = xp.zeros((m, G, og), w.dtype)
        for k in range(kp):
            for c in range(cg):
                out += win[:, k, :, c, None] * w[:, :, k, c]
        return out.reshape(m, G * og)
    if kp * cg < 64:
        full = xp.zeros((G, og, kp, G, cg), w.dtype)
        for g in range(G):
            full[g, :, :, g] = w[g]
        return win.reshape(m, -1) @ full.reshape(G * og, -1).T
    out = xp.empty((m, G, og), w.dtype)
    for g in range(G):
        xp.matmul(win[:, :, g].reshape(m, kp * cg), w[g].reshape(og, kp * cg).T, out=out[:, g])
    return out.reshape(m, G * og)


def _conv(xp, x, w, stride, lo, hi, kdil, idil, groups, flip, dtype):
    compute = np.float64 if dtype == np.float64 else np.float32
    x, w = b.cast(x, compute), b.cast(w, compute)
    nd = x.ndim - 2
    x = _prepare(xp, x, lo, hi, idil)
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * nd]
    kernel = w.shape[1:-1]
    win, out = _windows(xp, x, kernel, stride, kdil)
    m, kp, c, o = x.shape[0] * math.prod(out), math.prod(kernel), x.shape[-1], w.shape[0]
    if groups == 1:
        res = win.reshape(m, kp * c) @ w.reshape(o, kp * c).T
    else:
        win = win.reshape(m, kp, groups, c // groups)
        res = _grouped(xp, win, w.reshape(groups, o // groups, kp, c // groups), groups, m, kp)
    return res.reshape((x.shape[0],) + out + (o,)).astype(dtype, copy=False)


# -- shapes and the node ------------------------------------------------------------------

def _dilated(n, d):
    return 1 + d * (n - 1)


def _out_shape(xs, ws, stride, lo, hi, kdil, idil):
    """MLX's output shape rule, with its errors."""
    for name, v in (("Kernel dilation", kdil), ("Input dilation", idil)):
        if any(d <= 0 for d in v):
            raise ValueError(f"[conv] {name} sizes must be positive. Got {name.lower()} "
                             f"{list(v)}.")
    if any(s <= 0 for s in stride):
        raise ValueError(f"[conv] Stride sizes must be positive. Got strides {list(stride)}.")
    out = [xs[0]]
    for i in range(len(xs) - 2):
        n = (_dilated(xs[i + 1], idil[i]) + lo[i] + hi[i] - _dilated(ws[i + 1], kdil[i])) \
            // stride[i] + 1
        if n <= 0:
            raise ValueError(f"[conv] Spatial dimensions of input after padding cannot be "
                             f"smaller than weight spatial dimensions. Got error at axis "
                             f"{i + 1} for input with shape {xs}, padding low {list(lo)}, "
                             f"padding high {list(hi)}, and weight of shape {ws}.")
        out.append(n)
    return tuple(out) + (ws[0],)


def _conv_shape(params, xs, ws):
    """The output shape for inputs of other shapes (a shapeless replay)."""
    p = params
    return _out_shape(xs, ws, p["stride"], p["lo"], p["hi"], p["kdil"], p["idil"]), params


_CONV = b.make("conv", _conv, shape=_conv_shape)


def _node(x, w, stride, lo, hi, kdil, idil, groups, flip, stream):
    """The conv node on inputs of one floating dtype; padding may be negative (a crop)."""
    params = {"stride": tuple(stride), "lo": tuple(lo), "hi": tuple(hi),
              "kdil": tuple(kdil), "idil": tuple(idil), "groups": int(groups),
              "flip": bool(flip)}
    shape = _out_shape(x._shape, w._shape, params["stride"], params["lo"], params["hi"],
                       params["kdil"], params["idil"])
    return b.node(_CONV, (x, w), shape, x._dtype, {**params, "dtype": x._dtype.np},
                  b.resolve(stream))


# -- transform rules (built from ops, as MLX's Convolution::vjp and ::vmap) ----------------

def _stream_of(out):
    """The stream a rule's ops run on: the forward node's."""
    state = out._node.stream
    return None if state is None else state.stream


def _group_transpose(a, groups, group_axis, ax1, ax2, stream):
    """Swap axes ax1 and ax2 of `a` with its `group_axis` split into (groups, rest)."""
    from .shape import flatten, reshape, swapaxes
    if groups == 1:
        return swapaxes(a, 0, -1, stream=stream)
    shape = list(a._shape)
    g = group_axis % len(shape)
    shape[g:g + 1] = [groups, shape[g] // groups]
    t = swapaxes(reshape(a, tuple(shape), stream=stream), ax1, ax2, stream=stream)
    return flatten(t, g, g + 1, stream=stream)


def _conv_vjp(cot, out, x, w, *, stride, lo, hi, kdil, idil, groups, flip, dtype):
    from .arrange import flip as flip_axes
    from .creation import zeros_like
    from .shape import swapaxes
    st = _stream_of(out)
    if 0 in x._shape:  # the output read only padding
        return zeros_like(x, stream=st), zeros_like(w, stream=st)
    nd = x.ndim - 2
    rng = range(nd)
    in_size = [_dilated(x._shape[i + 1], idil[i]) for i in rng]
    out_size = [_dilated(cot._shape[i + 1], stride[i]) for i in rng]
    wt_size = [_dilated(w._shape[i + 1], kdil[i]) for i in rng]
    # input: a full correlation of the cotangent with the transposed, flipped weight
    lo_x = [wt_size[i] - lo[i] - 1 for i in rng]
    hi_x = [in_size[i] - out_size[i] + lo[i] for i in rng]
    gx = _node(cot, _group_transpose(w, groups, 0, 1, -1, st), idil, lo_x, hi_x, kdil,
               stride, groups, not flip, st)
    # weight: the input correlated with the cotangent, batch and channel axes swapped
    hi_w = [out_size[i] - in_size[i] + wt_size[i] - lo[i] - 1 for i in rng]
    gw = _node(_group_transpose(x, groups, -1, 0, -1, st), swapaxes(cot, 0, -1, stream=st),
               kdil, lo, hi_w, stride, idil, groups, False, st)
    if flip:
        gw = flip_axes(gw, tuple(range(1, nd + 1)), stream=st)
    return gx, swapaxes(gw, 0, -1, stream=st)


def _conv_jvp(tangents, out, x, w, **params):
    from .elementwise import add
    params.pop("dtype")
    tx, tw = tangents
    args = [params[k] for k in ("stride", "lo", "hi", "kdil", "idil", "groups", "flip")]
    st = _stream_of(out)
    terms = []
    if tx is not None:
        terms.append(_node(tx, w, *args, st))
    if tw is not None:
        terms.append(_node(x, tw, *args, st))
    return terms[0] if len(terms) == 1 else add(*terms, stream=st)


def _conv_vmap(axes, out, x, w, **params):
    from .shape import flatten, moveaxis, unflatten
    params.pop("dtype")
    args = [params[k] for k in ("stride", "lo", "hi", "kdil", "idil")]
    groups, flip = params["groups"], params["flip"]
    st = _stream_of(out)
    ax, aw = axes
    if ax is not None and aw is None:
        x = moveaxis(x, ax, 0, stream=st)
        y = _node(flatten(x, 0, 1, stream=st), w, *args, groups, flip, st)
        return unflatten(y, 0, x._shape[:2], stream=st), 0
    if ax is None and aw is not None:
        # output channels grouped as (group, batch, channel of the group), so that each
        # group's block of channels still reads that group's inputs
        w = moveaxis(w, aw, 0, stream=st)
        n, c_out = w._shape[:2]
        w = unflatten(w, 1, (groups, c_out // groups), stream=st)
        w = flatten(moveaxis(w, 0, 1, stream=st), 0, 2, stream=st)
        y = unflatten(_node(x, w, *args, groups, flip, st), -1,
                      (groups, n, c_out // groups), stream=st)
        return flatten(moveaxis(y, -2, -3, stream=st), -2, -1, stream=st), y.ndim - 3
    if ax is not None:
        n = x._shape[ax]
        x = flatten(moveaxis(x, ax, -2, stream=st), -2, -1, stream=st)
        w = moveaxis(w, aw, 0, stream=st)
        c_out = w._shape[1]
        y = _node(x, flatten(w, 0, 1, stream=st), *args, groups * n, flip, st)
        return unflatten(y, -1, (n, c_out), stream=st), y.ndim - 1
    return _node(x, w, *args, groups, flip, st), None


_CONV.vjp, _CONV.jvp, _CONV.vmap = _conv_vjp, _conv_jvp, _conv_vmap


# -- the public ops -----------------------------------------------------------------------

def _check(x, w, nd, groups):
    if x._dtype.kind != "f":
        raise ValueError(f"[conv] Invalid input array with type {x._dtype.name}. Convolution "
                         "currently only supports floating point types")
    if x.ndim != nd + 2:
        raise ValueError(f"[conv] Invalid input array with {x.ndim} dimensions for {nd}D "
                         f"convolution. Expected an array with {nd + 2} dimensions following "
                         "the format [N, ..., C_in].")
    if w.ndim != nd + 2:
        raise ValueError(f"[conv] Invalid weight array with {w.ndim} dimensions for {nd}D "
                         f"convolution. Expected an array with {nd + 2} dimensions following "
                         "the format [C_out, ..., C_in].")
    c = x._shape[-1]
    if groups <= 0 or c % groups:
        raise ValueError(f"[conv] The input channels must be divisible by the number of "
                         f"groups. Got input with shape {x._shape} and {groups} groups.")
    if groups > 1 and w._shape[0] % groups:
        raise ValueError(f"[conv] If groups > 1, the output channels must be divisible by "
                         f"the number of groups. Got {w._shape[0]} output channels and "
                         f"{groups} groups.")
    if c != groups * w._shape[-1]:
        if groups == 1:
            raise ValueError(f"[conv] Expect the input channels in the input and weight "
                             f"array to match but got shapes - input: {x._shape} and weight: "
                             f"{w._shape}")
        raise ValueError(f"Given groups={groups} and weights of shape {w._shape}, expected to "
                         f"have {groups * w._shape[-1]} input channels but got {c} input "
                         "channels instead.")


def _bad_argument(op, value, what):
    return TypeError(f"{op}(): incompatible function arguments: {what} must be an int "
                     f"(32-bit) or a sequence of them, got {value!r}.")


def _int(value, op, what):
    """An int argument as MLX's binding converts it (`build.int_arg`), a TypeError naming
    the sequence form too before any check of the arrays."""
    try:
        return b.int_arg(value, op, what)
    except TypeError:
        raise _bad_argument(op, value, what) from None


def _int_list(value, op, what):
    """A sequence of ints, as the binding's std::vector<int> (a list, a tuple, a range, an
    array; not a string, a set or an iterator)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__getitem__") or \
            not hasattr(value, "__len__") or isinstance(value, dict):
        raise _bad_argument(op, value, what)
    try:
        items = list(value)
    except TypeError:
        raise _bad_argument(op, value, what) from None
    return tuple(_int(v, op, what) for v in items)


def _int_or_list(value, op, what):
    """`int | Sequence[int]` (conv_general's stride and dilations): an int as a 1-tuple."""
    try:
        return (_int(value, op, what),)
    except TypeError:
        return _int_list(value, op, what)


def _safe(v):
    """`v` as a 32-bit shape value, or MLX's OverflowError (its safe_cast)."""
    if not -2**31 <= v < 2**31:
        raise OverflowError(f"[conv] Shape dimension {v} is outside the supported range "
                            f"[{-2**31}, {2**31 - 1}]. MLX currently uses 32-bit integers "
                            "for shape dimensions.")
    return v


def _per_axis(values, nd, what, default):
    """One int per spatial axis from a tuple of them (MLX spreads a single value)."""
    if len(values) == 0:
        return (default,) * nd
    if len(values) == 1:
        return values * nd
    if len(values) != nd:
        raise ValueError(f"[conv] Invalid {what} {list(values)} for {nd}D convolution.")
    return values


def _padding_lists(padding, op):
    """(low, high) from `int | Sequence[int] | tuple[Sequence[int], Sequence[int]]`, the
    binding's variant (tried in that order)."""
    try:
        p = _int_or_list(padding, op, "padding")
        return p, p
    except TypeError:
        pass
    if isinstance(padding, (str, bytes)) or not hasattr(padding, "__len__") or \
            len(padding) != 2:
        raise _bad_argument(op, padding, "padding")
    lo, hi = padding
    return _int_list(lo, op, "padding"), _int_list(hi, op, "padding")


def _paddings(lo, hi, nd):
    """Per-axis (low, high) from the binding's lists, with MLX's size check."""
    if len(lo) > 1 and len(lo) != nd or len(hi) > 1 and len(hi) != nd:
        raise ValueError(f"[conv] Invalid padding {list(lo)} | {list(hi)} for {nd}D "
                         "convolution.")
    return _per_axis(lo, nd, "padding", 0), _per_axis(hi, nd, "padding", 0)


def conv_general(input, weight, /, stride=1, padding=0, kernel_dilation=1, input_dilation=1,
                 groups=1, flip=False, *, stream=None):
    """General convolution over an input with several channels.

    `input` is (N, ..., C_in) with 1 to 3 spatial axes, `weight` (C_out, ..., C_in /
    groups); `padding` is an int, one int per axis, or a pair (low, high) of
    per-axis lists; `flip=True` convolves instead of correlating.

    >>> x = mx.ones((1, 5, 1))
    >>> mx.conv_general(x, mx.ones((1, 3, 1)), padding=([1], [0])).reshape(-1).tolist()
    [2.0, 3.0, 3.0, 3.0]
    """
    op = "conv_general"
    stride = _int_or_list(stride, op, "stride")
    lo, hi = _padding_lists(padding, op)
    kernel_dilation = _int_or_list(kernel_dilation, op, "kernel_dilation")
    input_dilation = _int_or_list(input_dilation, op, "input_dilation")
    groups = _int(groups, op, "groups")
    if not isinstance(flip, bool):
        raise TypeError(f"{op}(): incompatible function arguments: flip must be a bool, got "
                        f"{flip!r}.")
    return _conv_general(input, weight, stride, lo, hi, kernel_dilation, input_dilation,
                         groups, flip, stream)


def _conv_general(input, weight, stride, lo, hi, kernel_dilation, input_dilation, groups,
                  flip, stream):
    """`conv_general` on arguments the binding converted: ints as tuples of them."""
    from .creation import astype
    from .indexing import getitem
    x, w = b.as_array(input, "conv"), b.as_array(weight, "conv")
    if groups != 1 and x.ndim not in (3, 4):
        raise ValueError("[conv] Can only handle groups != 1 in 1D or 2D convolutions.")
    nd = x.ndim - 2
    if not 1 <= nd <= 3:
        raise ValueError("[conv] Only works for inputs with 1-3 spatial dimensions. The "
                         "inputs must be in the format [N, ..., C_in]")
    _check(x, w, nd, groups)
    d = dt.promote_types(x._dtype, w._dtype)
    x, w = astype(x, d, stream=stream), astype(w, d, stream=stream)
    st = _per_axis(stride, nd, "strides", 1)
    kd = _per_axis(kernel_dilation, nd, "kernel dilation", 1)
    idl = _per_axis(input_dilation, nd, "input dilation", 1)
    lo, hi = _paddings(lo, hi, nd)
    if any(p < 0 for p in lo + hi):  # MLX crops the input itself for a negative padding
        for p in lo:
            _safe(-p)
        n = x._shape[1:-1]
        x = getitem(x, (slice(None),) + tuple(slice(max(-p, 0), n[i] + min(q, 0))
                                              for i, (p, q) in enumerate(zip(lo, hi))),
                    stream=stream)
        lo, hi = tuple(max(p, 0) for p in lo), tuple(max(q, 0) for q in hi)
    return _node(x, w, st, lo, hi, kd, idl, groups, bool(flip), stream)


def conv1d(input, weight, /, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
    """1D convolution of `input` (N, L, C_in) with `weight` (C_out, K, C_in / groups).

    >>> mx.conv1d(mx.ones((1, 4, 2)), mx.ones((3, 2, 2))).shape
    (1, 3, 3)
    """
    op = "conv1d"
    stride, padding, dilation = (_int(v, op, what) for v, what in (
        (stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    return _conv_general(input, weight, (stride,), (padding,), (padding,), (dilation,), (1,),
                         _int(groups, op, "groups"), False, stream)


def conv2d(input, weight, /, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
    """2D convolution of `input` (N, H, W, C_in) with `weight` (C_out, KH, KW, C_in /
    groups); stride, padding and dilation are ints or pairs.

    >>> mx.conv2d(mx.ones((1, 5, 5, 3)), mx.ones((8, 3, 3, 3)), padding=1).shape
    (1, 5, 5, 8)
    """
    return _conv_nd("conv2d", 2, input, weight, stride, padding, dilation, groups, stream)


def conv3d(input, weight, /, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
    """3D convolution of `input` (N, D, H, W, C_in) with `weight` (C_out, KD, KH, KW, C_in).

    >>> mx.conv3d(mx.ones((1, 4, 4, 4, 1)), mx.ones((2, 3, 3, 3, 1))).shape
    (1, 2, 2, 2, 2)
    """
    return _conv_nd("conv3d", 3, input, weight, stride, padding, dilation, groups, stream)


def _conv_nd(op, n, input, weight, stride, padding, dilation, groups, stream):
    stride, padding, dilation = (_pair(v, n, op, what) for v, what in (
        (stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    return _conv_general(input, weight, stride, padding, padding, dilation, (1,) * n,
                         _int(groups, op, "groups"), False, stream)


def _pair(value, n, op, what):
    """`int | tuple[int, ...n]` as the binding converts it: an int for every axis, or a
    sequence of exactly n ints; anything else is a TypeError."""
    try:
        return (_int(value, op, what),) * n
    except TypeError:
        values = _int_list(value, op, what)
    if len(values) != n:
        raise _bad_argument(op, value, what)
    return values


def conv_transpose_general(input, weight, stride, padding, dilation, output_padding, groups,
                           stream=None):
    """The transposed convolution as MLX builds it: a flipped conv of the input dilated by
    `stride`, padded so the output is (in - 1) * stride - 2 * padding + dilation *
    (k - 1) + 1 + output_padding long."""
    x, w = b.as_array(input, "conv"), b.as_array(weight, "conv")
    nd = len(stride)
    if x.ndim != nd + 2 or w.ndim != nd + 2:
        _check(x, w, nd, groups)
    lo, hi = [], []
    for i in range(nd):
        k = w._shape[1 + i]
        wt_size = _dilated(k, dilation[i])
        lo.append(_safe(wt_size - padding[i] - 1))
        conv_out = (x._shape[1 + i] - 1) * stride[i] - 2 * padding[i] + \
            dilation[i] * (k - 1) + 1
        hi.append(_safe(conv_out - _dilated(x._shape[1 + i], stride[i]) + padding[i]
                        + output_padding[i]))
    return _conv_general(x, w, (1,), tuple(lo), tuple(hi), tuple(dilation), tuple(stride),
                         groups, True, stream)


def conv_transpose1d(input, weight, /, stride=1, padding=0, dilation=1, output_padding=0,
                     groups=1, *, stream=None):
    """1D transposed convolution of `input` (N, L, C_in) with `weight` (C_out, K, C_in).

    >>> mx.conv_transpose1d(mx.ones((1, 3, 1)), mx.ones((1, 2, 1)), stride=2).shape
    (1, 6, 1)
    """
    return _conv_transpose_nd("conv_transpose1d", 1, input, weight, stride, padding,
                              dilation, output_padding, groups, stream, _int)


def conv_transpose2d(input, weight, /, stride=1, padding=0, dilation=1, output_padding=0,
                     groups=1, *, stream=None):
    """2D transposed convolution of `input` (N, H, W, C_in) with `weight` (C_out, KH, KW,
    C_in); each of stride, padding, dilation and output_padding is an int or a pair.

    >>> mx.conv_transpose2d(mx.ones((1, 4, 4, 2)), mx.ones((3, 3, 3, 2)), stride=2).shape
    (1, 9, 9, 3)
    """
    return _conv_transpose_nd("conv_transpose2d", 2, input, weight, stride, padding,
                              dilation, output_padding, groups, stream)


def conv_transpose3d(input, weight, /, stride=1, padding=0, dilation=1, output_padding=0,
                     groups=1, *, stream=None):
    """3D transposed convolution of `input` (N, D, H, W, C_in) with `weight` (C_out, KD,
    KH, KW, C_in).

    >>> mx.conv_transpose3d(mx.ones((1, 2, 2, 2, 1)), mx.ones((1, 2, 2, 2, 1))).shape
    (1, 3, 3, 3, 1)
    """
    return _conv_transpose_nd("conv_transpose3d", 3, input, weight, stride, padding,
                              dilation, output_padding, groups, stream)


def _conv_transpose_nd(op, n, input, weight, stride, padding, dilation, output_padding,
                       groups, stream, single=None):
    """The binding's conversions (ints only for 1D, int or n-tuple otherwise), then
    `conv_transpose_general`."""
    def convert(v, what):
        return (single(v, op, what),) if single else _pair(v, n, op, what)
    args = [convert(v, what) for v, what in ((stride, "stride"), (padding, "padding"),
                                             (dilation, "dilation"),
                                             (output_padding, "output_padding"))]
    return conv_transpose_general(input, weight, *args, _int(groups, op, "groups"), stream)


__all__ = ["conv1d", "conv2d", "conv3d", "conv_general", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d"]
