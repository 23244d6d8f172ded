"""eval and async_eval: order the graph, place waits between streams, dispatch."""
from __future__ import annotations

import threading

from .array import array
from .scheduler import POOL, Batch, drain, quiet, record_error, release, run_node
from .stream import check_usable

_enqueue_lock = threading.Lock()  # makes one eval's enqueueing atomic across its streams
SMALL_WORK = 1 << 16  # elements: below this, a thread hand-off costs more than it saves


def _flatten(args, out):
    for a in args:
        if isinstance(a, array):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            _flatten(a, out)
        elif isinstance(a, dict):
            _flatten(a.values(), out)
        elif a is not None and not isinstance(a, (int, float, complex, str, bool)):
            raise TypeError(f"[eval] Expected arrays or trees of arrays, got {type(a).__name__}.")
    return out


def _order(outputs):
    """Unscheduled nodes reachable from `outputs`, producers before consumers."""
    order, seen = [], set()
    for root in outputs:
        if root._prim is None or root._seq or id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root._inputs))]
        while stack:
            node, it = stack[-1]
            for child in it:
                if child._prim is not None and not child._seq and id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter(child._inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _plan(order):
    """Group nodes by stream, number them, and find the waits between streams."""
    per_state = {}
    for node in order:
        per_state.setdefault(node._stream, []).append(node)
    for st in per_state:
        check_usable(st)
    return per_state


def _enqueue(per_state):
    """Number the nodes and build one Batch per stream."""
    batches = {}
    signals = {}
    _number(per_state)
    for st, nodes in per_state.items():
        waits = {}
        for i, node in enumerate(nodes):
            for inp in node._inputs:
                pst = inp._stream
                if pst is not st and pst is not None and inp._prim is not None:
                    waits.setdefault(i, []).append(inp)
                    if pst in per_state:
                        signals.setdefault(pst, set()).add(inp._seq)
        batches[st] = (nodes, waits)
    result = {}
    for st, (nodes, waits) in batches.items():
        marks = signals.get(st, ())
        positions = {i for i, n in enumerate(nodes) if n._seq in marks} if marks else set()
        result[st] = Batch(nodes, waits, positions)
    return result


def _claim_all(states):
    """Mark every state active if all are idle; else claim none."""
    claimed = []
    for st in states:
        with st.lock:
            if st.active or st.queue:
                ok = False
            else:
                st.active = ok = True
        if not ok:
            for c in claimed:
                with c.lock:
                    c.active = False
            return False
        claimed.append(st)
    return True


def _number(per_state):
    """Give each node its place in its stream's timeline; caller holds _enqueue_lock."""
    for st, nodes in per_state.items():
        seq = st.issued
        for node in nodes:
            seq += 1
            node._seq = seq
        st.issued = seq


def _run_inline(order, per_state):
    """Run the whole plan on this thread, in graph order (all its streams idle and claimed)."""
    with _enqueue_lock:
        _number(per_state)
    with quiet():
        _run_in_order(order, per_state)
    for st in per_state:
        st.advance(st.issued)
        release(st)


def _run_in_order(order, per_state):
    for node in order:
        st = node._stream
        for inp in node._inputs:
            if inp._prim is not None and inp._seq and inp._stream not in per_state:
                inp._stream.wait(inp._seq)
        run_node(node, st.backend)
        if node._error is not None:
            record_error(st, node._error)


def _has_pending_inputs(order, per_state):
    for node in order:
        for inp in node._inputs:
            if inp._prim is not None and inp._seq and inp._stream not in per_state:
                return True
    return False


def _dispatch(outputs, blocking):
    order = _order(outputs)
    if not order:
        return
    per_state = _plan(order)
    if blocking and len(per_state) == 1:
        work = None
        inline_ok = True
    else:
        work = {st: sum(n.size for n in nodes) for st, nodes in per_state.items()}
        big = sum(w >= SMALL_WORK for w in work.values())
        inline_ok = big <= int(blocking) and (blocking or not _has_pending_inputs(order, per_state))
    if inline_ok and _claim_all(per_state):
        _run_inline(order, per_state)
        return
    with _enqueue_lock:
        batches = _enqueue(per_state)
        to_start = []
        for st, batch in batches.items():
            with st.lock:
                st.queue.append(batch)
                if not st.active:
                    st.active = True
                    to_start.append(st)
    if blocking and to_start:
        mine = max(to_start, key=work.get) if work else to_start[0]
        for st in to_start:
            if st is not mine:
                POOL.submit(st)
        drain(mine, blocking=True)
    else:
        for st in to_start:
            POOL.submit(st)


def eval(*args) -> None:
    """Evaluate arrays (or nested lists, tuples and dicts of them) and wait for them.

    >>> a = mx.ones((2,)) + 1
    >>> mx.eval(a); a.tolist()
    [2.0, 2.0]
    """
    outputs = _flatten(args, [])
    _dispatch(outputs, blocking=True)
    for a in outputs:
        a._wait()
    for a in outputs:
        if a._error is not None:
            a._raise(report=True)


def async_eval(*args) -> None:
    """Schedule arrays for evaluation and return at once; a later read or eval waits."""
    _dispatch(_flatten(args, []), blocking=False)
