"""Sorting and order statistics: sort, argsort, partition, topk, searchsorted, median,
unique."""
from __future__ import annotations

import numpy as np

from . import build as b
from .build import dt
from .rules import (along_axes, inert_tangent, same_shape, stop_gradient, via, zero_tangent,
                    zeros_for)


def _along(a, axis, op, stream):
    """`a` and its normalized axis; axis None means the flattened array."""
    from .shape import flatten
    a = b.as_array(a, op)
    if axis is None:
        return flatten(a, stream=stream), 0
    if a.ndim == 0:
        if not isinstance(b.ints_of(axis), (int, np.integer)):
            b.normalize_axis(axis, 0, op)  # an axis of another type: TypeError, as MLX's binding
        raise b.AxisError(f"[{op}] Invalid axis {axis} for a scalar.")
    return a, b.normalize_axis(axis, a.ndim, op)


def _permuted_vjp(order):
    """The vjp of an op that permutes along `axis` by `order(x, **params)`: the cotangent
    goes back to where each element came from (the permutation cut from the gradient)."""
    def vjp(c, out, x, **params):
        from .updates import put_along_axis
        idx = stop_gradient(order(x, **params))
        return (lambda: put_along_axis(zeros_for(x, c._dtype), idx, c, params["axis"]),)

    def jvp(t, out, x, **params):
        from .indexing import take_along_axis
        return take_along_axis(t[0], stop_gradient(order(x, **params)), params["axis"])
    return {"vjp": vjp, "jvp": jvp, "vmap": along_axes("axis"), "shape": same_shape}


def _keys(a):
    """Values that order as `a` does: bfloat16 widened to float32 (exact), since NumPy's
    sorts of ml_dtypes' bfloat16 misplace NaN in some of its releases."""
    return a.astype(np.float32) if a.dtype == _BF16 else a


def _sorted_values(a, sorter, *args):
    """`sorter(keys, *args)` in `a`'s dtype."""
    out = sorter(_keys(a), *args)
    return out.astype(_BF16) if a.dtype == _BF16 else out


_BF16 = dt.bfloat16.np
_INDICES = {"vjp": lambda c, out, x, **p: (None,),
            "jvp": lambda t, out, x, **p: inert_tangent(t, out),
            "vmap": along_axes("axis"), "shape": same_shape}
_SORT = b.make("sort", lambda xp, a, axis: _sorted_values(a, xp.sort, axis),
               **_permuted_vjp(lambda x, axis: argsort(x, axis)))
# stable, so that ties come out in input order as MLX's do
_ARGSORT = b.make("argsort", lambda xp, a, axis:
                  xp.argsort(_keys(a), axis, kind="stable").astype("uint32"), **_INDICES)


def sort(a, /, axis=-1, *, stream=None):
    """`a` sorted along `axis` (the flattened array if None)."""
    a, ax = _along(a, axis, "sort", stream)
    return b.node(_SORT, (a,), a._shape, a._dtype, {"axis": ax}, b.resolve(stream))


def argsort(a, /, axis=-1, *, stream=None):
    """The uint32 indices that sort `a` along `axis`; equal elements keep their order."""
    a, ax = _along(a, axis, "argsort", stream)
    return b.node(_ARGSORT, (a,), a._shape, dt.uint32, {"axis": ax}, b.resolve(stream))


def _partition(xp, a, kth, axis):
    """`a` taken in argpartition's order, the order the rules send derivatives back by
    (NumPy's partition may arrange the elements otherwise)."""
    return xp.take_along_axis(a, xp.argpartition(_keys(a), kth, axis), axis)


_PARTITION = b.make("partition", _partition,
                    **_permuted_vjp(lambda x, kth, axis: argpartition(x, kth, axis)))
_ARGPARTITION = b.make("argpartition", lambda xp, a, kth, axis:
                       xp.argpartition(_keys(a), kth, axis).astype("uint32"),
                       **dict(_INDICES, jvp=lambda t, out, x, **p: zero_tangent(t, out)))


def _kth(kth, n, op):
    if not -n <= kth < n:
        raise ValueError(f"[{op}] Received invalid kth {kth} along axis of size {n}.")
    return int(kth) % n


def partition(a, /, kth, axis=-1, *, stream=None):
    """`a` with its kth element in sorted position, smaller ones before, larger after."""
    kth = b.int_arg(kth, "partition", "kth")  # a float or None: TypeError, before the axis
    a, ax = _along(a, axis, "partition", stream)
    k = _kth(kth, a._shape[ax], "partition")
    return b.node(_PARTITION, (a,), a._shape, a._dtype, {"kth": k, "axis": ax},
                  b.resolve(stream))


def argpartition(a, /, kth, axis=-1, *, stream=None):
    """The uint32 indices that partition `a` around its kth element."""
    kth = b.int_arg(kth, "argpartition", "kth")
    a, ax = _along(a, axis, "argpartition", stream)
    k = _kth(kth, a._shape[ax], "argpartition")
    return b.node(_ARGPARTITION, (a,), a._shape, dt.uint32, {"kth": k, "axis": ax},
                  b.resolve(stream))


def _topk(xp, a, k, axis):
    n = a.shape[axis]
    part = _sorted_values(a, xp.partition, n - k, axis) if 0 < k < n else a
    return xp.take(part, xp.arange(n - k, n), axis)


def _topk_order(x, k, axis):
    """The indices of the elements `_topk` picks, in its order."""
    from .indexing import take
    from .creation import arange
    n = x._shape[axis]
    idx = argpartition(x, n - k, axis) if 0 < k < n else argsort(x, axis) * 0 + \
        arange(n).reshape(tuple(n if i == axis else 1 for i in range(x.ndim)))
    return take(idx, arange(n - k, n), axis)


def _topk_vjp(c, out, x, k, axis):
    from .indexing import _along_index, _scatter_add
    idx = stop_gradient(_topk_order(x, k, axis))
    return (lambda: _scatter_add(c, x, _along_index(idx, c._shape, axis)),)


def _topk_jvp(t, out, x, k, axis):
    from .indexing import take_along_axis
    return take_along_axis(t[0], stop_gradient(_topk_order(x, k, axis)), axis)


_TOPK = b.make("topk", _topk, vjp=_topk_vjp, jvp=_topk_jvp, vmap=along_axes("axis"))


def topk(a, /, k, axis=-1, *, stream=None):
    """The `k` largest elements along `axis`, in no particular order."""
    k = b.int_arg(k, "topk", "k")  # an integer or NumPy integer, as MLX takes it
    a, ax = _along(a, axis, "topk", stream)
    n = a._shape[ax]
    if not 0 <= k <= n:
        raise ValueError(f"[topk] Received invalid k={k} along axis {ax} of size {n}.")
    if k == n:  # the whole input, as MLX gives it (no node: a shapeless trace takes it)
        return b.alias(a)
    shape = a._shape[:ax] + (int(k),) + a._shape[ax + 1:]
    return b.node(_TOPK, (a,), shape, a._dtype, {"k": int(k), "axis": ax}, b.resolve(stream))


def _searchsorted(xp, s, v, side, dtype):
    s, v = _keys(b.cast(s, dtype)), _keys(b.cast(v, dtype))
    return xp.searchsorted(s, v, side).astype("uint32")


def _searchsorted_vmap(axes, out, s, v, side, dtype):
    """Elementwise in the values; a batched sequence is refused, as MLX does."""
    if axes[0] is not None:
        raise ValueError("[searchsorted] Cannot vmap over the sorted sequence, only over the "
                         "values being searched for.")
    return b.node(_SEARCHSORTED, (s, v), v._shape, dt.uint32, {"side": side, "dtype": dtype},
                  b.resolve(None)), axes[1]


_SEARCHSORTED = b.make("searchsorted", _searchsorted,
                       vjp=lambda c, out, s, v, **p: (None, None),
                       jvp=lambda t, out, s, v, **p: inert_tangent(t, out),
                       vmap=_searchsorted_vmap)


def searchsorted(sorted_sequence, values, /, side="left", *, stream=None):
    """uint32 positions where `values` would go in the 1-D `sorted_sequence` to keep it
    sorted ('left': before equal elements, 'right': after them)."""
    (s, v), d = b.promote_many([b.as_array(sorted_sequence, "searchsorted"), values],
                               "searchsorted")
    if b.str_arg(side, "searchsorted", "side") not in ("left", "right"):
        raise ValueError(f"[searchsorted] Invalid side '{side}': expected 'left' or 'right'.")
    if s.ndim != 1:
        raise ValueError(f"[searchsorted] The sorted sequence must be 1-D, got {s.ndim}-D.")
    return b.node(_SEARCHSORTED, (s, v), v._shape, dt.uint32, {"side": side, "dtype": d.np},
                  b.resolve(stream))


def _median(xp, a, axis, keepdims, dtype):
    if a.size == 0:  # only kept axes are empty (NumPy's median can't reshape that)
        return xp.zeros(tuple(1 if i in axis else n for i, n in enumerate(a.shape)
                              if keepdims or i not in axis), dtype)
    work = "float32" if dtype in (dt.float16.np, dt.bfloat16.np) else dtype  # sees NaN
    return xp.asarray(xp.median(a.astype(work), axis=axis, keepdims=keepdims)).astype(dtype)


def _median_composite(a, axis, keepdims, dtype):
    """MLX's median: sort the flattened reduced axes, average the middle one or two."""
    from .reduction import mean
    from .shape import reshape, transpose
    kept = [i for i in range(a.ndim) if i not in axis]
    moved = transpose(a, kept + list(axis)) if axis else a
    size = 1  # not -1: a kept axis may be empty
    for i in axis:
        size *= a._shape[i]
    flat = reshape(moved, moved._shape[:len(kept)] + (size,)).astype(dt.from_numpy(dtype))
    s = sort(flat, -1)
    n = s._shape[-1]
    mid = s[..., (n - 1) // 2:n // 2 + 1]
    out = mean(mid, -1)
    if keepdims:
        out = reshape(out, tuple(1 if i in axis else m for i, m in enumerate(a._shape)))
    return out


_MEDIAN = b.make("median", _median, **via(_median_composite))


def median(a, /, axis=None, keepdims=False, *, stream=None):
    """The median over `axis` (all axes if None), in a floating dtype."""
    a = b.as_array(a, "median")
    keepdims = b.bool_arg(keepdims, "median", "keepdims")
    axes = b.normalize_axes(axis, a.ndim, "median")
    if not axes and a.ndim:  # MLX flattens no axes into one: its flatten refuses
        raise ValueError("[median] No axes to take the median over.")
    d = dt.to_inexact(a._dtype)
    if any(a._shape[i] == 0 for i in axes):
        raise ValueError("[median] Cannot compute the median of an empty axis.")
    shape = tuple(1 if i in axes else n for i, n in enumerate(a._shape)) if keepdims else \
        tuple(n for i, n in enumerate(a._shape) if i not in axes)
    return b.node(_MEDIAN, (a,), shape, d, {"axis": axes, "keepdims": bool(keepdims),
                                            "dtype": d.np}, b.resolve(stream))


def _unique_part(xp, flat, order, size, part, fill):
    order = order.astype(np.int64)
    s = flat[order]
    first = xp.ones(s.shape, bool)
    first[1:] = s[1:] != s[:-1]
    starts = xp.nonzero(first)[0]
    m = min(size, starts.size)
    if part == "inverse":
        return _inverse(xp, first, order, size)
    if part == "values":
        if fill is None:
            fill = s[0] if s.size else 0
        out = xp.full((size,), fill, flat.dtype)
        out[:m] = s[starts[:m]]
    elif part == "index":
        out = xp.full((size,), order[0] if order.size else 0, "uint32")
        out[:m] = order[starts[:m]]
    else:
        counts = xp.diff(xp.append(starts, s.size))
        out = xp.zeros((size,), "int32")
        out[:m] = counts[:m]
    return out


def _inverse(xp, first, order, size):
    rank = xp.cumsum(first) - 1
    out = xp.empty(order.shape, "uint32")
    out[order] = xp.minimum(rank, max(size - 1, 0))
    return out


_UNIQUE = b.make("unique", lambda xp, flat, order, size, part, fill, shape:
                 _unique_part(xp, flat, order, size, part, fill).reshape(shape))


def unique(a, /, size, return_index=False, return_inverse=False, return_counts=False,
           fill_value=None, *, stream=None):
    """The `size` smallest unique elements of the flattened `a`, padded with `fill_value`
    (default: the smallest element); optionally first indices, inverse and counts."""
    from .shape import flatten
    a = b.as_array(a, "unique")
    size = b.int_arg(size, "unique", "size")
    return_index, return_inverse, return_counts = (
        b.bool_arg(v, "unique", w) for v, w in ((return_index, "return_index"),
                                                (return_inverse, "return_inverse"),
                                                (return_counts, "return_counts")))
    if size < 0:
        raise ValueError(f"[unique] size must be non-negative, got {size}.")
    flat = flatten(a, stream=stream) if a.ndim != 1 else a
    order = argsort(flat, stream=stream)
    st = b.resolve(stream)
    fill = None if fill_value is None else \
        np.asarray(fill_value.item() if isinstance(fill_value, b.array) else fill_value,
                   a._dtype.np)[()]
    parts = [("values", a._dtype, (size,))]
    if return_index:
        parts.append(("index", dt.uint32, (size,)))
    if return_inverse:
        parts.append(("inverse", dt.uint32, a._shape))
    if return_counts:
        parts.append(("counts", dt.int32, (size,)))
    out = tuple(b.node(_UNIQUE, (flat, order), shape, d,
                       {"size": int(size), "part": p, "fill": fill, "shape": shape}, st)
                for p, d, shape in parts)
    return out[0] if len(out) == 1 else out
