"""The communication order of a process: every communication op runs after the one built
before it, whatever the streams, threads and groups.

MPI and NCCL match the collectives of a communicator by the order each rank issues them,
and a rank that issues two at once from two threads, or in another order than its peers,
deadlocks or exchanges the wrong buffers.  Streams run at the same time, so the order in
which two streams reach their collectives is timing, not program.  We make it program:
each communication op takes the one built before it in this process (any group) as an
extra input, so the scheduler runs it after that one, through the same waits as any
other input from another stream.  Ranks that build their communication in the same order
(as SPMD programs do) therefore issue it in the same order, and a process never has two
communication calls in flight.  Compute on other streams is not held back: only
communication waits for communication.

What it costs: the last communication op's output stays referenced until the next one
has run.  A communication op that fails, or whose input failed (the scheduler then skips
its kernel), fails every later one of the process with that error: this rank is out of
step with its peers from there on, and saying so beats exchanging the wrong buffers.
Ops built from several threads of one process are ordered by which thread built first;
a program that wants the same order on every rank builds them from one thread.
"""
from __future__ import annotations

import threading

from ..ops import build as b

_lock = threading.Lock()  # guards _last
_last = None  # (array, StreamState) of the communication op built last in this process


def _token_kernel(xp, x):
    return xp.empty((0,), dtype=xp.bool_)


# A stand-in for an output on another device: what comes after it needs its place in the
# order, not a copy of its data.
_TOKEN = b.make("communication_order", _token_kernel)


def _device(state):
    return state.stream.device


def build(prim, inputs, shape, dtype, params, state, after=None):
    """A communication node that runs after every communication op built before it (or
    after the nodes `after`, when a transform rebuilds one in place of a traced one)."""
    global _last
    with _lock:
        if after is None:
            after = () if _last is None else (_last,)
        ins = tuple(inputs) + tuple(_on_device(a, state) for a in after)
        out = b.node(prim, ins, shape, dtype, params, state)
        _last = (out, state)
    return out


def _on_device(prev, state):
    """The order input for a node on `state`: `prev`'s output, or where `prev` ran on
    another device, a token after it on its own stream (so no data is copied)."""
    if isinstance(prev, tuple):
        prev, pstate = prev
    else:
        pstate = getattr(prev._node, "stream", None)
    if pstate is None or _device(pstate) == _device(state):
        return prev
    return b.node(_TOKEN, (prev,), (0,), b.dt.bool_, b.NO_PARAMS, pstate)


def settle():
    """Wait until the communication built so far has run (before an eager collective call
    such as Group.split, which must not overlap a lazy one in flight)."""
    from ..eval import eval as _eval
    with _lock:
        last = _last
    if last is not None:
        try:
            _eval(last[0])
        except RuntimeError:  # reported where it is read; the order is kept all the same
            pass
