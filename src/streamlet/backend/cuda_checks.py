"""Index bounds checked on the GPU, without a host round trip while the stream runs.

On the CPU an out-of-bounds index makes NumPy raise, which fails that op's node.  CuPy
wraps such indices instead, so an op whose primitive has a `bounds` rule gets a check:
a 0-d device flag, computed on its stream after the kernel, set if any index was out of
bounds.  Nothing is read then.  The node, and every GPU node computed from it before the
flag is read, is *unchecked*: its `checks` are the flags it waits for.  The flags are
read once the stream has run that far anyway: at the end of an eval (the flush, which
waits for the device), after an `async_eval`'s flush those whose kernels have run, and
when an unchecked array is read, waited for by `eval`, or handed to the CPU.  A set flag
fails the node and the nodes computed from it with one error, as a failed op does: each
when it is read or used, and the stream's synchronize reports it.
"""
from __future__ import annotations

import threading

import cupy as cp

from ..core.scheduler import StreamError, report


class Check:
    """One op's bounds: its flag, an event after it, and (once read) whether it failed."""

    __slots__ = ("flag", "ready", "op", "sizes", "error")

    def __init__(self, flag, stream, op, sizes):
        self.flag, self.op, self.sizes = flag, op, sizes
        self.ready = cp.cuda.Event(block=False, disable_timing=True)
        self.ready.record(stream)
        self.error = None


# Reading a flag and failing a node with it happen one at a time (two threads may read
# the same array); waiting for a flag is done outside.
_lock = threading.Lock()


def _any_outside(cast):
    return cp.ReductionKernel("T x, int64 n", "bool y", cast, "a || b", "y = a", "false",
                              "streamlet_out_of_bounds")


_SIGNED = _any_outside("((long long)x < -n) || ((long long)x >= n)")
_UNSIGNED = _any_outside("(unsigned long long)x >= (unsigned long long)n")


def inherit(node, h):
    """Before `node`'s kernel: an input that failed its check meanwhile fails `node`; an
    unchecked input makes `node` unchecked too, until that input's flag is read.

    `node` takes its inputs' flags not read yet, each once: a flag read meanwhile has
    failed (that error fails `node`) or passed (nothing to wait for).  Without that, each
    diamond of the graph (a residual `x + f(x)`) doubled the copies of a flag: a token of
    a small transformer carried hundreds of thousands, and reading them took 0.4 s.  A
    node whose unchecked inputs share one tuple of flags (a chain after an embedding
    lookup: every node of a decode step) takes that tuple as it is."""
    # No lock: a reader fails a node or a check (`settle`, `_read`) by setting its error
    # before it clears its checks or flag, so each is read here before its error.
    found = None
    merged = False
    for inp in node.inputs:
        cs = inp.checks
        if inp.error is not None:  # read after the scheduler looked at the input
            raise inp.error
        if cs is not None and cs is not found and cs != found:  # (equal: one flag's tuples)
            merged = found is not None
            found = cs if found is None else found + cs
    if found is None:
        return
    fresh = True
    for c in found:
        read = c.flag is None
        if c.error is not None:
            raise c.error
        fresh = fresh and not read
    if merged or not fresh:  # (a flag read meanwhile keeps its check: its error may be new)
        found = tuple({id(c): c for c in found
                       if c.flag is not None or c.error is not None}.values()) or None
    node.checks = found


class Checked:
    """What a GPU kernel that checks its own indices returns: its result and its flag."""

    __slots__ = ("value", "flag")

    def __init__(self, value, flag):
        self.value, self.flag = value, flag


def watch(node, pairs, h, flag=None):
    """After `node`'s kernel (call with its device and stream current): flag whether any
    index of `pairs` ((index array, axis size) each) is outside [-size, size), unless the
    kernel gave its own `flag`."""
    bad = flag
    for idx, size in pairs if flag is None else ():
        idx = cp.asarray(idx)
        if idx.size == 0:
            continue
        out = (_UNSIGNED if idx.dtype.kind == "u" else _SIGNED)(idx, size)
        bad = out if bad is None else bad | out
    if bad is not None:
        check = Check(bad, h.stream, node.prim.name, tuple(size for _, size in pairs))
        node.checks = (node.checks or ()) + (check,)
        with h.lock:
            h.checks.append(check)


def settle(nodes):
    """Read the flags of those of `nodes` that are unchecked and fail the ones whose check
    failed; reading waits for each flag, not for the rest of its stream."""
    mine = list({id(c): c for n in nodes for c in (n.checks or ())
                 if c.flag is not None}.values())
    _read_all(mine)
    with _lock:
        for node in nodes:
            checks = node.checks
            if checks is not None:
                _fail(node, next((c.error for c in checks if c.error is not None), None))
                node.checks = None


def _read_all(checks):
    for c in checks:
        ready = c.ready
        if ready is not None:
            ready.synchronize()
    with _lock:
        for c in checks:
            if c.flag is not None:
                _read(c)


def _read(c):
    if bool(c.flag.get()):
        sizes = ", ".join(str(s) for s in c.sizes)
        c.error = StreamError(f"[{c.op}] Index out of bounds: an index is outside [-n, n) "
                              f"for the axis it indexes, of size n = {sizes} (checked on "
                              f"the GPU).")
    c.flag = c.ready = None


def _fail(node, error):
    """(With `_lock` held.) `node` takes `error` (if any), which its stream's synchronize
    reports."""
    if error is not None and node.error is None:
        node.error = error
        report(error, node.stream)


def settle_watched(h, state):
    """After a flush of `h`'s stream: read the flags of the checks it made whose kernels
    have run (all of them once it waited for the device; nothing waits here otherwise, so
    a stream that is never waited for does not gather checks).  One that failed is
    reported by the stream's synchronize, and fails each node computed from it when that
    node is read or used (`inherit`, `settle`)."""
    with h.lock:
        ready = [c for c in h.checks if c.ready is None or c.ready.done]
        if not ready:
            return
        h.checks = [c for c in h.checks if c.ready is not None and not c.ready.done]
    _read_all(ready)
    for c in ready:
        if c.error is not None:
            report(c.error, state)


def settle_one(node):
    """The backend's `settle`: read `node`'s checks, if it has any unread or failed."""
    if node.checks is not None:
        settle([node])
