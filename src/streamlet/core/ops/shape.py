"""Shape ops: views and rearrangements whose output shape is known when built."""
from __future__ import annotations

import math
import operator

import numpy as np

from . import build as b
from . import dims
from ..graph import SHAPELESS, NewShapes
from .rules import batch_size, stop_gradient, to_front, zeros_for

def _expand_shape(params, shape):
    out = list(shape)
    for ax in params["axis"]:
        out.insert(ax, 1)
    return tuple(out), params


def _squeeze_shape(params, shape):
    axes = params["axis"]
    for ax in axes:
        if shape[ax] != 1:
            raise ValueError(f"[squeeze] Cannot squeeze axis {ax} with size {shape[ax]} which "
                             "is not equal to 1.")
    return tuple([n for i, n in enumerate(shape) if i not in axes]), params


def _batched_axes(axes):
    return tuple(a + 1 for a in axes)


_EXPAND = b.make("expand_dims", lambda xp, a, axis: xp.expand_dims(a, axis),
                 moves=True,
                 vjp=lambda c, out, x, axis: (squeeze(c, axis),),
                 jvp=lambda t, out, x, axis: expand_dims(t[0], axis),
                 vmap=lambda ax, out, x, axis: (
                     expand_dims(to_front(x, ax[0]), _batched_axes(axis)), 0),
                 shape=_expand_shape)
_SQUEEZE = b.make("squeeze", lambda xp, a, axis: xp.squeeze(a, axis),
                  moves=True,
                  vjp=lambda c, out, x, axis: (expand_dims(c, axis),),
                  jvp=lambda t, out, x, axis: squeeze(t[0], axis),
                  vmap=lambda ax, out, x, axis: (
                      squeeze(to_front(x, ax[0]), _batched_axes(axis)), 0),
                  shape=_squeeze_shape)
# `a` broadcast to the shape of `like` (read for its shape only), so that a shapeless
# compiled function follows `like`'s shape: the transforms spread cotangents with it
def _broadcast_like_vmap(axes, out, a, like):
    """The batch axis first in both, `a` given ones for the dimensions it lacks."""
    rank = len(out._shape)
    if axes[0] is not None:
        a = to_front(a, axes[0])
        lack = rank - (a.ndim - 1)
        a = expand_dims(a, tuple(range(1, lack + 1))) if lack > 0 else a
    if axes[1] is None:
        return broadcast_to(a, (a._shape[0],) + out._shape), 0
    return broadcast_like(a, to_front(like, axes[1])), 0


_BROADCAST_LIKE = b.make("broadcast_like", lambda xp, a, like: xp.broadcast_to(a, like.shape),
                         moves=True,
                         vjp=lambda c, out, a, like: (c, None), vmap=_broadcast_like_vmap,
                         jvp=lambda t, out, a, like: broadcast_like(t[0], like),
                         shape=lambda params, s_, like: (like, params))


def broadcast_like(a, like, *, stream=None):
    """`a` broadcast to `like`'s shape (an op of the transforms' rules)."""
    if b.broadcast_shapes(a._shape, like._shape, op="broadcast_like") != like._shape:
        raise ValueError(f"[broadcast_like] Cannot broadcast array of shape {a._shape} to "
                         f"shape {like._shape}.")
    if a._shape == like._shape:
        return a
    return b.node(_BROADCAST_LIKE, (a, stop_gradient(like)), like._shape, a._dtype,
                  b.NO_PARAMS, b.resolve(stream))


def _reshape_like_shape(params, shape, like):
    if math.prod(shape) != math.prod(like):
        raise ValueError(f"[reshape] Cannot reshape array of size {math.prod(shape)} into "
                         f"shape {like}.")
    return like, params


def _reshape_like_vmap(axes, out, a, like):
    if axes[0] is None:
        return reshape(a, out._shape), None
    a = to_front(a, axes[0])
    if axes[1] is None:
        return reshape(a, a._shape[:1] + out._shape), 0
    return reshape_like(a, to_front(like, axes[1])), 0


# `a` reshaped to the shape of `like` (read for its shape only): reshape's cotangent
# under a shapeless trace, which follows the input's shape
_RESHAPE_LIKE = b.make("reshape_like", lambda xp, a, like: xp.reshape(a, like.shape),
                       moves=True,
                       vjp=lambda c, out, a, like: (reshape_like(c, a), None),
                       jvp=lambda t, out, a, like: reshape_like(t[0], like),
                       vmap=_reshape_like_vmap, shape=_reshape_like_shape)


def reshape_like(a, like):
    """`a` reshaped to `like`'s shape (an op of the transforms' rules)."""
    return b.node(_RESHAPE_LIKE, (a, stop_gradient(like)), like._shape, a._dtype,
                  b.NO_PARAMS, b.resolve(None))


def _reshape_vjp(c, out, x, shape):
    return (reshape_like(c, x) if SHAPELESS.on else reshape(c, x._shape),)


def _reshape_vmap(axes, out, x, shape):
    x = to_front(x, axes[0])
    if x._shape[0] == 0:  # a -1 beside a batch of 0 is the one traced (nothing to infer)
        shape = out._shape
    return reshape(x, x._shape[:1] + shape), 0


def _transpose_vmap(axes, out, x, axes_):
    x = to_front(x, axes[0])
    return transpose(x, (0,) + tuple(a + 1 for a in axes_)), 0


def _broadcast_vmap(axes, out, x, shape):
    x = to_front(x, axes[0])
    lack = len(shape) - (x.ndim - 1)
    x = expand_dims(x, tuple(range(1, lack + 1))) if lack else x
    return broadcast_to(x, x._shape[:1] + shape), 0


def _concat_vjp(c, out, *arrays, axis, dtype):
    bounds = [0]
    for a in arrays:
        bounds.append(bounds[-1] + a._shape[axis])
    return tuple(_slice_of(c, axis, lo, hi) for lo, hi in zip(bounds, bounds[1:]))


def _slice_of(c, axis, lo, hi):
    return lambda: _cut(c, axis, lo, hi, b.resolve(None))


def _cut(a, axis, lo, hi, st):
    """`a[lo:hi]` along `axis`, bounds computed from `a`'s shape: under a shapeless trace
    the slice keeps that length of the axis, and a replay at another traces again."""
    index = (slice(None),) * axis + (slice(lo, hi),)
    shape = a._shape[:axis] + (hi - lo,) + a._shape[axis + 1:]
    params = {"index": index}
    if SHAPELESS.on:
        params["traced"] = (axis, a._shape[axis])
    return b.node(_SLICE, (a,), shape, a._dtype, params, st)


def _concat_jvp(t, out, *arrays, axis, dtype):
    return concatenate([x if x is not None else zeros_for(a, out._dtype)
                        for x, a in zip(t, arrays)], axis)


def _concat_vmap(axes, out, *arrays, axis, dtype):
    size = batch_size(arrays, axes)
    moved = [to_front(a, ax) if ax is not None else
             broadcast_to(expand_dims(a, 0), (size,) + a._shape) for a, ax in zip(arrays, axes)]
    return concatenate(moved, axis + 1), 0


def _slice_vjp(c, out, x, index, traced=None):
    from .updates import setitem
    return (setitem(zeros_for(x, c._dtype), index, c),)


def _reshape_shape(params, shape):
    """The asked shape, its -1 inferred from the new input's size (MLX's Reshape)."""
    return _infer(params["shape"], math.prod(shape)), params


def _transpose_shape(params, shape):
    return tuple(shape[i] for i in params["axes"]), params


def _broadcast_shape(params, shape):
    target = params["shape"]
    if b.broadcast_shapes(shape, target, op="broadcast_to") != target:
        raise ValueError(f"[broadcast_to] Cannot broadcast array of shape {shape} to shape "
                         f"{target}.")
    return target, params


def _concat_shape(params, *shapes):
    ax = params["axis"]
    return shapes[0][:ax] + (sum(s_[ax] for s_ in shapes),) + shapes[0][ax + 1:], params


def _slice_shape(params, shape):
    from .indexing import _dummy
    traced = params.get("traced")
    if traced is not None and shape[traced[0]] != traced[1]:
        raise NewShapes
    return _dummy(shape)[params["index"]].shape, params


_RESHAPE = b.make("reshape", lambda xp, a, shape: a.reshape(shape), shape=_reshape_shape,
                  moves=True,
                  vjp=_reshape_vjp,
                  jvp=lambda t, out, x, shape: reshape(t[0], shape), vmap=_reshape_vmap)
_TRANSPOSE = b.make("transpose", lambda xp, a, axes: a.transpose(axes),
                    moves=True,
                    shape=_transpose_shape,
                    vjp=lambda c, out, x, axes: (_permuted(c, _inverse(axes), None),),
                    jvp=lambda t, out, x, axes: transpose(t[0], axes),
                    vmap=lambda ax, out, x, axes: _transpose_vmap(ax, out, x, axes))
# the transform sums a cotangent over the broadcast axes (transforms.fit)
_BROADCAST = b.make("broadcast_to", lambda xp, a, shape: xp.broadcast_to(a, shape),
                    moves=True,
                    shape=_broadcast_shape,
                    vjp=lambda c, out, x, shape: (c,),
                    jvp=lambda t, out, x, shape: broadcast_to(t[0], shape),
                    vmap=_broadcast_vmap)
_CONCAT = b.make("concatenate", lambda xp, *arrays, axis, dtype:
                 xp.concatenate([b.cast(a, dtype) for a in arrays], axis=axis),
                 gpu=b.GpuKernel("streamlet.backend.cuda_join:concatenate", bfloat16="bits"),
                 vjp=_concat_vjp, jvp=_concat_jvp, vmap=_concat_vmap, shape=_concat_shape)


def _sliced(x, index, traced, lead=0):
    """`x[index]` after `lead` more leading axes, a cut if the slice was (`_cut`)."""
    if traced is None:
        return x[(slice(None),) * lead + index]
    at = index[traced[0]]
    return _cut(x, traced[0] + lead, at.start, at.stop, b.resolve(None))


_SLICE = b.make("slice", lambda xp, a, index, traced=None: a[index], vjp=_slice_vjp,
                moves=True,
                shape=_slice_shape,
                jvp=lambda t, out, x, index, traced=None: _sliced(t[0], index, traced),
                vmap=lambda ax, out, x, index, traced=None: (
                    _sliced(to_front(x, ax[0]), index, traced, 1), 0))


def reshape(a, /, shape, *, stream=None):
    """A view of `a` with a new shape; one entry may be -1."""
    a = b.as_array(a, "reshape")
    if type(shape) is not tuple:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else \
            b.seq_arg(shape, "reshape", "shape")
    spec = tuple(shape)
    if spec and not (b.plain_ints(spec) and -1 <= min(spec) and
                     max(spec) <= dims.HIGH):  # checked one by one
        spec = tuple(dims.dim(operator.index(n), "reshape") for n in spec)
        if any(n < -1 for n in spec):
            raise _bad_spec(spec)
    if spec.count(-1) > 1:
        raise _bad_spec(spec)
    shape = _infer(spec, math.prod(a._shape))
    if shape == a._shape:
        return b.alias(a, b.resolve(stream))
    return b.node(_RESHAPE, (a,), shape, a._dtype, {"shape": spec}, b.resolve(stream))


def _bad_spec(spec):
    return ValueError(f"[reshape] Invalid shape {spec}: at most one -1 and no other negative "
                      "sizes.")


def _infer(spec, size):
    """`spec` with its -1 (if any) made the size that gives `size` elements."""
    if -1 in spec:
        rest = -math.prod(spec)
        if rest == 0 or size % rest:
            raise ValueError(f"[reshape] Cannot infer the shape of an array of size {size} "
                             f"into shape {spec}.")
        at = spec.index(-1)
        return spec[:at] + (size // rest,) + spec[at + 1:]
    if math.prod(spec) != size:
        raise ValueError(f"[reshape] Cannot reshape array of size {size} into shape {spec}.")
    return spec


def flatten(a, /, start_axis=0, end_axis=-1, *, stream=None):
    """Merge axes start_axis..end_axis into one."""
    a = b.as_array(a, "flatten")
    s, e = start_axis, end_axis
    if type(s) is not int or type(e) is not int or not -2**31 <= s < 2**31 or \
            not -2**31 <= e < 2**31:  # MLX's 32-bit ints (NumPy ints, 0-d arrays)
        s, e = b.int_arg(s, "flatten", "start_axis"), b.int_arg(e, "flatten", "end_axis")
    if a.ndim == 0:
        return reshape(a, (1,), stream=stream)
    n = a.ndim  # as MLX: axes out of range are clamped to the first and the last
    s, e = max(s + n if s < 0 else s, 0), min(e + n if e < 0 else e, n - 1)
    if s > e:
        raise ValueError(f"[flatten] start_axis {start_axis} must not come after "
                         f"end_axis {end_axis}.")
    shape = a._shape[:s] + (math.prod(a._shape[s:e + 1]),) + a._shape[e + 1:]
    return reshape(a, shape, stream=stream)


def transpose(a, /, axes=None, *, stream=None):
    """Permute the axes (reverse them if `axes` is None)."""
    a = b.as_array(a, "transpose")
    if axes is None:
        return b.node(_TRANSPOSE, (a,), a._shape[::-1], a._dtype,
                      {"axes": tuple(range(a.ndim - 1, -1, -1))}, b.resolve(stream))
    if len(axes) != a.ndim:
        raise ValueError(f"[transpose] Received {len(axes)} axes for array with "
                         f"{a.ndim} dimensions.")
    axes = tuple(axes)
    if not b.plain_ints(axes) or sorted(axes) != list(range(a.ndim)):
        axes = tuple(b.normalize_axis(x, a.ndim, "transpose") for x in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"[transpose] Repeated axes in {axes}.")
    return _permuted(a, axes, stream)


def _inverse(axes):
    """The permutation that undoes `axes`."""
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


def _permuted(a, axes, stream):
    """The transpose node of `a` for `axes`, a permutation already checked."""
    shape = tuple(map(a._shape.__getitem__, axes))
    return b.node(_TRANSPOSE, (a,), shape, a._dtype, {"axes": axes}, b.resolve(stream))


def swapaxes(a, /, axis1, axis2, *, stream=None):
    """Swap two axes."""
    a = b.as_array(a, "swapaxes")
    n = len(a._shape)
    i = b.normalize_axis(axis1, n, "swapaxes")
    j = b.normalize_axis(axis2, n, "swapaxes")
    axes = list(range(n))
    axes[i], axes[j] = axes[j], axes[i]
    return _permuted(a, tuple(axes), stream)


def expand_dims(a, /, axis, *, stream=None):
    """Insert size-1 axes at the positions `axis` names in the result."""
    a = b.as_array(a, "expand_dims")
    if isinstance(axis, b.array):
        axis = b.ints_of(axis)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else \
        tuple(b.seq_arg(axis, "expand_dims", "axis"))
    axes = b.normalize_axes(axes, len(a._shape) + len(axes), "expand_dims")
    if not axes:
        return b.alias(a)
    shape, params = _expand_shape({"axis": axes}, a._shape)
    return b.node(_EXPAND, (a,), shape, a._dtype, params, b.resolve(stream))


def squeeze(a, /, axis=None, *, stream=None):
    """Remove size-1 axes (all of them if `axis` is None)."""
    a = b.as_array(a, "squeeze")
    st = b.resolve(stream)  # checked also when nothing is squeezed, as MLX checks it
    if axis is None:
        axes = tuple([i for i, n in enumerate(a._shape) if n == 1])
    else:
        axes = b.normalize_axes(axis, len(a._shape), "squeeze")
    shape, params = _squeeze_shape({"axis": axes}, a._shape)
    if not axes:
        return b.alias(a)
    return b.node(_SQUEEZE, (a,), shape, a._dtype, params, st)


def broadcast_to(a, /, shape, *, stream=None):
    """`a` broadcast to `shape` (a view)."""
    a = b.as_array(a, "broadcast_to")
    shape = dims.shape(shape, "broadcast_to")
    if b.broadcast_shapes(a._shape, shape, op="broadcast_to") != shape:
        raise ValueError(f"[broadcast_to] Cannot broadcast array of shape {a._shape} "
                         f"to shape {shape}.")
    if shape == a._shape:
        return b.alias(a, b.resolve(stream))
    return b.node(_BROADCAST, (a,), shape, a._dtype, {"shape": shape}, b.resolve(stream))


def concatenate(arrays, /, axis=0, *, stream=None):
    """Join arrays along an existing axis (None: flatten them first)."""
    arrays = [b.as_array(x, "concatenate") for x in b.sequence(arrays, "concatenate")]
    if not arrays:
        raise ValueError("[concatenate] No arrays to concatenate.")
    d = arrays[0]._dtype
    if len(set([x._dtype for x in arrays])) > 1:  # as MLX: the kernel joins one dtype's
        from .creation import astype             # elements (on a GPU, bfloat16's bits)
        arrays, d = b.promote_many(arrays, "concatenate")
        arrays = [x if x._dtype is d else astype(x, d, stream=stream) for x in arrays]
    if axis is None:
        arrays = [flatten(x, stream=stream) for x in arrays]
        axis = 0
    ax = b.normalize_axis(axis, arrays[0].ndim, "concatenate")
    first = arrays[0]._shape
    head, tail = first[:ax], first[ax + 1:]
    size = first[ax]
    for x in arrays[1:]:
        s = x._shape
        if len(s) != len(first) or s[:ax] != head or s[ax + 1:] != tail:
            raise ValueError(f"[concatenate] All input shapes must match except along axis "
                             f"{ax}; got {first} and {s}.")
        size += s[ax]
    shape = head + (dims.dim(size, "concatenate"),) + tail
    return b.node(_CONCAT, tuple(arrays), shape, d, {"axis": ax, "dtype": d.np},
                  b.resolve(stream))


def stack(arrays, /, axis=0, *, stream=None):
    """Join arrays of one shape along a new axis."""
    arrays = [b.as_array(x, "stack") for x in b.sequence(arrays, "stack")]
    if not arrays:
        raise ValueError("[stack] No arrays to stack.")
    if any(x._shape != arrays[0]._shape for x in arrays):
        raise ValueError("[stack] All arrays must have the same shape; got "
                         f"{[x._shape for x in arrays]}.")
    ax = b.normalize_axis(0 if axis is None else axis, arrays[0].ndim + 1, "stack")  # as MLX
    return concatenate([expand_dims(x, ax, stream=stream) for x in arrays], ax, stream=stream)


def split(a, /, indices_or_sections, axis=0, *, stream=None):
    """Split into equal sections, or at the given indices, along `axis`."""
    a = b.as_array(a, "split")
    ax = b.normalize_axis(axis, a.ndim, "split")
    indices_or_sections = b.ints_of(indices_or_sections)
    n = a._shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"[split] Array split does not result in sub arrays with equal "
                             f"size: attempting {k} splits along axis {ax} for shape {a._shape}.")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        indices = [b.int_arg(i, "split", "indices")
                   for i in b.seq_arg(indices_or_sections, "split", "indices_or_sections")]
        bounds = [0] + [min(max(i + (n if i < 0 else 0), 0), n) for i in indices] + [n]
    st = b.resolve(stream)
    return [_cut(a, ax, lo, max(hi, lo), st) for lo, hi in zip(bounds[:-1], bounds[1:])]


def broadcast_arrays(*arrays, stream=None):
    """Broadcast arrays against each other."""
    arrays = [b.as_array(x, "broadcast_arrays") for x in arrays]
    if not arrays:
        return []  # as MLX: nothing to broadcast
    shape = b.broadcast_shapes(*[x._shape for x in arrays], op="broadcast_arrays")
    return [broadcast_to(x, shape, stream=stream) for x in arrays]


newaxis = None


def concat(arrays, /, axis=0, *, stream=None):
    """Same as `concatenate`."""
    return concatenate(arrays, axis, stream=stream)


def permute_dims(a, /, axes=None, *, stream=None):
    """Same as `transpose`."""
    return transpose(a, axes, stream=stream)


def moveaxis(a, /, source, destination, *, stream=None):
    """Move axis `source` to position `destination`, keeping the order of the others."""
    a = b.as_array(a, "moveaxis")
    s = b.normalize_axis(source, a.ndim, "moveaxis")
    d = b.normalize_axis(destination, a.ndim, "moveaxis")
    axes = [i for i in range(a.ndim) if i != s]
    axes.insert(d, s)
    return transpose(a, axes, stream=stream)


def matrix_transpose(a, /, *, stream=None):
    """Swap the last two axes."""
    a = b.as_array(a, "matrix_transpose")
    if a.ndim < 2:
        raise ValueError("[matrix_transpose] Input array must have at least 2 dimensions.")
    return swapaxes(a, -1, -2, stream=stream)


def unflatten(a, /, axis, shape, *, stream=None):
    """Split axis `axis` into `shape` (one entry may be -1)."""
    a = b.as_array(a, "unflatten")
    ax = b.normalize_axis(axis, a.ndim, "unflatten")
    if type(shape) is not tuple or not b.plain_ints(shape):
        shape = tuple([operator.index(n) for n in b.seq_arg(shape, "unflatten", "shape")])
    if not shape:
        raise ValueError("[unflatten] Shape to unflatten to cannot be empty.")
    if shape.count(-1) > 1:
        raise ValueError("[unflatten] Can only infer one dimension.")
    n = a._shape[ax]
    known = math.prod(shape)
    if -1 in shape:
        known = -known  # the product of the others
        if known == 0 or n % known:
            raise ValueError(f"[unflatten] Cannot unflatten axis {axis} with size {n} into "
                             f"shape {shape}.")
        shape = tuple(n // known if s == -1 else s for s in shape)
    elif known != n:
        raise ValueError(f"[unflatten] Cannot unflatten axis {axis} with size {n} into shape "
                         f"{shape}.")
    return reshape(a, a._shape[:ax] + shape + a._shape[ax + 1:], stream=stream)


def unstack(x, /, *, axis=0, stream=None):
    """The slices of `x` along `axis`, as a tuple of arrays."""
    x = b.as_array(x, "unstack")
    ax = b.normalize_axis(axis, x.ndim, "unstack")
    if x._shape[ax] == 0:
        return ()
    parts = split(x, x._shape[ax], ax, stream=stream)
    return tuple(squeeze(p, ax, stream=stream) for p in parts)


def _atleast(ndim):
    where = {1: lambda s: (1,) * (1 - len(s)) + s,
             2: lambda s: (1,) * (2 - len(s)) + s,
             3: lambda s: {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)}[ndim]

    def op(*arys, stream=None):
        b.resolve(stream)  # checked also when no op is made (inputs of enough dimensions)
        out = []
        for x in arys:
            x = b.as_array(x, f"atleast_{ndim}d")
            out.append(reshape(x, where(x._shape), stream=stream))
        return out[0] if len(out) == 1 else out
    b.rename(op, f"atleast_{ndim}d")
    op.__doc__ = (f"Each input with at least {ndim} dimensions (a list if several): "
                  f"`mx.atleast_{ndim}d(x)`.")
    return op


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)
