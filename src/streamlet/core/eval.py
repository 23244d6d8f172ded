"""eval and async_eval: order the graph, place waits between streams, dispatch."""
from __future__ import annotations

import math
import operator
import threading

from .array import array, raise_error
from .graph import TRACING
from .scheduler import POOL, Batch, drain, run_batch, run_node
from .stream import check_usable

_enqueue_lock = threading.Lock()  # one eval's batches enter all their streams' queues at once
SMALL_WORK = 1 << 16  # elements: below this a thread hand-off costs more than it saves
_birth = operator.attrgetter("birth")


def _flatten(args, out):
    """The nodes of the arrays in `args` (arrays, or nested lists, tuples and dicts)."""
    for a in args:
        if isinstance(a, array):
            out.append(a._node)
        elif isinstance(a, (list, tuple)):
            _flatten(a, out)
        elif isinstance(a, dict):
            _flatten(a.values(), out)
        elif a is not None and not isinstance(a, (int, float, complex, str, bool)):
            raise TypeError(f"[eval] Expected arrays or trees of arrays, got {type(a).__name__}.")
    return out


def _order(outputs):
    """Unscheduled nodes reachable from `outputs`, producers first, and whether any of
    them reads a node that an earlier eval scheduled and that has not run yet.

    Nodes are numbered as they are built and an input is always built before
    its consumer, so sorting by that number is a topological order.  A found
    node is marked with `_seq = -1` until `_enqueue` gives it its number.
    """
    found = []
    stack = []
    pending = placeholder = False
    for o in outputs:
        if o.prim is not None and not o.seq:
            o.seq = -1
            stack.append(o)
    while stack:
        n = stack.pop()
        found.append(n)
        for c in n.inputs:
            if c.prim is not None:
                if not c.seq:
                    c.seq = -1
                    stack.append(c)
                elif c.seq > 0:
                    pending = True
            elif c.data is None and c.error is None:
                placeholder = True  # an input of a function being compiled or vmapped
    if placeholder:
        for n in found:
            n.seq = 0
        raise ValueError("[eval] Attempting to eval an array during function "
                         "transformations like compile or vmap is not allowed.")
    if len(found) > 1:
        found.sort(key=_birth)
    return found, pending


def _interleave(order):
    """`order` by how many stream changes lead to each node, then by birth.

    Two chains that share a stream but otherwise run on streams of their own then
    alternate on the shared one, instead of the second queueing behind all of the
    first; work that stays on one stream keeps its build order (and its memory use).
    """
    stage = {}
    get = stage.get
    for n in order:
        d = 0
        st = n.stream
        for c in n.inputs:
            dc = get(id(c))
            if dc is not None:
                if c.stream is not st:
                    dc += 1
                if dc > d:
                    d = dc
        stage[id(n)] = d
    order.sort(key=lambda n: stage[id(n)])
    return order


def _group(order):
    """Nodes by stream, in graph order; checks each stream may be used from this thread."""
    first = order[0].stream
    per_state = {first: order}
    for n in order:
        if n.stream is not first:
            per_state = {}
            for m in _interleave(order):
                per_state.setdefault(m.stream, []).append(m)
            break
    for st in per_state:
        check_usable(st)
    return per_state


def _waits(st, nodes, numbers):
    """Producers on other streams that each node must wait for, by position."""
    waits = {}
    for i, node in enumerate(nodes):
        for inp in node.inputs:
            pst = inp.stream
            if pst is not st and pst is not None and inp.prim is not None:
                waits.setdefault(i, []).append(inp)
                numbers.setdefault(pst, set()).add(id(inp))
    return waits


def _enqueue(per_state, pending):
    """Number the nodes, make one Batch per stream and queue it; return the streams started.

    One stream's nodes wait only for producers of earlier evals, and only if `pending`.
    """
    producers = {}
    plans = [(st, nodes, _waits(st, nodes, producers) if pending or len(per_state) > 1 else {})
             for st, nodes in per_state.items()]
    started = []
    with _enqueue_lock:
        for st, nodes, waits in plans:
            marks = producers.get(st)
            signals = {i for i, n in enumerate(nodes) if id(n) in marks} if marks else None
            with st.lock:
                seq = st.issued
                for n in nodes:
                    seq += 1
                    n.seq = seq
                st.issued = seq
                st.queue.append(Batch(nodes, waits, signals, seq))
                if not st.active:
                    st.active = True
                    started.append(st)
    return started


def _run_here(order, per_state):
    """Run every batch of this eval on the calling thread, in graph order."""
    if len(per_state) == 1:
        st = order[0].stream
        batch = st.queue[0]
        run_batch(st, batch, True)
        st.finish(batch)
        return
    batches = [st.queue[0] for st in per_state]
    for batch in batches:
        batch.nodes = None  # `order` alone holds the nodes, and lets each go once it has run
    for i, node in enumerate(order):
        order[i] = None
        for inp in node.inputs:
            if inp.data is None and inp.error is None and inp.prim is not None:
                inp.stream.wait(inp.seq)  # a producer of an earlier eval, still running
        run_node(node, node.stream)
    del node
    for st, batch in zip(per_state, batches):
        st.finish(batch)


def dispatch(outputs, blocking):
    order, pending = _order(outputs)
    if not order:
        return
    try:
        per_state = _group(order)
    except BaseException:
        for n in order:
            n.seq = 0
        raise
    if len(per_state) == 1 and blocking:
        work = None
    else:
        work = {st: _work(st, nodes) for st, nodes in per_state.items()}
        here = _runs_here(work, blocking, pending)
    started = _enqueue(per_state, pending)
    if len(started) == len(per_state):
        if work is None or here:
            _run_here(order, per_state)
            return
    order = per_state = None  # the batches hold the nodes now, and drop each once it has run
    if blocking and started:
        mine = max(started, key=work.get) if work else started[0]
        for st in started:
            if st is not mine:
                POOL.submit(st)
        drain(mine, blocking=True)
    else:
        for st in started:
            POOL.submit(st)


def _work(st, nodes):
    """Elements a stream's batch computes on this host; GPU launches are asynchronous, so
    one thread issues every GPU stream's work and the device still overlaps them."""
    return 0 if st.stream.device.type.value else sum(math.prod(n.shape) for n in nodes)


def _runs_here(work, blocking, pending):
    """Small work, or one large stream the caller would only wait for anyway.

    async_eval runs small work here only if nothing it needs is still running elsewhere.
    """
    big = sum(w >= SMALL_WORK for w in work.values())
    if blocking:
        return big <= 1
    if big:
        return False
    return not pending


def eval(*args) -> None:
    """Evaluate arrays (or nested lists, tuples and dicts of them) and wait for them.

    Each pending operation the arrays depend on runs on the stream it was built
    for, in an order that respects dependencies; where an input comes from
    another stream, the consumer's stream waits for it through an event, so
    independent streams run at the same time. Values that are not arrays are
    ignored.

    Args:
        *args: arrays, or trees (lists, tuples, dicts) of them.

    Raises:
        RuntimeError: if an operation an array depends on failed while running
            (its message; also raised by every later read of the failed
            arrays), or if the work would run on a `new_stream` stream of
            another thread, or on one destroyed by `clear_streams`.

    >>> a = mx.ones((2,)) + 1
    >>> mx.eval(a); a.tolist()
    [2.0, 2.0]
    """
    outputs = [args[0]._node] if len(args) == 1 and type(args[0]) is array else \
        _flatten(args, [])
    dispatch(outputs, blocking=True)
    for n in outputs:
        if n.prim is not None:
            n.stream.wait(n.seq)
        if n.error is not None:
            raise_error(n)


def async_eval(*args) -> None:
    """Schedule arrays for evaluation and return at once; a later read or eval waits.

    The work is scheduled as `eval` schedules it; small work may run before
    the call returns. Reading an array (`item`, `tolist`, `np.array`), an
    `eval` of it or `synchronize` of its stream waits for it.

    Args:
        *args: arrays, or trees (lists, tuples, dicts) of them.

    Raises:
        ValueError: inside a function transformation (as in MLX): the transform
            needs the graph it is building, and an asynchronous run would race
            with it.
        RuntimeError: if the work would run on a `new_stream` stream of
            another thread, or on one destroyed by `clear_streams`. A failure
            while running is raised by the later read, `eval` or `synchronize`.

    >>> a = mx.exp(mx.zeros((3,)))
    >>> mx.async_eval(a)
    >>> a.tolist()
    [1.0, 1.0, 1.0]
    """
    nodes = _flatten(args, [])
    if TRACING.depth and any(n.tracer for n in nodes):
        raise ValueError("[async_eval] Not allowed inside a graph transformation.")
    dispatch(nodes, blocking=False)
