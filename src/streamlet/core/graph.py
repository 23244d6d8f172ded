"""Graph nodes: Primitive descriptions and the constructor every op builder uses."""
from __future__ import annotations


class Primitive:
    """What a node computes: a name and a kernel written against an array module `xp`.

    `kernel(xp, *inputs, **params)` serves NumPy and CuPy alike; `gpu` overrides it
    on the GPU where a hand-written kernel pays.
    """

    __slots__ = ("name", "kernel", "gpu")

    def __init__(self, name, kernel, gpu=None):
        self.name, self.kernel, self.gpu = name, kernel, gpu

    def __repr__(self):
        return f"Primitive({self.name})"
