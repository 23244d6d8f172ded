"""A compiled function's elementwise runs on the GPU: generated kernels planned once.

`mx.compile` replays its trace on a GPU stream with each run of elementwise steps of
one shape as a single node (`core.fusion`).  `plan` cuts such a run, once per traced
program, into pieces of at most `cuda_fuse.MAX_DEPTH` ops, each one kernel that
`cuda_fuse` generates; `execute`, its GPU kernel, launches them in turn.  A replay then
costs a launch per piece, where the unfused trace would build a node and a `Lazy`
per op and collect them into a plan again at every eval.  The kernels are those the
backend generates for the same ops, so both give the same bits.
"""
from __future__ import annotations

import numpy as np
from cupy.cuda import runtime

import cupy as cp

from ..core.ops.creation import _ASTYPE
from ..core.ops.shape import _BROADCAST
from . import cuda_fuse as fuse
from .cuda import fusion_spec, flat_leaf
from .cuda_fuse import BF16, BF16_NP, FUSE_CTYPE

_F64 = np.dtype(np.float64)
_U16 = np.dtype(np.uint16)


def step_spec(prim, params, in_dtypes, out_dtype):
    """The generated-kernel spec of one traced step, or None where the GPU runs it alone
    (not elementwise, a dtype no kernel computes in, or float64, which the GPU refuses).
    A broadcast is a copy: its input, of another shape, is a leaf the launch broadcasts."""
    if prim is _BROADCAST:
        prim = _ASTYPE
    elif prim.cform is None:
        return None
    for d in (*in_dtypes, out_dtype):
        if d.np not in FUSE_CTYPE or d.np == _F64:
            return None
    compute = params.get("dtype") if params else None
    return fusion_spec(prim, compute, in_dtypes[-1], out_dtype, len(in_dtypes))


class Piece:
    """One kernel of a run: `specs` in cuda_fuse's plan form (operands: this piece's
    earlier ops, or leaves), the run values it reads (`leaves`) and the ones it makes
    (`made`, with their dtypes), and its compiled kernels by launch configuration."""

    __slots__ = ("specs", "leaves", "outputs", "made", "dtypes", "kernels")

    def __init__(self, specs, leaves, outputs, made, dtypes):
        self.specs, self.leaves, self.outputs = specs, leaves, outputs
        self.made, self.dtypes = made, dtypes
        self.kernels = {}


class Run:
    """A fused run as the GPU executes it: its shape, its pieces, the values it returns."""

    __slots__ = ("shape", "size", "pieces", "results", "n_values")

    def __init__(self, shape, pieces, results, n_values):
        self.shape, self.pieces, self.results, self.n_values = shape, pieces, results, n_values
        self.size = int(np.prod(shape, dtype=np.int64))

    def __repr__(self):  # params are printed by the graph tools
        return f"Run({len(self.pieces)} kernels)"


def plan(specs, refs, dtypes, n_inputs, results, shape, depth=fuse.MAX_DEPTH):
    """The Run of members whose spec, operands (run values: inputs 0..n_inputs-1, then
    members) and dtype are `specs[j]`, `refs[j]`, `dtypes[j]`."""
    n = len(specs)
    wanted = set(results)
    last_read = {}
    for j, rs in enumerate(refs):
        for r in rs:
            last_read[r] = j
    pieces = []
    start = 0
    while start < n:
        stop = min(n, start + depth)
        piece = _piece(specs, refs, dtypes, n_inputs, start, stop, last_read, wanted)
        while piece is None:  # too many operands for one launch: a shorter piece
            stop = start + max(1, (stop - start) // 2)
            piece = _piece(specs, refs, dtypes, n_inputs, start, stop, last_read, wanted)
        pieces.append(piece)
        start = stop
    return Run(tuple(shape), tuple(pieces), tuple(results), n_inputs + n)


def _piece(specs, refs, dtypes, n_inputs, start, stop, last_read, wanted):
    leaves, local, body = {}, {}, []
    for j in range(start, stop):
        operands = []
        for r in refs[j]:
            p = local.get(r)
            if p is None:
                p = -1 - 2 * leaves.setdefault(r, len(leaves))
            operands.append(p)
        local[n_inputs + j] = len(body)
        body.append((specs[j][0], *operands))
    made = [v for v in local if v in wanted or last_read.get(v, -1) >= stop]
    if len(leaves) + len(made) + 1 >= fuse.MAX_PARAMS:
        return None
    return Piece(tuple(body), tuple(leaves), tuple(local[v] for v in made), tuple(made),
                 tuple(dtypes[v - n_inputs].np for v in made))


def execute(xp, *args, gpu_run, **_):
    """The GPU kernel of a fused run (`core.fusion`): its results, one array each (a
    bfloat16 one as `BF16`, as its inputs come).  NumPy scalars among `args` (the trace's
    constants) are launch parameters."""
    run = gpu_run
    values = [None] * run.n_values
    values[:len(args)] = args
    shape, n = run.shape, run.size
    stream = cp.cuda.get_current_stream().ptr
    device = runtime.getDevice()
    for p in run.pieces:
        outs = [cp.ndarray(shape, _U16 if d is BF16_NP else d) for d in p.dtypes]
        if n:
            _launch(p, [values[r] for r in p.leaves], outs, shape, n, stream, device)
        for v, o, d in zip(p.made, outs, p.dtypes):
            values[v] = BF16(o) if d is BF16_NP else o
    if len(run.results) == 1:
        return values[run.results[0]]
    return tuple(values[r] for r in run.results)


def execute_boxed(xp, *args, outs, gpu_run, **_):
    """`execute` for a run with several results, boxed as multi-output kernels return them."""
    box = np.empty((), dtype=object)
    box[()] = execute(xp, *args, gpu_run=gpu_run)
    return box


def _launch(p, operands, outs, shape, n, stream, device):
    host = tuple([isinstance(a, np.generic) for a in operands])
    consts = [a for a, h in zip(operands, host) if h]
    arrays = [a for a, h in zip(operands, host) if not h]
    dtypes = tuple([BF16_NP if type(a) is BF16 else a.dtype for a in arrays])
    leaves = [flat_leaf(a.bits if type(a) is BF16 else a, shape) for a in arrays]
    pointers = [a.data.ptr for a in leaves] + [o.data.ptr for o in outs]
    kinds = fuse.leaf_kinds(leaves, n)
    vec = fuse.vector_width(leaves + outs, pointers, n)
    key = (host, kinds, vec, device, dtypes, tuple([c.dtype for c in consts]))
    entry = p.kernels.get(key)
    if entry is None:
        entry = p.kernels[key] = _kernel(p, host, dtypes, consts, kinds, vec, device)
    fptr, floats, codes = entry
    fuse.launch(fptr, stream, pointers, n,
                [float(c) if f else int(c) for c, f in zip(consts, floats)], codes, vec)


def _kernel(p, host, dtypes, consts, kinds, vec, device):
    """The compiled kernel of piece `p` with the operands flagged in `host` as constants."""
    specs = p.specs
    if consts:
        code, k_leaf, k_const = [], 0, 0
        for h in host:  # operand codes: -1 - 2i a leaf, -2 - 2i a constant (cuda_fuse)
            code.append(-2 - 2 * k_const if h else -1 - 2 * k_leaf)
            k_const += h
            k_leaf += not h
        specs = tuple((s[0], *[r if r >= 0 else code[(-1 - r) // 2] for r in s[1:]])
                      for s in specs)
    return fuse.compiled(specs, tuple(FUSE_CTYPE[d] for d in dtypes), kinds,
                         tuple(FUSE_CTYPE[c.dtype] for c in consts),
                         tuple(FUSE_CTYPE[d] for d in p.dtypes), p.outputs, vec, device)
