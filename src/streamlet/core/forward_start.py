"""The forward pass of `value_and_grad` and `grad`, started before the backward graph is
built: the loss's graph is queued as `async_eval` would queue it, so its streams compute
(a GPU at once, a large CPU pass on a worker) while the calling thread builds the
backward graph, instead of waiting idle for the eval that follows.

Only the outermost transform of a thread starts it (inside another transform the values
are traced, not computed), and on the CPU only when the differentiated inputs are large
enough for a worker to take the pass.  A node run while a transform traces keeps its
graph for the walk; once the pass has run and the walk is over, whichever comes last
lets those nodes go of their inputs, as an eval outside a transform does, so a loss
the caller keeps does not keep every activation of its step.
"""
from __future__ import annotations

import threading

from .eval import SMALL_WORK, dispatch

ENABLED = True  # off: the forward pass waits for the eval of the results, as in MLX


def start(loss, inputs):
    """Queue the graph of the `loss` array, given the differentiated `inputs`; returns
    the release to call once the backward graph is built, or None if nothing started.
    An error (a stream of another thread) is left to the eval that reads the results,
    which meets it again: nothing was queued."""
    node = loss._node
    st = node.stream
    if not ENABLED or node.prim is None or st is None or \
            not (st.gpu or sum(a.size for a in inputs) >= SMALL_WORK):
        return None
    try:
        dispatch([node], blocking=False)
    except Exception:  # noqa: BLE001 (raised again by the eval of the results)
        return None
    release = _Release(node)
    if not st.when_done(node.seq, release):
        release()
    return release


class _Release:
    """Called twice, when the pass has run and when the walk is over; the second call
    strips the graph."""

    __slots__ = ("node", "calls", "lock")

    def __init__(self, node):
        self.node = node
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.calls += 1
            if self.calls < 2:
                return
        _strip(self.node)
        self.node = None


def _strip(node):
    """Let the nodes of `node`'s graph that have run go of their inputs."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n.prim is None or id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(n.inputs)
        if n.data is not None or n.error is not None:
            n.prim = None
            n.inputs = ()
            n.params = None
