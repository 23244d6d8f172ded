"""A compiled function's GPU program as one node (also an eval's: `auto_graph`).

A replay on a GPU stream builds one node for the whole traced program (its inputs: the
call's inputs and the trace's constants) and a selection node per result, where the
step-by-step replay builds and schedules a node per step.  The backend runs the steps
itself (`backend.cuda_graph`: their kernels in turn, then one CUDA graph launch).

A program goes whole when every step runs on the caller's stream and none checks
indices on the device (`Primitive.bounds`, read back per node); runs of elementwise
steps are their generated kernels, a lone elementwise step a run of its own.
"""
from __future__ import annotations

import threading

import numpy as np

from .array import wrap
from .fusion import fuse
from .graph import GpuKernel, Node, Primitive
from .ops.build import SELECT


def run_steps(program, values, run):
    """The program's results from its inputs' `values`: `run(step, its inputs)` for each
    step in turn, a value dropped once its last reader has run."""
    values = list(values)
    drops = program.drops
    for k, st in enumerate(program.steps):
        values.append(run(st, [values[r] for r in st.refs]))
        for r in drops[k]:  # its buffer goes back to the pool for the steps after
            values[r] = None
    return [values[r] for r in program.results]


def _host_step(st, ins):
    out = st.prim.kernel(np, *ins, **(st.params or {}))
    return out if type(out) is np.ndarray else np.asarray(out)


def _on_host(xp, *args, program, outs):
    """The program's results on a CPU stream: its steps' NumPy kernels in turn (the GPU's
    backend runs them itself, `backend.cuda_graph`)."""
    box = np.empty((), dtype=object)
    box[()] = tuple(run_steps(program, args, _host_step))
    return box


WHOLE = Primitive("compiled_graph", _on_host,
                  GpuKernel("streamlet.backend.cuda_graph:replay", bfloat16="native",
                            host_scalars=True), multi=True)


class Program:
    """The steps of a traced program on the values `0..n_values-1` (the call's values
    `keep`: first `n_inputs` of its inputs, then constants), the values it returns
    (`results`; an output -1 - v is the call's value v passed on), when each value is
    read for the last time (`drops[k]`: values free after step k), and the backend's
    state per CUDA stream (`native`, under `lock`)."""

    __slots__ = ("steps", "keep", "n_inputs", "n_values", "results", "outs", "drops",
                 "where", "native", "lock", "__weakref__")

    def __init__(self, steps, keep, n_inputs, outputs):
        n_values = len(keep)
        self.steps, self.keep, self.n_inputs, self.n_values = steps, keep, n_inputs, n_values
        self.results = tuple(sorted({o for o in outputs if o >= 0}))
        slot = {r: i for i, r in enumerate(self.results)}
        self.where = tuple(slot.get(o, o) for o in outputs)
        made = {n_values + k: s for k, s in enumerate(steps)}
        self.outs = tuple((made[r].shape, made[r].dtype) for r in self.results)
        last = {}
        for k, s in enumerate(steps):
            for r in s.refs:
                last[r] = k
        drops = [[] for _ in steps]
        for r, k in last.items():
            if r >= n_values and r not in slot:
                drops[k].append(r)
        self.drops = tuple(tuple(d) for d in drops)
        self.native = {}
        self.lock = threading.Lock()

    def call(self, values, state):
        """The outputs of a call whose inputs and constants are the nodes `values`."""
        box = Node((), self.outs[0][1], WHOLE, tuple([values[i] for i in self.keep]),
                   {"program": self, "outs": self.outs}, state)
        made = [Node(shape, d, SELECT, (box,), {"index": i}, state)
                for i, (shape, d) in enumerate(self.outs)]
        return [wrap(made[w] if w >= 0 else values[-1 - w]) for w in self.where]

    def __repr__(self):  # params are printed by the graph tools
        return f"Program({len(self.steps)} steps)"


def whole(steps, outputs, n_inputs, n_values, dtypes):
    """The Program of a traced program on the GPU (`dtypes`: of its values before the
    steps; None: on the CPU), or None where it can't go whole."""
    if any(s.stream is not None or s.prim.bounds is not None for s in steps):
        return None
    fused = fuse(steps, outputs, n_values) if dtypes is None else \
        fuse(steps, outputs, n_values, gpu_dtypes=dtypes, singles=True)
    if fused is not None:
        steps, outputs = fused
    if not any(o >= n_values for o in outputs):
        return None
    return _reading_only_used(steps, outputs, n_inputs, n_values)


def _reading_only_used(steps, outputs, n_inputs, n_values):
    """The Program with the call's values that no step reads left out of its node: an
    unused input may be anything, even an array left over from another trace."""
    keep = sorted({r for s in steps for r in s.refs if r < n_values})
    where = {v: i for i, v in enumerate(keep)}
    where.update({n_values + k: len(keep) + k for k in range(len(steps))})
    steps = tuple(type(s)(s.prim, tuple([where[r] for r in s.refs]), s.shape, s.dtype,
                          s.params, s.stream) for s in steps)
    outputs = [where[o] if o >= n_values else -1 - o for o in outputs]
    return Program(steps, tuple(keep), sum(1 for v in keep if v < n_inputs), outputs)
