"""compile: trace a function once per input signature, then replay the traced graph.

Tracing calls the function on placeholders (inputs with a shape and a dtype but no
value), so its Python body runs once per signature: the structure of the arguments,
the constants among them, and each array's shape (its number of dimensions only when
`shapeless`) and dtype.  What the function reads from elsewhere (closures, arrays it
creates) is a constant of the trace.  The traced nodes become a tape: equal nodes are
merged, and every later call rebuilds the tape's nodes on the new inputs without
running Python code of the function.  Nodes built on the default stream replay on the
caller's default stream; nodes given a stream keep it, unless that stream is the tracing
thread's own without being named by the user (its resolution of a thread-local stream, its
default stream for a device, a stream made by the function): another thread replays those
on its own (as MLX, which traces again there).
"""
from __future__ import annotations

import functools
import inspect
import os

from . import trees
from .array import array, wrap
from .dtypes import float64 as _F64
from .graph import SHAPELESS, TRACING, NewShapes, Node
from .fusion import fuse
from .gpu_program import whole
from .auto_graph import frozen
from .ops.build import SELECT, callable_arg
from .eval import dispatch
from .stream import made, resolve, stand_ins, usable_here

_enabled = [os.environ.get("MLX_DISABLE_COMPILE", "") in ("", "0", "false", "False")]


def disable_compile() -> None:
    """Make compiled functions run their Python body on every call (as if not compiled)."""
    _enabled[0] = False


def enable_compile() -> None:
    """Undo `disable_compile` (and the `MLX_DISABLE_COMPILE` environment variable)."""
    _enabled[0] = True


class _Step:
    """One node to rebuild: its primitive on the values in `refs` (indices of earlier
    values), with the traced shape, dtype and params; `stream` None: the caller's."""

    __slots__ = ("prim", "refs", "shape", "dtype", "params", "stream")

    def __init__(self, prim, refs, shape, dtype, params, stream):
        self.prim, self.refs, self.shape, self.dtype = prim, refs, shape, dtype
        self.params, self.stream = params, stream


_SHAPED_KEPT = 16  # input shapes whose step shapes a shapeless tape keeps


class Tape:
    """A traced function: values 0..n_inputs-1 are the call's inputs, then the trace's
    constants, then one value per step; `outputs` index the values.  `fused` is the
    same program with elementwise runs of CPU steps made single nodes (`fusion.py`),
    and `gpu_whole` (the whole program as one node, `gpu_program.py`) or `gpu_fused`,
    made at the first replay on a GPU, the GPU's; they are used unless a transform
    traces the call (its rules need the single ops)."""

    def __init__(self, n_inputs, constants, steps, outputs, result, n_state, shapeless,
                 input_shapes=None, traced_shapes=None, stand_ins=None):
        self.n_inputs, self.constants, self.steps = n_inputs, constants, steps
        self.stand_ins = stand_ins  # {traced stream: what resolves to the caller's for it}
        self.outputs, self.result, self.n_state = outputs, result, n_state
        self.shapeless = shapeless
        self.fused = fuse(steps, outputs, n_inputs + len(constants))
        self.gpu_fused = self.gpu_whole = self.gpu_refuses = None  # known on a GPU
        self.fixed = None  # the input shapes a step without a shape rule was traced at
        if shapeless:
            for st in steps:
                if st.prim.shape is None and st.prim.name in _COMPOSED \
                        and traced_shapes is not None:
                    self.fixed = tuple(traced_shapes)
                elif st.prim.shape is None and st.prim is not SELECT:
                    _not_shapeless(st.prim)
            # checked where a transform's rules were traced (SHAPELESS.ruled)
            self.broadcasts = {} if input_shapes is None else \
                _broadcasts(steps, list(input_shapes) + [n.shape for n in constants])
        # a shapeless replay's step shapes and params, by the input shapes (and whether the
        # steps are the unfused ones), their broadcasts checked
        self.shaped = {}

    def replay(self, inputs):
        values = [x._node for x in inputs]
        values.extend(self.constants)
        current = resolve(None)
        own = {st: resolve(h) for st, h in self.stand_ins.items()} if self.stand_ins else None
        traced = TRACING.traces(values[:self.n_inputs])
        steps, outputs = self.steps, self.outputs
        if current.gpu:
            if self.gpu_refuses is None:
                self._for_gpu(values)
            if self.gpu_refuses:
                raise ValueError("float64 is not supported on the GPU")  # as array.node
            if not traced and self.gpu_whole is not None:
                return self.gpu_whole.call(values, current)
            if not traced and self.gpu_fused:
                steps, outputs = self.gpu_fused
        elif not traced and self.fused is not None:
            steps, outputs = self.fused
        shaped = made = None
        if self.shapeless:
            key = tuple([v.shape for v in values[:self.n_inputs]])
            if self.fixed is not None and key != self.fixed:
                raise NewShapes  # traced again at these shapes
            key = (steps is self.steps, key)
            shaped = self.shaped.get(key)
            if shaped is None:
                if self.broadcasts:
                    self._check_broadcasts(values)
                made = []
        for k, s in enumerate(steps):
            ins = tuple([values[r] for r in s.refs])
            shape, params = s.shape, s.params
            if shaped is not None:
                shape, params = shaped[k]
            elif made is not None:
                shape, params = _new_shape(s, ins)
                made.append((shape, params))
            stream = s.stream
            if stream is None:
                stream = current
            elif own:
                stream = own.get(stream, stream)
            n = Node(shape, s.dtype, s.prim, ins, params, stream)
            if traced:
                for i in ins:
                    if i.tracer:
                        n.tracer = TRACING.mark(ins)
                        break
            values.append(n)
        if made is not None:
            if len(self.shaped) >= _SHAPED_KEPT:
                self.shaped.clear()
            self.shaped[key] = made
        return [wrap(values[i]) for i in outputs]

    def _check_broadcasts(self, values):
        """Raise NewShapes where the new shapes broadcast a step's inputs along other axes
        than the trace did (its gradient rules summed along the trace's)."""
        shapes = [(v.shape, v.params) for v in values]
        for k, s in enumerate(self.steps):
            ins = [shapes[r] for r in s.refs]
            if s.prim is SELECT:
                shapes.append((ins[0][1]["outs"][s.params["index"]][0], s.params))
                continue
            if s.prim.shape is None:  # the inputs' shapes are the traced ones (self.fixed)
                shapes.append((s.shape, s.params))
                continue
            shape, params = s.prim.shape(s.params or {}, *[i[0] for i in ins])
            axes = self.broadcasts.get(k)
            if axes is not None and _broadcast_axes([i[0] for i in ins], shape) != axes:
                raise NewShapes
            shapes.append((shape, params))

    def _for_gpu(self, values):
        """Whether a step on the caller's stream computes in float64, which the GPU
        refuses, and the GPU's programs (none for shapeless replays): the whole program as
        one node where it can go whole (`gpu_program`), else its fused steps."""
        dtypes = [v.dtype for v in values] + [s.dtype for s in self.steps]
        self.gpu_refuses = any(s.stream is None and (s.dtype is _F64 or any(
            dtypes[r] is _F64 for r in s.refs)) for s in self.steps)
        if self.shapeless:
            self.gpu_fused = ()
            return
        first = len(values)
        self.gpu_whole = whole(self.steps, self.outputs, self.n_inputs, first, dtypes[:first])
        if self.gpu_whole is None:
            self.gpu_fused = fuse(self.steps, self.outputs, first, gpu_dtypes=dtypes[:first]) or ()


# Ops without a shape rule that MLX builds from ops of its own (which replay at the traced
# shapes at least): in a shapeless trace they run, and other shapes trace again.
_COMPOSED = frozenset({"diag", "diagonal", "divmod", "einsum", "inner", "kron", "linalg.norm",
                       "repeat", "tensordot", "tril", "triu"})


# Ops without a shape rule here whose MLX primitives (or the ops MLX builds them from) have
# one: a constant computed by them does not make a shapeless trace fail.
_SHAPED_IN_MLX = frozenset({"arange", "contiguous", "full", "linspace", "searchsorted", "tri"})


def _not_shapeless(prim):
    raise ValueError(f"[compile] The primitive {prim.name} cannot be compiled shapeless "
                     "(its output shape is not known for inputs of other shapes).")


def _check_shapeless_constants(constants):
    """As MLX, whose tape holds the unevaluated work the constants come from: a shapeless
    trace refuses a primitive without a shape rule there too (a random draw from a key the
    function does not capture, say)."""
    seen, stack = set(), [c for c in constants if c.prim is not None]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.prim.shape is None and n.prim is not SELECT and n.prim.name not in _COMPOSED \
                and n.prim.name not in _SHAPED_IN_MLX:
            _not_shapeless(n.prim)
        stack.extend(i for i in n.inputs if i.prim is not None)


def _broadcasting():
    from .ops import linalg, rules, shape
    return {rules.broadcast_shape, shape._broadcast_shape, shape._BROADCAST_LIKE.shape,
            linalg._matmul_shape}


def _broadcast_axes(shapes, out):
    """Per input shape, the axes (counted from the end) along which it broadcasts to
    `out`."""
    return tuple(tuple(i for i, (n, m) in enumerate(zip(s[::-1], out[::-1])) if n == 1 != m)
                 for s in shapes)


def _broadcasts(steps, shapes):
    """{step index: its inputs' broadcast axes} for the steps that broadcast, as traced."""
    shapes = shapes + [s.shape for s in steps]
    kinds = _broadcasting()
    return {k: _broadcast_axes([shapes[r] for r in s.refs], s.shape)
            for k, s in enumerate(steps) if s.prim.shape in kinds}


def _new_shape(step, ins):
    """A step's shape and params for inputs of other shapes (shapeless replay)."""
    if step.prim is SELECT:
        box = ins[0]
        return box.params["outs"][step.params["index"]][0], step.params
    if step.prim.shape is None:  # one of _COMPOSED, at the shapes it was traced at
        return step.shape, step.params
    return step.prim.shape(step.params or {}, *[i.shape for i in ins])


def _signature(tree, flat, key, shapeless, captured=False):
    """Append `tree`'s arrays to `flat` and its structure and constants to `key`; of a
    `captured` tree (compile's `inputs`) only the arrays, as in MLX: its other leaves (a
    Sequential's plain functions, a module's settings) are skipped."""
    if isinstance(tree, array):
        flat.append(tree)
        key.append(_array_key(tree, shapeless))
    elif tree is trees._key_state:
        flat.append(tree[0])
        key.append("key")
    elif isinstance(tree, (list, tuple)):
        key.append((type(tree), len(tree)))
        for t in tree:
            _signature(t, flat, key, shapeless, captured)
    elif isinstance(tree, dict):
        key.append((dict, tuple(tree)))
        for t in tree.values():
            _signature(t, flat, key, shapeless, captured)
    elif captured:
        return
    elif tree is None or isinstance(tree, (bool, int, float, str)):
        key.append((type(tree), tree))
    else:
        raise ValueError("[compile] Function arguments must be trees of arrays or constants "
                         "(floats, ints, strings, or None), but received type "
                         f"{type(tree).__module__}.{type(tree).__qualname__}.")


_ARRAYS = object()  # marks the keys of `_arrays_signature`, apart from `_signature`'s


def _arrays_signature(args, shapeless):
    """The key of positional arguments that are all arrays (None if one is not): what
    `_signature` keys of them, in a key of its own."""
    key = [_ARRAYS]
    for a in args:
        if type(a) is not array:
            return None
        key.append(_array_key(a, shapeless))
    return key


def _array_key(a, shapeless):
    """What a signature keys of an array argument: its shape (its rank if shapeless) and
    dtype."""
    return (len(a._shape) if shapeless else a._shape, a._dtype)


def _placeholder(a):
    p = Node(a._shape, a._dtype)
    p.tracer = TRACING.token()
    return wrap(p)


def _check_captured(outputs, inputs):
    """An unevaluated constant built from one of the call's own inputs: the trace would
    keep that input's old value, so it is an error (as in MLX)."""
    own = {id(x._node) for x in inputs}
    seen, stack = set(), [o for o in outputs]
    while stack:
        n = stack.pop()
        for i in n.inputs:
            if id(i) in seen:
                continue
            seen.add(id(i))
            if id(i) in own and not i.tracer:
                raise ValueError("[compile] Attempting to compile a function with "
                                 "uncaptured inputs is not allowed.")
            stack.append(i)


def _record(outputs, placeholders, default):
    """The tape of the nodes between `placeholders` and `outputs`: its constants (nodes
    that do not depend on the placeholders), its steps, and the outputs' values."""
    from .transforms import _tape
    tape = _tape(outputs, set(placeholders), gradients=False)
    on_tape = {id(n) for n in tape}
    slot = {id(p): i for i, p in enumerate(placeholders)}
    constants = []
    for n in [i for t in tape for i in t.inputs] + list(outputs):
        if id(n) not in slot and id(n) not in on_tape:
            slot[id(n)] = len(placeholders) + len(constants)
            constants.append(n)
    steps, merged = [], {}
    first = len(placeholders) + len(constants)
    for n in tape:
        refs = tuple(slot[id(i)] for i in n.inputs)
        stream = None if n.stream is default else n.stream
        key = (n.prim, refs, stream, n.shape, n.dtype,
               frozen(n.params or {}, by_identity=True))
        same = merged.get(key)
        if same is None:
            same = merged[key] = first + len(steps)
            steps.append(_Step(n.prim, refs, n.shape, n.dtype, n.params, stream))
        slot[id(n)] = same
    return constants, steps, [slot[id(o)] for o in outputs]


def _compute_constants(constants):
    """Compute the constants a trace left unevaluated, here: a replay in another thread
    could not run them on this thread's streams."""
    pending = [c for c in constants if c.data is None and c.error is None and
               c.stream is not None and usable_here(c.stream)]
    if pending:
        dispatch(pending, blocking=True)


class _Compiled:
    def __init__(self, fun, inputs, outputs, shapeless):
        self.fun, self.inputs, self.outputs, self.shapeless = fun, inputs, outputs, shapeless
        self.cache = {}

    def __call__(self, *args, **kwargs):
        if not _enabled[0]:
            return self.fun(*args, **kwargs)
        key = _arrays_signature(args, self.shapeless) \
            if not kwargs and self.inputs is None else None
        if key is not None:  # arrays only, the common call (an activation's)
            flat, n_args = list(args), len(args)
        else:
            flat, key = [], []
            _signature((args, kwargs), flat, key, self.shapeless)
            n_args = len(flat)
            if self.inputs is not None:
                _signature(self.inputs, flat, key, self.shapeless, captured=True)
        if TRACING.depth and TRACING.traces([x._node for x in flat]):
            # called by a transform (or an outer compile's trace): as in MLX, the
            # function itself runs, so the transform sees its graph (not compiled)
            return self.fun(*args, **kwargs)
        key = tuple(key)
        tape = self.cache.get(key)
        if tape is None:
            tape = self.cache[key] = self._trace(args, kwargs, flat, n_args, self.shapeless)
        try:
            outs = tape.replay(flat)
        except NewShapes:  # traced again for these very shapes
            key += tuple(a._shape for a in flat)
            tape = self.cache.get(key)
            if tape is None:
                tape = self.cache[key] = self._trace(args, kwargs, flat, n_args, False)
            outs = tape.replay(flat)
        if tape.n_state:
            trees.fill(self.outputs, outs[len(outs) - tape.n_state:])
            outs = outs[:len(outs) - tape.n_state]
        return trees.unflatten(tape.result, outs)

    def _trace(self, args, kwargs, flat, n_args, shapeless):
        outer, ruled = SHAPELESS.on, SHAPELESS.ruled
        SHAPELESS.on, SHAPELESS.ruled = outer or shapeless, False
        try:
            return self._record(args, kwargs, flat, n_args, shapeless)
        finally:
            SHAPELESS.on, SHAPELESS.ruled = outer, ruled or SHAPELESS.ruled

    def _record(self, args, kwargs, flat, n_args, shapeless):
        with TRACING:
            ph = [_placeholder(a) for a in flat]
            starts = [p._node for p in ph]
            a, k = trees.unflatten((args, kwargs), ph[:n_args])
            if self.inputs is not None:
                trees.fill(self.inputs, ph[n_args:])
            default, mark = resolve(None), made()
            try:
                result = self.fun(*a, **k)
                outs = trees.leaves(result)
                state = trees.leaves(self.outputs) if self.outputs is not None else []
            finally:
                if self.inputs is not None:
                    trees.restore(self.inputs, starts[n_args:], flat[n_args:])
            nodes = [o._node for o in outs + state]
            _check_captured(nodes, flat)
            constants, steps, out_refs = _record(nodes, starts, default)
        if shapeless:
            _check_shapeless_constants(constants)
        _compute_constants(constants)
        shapes = [p.shape for p in starts]
        # the result's structure, its arrays bare nodes: the traced graph (and the streams
        # it was built on) is not kept with the tape
        result = trees.unflatten(result, [wrap(Node(o._shape, o._dtype)) for o in outs])
        return Tape(len(flat), constants, steps, out_refs, result, len(state), shapeless,
                    shapes if SHAPELESS.ruled else None, shapes,
                    stand_ins({s.stream for s in steps if s.stream is not None}, mark))


def compile(fun, inputs=None, outputs=None, shapeless=False):
    """`fun`, traced once per input signature and replayed from then on.

    `inputs` and `outputs` are trees (lists, dicts, `mx.random.state`) the function
    reads and writes besides its arguments: they are captured on each call.

    >>> f = mx.compile(lambda x, y: mx.exp(x) * y)
    >>> f(mx.array(0.0), mx.array(3.0)).item()
    3.0
    """
    callable_arg(fun, "compile")
    compiled = _Compiled(fun, inputs, outputs, shapeless)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        return compiled(*args, **kwargs)
    try:
        call.__signature__ = inspect.signature(fun)
    except (TypeError, ValueError):
        pass
    return call


__all__ = ["compile", "disable_compile", "enable_compile"]
