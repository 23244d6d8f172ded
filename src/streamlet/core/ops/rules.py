"""What the primitives' transform rules share: cotangent helpers and batching patterns.

A vjp rule may return a thunk (a function of no arguments) for a cotangent that costs
ops to build: the transform calls it only for inputs whose gradient is wanted.
"""
from __future__ import annotations

from . import build as b
from .build import dt
from ..graph import SHAPELESS, TRACING, NewShapes


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


def refuse_index_tangent(op, tangents):
    """A jvp through index inputs that carry a tangent is an error (MLX's), whatever the
    tangent (an integer op's zeros included)."""
    if any(t is not None for t in tangents):
        raise ValueError(f"[{op}] Cannot calculate JVP with respect to indices. Use "
                         "stop_gradient on indices to stop gradients from being computed.")


def zero_tangent(t, out):
    """The tangent of an op whose derivative is zero: zeros shaped like `out`, in the
    tangent's dtype (MLX keeps float tangents through comparisons)."""
    dtype = next(x._dtype for x in t if x is not None)
    return zeros_for(out, dtype)


def inert_tangent(t, out):
    """The tangent of a piecewise-constant op that MLX gives as zeros of the result's own
    dtype (argsort, argmax, floor, sign, ...).  Zeros, not None: an index computed from
    the primals keeps a tangent, and the gather reading it refuses as MLX's does."""
    return zeros_for(out, out._dtype)


def zeros_for(x, dtype, stream=None):
    """Zeros of `x`'s shape in `dtype`: under a shapeless trace a node that reads the
    shape of `x` when run (a constant would keep the traced shape)."""
    from .creation import full_like, zeros
    return full_like(x, 0, dtype, stream=stream) if SHAPELESS.on else \
        zeros(x._shape, dtype, stream=stream)


def shape_guard(x):
    """`x`, which a rule read a shape from to build constants: under a shapeless trace a
    node whose replay at another shape raises NewShapes (the function is traced again
    for it) instead of computing with the traced shape's constants."""
    if not SHAPELESS.on:
        return x
    return b.node(_GUARD, (x,), x._shape, x._dtype, {"traced": x._shape}, b.resolve(None))


def _guard_shape(params, shape):
    if shape != params["traced"]:
        raise NewShapes
    return shape, params


_GUARD = b.make("shape_guard", lambda xp, x, traced: x, shape=_guard_shape,
                vjp=lambda c, out, x, traced: (c,), jvp=lambda t, out, x, traced: t[0],
                vmap=lambda axes, out, x, traced: (shape_guard(x), axes[0]))


# -- shape rules (shapeless compile) --------------------------------------------------------

def broadcast_shape(params, *shapes):
    """Elementwise ops: the inputs' shapes broadcast."""
    return b.broadcast_shapes(*shapes), params


def same_shape(params, shape, *others):
    """Ops whose result has their first input's shape."""
    return shape, params


# Gradients stop here: the backward walk never enters it; jvp gives zero; batched, it
# stays a stop (a gradient of the vmapped function must not pass it either).
STOP_GRADIENT = b.Primitive("stop_gradient", lambda xp, x: x,
                            vmap=lambda axes, out, x: (stop_gradient(x), axes[0]),
                            shape=same_shape)


def stop_gradient(a, /, *, stream=None) -> b.array:
    """`a` itself, through which no gradient flows.

    >>> mx.grad(lambda x: (x * mx.stop_gradient(x)).sum())(mx.array([3.0])).tolist()
    [3.0]
    """
    a = b.as_array(a, "stop_gradient")
    return b.node(STOP_GRADIENT, (a,), a._shape, a._dtype, None, b.resolve(stream))


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


def derivative_vmap(axes, out, c, /, *xs):
    """A fused derivative product `d(xs) * c` batched: as an elementwise op, except that its
    kernel broadcasts only what `d` reads with `c`, so an unbatched `c` (a cotangent or
    tangent the vmapped function closes over) is given the batch axis first, or the
    product would lack it where `d` reads no batched input (`c * y`, y unbatched, for a
    product `x * y` batched in x)."""
    if axes[0] is None:
        from .shape import broadcast_to, expand_dims
        size = batch_size(xs, axes[1:])
        c = broadcast_to(expand_dims(c, 0), (size,) + c._shape)
        axes = (0,) + tuple(axes[1:])
    return elementwise_vmap(axes, out, c, *xs)


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
# a derivative column: piecewise constant, whose tangent is the zeros of the op's own dtype
# (MLX's logical ops, floor, ceil, sign, round), not of the input tangent's
NO_TANGENT = "no tangent"
NOT = "not"  # logical_not's: MLX casts a non-bool input to bool, so NO_TANGENT, else ZERO
CONJ = "conj"  # a derivative column: conj, not holomorphic (both rules conjugate)
DERIVATIVES: dict = {}  # name -> the fused primitive of a derivative (`Derivative`)


class Derivative:
    """One derivative column of an elementwise op, `d(m, x[, y], out)` or a number, as the
    product the rules need: `d * t` for a tangent, `conj(d) * c` for a cotangent.

    On a CPU stream, when the cotangent and the op's inputs and output are real floats of
    one dtype, the product is one node (its primitive `DERIVATIVES[name]`) whose kernel
    computes `d` with the kernels of the ops it names, in their order, so its values are
    the bits the nodes of the formula give; elsewhere it is built from those ops (the GPU
    fuses them itself).  The fused node's own rules trace the formula.
    """

    __slots__ = ("d", "prim")

    def __init__(self, d, name):
        self.d = d
        self.prim = None
        if callable(d):
            self.prim = DERIVATIVES[name] = b.make(
                name, self._kernel, shape=broadcast_shape,
                **dict(via(lambda c, *xs: self._built(c, xs, False)), vmap=derivative_vmap))

    def _kernel(self, xp, c, *xs):
        m = _ew.kernels(xp)
        return m.multiply(self.d(m, *xs), c)

    def _built(self, c, xs, conj):
        if self.prim is None:
            d = self.d
        else:
            o = xs[-1]._dtype
            if o.kind in "fcV":
                # an integer, bool or narrower float input is read as the inexact result
                # type (MLX casts it before the primitive: 1 / y of a bfloat16 y in float32)
                xs = tuple(x.astype(o) if x._dtype is not o and x._dtype.kind in "biufV"
                           else x for x in xs)
            elif o.kind in "iu" and any(x._dtype is not o for x in xs):
                # an integer op computes in its result's dtype (a bool or narrower operand
                # cast first, as MLX promotes before the primitive)
                xs = tuple(x if x._dtype is o else x.astype(o) for x in xs)
            d = self.d(_ew.GRAPH, *xs)
        return times(c, conj_if_complex(d) if conj else d)

    def times(self, c, xs, conj):
        """`d * c` (`conj(d) * c` when `conj`), `xs` the op's inputs then its output."""
        if self.prim is not None:
            st = b.resolve(None)
            nodes = tuple(x._node for x in xs)
            if _fuses(c._dtype, nodes, st):
                return self.fused(c, nodes, st)
        return self._built(c, xs, conj)

    def fused(self, c, nodes, state):
        """The one node computing `d * c`, `nodes` the op's input nodes then its output."""
        return b.node_of(self.prim, (c._node,) + nodes, nodes[-1].shape, c._dtype,
                         b.NO_PARAMS, state)


def _fuses(d, nodes, state) -> bool:
    """Whether a derivative product with a cotangent of dtype `d` is one fused node: real
    floats of one dtype throughout, on a CPU stream."""
    if d not in _REAL or state.gpu:
        return False
    for n in nodes:
        if n.dtype is not d:
            return False
    return True


def _direct(derivs):
    """The `derivs` and `cotangents` columns where each of `derivs` is a fused node, the
    cotangent itself or its negation (a derivative of 1 or -1), what the vjp walk builds
    without the rule (`derivative_cotangents`); else none."""
    if all(d.prim is not None or d.d in (1, -1) for d in derivs):
        return {"derivs": derivs, "cotangents": derivative_cotangents}
    return {}


def from_derivative(deriv, name):
    """vjp and jvp of the unary op `name` from its derivative column (a function
    `deriv(m, x, out)`, a number, ZERO or CONJ; see `Derivative`).

    jvp is `t * d`, vjp `cotangent * conj(d)` (MLX's convention for complex inputs).
    """
    if deriv is ZERO:  # of an integer or bool input: zeros of the result's dtype, as
        # MLX's isnan/isposinf/isneginf of one are a constant
        return {"vjp": lambda c, out, x, **p: (None,),
                "jvp": lambda t, out, x, **p: zeros_for(out, out._dtype)
                if x._dtype.kind in "biu" else zero_tangent(t, out)}
    if deriv is NO_TANGENT or deriv is NOT:
        return {"vjp": lambda c, out, x, **p: (None,), "jvp": lambda t, out, x, **p:
                zero_tangent(t, out) if deriv is NOT and x._dtype.kind == "b" else
                inert_tangent(t, out)}
    if deriv is CONJ:
        return {"vjp": lambda c, out, x, **p: (_conj(c),),
                "jvp": lambda t, out, x, **p: _conj(t[0])}
    d = Derivative(deriv, f"{name}_derivative")
    return {"vjp": lambda c, out, x, **p: (lambda: d.times(c, (x, out), True),),
            "jvp": lambda t, out, x, **p: d.times(t[0], (x, out), False), **_direct((d,))}


def _promoted(t, x, y, out):
    """The tangents `t` of `x` and `y` as MLX's binary ops see them: an operand cast to the
    dtype the op computes in (its result's, but a comparison's) has its tangent cast too."""
    d = out._dtype
    if x._dtype is d and y._dtype is d:
        return t
    if d.kind == "b":
        d = dt.promote_types(x._dtype, y._dtype)
    return [u if u is None or v._dtype is d else u.astype(d) for u, v in zip(t, (x, y))]


def from_partials(dx, dy, name):
    """vjp and jvp of the binary op `name` from its partial derivatives `dx(m, x, y, out)`
    and `dy(m, x, y, out)` (numbers, or ZERO for both)."""
    if dx is ZERO:
        return {"vjp": lambda c, out, x, y, **p: (None, None),
                "jvp": lambda t, out, x, y, **p: zero_tangent(_promoted(t, x, y, out), out)}
    if dx is NO_TANGENT:
        return {"vjp": lambda c, out, x, y, **p: (None, None),
                "jvp": lambda t, out, x, y, **p: inert_tangent(t, out)}
    parts = (Derivative(dx, f"{name}_derivative_x"), Derivative(dy, f"{name}_derivative_y"))

    def vjp(c, out, x, y, **p):
        xs = (x, y, out)
        return (lambda: parts[0].times(c, xs, True), lambda: parts[1].times(c, xs, True))

    def jvp(t, out, x, y, **p):
        xs = (x, y, out)
        t = _promoted(t, x, y, out)
        terms = [d.times(tx, xs, False) for tx, d in zip(t, parts) if tx is not None]
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]
    return {"vjp": vjp, "jvp": jvp, **_direct(parts)}


def derivative_cotangents(n, c, wanted, cot, accumulate):
    """The `cotangents` column of an elementwise op (`Primitive`), from its derivative
    columns (`n.prim.derivs`): for the common case of a CPU stream and real floats of one
    dtype, each cotangent is one fused node (or the cotangent itself or its negation, for a
    derivative of 1 or -1).

    The vjp walk's hot loop: a cotangent of the input's shape is stored or added here, any
    other through `accumulate(cot, input, cotangent)` (the walk's: it sums over broadcast
    axes)."""
    d, st, ins = c._dtype, n.stream, n.inputs
    nodes = ins + (n,)
    if not _fuses(d, nodes, st):
        return False
    shape, cn = n.shape, c._node
    for i, deriv in zip(ins, n.prim.derivs):
        if i not in wanted:
            continue
        r = times(c, deriv.d) if deriv.prim is None else \
            b.node_of(deriv.prim, (cn,) + nodes, shape, d, b.NO_PARAMS, st)
        prev = cot.get(i)
        if i.shape != shape or type(prev) is b.Parts:
            accumulate(cot, i, r)
        else:
            cot[i] = r if prev is None else _ew.add.same(prev, r)
    return True


def via(fn):
    """vjp, jvp and vmap rules of a primitive from `fn(*inputs, **params)`, the same value
    built from ops that have rules (the kernel stays the fast path, the rules trace `fn`)."""
    def vjp(c, out, /, *xs, **params):
        # None for an input `fn` does not reach (a derivative node's output input, mostly):
        # a zero cotangent sent on through it would meet an inf partial (0 * inf is NaN);
        # None for a bool input too, where an integer one passes its own on, as in MLX
        from .. import transforms as tr
        with TRACING:
            tracers = tr._tracers(xs)
            starts = [t._node for t in tracers]
            res = fn(*tracers, **params)
            grads = tr.vjp_nodes([res._node], starts, tr._pair_cotangents([res], [c], "vjp"),
                                 range(len(xs)))
        return tuple(g if x._dtype.kind in "fcViu" else None for g, x in zip(grads, xs))

    def jvp(t, out, /, *xs, **params):
        # only the inputs with a tangent are primals: a zero tangent of another would
        # meet its partial derivative, which may be NaN (power's in its exponent where
        # the base is negative), and 0 * NaN is NaN
        from ..transforms import jvp as jvp_
        live = [i for i, ti in enumerate(t) if ti is not None]

        def traced(*a):
            full = list(xs)
            for i, v in zip(live, a):
                full[i] = v
            return fn(*full, **params)
        return jvp_(traced, [xs[i] for i in live], [t[i] for i in live])[1][0]

    def vmap(axes, out, /, *xs, **params):
        from ..vmap import vmap as vmap_
        return vmap_(lambda *a: fn(*a, **params), in_axes=tuple(axes))(*xs), 0
    return {"vjp": vjp, "jvp": jvp, "vmap": vmap}


_REAL = (dt.float32, dt.float64)

from . import elementwise as _ew  # noqa: E402 (it imports this module: bound once both exist)
