"""Updates: ops that return a copy of an array with some elements replaced or accumulated.

Arrays are immutable buffers: every kernel here copies its input, then writes into
the copy.  `a[index] = v` makes `a` refer to a new node computing the update (as in
MLX); arrays built from the old `a` keep reading the old value.
"""
from __future__ import annotations

import builtins

import numpy as np

from . import build as b
from . import rules
from .indexing import _int_indices, along_axis_shape, fill_index, parse_index, slot_bounds, \
    window

_pyslice = builtins.slice


def _fits(value_shape, target, op):
    """Check `value_shape` broadcasts to `target` (extra leading 1s allowed, as in NumPy)."""
    shape = _without_leading_ones(value_shape, target, op)
    if b.broadcast_shapes(shape, target, op=op) != tuple(target):
        raise _unbroadcastable(value_shape, target, op)
    return shape


def _without_leading_ones(value_shape, target, op):
    """`value_shape` less the leading 1s it has beyond `target`'s dimensions."""
    shape = tuple(value_shape)
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(target):
        raise _unbroadcastable(value_shape, target, op)
    return shape


def _unbroadcastable(value_shape, target, op):
    return ValueError(f"[{op}] Cannot broadcast array of shape {tuple(value_shape)} into "
                      f"shape {tuple(target)}.")


def _scatter(xp, a, value, *arrays, index, mode):
    out = a.copy()
    idx = fill_index(index, arrays)
    value = value.astype(out.dtype, copy=False)
    target = out[idx].shape
    if value.ndim > len(target):  # leading ones, as NumPy allows in assignment
        value = value.reshape(value.shape[value.ndim - len(target):])
    if mode == "set":
        out[idx] = value
        return out
    # the values broadcast up front: NumPy 2.4's `ufunc.at` reads garbage for values it
    # has to broadcast itself with new leading axes (`np.add.at(out, [[1, 1], [3, 1]],
    # [1, 2])`), where a broadcast view is read right
    value = xp.broadcast_to(value, target)
    if xp is np:
        getattr(np, mode).at(out, idx, value)
        return out
    return _ufunc_at_device(xp, mode, out, idx, value)


# CuPy's ufunc.at covers 32- and 64-bit types, `add` and the extremes only
_WIDER = {"b": "int32", "i": "int32", "u": "uint32", "f": "float32"}


def _multiply_at(xp, out, idx, value):
    """NumPy's `multiply.at(out, idx, value)` on the device, in NumPy's order: the updates
    sorted stably by the element they multiply, each element's run multiplied in turn
    (`out` is a fresh contiguous copy, written in place)."""
    positions = xp.arange(out.size).reshape(out.shape)[idx]
    values = xp.broadcast_to(value, positions.shape).reshape(-1)
    positions = positions.reshape(-1)
    order = xp.argsort(positions, kind="stable")
    _multiply_runs(out.reshape(-1), positions[order], values[order])
    return out


def _multiply_runs(flat, positions, values):
    if isinstance(flat, np.ndarray):  # NumPy standing in for CuPy (the formulation's test)
        for p, v in zip(positions.tolist(), values):
            flat[p] = flat[p] * v
        return
    from ...backend.cuda_scatter import multiply_runs
    multiply_runs(flat, positions, values)


def _ufunc_at_device(xp, mode, out, idx, value):
    """`ufunc.at` as CuPy can: narrow types widened and cast back (sums wrap the same),
    subtract as the add of the negation, multiply by `_multiply_at` (CuPy has none)."""
    if mode == "multiply":
        return _multiply_at(xp, out, idx, value)
    work = out
    if out.dtype.itemsize < 4:
        work = out.astype(_WIDER[out.dtype.kind])
    value = value.astype(work.dtype)
    if mode == "subtract":
        mode, value = "add", -value
    if work.dtype.kind == "c" and mode == "add":  # as (real, imaginary) pairs of floats
        idx = tuple(idx) if isinstance(idx, tuple) else (idx,)
        pairs = work.view(work.real.dtype).reshape(work.shape + (2,))
        value = xp.broadcast_to(value, work[idx].shape)
        xp.add.at(pairs, idx + (slice(None),), xp.stack([value.real, value.imag], axis=-1))
        return out
    getattr(xp, mode).at(work, idx, value)
    if work is out:
        return out
    return work > 0 if out.dtype.kind == "b" else work.astype(out.dtype)

def _scatter_vjp(c, out, a, value, *arrays, index, mode):
    """set, add and subtract; minimum and maximum send the cotangent to whichever of `a`
    and `value` the result came from; multiply only through slices (as MLX)."""
    from .elementwise import equal, where
    from .indexing import getitem
    from .rules import no_index_grad
    idx = fill_index(index, arrays)
    gathered = lambda: getitem(c, idx)  # noqa: E731
    none = (no_index_grad("scatter"),) * len(arrays)
    if mode == "set":
        return (lambda: scatter(c, idx, b.const(0, c._dtype), "set"), gathered) + none
    if mode == "add":
        return (c, gathered) + none
    if mode in ("minimum", "maximum"):
        return (lambda: where(equal(out, a), c, 0),
                lambda: getitem(c, idx) * equal(getitem(out, idx), value)) + none
    if mode == "subtract":
        return (c, lambda: -getitem(c, idx)) + none
    if mode == "multiply" and not arrays:  # slices: no element is written twice
        return (lambda: scatter(c, idx, value, "multiply"),
                lambda: getitem(c, idx) * getitem(a, idx)) + none
    raise RuntimeError("[scatter] VJP not implemented for scatter_prod")


def _scatter_jvp(t, out, a, value, *arrays, index, mode):
    if mode not in ("set", "add", "subtract"):
        raise RuntimeError(f"[scatter] JVP not yet implemented (scatter with {mode}).")
    ta = t[0] if t[0] is not None else rules.zeros_for(a, out._dtype)
    tv = t[1] if t[1] is not None else rules.zeros_for(value, out._dtype)
    return scatter(ta, fill_index(index, arrays), tv, mode)


_SCATTER = b.make("scatter", _scatter, vjp=_scatter_vjp, jvp=_scatter_jvp,
                  bounds=lambda a, value, *arrays, index, mode: slot_bounds(a, arrays, index),
                  shape=rules.same_shape)


def scatter(a, index, value, mode, *, stream=None):
    """`a` with `value` put at `index` by `mode` (set, add, subtract, multiply, minimum,
    maximum), repeated indices accumulating; the op behind setitem and `.at[]`."""
    return _update(a, index, value, mode, "scatter", stream)


def _value_of(a, value, op):
    """The value of an update into `a` as MLX takes it (its `to_array(value, a.dtype)`): a
    Python scalar in `a`'s dtype where it fits (an integer that does not is a ValueError; a
    float into an integer or complex array is float32), an array as it is."""
    if isinstance(value, b.array) or not b.is_scalar(value):
        return b.as_array(value, op)
    if isinstance(value, (float, np.floating)) and a._dtype.kind == "c":
        return b.scalar(value, b.dt.float32)
    return b.promote_pair(a, value, op)[1]


def _whole_index(a, index):
    """What stands for `index` when it picks all of `a` and MLX scatters nothing (a bare
    None or Ellipsis; on a scalar, a tuple of them, taken as the Ellipsis); else False."""
    if index is None or index is Ellipsis:
        return index
    if a.ndim == 0 and isinstance(index, tuple) and \
            all(s is None or s is Ellipsis for s in index):
        return Ellipsis
    return False


def _update(a, index, value, mode, op, stream):
    a = b.as_array(a, op)
    whole = _whole_index(a, index)
    if whole is not False:
        return _whole(a, whole, value, mode, op, stream)
    template, arrays, target = parse_index(a, index, op)
    if not arrays and mode != "set" and _covers(a, template):
        return _combine(a, value, target, mode, op, stream)
    if arrays and any(n == 0 for _, n in slot_bounds(a, arrays, template)):
        # MLX scatters a block of length 1 along an axis an index array picks from
        raise ValueError(f"[scatter] Cannot scatter along an axis of length 0 of an array "
                         f"of shape {a._shape}.")
    # a Python scalar as MLX takes it: in `a`'s dtype where it fits (an integer that does
    # not is a ValueError), a float into an integer array as float32
    value = _value_of(a, value, op)
    _fits(value._shape, target, op)
    return b.node(_SCATTER, (a, value, *arrays), a._shape, a._dtype,
                  {"index": template, "mode": mode}, b.resolve(stream))


def _whole(a, index, value, mode, op, stream):
    """A bare None or Ellipsis index: MLX scatters nothing but takes `value` broadcast to
    `a`'s shape (Ellipsis first drops its leading 1s), or `a` combined with it by the op,
    in that result's own dtype: `a[...] = 2.5` makes an int32 `a` float32."""
    from . import elementwise
    from .shape import broadcast_to, reshape
    v = _value_of(a, value, op)
    if index is Ellipsis:
        v = reshape(v, _fits(v._shape, a._shape, op), stream=stream)
    v = broadcast_to(v, a._shape, stream=stream)
    return v if mode == "set" else getattr(elementwise, mode)(a, v, stream=stream)


def _covers(a, template):
    """Whether an index of slices, ints, None and Ellipsis picks all of `a` in order: each
    slice every element from 0 on in a positive step, each int on an axis of length 1."""
    picked = sum(s is not None and s is not Ellipsis for s in template)
    axis = 0
    for s in template:
        if s is None:
            continue
        if s is Ellipsis:
            axis += a.ndim - picked
            continue
        n = a._shape[axis]
        axis += 1
        if isinstance(s, int):
            if n != 1:
                return False
        else:
            start, stop, step = s.indices(n)
            if step < 0 or start != 0 or len(range(start, stop, step)) != n:
                return False
    return True


def _combine(a, value, target, mode, op, stream):
    """An update of all of `a` through slices: MLX scatters nothing but combines `a` with
    `value` (cast to `a`'s dtype) by the elementwise op, whose derivatives it then takes
    (multiply has a jvp, maximum's ties go to `value`)."""
    from . import elementwise
    from .creation import astype
    from .shape import broadcast_to, reshape
    value = _value_of(a, value, op)
    shape = _fits(value._shape, target, op)
    v = astype(reshape(value, shape, stream=stream), a._dtype, stream=stream)
    v = reshape(broadcast_to(v, target, stream=stream), a._shape, stream=stream)
    return getattr(elementwise, mode)(a, v, stream=stream)


def _mask_of(index):
    """The boolean mask when `index` is one (a bool array, list, NumPy array or bool), as
    MLX takes `a[mask] = v`; else None."""
    if isinstance(index, bool):
        return b.array(index)
    if isinstance(index, b.array):
        return index if index._dtype.kind == "b" else None
    if isinstance(index, (list, np.ndarray)):
        m = b.as_array(index, "setitem")
        return m if m._dtype.kind == "b" else None
    return None


def _masked_scatter(xp, a, mask, value):
    out = a.copy()
    m = xp.broadcast_to(mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim)), a.shape)
    src = value.reshape(-1)
    if int(m.sum()) > src.size:
        raise RuntimeError("[MaskedScatter::eval_cpu] Source does not have enough elements "
                           "for mask.")
    xp.place(out, m, src.astype(out.dtype, copy=False))
    return out


def _full_mask(mask, a):
    from .shape import broadcast_to, reshape
    return broadcast_to(reshape(mask, mask._shape + (1,) * (a.ndim - mask.ndim)), a._shape)


def _masked_scatter_vjp(c, out, a, mask, value):
    """Where the mask holds, the cotangent goes to the value element placed there."""
    from .creation import zeros
    from .elementwise import where
    from .scan import cumsum
    from .shape import flatten, reshape

    def dvalue():
        from .elementwise import minimum
        if value.size == 0:
            return zeros(value._shape, c._dtype)
        m = flatten(_full_mask(mask, a))
        slot = cumsum(m.astype(b.dt.int32), 0, inclusive=False)
        slot = rules.stop_gradient(minimum(slot, value.size - 1))  # unmasked places add zero
        picked = where(m, flatten(c), 0)
        into = flatten(rules.zeros_for(rules.shape_guard(value), c._dtype))  # value.size above
        return reshape(scatter(into, slot, picked, "add"), value._shape)
    return (lambda: where(_full_mask(mask, a), 0, c), _no_mask_grad, dvalue)


def _no_mask_grad():
    raise ValueError("[masked_scatter] Cannot calculate VJP with respect to mask. Use "
                     "stop_gradient on mask to stop gradients from being computed.")


def _masked_scatter_jvp(t, out, a, mask, value):
    from .elementwise import where
    ta = where(_full_mask(mask, a), 0, t[0]) if t[0] is not None else \
        rules.zeros_for(a, out._dtype)
    if t[2] is None:
        return ta
    return b.node(_MASKED_SCATTER, (ta, mask, t[2]), a._shape, out._dtype, b.NO_PARAMS,
                  b.resolve(None))


_MASKED_SCATTER = b.make("masked_scatter", _masked_scatter, vjp=_masked_scatter_vjp,
                         jvp=_masked_scatter_jvp, shape=rules.same_shape)


def masked_scatter(a, mask, value, *, stream=None):
    """`a` with the elements (or, for a mask over leading axes, the rows) where `mask`
    holds replaced, in order, by those of `value`: what `a[mask] = value` does."""
    from .creation import _cast
    from .shape import broadcast_to, reshape
    op = "masked_scatter"
    a, value = b.as_array(a, op), b.as_array(value, op)
    if mask._dtype.kind != "b":
        raise ValueError(f"[{op}] The mask has to be boolean.")
    if mask.ndim > a.ndim:
        raise ValueError(f"[{op}] The mask cannot have more dimensions than the target.")
    rest = a._shape[mask.ndim:]
    if value.ndim > len(rest) + 1:
        raise ValueError(f"[{op}] Value array shape must be broadcastable with the last "
                         f"{len(rest)} dimensions of the input.")
    if a._shape[:mask.ndim] != mask._shape:
        raise ValueError(f"[{op}] The boolean mask should have the same shape as the "
                         f"beginning of the indexed array but the mask has shape "
                         f"{mask._shape} and the array has shape {a._shape}")
    value = _cast(value, a._dtype, stream=stream)
    if value.ndim < len(rest) + 1:
        value = reshape(value, (1,) * (len(rest) + 1 - value.ndim) + value._shape,
                        stream=stream)
        value = broadcast_to(value, (max(mask.size, 1),) + rest, stream=stream)
    elif value._shape[1:] != rest:
        value = broadcast_to(value, value._shape[:1] + rest, stream=stream)
    return b.node(_MASKED_SCATTER, (a, mask, value), a._shape, a._dtype, b.NO_PARAMS,
                  b.resolve(stream))


def setitem(a, index, value, *, stream=None):
    """The array `a[index] = value` gives: ints, slices, integer arrays, or a boolean mask
    (whose True places take the values in order, as in MLX).  `a[..., mask] = value`
    (a mask over the last axes, which MLX 0.32.4 does not take) broadcasts `value`
    against `a` and writes it where the mask holds."""
    mask = _mask_of(index)
    if mask is not None:
        return masked_scatter(a, mask, value, stream=stream)
    if isinstance(index, tuple) and len(index) == 2 and index[0] is Ellipsis:
        mask = _mask_of(index[1])
        if mask is not None:
            return _trailing_mask(b.as_array(a, "setitem"), mask, value, stream)
    return _update(a, index, value, "set", "setitem", stream)


def _trailing_mask(a, mask, value, stream):
    from .creation import _cast
    from .elementwise import where
    if mask.ndim > a.ndim or a._shape[a.ndim - mask.ndim:] != mask._shape:
        raise IndexError(f"[setitem] Mask of shape {mask._shape} does not match the last "
                         f"axes of an array of shape {a._shape}.")
    value = _cast(b.as_array(value, "setitem"), a._dtype, stream=stream)
    return where(mask, value, a, stream=stream)


def assign(a, index, value):
    """`a[index] = value`: point the handle `a` at the update's node."""
    a._rebind(setitem(a, index, value))


class ArrayAt:
    """What `a.at` is: `a.at[index].add(v)` and `subtract`, `multiply`, `divide`,
    `minimum`, `maximum` return `a` updated at `index`, repeated indices accumulating
    (NumPy's `ufunc.at`), as MLX's `ArrayAt`.

    >>> mx.array([0, 0]).at[mx.array([1, 1])].add(5).tolist()
    [0, 10]
    """

    __slots__ = ("_a", "_index", "_indexed")

    def __init__(self, a):
        self._a, self._index, self._indexed = a, None, False

    def __getitem__(self, index):
        """Pick the elements to update (MLX's `ArrayAt` is its own result here)."""
        self._index, self._indexed = index, True
        return self

    def _check(self, value):
        if not self._indexed:
            raise ValueError("Must give indices to array.at (e.g. `x.at[0].add(4)`).")
        if value is None:
            raise TypeError("[at] Expected an array or a scalar, got None.")
        if isinstance(value, (list, tuple, str)):
            from ..convert import type_name
            raise ValueError(f"Invalid type {type_name(value)} received in array "
                             "initialization.")
        if _mask_of(self._index) is not None:
            raise ValueError("[at] Boolean masks are not supported.")

    def _apply(self, value, mode):
        self._check(value)
        return _update(self._a, self._index, value, mode, "at", None)

    def _value(self, value):
        """`value` as MLX's `at` takes it (`_value_of`)."""
        return _value_of(b.as_array(self._a, "at"), value, "at")

    def add(self, value):
        """`a` with `value` added at the index, repeated indices adding up."""
        return self._apply(value, "add")

    def subtract(self, value):
        """`a` with `value` subtracted at the index: MLX adds the value's negation, taken in
        the value's own dtype (an unsigned value wraps, a boolean one is refused)."""
        from .elementwise import negative
        self._check(value)
        if _whole_index(b.as_array(self._a, "at"), self._index) is not False:
            return _update(self._a, self._index, value, "subtract", "at", None)
        return self._apply(negative(self._value(value)), "add")

    def multiply(self, value):
        """`a` multiplied by `value` at the index."""
        return self._apply(value, "multiply")

    def divide(self, value):
        """`a` times the reciprocal of `value` (in `a`'s dtype, as MLX) at the index."""
        from .creation import _cast
        from .elementwise import reciprocal
        self._check(value)
        if _whole_index(b.as_array(self._a, "at"), self._index) is not False:
            return _update(self._a, self._index, value, "divide", "at", None)
        return self._apply(_cast(reciprocal(self._value(value)), self._a._dtype), "multiply")

    def minimum(self, value):
        """`a` with the minimum of itself and `value` at the index."""
        return self._apply(value, "minimum")

    def maximum(self, value):
        """`a` with the maximum of itself and `value` at the index."""
        return self._apply(value, "maximum")


def _put_along(xp, a, indices, values, axis, shape):
    """`shape`: what the indices and the values broadcast to together (MLX's rule: values
    wider than the indices repeat an index, the last write winning)."""
    # fancy indexing rather than xp.put_along_axis, which CuPy lacks
    index = tuple(xp.broadcast_to(indices, shape) if i == axis else
                  xp.arange(n).reshape((1,) * i + (n,) + (1,) * (len(shape) - i - 1))
                  for i, n in enumerate(shape))
    if values.ndim > len(shape):  # extra leading 1s
        values = values.reshape(values.shape[values.ndim - len(shape):])
    out = a.copy()
    out[index] = xp.broadcast_to(values.astype(out.dtype, copy=False), shape)
    return out


def _put_along_vjp(c, out, a, indices, values, axis, shape):
    from .indexing import take_along_axis
    from .rules import no_index_grad
    from .shape import broadcast_to

    def values_cotangent():  # every write's: the indices as the values met them
        full = indices if indices._shape == shape else broadcast_to(indices, shape)
        return take_along_axis(c, full, axis)
    return (lambda: put_along_axis(c, indices, b.const(0, c._dtype), axis),
            no_index_grad("scatter_axis"), values_cotangent)


def _put_along_jvp(t, out, a, indices, values, axis, shape):
    rules.refuse_index_tangent("scatter_axis", t[1:2])
    ta = t[0] if t[0] is not None else rules.zeros_for(a, out._dtype)
    tv = t[2] if t[2] is not None else rules.zeros_for(values, out._dtype)
    return put_along_axis(ta, indices, tv, axis)


def _put_along_shape(params, shape, index_shape, values_shape):
    """`a`'s shape; the shape the indices and the values broadcast to (`params["shape"]`)
    anew."""
    ax = params["axis"]
    along = b.broadcast_shapes(shape[:ax] + (index_shape[ax],) + shape[ax + 1:], index_shape,
                               op="put_along_axis")
    return shape, dict(params, shape=_along_with_values(along, values_shape))


_PUT_ALONG = b.make("put_along_axis", _put_along, vjp=_put_along_vjp, jvp=_put_along_jvp,
                    bounds=lambda a, i, values, axis, shape: [(i, a.shape[axis])],
                    shape=_put_along_shape)


def _along_with_values(along, values_shape):
    """The shape MLX broadcasts the indices (`along`: theirs against `a`) and the values to
    (extra leading 1s of the values dropped)."""
    op = "put_along_axis"
    return b.broadcast_shapes(along, _without_leading_ones(values_shape, along, op), op=op)


def put_along_axis(a, /, indices, values, axis=None, *, stream=None):
    """`a` with `values` written at `indices` along `axis` (the flattened array if None)."""
    from .shape import flatten, reshape
    a = b.as_array(a, "put_along_axis")
    indices = _int_indices(indices, "put_along_axis")
    values = b.as_array(values, "put_along_axis")
    src = a
    if axis is None:  # the flattened `a`; the indices as they are (1-D, or refused), as MLX
        src, axis = flatten(a, stream=stream), 0
    ax = b.normalize_axis(axis, src.ndim, "put_along_axis")
    shape = _along_with_values(along_axis_shape(src, indices, ax, "put_along_axis"),
                               values._shape)
    out = b.node(_PUT_ALONG, (src, indices, values), src._shape, src._dtype,
                 {"axis": ax, "shape": shape}, b.resolve(stream))
    return out if src is a else reshape(out, a._shape, stream=stream)


def _slice_update(xp, a, update, starts, axes):
    out = a.copy()
    if xp is not np:
        out[window(xp, a.shape, starts, axes, update.shape)] = update
        return out
    index = [_pyslice(0, n) for n in update.shape]
    for ax, start in zip(axes, starts.tolist()):
        n = update.shape[ax]
        start = min(max(int(start), 0), a.shape[ax] - n)
        index[ax] = _pyslice(start, start + n)
    out[tuple(index)] = update
    return out


def _slice_update_vjp(c, out, a, update, starts, axes):
    from .creation import zeros
    from .indexing import slice as slice_
    return (lambda: slice_update(c, zeros(update._shape, c._dtype), starts, axes),
            lambda: slice_(c, starts, axes, update._shape), None)


_SLICE_UPDATE = b.make("slice_update", _slice_update, vjp=_slice_update_vjp,
                       shape=rules.same_shape)


def slice_update(a, update, start_indices, axes, *, stream=None):
    """`a` with the block `update` written at `start_indices` on `axes` (an array read when
    the op runs; starts are clamped so the block fits)."""
    from .creation import _cast
    from .indexing import _slice_args
    from .shape import broadcast_to
    a = b.as_array(a, "slice_update")
    starts, axes = _slice_args(a, start_indices, axes, "slice_update")
    update = b.as_array(update, "slice_update")
    if update.ndim > a.ndim:
        raise ValueError(f"[slice_update] Update of shape {update._shape} does not fit array "
                         f"of shape {a._shape} on axes {axes}.")
    # as MLX: the axes the update lacks are `a`'s whole axes (the block covers them), but
    # for the sliced ones, where it is one wide; an axis longer than `a`'s is cut to it (so
    # a 1 broadcasts to a 0; any other length fails to broadcast)
    lead = a.ndim - update.ndim
    shape = tuple(1 if i in axes else a._shape[i] for i in range(lead)) + tuple(
        min(u, n) for u, n in zip(update._shape, a._shape[lead:]))
    if shape != update._shape:
        update = broadcast_to(update, shape, stream=stream)
    update = _cast(update, a._dtype, stream=stream)
    return b.node(_SLICE_UPDATE, (a, update, starts), a._shape, a._dtype, {"axes": axes},
                  b.resolve(stream))


_DEPENDS = b.make("depends", lambda xp, x, *deps: x,
                  vjp=lambda c, out, x, *deps: (c,) + (None,) * len(deps),
                  jvp=lambda t, out, x, *deps: t[0])


def depends(inputs, dependencies):
    """`inputs` (an array or a list) as new arrays that are computed after `dependencies`."""
    single = isinstance(inputs, b.array)
    xs = [inputs] if single else list(inputs)
    deps = [dependencies] if isinstance(dependencies, b.array) else list(dependencies)
    # on the stream of an x not run yet; an evaluated one may come from a stream of
    # another thread, or one destroyed since: the current stream then
    out = [b.node(_DEPENDS, (x, *deps), x._shape, x._dtype, b.NO_PARAMS,
                  x._node.stream if x._node.prim is not None else b.resolve(None))
           for x in xs]
    return out[0] if single else out
