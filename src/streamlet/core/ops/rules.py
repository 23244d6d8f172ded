"""What the primitives' transform rules share: cotangent helpers and batching patterns.

A vjp rule may return a thunk (a function of no arguments) for a cotangent that costs
ops to build: the transform calls it only for inputs whose gradient is wanted.
"""
from __future__ import annotations

from . import build as b


def conj_if_complex(d):
    """`d` conjugated when it is complex (the vjp's multiplier)."""
    if isinstance(d, b.array):
        if d._dtype.kind == "c":
            from .elementwise import conj
            return conj(d)
        return d
    return d.conjugate() if type(d) is complex else d


def _conj(x):
    from .elementwise import conj
    return conj(x)


def times(c, d):
    """`d * c` (MLX's order, which complex products round by), without an op when `d` is
    the Python number 1 or -1."""
    if type(d) in (int, float):
        if d == 1:
            return c
        if d == -1:
            return _ew.negative(c)
    return _ew.multiply(d, c) if isinstance(d, b.array) else _ew.multiply(c, d)


def no_index_grad(op):
    """A cotangent thunk for an index input: asking for it is an error (MLX's)."""
    def refuse():
        raise ValueError(f"[{op}] Cannot calculate VJP with respect to indices. Use "
                         "stop_gradient on indices to stop gradients from being computed.")
    return refuse


def zero_tangent(t, out):
    """The tangent of an op whose derivative is zero: zeros shaped like `out`, in the
    tangent's dtype (MLX keeps float tangents through comparisons)."""
    from .creation import zeros
    dtype = next(x._dtype for x in t if x is not None)
    return zeros(out._shape, dtype)


# -- shape rules (shapeless compile) --------------------------------------------------------

def broadcast_shape(params, *shapes):
    """Elementwise ops: the inputs' shapes broadcast."""
    return b.broadcast_shapes(*shapes), params


def same_shape(params, shape, *others):
    """Ops whose result has their first input's shape."""
    return shape, params


# -- batching (vmap) ------------------------------------------------------------------------

def to_front(x, axis):
    """`x` with its batch axis `axis` moved to the front."""
    if axis is None or axis == 0:
        return x
    from .shape import moveaxis
    return moveaxis(x, axis, 0)


def rebuild(out, inputs, shape, params=None):
    """`out`'s primitive applied again to `inputs`, giving `shape` (same dtype, stream)."""
    n = out._node
    return b.node(n.prim, inputs, shape, n.dtype, n.params if params is None else params,
                  b.resolve(None))


def batch_size(inputs, axes):
    return next(x._shape[ax] for x, ax in zip(inputs, axes) if ax is not None)


def elementwise_vmap(axes, out, /, *inputs, **params):
    """Elementwise ops broadcast: batched inputs get their batch axis first and ones for
    the dimensions they lack, unbatched ones broadcast as they are."""
    from .shape import expand_dims
    rank = len(out._shape)
    size = batch_size(inputs, axes)
    moved = []
    for x, ax in zip(inputs, axes):
        if ax is not None:
            x = to_front(x, ax)
            lack = rank - (x.ndim - 1)
            if lack > 0:
                x = expand_dims(x, tuple(range(1, lack + 1)))
        moved.append(x)
    return rebuild(out, moved, (size,) + out._shape, params), 0


def _shift(value):
    if isinstance(value, (tuple, list)):
        return type(value)(v + 1 if v >= 0 else v for v in value)
    return value + 1 if value >= 0 else value


def along_axes(*names):
    """The vmap rule of a one-input op whose params name axes (`names`): the batch goes
    first and each non-negative axis moves up by one."""
    def rule(axes, out, x, /, **params):
        x = to_front(x, axes[0])
        p = dict(params)
        for k in names:
            if p.get(k) is not None:
                p[k] = _shift(p[k])
        return rebuild(out, (x,), (x._shape[0],) + out._shape, p), 0
    return rule


# -- elementwise rules from a derivative ----------------------------------------------------
ZERO = "zero"  # a derivative column: the op is piecewise constant (comparisons, floor, ...)
CONJ = "conj"  # a derivative column: conj, not holomorphic (both rules conjugate)


def from_derivative(deriv):
    """vjp and jvp of a unary op from `deriv(x, out)`, its derivative (or ZERO).

    jvp is `t * d`, vjp `cotangent * conj(d)` (MLX's convention for complex inputs).
    """
    if deriv is ZERO:
        return {"vjp": lambda c, out, x, **p: (None,),
                "jvp": lambda t, out, x, **p: zero_tangent(t, out)}
    if deriv is CONJ:
        return {"vjp": lambda c, out, x, **p: (_conj(c),),
                "jvp": lambda t, out, x, **p: _conj(t[0])}
    return {"vjp": lambda c, out, x, **p: (lambda: times(c, conj_if_complex(deriv(x, out))),),
            "jvp": lambda t, out, x, **p: times(t[0], deriv(x, out))}


def from_partials(dx, dy):
    """vjp and jvp of a binary op from its partial derivatives `dx(x, y, out)` and
    `dy(x, y, out)` (either may be ZERO for both)."""
    if dx is ZERO:
        return {"vjp": lambda c, out, x, y, **p: (None, None),
                "jvp": lambda t, out, x, y, **p: zero_tangent(t, out)}

    def vjp(c, out, x, y, **p):
        return (lambda: times(c, conj_if_complex(dx(x, y, out))),
                lambda: times(c, conj_if_complex(dy(x, y, out))))

    def jvp(t, out, x, y, **p):
        terms = [times(tx, d(x, y, out)) for tx, d in zip(t, (dx, dy)) if tx is not None]
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]
    return {"vjp": vjp, "jvp": jvp}


def via(fn):
    """vjp, jvp and vmap rules of a primitive from `fn(*inputs, **params)`, the same value
    built from ops that have rules (the kernel stays the fast path, the rules trace `fn`)."""
    def vjp(c, out, /, *xs, **params):
        from ..transforms import vjp as vjp_
        _, grads = vjp_(lambda *a: fn(*a, **params), list(xs), [c])
        return tuple(g if x._dtype.kind in "fcV" else None for g, x in zip(grads, xs))

    def jvp(t, out, /, *xs, **params):
        from ..transforms import jvp as jvp_
        from .creation import zeros
        ts = [ti if ti is not None else zeros(x._shape, x._dtype) for ti, x in zip(t, xs)]
        return jvp_(lambda *a: fn(*a, **params), list(xs), ts)[1][0]

    def vmap(axes, out, /, *xs, **params):
        from ..vmap import vmap as vmap_
        return vmap_(lambda *a: fn(*a, **params), in_axes=tuple(axes))(*xs), 0
    return {"vjp": vjp, "jvp": jvp, "vmap": vmap}


from . import elementwise as _ew  # noqa: E402 (it imports this module: bound once both exist)
