"""Trees of arrays (lists, tuples, dicts, nested) as the transforms see them.

As in MLX, a transform puts its tracers into the caller's own lists and dicts (in
place; tuples are rebuilt, named tuples keep their type), calls the function, and
puts the originals back wherever a tracer is still there: an entry the function
replaced, or an array it updated in place, keeps the function's value.
"""
from __future__ import annotations

from .array import array
from .random import state as _key_state


def _is_key_state(tree) -> bool:
    """`mx.random.state`: in a tree it stands for this thread's key (as in MLX)."""
    return tree is _key_state


def leaves(tree, strict=False, op="tree_flatten") -> list:
    """The arrays of `tree` in order; with `strict`, any other leaf raises ValueError."""
    out = []
    _collect(tree, out, strict, op)
    return out


def _collect(tree, out, strict, op):
    if isinstance(tree, array):
        out.append(tree)
    elif _is_key_state(tree):
        out.append(tree[0])
    elif isinstance(tree, (list, tuple)):
        for t in tree:
            _collect(t, out, strict, op)
    elif isinstance(tree, dict):
        for t in tree.values():
            _collect(t, out, strict, op)
    elif strict:
        raise ValueError(f"[{op}] The argument should contain only arrays, got "
                         f"{type(tree).__name__}.")


def update(tree, fn):
    """`tree` with each array `a` replaced by `fn(a)`: lists and dicts in place."""
    if isinstance(tree, array):
        return fn(tree)
    if _is_key_state(tree):
        tree[0] = fn(tree[0])
        return tree
    if isinstance(tree, list):
        for i, t in enumerate(tree):
            tree[i] = update(t, fn)
        return tree
    if isinstance(tree, tuple):
        items = [update(t, fn) for t in tree]
        if type(tree) is tuple:
            return tuple(items)
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, dict):
        for k, v in tree.items():
            tree[k] = update(v, fn)
        return tree
    return tree


def fill(tree, values):
    """`tree` with its arrays replaced, in order, by `values` (lists and dicts in place)."""
    it = iter(values)
    return update(tree, lambda _: next(it))


def unflatten(tree, values):
    """A copy of `tree`'s structure with its arrays replaced, in order, by `values`."""
    it = iter(values)
    return _copy(tree, it)


def _copy(tree, it):
    if isinstance(tree, array):
        return next(it)
    if _is_key_state(tree):
        next(it)
        return tree
    if isinstance(tree, list):
        return [_copy(t, it) for t in tree]
    if isinstance(tree, tuple):
        items = [_copy(t, it) for t in tree]
        if type(tree) is tuple:
            return tuple(items)
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, dict):
        return {k: _copy(v, it) for k, v in tree.items()}
    return tree


def restore(tree, nodes, originals):
    """Put `originals` back where an array still stands for the node of `nodes` it was
    given (a tracer's); arrays the function rebound keep their new value."""
    swap = {id(n): o for n, o in zip(nodes, originals)}
    return update(tree, lambda a: swap.get(id(a._node), a))
