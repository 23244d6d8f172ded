"""A compiled function's whole GPU program (`core.gpu_program`) run by the backend:
its steps' kernels in turn, then one CUDA graph per stream.

On a stream, the first run copies the call's inputs into buffers of the program's own
(`slots`) and runs the steps' kernels on them as `execute` would (`run_kernel`; runs
of elementwise steps are their generated kernels), which compiles what they need.  The
second run captures the same launches into a CUDA graph, with a memory pool of its own
for what they allocate (freed buffers are reused within the graph only), and launches
it; each later run copies the inputs into the slots, launches the graph and copies the
results out (a later run overwrites them): a few launches where the program had one or
more per step.  An input that is the array the last run copied, alive since, in memory
of CuPy's pool never handed out through DLPack, is not copied again (a decode step's
weights): no kernel writes an array's buffer once it holds its value.  A capture that
fails (a step that waits for the host or copies from it) leaves the program run step by
step on that stream.  A stream's state goes with streamlet's stream (`_forget_with`).

Set `STREAMLET_CUDA_GRAPHS=0` to run every program step by step.
"""
from __future__ import annotations

import os
import threading
import weakref

import cupy as cp
import numpy as np

from ..core.gpu_program import run_steps
from ..core.memory import track as track_memory
from .cuda import BF16, EXPORTED, HANDLES, memory_of, run_kernel, shared

CAPTURE = os.environ.get("STREAMLET_CUDA_GRAPHS", "1") != "0"


class Steps:
    """A stream's state where the program runs step by step: why (the capture's error)."""

    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason

    def __repr__(self):
        return f"Steps({self.reason!r})"


_OFF = Steps("STREAMLET_CUDA_GRAPHS=0")
_POOLED = cp.cuda.memory.PooledMemory


def replay(xp, *args, program, outs):
    """The program's results on the current stream, boxed as a multi-output kernel's."""
    stream = cp.cuda.get_current_stream()
    with program.lock:
        state = program.native.get(stream.ptr)
        if state is None:
            state = program.native[stream.ptr] = _Slots(program, args) if CAPTURE else _OFF
            _forget_with(stream.ptr, program)
            results = state.first_run(program, args, stream) if CAPTURE else None
        elif type(state) is Steps:
            results = None
        else:
            results = state.run(program, args, stream)
            if type(results) is Steps:
                program.native[stream.ptr] = results
                results = None
        if results is None:
            results = _interpret(program, args)
    box = np.empty((), dtype=object)
    box[()] = tuple(results)
    return box


_users: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Handle -> its programs
_users_lock = threading.Lock()


def _forget_with(ptr, program):
    """Drop `program`'s state on the CUDA stream `ptr` (its buffers, its graph) when
    streamlet's stream of that CUDA stream goes (cleared by clear_streams and unused):
    one finalizer a stream, for the programs (weakly held) that ran there."""
    h = HANDLES.get(ptr)
    if h is None:
        return
    with _users_lock:
        users = _users.get(h)
        if users is None:
            users = _users[h] = weakref.WeakSet()
            weakref.finalize(h, _forget, users, ptr)
        users.add(program)


def _forget(users, ptr):
    # without a lock: a collection may run this inside `replay`, which holds a program's;
    # the stream is gone, so no other run uses these states
    for program in list(users):
        program.native.pop(ptr, None)


def _gpu_step(st, ins):
    return run_kernel(st.prim, st.params, st.dtype, ins)


def _interpret(program, values):
    """The program's results, each step's kernel run in turn."""
    return run_steps(program, values, _gpu_step)


class _Slots:
    """A program's buffers on one stream: the inputs' slots (read by the steps where the
    call's arrays were), and once captured the graph, its results and the memory pool
    its steps allocated from (`held`: reused inside the graph, by nothing else)."""

    __slots__ = ("slots", "inputs", "copied", "graph", "results", "held", "nbytes",
                 "__weakref__")

    def __init__(self, program, args):
        self.inputs = range(program.n_inputs)
        self.slots = list(args)  # the constants' values, and the inputs' slots:
        for i in self.inputs:
            self.slots[i] = _slot(args[i])
        self.copied = [None] * program.n_inputs  # what each slot holds: `_unchanging`
        self.graph = self.results = None
        self.held = []
        self.nbytes = 0  # once captured: what the graph's pool holds

    def first_run(self, program, args, stream):
        self._copy_in(args, stream)
        return [_copy_out(r, stream) for r in _interpret(program, self.slots)]

    def run(self, program, args, stream):
        """The results of a call, through the graph (captured now at the second call);
        a Steps if the capture failed."""
        self._copy_in(args, stream)
        if self.graph is None:
            failed = self._capture(program, stream)
            if failed is not None:
                return Steps(failed)
        self.graph.launch(stream)
        return [_copy_out(r, stream) for r in self.results]

    def _capture(self, program, stream):
        """Capture the steps on a stream of its own: other threads may record events on
        or copy from the program's stream meanwhile, which a capturing stream refuses."""
        pool = cp.cuda.MemoryPool()  # the graph's own: what it frees, only it reuses
        side = cp.cuda.Stream(non_blocking=True)
        try:
            with side, cp.cuda.using_allocator(pool.malloc):
                side.begin_capture()
                try:
                    results = _interpret(program, self.slots)
                finally:
                    graph = side.end_capture()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        self.graph, self.results, self.held = graph, results, pool
        self.nbytes = pool.total_bytes()
        track_memory(self)  # the graph's buffers count as arrays do, while it lives
        return None

    def _copy_in(self, args, stream):
        slots, copied = self.slots, self.copied
        for i in self.inputs:
            s, a = slots[i], args[i]
            was = copied[i]
            if was is not None and was() is a and not (EXPORTED and shared(a)):
                continue
            copied[i] = _unchanging(a)
            if type(s) is BF16:
                s, a = s.bits, a.bits
            if isinstance(a, np.generic):
                s.set(np.asarray(a), stream=stream)
            elif a.flags.c_contiguous:
                if a.nbytes:
                    s.data.copy_from_device_async(a.data, a.nbytes, stream)
            else:
                cp.copyto(s, a)


def _unchanging(a):
    """A weak reference to input `a` where its buffer keeps its value while `a` lives (the
    pool's memory, not shared through DLPack), else None."""
    if isinstance(a, np.generic) or type(memory_of(a)) is not _POOLED or shared(a):
        return None
    return weakref.ref(a)


def _slot(a):
    """A buffer of the program's own for input `a` (a host scalar gets a device one),
    counted in the memory accounting while the program lives."""
    s = cp.empty(np.shape(a.bits if type(a) is BF16 else a),
                 a.bits.dtype if type(a) is BF16 else a.dtype)
    track_memory(s)
    return BF16(s) if type(a) is BF16 else s


def _copy_out(r, stream):
    """A result in a buffer of its own (the program's are written again next call)."""
    if type(r) is BF16:
        return BF16(_copy_out(r.bits, stream))
    if not r.flags.c_contiguous:
        return cp.ascontiguousarray(r)
    out = cp.empty(r.shape, r.dtype)
    if r.nbytes:
        out.data.copy_from_device_async(r.data, r.nbytes, stream)
    return out
