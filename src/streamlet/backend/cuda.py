"""The CUDA backend: ops of GPU streams run as CuPy kernels on one CUDA stream each.

Streams.  Each GPU `Stream` gets a non-blocking CUDA stream on its device, made
on first use and kept in `StreamState.native` (a `Handle`).  An op runs with
that device and that stream current, so CuPy launches there and allocates from
the stream's arena of the memory pool.

Order between streams.  A GPU input made on another GPU stream is waited for
with a CUDA event recorded on the producer's stream and waited on by the
consumer's stream: the host never blocks.  An input on another device is
copied peer to peer after that wait.  A CPU-stream result is copied to the
device on the consumer's stream (the scheduler has already waited for the CPU
work); host arrays made by `mx.array` are copied once per stream and cached
while the NumPy array lives.  Host arrays of 1 MiB or more are staged through
pinned memory, so the transfer is asynchronous and the host copy releases the
GIL (other streams keep launching meanwhile).  A CPU reader of a GPU result
copies it back with a copy that waits for the producing stream.

Memory.  CuPy's default pool keeps one free list per stream, so a block freed
on stream A is only reused by later work on A, which runs after every earlier
kernel on A.  What that misses is a block of A read by a kernel on stream B and
freed (its last Python reference dropped) before B's kernel ran: A could reuse
it too early.  So every input read across streams or devices is held, with an
event recorded after the reading kernel, until that event has completed
(`_retained`, swept on later launches and whenever a stream is waited for); inputs of
deferred kernels are held until the flush that launches them (`Handle.hold`),
and pinned staging buffers until their copy has run.  We chose this
over `MemoryAsyncPool` because cudaFreeAsync orders a free only on one stream,
which does not cover readers on other streams either, and the default pool is
faster for the many tiny allocations of small-op programs.

Evaluation.  Elementwise ops are fused (see `cuda_fuse`): `execute` defers them
and the DAG is compiled into one kernel when its value is needed or once the
scheduler has run the batch of nodes that built it (`run_deferred`, its pass
over the batch), which also waits for the CUDA stream, so `eval` returns when the
GPU work is done, as in MLX.  `async_eval` runs the batch on the calling thread and
does not wait: its flush records an event (`Handle.marks`), which a read, an `eval` or a
CPU op of a result waits for (`settle`), not for the work launched after it.
The stream keeps weak references to its Lazies (a value no one can read again is
neither computed nor kept); a fused kernel that fails at the flush leaves its error on
its `Lazy`, listed among the stream's errors, and its node takes it when read or
returned (`settle`); fused outputs count in the memory accounting as any kernel's.

Failures.  Out of memory surfaces as RuntimeError naming the op and the bytes;
the pool's cached blocks are released so the process stays usable.  CUDA errors
met at synchronize become RuntimeError.  Indices out of bounds are flagged on the
device and read when the stream has run that far (`cuda_checks`).

bfloat16.  CuPy has no bfloat16: such arrays live on the GPU as their uint16
bit patterns (`BF16`); ops on them compute in float32 and round to nearest even
back to bfloat16, which is what ml_dtypes does on the CPU, so both devices give
the same bits; elementwise chains of bfloat16 fuse as others do (the generated kernel
reads the bits, computes each op in float and rounds its result).  `__dlpack__` of a
bfloat16 GPU array exports the uint16 bits in a capsule retyped to DLPack's bfloat16
(`core.capsule`); a CUDA bfloat16 import is retyped to uint16 for CuPy and held as
`BF16` (`core.convert`).

float32 matmul uses TF32 tensor cores, as MLX's CUDA backend does by default
(`cuda_gemm`).
"""
from __future__ import annotations

import contextlib
import re
import threading
import weakref

import cupy as cp
import cupyx
import numpy as np
from cupy.cuda import runtime

from ..core.memory import TRACK_BYTES, apply_cache_limit, track as track_memory
from ..core.ops.build import truth
from ..core.scheduler import StreamError, failure, report
from . import cuda_checks as checks
from . import cuda_fuse as fuse
from .cuda_fuse import BF16, BF16_BITS, BF16_NP, CTYPE, FUSE_CTYPE, Lazy

_OOM = cp.cuda.memory.OutOfMemoryError
_ndarray = cp.ndarray
_weak = weakref.ref
PINNED_MIN = 1 << 20  # bytes: larger host arrays go through pinned memory, asynchronously


def device_count() -> int:
    """Number of CUDA devices (0 when the driver or a GPU is missing)."""
    try:
        return runtime.getDeviceCount()
    except Exception:
        return 0


def device_info(index: int) -> dict:
    """Name, architecture and memory of CUDA device `index`."""
    p = runtime.getDeviceProperties(index)
    name = p["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    with cp.cuda.Device(index):
        free, total = runtime.memGetInfo()
    return {"device_name": name, "architecture": f"sm_{p['major']}{p['minor']}",
            "memory_size": total, "free_memory": free, "max_buffer_length": total,
            "max_recommended_working_set_size": total,
            "compute_capability": (p["major"], p["minor"]),
            "multiprocessor_count": p["multiProcessorCount"],
            "cuda_runtime_version": runtime.runtimeGetVersion()}


HANDLES = weakref.WeakValueDictionary()  # CUDA stream pointer -> its live Handle


class Handle:
    """The CUDA side of one GPU stream (in `HANDLES` while it lives)."""

    __slots__ = ("index", "device", "stream", "ptr", "lock", "pending", "hold", "epoch",
                 "fault", "checks", "launched", "synced", "marks", "__weakref__")

    def __init__(self, state):
        self.index = state.stream.device.index
        self.device = cp.cuda.Device(self.index)
        with self.device:
            self.stream = cp.cuda.Stream(non_blocking=True)
        self.ptr = self.stream.ptr
        HANDLES[self.ptr] = self
        self.lock = threading.RLock()  # guards pending, hold and launches of Lazies
        self.pending = []  # weak references to the Lazies made since the last flush
        self.hold = []  # inputs from other streams read by work of this flush
        self.epoch = 1  # counts flushes; a Lazy of an older one is computed before reuse
        self.fault = None  # a CUDA error met by a flush at the end of a batch (a StreamError)
        self.checks = []  # index checks of this stream whose flags are not read yet
        self.launched = 0  # the number of the last node run here (they come in order)
        self.synced = 0  # every node up to this number has finished on the device
        self.marks = []  # (number, event) after each flush that did not wait: its work done


class _Current:
    """`h`'s device and stream made current for a with-block: CuPy launches and allocates
    there."""

    __slots__ = ("h",)

    def __init__(self, h):
        self.h = h

    def __enter__(self):
        self.h.device.__enter__()
        try:
            self.h.stream.__enter__()
        except BaseException:
            self.h.device.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        self.h.stream.__exit__(*exc)
        self.h.device.__exit__(*exc)


_NOTHING = contextlib.nullcontext()
_current_stream = cp.cuda.get_current_stream


def current(h):
    """The context of a with-block that needs `h`'s device and stream current: none where
    they already are (the nodes of a batch, inside `running`)."""
    return _NOTHING if _current_stream() is h.stream else _Current(h)


def running(state, count):
    """The scheduler's context around the nodes of a batch of `count` of a GPU stream
    (not its flush: a flag read there must not wait for this stream): its device and
    stream made current once for them all, entering and leaving them being several
    microseconds of the host's time a node.  A one-node batch, or a stream's first (its
    CUDA stream not made yet: a failure to make it fails the node), enters them where it
    needs them."""
    h = state.native
    return _Current(h) if count > 1 and h is not None else _NOTHING


_create_lock = threading.Lock()


def handle(state) -> Handle:
    """The Handle of a GPU StreamState (made on first use)."""
    h = state.native
    if h is None:
        with _create_lock:
            if state.native is None:
                state.native = Handle(state)
            h = state.native
    return h


# -- running ops ------------------------------------------------------------------------------

def execute(node, args):
    """Run (or, for elementwise ops, defer) one node on its stream's CUDA stream."""
    state = node.stream
    h = state.native or handle(state)
    checks.inherit(node, h)
    prim = node.prim
    if prim.cform is not None:
        lz = _defer(node, args, h)
        if lz is not None:
            return lz
    # inputs from other streams, held until a flush has waited for this stream: listed once
    # the kernel is launched (another thread's synchronize may flush meanwhile)
    held = []
    with current(h):
        gpu = prim.gpu
        if gpu is not None and gpu.lazy_first and type(args[0]) is Lazy and \
                args[0].handle is h:
            dev_args = [args[0]] + [_device_arg(a, inp, h, held)
                                    for a, inp in zip(args[1:], node.inputs[1:])]
        else:
            dev_args = [_device_arg(a, inp, h, held) for a, inp in zip(args, node.inputs)]
        try:
            out = run_kernel(prim, node.params, node.dtype, dev_args,
                             None if prim.bounds is None else
                             lambda pairs, flag: checks.watch(node, pairs, h, flag))
        except _OOM as exc:
            raise out_of_memory(prim.name, h, exc) from None
    if held:
        with h.lock:
            h.hold += held
    h.launched = node.seq
    return out


def run_kernel(prim, params, dtype, dev_args, watch=None):
    """`prim`'s kernel on inputs already on this device and stream (the current ones), as
    the GPU sees bfloat16 (`GpuKernel.bfloat16`); `watch` takes its index checks (the
    flag of a kernel that checked them itself: `cuda_checks.Checked`)."""
    if prim.gpu is None or not prim.gpu.host_scalars:
        dev_args = [cp.asarray(a) if isinstance(a, np.generic) else a for a in dev_args]
    params = own_params = params or {}
    out_bf16 = dtype.name == "bfloat16"
    kernel = prim.gpu or prim.kernel
    bf16 = prim.gpu.bfloat16 if prim.gpu is not None else "float32"
    on_bits = bf16 == "bits" or bf16 == "native"  # a bfloat16 result comes as its bits
    if bf16 == "bits":  # bytes reinterpreted: bfloat16 stays its bits and nothing rounds
        dev_args = [a.bits if type(a) is BF16 else a for a in dev_args]
        if out_bf16 and "dtype" in params:
            params = {**params, "dtype": np.dtype(np.uint16)}
    elif not on_bits and (out_bf16 or any(type(a) is BF16 for a in dev_args)):
        dev_args, params = _bf16_inputs(dev_args, params)
    out = kernel(cp, *dev_args, **(own_params if bf16 == "own" else params))
    if watch is not None:
        flag = None
        if type(out) is checks.Checked:  # the kernel checked its indices itself
            out, flag = out.value, out.flag
        watch(prim.bounds(*dev_args, **own_params), flag)
    if not prim.multi:  # a multi-output primitive's box stays a host object array
        if isinstance(out, (np.ndarray, np.generic, int, float, complex)):
            out = cp.asarray(out)
        if out_bf16 and type(out) is not BF16:  # (a selection from a box holds a BF16)
            out = BF16(out if on_bits else _to_bf16(out))
    return out


_FUSABLE_SCALARS = frozenset(d.type for d in FUSE_CTYPE)  # NumPy scalar types of the C types
_fusion_specs: dict = {}  # (primitive, params dtype, last input's, output's) -> spec or None


def _fusion_spec(prim, node):
    compute = node.params.get("dtype") if node.params else None
    return fusion_spec(prim, compute, node.inputs[-1].dtype, node.dtype, len(node.inputs))


def fusion_spec(prim, compute, last_in, out, n_inputs):
    """The generated-kernel spec of an elementwise op: `compute` its params' dtype (None:
    its inputs'), `last_in` and `out` its last input's and its output's dtypes."""
    key = (prim, compute, last_in, out)
    spec = _fusion_specs.get(key, False)
    if spec is False:
        form, out_np = prim.cform, out.np
        if form.cast:  # float -> int converts from the float (see fuse.X86_CASTS)
            src = last_in.np
            compute = src if fuse.x86_cast(FUSE_CTYPE.get(src), FUSE_CTYPE.get(out_np)) \
                else out_np
        elif compute is None:  # inputs already of the dtype the op computes in
            compute = last_in.np
        compute_t, out_t = FUSE_CTYPE.get(np.dtype(compute)), FUSE_CTYPE.get(out_np)
        if compute_t == "bf16":  # as ml_dtypes: in float, the result rounded
            compute_t = "float"
        spec = None
        if fuse.can_fuse(form, compute_t, out_t):
            types = ("bool",) + (compute_t,) * (n_inputs - 1) if form.select else \
                (compute_t,) * n_inputs
            spec = fuse.spec_of(prim.name, compute_t, out_t, types, form)
        _fusion_specs[key] = spec
    return spec


def _defer(node, args, h):
    """A Lazy for an elementwise node, or None when it can't be fused."""
    spec = _fusion_spec(node.prim, node)
    if spec is None:
        return None
    shape = node.shape
    operands = []
    held = []  # listed with the Lazy: a flush takes both at once, or neither
    depth = 0
    for a, inp in zip(args, node.inputs):
        kind = type(a)
        if kind is Lazy:
            if a.handle is not h or a.shape != shape or a.epoch != h.epoch or \
                    a.depth >= fuse.MAX_DEPTH:
                a = _value_of(a, h, held, inp.seq)
                if type(a) is not BF16 and CTYPE.get(a.dtype) is None:
                    return None
            elif a.depth > depth:
                depth = a.depth
        elif kind is cp.ndarray or kind is BF16:
            if kind is cp.ndarray and CTYPE.get(a.dtype) is None:
                return None
            st = inp.stream
            if st is not None and st.native is not h:
                a = _from_other_stream(a, st.native, h, held, inp.seq)
        elif kind is np.ndarray:
            if FUSE_CTYPE.get(a.dtype) is None:
                return None
            with current(h):
                a = _host_to_device(a, inp, h)
        elif kind not in _FUSABLE_SCALARS:
            return None
        operands.append(a)
    lz = Lazy(h, spec, operands, shape, node.dtype.np, depth + 1)
    if held:
        with h.lock:
            h.pending.append(_weak(lz))
            h.hold += held
    else:
        h.pending.append(_weak(lz))
    h.launched = node.seq  # computed by this flush
    return lz


def _value_of(lz, h, held, seq):
    """The value of a Lazy that can't join this DAG (another stream, another shape), made
    by node number `seq` of its stream.  One of another stream computed after the flush
    of its batch (`late`: by a reader, or by a later batch's op) is waited for by an event:
    its stream's `synced` does not cover it."""
    v = value(lz)
    if lz.handle is not h:
        v = _from_other_stream(v, lz.handle, h, held, 0 if lz.late else seq)
    return v


def _device_arg(a, inp, h, held):
    """An op input as the kernel takes it: on this device, ordered after its producer."""
    kind = type(a)
    if kind is Lazy:
        return _value_of(a, h, held, inp.seq)
    if kind is cp.ndarray or kind is BF16:
        st = inp.stream
        if st is not None and st.native is not h:
            return _from_other_stream(a, st.native, h, held, inp.seq)
        return a
    if isinstance(a, np.generic):
        return np.float32(a) if a.dtype == BF16_NP else a
    if kind is np.ndarray:
        if a.dtype == object:  # a multi-output primitive's box of results: read on the host
            return a
        return _host_to_device(a, inp, h)
    return a


def _from_other_stream(a, producer, h, held, seq=0):
    """`a` made on `producer`'s stream (by its node number `seq`, 0: not known), usable on
    `h`'s: an event wait, a peer copy if needed.  `a` goes into `held` all the same: the
    producer's pool must not hand its block out again before `h`'s reader has run."""
    if producer is None or producer is h:
        return a
    if 0 < seq <= producer.synced and producer.index == h.index:
        held.append(a)  # finished on the device already: nothing to wait for
        return a
    if type(a) is BF16:
        return BF16(_from_other_stream(a.bits, producer, h, held))
    if producer.index != h.index and not a.flags.c_contiguous:
        with producer.device, producer.stream:
            a = cp.ascontiguousarray(a)
    h.stream.wait_event(_recorded(producer))
    held.append(a)
    if producer.index != h.index:
        with h.device, h.stream:
            out = cp.empty(a.shape, a.dtype)
            out.data.copy_from_device_async(a.data, a.nbytes, h.stream)
        return out
    return a


_host_cache: dict = {}  # (id(handle), id(ndarray)) -> device copy, while the ndarray lives
_host_lock = threading.Lock()


def _host_to_device(a, inp, h):
    """A host array on this stream's device (call with the handle's device and stream current).

    Arrays made by `mx.array` are copied once per stream and cached; results of
    CPU streams are copied each time they are read.
    """
    bf16 = a.dtype == BF16_NP
    if inp.stream is None:
        key = (id(h), h.index, id(a))
        hit = _host_cache.get(key)
        if hit is not None and hit[0]() is a:
            return hit[1]
    src = a.view(np.uint16) if bf16 else a
    dev = cp.empty(src.shape, src.dtype)
    if src.nbytes >= PINNED_MIN:
        # Staged through pinned memory: the host copy releases the GIL and the transfer
        # is asynchronous, so other streams keep launching and the GPU keeps computing.
        pinned = cupyx.empty_pinned(src.shape, src.dtype)
        np.copyto(pinned, src)
        dev.set(pinned, stream=h.stream)
        _retain(h, [pinned])  # the pinned pool must not hand it out before the copy ran
    else:
        dev.set(np.require(src, requirements="C"), stream=h.stream)  # keeps 0-d as 0-d
    out = BF16(dev) if bf16 else dev
    if inp.stream is None:
        with _host_lock:
            _host_cache[key] = (weakref.ref(a, lambda _, k=key: _host_cache.pop(k, None)), out)
    return out


def _retain(h, objects):
    """Keep `objects` alive until the work queued so far on `h`'s stream has run; that
    work's event."""
    ev = _recorded(h)
    if objects:
        with _retained_lock:
            _sweep()
            _retained.append((ev, objects))
    return ev


def _recorded(h):
    """An event recorded on `h`'s stream now (made on its device, as CUDA requires)."""
    with h.device:
        ev = cp.cuda.Event(block=False, disable_timing=True)
        ev.record(h.stream)
    return ev


def _synced(h, seq):
    """Every node of `h`'s stream up to number `seq` has finished on the device."""
    with h.lock:
        if seq > h.synced:
            h.synced = seq
        if h.marks and h.marks[0][0] <= seq:
            h.marks = [m for m in h.marks if m[0] > seq]


# (event, objects) of every stream: one list, so that a stream no one uses again does not
# keep its last reads alive; swept at each retain and each wait for a stream
_retained: list = []
_retained_lock = threading.Lock()


def _sweep():
    """Let go of the retained objects whose work has run (call with `_retained_lock`)."""
    _retained[:] = [r for r in _retained if not r[0].done]


def out_of_memory(op, h, exc):
    """A RuntimeError naming the op and the bytes; frees the pool's cached blocks."""
    m = re.search(r"allocating ([\d,]+) bytes", str(exc))
    size = m.group(1).replace(",", "") if m else "?"
    cp.get_default_memory_pool().free_all_blocks()
    return RuntimeError(f"[{op}] Out of memory on Device(gpu, {h.index}): could not allocate "
                        f"{size} bytes.")


# -- fused kernels ------------------------------------------------------------------------------

def materialize(lz):
    """Compute a Lazy's value now, on its own stream."""
    if lz.value is not None:
        return
    if lz.error is not None:
        raise lz.error
    h = lz.handle
    with h.lock, current(h):
        if lz.value is None:
            _compute(fuse.collect(lz), h, h.epoch)


def _compute(plan, h, epoch):
    """Launch one kernel computing the plan's outputs (one shape); caller made h current.

    Its leaves need no holding here: one made on another stream is in `h.hold` from the
    Lazy's deferral to its epoch's flush (`computed` keeps those of a later launch), and
    the others were allocated on this stream."""
    roots = plan.roots
    shape = roots[0].shape
    if len(plan.leaves) + len(plan.consts) + len(roots) >= fuse.MAX_PARAMS:
        for n in plan.nodes:  # too many operands for one launch: one kernel per node
            if n.value is None:
                _compute(fuse.collect(n), h, epoch)
        return
    n = 1
    for d in shape:
        n *= d
    try:
        leaves = [flat_leaf(a, shape) for a in plan.leaves]
        outs = [_ndarray(shape, np.uint16 if r.dtype is BF16_NP else r.dtype) for r in roots]
    except _OOM as exc:
        raise out_of_memory(roots[0].spec[1], h, exc) from None
    if n:
        _launch(plan, leaves, outs, roots, n, h)
    for r, o in zip(roots, outs):
        computed(r, o, epoch)


def computed(lz, out, epoch):
    """Give Lazy `lz` its value, the cupy array `out` (a bfloat16 value's bits) that a
    kernel launched on its stream computes, in its stream's `epoch` (the flush or batch)."""
    lz.late = lz.epoch != epoch  # before the value: who sees the value sees this
    if lz.late:  # its leaves from other streams were held until its epoch's flush only
        _retain(lz.handle, lz.args)
    lz.value = BF16(out) if lz.dtype is BF16_NP else out
    lz.args = None
    if out.nbytes >= TRACK_BYTES:
        track_memory(lz.value)


def value(lz):
    """A Lazy's value (a cupy array or a BF16), computed now if it has not been."""
    materialize(lz)
    return lz.value


def flat_leaf(a, shape):
    """A leaf as a generated kernel reads it (`fuse.leaf_kinds`): itself where it is one
    value, C-ordered of the output's shape or a C-ordered row repeated along leading axes;
    else a copy broadcast to the output's shape."""
    if a.size == 1 or (a.flags.c_contiguous and (a.shape == shape or _is_row(a.shape, shape))):
        return a
    return cp.ascontiguousarray(cp.broadcast_to(a, shape))


def _is_row(leaf, shape):
    """Whether `leaf` broadcast to `shape` repeats it along leading axes only."""
    k = 0
    while k < len(leaf) and leaf[k] == 1:
        k += 1
    rest = leaf[k:]
    return len(rest) <= len(shape) and tuple(shape[len(shape) - len(rest):]) == rest


_launches: dict = {}  # everything about a kernel's launch that its key decides


def _launch(plan, leaves, outs, roots, n, h):
    pointers = [a.data.ptr for a in leaves]
    pointers += [o.data.ptr for o in outs]
    kinds = fuse.leaf_kinds(leaves, n)
    vec = fuse.vector_width(leaves + outs, pointers, n)
    key = (tuple(plan.specs), tuple(plan.leaf_dtypes), kinds,
           tuple([c.dtype for c in plan.consts]), tuple([r.dtype for r in roots]),
           tuple(plan.outputs), vec, h.index)
    entry = _launches.get(key)
    if entry is None:
        entry = _launches[key] = _launch_entry(plan, roots, kinds, vec, h)
    fptr, floats, codes = entry
    values = [float(c) if f else int(c) for c, f in zip(plan.consts, floats)]
    fuse.launch(fptr, h.ptr, pointers, n, values, codes, vec)


def _launch_entry(plan, roots, kinds, vec, h):
    return fuse.compiled(tuple(plan.specs), tuple(FUSE_CTYPE[d] for d in plan.leaf_dtypes),
                         kinds, tuple(FUSE_CTYPE[c.dtype] for c in plan.consts),
                         tuple(FUSE_CTYPE[r.dtype] for r in roots), tuple(plan.outputs), vec,
                         h.index)


def _flush(h, state, wait=True):
    """Compute the sinks of the DAGs deferred since the last flush; wait for the GPU, or
    (not `wait`) keep what the launches read from other streams until they have run."""
    launched = h.launched
    with h.lock:
        refs, h.pending = h.pending, []
        epoch = h.epoch
        h.epoch += 1
        if refs:
            lazies = [lz for ref in refs if (lz := ref()) is not None]
            with current(h):
                for plan in fuse.plans_for(lazies):
                    try:
                        _compute(plan, h, epoch)
                    except Exception as exc:
                        error = failure("fused elementwise", exc)
                        for lz in plan.roots:
                            lz.error = error
                        report(error, state)
            refs = lazies = plan = None  # not kept alive while the device is waited for
        hold, h.hold = h.hold, []  # inputs read from other streams: kept until the wait
    if not wait:
        ev = _retain(h, hold)
        with h.lock:
            h.marks.append((launched, ev))
            done = 0
            for seq, e in h.marks:
                if not e.done:
                    break
                done = seq
        if done:
            _synced(h, done)
        if h.checks:
            checks.settle_watched(h, state)
        return
    h.stream.synchronize()
    _synced(h, launched)
    del hold
    if _retained:
        with _retained_lock:
            _sweep()
    if h.checks:
        checks.settle_watched(h, state)


def run_deferred(state, wait=True):
    """The scheduler has run a batch of the stream's nodes: its pass over what `execute`
    deferred (the fused kernels of the batch's elementwise DAGs), then a wait for the GPU,
    unless not `wait` (`async_eval`: its work launched, `settle` waits for it when read).

    A CUDA error met waiting fails the arrays of the stream read or evaluated until the
    stream's synchronize (`settle`), and that synchronize reports it if nothing did."""
    h = state.native
    if h is None:
        return
    try:
        _flush(h, state, wait)
    except Exception as exc:
        h.fault = StreamError(f"[eval] CUDA error: {exc}")
        h.fault.__cause__ = exc


# -- the rest of the backend interface ------------------------------------------------------------

def settle(node):
    """Before `node` is read, returned by eval or copied to the host for a CPU op: the
    device's work up to it done (launched by an `async_eval` that did not wait), its index
    checks, its fused kernel's failure, and a CUDA error met by the flush of its stream
    since the last synchronize."""
    h = node.stream.native
    if h is not None and h.synced < node.seq:
        _wait_for(h, node)
    checks.settle_one(node)
    data = node.data
    if type(data) is Lazy and data.error is not None and node.error is None:
        node.error = data.error
    if h is not None and h.fault is not None and node.error is None:
        node.error = h.fault


def _wait_for(h, node):
    """Wait for the device's work up to `node`, which ran in a batch that did not wait
    for it: the event of the flush that ended that batch (not the work launched since:
    a step built and launched while the last one is read keeps the GPU busy), or one
    recorded now where that flush has not come yet (a producer another stream was
    signalled about mid-batch).  No flush here: another thread may be running the stream."""
    seq = node.seq
    with h.lock:
        mark = next((m for m in h.marks if m[0] >= seq), None)
    if mark is None:
        data = node.data
        if type(data) is Lazy and data.value is None and data.error is None:
            try:
                materialize(data)
            except Exception as exc:  # the node takes it (`settle`), as from a flush
                data.error = failure("fused elementwise", exc)
        ev = _recorded(h)
    else:
        ev = mark[1]
    try:
        ev.synchronize()
    except Exception as exc:
        h.fault = StreamError(f"[eval] CUDA error: {exc}")
        h.fault.__cause__ = exc
        return
    if mark is not None:
        _synced(h, mark[0])


def import_from(node):
    """A CPU-stream result read by a GPU op: handed over as a host array, copied in execute."""
    return node.stream.backend.to_numpy(node.data, node.stream)


def to_numpy(data, state):
    """The value on the host.  Called once `settle` has waited for the work of the node's
    batch, so a kernel's result is copied on a stream of its own, not behind what was
    launched since; a fused value is copied behind its kernel on its stream (a reader may
    have computed it after that batch's flush)."""
    h = state.native or handle(state)
    stream = _readers.get(h.index)
    if type(data) is Lazy:
        stream = h.stream
        data = value(data)
    if isinstance(data, np.generic | np.ndarray):
        return data
    with h.device:
        if stream is None:
            stream = _readers[h.index] = cp.cuda.Stream(non_blocking=True)
        with stream:
            if type(data) is BF16:
                return _host_copy(data.bits, stream).view(BF16_NP)
            return _host_copy(data, stream)


_readers: dict = {}  # device index -> the stream host copies of finished values go on


def _host_copy(x, stream):
    """`x` on the host in its own layout (a transpose stays one, a broadcast keeps its zero
    strides, as MLX's unified memory shows them): the bytes it spans, copied, then viewed."""
    if x.size == 0 or x.flags.c_contiguous or min(x.strides) < 0:
        return x.get(stream=stream, order="A")
    span = sum((n - 1) * st for n, st in zip(x.shape, x.strides)) + x.itemsize
    raw = cp.ndarray((span,), cp.uint8, x.data).get(stream=stream)
    return np.ndarray(x.shape, x.dtype, raw, strides=x.strides)


# pool memory handed to DLPack consumers, by pointer: they may write it (never removed:
# memory reused at such a pointer is only treated as shared too)
EXPORTED: set = set()


def memory_of(data):
    """The CuPy memory (`BaseMemory`) holding a device value (a cupy array or `BF16`)."""
    return (data.bits if type(data) is BF16 else data).data.mem


def shared(data) -> bool:
    """Whether a device value's memory was handed out through DLPack (`for_export`)."""
    return memory_of(data).ptr in EXPORTED


def for_export(data, state):
    """The cupy array (or `BF16`, whose capsule says bfloat16) behind `__dlpack__`, its
    stream's work finished."""
    h = state.native or handle(state)
    if type(data) is Lazy:
        data = value(data)
    h.stream.synchronize()
    EXPORTED.add(memory_of(data).ptr)
    return data


def synchronize(state):
    """Wait for every kernel of the stream; a CUDA error becomes RuntimeError."""
    h = state.native
    if h is None:
        return
    fault, h.fault = h.fault, None
    if fault is not None and not fault.reported:
        fault.reported = True
        raise RuntimeError(str(fault).replace("[eval]", "[synchronize]", 1)) from fault
    try:
        _flush(h, state)
        apply_cache_limit()
    except Exception as exc:
        raise RuntimeError(f"[synchronize] CUDA error on {state.stream}: {exc}") from exc


# -- bfloat16 ---------------------------------------------------------------------------------
_TO_BF16 = cp.ElementwiseKernel("float32 x", "uint16 y", "y = bf16_bits(x);",
                                "streamlet_to_bf16", preamble=BF16_BITS)


def _to_bf16(x):
    return _TO_BF16(x.astype(cp.float32, copy=False))


def _from_bf16(bits):
    return (bits.astype(cp.uint32) << 16).view(cp.float32)


def _is_bf16(v):
    try:
        return v is not None and np.dtype(v) == BF16_NP
    except (TypeError, ValueError):
        return False


def _bf16_inputs(args, params):
    """bfloat16 inputs as float32, and a float32 compute dtype where params ask for bfloat16."""
    args = [_from_bf16(a.bits) if type(a) is BF16 else a for a in args]
    if params:
        f32 = np.dtype(np.float32)
        params = {k: (f32 if not isinstance(v, (int, float, tuple)) and _is_bf16(v)
                      else v) for k, v in params.items()}
    return args, params


# -- GPU versions of kernels ------------------------------------------------------------------

_X86_ASTYPE = cp.ElementwiseKernel(
    "F x", "I y", "y = sizeof(I) == 8 ? (I)x86_i64((double)x) : (I)x86_i32((double)x);",
    "streamlet_x86_astype", preamble=fuse.X86_CASTS)


def astype_x86(xp, x, dtype):
    """astype where it is not fused: float -> int as the CPU converts (fuse.X86_CASTS),
    float -> bool by the bits (`build.truth`)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_ and x.dtype.kind == "f":
        return truth(cp, x)
    if x.dtype.kind != "f" or not fuse.x86_cast("float", CTYPE.get(dtype)):
        return x.astype(dtype)
    return _X86_ASTYPE(x, cp.empty(x.shape, dtype))

