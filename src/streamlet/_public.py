"""What `dir()` shows of a public module: its `__all__`, not the helpers it imports.

A public module (`streamlet.core`, `mx.random`, `streamlet.nn`, ...) ends with

    def __dir__():
        return _public.names(globals())

so `dir(mx)`, tab completion and Python's "Did you mean ...?" of an AttributeError offer
the public names only.  Internals stay importable by their module path
(`streamlet.core.graph`, `streamlet.core.ops.build`).

>>> import streamlet.core as mx
>>> "grad" in dir(mx), "graph" in dir(mx), "np" in dir(mx.random)
(True, False, False)
"""
from __future__ import annotations

__all__ = ["names"]


def names(namespace: dict) -> list[str]:
    """A module's `__all__` and its dunder attributes (`__doc__`, `__file__`, ...), sorted."""
    dunders = (n for n in namespace if n.startswith("__") and n.endswith("__"))
    return sorted({*namespace["__all__"], *dunders})
