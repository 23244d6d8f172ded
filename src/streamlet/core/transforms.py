"""Function transforms over the graph: vjp, jvp and vmap walk the nodes a traced function
built and apply each primitive's rules (its `vjp`, `jvp` and `vmap` columns).

Tracing.  A transform calls the function on tracers: a copy node per input, marked
`tracer`, so every node built from them is a tracer too and keeps its graph even if
the function evaluates it (`graph.TRACING`).  The walk then visits tracer nodes only.

Streams.  The ops a rule builds go to the stream of the node the rule is applied to
(`stream.build_on`), so a forward graph over several streams gives a backward graph
over the same streams.  Nothing here is shared between threads but `TRACING`'s count.
"""
from __future__ import annotations

import operator

from . import trees
from .array import array, const, node, node_of, wrap
from .graph import SHAPELESS, TRACING, Node, Primitive, keeps_graph
from . import ops as _ops
from .ops.build import NO_PARAMS as _NO_PARAMS, SELECT, Parts, broadcast_shapes, callable_arg, \
    seq_arg
from .ops.creation import filled
from .ops.shape import broadcast_like
from .ops.rules import STOP_GRADIENT, same_shape, stop_gradient
from .stream import build_on, resolve, restore_build


def _identity_vmap(axes, out, x, **params):
    return x, axes[0]


# A tracer: a copy of an input the walk stops at (and an outer transform walks through).
COPY = Primitive("copy", lambda xp, x: x, vjp=lambda c, out, x: (c,),
                 jvp=lambda t, out, x: t[0], vmap=_identity_vmap, shape=same_shape)


def _tracers(arrays) -> list:
    """A tracer for each of `arrays`."""
    token = TRACING.token()
    backend = resolve(None).backend
    out = []
    for a in arrays:
        n = a._node
        s = n.stream
        if n.prim is None and n.data is not None and n.error is None \
                and not keeps_graph(n) and (s is None or s.backend is backend):
            # an evaluated input no walk passes through (not an outer transform's tracer),
            # on this device: the tracer is a leaf holding its value, at its place on its
            # stream, nothing to run (a copy node brings another device's value over once)
            t = Node(n.shape, n.dtype, None, (), None, s, n.data)
            t.seq, t.checks, t.tracer = n.seq, n.checks, token
            out.append(wrap(t))
            continue
        t = node_of(COPY, (n,), n.shape, n.dtype, None,
                    s if n.prim is not None else resolve(None))
        # a tracer input gave the copy its mark (`Tracing.mark`: another thread's too); else
        # this thread's
        t._node.tracer = t._node.tracer or token
        out.append(t)
    return out


def _tape(outputs, start, gradients=True):
    """Nodes reachable from `outputs` that depend on the nodes of the set `start`, in
    build order, which is a topological order; `start` grows to hold them all.  For
    `gradients`, dependence stops at stop_gradient."""
    seen = set(start)
    found = []
    stack = [o for o in outputs if o.tracer and o not in seen]
    seen.update(stack)
    while stack:
        n = stack.pop()
        found.append(n)
        for i in n.inputs:
            if i.tracer and i not in seen:
                seen.add(i)
                stack.append(i)
    found.sort(key=_BIRTH)
    tape = []
    for n in found:
        if gradients and n.prim is STOP_GRADIENT:
            continue
        for i in n.inputs:
            if i in start:
                start.add(n)
                tape.append(n)
                break
    return tape


_BIRTH = operator.attrgetter("birth")


def _missing(n, rule):
    return ValueError(f"[{rule}] The primitive {n.prim.name} has no {rule} rule.")


def fit(c, target: Node, cast=True):
    """A cotangent `c` for input `target`: summed over the axes it was broadcast along
    (no shape written down, so a shapeless compiled backward follows new shapes), in
    `target`'s dtype if `cast`."""
    shape = target.shape
    if c._shape != shape:
        if len(c._shape) < len(shape):  # a value broadcast with leading ones
            c = _ops.expand_dims(c, tuple(range(len(shape) - len(c._shape))))
            if c._shape != shape:
                c = _ops.broadcast_to(c, broadcast_shapes(c._shape, shape))
        lead = len(c._shape) - len(shape)
        if c._shape[lead:] != shape:  # broadcast along axes of length one too
            ones = tuple(lead + i for i, n in enumerate(shape)
                         if n == 1 and c._shape[lead + i] != 1)
            c = _ops.sum.along(c, ones, True)
        if lead:
            c = _ops.sum.along(c, tuple(range(lead)))
    if cast and c._dtype is not target.dtype:
        c = _ops.astype(c, target.dtype)
    return c


def fit_tangent(t, out: Node):
    """A tangent `t` for node `out`: broadcast to its shape, in the dtype its rule's
    arithmetic gives (as MLX: a float64 tangent of a float32 input stays float64, a float16
    one through a sum stays float16; with tangents of the inputs' dtypes, `out`'s), but
    real for a real result of complex inputs (abs, real, var)."""
    if t._shape != out.shape:
        t = broadcast_like(t, wrap(out)) if SHAPELESS.on else \
            _ops.broadcast_to(t, out.shape)
    if t._dtype.kind == "c" and out.dtype.kind == "f":
        t = _ops.astype(t, out.dtype)
    return t


def _results(n):
    """Handles of the results of a multi-output node (new selection nodes)."""
    box = wrap(n)
    return [node(SELECT, (box,), shape, d, {"index": i}, n.stream)
            for i, (shape, d) in enumerate(n.params["outs"])]


def _accumulate(cot, i, r):
    """Add the cotangent `r` of input node `i` to what `cot` (node -> cotangent) holds."""
    prev = cot.get(i)
    if type(r) is Parts:
        if prev is None:
            cot[i] = Parts(r)
        else:
            for k, v in r.items():
                prev[k] = v if prev.get(k) is None else _ops.add(prev[k], v)
        return
    if r._shape != i.shape or r._dtype is not i.dtype:
        r = fit(r, i)
    cot[i] = r if prev is None else _ops.add.same(prev, r)


def vjp_nodes(outputs, primals, cotangents, wants):
    """Cotangents of `primals` (tracer nodes) whose indices are in `wants`, given the
    cotangents of `outputs` (None: no cotangent flows back from that output)."""
    wanted = [primals[i] for i in wants]
    needs = set(wanted)
    SHAPELESS.ruled = SHAPELESS.ruled or SHAPELESS.on
    tape = _tape(outputs, needs)
    cot = {}
    for o, c in zip(outputs, cotangents):
        if c is not None and o in needs:
            _accumulate(cot, o, c)
    saved = on = None
    try:
        for n in reversed(tape):
            c = cot.pop(n, None)
            if c is None:
                continue
            if n.stream is not on:  # the rule's ops (and accumulations) go to n's stream
                on = n.stream
                prev = build_on(on)
                saved = saved or prev
            short = n.prim.cotangents
            if short is None or not short(n, c, needs, cot, _accumulate):
                _pull_back(n, c, needs, cot)
    finally:
        if saved is not None:
            restore_build(saved)
    return [cot.get(p) for p in wanted]


def _pull_back(n, c, needs, cot):
    """Apply node `n`'s vjp rule to its cotangent `c`, adding to `cot` what the inputs in
    `needs` get."""
    rule, ins = n.prim.vjp, n.inputs
    if rule is None:
        raise _missing(n, "vjp")
    params = n.params or _NO_PARAMS
    if n.prim.multi:
        results = rule([c.get(k) for k in range(len(params["outs"]))], _results(n),
                       *map(wrap, ins), **params)
    else:
        results = rule(c, wrap(n), *map(wrap, ins), **params)
    for i, r in zip(ins, results):
        if r is None or i not in needs:
            continue
        if type(r) is not array and callable(r):
            r = r()  # a thunk: built only for inputs whose gradient is wanted
        if r is not None:
            _accumulate(cot, i, r)


def jvp_nodes(outputs, primals, tangents):
    """Tangents of `outputs` given tangents of the tracer nodes `primals` (None: zero)."""
    tape = _tape(outputs, set(primals))
    tan = {id(p): t for p, t in zip(primals, tangents) if t is not None}
    SHAPELESS.ruled = SHAPELESS.ruled or SHAPELESS.on
    saved = None
    try:
        for n in tape:
            ts = [tan.get(id(i)) for i in n.inputs]
            if all(t is None for t in ts):
                continue
            prev = build_on(n.stream)
            saved = saved or prev
            ins = [wrap(i) for i in n.inputs]
            rule = n.prim.jvp
            params = n.params or {}
            if n.prim.multi:
                if rule is None:
                    raise _missing(n, "jvp")
                tan[id(n)] = rule(ts, _results(n), *ins, **params)
                continue
            if rule is not None:
                t = rule(ts, wrap(n), *ins, **params)
            elif n.prim.vjp is not None:
                t = _jvp_by_transposing(n, ts, ins, params)
            else:
                raise _missing(n, "jvp")
            if t is not None:
                tan[id(n)] = fit_tangent(t, n)
    finally:
        if saved is not None:
            restore_build(saved)
    return [tan.get(id(o)) for o in outputs]


def _jvp_by_transposing(n, ts, ins, params):
    """J t from the vjp rule: the gradient in `u` of sum_i <vjp_i(u), t_i> (linear in u)."""
    out = wrap(n)

    def pairing(u):
        total = None
        for i, c in zip(range(len(ins)), n.prim.vjp(u, out, *ins, **params)):
            if c is None or ts[i] is None:
                continue
            if not isinstance(c, array):
                c = c()
            x = n.inputs[i]  # an integer input's tangent stays inexact (MLX casts x first)
            term = _ops.sum(_ops.multiply(fit(c, x, x.dtype.kind in "fcV"), ts[i]))
            total = term if total is None else total + term
        return total

    d = n.dtype
    if d.kind not in "fcV":  # an integer result's float tangents stay float, as in MLX
        d = next((t._dtype for t in ts if t is not None and t._dtype.kind in "fcV"), d)
    u, = _tracers([_ops.zeros(n.shape, d)])
    value = pairing(u)
    if value is None:
        return None
    with TRACING:
        (g,) = vjp_nodes([value._node], [u._node], [array(1.0, value._dtype)], [0])
    return g


# -- the Python API ---------------------------------------------------------------------------

def _as_list(out, op):
    """The function's outputs: an array, or a sequence of arrays (anything else is MLX's
    failed cast, std::bad_cast: a TypeError here)."""
    if isinstance(out, array):
        return [out]
    if isinstance(out, (list, tuple)) and all(isinstance(o, array) for o in out):
        return list(out)
    raise TypeError(f"[{op}] The function must return an array or a list of arrays, got "
                    f"{type(out).__name__}.")


def _arrays(values, op, what):
    """`values` read as MLX's `list[array]` argument: a list or tuple of arrays, or an array
    of at least one dimension taken as the sequence of its rows; anything else (one array
    of no dimension, a Python scalar, a NumPy array, a dict, a generator) is a TypeError."""
    if isinstance(values, array):
        if values.ndim == 0:
            raise TypeError(f"[{op}] {what} must be a list of arrays, got an array of no "
                            "dimension.")
        values = [values[i] for i in range(values.shape[0])]
    elif not isinstance(values, (list, tuple)):
        raise TypeError(f"[{op}] {what} must be a list of arrays, got "
                        f"{type(values).__name__}.")
    out = list(values)
    for v in out:
        if not isinstance(v, array):
            raise TypeError(f"[{op}] {what} must be arrays, got {type(v).__name__}.")
    return out


def vjp(fun, primals, cotangents):
    """The outputs of `fun(*primals)` and the vector-Jacobian products with `cotangents`.

    >>> outs, vjps = mx.vjp(mx.sin, [mx.array(0.0)], [mx.array(2.0)])
    >>> vjps[0].item()
    2.0
    """
    callable_arg(fun, "vjp")
    primals = _arrays(primals, "vjp", "primals")
    cotangents = _arrays(cotangents, "vjp", "cotangents")
    with TRACING:
        tracers = _tracers(primals)
        starts = [t._node for t in tracers]  # before `fun` can rebind the handles
        outputs = _as_list(fun(*tracers), "vjp")
        cots = _pair_cotangents(outputs, cotangents, "vjp")
        grads = vjp_nodes([o._node for o in outputs], starts, cots, range(len(primals)))
    return outputs, [g if g is not None else _zeros_like(p) for g, p in zip(grads, primals)]


def _zeros_like(p):
    n = p._node
    return filled(n.shape, 0, n.dtype, n.stream if n.prim is not None else resolve(None))


def _pair_cotangents(outputs, cotangents, op):
    """One cotangent per output not made by stop_gradient, cast to that output's dtype."""
    cots, k = [], 0
    for o in outputs:
        if o._node.prim is STOP_GRADIENT:
            cots.append(None)
            continue
        if k >= len(cotangents):
            raise ValueError(f"[{op}] Number of outputs to compute gradients for "
                             f"({len(outputs)}) does not match number of cotangents "
                             f"({len(cotangents)}).")
        c = cotangents[k]
        k += 1
        if c._shape != o._shape:
            msg = f"[{op}] Output shape {o._shape} does not match cotangent shape {c._shape}."
            if len(outputs) == 1 and o.size == 1:
                msg += " If you are using grad your function must return a scalar."
            raise ValueError(msg)
        n = o._node
        st = n.stream.stream if n.prim is not None else None
        cots.append(c if c._dtype is o._dtype else _ops.astype(c, o._dtype, stream=st))
    return cots


def jvp(fun, primals, tangents):
    """The outputs of `fun(*primals)` and the Jacobian-vector products with `tangents`.

    >>> outs, jvps = mx.jvp(lambda x: x * x, [mx.array(3.0)], [mx.array(1.0)])
    >>> jvps[0].item()
    6.0
    """
    callable_arg(fun, "jvp")
    primals = _arrays(primals, "jvp", "primals")
    tangents = _arrays(tangents, "jvp", "tangents")
    if len(primals) != len(tangents):
        raise ValueError("[jvp] Number of inputs does not match number of tangents.")
    for p, t in zip(primals, tangents):
        if p._shape != t._shape:
            raise ValueError("[jvp] Input shape does not match shape of tangent.")
    with TRACING:
        tracers = _tracers(primals)
        starts = [t._node for t in tracers]
        outputs = _as_list(fun(*tracers), "jvp")
        jvps = jvp_nodes([o._node for o in outputs], starts, tangents)
    return outputs, [j if j is not None else _zeros_like(o) for j, o in zip(jvps, outputs)]


def _argnums(argnums, argnames, tag):
    names = {argnames} if isinstance(argnames, str) else set(argnames)
    if argnums is None:
        nums = [] if names else [0]
    else:
        try:  # an int, or anything an int converts from (a NumPy integer), as MLX's binding
            nums = [operator.index(argnums)]
        except TypeError:
            nums = [operator.index(n) for n in seq_arg(argnums, tag, "argnums")]
    return sorted(nums), names


def value_and_grad(fun, argnums=None, argnames=()):
    """A function returning `(fun(*args), gradient)`: `fun` returns a scalar, or a tuple
    whose first item is the scalar loss (the rest are returned as they are).

    >>> mx.value_and_grad(lambda x: (x * x).sum())(mx.array([3.0]))
    (array(9, dtype=float32), array([6], dtype=float32))
    """
    nums, names = _argnums(argnums, argnames, "value_and_grad")
    return _value_and_grad(fun, nums, names, "value_and_grad", scalar_only=False)


def grad(fun, argnums=None, argnames=()):
    """A function returning the gradient of the scalar `fun` at its arguments.

    >>> mx.grad(lambda x: (x * x).sum())(mx.array([3.0])).tolist()
    [6.0]
    """
    nums, names = _argnums(argnums, argnames, "grad")
    vg = _value_and_grad(fun, nums, names, "grad", scalar_only=True)

    def grad_fn(*args, **kwargs):
        return vg(*args, **kwargs)[1]
    return _named(grad_fn, fun)


def _named(wrapper, fun):
    wrapper.__name__ = getattr(fun, "__name__", "function")
    wrapper.__doc__ = getattr(fun, "__doc__", None)
    wrapper.__wrapped__ = fun
    return wrapper


def _check_argnums(nums, names, tag):
    if not nums and not names:
        raise ValueError(f"[{tag}] Gradient wrt no argument requested")
    if nums and nums[0] < 0:
        raise ValueError(f"[{tag}] Can't compute the gradient of negative argument index "
                         f"{nums[0]}")
    for a, b_ in zip(nums, nums[1:]):
        if a == b_:
            raise ValueError(f"[{tag}] Duplicate argument index {nums[0]} is not allowed.")


def _value_and_grad(fun, nums, names, tag, scalar_only):
    callable_arg(fun, tag)
    _check_argnums(nums, names, tag)
    tag = f"[{tag}]"

    def value_and_grad_fn(*args, **kwargs):
        if nums and nums[-1] >= len(args):
            raise ValueError(f"{tag} Can't compute the gradient of argument index {nums[-1]} "
                             f"because the function is called with only {len(args)} "
                             "positional arguments.")
        for k in names:
            if k not in kwargs:
                raise ValueError(f"{tag} Can't compute the gradient of keyword argument "
                                 f"'{k}' because the function is called with the following "
                                 "keyword arguments {" + ",".join(kwargs) + ",}")
        call = list(args)
        slots = [(call, i) for i in nums] + [(kwargs, k) for k in kwargs if k in names]
        wanted = [box[k] for box, k in slots]
        parts = [trees.leaves(w, strict=True) for w in wanted]
        flat = [a for p in parts for a in p]
        if not flat:
            raise ValueError("[grad] Must specify at least one argument.")
        with TRACING:
            tracers = _tracers(flat)
            starts = [t._node for t in tracers]
            trees.fill(wanted, tracers)  # only the arguments differentiated, as in MLX
            for (box, k), w in zip(slots, wanted):
                box[k] = w
            try:
                value = fun(*call, **kwargs)
            finally:
                trees.restore(wanted, starts, flat)
            outs = _loss_outputs(value, tag, scalar_only)
            loss = outs[0]
            cot = _pair_cotangents([loss], [const(1.0, loss._dtype)], tag[1:-1])
            grads = vjp_nodes([loss._node], starts, cot, range(len(flat)))
        grads = [g if g is not None else _zeros_like(a) for g, a in zip(grads, flat)]
        value = _stop_aux(value)
        return value, _regroup(slots, wanted, parts, grads, len(nums), bool(names))
    return _named(value_and_grad_fn, fun)


def _loss_outputs(value, tag, scalar_only):
    if isinstance(value, array):
        return [value]
    kind = type(value).__name__
    if scalar_only:
        raise ValueError(f"{tag} The return value of the function whose gradient we want to "
                         f"compute should be a scalar array; but {kind} was returned.")
    if not isinstance(value, tuple):
        raise ValueError(f"{tag} The return value of the function whose gradient we want to "
                         "compute should be either a scalar array or a tuple with the first "
                         "value being a scalar array (Union[array, tuple[array, Any, ...]]); "
                         f"but {kind} was returned.")
    if not value:
        raise ValueError(f"{tag} The return value of the function whose gradient we want to "
                         "compute should be either a scalar array or a non-empty tuple. The "
                         "first value should be a scalar array and the rest can be anything. "
                         "Instead, we got an empty tuple.")
    if not isinstance(value[0], array):
        raise ValueError(f"{tag} The return value of the function whose gradient we want to "
                         "compute should be either a scalar array or a tuple with the first "
                         "value being a scalar array (Union[array, tuple[array, Any, ...]]); "
                         "but it was a tuple with the first value being of type "
                         f"{type(value[0]).__name__} .")
    return [value[0]]


def _stop_aux(value):
    """The returned value, the auxiliary outputs behind stop_gradient (as MLX returns them)."""
    if isinstance(value, array):
        return value
    rest = trees.unflatten(value[1:], [stop_gradient(a) for a in trees.leaves(value[1:])])
    return (value[0],) + tuple(rest)


def _regroup(slots, wanted, parts, grads, n_positional, named):
    """The gradients shaped as the arguments asked for (`wanted`, whose leaves are `parts`):
    one tree for one argnum, a tuple for several; with argnames, (that, {name: tree})."""
    out, k = [], 0
    for w, p in zip(wanted, parts):
        out.append(trees.unflatten(w, grads[k:k + len(p)]))
        k += len(p)
    positional = out[0] if n_positional == 1 else (tuple(out[:n_positional]) or None)
    if not named:
        return positional
    return positional, {key: g for (_, key), g in zip(slots[n_positional:], out[n_positional:])}
