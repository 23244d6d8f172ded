"""The graph: primitives (what an op computes and its transform rules) and nodes."""
from __future__ import annotations

import importlib
import itertools
import threading


class Primitive:
    """What a node computes: a name, a kernel written against an array module `xp`, and
    the rules the function transforms apply to it.

    `kernel(xp, *inputs, **params)` serves NumPy and CuPy alike; `gpu`, a GpuKernel,
    overrides it on the GPU where a hand-written kernel pays or CuPy differs.  The rules
    are built from ops (they see arrays, not buffers), and run on the forward node's
    stream:

    - `vjp(cotangent, output, *primals, **params)`: one cotangent per primal (None for
      an input with no gradient, e.g. an integer index);
    - `jvp(tangents, output, *primals, **params)`: the output's tangent; `tangents`
      holds one entry per primal, None where that input's tangent is zero;
    - `vmap(axes, output, *inputs, **params)`: `(output, out_axis)` for inputs batched
      along `axes` (None for an input without a batch axis); `output` is the traced,
      unbatched node (for its shape and dtype).

    A missing rule makes the transform raise an error naming the primitive.

    A `multi` primitive computes several results (`build.multi`): its node holds them
    all and one selection node per result reaches the user.  Its rules see lists, one
    entry per result: `vjp(cotangents, outputs, *primals, **params)` (a cotangent is
    None where no gradient reaches that result), `jvp` returns a list of tangents, and
    `vmap` returns `(outputs, out_axes)`.

    `shape(params, *input_shapes)` gives `(output shape, params)` for inputs of other
    shapes (what a `shapeless` compiled function replays with); it raises ValueError
    when the op cannot take them.

    `bounds(*inputs, **params)`, for an op indexing with array inputs: its (index array,
    size of the axis it indexes) pairs.  NumPy raises for an index out of bounds; a GPU
    backend checks them on the device (`backend.cuda_checks`).

    `cotangents(n, c, wanted, cot, accumulate)`, the vjp walk's short way for an op's
    common case (elementwise: real floats of one dtype on a CPU stream; matmul: real
    matrices): the cotangents of node `n`'s inputs in `wanted`, what its `vjp` rule gives,
    built straight from the nodes (no rule, no handles) and added to `cot` (input node ->
    cotangent); False where that case does not hold, and the walk applies the rule.

    `derivs`, for an elementwise op whose derivatives are each a fused node, 1 or -1: its
    derivative columns, one per input (`ops.rules.Derivative`), from which its
    `cotangents` builds them (`rules.derivative_cotangents`).

    `donate`, for an elementwise op without params: the NumPy ufunc computing it, which
    the CPU backend calls with `out=` an input's buffer that nothing else can read again
    (`core.donation`).

    `cform`, for an elementwise op: its C expression (`ops.cforms.CForm`), from which a
    GPU backend generates the fused kernels of chains of such ops.
    """

    __slots__ = ("name", "kernel", "gpu", "vjp", "jvp", "vmap", "multi", "shape", "bounds",
                 "donate", "cotangents", "derivs", "cform")

    def __init__(self, name, kernel, gpu=None, vjp=None, jvp=None, vmap=None, multi=False,
                 shape=None, bounds=None, donate=None, cotangents=None, derivs=None,
                 cform=None):
        self.name, self.kernel, self.gpu = name, kernel, gpu
        self.vjp, self.jvp, self.vmap, self.multi = vjp, jvp, vmap, multi
        self.shape, self.bounds, self.donate = shape, bounds, donate
        self.cotangents, self.derivs, self.cform = cotangents, derivs, cform

    def __repr__(self):
        return f"Primitive({self.name})"


class GpuKernel:
    """A primitive's kernel on the GPU: `fn(xp, *inputs, **params)`, given as a function or
    as "module:function", imported when it first runs (CuPy code loads on a GPU only).

    `bfloat16` says how it sees bfloat16, which CuPy lacks: "float32" (inputs and dtype
    parameters as float32, the result rounded back), "own" (float32 inputs but the node's
    own dtype parameters: it rounds as the CPU does, and returns float32 holding bfloat16
    values), "bits" (inputs and result as their uint16 bits: a reinterpretation) or
    "native" (bfloat16 inputs as the backend holds them, `cuda.BF16`, the node's own dtype
    parameters, a bfloat16 result returned as its bits: the kernel computes in bfloat16).
    `host_scalars`: NumPy scalar inputs arrive as they are, not copied to the device (the
    kernel passes them as launch parameters).  `lazy_first`: a first input that is a fused
    elementwise op of the same stream not launched yet arrives as it is (`cuda.Lazy`), for
    the kernel to compute it in its own launch or to have it computed (`cuda.value`).
    """

    __slots__ = ("_fn", "path", "bfloat16", "host_scalars", "lazy_first")

    def __init__(self, fn, bfloat16="float32", host_scalars=False, lazy_first=False):
        self._fn, self.path = (None, fn) if isinstance(fn, str) else (fn, None)
        self.bfloat16, self.host_scalars, self.lazy_first = bfloat16, host_scalars, lazy_first

    def __call__(self, xp, *args, **params):
        fn = self._fn
        if fn is None:
            module, name = self.path.split(":")
            fn = self._fn = getattr(importlib.import_module(module), name)
        return fn(xp, *args, **params)


_births = itertools.count(1)  # build order of nodes: a topological order of the graph


class Node:
    """One value of the graph: what computes it (`prim` on `inputs`, with `params`, on
    `stream`), then its `data` or its `error`.

    A node never changes meaning.  Leaves (constants, `mx.array` values) have no `prim`;
    so has a computed node once it has run, unless a transform traces it (`tracer`: its
    mark, a `_Token` or `_Tokens`): then it keeps its `prim` and `inputs` for the
    transform to walk while that transform runs (`keeps_graph`).  `seq` is its number on
    its stream's timeline (0: not scheduled, -1: being ordered by eval); `birth` orders
    nodes as they were built, producers first.
    """

    __slots__ = ("shape", "dtype", "prim", "inputs", "params", "stream", "seq", "birth",
                 "data", "error", "tracer", "checks", "__weakref__")

    def __init__(self, shape, dtype, prim=None, inputs=(), params=None, stream=None,
                 data=None):
        self.shape = shape
        self.dtype = dtype
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.stream = stream
        self.seq = 0
        self.birth = next(_births) if prim is not None else 0
        self.data = data
        self.error = None
        self.tracer = None
        self.checks = None  # a GPU backend's index checks not read yet (`cuda_checks`)

    def __repr__(self):
        what = self.prim.name if self.prim is not None else "leaf"
        return f"Node({what}, {self.shape}, {self.dtype})"


class _Here(threading.local):
    depth = 0
    token = None  # the outermost transform's, while this thread is inside one


class _Token:
    """What a tracer node is marked with (`Node.tracer`): the outermost transform of the
    thread that built it, `live` while that transform runs.  Until then the node keeps
    its graph once it has run, whichever thread runs it; another thread's transform does
    not keep it."""

    __slots__ = ("live",)

    def __init__(self):
        self.live = True


class _Tokens:
    """The mark of a node built from tracers of other threads' live transforms (a thread
    working for a transform, in one of its own or none): live while any of `parts` (plain
    `_Token`s) is, as each of those transforms may walk it."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = parts

    @property
    def live(self):
        for p in self.parts:
            if p.live:
                return True
        return False


def keeps_graph(node) -> bool:
    """Whether `node`, run, keeps its graph: a transform that may walk it still runs."""
    t = node.tracer
    return t is not None and t.live


class Tracing:
    """How many transforms are tracing a function now, in any thread.

    While one is, nodes built from tracer inputs are tracers too (`mark`) and, while
    their transform runs, keep their graph once they have run, so the transform can walk
    it after an `eval` inside the traced function.  `with TRACING:` counts one transform
    in.  `here()`: whether the calling thread is inside one (a transform's results stay
    tracers, and another thread's transform must not make them count as inside this
    thread's).  `thread.token` is the calling thread's mark (`token()`), read directly
    where nodes are built: a node whose tracer inputs all carry it carries it too.
    """

    __slots__ = ("depth", "_lock", "thread")

    def __init__(self):
        self.depth = 0
        self._lock = threading.Lock()  # guards depth against two threads' transforms
        self.thread = _Here()

    def __enter__(self):
        with self._lock:
            self.depth += 1
        here = self.thread
        if not here.depth:
            here.token = _Token()
        here.depth += 1
        return self

    def __exit__(self, *exc):
        here = self.thread
        here.depth -= 1
        if not here.depth:
            here.token.live = False
            here.token = None
        with self._lock:
            self.depth -= 1

    def here(self) -> bool:
        return self.depth > 0 and self.thread.depth > 0

    def nesting(self) -> int:
        """How many transforms the calling thread is inside."""
        return self.thread.depth

    def token(self):
        """The mark of the tracer nodes this thread builds now (None outside a transform)."""
        return self.thread.token

    def traces(self, nodes):
        """Whether a transform traces work on `nodes` now: one is a tracer, and this thread
        is inside a transform or that tracer's is live (this thread works for another's)."""
        if not self.depth:
            return False
        here = self.thread.depth > 0
        for n in nodes:
            t = n.tracer
            if t and (here or t.live):
                return True
        return False

    def mark(self, ins):
        """The mark of a node built now from the nodes `ins`, one of them a tracer: this
        thread's token, with the live marks of inputs another thread's transform traces
        (None where neither is: tracers of transforms that have ended, in no transform)."""
        own = self.thread.token
        parts = None
        for i in ins:
            t = i.tracer
            if not t or t is own:
                continue
            for p in (t.parts if type(t) is _Tokens else (t,)):
                if p is not own and p.live and (parts is None or p not in parts):
                    parts = [p] if parts is None else parts + [p]
        if parts is None:
            return own
        if own is None and len(parts) == 1:
            return parts[0]
        return _Tokens(tuple(parts) if own is None else (own, *parts))


TRACING = Tracing()


class _Shapeless(threading.local):
    """Whether this thread traces a shapeless compiled function (`on`): rules then build
    what depends on an input's shape as a node computing it when run (the counts of
    `ops.reduction`'s rules), not as a constant of the trace.  `ruled`: whether a
    vjp or jvp walk applied rules during that trace (they decide by the traced shapes
    which axes were broadcast, so a replay must broadcast along the same)."""

    on = False
    ruled = False


SHAPELESS = _Shapeless()


class NewShapes(Exception):
    """A shapeless replay at shapes the trace's rules cannot follow (an axis it broadcast
    along, or a bound it computed from a shape, is no longer so): the compiled function
    is traced again at these shapes."""
