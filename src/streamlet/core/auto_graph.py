"""An eval whose graph has the structure of an earlier one, run as programs.

A training loop builds the same graph at every step: the same ops on new arrays.  On a
GPU stream each node costs its launch from Python, tens of microseconds against the
GPU's few.  So an eval of one stream's nodes (`MIN_NODES` or more, none pending on
another eval, none traced by a transform) is keyed by its structure: each node's
primitive, shape, dtype, params and which nodes or leaves it reads, the leaves' shapes
and dtypes, and which nodes are its results (once its ops and shapes came before: a
graph that never repeats is not keyed).  The second time a key comes, each run of
nodes between those that check indices on the device (whose checks a program could not
read back) becomes a `gpu_program.Program`, and the eval runs one node for it
(`backend.cuda_graph`: the steps' kernels at first, one CUDA graph launch from its next
run on) and one selection per result; the checking nodes run as they are, between.

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
import math
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
KEPT = 8  # plans kept (each program holds its buffers on each stream it ran on)
# a run reading more than this stays nodes: its program would keep a copy of its inputs
# (and its intermediates) beside the arrays, and launches matter little at that size
MAX_INPUT_BYTES = 1 << 29
# device types (`DeviceType.value`) whose streams take programs
DEVICES = {0, 1} if _SETTING == "all" else {1}

# key -> its plan (segments; () where none goes whole), None once seen once
_seen: collections.OrderedDict = collections.OrderedDict()
_glimpses: collections.OrderedDict = collections.OrderedDict()  # ops and shapes seen
_lock = threading.Lock()


class _Unkeyable(Exception):
    """A param value without an exact hashable form (an array): no program."""


def frozen(v, by_identity=False):
    """`v` (a params value) as a hashable value equal only to an equal one: floats by their
    bits (0.0 and -0.0 differ), bools apart from ints.  A value without such a form (an
    array) raises `_Unkeyable`, or with `by_identity` stands for itself (while it lives:
    compile's merging of equal nodes within one trace)."""
    t = type(v)
    if t is float:
        return (t, v.hex())
    if t is int or t is bool or t is str or v is None:
        return (t, v)
    if t is tuple or t is list:
        return (t,) + tuple([frozen(x, by_identity) for x in v])
    if t is dict:
        return (t,) + tuple([(k, frozen(x, by_identity)) for k, x in v.items()])
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
    return (t, v)  # a dtype, a primitive, a program: compared as they compare


def _structure(order):
    """(key, leaves): `order`'s structure, its leaves (nodes read that are not in it).
    Nodes key dicts by identity (they define no equality)."""
    at = {n: k for k, n in enumerate(order)}  # then leaves: -1 - their index
    get = at.get
    leaves = []
    params_key = {}
    parts = []
    for n in order:
        ins = n.inputs
        refs = tuple([get(i) for i in ins])
        if None in refs:
            for i in ins:
                if i not in at:
                    at[i] = -1 - len(leaves)
                    leaves.append(i)
            refs = tuple([at[i] for i in ins])
        p = n.params
        if p:
            pk = params_key.get(id(p))
            if pk is None:
                pk = params_key[id(p)] = frozen(p)
        else:
            pk = ()
        parts.append((n.prim, n.shape, n.dtype, pk, refs))
    parts.append(tuple([(i.shape, i.dtype) for i in leaves]))
    return parts, leaves


def _references(items):
    """How many references each of `items` has where nothing but the list `items` holds it,
    counted as `_results` counts them (the list, the loop's variable, getrefcount's
    argument, as this interpreter counts them)."""
    for n in items:
        return sys.getrefcount(n)


_OWN = _references([object()])


def _results(order, parts, outputs):
    """Positions in `order` of the nodes the eval must compute: its outputs and those held
    from outside the graph (more references than `order` and their consumers in it
    make, counted from `_structure`'s parts); a multi-output node's box is never one (its
    selections are)."""
    uses = collections.Counter([r for part in parts[:len(order)] for r in part[4] if r >= 0])
    wanted = {id(o) for o in outputs}
    getrefcount, own = sys.getrefcount, _OWN
    found, k = [], 0
    for n in order:
        if not n.prim.multi and (id(n) in wanted or getrefcount(n) > uses[k] + own):
            found.append(k)
        k += 1
    return found


def _eligible(order, state):
    if not ON or len(order) < MIN_NODES or state.stream.device.type.value not in DEVICES:
        return False
    for n in order:
        if n.prim is WHOLE or n.stream is not state or keeps_graph(n):
            return False
    return True


def replace(order, outputs, state):
    """`order` (one stream's unscheduled nodes, producers first, marked by eval) as the
    nodes that run its programs where its structure came before; else `order` itself."""
    if not _eligible(order, state) or not _glimpsed_before(order):
        return order
    try:
        parts, leaves = _structure(order)
    except _Unkeyable:
        return order
    results = _results(order, parts, outputs)
    if not results:
        return order
    key = tuple(parts) + (tuple(results),)
    plan = _seen.get(key, False)
    if plan is None:  # the second sighting
        plan = _plan(order, parts, leaves, results, state.gpu)
    _remember(key, None if plan is False else plan)
    return _run_as(plan, order, leaves, state) if plan else order


def _glimpsed_before(order) -> bool:
    """Whether an earlier eval had the ops and shapes of `order`: a cheap look first, so
    that graphs that never repeat (a decode step's, whose caches grow) are not keyed."""
    glimpse = tuple([(n.prim, n.shape) for n in order])
    seen = glimpse in _glimpses
    _keep(_glimpses, glimpse, True, 2 * KEPT)
    return seen


def _remember(key, plan):
    _keep(_seen, key, plan, KEPT)


def _keep(table, key, value, most):
    """`table[key] = value`, the newest of the `most` entries it keeps."""
    with _lock:  # against `forget` (eval's calls are one at a time)
        table[key] = value
        table.move_to_end(key)
        while len(table) > most:
            table.popitem(last=False)


class _Segment:
    """A run of `order[start:end]` as one Program: its inputs (refs as in `_structure`: a
    position in `order`, or -1 - i for leaf i) and the positions of its results."""

    __slots__ = ("start", "end", "program", "inputs", "results")

    def __init__(self, start, end, program, inputs, results):
        self.start, self.end, self.program = start, end, program
        self.inputs, self.results = inputs, results


def _plan(order, parts, leaves, results, gpu):
    """The programs of `order`: its runs between nodes that check indices on the device
    (which run as they are: a program can't read their checks back), each a Program where
    it is long enough; () where there is none."""
    last_read = {}
    for k, part in enumerate(parts[:len(order)]):
        for r in part[4]:
            last_read[r] = k
    wanted = set(results)
    cuts = [k for k, n in enumerate(order) if n.prim.bounds is not None]
    segments = []
    for start, end in zip([0] + [c + 1 for c in cuts], cuts + [len(order)]):
        if end - start >= MIN_NODES:
            seg = _segment(order, parts, leaves, start, end, wanted, last_read, gpu)
            if seg is not None:
                segments.append(seg)
    return tuple(segments)


def _segment(order, parts, leaves, start, end, wanted, last_read, gpu):
    """The _Segment of `order[start:end]`, or None where it can't go whole or reads more
    than `MAX_INPUT_BYTES`."""
    from .compile import _Step
    inputs = sorted({r for part in parts[start:end] for r in part[4] if r < start},
                    key=lambda r: (r < 0, r))
    slot = {r: i for i, r in enumerate(inputs)}
    first = len(inputs)
    slot.update({k: first + k - start for k in range(start, end)})
    steps = [_Step(n.prim, tuple([slot[r] for r in part[4]]), n.shape, n.dtype, n.params,
                   None) for n, part in zip(order[start:end], parts[start:end])]
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
