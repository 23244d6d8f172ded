"""custom_function and checkpoint: functions whose transforms are given (or recomputed)
instead of derived from the graph they build.

A call makes one multi-output node whose inputs are the arguments' arrays and the
function's results (behind stop_gradient), so its value costs nothing more and a
transform meets this node, with the given rules, instead of the function's graph.
"""
from __future__ import annotations

from . import trees
from .array import array
from .graph import Primitive
from .ops.build import make, multi
from .stream import resolve
from .transforms import _named, jvp, stop_gradient, vjp


def _forward(xp, *args, count):
    return args[count:]


class custom_function:
    """A function whose vjp, jvp and vmap may be defined by hand (`.vjp`, `.jvp`, `.vmap`
    decorators); those left undefined are derived from the function as usual.

    >>> f = mx.custom_function(mx.sin)
    >>> @f.vjp
    ... def f_vjp(x, cotangent, output):
    ...     return cotangent * 2
    >>> mx.grad(f)(mx.array(1.0)).item()
    2.0
    """

    def __init__(self, f):
        self._fun = f
        self._vjp = self._jvp = self._vmap = None
        _named(self, f)

    def vjp(self, f):
        """Use `f(primals, cotangents, outputs)` as the vjp (pytrees like MLX's)."""
        self._vjp = f
        return self

    def jvp(self, f):
        """Use `f(primals, tangents)` as the jvp (tangents None where an input has none)."""
        self._jvp = f
        return self

    def vmap(self, f):
        """Use `f(inputs, axes)` returning `(outputs, out_axes)` as the vmap rule."""
        self._vmap = f
        return self

    def __call__(self, *args, **kwargs):
        if self._vjp is None and self._jvp is None and self._vmap is None:
            return self._fun(*args, **kwargs)
        inputs = trees.leaves((args, kwargs))
        result = self._fun(*args, **kwargs)
        outs = [stop_gradient(o) for o in (  # a checkpoint's outputs: any tree (MLX's)
            trees.leaves(result) if self._vjp is _RECOMPUTE else _output_leaves(result))]
        if not outs:
            return result
        prim = self._primitive(args, kwargs, result, len(inputs))
        picked = multi(prim, inputs + outs, [(o._shape, o._dtype) for o in outs],
                       {"count": len(inputs)}, outs[0]._node.stream or resolve(None))
        return trees.unflatten(result, list(picked))

    def _primitive(self, args, kwargs, result, count):
        """This call's node kind: its rules close over the arguments' structure."""
        structure = (args, kwargs)

        def call(flat):
            a, k = trees.unflatten(structure, flat)
            return trees.leaves(self._fun(*a, **k))

        def vjp_rule(cots, outputs, *ins, count, outs):
            primals = list(ins[:count])
            if self._vjp is None or self._vjp is _RECOMPUTE:
                cots = [c if c is not None else _zeros(o) for c, o in zip(cots, outputs)]
                if self._vjp is _RECOMPUTE:  # checkpoint: run the function again, after
                    from .ops.updates import depends  # its outputs exist (less memory)
                    primals = depends(primals, list(outputs))
                grads = vjp(lambda *p: call(list(p)), primals, cots)[1]
            else:
                a, k = trees.unflatten(structure, primals)
                cots = [c if c is not None else _zeros(o) for c, o in zip(cots, outputs)]
                got = self._vjp(a[0] if len(a) == 1 else a, trees.unflatten(result, cots),
                                trees.unflatten(result, outputs), **k)
                grads = trees.leaves(got)
            return list(grads) + [None] * (len(ins) - count)

        def jvp_rule(ts, outputs, *ins, count, outs):
            primals = list(ins[:count])
            if self._jvp is None:
                full = [t if t is not None else _zeros(p) for t, p in zip(ts, primals)]
                return jvp(lambda *p: call(list(p)), primals, full)[1]
            a, k = trees.unflatten(structure, primals)
            if k:
                raise ValueError("[custom jvp] Function should only accept positional "
                                 "arguments")
            tans = trees.unflatten(a, list(ts[:count]))
            got = self._jvp(a[0] if len(a) == 1 else a, tans[0] if len(a) == 1 else tans)
            got = trees.leaves(got)  # outputs it gives no tangent (None, too few) get zero,
            return got + [None] * (len(outs) - len(got))  # as in MLX

        def vmap_rule(axes, outputs, *ins, count, outs):
            from .vmap import vmap
            primals, in_axes = list(ins[:count]), list(axes[:count])
            if self._vmap is None:
                res = vmap(lambda *p: call(list(p)), in_axes=tuple(in_axes))(*primals)
                return list(res), [0] * len(res)
            a, k = trees.unflatten(structure, primals)
            if k:
                raise ValueError("[custom vmap] Function should only accept positional "
                                 "arguments")
            ax = trees.unflatten(a, in_axes) if in_axes else a
            got = self._vmap(a[0] if len(a) == 1 else a, ax[0] if len(a) == 1 else ax)
            if not isinstance(got, tuple) or len(got) != 2:
                raise ValueError("[custom vmap] Vmap function should return a tuple with 2 "
                                 "items.")
            res, res_axes = trees.leaves(got[0]), _flat_axes(got[0], got[1])
            if len(res) != len(outs):
                raise ValueError(f"[custom vmap] The vmap function returned {len(res)} "
                                 f"outputs, the function has {len(outs)}.")
            return res, res_axes

        return make("custom_function", _forward, multi=True, vjp=vjp_rule, jvp=jvp_rule,
                    vmap=vmap_rule)


def _output_leaves(result):
    """The arrays of a result: with a rule given, every leaf must be an array (MLX
    flattens it strictly: `(x, 5)` or `None` among them raise ValueError; a checkpoint's
    result may hold other leaves)."""
    try:
        return trees.leaves(result, strict=True)
    except ValueError:
        raise ValueError("[tree_flatten] The argument should contain only arrays") from None


_NOT_PREFIX = "[tree_map] Additional input tree is not a valid prefix of the first tree."


def _flat_axes(tree, axes):
    """One output axis per array of `tree` from the rule's `axes`, a prefix tree of it (a
    tree that does not fit is MLX's ValueError)."""
    if isinstance(tree, array):
        return [axes]
    if isinstance(axes, (list, tuple)):
        if not isinstance(tree, (list, tuple)) or len(tree) != len(axes) or \
                type(tree) is not type(axes) and not (isinstance(tree, tuple) and
                                                      isinstance(axes, tuple)):
            raise ValueError(_NOT_PREFIX)
        return [a for t, ax in zip(tree, axes) for a in _flat_axes(t, ax)]
    if isinstance(axes, dict):
        if not isinstance(tree, dict) or any(k not in axes for k in tree):
            raise ValueError(_NOT_PREFIX)
        return [a for k, t in tree.items() for a in _flat_axes(t, axes[k])]
    return [axes] * len(trees.leaves(tree))


def _zeros(a):
    from .ops import zeros
    return zeros(a._shape, a._dtype)


_RECOMPUTE = object()  # the vjp of a checkpoint: the function's own, recomputed


def checkpoint(fun):
    """`fun`, recomputed during the backward pass instead of keeping its intermediate
    values (less memory, more compute).

    >>> f = mx.checkpoint(lambda x: mx.exp(mx.sin(x)))
    >>> round(mx.grad(f)(mx.array(0.0)).item(), 4)
    1.0
    """
    wrapped = custom_function(fun)
    wrapped._vjp = _RECOMPUTE
    return _named(lambda *args, **kwargs: wrapped(*args, **kwargs), fun)


__all__ = ["checkpoint", "custom_function"]
