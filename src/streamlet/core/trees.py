"""Trees of arrays (lists, tuples, dicts, nested) as the transforms see them.

As in MLX, a transform puts its tracers into the caller's own lists and dicts (in
place; tuples are rebuilt, named tuples keep their type), calls the function, and
puts the originals back wherever a tracer is still there: an entry the function
replaced, or an array it updated in place, keeps the function's value.
"""
from __future__ import annotations

from .array import array
from .random import state as _key_state


def _rebuilt(tree, items):
    """A tuple of `tree`'s type holding `items` (a named tuple keeps its fields)."""
    if type(tree) is tuple:
        return tuple(items)
    return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)


# Each walk below takes the arrays of a sequence or dict as they come (`type(t) is array`)
# and calls itself for anything else: most trees are lists and tuples of arrays.

def leaves(tree, strict=False, op="tree_flatten") -> list:
    """The arrays of `tree` in order; with `strict`, any other leaf raises ValueError.
    `mx.random.state` stands for this thread's key, as in MLX."""
    out = []
    _collect(tree, out, strict, op)
    return out


def _collect(tree, out, strict, op):
    if isinstance(tree, array):
        out.append(tree)
    elif tree is _key_state:
        out.append(tree[0])
    elif isinstance(tree, (list, tuple, dict)):
        for t in tree.values() if isinstance(tree, dict) else tree:
            if type(t) is array:
                out.append(t)
            else:
                _collect(t, out, strict, op)
    elif strict:
        raise ValueError(f"[{op}] The argument should contain only arrays, got "
                         f"{type(tree).__name__}.")


def update(tree, fn):
    """`tree` with each array `a` replaced by `fn(a)`: lists and dicts in place."""
    if isinstance(tree, array):
        return fn(tree)
    if tree is _key_state:
        tree[0] = fn(tree[0])
        return tree
    if isinstance(tree, list):
        for i, t in enumerate(tree):
            tree[i] = fn(t) if type(t) is array else update(t, fn)
        return tree
    if isinstance(tree, tuple):
        return _rebuilt(tree, [fn(t) if type(t) is array else update(t, fn) for t in tree])
    if isinstance(tree, dict):
        for k, t in tree.items():
            tree[k] = fn(t) if type(t) is array else update(t, fn)
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
    if tree is _key_state:
        next(it)
        return tree
    if isinstance(tree, list):
        return [next(it) if type(t) is array else _copy(t, it) for t in tree]
    if isinstance(tree, tuple):
        return _rebuilt(tree, [next(it) if type(t) is array else _copy(t, it) for t in tree])
    if isinstance(tree, dict):
        return {k: next(it) if type(t) is array else _copy(t, it) for k, t in tree.items()}
    return tree


def restore(tree, nodes, originals):
    """Put `originals` back where an array still stands for the node of `nodes` it was
    given (a tracer's); arrays the function rebound keep their new value."""
    swap = dict(zip(nodes, originals))
    return update(tree, lambda a: swap.get(a._node, a))
