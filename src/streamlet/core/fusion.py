"""Fusion of a compiled function's elementwise runs on the CPU into single nodes.

A run of elementwise steps (and the broadcasts and casts between them) becomes one
node whose kernel calls their kernels in turn, so the scheduler sees one node where
the trace had many; values it computes that other steps or the outputs read are its
results.  Steps whose op is one NumPy ufunc (`Primitive.donate`) write into the buffer
of a value they read for the last time, where nothing else can read it: one the run
computed, or an input the CPU backend donates (`core.donation`).

A replay on the GPU has a program of its own, made at its first call: runs of steps of
one shape that the CUDA backend's generated kernels compute, each one node whose GPU
kernel launches them without the per-op work of the backend's own fusion
(`backend.cuda_compiled`).
"""
from __future__ import annotations

import numpy as np

from .donation import DONATES as _DONATES
from .graph import GpuKernel, Primitive
from .ops.build import SELECT, make
from .ops.rules import elementwise_vmap


def _runs(xp, *args, program, results, prims, out=None, gpu_run=None):
    values = list(args)
    # buffers a ufunc step may write into once they are read for the last time: ones a
    # ufunc step made (never an alias of anything) and the donated input, until a step
    # that may return a view or its input itself reads them
    free = {id(out)} if out is not None else set()
    for kernel, refs, params, drop, ufunc in program:
        operands = [values[r] for r in refs]
        if ufunc is None:
            free.difference_update(map(id, operands))
            value = kernel(xp, *operands, **params)
        else:
            into = _spare(operands, [values[r] for r in drop], free) if free else None
            value = ufunc(*operands, out=into) if into is not None else \
                kernel(xp, *operands, **params)
        for r in drop:  # freed after its last read, so the allocator reuses the memory
            free.discard(id(values[r]))  # its id may name a new object once it is gone
            values[r] = None
        if ufunc is not None and type(value) is np.ndarray:
            free.add(id(value))
        values.append(value)
    if len(results) == 1:
        return values[results[0]]
    return tuple(values[r] for r in results)


def _runs_into(*args, out, **params):
    """A run given a donated input (`Primitive.donate`)."""
    return _runs(np, *args, out=out, **params)


def _spare(operands, last_reads, free):
    """A buffer among `last_reads` the ufunc of `operands` may write its result into."""
    for b in last_reads:
        if type(b) is not np.ndarray or id(b) not in free or b.dtype not in _DONATES or \
                not b.flags.writeable:
            continue
        if all(o is b or (isinstance(o, (np.ndarray, np.generic)) and o.dtype == b.dtype and
                          (o.shape == b.shape or o.ndim == 0)) for o in operands):
            return b
    return None


def _run_shapes(params, *shapes):
    """The run's result shapes, from its steps' own shape rules."""
    shapes = list(shapes)
    for prim, (kernel, refs, p, *_) in zip(params["prims"], params["program"]):
        shapes.append(prim.shape(p, *[shapes[r] for r in refs])[0])
    return [shapes[r] for r in params["results"]]


def _single_shape(params, *shapes):
    return _run_shapes(params, *shapes)[0], params


def _multi_shape(params, *shapes):
    outs = tuple((s_, d) for s_, (_, d) in zip(_run_shapes(params, *shapes), params["outs"]))
    return (), dict(params, outs=outs)


_FUSED = Primitive("compiled", _runs, shape=_single_shape, donate=_runs_into)
_FUSED_MULTI = make("compiled", _runs, multi=True, shape=_multi_shape)
_ON_GPU = "streamlet.backend.cuda_compiled:"
_FUSED_GPU = Primitive("compiled", _runs, GpuKernel(_ON_GPU + "execute", bfloat16="native",
                                                    host_scalars=True), shape=_single_shape)
_FUSED_GPU_MULTI = make("compiled", _runs, GpuKernel(_ON_GPU + "execute_boxed",
                                                     bfloat16="native", host_scalars=True),
                        multi=True, shape=_multi_shape)


def _cpu_fusable(steps, first):
    from .ops.creation import _ASTYPE
    from .ops.shape import _BROADCAST

    def fusable(k):
        s = steps[k]
        p = s.prim
        return (s.stream is None or not s.stream.gpu) and (
            p.vmap is elementwise_vmap or p is _BROADCAST or p is _ASTYPE)
    return fusable


def _gpu_specs(steps, first, dtypes):
    """Each step's generated-kernel spec on the GPU (None: it runs alone); `dtypes` are
    those of the values before the steps."""
    from ..backend.cuda_compiled import step_spec
    dtypes = list(dtypes) + [s.dtype for s in steps]
    return [step_spec(s.prim, s.params, [dtypes[r] for r in s.refs], s.dtype)
            if (s.stream is None or s.stream.gpu) and s.refs else None for s in steps]


def fuse(steps, outputs, first, gpu_dtypes=None, singles=False):
    """`(steps, outputs)` with fused runs, or None when nothing fuses.  Step k computes
    value `first + k`; `outputs` index values.  With `gpu_dtypes` (the dtypes of the
    values before the steps) the program is the GPU's; with `singles`, an elementwise
    step that joins no run is a run of its own (its generated kernel)."""
    from .compile import _Step
    from .dot import label
    consumers = {}
    for k, s in enumerate(steps):
        for r in s.refs:
            consumers.setdefault(r, []).append(first + k)
    if gpu_dtypes is None:
        specs, fusable = None, _cpu_fusable(steps, first)
    else:
        specs = _gpu_specs(steps, first, gpu_dtypes)
        fusable = specs.__getitem__
    group_of = {}
    groups = []
    for k in range(len(steps) - 1, -1, -1):  # roots first: later steps absorb producers
        v = first + k
        if v in group_of or not fusable(k):
            continue
        members, stack, root = {v}, [v], v
        while stack:
            for r in steps[stack.pop() - first].refs:
                if r < first or r in group_of or r in members or not fusable(r - first):
                    continue
                if steps[r - first].stream is not steps[k].stream or (
                        specs is not None and steps[r - first].shape != steps[k].shape):
                    continue
                # a value read outside the run must be read after the run's last step,
                # or that reader could feed the run (a cycle)
                if all(c in members or c > root for c in consumers.get(r, ())):
                    members.add(r)
                    stack.append(r)
        if len(members) > 1 or singles:
            for m in members:
                group_of[m] = len(groups)
            groups.append(sorted(members))
    if not groups:
        return None
    wanted = set(outputs)
    new_steps, where = [], {}  # old value -> new value
    for v in range(first):
        where[v] = v
    for k, s in enumerate(steps):
        v = first + k
        g = group_of.get(v)
        if g is None:
            where[v] = first + len(new_steps)
            new_steps.append(_Step(s.prim, tuple(where[r] for r in s.refs), s.shape, s.dtype,
                                   s.params, s.stream))
            continue
        members = groups[g]
        if v != members[-1]:  # the run goes where its last step was: all it reads is ready
            continue
        members = groups[g]
        inside = set(members)
        ins = sorted({r for m in members for r in steps[m - first].refs if r not in inside})
        local = {r: i for i, r in enumerate(ins)}
        results = [m for m in members if m in wanted or
                   any(c not in inside for c in consumers.get(m, ()))]
        last = {}
        for j, m in enumerate(members):
            for r in steps[m - first].refs:
                last[r] = j
        program = []
        for j, m in enumerate(members):
            ms = steps[m - first]
            drop = tuple(local[r] for r in set(ms.refs) if last[r] == j and r not in results)
            program.append((ms.prim.kernel, tuple(local[r] for r in ms.refs), ms.params or {},
                            drop, ms.prim.donate))
            local[m] = len(local)
        name = "compiled" + "".join(label(steps[m - first].prim) for m in members)
        params = {"program": tuple(program), "results": tuple(local[m] for m in results),
                  "prims": tuple(steps[m - first].prim for m in members)}
        single, several = _FUSED, _FUSED_MULTI
        if specs is not None:
            from ..backend.cuda_compiled import plan
            params["gpu_run"] = plan([specs[m - first] for m in members],
                                     [p[1] for p in program],
                                     [steps[m - first].dtype for m in members], len(ins),
                                     params["results"], steps[members[-1] - first].shape)
            single, several = _FUSED_GPU, _FUSED_GPU_MULTI
        refs = tuple(where[r] for r in ins)
        stream = steps[members[-1] - first].stream
        if len(results) == 1:
            last = steps[results[0] - first]
            where[results[0]] = first + len(new_steps)
            new_steps.append(_Step(_named(single, name), refs, last.shape, last.dtype, params,
                                   stream))
            continue
        outs = tuple((steps[m - first].shape, steps[m - first].dtype) for m in results)
        box = first + len(new_steps)
        new_steps.append(_Step(_named(several, name), refs, (), outs[0][1],
                               dict(params, outs=outs), stream))
        for i, m in enumerate(results):
            where[m] = first + len(new_steps)
            new_steps.append(_Step(SELECT, (box,), outs[i][0], outs[i][1], {"index": i},
                                   stream))
    return new_steps, [where[o] for o in outputs]


def _named(prim, name):
    """`prim` under the name that lists what it fuses (MLX's `CompiledMultiplyAdd`)."""
    return Primitive(name[0].upper() + name[1:], prim.kernel, prim.gpu, multi=prim.multi,
                     shape=prim.shape, donate=prim.donate)
