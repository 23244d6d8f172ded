"""Fusion of elementwise chains on a GPU stream into one generated CUDA kernel.

`execute` does not launch an elementwise op: it returns a `Lazy`, a node of an
expression DAG whose leaves are device arrays and scalar constants.  The DAG is
compiled and launched when something needs a value: a non-elementwise op that
takes it as input, a read, another stream, or the end of the eval that built it
(`flush`, called once the stream's nodes of an eval have run).  At a flush only
the sinks of the DAG are computed, in one kernel with one output per sink; an
intermediate array the user still holds stays a `Lazy` and is recomputed from
its own leaves (one small kernel) if it is ever read.

A kernel is cached by the DAG's structure: op names, C types, which leaf or
constant feeds which operand.  Constant values are kernel arguments, not part
of the source, so a loop with changing scalars reuses one kernel.  The body is
compiled with `--fmad=false` so that `a * b + c` rounds as NumPy does.

bfloat16 values are floats in the kernel (`BF16_VALUE`) that each op's result is rounded
to, as ml_dtypes rounds on the CPU; leaves and results are their uint16 bits.

Launch cost matters as much as bandwidth (a 16-element op is all overhead): the
kernel arguments are packed into one buffer and passed to `cuLaunchKernel`
directly, which is several µs cheaper than `RawKernel.__call__`.  Contiguous
operands of the output's shape are read and written four elements at a time.
"""
from __future__ import annotations

import ctypes
import operator
import struct
import threading

import cupy as cp
import ml_dtypes
import numpy as np
from cupy.cuda import driver

from ..core.ops.cforms import FLOATS

_ndarray = cp.ndarray

# NumPy dtype -> C type for what a generated kernel can compute in.
CTYPE = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char", np.dtype(np.int16): "short",
    np.dtype(np.uint16): "unsigned short", np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int", np.dtype(np.int64): "long long",
    np.dtype(np.uint64): "unsigned long long", np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
BF16_NP = np.dtype(ml_dtypes.bfloat16)
# The generated kernels also compute bfloat16 ops (as float, each result rounded to
# bfloat16: what ml_dtypes does on the CPU), reading and writing their bits.
FUSE_CTYPE = {**CTYPE, BF16_NP: "bf16"}
FLOAT_TYPES = frozenset(FLOATS) | {"bf16"}  # C types passed and converted as floats
MAX_PARAMS = 400  # 8 bytes each, inside cuLaunchKernel's 4 KiB parameter limit
# A chain longer than this is launched in pieces: one generated kernel per thousands of
# chained ops takes NVRTC minutes to compile (a deep graph), pieces of one shape are cached
MAX_DEPTH = 128


class BF16:
    """A bfloat16 array on the GPU: its bits as a cupy uint16 array."""

    __slots__ = ("bits", "__weakref__")

    def __init__(self, bits):
        self.bits = bits

    @property
    def nbytes(self):
        return self.bits.nbytes

    def __dlpack__(self, **kwargs):
        """The bits' capsule retyped to DLPack's bfloat16 (kDLBfloat), which CuPy lacks."""
        from ..core.capsule import to_bfloat16
        return to_bfloat16(self.bits.__dlpack__(**kwargs))

    def __dlpack_device__(self):
        return self.bits.__dlpack_device__()


class Lazy:
    """An elementwise op not launched yet: its op, its operands and, once run, its value."""

    __slots__ = ("handle", "spec", "args", "shape", "dtype", "value", "pos", "epoch",
                 "depth", "error", "late", "__weakref__")

    def __init__(self, handle, spec, args, shape, dtype, depth=1):
        self.handle = handle  # the stream it runs on
        self.spec = spec  # interned: (id, op, compute, output and operand C types, C form)
        self.args = args  # Lazy, cupy arrays or BF16 (leaves), NumPy scalars (constants)
        self.shape = shape
        self.dtype = dtype  # NumPy dtype of the value
        self.value = None  # the cupy array once computed
        self.pos = 0  # place in the plan being built
        self.epoch = handle.epoch if handle is not None else 0  # the flush it belongs to
        self.depth = depth  # the longest chain of unlaunched ops ending here
        self.error = None  # its kernel's failure at a flush (a StreamError), given to its node
        self.late = False  # computed after its epoch's flush (`cuda.computed`)

    def __dlpack_device__(self):
        return (2, self.handle.index)  # kDLCUDA

    nbytes = 0  # nothing allocated until it runs (the scheduler's memory accounting reads it)


_specs: dict = {}
_spec_lock = threading.Lock()


def spec_of(op, compute, out, operand_types, form):
    """The interned spec tuple of op `op` (its name) with C form `form` (ids make cache
    keys cheap)."""
    key = (op, compute, out, operand_types, form)
    s = _specs.get(key)
    if s is None:
        with _spec_lock:
            s = _specs.setdefault(key, (len(_specs),) + key)
    return s


# float -> integer casts as the CPU makes them (x86's conversions, which NumPy uses): a
# value outside int32 (int64 for int64) or NaN becomes that type's minimum, and the narrow
# types keep the low bits of the int32; CUDA's own conversions saturate instead.  uint32
# and uint64 differ between NumPy's loops and are left to CUDA (in range, all agree).
X86_CASTS = """
__device__ __forceinline__ int x86_i32(double x) {
  return (x > -2147483649.0 && x < 2147483648.0) ? (int)x : (int)0x80000000u;
}
__device__ __forceinline__ long long x86_i64(double x) {
  return (x >= -9223372036854775808.0 && x < 9223372036854775808.0)
      ? (long long)x : (long long)0x8000000000000000ull;
}
"""
_X86_CAST = {"signed char": "x86_i32", "unsigned char": "x86_i32", "short": "x86_i32",
             "unsigned short": "x86_i32", "int": "x86_i32", "long long": "x86_i64"}


# a value's truth as NumPy reads it: CuPy builds kernels with -ftz=true, where a float
# compared with zero reads a subnormal as zero; its bits say it is not
TRUTH = """
template <typename T> __device__ __forceinline__ bool truth(T x) { return x != (T)0; }
__device__ __forceinline__ bool truth(float x) { return (__float_as_uint(x) << 1) != 0u; }
__device__ __forceinline__ bool truth(double x) {
  return ((unsigned long long)__double_as_longlong(x) << 1) != 0ull;
}
__device__ __forceinline__ bool truth(bf16 x) { return truth(x.f); }
"""

# float32 -> bfloat16 bits, to nearest even, NaN kept quiet (what ml_dtypes does); the
# other kernels that store bfloat16 (`cuda._to_bf16`, `cuda_fast`) call it too
BF16_BITS = r"""
__device__ __forceinline__ unsigned short bf16_bits(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
"""

# a bfloat16 value in a generated kernel: a float that every assignment rounds
BF16_VALUE = BF16_BITS + """
struct bf16 {
  float f;
  __device__ __forceinline__ bf16() : f(0.0f) {}
  __device__ __forceinline__ bf16(float x)
      : f(__uint_as_float((unsigned int)bf16_bits(x) << 16)) {}
  __device__ __forceinline__ operator float() const { return f; }
  __device__ __forceinline__ unsigned short bits() const {
    return (unsigned short)(__float_as_uint(f) >> 16);
  }
  static __device__ __forceinline__ bf16 of(unsigned short b) {
    bf16 r;
    r.f = __uint_as_float((unsigned int)b << 16);
    return r;
  }
};
"""


def stored(t):
    """The C type a generated kernel reads and writes values of C type `t` as."""
    return "unsigned short" if t == "bf16" else t


def _load(t, text):
    return f"bf16::of({text})" if t == "bf16" else text


def _store(t, text):
    return f"{text}.bits()" if t == "bf16" else text


def x86_cast(compute, out):
    """The X86_CASTS function converting C type `compute` to `out`, or None."""
    return _X86_CAST.get(out) if compute in FLOAT_TYPES else None


def expression(spec, operands):
    """The C expression of one node, operands already named."""
    _, _, t, out, types, form = spec
    if form.cast and x86_cast(t, out):
        return f"({out}){x86_cast(t, out)}({operands[0]})"
    text = form.render(t, [f"truth({o})" if ty == "bool" else f"(({ty}){o})"
                           for ty, o in zip(types, operands)])
    text = text.replace("(bool)(", "truth(")  # a form's own reading of a value as bool
    return f"truth({text})" if out == "bool" else f"({out})({text})"


def can_fuse(form, compute, out):
    """Whether an op of C form `form` computing in C type `compute` (None: no C type)
    and giving `out` has a generated kernel."""
    return compute is not None and out is not None and form.takes(compute)


# -- collecting a DAG ---------------------------------------------------------------------

class Plan:
    """Nodes to compute (producers first), their leaves (cupy arrays; a bfloat16 leaf's
    bits) with their dtypes, their constants, and which nodes are outputs."""

    __slots__ = ("nodes", "leaves", "leaf_dtypes", "consts", "specs", "outputs", "leaf_pos",
                 "const_pos")

    def __init__(self):
        self.nodes, self.leaves, self.consts, self.specs = [], [], [], []
        self.leaf_dtypes, self.outputs = [], []
        self.leaf_pos, self.const_pos = {}, {}

    def leaf(self, a):
        """The place of leaf `a` (a cupy array or a BF16) among the plan's leaves."""
        bf16 = type(a) is BF16
        if bf16:
            a = a.bits
        j = self.leaf_pos.get(id(a))
        if j is None:
            j = self.leaf_pos[id(a)] = len(self.leaves)
            self.leaves.append(a)
            self.leaf_dtypes.append(BF16_NP if bf16 else a.dtype)
        return j

    @property
    def roots(self):
        return [self.nodes[p] for p in self.outputs]


def collect(root):
    """The plan computing `root` from the unevaluated DAG under it (one shape): its nodes
    in order of depth, producers first, through `plans_for`."""
    found, seen, stack = [root], {id(root)}, [root]
    while stack:
        for a in stack.pop().args:
            if type(a) is Lazy and a.value is None and id(a) not in seen:
                seen.add(id(a))
                found.append(a)
                stack.append(a)
    found.sort(key=_depth)
    return plans_for(found)[0]


_depth = operator.attrgetter("depth")


def plans_for(pending):
    """Plans for the Lazies an eval made (in the order made, so producers first), by shape.

    Their operands that are still unevaluated were made in the same eval (older
    ones are computed when taken as operands), so one pass suffices.  The
    outputs of a plan are its sinks: what no other node of the eval consumed.
    This loop runs once per op of every small-op program, hence its style.
    """
    plans = {}
    shape = plan = None
    for n in pending:
        if n.value is not None:
            continue
        if n.shape != shape:
            shape = n.shape
            plan = plans.get(shape)
            if plan is None:
                plan = plans[shape] = Plan()
                used = plan.outputs
            else:
                used = plan.outputs
            nodes, specs, leaf_pos, const_pos = (plan.nodes, plan.specs, plan.leaf_pos,
                                                 plan.const_pos)
        refs = [n.spec[0]]
        for a in n.args:
            if type(a) is Lazy:
                v = a.value
                if v is None:
                    p = a.pos
                    used[p] = 1
                    refs.append(p)
                    continue
                a = v
            k = id(a)
            if type(a) is _ndarray:
                j = leaf_pos.get(k)
                if j is None:
                    j = leaf_pos[k] = len(plan.leaves)
                    plan.leaves.append(a)
                    plan.leaf_dtypes.append(a.dtype)
                refs.append(-1 - 2 * j)
            elif type(a) is BF16:
                refs.append(-1 - 2 * plan.leaf(a))
            else:
                j = const_pos.get(k)
                if j is None:
                    vk = (type(a), a.tobytes())
                    j = const_pos.get(vk)
                    if j is None:
                        j = const_pos[vk] = len(plan.consts)
                        plan.consts.append(a)
                    const_pos[k] = j
                refs.append(-2 - 2 * j)
        n.pos = len(nodes)
        nodes.append(n)
        used.append(0)
        specs.append(tuple(refs))
    out = list(plans.values())
    for plan in out:
        plan.outputs = [p for p, u in enumerate(plan.outputs) if not u]
    return out


# -- code generation -------------------------------------------------------------------------

def _operand(ref):
    if ref >= 0:
        return f"v{ref}"
    if ref % 2:
        return f"x{(-1 - ref) // 2}"
    return f"c{(-2 - ref) // 2}"


def leaf_kinds(leaves, n):
    """How a kernel of `n` outputs reads each leaf (`flat_leaf`'s): 0 at the output's
    index, 1 its one value, m > 1 at the index modulo m (a row broadcast along leading
    axes: a bias)."""
    return tuple([0 if a.size == n else 1 if a.size == 1 else a.size for a in leaves])


def source(specs, leaf_types, kinds, const_types, out_types, outputs, vec):
    """CUDA source of a fused kernel `k` (see `launch` for its parameters); `kinds` as
    `leaf_kinds` gives them."""
    spec_by_id = {s[0]: s for s in _specs.values()}
    params = [f"const {stored(t)}* __restrict__ p{i}" for i, t in enumerate(leaf_types)]
    params += [f"{stored(t)}* __restrict__ q{i}" for i, t in enumerate(out_types)]
    params.append("long long n")
    params += [f"{'double' if t in FLOAT_TYPES else 'long long'} r{i}"
               for i, t in enumerate(const_types)]
    fargs = [f"{t} x{i}" for i, t in enumerate(leaf_types)]
    fargs += [f"{t} c{i}" for i, t in enumerate(const_types)]
    fargs += [f"{stored(t)}& o{i}" for i, t in enumerate(out_types)]
    body = []
    for p, s in enumerate(specs):
        spec = spec_by_id[s[0]]
        body.append(f"  {spec[3]} v{p} = {expression(spec, [_operand(r) for r in s[1:]])};")
    body += [f"  o{i} = {_store(out_types[i], f'v{p}')};" for i, p in enumerate(outputs)]
    lines = [BF16_VALUE, X86_CASTS, TRUTH,
             f"__device__ __forceinline__ void body({', '.join(fargs)}) {{", *body, "}"]
    lines.append("template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };")
    lines.append(f'extern "C" __global__ void k({", ".join(params)}) {{')
    lines += [f"  const {t} c{i} = ({t})r{i};" for i, t in enumerate(const_types)]
    lines += [f"  const {stored(t)} s{i} = p{i}[0];" for i, t in enumerate(leaf_types)
              if kinds[i] == 1]
    lines.append(f"  long long base = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * {vec};")
    lines.append("  if (base >= n) return;")

    def call(load, store_to, index):
        xs = [_load(t, load(i) if not kinds[i] else f"s{i}" if kinds[i] == 1 else
                    f"p{i}[({index}) % {kinds[i]}]") for i, t in enumerate(leaf_types)]
        cs = [f"c{i}" for i in range(len(const_types))]
        os_ = [store_to(i) for i in range(len(out_types))]
        return f"body({', '.join(xs + cs + os_)});"

    if vec > 1:
        lines.append(f"  if (base + {vec} <= n) {{")
        for i, t in enumerate(leaf_types):
            if not kinds[i]:
                lines.append(f"    Vec<{stored(t)}, {vec}> l{i} = "
                             f"*reinterpret_cast<const Vec<{stored(t)}, {vec}>*>(p{i} + base);")
        lines += [f"    Vec<{stored(t)}, {vec}> w{i};" for i, t in enumerate(out_types)]
        lines.append(f"    #pragma unroll\n    for (int j = 0; j < {vec}; ++j) {{")
        lines.append("      " + call(lambda i: f"l{i}.v[j]", lambda i: f"w{i}.v[j]", "base + j"))
        lines.append("    }")
        lines += [f"    *reinterpret_cast<Vec<{stored(t)}, {vec}>*>(q{i} + base) = w{i};"
                  for i, t in enumerate(out_types)]
        lines.append("    return;\n  }")
    lines.append(f"  for (long long i = base; i < n && i < base + {vec}; ++i) {{")
    lines.append("    " + call(lambda i: f"p{i}[i]", lambda i: f"q{i}[i]", "i"))
    lines.append("  }\n}")
    return "\n".join(lines)


_kernels: dict = {}  # (key, device) -> (module, function pointer)
_kernel_lock = threading.Lock()
_OPTIONS = ("--std=c++17", "--fmad=false")


def kernel_for(key, device, make_source):
    """The compiled function pointer for `key` on `device` (compiled once per process)."""
    hit = _kernels.get((key, device))
    if hit is None:
        with _kernel_lock:
            hit = _kernels.get((key, device))
            if hit is None:
                mod = cp.RawModule(code=make_source(), options=_OPTIONS)
                fn = mod.get_function("k")  # a RawKernel; its Function holds the pointer
                hit = (fn, fn.kernel.ptr)
                _kernels[(key, device)] = hit
    return hit[1]


# -- launching --------------------------------------------------------------------------------

class _ParamBuffer(threading.local):
    """One kernel-argument buffer per thread; cuLaunchKernel copies it at launch."""

    def __init__(self):
        self.buf = ctypes.create_string_buffer(8 * MAX_PARAMS + 64)
        self.size = ctypes.c_size_t(0)
        # CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, END
        self.extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(self.buf), 2,
                                           ctypes.addressof(self.size), None)
        self.extra_ptr = ctypes.addressof(self.extra)


_params = _ParamBuffer()
_formats: dict = {}
BLOCK = 256


def launch(fptr, stream_ptr, pointers, n, consts, const_codes, vec):
    """Launch a generated kernel: pointers (leaves then outputs), n, then constants."""
    fmt = _formats.get((len(pointers), const_codes))
    if fmt is None:
        fmt = _formats[(len(pointers), const_codes)] = struct.Struct(
            "<" + "Q" * len(pointers) + "q" + const_codes)
    threads = (n + vec - 1) // vec
    launch_packed(fptr, fmt, (*pointers, n, *consts), max(1, (threads + BLOCK - 1) // BLOCK),
                  BLOCK, stream_ptr)


def launch_packed(fptr, fmt, values, grid, block, stream_ptr, shared=0):
    """Launch a compiled kernel whose parameters the `struct.Struct` `fmt` packs from
    `values` (native alignment: as CUDA lays a kernel's parameters out)."""
    p = _params
    fmt.pack_into(p.buf, 0, *values)
    p.size.value = fmt.size
    driver.launchKernel(fptr, grid, 1, 1, block, 1, 1, shared, stream_ptr, 0, p.extra_ptr)


def vector_width(arrays, pointers, n):
    """4 (elements a thread reads and writes at once) when every operand but the
    broadcast scalars is aligned for it, else 1."""
    if n < 4:
        return 1
    for a, p in zip(arrays, pointers):
        if p % (4 * a.itemsize) and a.size == n:  # the others are read one at a time
            return 1
    return 4


def compiled(specs, leaf_types, kinds, const_types, out_types, outputs, vec, device):
    """A plan's kernel on `device` and how its constants are passed to `launch`: (function
    pointer, which constants are floats, their struct codes)."""
    key = (specs, leaf_types, kinds, const_types, out_types, outputs, vec)
    fptr = kernel_for(key, device, lambda: source(*key))
    codes = "".join(const_code(t) for t in const_types)
    return fptr, tuple(c == "d" for c in codes), codes


def const_code(t):
    return "d" if t in FLOAT_TYPES else ("Q" if t == "unsigned long long" else "q")
