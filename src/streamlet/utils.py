"""Python trees (nested lists, tuples and dicts) of arrays: map, flatten, unflatten, reduce, merge.

A tree is a list, tuple (named tuples and tuple subclasses keep their type) or dict whose
values are trees or leaves; anything else is a leaf.  Paths are dotted: ``"layers.0.weight"``.

>>> from streamlet.utils import tree_flatten, tree_unflatten
>>> tree_flatten({"a": [1, {"b": 2}]})
[('a.0', 1), ('a.1.b', 2)]
>>> tree_unflatten([("a.0", 1), ("a.1.b", 2)])
{'a': [1, {'b': 2}]}
"""
from __future__ import annotations

from itertools import zip_longest
from typing import Any, Callable, Optional

from . import _public

__all__ = ["tree_flatten", "tree_map", "tree_map_with_path", "tree_merge", "tree_reduce",
           "tree_unflatten"]


def _rebuild(like, children):
    """A sequence of ``like``'s type holding ``children`` (named tuples take them positionally)."""
    kind = type(like)
    return kind(*children) if hasattr(like, "_fields") else kind(children)


def _branches(tree, rest):
    """(key, child, rest's children at key) for each child of an inner node."""
    keys = tree.keys() if isinstance(tree, dict) else range(len(tree))
    return ((k, tree[k], [r[k] for r in rest]) for k in keys)


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None) -> Any:
    """Apply ``fn`` to every leaf of ``tree``; a new tree of the same structure holds the results.

    Each of ``rest`` must have (at least) ``tree``'s structure: its leaves at the same places
    are passed to ``fn`` as further arguments.  ``is_leaf(node)`` may mark inner nodes as leaves.

    >>> tree_map(lambda x, y: x + y, {"a": [1, 2]}, {"a": [10, 20]})
    {'a': [11, 22]}
    """
    if (is_leaf is not None and is_leaf(tree)) or not isinstance(tree, (list, tuple, dict)):
        return fn(tree, *rest)
    mapped = {k: tree_map(fn, child, *others, is_leaf=is_leaf)
              for k, child, others in _branches(tree, rest)}
    return mapped if isinstance(tree, dict) else _rebuild(tree, mapped.values())


def tree_map_with_path(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None,
                       path: Optional[Any] = None) -> Any:
    """As :func:`tree_map`, but ``fn`` gets the leaf's dotted path first.

    ``path`` is a prefix for the paths (the root's path, ``None`` by default).

    >>> tree_map_with_path(lambda p, x: p, {"model": [{"w": 0}]})
    {'model': [{'w': 'model.0.w'}]}
    """
    if (is_leaf is not None and is_leaf(tree)) or not isinstance(tree, (list, tuple, dict)):
        return fn(path, tree, *rest)
    prefix = f"{path}." if path else ""
    mapped = {k: tree_map_with_path(fn, child, *others, is_leaf=is_leaf, path=f"{prefix}{k}")
              for k, child, others in _branches(tree, rest)}
    return mapped if isinstance(tree, dict) else _rebuild(tree, mapped.values())


def tree_flatten(tree: Any, prefix: str = "", is_leaf: Optional[Callable] = None,
                 destination=None):
    """The leaves of ``tree`` as ``(dotted path, leaf)`` pairs, in order.

    ``prefix`` is prepended to every path (its first character is dropped, so pass ``".name"``);
    ``destination`` (a list, the default, or a dict) receives the pairs and is returned.
    Empty lists and dicts contribute nothing.

    >>> tree_flatten([[[0]]])
    [('0.0.0', 0)]
    >>> tree_flatten({"a": {"b": 1}}, prefix=".x", destination={})
    {'x.a.b': 1}
    """
    if destination is None:
        destination = []
    if isinstance(destination, list):
        _flatten_into(tree, prefix, is_leaf, lambda k, v: destination.append((k, v)))
    elif isinstance(destination, dict):
        _flatten_into(tree, prefix, is_leaf, destination.__setitem__)
    else:
        raise ValueError("Destination should be either a list or a dictionary or None")
    return destination


def _flatten_into(tree, prefix, is_leaf, add):
    if (is_leaf is not None and is_leaf(tree)) or not isinstance(tree, (list, tuple, dict)):
        add(prefix[1:], tree)
        return
    for key, child, _ in _branches(tree, ()):
        _flatten_into(child, f"{prefix}.{key}", is_leaf, add)


def tree_unflatten(tree) -> Any:
    """Rebuild a tree from ``(dotted path, leaf)`` pairs (a list, or a dict of them).

    A level whose keys all parse with ``int()`` (``"0"``, ``"01"``, ``"-1"``, ``" 2"``) to
    distinct values becomes a list, filled in ascending order and padded with ``{}`` where
    indices are missing (``"1"`` with ``"01"`` collide: a dict); any other level is a dict.

    >>> tree_unflatten([("hello.world", 42)])
    {'hello': {'world': 42}}
    >>> tree_unflatten({"0": "a", "2": "c"})
    ['a', {}, 'c']
    """
    items = list(tree.items() if isinstance(tree, dict) else tree)
    if len(items) == 1 and items[0][0] == "":
        return items[0][1]
    children: dict = {}
    for key, value in items:
        head, _, tail = key.partition(".")
        children.setdefault(head, []).append((tail, value))
    indices = _list_indices(children)
    if indices is not None:
        out: list = []
        for index, key in indices:
            out.extend({} for _ in range(index - len(out)))
            out.append(tree_unflatten(children[key]))
        return out
    return {k: tree_unflatten(v) for k, v in children.items()}


def _list_indices(children):
    """Sorted ``(int(key), key)`` pairs when every key is an integer to ``int()`` and no two
    keys name the same index; otherwise None (the level is a dict)."""
    try:
        indices = {int(key): key for key in children}
    except ValueError:
        return None
    return sorted(indices.items()) if len(indices) == len(children) else None


def tree_reduce(fn: Callable, tree: Any, initializer: Any = None,
                is_leaf: Optional[Callable] = None) -> Any:
    """Fold ``fn(accumulator, leaf)`` over the leaves of ``tree``, in order.

    Without ``initializer`` the first leaf starts the accumulation.

    >>> tree_reduce(lambda acc, x: acc + x, {"a": [1, 2, 3], "b": [4, 5]}, 0)
    15
    """
    acc = initializer
    for _, leaf in tree_flatten(tree, is_leaf=is_leaf):
        acc = leaf if acc is None else fn(acc, leaf)
    return acc


def tree_merge(tree_a: Any, tree_b: Any, merge_fn: Optional[Callable] = None) -> Any:
    """One tree holding the leaves of both: a deep ``dict.update`` that refuses to overwrite.

    ``None`` and empty containers are empty subtrees.  Where both trees have a leaf at the
    same place, ``merge_fn(a, b)`` combines them; without it that is a ``ValueError``.  Two
    empty subtrees at one place (other than two empty containers of one type) count as
    ``merge_fn(None, None)``.

    >>> tree_merge({"a": 0, "c": [1]}, {"b": 1, "c": [None, 2]})
    {'a': 0, 'c': [1, 2], 'b': 1}
    """
    empty_a, empty_b = _is_empty(tree_a), _is_empty(tree_b)
    if empty_a and empty_b:
        if type(tree_a) is not type(tree_b):
            raise ValueError(f"Cannot merge {type(tree_a).__name__} with {type(tree_b).__name__}")
        return type(tree_a)()
    a = None if empty_a else tree_a
    b = None if empty_b else tree_b
    if (a is None) != (b is None):  # two Nones are two leaves at one place, as in MLX
        return b if a is None else a
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return _rebuild(a, [tree_merge(x, y, merge_fn) for x, y in zip_longest(a, b)])
    if isinstance(a, dict) and isinstance(b, dict):
        keys = list(a) + [k for k in b if k not in a]
        return {k: tree_merge(a.get(k), b.get(k), merge_fn) for k in keys}
    if merge_fn is None:
        raise ValueError("Trees contain elements at the same locations but no merge function "
                         "was provided")
    return merge_fn(a, b)


def _is_empty(tree) -> bool:
    return isinstance(tree, (dict, list, tuple)) and len(tree) == 0


def __dir__():
    return _public.names(globals())
