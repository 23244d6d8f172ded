"""vmap: trace the function on unbatched placeholders, then rebuild the traced graph on
the batched inputs with each primitive's `vmap` rule.

A primitive without a rule is batched by a loop inside one node (its kernel applied
to each slice, results stacked): always right, and as fast as the slices allow.
"""
from __future__ import annotations

from . import trees
from .array import array, node, wrap
from .graph import TRACING, Node, Primitive
from .ops.build import AxisError, callable_arg, make
from .stream import build_on, restore_build
from .transforms import _named, _results, _tape


def _sliced(a, axis, i):
    if axis is None:
        return a
    index = (slice(None),) * axis + (i,)
    return a[index]


def _looped(xp, *args, prim, axes, size, params):
    kernel = prim.kernel
    outs = [kernel(xp, *[_sliced(a, ax, i) for a, ax in zip(args, axes)], **params)
            for i in range(size)]
    if prim.multi:  # each slice gave a box of results: stack result by result
        return tuple(xp.stack([o[()][k] for o in outs]) for k in range(len(outs[0][()])))
    return xp.stack([xp.asarray(o) for o in outs])


def _looped_vjp(c, out, *inputs, prim, axes, size, params, outs=None):
    """Slice by slice, the inner primitive's vjp; an input's cotangent is the slices'
    stacked along its batch axis (summed if it has none), built only if wanted."""
    from .ops import stack, sum as sum_
    from .transforms import fit
    if prim.vjp is None:
        raise ValueError(f"[vjp] The primitive {prim.name} has no vjp rule.")
    slices = [[x if ax is None else x[(slice(None),) * ax + (i,)] for x, ax in
               zip(inputs, axes)] for i in range(size)]
    if prim.multi:  # one cotangent (or None) and one result per output
        results = [prim.vjp([None if ck is None else ck[i] for ck in c], [o[i] for o in out],
                            *xs, **params) for i, xs in enumerate(slices)]
    else:
        results = [prim.vjp(c[i], out[i], *xs, **params) for i, xs in enumerate(slices)]

    def gathered(k):
        parts = [r[k] for r in results]
        if any(p is None for p in parts):
            return None

        def build():
            got = [fit(p if isinstance(p, array) else p(), xs[k]._node)
                   for p, xs in zip(parts, slices)]
            if axes[k] is None:
                return got[0] if size == 1 else sum_(stack(got), axis=0)
            return stack(got, axis=axes[k])
        return build
    return tuple(gathered(k) for k in range(len(inputs)))


LOOPED = Primitive("vmap_loop", _looped, vjp=_looped_vjp)
LOOPED_MULTI = make("vmap_loop", _looped, multi=True, vjp=_looped_vjp)


def batch_by_loop(axes, out, /, *inputs, **params):
    """The fallback rule: `out`'s primitive applied to each slice along the batch axes
    (`out` is the list of results for a multi-output primitive)."""
    from .ops import zeros
    from .ops.build import multi
    size = next(x._shape[ax] for x, ax in zip(inputs, axes) if ax is not None)
    if size == 0:  # no slice to apply it to: the empty results
        if isinstance(out, list):
            return [zeros((0,) + o._shape, o._dtype) for o in out], [0] * len(out)
        return zeros((0,) + out._shape, out._dtype), 0
    if isinstance(out, list):
        n = out[0]._node.inputs[0]
        loop = {"prim": n.prim, "axes": tuple(axes), "size": size, "params": params}
        res = multi(LOOPED_MULTI, inputs, [((size,) + o._shape, o._dtype) for o in out],
                    loop, n.stream)
        return list(res), [0] * len(res)
    n = out._node
    res = node(LOOPED, inputs, (size,) + n.shape, n.dtype,
               {"prim": n.prim, "axes": tuple(axes), "size": size, "params": params},
               n.stream)
    return res, 0


_NOT_PREFIX = "[tree_map] Additional input tree is not a valid prefix of the first tree."
_NOT_INT = "[vmap] axis must be int or None."


def _flat_axes(tree, axes, outputs):
    """One axis (or None) per array of `tree`, from `axes`: an int, None, or a prefix tree.

    As MLX: an array's axis may be a 1-tuple of an int or None only where `tree` is that
    array itself (anywhere deeper the tuple is refused, once the tree is walked); a bool
    is an int; an axis out of range is an IndexError.
    """
    flat = []
    found_tuple = False

    def visit(t, ax):
        nonlocal found_tuple
        if isinstance(t, array):
            if isinstance(ax, tuple):
                if len(ax) != 1 or not (ax[0] is None or isinstance(ax[0], int)):
                    raise ValueError(_NOT_INT)
                found_tuple = True
                ax = ax[0]
            if ax is None:
                flat.append(None)
                return
            if not isinstance(ax, int):
                raise ValueError(_NOT_INT)
            nd = t.ndim + outputs
            a = int(ax) + nd if ax < 0 else int(ax)
            if not 0 <= a < nd:
                raise AxisError(f"[vmap] Invalid{' output ' if outputs else ' '}"
                                f"vectorization axis {a} for array with shape "
                                f"({','.join(map(str, t._shape))})")
            flat.append(a)
        elif isinstance(t, (list, tuple)):
            if isinstance(ax, (list, tuple)):
                if len(ax) != len(t) or type(ax) is not type(t) and not (
                        isinstance(ax, tuple) and isinstance(t, tuple)):
                    raise ValueError(_NOT_PREFIX)
                for x, a in zip(t, ax):
                    visit(x, a)
            elif isinstance(ax, dict):
                raise ValueError(_NOT_PREFIX)
            else:
                for x in t:
                    visit(x, ax)
        elif isinstance(t, dict):
            if isinstance(ax, dict):
                for k, x in t.items():
                    if k not in ax:
                        raise ValueError("[tree_visit] Tree is not a valid prefix tree of "
                                         "the first tree.")
                    visit(x, ax[k])
            elif isinstance(ax, (list, tuple)):
                raise ValueError(_NOT_PREFIX)
            else:
                for x in t.values():
                    visit(x, ax)
        else:
            raise ValueError("[vmap] The arguments should contain only arrays")

    visit(tree, axes)
    if found_tuple and not isinstance(tree, array):
        raise ValueError(_NOT_INT)
    return flat


def vmap(fun, in_axes=0, out_axes=0):
    """`fun` vectorized over an axis of its inputs (`in_axes`) and outputs (`out_axes`);
    each is an int, None (not vectorized) or a tree matching the arguments' prefix.

    >>> mx.vmap(lambda x: x.sum())(mx.array([[1, 2], [3, 4]])).tolist()
    [3, 7]
    """
    callable_arg(fun, "vmap")
    if in_axes is None or out_axes is None:  # MLX's binding takes no None for either
        raise TypeError("vmap(): incompatible function arguments: in_axes and out_axes "
                        "must not be None (a tree of None: (None,)).")
    def vmapped(*args):
        inputs = trees.leaves(args, strict=True, op="tree_flatten")
        axes = _flat_axes(args[0] if len(args) == 1 else args, in_axes, 0)
        with TRACING:
            placeholders = _trace_inputs(inputs, axes)
            starts = [p._node for p in placeholders]  # before `fun` can rebind the handles
            result = fun(*trees.unflatten(args, placeholders))
            outs = trees.leaves(result, strict=True, op="tree_flatten")
            oaxes = _flat_axes(result, out_axes, 1)
            batched = _replace(inputs, starts, outs, axes, oaxes)
        return trees.unflatten(result, batched)
    return _named(vmapped, fun)


def _trace_inputs(inputs, axes):
    size = None
    for x, ax in zip(inputs, axes):
        if ax is None:
            continue
        if x.ndim == 0:
            raise ValueError("[vmap] Cannot vmap an input with zero dimensions.")
        if size is not None and x._shape[ax] != size:
            raise ValueError(f"[vmap] Inconsistent axis sizes: {x._shape[ax]} and {size}.")
        size = x._shape[ax]
    out = []
    for x, ax in zip(inputs, axes):
        if ax is None:
            out.append(x)
            continue
        p = Node(x._shape[:ax] + x._shape[ax + 1:], x._dtype)
        p.tracer = TRACING.token()
        out.append(wrap(p))
    return out


def _replace(inputs, placeholders, outs, axes, oaxes):
    from .ops import expand_dims, moveaxis, repeat
    if len(oaxes) != len(outs):
        raise ValueError(f"[vmap] The number of out axes ({len(oaxes)}) must match the "
                         f"number of outputs ({len(outs)}).")
    batched = [(x, ax) for x, ax in zip(inputs, axes) if ax is not None]
    if not batched:
        raise ValueError("At least one of in_axes must be non-None.")
    size = batched[0][0]._shape[batched[0][1]]
    tmap = {id(p): (x, ax) for p, x, ax in zip(placeholders, inputs, axes) if ax is not None}
    tape = _tape([o._node for o in outs],
                 {p for p, ax in zip(placeholders, axes) if ax is not None}, gradients=False)
    saved = None
    try:
        for n in tape:
            vins, vaxes = [], []
            for i in n.inputs:
                x, ax = tmap.get(id(i), (None, None))
                vins.append(wrap(i) if x is None else x)
                vaxes.append(ax)
            prev = build_on(n.stream)
            saved = saved or prev
            rule = n.prim.vmap or batch_by_loop
            out = _results(n) if n.prim.multi else wrap(n)
            tmap[id(n)] = rule(vaxes, out, *vins, **(n.params or {}))
    finally:
        if saved is not None:
            restore_build(saved)
    result = []
    for o, oax in zip(outs, oaxes):
        got = tmap.get(id(o._node))
        if got is None:  # does not depend on a vectorized input
            result.append(o if oax is None else repeat(expand_dims(o, oax), size, oax))
            continue
        x, ax = got
        if oax is None:
            raise ValueError("[vmap] Cannot use None as an output axis for an output that "
                             "depends on a vectorized input.")
        if ax is None:
            x = repeat(expand_dims(x, oax), size, oax)
        elif ax != oax:
            if oax >= x.ndim:
                raise ValueError(f"[vmap] Axis {oax} invalid for output with {x.ndim} "
                                 "dimensions.")
            x = moveaxis(x, ax, oax)
        result.append(x)
    return result
