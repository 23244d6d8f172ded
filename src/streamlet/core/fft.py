"""`mx.fft`: discrete Fourier transforms with MLX's dtypes (complex64 and float32).

Every transform is one node whose kernel calls `xp.fft` (pocketfft in NumPy, cuFFT in
CuPy) in single precision; `n`/`s` crop or zero-pad as in NumPy.

>>> mx.fft.fft(mx.array([1.0, 2.0, 3.0, 4.0]))
array([10+0j, -2+2j, -2+0j, -2-2j], dtype=complex64)
>>> mx.fft.irfft(mx.fft.rfft(mx.array([1.0, 2.0, 3.0, 4.0]))).tolist()
[1.0, 2.0, 3.0, 4.0]
"""
from __future__ import annotations

import numpy as np

from .. import _public
from . import dtypes as dt
from .ops import build as b
from .ops.rules import along_axes, via

_NORMS = ("backward", "ortho", "forward")


def _transform(xp, x, s, axes, norm, kind, compute, out):
    if x.size == 0:  # all zero-padding: NumPy's irfftn would read uninitialized memory
        shape = list(x.shape)
        for axis, n in zip(axes, s):
            shape[axis] = n
        if kind == "rfftn":
            shape[axes[-1]] = s[-1] // 2 + 1
        return xp.zeros(tuple(shape), out)
    x = b.cast(x, compute) if kind != "rfftn" else b.cast(xp.real(x), compute)
    fn = getattr(xp.fft, kind)
    return fn(x, s=s, axes=axes, norm=norm).astype(out, copy=False)


# -- transform rules: each transform is linear; its adjoint is the opposite transform with
# the dual normalization, then the input's crop or zero-pad undone ---------------------------
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_ADJOINT = {"fftn": "ifftn", "ifftn": "fftn", "rfftn": "irfftn", "irfftn": "rfftn"}


def _again(x, kind, s, axes, norm):
    """The transform `kind` of `x` as a node, sizes `s` along `axes`."""
    return _build(x, s, axes, norm, kind, kind, None)


def _half_weights(n_bins, n_real, axis, ndim, inner):
    """Along the half-spectrum axis: `inner` for the bins that stand for two (all but DC
    and, for an even length, Nyquist), 1 for the rest."""
    idx = np.arange(n_bins)
    w = np.where((idx > 0) & (idx < n_bins - 1 + n_real % 2), inner, 1.0).astype(np.float32)
    return b.array(w.reshape(tuple(n_bins if i == axis else 1 for i in range(ndim))))


def _refit(g, x, axes):
    """`g` cropped or zero-padded along `axes` to `x`'s sizes there."""
    from .ops.arrange import pad
    index, widths = [], []
    for i, (n, m) in enumerate(zip(x._shape, g._shape)):
        keep = i in axes and m > n
        index.append(slice(0, n) if keep else slice(None))
        widths.append((0, n - m) if i in axes and m < n else (0, 0))
    g = g[tuple(index)]
    return pad(g, widths) if any(w[1] for w in widths) else g


def _fft_vjp(c, out, x, s, axes, norm, kind, compute, out_):
    dual, last = _DUAL[norm], axes[-1]
    if kind == "rfftn":
        c = c * _half_weights(c._shape[last], s[-1], last, c.ndim, 0.5)
        g = _again(c, "irfftn", s, axes, dual)
    elif kind == "irfftn":
        g = _again(c, "rfftn", s, axes, dual)
        g = g * _half_weights(g._shape[last], s[-1], last, g.ndim, 2.0)
    else:
        g = _again(c, _ADJOINT[kind], s, axes, dual)
    return (_refit(g, x, axes),)


_FFT = b.make("fft", lambda xp, x, s, axes, norm, kind, compute, out:
              _transform(xp, x, s, axes, norm, kind, compute, out),
              vjp=lambda c, o, x, s, axes, norm, kind, compute, out:
                  _fft_vjp(c, o, x, s, axes, norm, kind, compute, out),
              jvp=lambda t, o, x, s, axes, norm, kind, compute, out:
                  _again(t[0], kind, s, axes, norm),
              vmap=along_axes("axes"))


def _check_norm(norm, op):
    if not isinstance(norm, str):  # MLX's binding takes only a string
        raise TypeError(f"[{op}] norm must be a string, got {type(norm).__name__}.")
    if norm not in _NORMS:
        raise ValueError(f"[{op}] Invalid norm. Expected one of {{'backward', 'ortho', "
                         "'forward'}.")


def _build(a, s, axes, norm, kind, op, stream):
    """Validate, compute the output shape, make the node. `axes` is already a tuple."""
    st = b.resolve(stream)
    a = b.as_array(a, op)
    _check_norm(norm, op)
    if a.ndim == 0:
        raise b.AxisError(f"[{op}] Expected an array with at least one dimension.")
    axes = tuple(b.normalize_axis(x, a.ndim, "fftn") for x in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"[fftn] Duplicated axis received ({','.join(map(str, axes))})")
    inverse_real = kind == "irfftn"
    if s is None:
        s = [a._shape[x] for x in axes]
        if inverse_real and axes:
            s[-1] = 2 * (s[-1] - 1)
    s = tuple(b.int_arg(n, op, "s") for n in s)
    if len(s) != len(axes):
        raise ValueError("[fftn] Shape and axes have different sizes.")
    for n in s:
        if n <= 0:
            raise ValueError(f"[fftn] Invalid FFT output size requested ({n})")
    if not axes:
        return a  # no axes to transform: MLX hands the input back, dtype and all
    shape = list(a._shape)
    for x, n in zip(axes, s):
        shape[x] = n
    if kind == "rfftn" and axes:
        shape[axes[-1]] = s[-1] // 2 + 1
    out = dt.float32 if inverse_real else dt.complex64
    compute = dt.float32 if kind == "rfftn" else dt.complex64
    params = {"s": s, "axes": axes, "norm": norm, "kind": kind, "compute": compute.np,
              "out": out.np}
    return b.node(_FFT, (a,), tuple(shape), out, params, st)


def _one_axis(kind, name):
    def op(a, n=None, axis=-1, norm="backward", stream=None):
        n = None if n is None else (b.int_arg(n, name, "n"),)
        return _build(a, n, (axis,), norm, kind, name, stream)
    b.rename(op, name)
    op.__doc__ = (f"`{name}` along one `axis`; `n` crops or zero-pads that axis "
                  f"(NumPy's `{name}` in single precision).")
    return op


def _sizes(s, name):
    """`s` (None, or a sequence of ints), checked by type first as MLX's binding does."""
    return None if s is None else tuple(b.int_arg(n, name, "s")
                                        for n in b.seq_arg(s, name, "s"))


def _all_axes(a, s, name):
    """`axes=None`: every axis, as MLX (and NumPy) read it; then `s` must be None too."""
    if s is not None:
        raise ValueError(f"[{name}] `axes` should not be `None` if `s` is not `None`.")
    return tuple(range(b.as_array(a, name).ndim))


def _two_axes(kind, name):
    def op(a, s=None, axes=(-2, -1), norm="backward", stream=None):
        s = _sizes(s, name)
        axes = _all_axes(a, s, name) if axes is None else tuple(axes)
        return _build(a, s, axes, norm, kind, name, stream)
    b.rename(op, name)
    op.__doc__ = f"`{name}` over two `axes` (default the last two; None: all of them)."
    return op


def _n_axes(kind, name):
    def op(a, s=None, axes=None, norm="backward", stream=None):
        s = _sizes(s, name)
        axes = _all_axes(a, s, name) if axes is None else tuple(axes)
        return _build(a, s, axes, norm, kind, name, stream)
    b.rename(op, name)
    op.__doc__ = f"`{name}` over `axes` (default all)."
    return op


fft, ifft = _one_axis("fftn", "fft"), _one_axis("ifftn", "ifft")
rfft, irfft = _one_axis("rfftn", "rfft"), _one_axis("irfftn", "irfft")
fft2, ifft2 = _two_axes("fftn", "fft2"), _two_axes("ifftn", "ifft2")
rfft2, irfft2 = _two_axes("rfftn", "rfft2"), _two_axes("irfftn", "irfft2")
fftn, ifftn = _n_axes("fftn", "fftn"), _n_axes("ifftn", "ifftn")
rfftn, irfftn = _n_axes("rfftn", "rfftn"), _n_axes("irfftn", "irfftn")


# -- frequencies and shifts ---------------------------------------------------------------
def _freq(xp, n, d, real):
    """The frequency indices times 1 / (n d), both float32 (MLX rounds the scale first)."""
    k = xp.arange(n // 2 + 1) if real else \
        xp.concatenate([xp.arange((n + 1) // 2), xp.arange(-(n // 2), 0)])
    return k.astype(xp.float32) * xp.float32(1.0 / (n * d))


_FREQ = b.make("fftfreq", _freq)


def _freq_op(real, name):
    def op(n, d=1.0, stream=None):
        n = b.int_arg(n, name, "n")
        d = b.float_arg(d, name, "d")
        if n <= 0:
            raise ValueError(f"[{name}] `n` must be greater than 0.")
        if d == 0:
            raise ValueError(f"[{name}] `d` must be non-zero.")
        size = n // 2 + 1 if real else n
        return b.node(_FREQ, (), (size,), dt.float32, {"n": n, "d": float(d), "real": real},
                      b.resolve(stream))
    b.rename(op, name)
    op.__doc__ = f"Sample frequencies of a length-`n` {'r' if real else ''}fft, as float32."
    return op


fftfreq, rfftfreq = _freq_op(False, "fftfreq"), _freq_op(True, "rfftfreq")

def _shift_again(x, axes, inverse):
    return b.node(_SHIFT, (x,), x._shape, x._dtype, {"axes": axes, "inverse": inverse},
                  b.resolve(None))


_SHIFT = b.make("fftshift", lambda xp, a, axes, inverse:
                (xp.fft.ifftshift if inverse else xp.fft.fftshift)(a, axes=axes),
                vjp=lambda c, out, x, axes, inverse: (_shift_again(c, axes, not inverse),),
                jvp=lambda t, out, x, axes, inverse: _shift_again(t[0], axes, inverse),
                vmap=along_axes("axes"))


def _shift_op(inverse, name):
    def op(a, axes=None, stream=None):
        a = b.as_array(a, name)
        if isinstance(axes, (int, np.integer)):
            axes = (axes,)
        axes = tuple(range(a.ndim)) if axes is None else \
            tuple(b.normalize_axis(x, a.ndim, name) for x in axes)
        if not axes:
            return a  # nothing to roll (a 0-d array, or axes=[])
        return b.node(_SHIFT, (a,), a._shape, a._dtype, {"axes": axes, "inverse": inverse},
                      b.resolve(stream))
    b.rename(op, name)
    op.__doc__ = f"{'Undo of fftshift' if inverse else 'Move the zero frequency to the centre'}" \
                 " along `axes` (default all)."
    return op


fftshift, ifftshift = _shift_op(False, "fftshift"), _shift_op(True, "ifftshift")


# -- short-time transforms ----------------------------------------------------------------
_PAD_MODES = {"reflect": "reflect", "constant": "constant", "edge": "edge"}


def _stft(xp, x, window, n_fft, hop, center, pad_mode, norm, onesided):
    if center:
        pad = [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)]
        x = xp.pad(x, pad, mode=pad_mode)
    count = 1 + (x.shape[-1] - n_fft) // hop
    step = x.strides[-1]
    frames = xp.lib.stride_tricks.as_strided(  # a view: frame f starts at sample f * hop
        x, shape=x.shape[:-1] + (count, n_fft), strides=x.strides[:-1] + (step * hop, step))
    frames = frames * _centered(xp, window, n_fft)
    spec = xp.fft.rfft(frames, axis=-1, norm=norm) if onesided else \
        xp.fft.fft(frames, axis=-1, norm=norm)
    return xp.swapaxes(spec, -1, -2).astype(xp.complex64, copy=False)


def _frame_index(n, n_fft, hop, center, pad_mode):
    """Which input sample each (frame, offset) of the padded signal reads, as NumPy ints
    (-1: a zero of constant padding)."""
    sample = np.arange(n)
    if center:
        extra = {"constant_values": -1} if pad_mode == "constant" else {}
        sample = np.pad(sample, (n_fft // 2, n_fft // 2), mode=pad_mode, **extra)
    count = 1 + (sample.shape[0] - n_fft) // hop
    return sample[np.arange(count)[:, None] * hop + np.arange(n_fft)]


def _window_of(window, n_fft):
    """`_centered` from ops: the window's real part, zero-padded on both sides to n_fft."""
    from .ops import pad, real
    w = real(window) if window._dtype.kind == "c" else window.astype(dt.float32)
    left = (n_fft - w._shape[0]) // 2
    return pad(w, [(left, n_fft - w._shape[0] - left)])


def _stft_composite(x, window, n_fft, hop, center, pad_mode, norm, onesided):
    """The frames gathered by index, windowed and transformed (the rules' path)."""
    from .ops import swapaxes, take
    idx = _frame_index(x._shape[-1], n_fft, hop, center, pad_mode)
    frames = take(x, b.array(np.maximum(idx, 0).astype(np.int32)), axis=-1)
    if (idx < 0).any():
        frames = frames * b.array((idx >= 0).astype(np.float32))
    frames = frames * _window_of(window, n_fft)
    kind = "rfftn" if onesided else "fftn"
    spec = _build(frames, (n_fft,), (frames.ndim - 1,), norm, kind, kind, None)
    return swapaxes(spec, -1, -2)


_STFT = b.make("stft", _stft, **via(_stft_composite))


def _window_input(window, win_length, n_fft, op):
    """The window (ones by default) as an array input of win_length elements."""
    if win_length > n_fft:
        raise ValueError(f"[{op}] window length must not exceed n_fft.")
    if window is None:
        return b.array(np.ones(win_length, np.float32))
    window = b.as_array(window, op)
    if window.ndim != 1 or window._shape[0] != win_length:
        raise ValueError(f"[{op}] window must be one-dimensional with win_length "
                         f"({win_length}) elements.")
    return window


def _centered(xp, window, n_fft):
    """The window zero-padded on both sides to n_fft, in float32."""
    full = xp.zeros(n_fft, xp.float32)
    left = (n_fft - window.shape[0]) // 2
    full[left:left + window.shape[0]] = xp.real(window) if window.dtype.kind == "c" else window
    return full


def _lengths(n_fft, hop_length, win_length, op):
    hop = n_fft // 4 if hop_length is None else b.int_arg(hop_length, op, "hop_length")
    win = n_fft if win_length is None else b.int_arg(win_length, op, "win_length")
    if n_fft <= 0 or hop <= 0 or win <= 0:
        raise ValueError(f"[{op}] n_fft, hop_length and win_length must be positive.")
    return hop, win


def stft(x, n_fft=2048, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", norm="backward", onesided=None, stream=None):
    """Short-time Fourier transform of the last axis: shape (..., n_freq, n_frames)."""
    op = "stft"
    st = b.resolve(stream)
    x = b.as_array(x, op)
    _check_norm(norm, op)
    n_fft = b.int_arg(n_fft, op, "n_fft")
    center = b.bool_arg(center, op, "center")
    if onesided is not None:
        b.bool_arg(onesided, op, "onesided")
    hop, win = _lengths(n_fft, hop_length, win_length, op)
    if b.str_arg(pad_mode, op, "pad_mode") not in _PAD_MODES:
        raise ValueError(f"Invalid padding mode ({pad_mode}) passed to pad")
    if x.ndim == 0:
        raise ValueError(f"[{op}] Expected an array with at least one dimension.")
    w = _window_input(window, win, n_fft, op)
    complex_in = x._dtype.kind == "c"
    onesided = not complex_in if onesided is None else onesided
    length = x._shape[-1] + (2 * (n_fft // 2) if center else 0)
    if length < n_fft:
        raise ValueError(f"[{op}] Input is too short ({x._shape[-1]}) for n_fft={n_fft}.")
    frames = 1 + (length - n_fft) // hop
    n_freq = n_fft // 2 + 1 if onesided else n_fft
    compute = dt.complex64 if complex_in else dt.float32
    from .ops.creation import _cast
    x = _cast(x, compute, stream=st.stream)
    params = {"n_fft": n_fft, "hop": hop, "center": center, "pad_mode": pad_mode,
              "norm": norm, "onesided": onesided}
    return b.node(_STFT, (x, w), x._shape[:-1] + (n_freq, frames), dt.complex64, params, st)


def _istft(xp, spec, window, n_fft, hop, center, norm, onesided, length):
    spec = xp.swapaxes(spec, -1, -2)
    window = _centered(xp, window, n_fft)
    frames = xp.fft.irfft(spec, n=n_fft, axis=-1, norm=norm) if onesided else \
        xp.real(xp.fft.ifft(spec, n=n_fft, axis=-1, norm=norm))
    frames = (frames * window).astype(xp.float32)
    count = frames.shape[-2]
    chunks = -(-n_fft // hop)
    padded = xp.zeros(frames.shape[:-1] + (chunks * hop,), xp.float32)
    padded[..., :n_fft] = frames
    padded = padded.reshape(frames.shape[:-1] + (chunks, hop))
    total = (count + chunks - 1) * hop
    out = xp.zeros(frames.shape[:-2] + (total,), xp.float32)
    env = xp.zeros(total, xp.float32)
    wsq = xp.zeros(chunks * hop, xp.float32)
    wsq[:n_fft] = window * window
    wsq = wsq.reshape(chunks, hop)
    for j in range(chunks):  # a loop over the few hop-sized pieces of a frame, not elements
        out[..., j * hop:(j + count) * hop] += padded[..., :, j, :].reshape(
            frames.shape[:-2] + (count * hop,))
        env[j * hop:(j + count) * hop] += xp.tile(wsq[j], count)
    end = n_fft + hop * (count - 1)
    out, env = out[..., :end], env[:end]
    out = out / xp.where(env > 1e-11, env, 1).astype(xp.float32)
    start = n_fft // 2 if center else 0
    stop = end - (n_fft // 2 if center else 0) if length is None else start + length
    out = out[..., start:stop]
    if length is not None and out.shape[-1] < length:
        pad = [(0, 0)] * (out.ndim - 1) + [(0, length - out.shape[-1])]
        out = xp.pad(out, pad)
    return xp.ascontiguousarray(out)


def _istft_composite(spec, window, n_fft, hop, center, norm, onesided, length):
    """Overlap-add as scatter-adds of the windowed frames and of the squared window."""
    from .ops import pad, real, swapaxes, tile, where, zeros
    frames = swapaxes(spec, -1, -2)
    kind = "irfftn" if onesided else "ifftn"
    frames = _build(frames, (n_fft,), (frames.ndim - 1,), norm, kind, kind, None)
    if not onesided:
        frames = real(frames)
    w = _window_of(window, n_fft)
    frames = frames * w
    count = frames._shape[-2]
    end = n_fft + hop * (count - 1)
    idx = b.array((np.arange(count)[:, None] * hop + np.arange(n_fft)).reshape(-1)
                  .astype(np.int32))
    lead = frames._shape[:-2]
    flat = frames.reshape(lead + (count * n_fft,))
    out = zeros(lead + (end,), dt.float32).at[(Ellipsis, idx)].add(flat)
    env = zeros((end,), dt.float32).at[idx].add(tile(w * w, count))
    out = out / where(env > 1e-11, env, 1.0)
    start = n_fft // 2 if center else 0
    stop = end - (n_fft // 2 if center else 0) if length is None else start + length
    out = out[..., start:min(stop, end)]
    if stop > end:
        out = pad(out, [(0, 0)] * (out.ndim - 1) + [(0, stop - end)])
    return out


_ISTFT = b.make("istft", _istft, **via(_istft_composite))


def istft(stft_matrix, n_fft=None, hop_length=None, win_length=None, window=None,
          center=True, norm="backward", onesided=None, length=None, stream=None):
    """Inverse of `stft`: overlap-add of windowed inverse transforms, float32."""
    op = "istft"
    st = b.resolve(stream)
    spec = b.as_array(stft_matrix, op)
    _check_norm(norm, op)
    if spec.ndim < 2:
        raise ValueError(f"[{op}] Expected an array of shape (..., n_freq, n_frames).")
    center = b.bool_arg(center, op, "center")
    onesided = True if onesided is None else b.bool_arg(onesided, op, "onesided")
    n_freq, count = spec._shape[-2:]
    n_fft = (2 * (n_freq - 1) if onesided else n_freq) if n_fft is None else \
        b.int_arg(n_fft, op, "n_fft")
    hop, win = _lengths(n_fft, hop_length, win_length, op)
    w = _window_input(window, win, n_fft, op)
    if length is None:
        size = n_fft + hop * (count - 1) - (2 * (n_fft // 2) if center else 0)
    else:
        size = b.int_arg(length, op, "length")
    from .ops.creation import _cast
    spec = _cast(spec, dt.complex64, stream=st.stream)
    params = {"n_fft": n_fft, "hop": hop, "center": center, "norm": norm,
              "onesided": onesided, "length": None if length is None else size}
    return b.node(_ISTFT, (spec, w), spec._shape[:-2] + (max(size, 0),), dt.float32, params, st)


__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
           "stft", "istft"]


def __dir__():
    return _public.names(globals())
