"""eval and async_eval: order the graph, place waits between streams, dispatch."""
from __future__ import annotations

import math
import operator
import threading

from . import auto_graph
from .array import array, placeholder_error, raise_error
from .graph import TRACING
from .scheduler import POOL, Batch, cancel_nodes, drain, run_batch, run_node
from .stream import check_usable

# one eval orders, numbers and queues its nodes at once: another eval never meets a node
# half-ordered (marked but not numbered), which it would neither run nor wait for
_enqueue_lock = threading.RLock()  # reentrant: a finalizer run by the GC may eval
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
        # anything else is no array to evaluate: ignored, as MLX ignores it
    return out


def _order(outputs):
    """Unscheduled nodes reachable from `outputs`, producers first, and whether any of
    them reads a node that an earlier eval scheduled and that has not run yet.

    Nodes are numbered as they are built and an input is always built before
    its consumer, so sorting by that number is a topological order.  A found
    node is marked with `_seq = -1` until `_enqueue` gives it its number; when this
    step is interrupted (Ctrl-C in a large graph), the marks are taken off again, or
    the marked nodes would look scheduled and never run.
    """
    found = []
    stack = []
    pending = placeholder = False
    try:
        for o in outputs:
            if o.prim is not None and not o.seq:
                o.seq = -1
                stack.append(o)
            elif o.prim is None and o.data is None and o.error is None:
                placeholder = True  # evaluated itself
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
            raise placeholder_error()
        if len(found) > 1:
            found.sort(key=_birth)
    except BaseException:
        _shielded(_unmark, found)
        _shielded(_unmark, stack)
        raise
    return found, pending


def _unmark(nodes):
    for n in nodes:
        if n.seq < 0:
            n.seq = 0


def _shielded(cleanup, *args):
    """Run `cleanup` to its end even when Ctrl-C comes again meanwhile (a user pressing it
    twice): each cleanup here can be run again from the start.  The later interrupts are
    dropped: the first one is on its way up."""
    while True:
        try:
            return cleanup(*args)
        except KeyboardInterrupt:
            continue


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


def _enqueue(per_state, pending, batches):
    """Number the nodes, make one Batch per stream (into `batches`) and queue it.

    One stream's nodes wait only for producers of earlier evals, and only if `pending`.
    Ctrl-C's clean-up (`_abandon`) reads what `batches` holds, whatever step was reached.
    """
    producers = {}
    for st, nodes in per_state.items():
        waits = _waits(st, nodes, producers) if pending or len(per_state) > 1 else {}
        batches[st] = Batch(nodes, waits, None, 0)
    for st, marks in producers.items():
        b = batches.get(st)
        if b is not None:
            b.signals = {i for i, n in enumerate(b.nodes) if id(n) in marks}
    try:  # under `_enqueue_lock`, the only place batches are queued
        for st, b in batches.items():  # every node numbered first: a batch queued below
            with st.lock:              # can start at once, and its waits read them
                seq = st.issued
                for n in b.nodes:
                    seq += 1
                    n.seq = seq
                b.last = st.issued = seq
        for st, b in batches.items():
            _queue(st, b)
    except BaseException:  # Ctrl-C: a numbered batch is queued all the same (cancelled
        for st, b in batches.items():  # by the clean-up), so its stream has no gap
            if b.last and not b.queued:
                _shielded(_queue, st, b)
        raise


def _queue(st, b):
    with st.lock:
        if b.queued:  # run again by `_shielded` after Ctrl-C came right after the append
            return
        b.starts = not st.active  # idle until now: this eval must run the stream
        b.queued = st.active = True  # then the hand-off: no call in between
        st.queue.append(b)


def _started(batches):
    return [st for st, b in batches.items() if b.starts]


def _why(exc):
    return f"its evaluation was interrupted by {type(exc).__name__}"


def _abandon(batches, per_state, handed, ran_here, exc):
    """The eval's thread was interrupted (Ctrl-C) at any step of `dispatch`.

    Nodes not numbered yet are unscheduled again (a later eval runs them); every queued
    batch stops at its next node, and those that this thread was to run (not `handed`
    to the pool) fail their remaining nodes here, so their streams go on with the work
    queued after them.  Each step can be run again from the start (`_shielded`).
    """
    why = _why(exc)
    if per_state is not None:
        for st, nodes in per_state.items():
            b = batches.get(st)
            if b is None or not b.queued:
                for n in nodes:
                    n.seq = 0
    for b in batches.values():
        if b.queued:
            b.cancel = why
    if ran_here is not None:  # `_run_here` ran the batches from this list
        cancel_nodes(ran_here, 0, why)
    for st, b in batches.items():
        if b.starts and st not in handed and not b.done:
            if b.nodes is not None:
                cancel_nodes(b.nodes, b.pos, why)
            st.finish(b)
    POOL.wake()  # the hand-offs done before the interrupt may not have woken a worker


def _run_here(order, per_state, wait):
    """Run every batch of this eval on the calling thread, in graph order; a GPU stream's
    work is waited for if `wait` and the eval has one stream, else only launched (its
    reads and `eval` wait for it: the backend's `settle`)."""
    if len(per_state) == 1:
        st = order[0].stream
        batch = st.queue[0]
        run_batch(st, batch, True, wait)
        st.finish(batch)
        return
    batches = [st.queue[0] for st in per_state]
    for batch in batches:
        batch.nodes = None  # `order` alone holds the nodes, and lets each go once it has run
    for i, node in enumerate(order):
        for inp in node.inputs:
            if inp.data is None and inp.error is None and inp.prim is not None:
                inp.stream.wait(inp.seq)  # a producer of an earlier eval, still running
        inp = None  # no hold on the last input while it runs (see core.donation)
        run_node(node, node.stream)
        order[i] = None
    del node
    for st, batch in zip(per_state, batches):
        st.backend.run_deferred(st, False)
        st.finish(batch)


def dispatch(outputs, blocking):
    """Order, queue and run (or hand to the pool) the work `outputs` need.

    An exception that is not an Exception (Ctrl-C's KeyboardInterrupt) can arrive at
    any step: the nodes not queued yet become unscheduled again, the rest of the eval
    is cancelled (`_abandon`): its arrays not computed yet raise a clear error when
    read, and its streams stay usable.
    """
    batches, handed, ran_here, per_state = {}, [], None, None  # what the clean-up reads
    try:
        with _enqueue_lock:
            order, pending = _order(outputs)
            if not order:
                return
            try:
                if not pending and not TRACING.depth:
                    order = auto_graph.replace(order, outputs, order[0].stream)
                per_state = _group(order)
                if len(per_state) == 1 and blocking:
                    work = here = None
                else:
                    work = {st: _work(st, nodes) for st, nodes in per_state.items()}
                    here = _runs_here(work, blocking, pending)
            except BaseException:
                _shielded(_unmark, order)
                raise
            _enqueue(per_state, pending, batches)
        started = _started(batches)
        if len(started) == len(per_state) and (work is None or here):
            ran_here = order
            _run_here(order, per_state, blocking)
            return
        order = per_state = None  # the batches hold the nodes now, and drop each once run
        mine = None
        if blocking and started:
            mine = max(started, key=work.get) if work else started[0]
        handed = [st for st in started if st is not mine]
        POOL.jobs.extend(handed)  # right after the store: see the scheduler's note on Ctrl-C
        POOL.wake()
        if mine is not None:
            drain(mine, blocking=True)
    except BaseException as exc:
        _shielded(_abandon, batches, per_state, handed, ran_here, exc)
        raise


def _work(st, nodes):
    """Elements a stream's batch computes on this host; GPU launches are asynchronous, so
    one thread issues every GPU stream's work and the device still overlaps them."""
    return 0 if st.stream.device.type.value else sum(math.prod(n.shape) for n in nodes)


def _runs_here(work, blocking, pending):
    """Small work, or one large stream the caller would only wait for anyway.

    async_eval runs small work here (GPU work is launches, not waited for) only if
    nothing it needs is still running elsewhere, and not CPU work beside GPU work (a CPU
    op reading a GPU result waits for the device).
    """
    big = sum(w >= SMALL_WORK for w in work.values())
    if blocking:
        return big <= 1
    gpu = sum(1 for st in work if st.gpu)
    return not big and not pending and gpu in (0, len(work))


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
        st = n.stream
        if st is not None and st.gpu:
            st.backend.settle(n)  # its index checks, if not read yet
        if n.error is not None:
            raise_error(n)


def async_eval(*args) -> None:
    """Schedule arrays for evaluation and return at once; a later read or eval waits.

    The work is scheduled as `eval` schedules it; small work may run before
    the call returns, and GPU work is launched by the calling thread (as MLX
    does), the call returning without waiting for the device. Reading an
    array (`item`, `tolist`, `np.array`), an `eval` of it or `synchronize` of
    its stream waits for it.

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
    if TRACING.here() and any(n.tracer for n in nodes):
        raise ValueError("[async_eval] Not allowed inside a graph transformation.")
    dispatch(nodes, blocking=False)
