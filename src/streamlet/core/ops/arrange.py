"""Ops that rearrange elements: tile, repeat, pad, roll, flip, diagonals, strides, views."""
from __future__ import annotations

import math

import numpy as np

from . import build as b
from . import dims
from .build import dt
from .rules import along_axes, same_shape, shape_guard, to_front, via, zeros_for


def _ints(value, op, what):
    values = (value,) if isinstance(value, (int, np.integer)) else \
        tuple(b.seq_arg(value, op, what))
    if not all(isinstance(v, (int, np.integer)) for v in values):  # a bool is an int to MLX
        raise TypeError(f"[{op}] {what} must be integers, got {value!r}.")
    return tuple(int(v) for v in values)


def _tile_vjp(c, out, x, reps):
    """The cotangent summed over the copies: each axis split into (reps, size)."""
    from .reduction import sum as sum_
    from .shape import reshape
    c = shape_guard(c)  # the split below is the traced shape's
    size = (1,) * (len(reps) - x.ndim) + x._shape
    split = tuple(n for pair in zip(reps, size) for n in pair)
    summed = sum_(reshape(c, split), tuple(range(0, 2 * len(reps), 2)))
    return (reshape(summed, x._shape),)


def _tile_vmap(axes, out, x, reps):
    x = to_front(x, axes[0])
    lack = len(reps) - (x.ndim - 1)
    if lack > 0:
        from .shape import expand_dims
        x = expand_dims(x, tuple(range(1, lack + 1)))
    return tile(x, (1,) + reps), 0


def _tile_shape(params, shape):
    reps = params["reps"]
    shape = (1,) * (len(reps) - len(shape)) + tuple(shape)
    return tuple(n * r for n, r in zip(shape, reps)), params


_TILE = b.make("tile", lambda xp, a, reps: xp.tile(a, reps), vjp=_tile_vjp,
               moves=True,
               jvp=lambda t, out, x, reps: tile(t[0], reps), vmap=_tile_vmap,
               shape=_tile_shape)


def tile(a, reps, /, *, stream=None):
    """`a` repeated `reps` times along each axis: `mx.tile(mx.array([1, 2]), 2)` is [1, 2, 1, 2]."""
    a = b.as_array(a, "tile")
    reps = _ints(b.ints_of(reps), "tile", "reps")
    if any(r < 0 for r in reps):
        raise ValueError("[tile] Negative dimensions not allowed.")
    n = max(a.ndim, len(reps))
    full_reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - a.ndim) + a._shape
    out = tuple(dims.dim(s * r, "tile") for s, r in zip(shape, full_reps))
    return b.node(_TILE, (a,), out, a._dtype, {"reps": full_reps}, b.resolve(stream))


def _repeat_vjp(c, out, x, repeats, axis):
    from .reduction import sum as sum_
    from .shape import reshape
    split = x._shape[:axis + 1] + (repeats,) + x._shape[axis + 1:]
    return (sum_(reshape(c, split), axis + 1),)


_REPEAT = b.make("repeat", lambda xp, a, repeats, axis: xp.repeat(a, repeats, axis),
                 moves=True,
                 vjp=_repeat_vjp, jvp=lambda t, out, x, repeats, axis: repeat(t[0], repeats, axis),
                 vmap=along_axes("axis"))


def repeat(array, repeats, axis=None, *, stream=None):
    """Each element repeated `repeats` times along `axis` (of the flattened array if None)."""
    from .shape import flatten
    a = b.as_array(array, "repeat")
    repeats = b.int_arg(repeats, "repeat", "repeats")
    if axis is None:
        a, axis = flatten(a, stream=stream), 0
    ax = b.normalize_axis(axis, a.ndim, "repeat")
    if repeats < 0:
        raise ValueError("[repeat] Number of repeats cannot be negative")
    shape = a._shape[:ax] + (dims.dim(a._shape[ax] * repeats, "repeat"),) + a._shape[ax + 1:]
    return b.node(_REPEAT, (a,), shape, a._dtype, {"repeats": repeats, "axis": ax},
                  b.resolve(stream))


def _pad(xp, a, value, widths, mode):
    if mode == "constant":  # filled by assignment: the value may live on the device
        out = xp.empty(tuple(n + lo + hi for n, (lo, hi) in zip(a.shape, widths)), a.dtype)
        out[...] = value.astype(a.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(a.shape, widths))] = a
        return out
    if a.size == 0:  # an edge pad of an empty array (MLX: zeros; NumPy refuses)
        return xp.zeros(tuple(n + lo + hi for n, (lo, hi) in zip(a.shape, widths)), a.dtype)
    if xp is np:
        return np.pad(a, widths, mode=mode)
    for ax, w in enumerate(widths):  # NumPy's reads per axis (CuPy's differ for wide pads)
        if w != (0, 0):
            a = xp.take(a, xp.asarray(np.pad(np.arange(a.shape[ax]), w, mode=mode)), axis=ax)
    return a


def _pad_vjp(c, out, x, value, widths, mode):
    """Constant: the interior of the cotangent.  Other modes read input elements more than
    once: each axis's reads (np.pad of the positions) are added back, axis by axis."""
    c = shape_guard(c)  # the bounds and reads below are the traced shape's
    if mode == "constant":
        return (c[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x._shape, widths))],
                lambda: c.sum() - c[tuple(slice(lo, lo + n)
                                          for n, (lo, _) in zip(x._shape, widths))].sum())
    from .creation import zeros
    from .indexing import _scatter_add
    if 0 in x._shape:  # an edge pad of an empty array reads no element (its cells are 0)
        return (zeros_for(x, c._dtype), None)
    if mode == "edge":
        return (_edge_pad_vjp(c, x._shape, widths), None)
    g = c
    for ax, (n, w) in enumerate(zip(x._shape, widths)):
        reads = np.pad(np.arange(n), w, mode=mode)
        shape = g._shape[:ax] + (n,) + g._shape[ax + 1:]
        g = _scatter_add(g, zeros(shape, c._dtype), (slice(None),) * ax + (b.array(reads),))
    return (g, None)


def _edge_pad_vjp(c, shape, widths):
    """An edge pad's cotangent as MLX's edge pad (slice updates of each axis' edge rows,
    the last axis first in reverse) sums it: per axis, from the last, the high pad cells
    summed onto the last row, then the low ones onto the first."""
    from . import reduction
    from .shape import concatenate
    sum_ = reduction.sum  # noqa: F821 (made from its table)
    for ax in reversed(range(len(shape))):
        n, (lo, hi) = shape[ax], widths[ax]
        if not lo and not hi:
            continue
        at = lambda s: c[(slice(None),) * ax + (s,)]  # noqa: E731
        mid = at(slice(lo, lo + n))
        first, last = at(slice(lo, lo + 1)), at(slice(lo + n - 1, lo + n))
        if hi:
            last = last + sum_(at(slice(lo + n, None)), axis=ax, keepdims=True)
        if n == 1:
            first = last
        if lo:
            first = first + sum_(at(slice(0, lo)), axis=ax, keepdims=True)
        if n == 1:
            c = first
        else:
            c = concatenate([first, mid[(slice(None),) * ax + (slice(1, n - 1),)], last], ax)
    return c


def _pad_jvp(t, out, x, value, widths, mode):
    tx = t[0] if t[0] is not None else zeros_for(x, out._dtype)
    tv = t[1] if t[1] is not None and mode == "constant" else 0
    return pad(tx, widths, mode, tv)


def _pad_vmap(axes, out, x, value, widths, mode):
    if axes[1] is not None:
        raise ValueError("[pad] vmap over the padding value is not supported.")
    return pad(to_front(x, axes[0]), ((0, 0),) + widths, mode, value), 0


def _pad_shape(params, shape, value_shape):
    return tuple(n + lo + hi for n, (lo, hi) in zip(shape, params["widths"])), params


_PAD = b.make("pad", _pad, vjp=_pad_vjp, jvp=_pad_jvp, vmap=_pad_vmap, shape=_pad_shape)
_PAD_MODES = ("constant", "edge", "reflect", "symmetric")


_SEQUENCES = (tuple, list, np.ndarray)


def _pad_widths(pad_width, ndim):
    if isinstance(pad_width, (int, np.integer)):
        pairs = [(int(pad_width),) * 2] * ndim
    else:  # MLX takes an int, one or two ints, or a list of (low, high) pairs
        seq = list(pad_width) if isinstance(pad_width, _SEQUENCES) else None
        if seq and len(seq) <= 2 and all(isinstance(v, (int, np.integer)) for v in seq):
            seq = [(seq[0], seq[-1])]
        elif seq is None or not all(isinstance(p, _SEQUENCES) and len(p) == 2 and
                                    all(isinstance(v, (int, np.integer)) for v in p)
                                    for p in seq):
            raise TypeError(f"[pad] pad_width must be an int, a tuple of one or two ints or "
                            f"a list of (low, high) pairs, got {pad_width!r}.")
        pairs = [tuple(p) for p in seq]
        if len(pairs) == 1:
            pairs = pairs * ndim
    if len(pairs) != ndim:
        raise ValueError(f"Invalid number of padding sizes passed to pad with axes of size {ndim}")
    for ax, (lo, hi) in enumerate(pairs):
        for side, n in (("low", lo), ("high", hi)):
            if n < 0:
                raise ValueError(f"Invalid {side} padding size ({n}) passed to pad for axis "
                                 f"{ax}. Padding sizes must be non-negative")
    return tuple((int(lo), int(hi)) for lo, hi in pairs)


def pad(a, pad_width, mode="constant", constant_values=0, *, stream=None):
    """Pad with a constant, the edge values, or a reflection (no repeat of the edge
    for 'reflect', with it for 'symmetric'), as NumPy's `pad`."""
    a = b.as_array(a, "pad")
    widths = _pad_widths(b.ints_of(pad_width), a.ndim)
    if b.str_arg(mode, "pad", "mode") not in _PAD_MODES:
        raise ValueError(f"Invalid padding mode ({mode}) passed to pad")
    if type(constant_values) is complex and a._dtype.kind != "c":  # MLX's cast of complex64
        constant_values = bool(constant_values) if a._dtype.kind == "b" else \
            constant_values.real
    if b.is_scalar(constant_values):
        dt.check_int(constant_values, a._dtype, "pad")
    value = b.scalar(constant_values, a._dtype) if b.is_scalar(constant_values) else \
        b.as_array(constant_values, "pad")  # a Python float keeps a float64 array's digits
    if value.ndim != 0:
        if value.size == 0:
            raise ValueError("[pad] The padding value must not be empty.")
        value = value.reshape(-1)[0]  # as MLX: the first element of a larger array
    if a.ndim == 0:
        return b.alias(a, b.resolve(stream))
    if mode in ("reflect", "symmetric"):
        for n, (lo, hi) in zip(a._shape, widths):
            if n == 0 and lo + hi:
                raise ValueError(f"[pad] Cannot {mode}-pad an empty axis.")
    elif mode == "edge":  # MLX's edge of an empty axis is a pad cell: there must be one
        for ax, (n, (lo, hi)) in enumerate(zip(a._shape, widths)):
            if n == 0 and (lo > 0) != (hi > 0):
                raise ValueError(f"[pad] Cannot edge-pad the empty axis {ax} on one side.")
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(a._shape, widths))
    return b.node(_PAD, (a, value), shape, a._dtype, {"widths": widths, "mode": mode},
                  b.resolve(stream))


def _roll_vjp(c, out, x, shift, axis):
    back = -shift if axis is None else tuple(-s for s in shift)
    return (roll(c, back, axis),)


def _roll_vmap(axes, out, x, shift, axis):
    if axis is None:  # the flattened array rolls across the batch: slice by slice
        from ..vmap import batch_by_loop
        return batch_by_loop(axes, out, x, shift=shift, axis=axis)
    return roll(to_front(x, axes[0]), shift, tuple(a + 1 for a in axis)), 0


_ROLL = b.make("roll", lambda xp, a, shift, axis: xp.roll(a, shift, axis), vjp=_roll_vjp,
               moves=True,
               jvp=lambda t, out, x, shift, axis: roll(t[0], shift, axis), vmap=_roll_vmap,
               shape=same_shape)


def roll(a, shift, axis=None, *, stream=None):
    """Shift elements along `axis` (of the flattened array if None), wrapping around."""
    a = b.as_array(a, "roll")
    shifts = _ints(b.ints_of(shift), "roll", "shift")
    axis = b.ints_of(axis)
    if axis is None:
        if len(shifts) != 1:
            shifts = (sum(shifts),)
        return b.node(_ROLL, (a,), a._shape, a._dtype, {"shift": shifts[0], "axis": None},
                      b.resolve(stream))
    if isinstance(axis, (int, np.integer)):  # shifts along one axis add up
        axes, shifts = _ints(axis, "roll", "axis"), (sum(shifts),)
    else:
        axes = _ints(axis, "roll", "axis")
        if not axes:
            return b.alias(a, b.resolve(stream))
        if isinstance(shift, (int, np.integer)):
            shifts = shifts * len(axes)
        elif len(shifts) < len(axes):
            raise ValueError(f"[roll] At least one shift value per axis is required, "
                             f"{len(shifts)} provided for {len(axes)} axes.")
        shifts = shifts[:len(axes)]  # MLX ignores the extra ones
    axes = tuple(b.normalize_axis(x, a.ndim, "roll") for x in axes)
    return b.node(_ROLL, (a,), a._shape, a._dtype, {"shift": shifts, "axis": axes},
                  b.resolve(stream))


_FLIP = b.make("flip", lambda xp, a, axis: xp.asarray(xp.flip(a, axis)),
               moves=True,
               vjp=lambda c, out, x, axis: (flip(c, axis),),
               jvp=lambda t, out, x, axis: flip(t[0], axis), vmap=along_axes("axis"))


def flip(a, /, axis=None, *, stream=None):
    """Reverse the order of elements along `axis` (all axes if None); a view."""
    a = b.as_array(a, "flip")
    axes = b.normalize_axes(axis, a.ndim, "flip")
    return b.node(_FLIP, (a,), a._shape, a._dtype, {"axis": axes}, b.resolve(stream))


def _diag_len(n, m, k):
    return max(0, min(n + min(k, 0), m - max(k, 0)))


def _diagonal_composite(a, offset, axis1, axis2):
    """The diagonal by indexing: the two axes moved last, then one index array each."""
    from .shape import moveaxis
    m = moveaxis(moveaxis(a, axis1, -1), axis2 if axis2 < axis1 else axis2 - 1, -1)
    n = _diag_len(a._shape[axis1], a._shape[axis2], offset)
    rows = np.arange(n) + max(-offset, 0)
    return m[..., b.array(rows), b.array(np.arange(n) + max(offset, 0))]


def _diag_composite(a, k):
    from .creation import zeros
    from .updates import setitem
    n = a._shape[0] + abs(k)
    idx = np.arange(a._shape[0])
    index = (b.array(idx + max(-k, 0)), b.array(idx + max(k, 0)))
    return setitem(zeros((n, n), a._dtype), index, a)


_DIAGONAL = b.make("diagonal", lambda xp, a, offset, axis1, axis2:
                   xp.diagonal(a, offset, axis1, axis2), moves=True,
                   **via(_diagonal_composite))
_DIAG = b.make("diag", lambda xp, a, k: xp.diag(a, k), moves=True, **via(_diag_composite))


def diagonal(a, offset=0, axis1=0, axis2=1, stream=None):
    """The diagonal `offset` of the planes spanned by axis1 and axis2, appended as the last axis."""
    a = b.as_array(a, "diagonal")
    if a.ndim < 2:
        raise ValueError(f"[diagonal] Array must have at least two dimensions, but got "
                         f"{a.ndim} dimensions.")
    i = b.normalize_axis(axis1, a.ndim, "diagonal")
    j = b.normalize_axis(axis2, a.ndim, "diagonal")
    if i == j:
        raise ValueError("[diagonal] axis1 and axis2 cannot be the same axis")
    offset = b.int_arg(offset, "diagonal", "offset")
    rest = tuple(n for ax, n in enumerate(a._shape) if ax not in (i, j))
    shape = rest + (_diag_len(a._shape[i], a._shape[j], offset),)
    return b.node(_DIAGONAL, (a,), shape, a._dtype,
                  {"offset": offset, "axis1": i, "axis2": j}, b.resolve(stream))


def diag(a, /, k=0, *, stream=None):
    """A 2-D array with `a` on diagonal `k` (1-D input), or diagonal `k` of a matrix (2-D)."""
    a = b.as_array(a, "diag")
    k = b.int_arg(k, "diag", "k")
    if a.ndim == 1:
        n = a._shape[0] + abs(k)
        return b.node(_DIAG, (a,), (n, n), a._dtype, {"k": k}, b.resolve(stream))
    if a.ndim == 2:
        return diagonal(a, k, 0, 1, stream=stream)
    raise ValueError(f"[diag] array must be 1-D or 2-D, got array with {a.ndim} dimensions.")


_TRI = b.make("tri", lambda xp, n, m, k, dtype: xp.tri(n, m, k, dtype=dtype))


def tri(n, m=None, k=0, dtype=None, *, stream=None):
    """An n x m array with ones at and below diagonal `k`: `mx.tri(3)`."""
    n = b.int_arg(n, "tri", "n")
    m = n if m is None else b.int_arg(m, "tri", "m")
    k = b.int_arg(k, "tri", "k")
    d = dt.float32 if dtype is None else dt.as_dtype(dtype)
    shape = b.check_shape((max(n, 0), max(m, 0)), "tri")  # MLX's aranges: negative is empty
    return b.node(_TRI, (), shape, d, {"n": shape[0], "m": shape[1], "k": int(k), "dtype": d.np},
                  b.resolve(stream))


def _triangle(name, fn):
    prim = b.make(name, lambda xp, x, k: fn(xp)(x, k),
                  vjp=lambda c, out, x, k: (op(c, k),), jvp=lambda t, out, x, k: op(t[0], k),
                  vmap=lambda axes, out, x, k: (op(to_front(x, axes[0]), k), 0))

    def op(x, k=0, *, stream=None):
        x = b.as_array(x, name)
        if x.ndim < 2:
            raise ValueError(f"[{name}] array must be at least 2-D")
        k = b.int_arg(k, name, "k")
        return b.node(prim, (x,), x._shape, x._dtype, {"k": k}, b.resolve(stream))
    b.rename(op, name)
    op.__doc__ = (f"`x` with the elements {'above' if name == 'tril' else 'below'} diagonal "
                  f"`k` zeroed (over the last two axes): `mx.{name}(x, k=0)`.")
    return op


tril = _triangle("tril", lambda xp: xp.tril)
triu = _triangle("triu", lambda xp: xp.triu)


def _as_strided(xp, a, shape, strides, offset):
    flat = xp.ascontiguousarray(a).reshape(-1)
    size = flat.itemsize
    return xp.lib.stride_tricks.as_strided(flat[offset:], shape,
                                           tuple(s * size for s in strides))


def _strided_composite(a, shape, strides, offset):
    """The view as a gather of the flattened array at the positions it reads."""
    from .indexing import take
    from .shape import flatten
    reads = np.full(shape, offset, dtype=np.int64)
    for i, (n, st) in enumerate(zip(shape, strides)):
        reads = reads + (np.arange(n) * st).reshape((1,) * i + (n,) + (1,) * (len(shape) - i - 1))
    return take(flatten(a), b.array(reads.astype(np.int32)))


_AS_STRIDED = b.make("as_strided", _as_strided, moves=True, **via(_strided_composite))


def as_strided(a, /, shape=None, strides=None, offset=0, *, stream=None):
    """A view of the row-major elements of `a` with the given shape, strides (in elements)
    and offset; like MLX, out-of-range strides are the caller's responsibility."""
    a = b.as_array(a, "as_strided")
    shape = a._shape if shape is None else b.check_shape(shape, "as_strided")
    if strides is None:
        strides = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
    strides = _ints(strides, "as_strided", "strides")
    if len(strides) != len(shape):
        raise ValueError("[as_strided] Shape and strides must have the same length.")
    offset = b.int_arg(offset, "as_strided", "offset", 64)
    if math.prod(shape):
        reach = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        low = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        if low < 0 or reach >= a.size:
            raise ValueError(f"[as_strided] Shape {shape}, strides {strides} and offset "
                             f"{offset} reach outside an array of size {a.size}.")
    return b.node(_AS_STRIDED, (a,), shape, a._dtype,
                  {"shape": shape, "strides": strides, "offset": offset}, b.resolve(stream))


def _contiguous(xp, a, allow_col_major):
    if allow_col_major and a.flags.f_contiguous:
        return a
    return xp.ascontiguousarray(a).reshape(a.shape)  # a 0-d array stays 0-d


_CONTIGUOUS = b.make("contiguous", _contiguous, vjp=lambda c, out, x, **p: (c,),
                     moves=True,
                     jvp=lambda t, out, x, **p: t[0],
                     vmap=lambda axes, out, x, **p: (x, axes[0]))


def contiguous(a, /, allow_col_major=False, *, stream=None):
    """`a` with row-major (or, if allowed, column-major) contiguous memory."""
    a = b.as_array(a, "contiguous")
    return b.node(_CONTIGUOUS, (a,), a._shape, a._dtype,
                  {"allow_col_major": b.bool_arg(allow_col_major, "contiguous",
                                                 "allow_col_major")}, b.resolve(stream))


def _view(xp, a, dtype):
    if a.ndim == 0:
        return a.reshape(1).view(dtype).reshape(())
    return xp.ascontiguousarray(a).view(dtype)


_VIEW = b.make("view", _view, gpu=b.GpuKernel(_view, bfloat16="bits"))


def view(a, dtype, stream=None):
    """The bytes of `a` reinterpreted as `dtype`; the last axis scales with the size ratio."""
    a = b.as_array(a, "view")
    d = dt.as_dtype(dtype)
    if d is a._dtype:
        return b.alias(a, b.resolve(stream))
    shape = a._shape
    if d.size != a._dtype.size:
        if a.ndim == 0:
            raise ValueError("[view] Changing the type of a scalar is only allowed for types "
                             "with the same size.")
        nbytes = shape[-1] * a._dtype.size
        if nbytes % d.size:
            raise ValueError("[view] When viewing as a larger dtype, the size in bytes of the "
                             "last axis must be a multiple of the requested type size.")
        shape = shape[:-1] + (nbytes // d.size,)
    return b.node(_VIEW, (a,), shape, d, {"dtype": d.np}, b.resolve(stream))
