"""Index bounds checked on the GPU, without a host round trip while the stream runs.

On the CPU an out-of-bounds index makes NumPy raise, which fails that op's node.  CuPy
wraps such indices instead, so an op whose primitive has a `bounds` rule gets a check:
a 0-d device flag, computed on its stream after the kernel, set if any index was out of
bounds.  Nothing is read then.  The node, and every GPU node computed from it before the
flag is read, is *unchecked* (`_unchecked`); the flags are read once the stream has run
that far anyway: at the end of the eval (the flush, which waits for the device), or
earlier when an unchecked array is read, waited for by `eval`, or handed to the CPU.
A set flag fails the node and the nodes computed from it with one error, as a failed
op does.
"""
from __future__ import annotations

import threading

import cupy as cp


class Check:
    """One op's bounds: its flag, an event after it, and (once read) whether it failed."""

    __slots__ = ("flag", "ready", "op", "sizes", "error")

    def __init__(self, flag, stream, op, sizes):
        self.flag, self.op, self.sizes = flag, op, sizes
        self.ready = cp.cuda.Event(block=False, disable_timing=True)
        self.ready.record(stream)
        self.error = None


_unchecked: dict = {}  # node -> its Checks and those of its inputs, not read yet
# Guards _unchecked and the errors it gives: a consumer looks at its inputs (failed, or
# unchecked) and a reader fails a node, one at a time.  Waiting for a flag is done outside.
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
    if not _unchecked:  # no flag anywhere (inputs' flags are registered before they run)
        for inp in node.inputs:
            if inp.error is not None:
                raise inp.error
        return
    with _lock:
        found = None
        merged = False
        for inp in node.inputs:
            if inp.error is not None:  # read after the scheduler looked at the input
                raise inp.error
            cs = _unchecked.get(inp)
            if cs is not None and cs is not found:
                merged = found is not None
                found = cs if found is None else found + cs
        if found is None:
            return
        fresh = True
        for c in found:
            if c.error is not None:
                raise c.error
            if c.flag is None:
                fresh = False
        if merged or not fresh:
            found = tuple({id(c): c for c in found if c.flag is not None}.values())
        if found:
            _unchecked[node] = found


def watch(node, pairs, h):
    """After `node`'s kernel (call with its device and stream current): flag whether any
    index of `pairs` ((index array, axis size) each) is outside [-size, size)."""
    bad = None
    for idx, size in pairs:
        idx = cp.asarray(idx)
        if idx.size == 0:
            continue
        out = (_UNSIGNED if idx.dtype.kind == "u" else _SIGNED)(idx, size)
        bad = out if bad is None else bad | out
    if bad is not None:
        check = Check(bad, h.stream, node.prim.name, tuple(size for _, size in pairs))
        with _lock:
            _unchecked[node] = _unchecked.get(node, ()) + (check,)
        with h.lock:
            h.checks.append(check)


def settle(nodes):
    """Read the flags of those of `nodes` that are unchecked and fail the ones whose check
    failed; reading waits for each flag, not for the rest of its stream."""
    with _lock:
        mine = list({id(c): c for n in nodes for c in _unchecked.get(n, ())
                     if c.flag is not None}.values())
    _wait_for(mine)
    with _lock:
        for c in mine:
            if c.flag is not None:
                _read(c)
        for node in nodes:
            checks = _unchecked.pop(node, None)
            if checks is not None:
                _fail(node, next((c.error for c in checks if c.error is not None), None))


def _wait_for(checks):
    for c in checks:
        ready = c.ready
        if ready is not None:
            ready.synchronize()


def _fail(node, error):
    """(With `_lock` held.) `node` takes its check's `error` (if any) and its stream's
    synchronize reports it."""
    if error is not None and node.error is None:
        node.error = error
        st = node.stream
        with st.lock:
            if all(e is not error for e in st.errors):
                st.errors.append(error)


def _read(c):
    from ..core.scheduler import StreamError
    if bool(c.flag.get()):
        sizes = ", ".join(str(s) for s in c.sizes)
        c.error = StreamError(f"[{c.op}] Index out of bounds: an index is outside [-n, n) "
                              f"for the axis it indexes, of size n = {sizes} (checked on "
                              f"the GPU).")
    c.flag = c.ready = None


def settle_watched(h):
    """At the end of an eval on `h`'s stream (its work done): read the flags of the checks
    it made; a failed one fails every node computed from it.  Nodes whose flags are all
    read are no longer unchecked (most often: every node, the whole record cleared)."""
    with h.lock:
        mine, h.checks = h.checks, []
    _wait_for(mine)
    with _lock:
        for c in mine:
            if c.flag is not None:
                _read(c)
        if any(c.error is not None for c in mine):
            for node, checks in _unchecked.items():
                _fail(node, next((c.error for c in checks if c.error is not None), None))
        if all(c.flag is None for cs in _unchecked.values() for c in cs):
            _unchecked.clear()
        else:  # another stream's flags are still unread
            for node in [n for n, cs in _unchecked.items() if all(c.flag is None for c in cs)]:
                del _unchecked[node]


def settle_one(node):
    """The backend's `settle`: read `node`'s checks, if it has any unread.  Every read
    looks (under the lock): another thread may be failing the node right now."""
    with _lock:
        unread = node in _unchecked
    if unread:
        settle([node])
