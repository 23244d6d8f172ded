"""An eval whose graph has the structure of an earlier one, run as programs.

A training loop builds the same graph at every step: the same ops on new arrays.  On a
GPU stream each node costs its launch from Python, tens of microseconds against the
GPU's few.  So an eval of one stream's nodes (`MIN_NODES` or more, none pending on
another eval, none traced by a transform) is keyed by its structure: each node's
primitive, shape, dtype, params and which nodes or leaves it reads, the leaves' shapes
and dtypes, and which nodes are its results (once its ops and shapes came before: a
graph that never repeats is not keyed).  The second time a key comes, each run of
`MIN_RUN` nodes or more between those that check indices on the device (whose checks a
program could not read back) becomes a `gpu_program.Program`, and the eval runs one
node for it (`backend.cuda_graph`: the steps' kernels at first, one CUDA graph launch
from its next run on) and one selection per result; the checking nodes run as they
are, between.

A decode step repeats its ops with other shapes (its caches grow a row a token) and
params (RoPE's offset).  Where an eval's ops are the last eval's but its shapes differ,
its structure is compared with that eval's: what changed is masked in the key, and the
nodes where it changed, with those reading a changed shape, run as they are between the
programs (`_loosely`).

A run's results are the eval's arrays, the nodes read after the run, and every node
something outside the graph still holds (an array the caller kept, such as the
gradients given to an optimizer): found by reference counts.  A node left out is not
computed; where nothing holds it, its graph goes with it.  A program that fails fails
all of its results.

`STREAMLET_AUTO_GRAPHS=0` turns this off; `all` takes CPU streams too (their programs
run step by step: a test of the plans, not a speed-up).
"""
from __future__ import annotations

import collections
import itertools
import math
import operator
import os
import sys
import threading

import numpy as np

from .graph import Node, keeps_graph
from .gpu_program import WHOLE, whole
from .ops.build import SELECT

_SETTING = os.environ.get("STREAMLET_AUTO_GRAPHS", "1")
ON = _SETTING != "0"
MIN_NODES = int(os.environ.get("STREAMLET_AUTO_GRAPHS_MIN", 32))  # smaller: cheaper to launch
MIN_RUN = min(8, MIN_NODES)  # the fewest nodes a program runs
KEPT = 8  # plans kept (each program holds its buffers on each stream it ran on)
# a run reading more than this stays nodes: its program would keep a copy of its inputs
# (and its intermediates) beside the arrays, and launches matter little at that size
MAX_INPUT_BYTES = 1 << 29
# device types (`DeviceType.value`) whose streams take programs
DEVICES = {0, 1} if _SETTING == "all" else {1}

# key -> its plan (segments; () where none goes whole), None once seen once (`_find`)
_seen: collections.OrderedDict = collections.OrderedDict()
_glimpses: collections.OrderedDict = collections.OrderedDict()  # ops and shapes seen
# ops seen -> the shapes and the rest of the structure (`_structure`; None at first) of the
# last eval of those ops
_lately: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


class _Unkeyable(Exception):
    """A param value without an exact hashable form (an array): no program."""


# types whose values `==` compares exactly, with the type kept beside (True is not 1)
_EXACT = dict.fromkeys([int, bool, str, type(None)] +
                       [type(np.dtype(c)) for c in np.typecodes["All"]])


def frozen(v, by_identity=False):
    """`v` (a params value) as a hashable value equal only to an equal one: floats by their
    bits (0.0 and -0.0 differ), bools apart from ints.  A value without such a form (an
    array) raises `_Unkeyable`, or with `by_identity` stands for itself (while it lives:
    compile's merging of equal nodes within one trace)."""
    t = type(v)
    if t in _EXACT:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is dict:
        out = [t]
        for k, x in v.items():
            tx = type(x)
            out.append(k)
            out.append((tx, x) if tx in _EXACT else frozen(x, by_identity))
        return tuple(out)
    if t is tuple or t is list:
        out = [t]
        for x in v:
            tx = type(x)
            out.append((tx, x) if tx in _EXACT else frozen(x, by_identity))
        return tuple(out)
    if t is complex:
        return (t, v.real.hex(), v.imag.hex())
    if t is slice:  # not hashable before Python 3.12
        return (t,) + tuple([frozen(x, by_identity) for x in (v.start, v.stop, v.step)])
    if isinstance(v, np.generic):
        return (t, v.tobytes())
    try:
        if isinstance(v, np.ndarray):
            raise TypeError
        hash(v)
    except TypeError:
        if by_identity:
            return (t, id(v))
        raise _Unkeyable from None
    return (t, v)  # a primitive, a program: compared as they compare


_PRIM, _SHAPE, _DTYPE, _INPUTS, _PARAMS = map(
    operator.attrgetter, ("prim", "shape", "dtype", "inputs", "params"))


def _glimpse(order):
    """The ops and shapes of `order`."""
    return tuple(map(_PRIM, order)), tuple(map(_SHAPE, order))


def _structure(order):
    """(rest, reads, leaves): what `order`'s structure holds beyond its glimpse (dtypes,
    params, what each node reads, the leaves' shapes and dtypes); what the nodes read, as
    refs (a position in `order`, or -1 - i for leaf i) of all their inputs in a row and
    how many inputs each node has; and the leaves (nodes read that are not in `order`, in
    the order they are first read).  Nodes key dicts by identity (they define no
    equality)."""
    at = dict(zip(order, itertools.count()))
    inputs = list(map(_INPUTS, order))
    read = dict.fromkeys(itertools.chain.from_iterable(inputs))
    leaves = list(itertools.filterfalse(at.__contains__, read))
    at.update(zip(leaves, itertools.count(-1, -1)))
    refs = tuple(map(at.__getitem__, itertools.chain.from_iterable(inputs)))
    arity = tuple(map(len, inputs))
    memo = {}  # params dicts shared by nodes, by id (all alive: the nodes hold them)
    params = []
    for p in map(_PARAMS, order):
        if p:
            pk = memo.get(id(p))
            if pk is None:
                pk = memo[id(p)] = frozen(p)
            params.append(pk)
        else:
            params.append(())
    rest = (tuple(map(_DTYPE, order)), tuple(params), refs, arity,
            tuple([(i.shape, i.dtype) for i in leaves]))
    return rest, (refs, arity), leaves


def _each(refs, arity):
    """The refs of each node's inputs, from `_structure`'s reads."""
    out, k = [], 0
    for a in arity:
        out.append(refs[k:k + a])
        k += a
    return out


def _reference_counts(items):
    """Each of `items`' reference count as `_results` reads it (the list's reference and
    getrefcount's argument included, as this interpreter counts them)."""
    return np.fromiter(map(sys.getrefcount, items), np.intp, len(items))


_OWN = int(_reference_counts([object()])[0])  # an item only the list holds


def _results(order, refs):
    """Positions in `order` of the nodes the eval must compute: those held from outside
    the graph (more references than `order` and their consumers in it make, counted from
    `refs`, every input read), the eval's outputs among them (their list holds them); a
    multi-output node's box is never one (its selections are)."""
    n = len(order)
    uses = collections.Counter(refs)
    inside = np.fromiter(map(uses.get, range(n), itertools.repeat(0, n)), np.intp, n)
    held = np.flatnonzero(_reference_counts(order) > inside + _OWN).tolist()
    return [k for k in held if not order[k].prim.multi]


def _eligible(order, state):
    if not ON or len(order) < MIN_NODES or state.stream.device.type.value not in DEVICES:
        return False
    for n in order:
        if n.prim is WHOLE or n.stream is not state or keeps_graph(n):
            return False
    return True


def replace(order, outputs, state):
    """`order` (one stream's unscheduled nodes, producers first, marked by eval) as the
    nodes that run its programs where its structure came before; else `order` itself.
    The list `outputs` (the eval's nodes) makes them results by holding them."""
    if not _eligible(order, state):
        return order
    keyed = _keyed(order)
    if keyed is None:
        return order
    key, reads, leaves, breaks = keyed
    h = hash(key)
    plan = _find(_seen, h, key, False)
    if plan is None:  # the second sighting
        plan = _plan(order, _each(*reads), leaves, key[2], state.gpu, breaks)
    _keep(_seen, h, key, None if plan is False else plan, KEPT)
    return _run_as(plan, order, leaves, state) if plan else order


def _keyed(order):
    """(key, reads, leaves, breaks) of `order`, or None where it is not keyed: its
    structure (`_structure`) and results where its ops and shapes came before; where only
    its ops came before, with shapes, params and leaves of the last such eval (a decode
    step's, whose caches grow) `_loosely`, its breaks (nodes that run as they are, between
    programs) the nodes where they changed and those reading a changed shape."""
    glimpse = _glimpse(order)
    exact = _glimpsed_before(glimpse)
    if not exact:
        prims, shapes = glimpse
        hp = hash(prims)
        last = _find(_lately, hp, prims, None)
        if last is None:  # these ops are new: no structure yet
            _keep(_lately, hp, prims, (shapes, None), KEPT)
            return None
    try:
        rest, reads, leaves = _structure(order)
    except _Unkeyable:
        return None
    breaks = ()
    if not exact:
        _keep(_lately, hp, prims, (shapes, rest), KEPT)
        if last[1] is None:
            return None
        loose = _loosely(shapes, rest, *last)
        if loose is None:
            return None
        breaks, shapes, rest = loose
        glimpse = (prims, shapes)
    results = _results(order, reads[0])
    if not results:
        return None
    return (glimpse, rest, tuple(results)), reads, leaves, breaks


def _loosely(shapes, rest, last_shapes, last_rest):
    """(breaks, shapes, rest) of an eval whose ops are those of the last eval keyed by
    shapes `last_shapes` and rest `last_rest`: the shapes, params and leaves that changed
    masked (None), and the nodes that must run as they are; None where the two differ
    elsewhere (dtypes, what the nodes read) or in more than half of the nodes."""
    dtypes, params, refs, arity, leaf = rest
    if dtypes != last_rest[0] or refs != last_rest[2] or arity != last_rest[3] or \
            len(leaf) != len(last_rest[4]):
        return None
    moved = {k for k, (a, b) in enumerate(zip(shapes, last_shapes)) if a != b}
    moved.update(-1 - i for i, (a, b) in enumerate(zip(leaf, last_rest[4])) if a != b)
    retuned = {k for k, (a, b) in enumerate(zip(params, last_rest[1])) if a != b}
    breaks = retuned.union(k for k in moved if k >= 0)
    if moved:
        breaks.update(k for k, rs in enumerate(_each(refs, arity)) if not moved.isdisjoint(rs))
    if not breaks or 2 * len(breaks) > len(shapes):
        return None
    leaf = tuple([None if -1 - i in moved else v for i, v in enumerate(leaf)])
    return (sorted(breaks), _masked(shapes, moved),
            (dtypes, _masked(params, retuned), refs, arity, leaf))


def _masked(row, at):
    return tuple([None if k in at else v for k, v in enumerate(row)])


def _glimpsed_before(glimpse) -> bool:
    """Whether an earlier eval had these ops and shapes: a cheap look first, so that
    graphs that never repeat exactly are keyed only where their ops did (`_keyed`)."""
    h = hash(glimpse)
    seen = _find(_glimpses, h, glimpse, False)
    _keep(_glimpses, h, glimpse, True, 2 * KEPT)
    return seen


# The tables hold `hash(key) -> (key, value)`: a key (a tuple of thousands of items, whose
# hash Python does not keep) is hashed once an eval, and compared once.

def _find(table, h, key, missing):
    entry = table.get(h)
    return entry[1] if entry is not None and entry[0] == key else missing


def _keep(table, h, key, value, most):
    """The entry of `key` (of hash `h`) made `value`, the newest of the `most` entries
    `table` keeps."""
    with _lock:  # against `forget` (eval's calls are one at a time)
        table[h] = (key, value)
        table.move_to_end(h)
        while len(table) > most:
            table.popitem(last=False)


class _Segment:
    """A run of `order[start:end]` as one Program: its inputs (refs as in `_structure`: a
    position in `order`, or -1 - i for leaf i) and the positions of its results."""

    __slots__ = ("start", "end", "program", "inputs", "results")

    def __init__(self, start, end, program, inputs, results):
        self.start, self.end, self.program = start, end, program
        self.inputs, self.results = inputs, results


def _plan(order, refs, leaves, results, gpu, breaks=()):
    """The programs of `order`: its runs between `breaks` and the nodes that check indices
    on the device (which run as they are: a program can't read their checks back), each
    a Program where it is long enough; () where there is none."""
    last_read = {}
    for k, rs in enumerate(refs):
        for r in rs:
            last_read[r] = k
    wanted = set(results)
    cuts = sorted({k for k, n in enumerate(order) if n.prim.bounds is not None}.union(breaks))
    segments = []
    for start, end in zip([0] + [c + 1 for c in cuts], cuts + [len(order)]):
        if end - start >= MIN_RUN:
            seg = _segment(order, refs, leaves, start, end, wanted, last_read, gpu)
            if seg is not None:
                segments.append(seg)
    return tuple(segments)


def _segment(order, refs, leaves, start, end, wanted, last_read, gpu):
    """The _Segment of `order[start:end]`, or None where it can't go whole or reads more
    than `MAX_INPUT_BYTES`."""
    from .compile import _Step
    inputs = sorted({r for rs in refs[start:end] for r in rs if r < start},
                    key=lambda r: (r < 0, r))
    slot = {r: i for i, r in enumerate(inputs)}
    first = len(inputs)
    slot.update({k: first + k - start for k in range(start, end)})
    steps = [_Step(n.prim, tuple([slot[r] for r in rs]), n.shape, n.dtype, n.params, None)
             for n, rs in zip(order[start:end], refs[start:end])]
    out = [k for k in range(start, end) if k in wanted or last_read.get(k, -1) >= end]
    if not out:
        return None
    nodes = [order[r] if r >= 0 else leaves[-1 - r] for r in inputs]
    if sum(math.prod(n.shape) * n.dtype.size for n in nodes) > MAX_INPUT_BYTES:
        return None
    dtypes = [n.dtype for n in nodes] if gpu else None
    program = whole(steps, [slot[k] for k in out], first, first, dtypes)
    return None if program is None else _Segment(start, end, program, tuple(inputs), out)


def _run_as(plan, order, leaves, state):
    """The nodes to schedule instead of `order`: each segment's program node and its
    result nodes made that node's selections, the nodes between segments as they are;
    the other nodes are unscheduled again, their graphs kept (a later eval computes one
    that is read)."""
    new, done = [], 0
    for seg in plan:
        new += order[done:seg.start]
        program = seg.program
        ins = [order[r] if r >= 0 else leaves[-1 - r] for r in seg.inputs]
        box = Node((), program.outs[0][1], WHOLE, tuple([ins[i] for i in program.keep]),
                   {"program": program, "outs": program.outs}, state)
        made = [order[k] for k in seg.results]
        box.birth = made[0].birth - 0.5  # before its selections in a later eval's order
        box.seq = -1
        for k in range(seg.start, seg.end):
            order[k].seq = 0
        for n, w in zip(made, program.where):
            n.prim, n.inputs, n.params, n.seq = SELECT, (box,), {"index": w}, -1
        new.append(box)
        new += made
        done = seg.end
    new += order[done:]
    return new


def forget() -> None:
    """Drop every program (and the buffers each holds)."""
    with _lock:
        _seen.clear()
        _glimpses.clear()
        _lately.clear()
