"""`a[index]`: ints, slices, None, Ellipsis and integer arrays."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import build as b
from . import dims
from .rules import no_index_grad, refuse_index_tangent, shape_guard, to_front, zeros_for


class _Slot:
    """Where the i-th array input goes when the index is rebuilt at run time; one for each
    i (`_slot`), so that params holding them compare and hash by identity, in C."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"<input {self.i}>"


_SLOTS: dict = {}


def _slot(i) -> _Slot:
    return _SLOTS.get(i) or _SLOTS.setdefault(i, _Slot(i))


def _gather(xp, a, *arrays, index):
    out = a[tuple(arrays[s.i] if type(s) is _Slot else s for s in index)]
    return out if type(out) is xp.ndarray else xp.asarray(out)  # a[0] of 1-D is a scalar


_pyslice = builtins.slice  # `slice` below is the op


def _scatter_add(c, x, index):
    """zeros like `x` with `c` added at `index` (repeated indices add up)."""
    from .updates import scatter
    return scatter(zeros_for(x, c._dtype), index, c, "add")


def _getitem_vjp(c, out, x, *arrays, index):
    from .rules import no_index_grad
    return ((lambda: _scatter_add(c, x, fill_index(index, arrays))),) + \
        (no_index_grad("gather"),) * len(arrays)


def _getitem_jvp(t, out, x, *arrays, index):
    refuse_index_tangent("gather", t[1:])
    return getitem(t[0], fill_index(index, arrays))


def _getitem_vmap(axes, out, x, *arrays, index):
    """A batch axis in front of the index.  Advanced indices (arrays, and ints beside
    them) that are not side by side put their broadcast dimensions first, ahead of the
    batch; batched index arrays go slice by slice."""
    if axes[0] is None or any(ax is not None for ax in axes[1:]):
        from ..vmap import batch_by_loop
        return batch_by_loop(axes, out, x, *arrays, index=index)
    x = to_front(x, axes[0])
    batched = getitem(x, (_pyslice(None),) + fill_index(index, arrays))
    if not arrays:
        return batched, 0
    advanced = [i for i, s in enumerate(index) if type(s) is _Slot or
                (isinstance(s, int) and not isinstance(s, bool))]
    if advanced[-1] - advanced[0] + 1 == len(advanced):
        return batched, 0
    return batched, len(b.broadcast_shapes(*[a._shape for a in arrays]))


def slot_bounds(a, arrays, index):
    """(index array, size of the axis it indexes) for each array input of `index` on `a`."""
    consumed = sum(1 for s in index if s is not None and s is not Ellipsis)
    ax, pairs = 0, []
    for s in index:
        if s is Ellipsis:
            ax += a.ndim - consumed
        elif s is not None:
            if type(s) is _Slot:
                pairs.append((arrays[s.i], a.shape[ax]))
            ax += 1
    return pairs


def _gather_shape(params, shape, *index_shapes):
    probe = fill_index(params["index"], [np.zeros(s_, np.intp) for s_ in index_shapes])
    return _dummy(shape)[probe].shape, params


def _take_shape(params, shape, index_shape):
    ax = params["axis"]
    return shape[:ax] + index_shape + shape[ax + 1:], params


def _take_along_shape(params, shape, index_shape):
    ax = params["axis"]
    other = shape[:ax] + (index_shape[ax],) + shape[ax + 1:]
    out = b.broadcast_shapes(other, index_shape, op="take_along_axis")
    return out, dict(params, shape=out)


_GETITEM = b.make("getitem", _gather, vjp=_getitem_vjp, shape=_gather_shape,
                  gpu=b.GpuKernel("streamlet.backend.cuda_pick:gather", bfloat16="bits"),
                  bounds=lambda a, *arrays, index: slot_bounds(a, arrays, index),
                  jvp=_getitem_jvp, vmap=_getitem_vmap)


def _dummy(shape):
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=shape,
                                           strides=(0,) * len(shape))


def _index32(v, op):
    """An index or slice bound: MLX takes 32-bit integers only (ValueError beyond)."""
    if isinstance(v, (int, np.integer)) and not dims.LOW <= v <= dims.HIGH:
        raise ValueError(f"[{op}] Slice indices must be 32-bit integers, got {v}.")
    return v


def parse_index(a, index, op):
    """An index as (template with input slots, index arrays, shape `a[index]` has)."""
    if not isinstance(index, tuple):
        index = (index,)
    template, arrays = [], []
    for x in index:
        if type(x) is np.ndarray and x.ndim == 0:  # MLX: a scalar index (TypeError if not
            x = operator.index(x)                   # an integer), not an index array
        if x is None or x is Ellipsis:
            template.append(x)
        elif type(x) is _pyslice:
            for v in (x.start, x.stop, x.step):
                if v is not None:
                    if type(v) is not int and (isinstance(v, bool) or
                                               not hasattr(type(v), "__index__")):
                        raise ValueError(f"[{op}] Slice indices must be integers or None.")
                    _index32(v, op)
            template.append(x)
        elif type(x) is int or isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            template.append(_index32(int(x), op))
        elif isinstance(x, (list, np.ndarray)) or isinstance(x, b.array):
            x = b.as_array(x, op) if not isinstance(x, b.array) else x
            if x._dtype.kind not in "iu":
                raise ValueError(f"[{op}] Array indices must be integers, got {x._dtype.name} "
                                 "(boolean masks have a data-dependent shape).")
            template.append(_slot(len(arrays)))
            arrays.append(x)
        else:  # a float, a bool, a string...: MLX's ValueError
            raise ValueError(f"[{op}] Cannot index an array with {type(x).__name__}.")
    if len(arrays) > 1 and any(x._dtype is b.dt.uint64 for x in arrays) and \
            any(x._dtype.kind == "i" for x in arrays):  # their common type is a float in MLX
        raise ValueError(f"[{op}] Got indices with invalid dtype. Indices must be integral.")
    if arrays and sum(1 for s in template if s is Ellipsis) == 1 and \
            sum(1 for s in template if s is not None and s is not Ellipsis) == a.ndim:
        # MLX spells an Ellipsis out as the slices it stands for: one that stands for no
        # axis is no index at all, and leaves the integer indices around it side by side
        # (their dimensions stay in place, where NumPy would move them first)
        del template[template.index(Ellipsis)]
    if not arrays:
        shape = _basic_shape(a._shape, template)
    elif len(template) == 1 and a._shape and a._shape[0]:  # one index array along a first
        shape = arrays[0]._shape + a._shape[1:]  # axis not empty (else the probe refuses)
    else:
        shape = None
    if shape is None:  # index arrays, or an index NumPy refuses: its probe words the error
        probe = fill_index(template, [np.zeros(x._shape, np.intp) for x in arrays])
        try:
            shape = _dummy(a._shape)[probe].shape
        except IndexError as exc:
            raise b.BadIndex(f"[{op}] {exc} (array shape {a._shape}).") from None
    return tuple(template), arrays, shape


def _basic_shape(shape, index):
    """The shape of `a[index]` for ints, slices, None and one Ellipsis that fit `shape`
    (NumPy's rules); None for anything else."""
    ndim = len(shape)
    used = len(index) - index.count(None) - index.count(Ellipsis)
    if used > ndim:
        return None
    out, d, ellipsis = [], 0, False
    for x in index:
        if x is None:
            out.append(1)
        elif x is Ellipsis:
            if ellipsis:
                return None
            ellipsis = True
            out.extend(shape[d:d + ndim - used])
            d += ndim - used
        elif type(x) is int:
            if not -shape[d] <= x < shape[d]:
                return None
            d += 1
        elif x.start is None and x.stop is None and x.step is None:
            out.append(shape[d])
            d += 1
        else:
            if x.step == 0:
                return None
            out.append(len(range(*x.indices(shape[d]))))
            d += 1
    out.extend(shape[d:])
    return tuple(out)


def fill_index(index, arrays):
    """The index with its input slots replaced by the arrays the kernel received."""
    return tuple(arrays[s.i] if type(s) is _Slot else s for s in index)


def getitem(a, index, *, stream=None):
    """`a[index]` as an op on a stream."""
    template, arrays, shape = parse_index(a, index, "getitem")
    return b.node(_GETITEM, (a, *arrays), shape, a._dtype, {"index": template},
                  b.resolve(stream))


def _take(xp, a, indices, axis):
    return xp.asarray(xp.take(a, indices, axis))  # NumPy gives a scalar for a 0-d result


def _take_vmap(axes, out, x, indices, axis):
    if axes[1] is not None:
        from ..vmap import batch_by_loop
        return batch_by_loop(axes, out, x, indices, axis=axis)
    return take(to_front(x, axes[0]), indices, axis + 1), 0


def _take_jvp(t, out, x, i, axis):
    refuse_index_tangent("gather", t[1:])
    return take(t[0], i, axis)


_TAKE = b.make("take", _take, shape=_take_shape,
               moves=True,
               bounds=lambda a, i, axis: [(i, a.size if axis is None else a.shape[axis])],
               vjp=lambda c, out, x, i, axis: (
                   lambda: _scatter_add(c, x, (_pyslice(None),) * axis + (i,)),
                   no_index_grad("gather")),
               jvp=_take_jvp, vmap=_take_vmap)


def _int_indices(indices, op):
    indices = b.as_array(indices, op)
    if indices.size == 0 and indices._dtype.kind != "c":  # as MLX: no index, no type
        from .creation import astype
        return astype(indices, b.dt.int32) if indices._dtype.kind not in "iu" else indices
    if indices._dtype.kind not in "iu":
        raise ValueError(f"[{op}] Got indices with invalid dtype. Indices must be integral.")
    return indices


def take(a, /, indices, axis=None, *, stream=None):
    """Elements of `a` at `indices` along `axis` (of the flattened array if None); negative
    indices count from the end, out-of-range ones fail when the op runs."""
    a = b.as_array(a, "take")
    pyint = int(indices) if isinstance(indices, int) and -2**31 <= indices < 2**31 else None
    indices = _int_indices(indices if pyint is None else pyint, "take")
    if axis is None:
        from .shape import flatten
        a, axis = flatten(a, stream=stream), 0
    ax = b.normalize_axis(axis, a.ndim, "take")
    # a Python int index is MLX's slice [i, i + 1), squeezed: an empty array, or an index
    # out of range, fails when built (-1, whose slice MLX 0.32.4 gets empty, is the last
    # element here, as every other negative index is)
    if (a.size == 0) if pyint is not None else (a._shape[ax] == 0 and indices.size):
        raise ValueError("[take] Cannot do a non-empty take from an array with zero elements.")
    if pyint is not None and not -a._shape[ax] <= pyint < a._shape[ax]:
        raise ValueError(f"[squeeze] Cannot squeeze axis {ax} with size 0 which is not "
                         "equal to 1.")
    shape = a._shape[:ax] + indices._shape + a._shape[ax + 1:]
    return b.node(_TAKE, (a, indices), shape, a._dtype, {"axis": ax}, b.resolve(stream))


def along_axis_shape(a, indices, axis, op):
    """The shape indices broadcast to against `a` outside `axis` (numpy's *_along_axis)."""
    if indices.ndim != a.ndim:
        raise ValueError(f"[{op}] Indices of dimension {indices.ndim} does not match array of "
                         f"dimension {a.ndim}.")
    other = a._shape[:axis] + (indices._shape[axis],) + a._shape[axis + 1:]
    return b.broadcast_pair(other, indices._shape, op)


def _take_along(xp, a, indices, axis, shape):
    if indices.shape != shape:
        indices = xp.broadcast_to(indices, shape)
    if a.shape[:axis] + a.shape[axis + 1:] != shape[:axis] + shape[axis + 1:]:
        a = xp.broadcast_to(a, shape[:axis] + (a.shape[axis],) + shape[axis + 1:])
    return xp.take_along_axis(a, indices, axis)


def _along_index(indices, shape, axis, source=None):
    """The full index that picks `indices` along `axis` of an array broadcast to `shape`
    (from `source`'s shape where given: its axes of length 1 picked at 0)."""
    from .creation import arange
    from .shape import broadcast_to, reshape
    nd = len(shape)
    source = shape if source is None else source
    # unsigned positions beside uint64 indices (with which a signed type has no integer
    # common type)
    kw = {"dtype": b.dt.uint32} if indices._dtype is b.dt.uint64 else {}
    return tuple(broadcast_to(indices, shape) if i == axis else
                 reshape(arange(n, **kw), (1,) * i + (n,) + (1,) * (nd - i - 1))
                 for i, n in enumerate(source))


def _take_along_vjp(c, out, x, indices, axis, shape):
    if x.size == 0:  # nothing to scatter into: MLX's scatter_add_axis gives the zeros
        return (lambda: zeros_for(x, c._dtype)), no_index_grad("gather_axis")
    return (lambda: _scatter_add(shape_guard(c), x,
                                 _along_index(indices, shape, axis, x._shape)),
            no_index_grad("gather_axis"))


def _take_along_jvp(t, out, x, indices, axis, shape):
    refuse_index_tangent("gather_axis", t[1:])
    return take_along_axis(t[0], indices, axis)


def _take_along_vmap(axes, out, x, indices, axis, shape):
    from .shape import expand_dims
    x = to_front(x, axes[0]) if axes[0] is not None else expand_dims(x, 0)
    i = to_front(indices, axes[1]) if axes[1] is not None else expand_dims(indices, 0)
    return take_along_axis(x, i, axis + 1), 0


_TAKE_ALONG = b.make("take_along_axis", _take_along, vjp=_take_along_vjp,
                     moves=True,
                     bounds=lambda a, i, axis, shape: [(i, a.shape[axis])],
                     shape=_take_along_shape,
                     jvp=_take_along_jvp,
                     vmap=_take_along_vmap)


def take_along_axis(a, /, indices, axis=-1, *, stream=None):
    """Pick one element of `a` along `axis` per index (the flattened array if axis is None)."""
    a = b.as_array(a, "take_along_axis")
    indices = _int_indices(indices, "take_along_axis")
    if axis is None:  # the flattened `a`; the indices as they are (1-D, or refused), as MLX
        from .shape import flatten
        a, axis = flatten(a, stream=stream), 0
    ax = b.normalize_axis(axis, a.ndim, "take_along_axis")
    shape = along_axis_shape(a, indices, ax, "take_along_axis")
    return b.node(_TAKE_ALONG, (a, indices), shape, a._dtype, {"axis": ax, "shape": shape},
                  b.resolve(stream))


def window(xp, shape, starts, axes, sizes):
    """The index (an open mesh of arrays) of the `sizes` window at `starts` along `axes`,
    each start clamped so the window fits `shape`: built where `starts` lives, since a
    GPU's starts read on the host would wait for everything queued before them."""
    mesh = []
    for ax, n in enumerate(sizes):
        mesh.append(xp.arange(n).reshape((1,) * ax + (n,) + (1,) * (len(sizes) - ax - 1)))
    for j, ax in enumerate(axes):
        mesh[ax] = mesh[ax] + xp.clip(starts[j].astype(np.int64), 0, shape[ax] - sizes[ax])
    return tuple(mesh)


def _dynamic_slice(xp, a, starts, axes, sizes):
    if xp is not np:
        return a[window(xp, a.shape, starts, axes, sizes)]
    index = [_pyslice(0, n) for n in sizes]
    for ax, start in zip(axes, starts.tolist()):
        start = min(max(int(start), 0), a.shape[ax] - sizes[ax])
        index[ax] = _pyslice(start, start + sizes[ax])
    return a[tuple(index)]


def _dynamic_slice_vjp(c, out, x, starts, axes, sizes):
    from .updates import slice_update
    return (slice_update(zeros_for(x, c._dtype), c, starts, axes), None)


def _dynamic_slice_vmap(vaxes, out, x, starts, axes, sizes):
    if vaxes[1] is not None:  # a start per item: slice by slice
        from ..vmap import batch_by_loop
        return batch_by_loop(vaxes, out, x, starts, axes=axes, sizes=sizes)
    x = to_front(x, vaxes[0])
    return slice(x, starts, tuple(a + 1 for a in axes), (x._shape[0],) + sizes), 0


def _dynamic_slice_shape(params, shape, starts_shape):
    """The block's own size, as MLX's DynamicSlice (it must still fit the input)."""
    sizes = params["sizes"]
    if len(sizes) != len(shape) or any(not 0 <= n <= m for n, m in zip(sizes, shape)):
        raise ValueError(f"[slice] Invalid slice size {sizes} for array with shape {shape}.")
    return sizes, params


_SLICE = b.make("slice", _dynamic_slice, vjp=_dynamic_slice_vjp, vmap=_dynamic_slice_vmap,
                jvp=lambda t, out, x, starts, axes, sizes: slice(t[0], starts, axes, sizes),
                shape=_dynamic_slice_shape)


def _slice_args(a, start_indices, axes, op):
    """The starts (0-d or 1-D, one per axis, integers: as MLX checks them) as a 1-D array,
    and the axes normalized."""
    from .shape import reshape
    starts = b.as_array(start_indices, op)
    if starts.size > a.ndim:
        raise ValueError(f"[{op}] Invalid number of starting positions for array with "
                         f"dimension {a.ndim}.")
    if starts.ndim > 1:
        raise ValueError(f"[{op}] array of starting indices must be zero or one dimensional "
                         f"but has dimension {starts.ndim}.")
    if starts.size != len(axes):
        raise ValueError(f"[{op}] Number of starting indices {starts.size} does not match "
                         f"number of axes {len(axes)}.")
    if starts._dtype.kind not in "iu":
        raise ValueError(f"[{op}] Start indices must be integers, got type "
                         f"{starts._dtype.name}.")
    axes = tuple(b.normalize_axis(x, a.ndim, op) for x in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"[{op}] Repeat axes not allowed.")
    return (reshape(starts, (1,)) if starts.ndim == 0 else starts), axes


def slice(a, start_indices, axes, slice_size, *, stream=None):
    """The block of `a` of shape `slice_size` that starts at `start_indices` on `axes` (an
    array, read when the op runs; starts are clamped so the block fits) and at 0 elsewhere."""
    a = b.as_array(a, "slice")
    starts, axes = _slice_args(a, start_indices, axes, "slice")
    sizes = tuple(int(n) for n in slice_size)
    if len(sizes) != a.ndim or any(not 0 <= n <= m for n, m in zip(sizes, a._shape)):
        raise ValueError(f"[slice] Invalid slice size {sizes} for array with shape "
                         f"{a._shape}.")
    return b.node(_SLICE, (a, starts), sizes, a._dtype, {"axes": axes, "sizes": sizes},
                  b.resolve(stream))
