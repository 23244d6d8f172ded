"""Graph nodes: Primitive descriptions and the constructor every op builder uses."""
from __future__ import annotations


class Primitive:
    """What a node computes: a name, a kernel written against an array module `xp`, and
    the rules the function transforms apply to it.

    `kernel(xp, *inputs, **params)` serves NumPy and CuPy alike; `gpu` overrides it
    on the GPU where a hand-written kernel pays.  The rules are built from ops (they
    see arrays, not buffers), and run on the forward node's stream:

    - `vjp(cotangent, output, *primals, **params)`: one cotangent per primal (None for
      an input with no gradient, e.g. an integer index);
    - `jvp(tangents, output, *primals, **params)`: the output's tangent; `tangents`
      holds one entry per primal, None where that input's tangent is zero;
    - `vmap(axes, *inputs, **params)`: `(output, out_axis)` for inputs batched along
      `axes` (None for an input without a batch axis).

    A missing rule makes the transform raise an error naming the primitive.
    """

    __slots__ = ("name", "kernel", "gpu", "vjp", "jvp", "vmap")

    def __init__(self, name, kernel, gpu=None, vjp=None, jvp=None, vmap=None):
        self.name, self.kernel, self.gpu = name, kernel, gpu
        self.vjp, self.jvp, self.vmap = vjp, jvp, vmap

    def __repr__(self):
        return f"Primitive({self.name})"
