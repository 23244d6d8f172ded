"""`mx.fast.cuda_kernel` and `mx.fast.metal_kernel`: custom GPU kernels from source.

`cuda_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True,
shared_memory=0)` makes a callable as MLX's: called with `inputs`, `output_shapes`,
`output_dtypes`, `grid` (in threads), `threadgroup`, `template`, `init_value`,
`verbose` and `stream`, it returns the list of outputs.  The kernel is MLX's: the body
`source` inside a generated signature (`const T* name` per input, followed by
`name_shape`, `name_strides` and `name_ndim` where the source uses them; then `T* name`
per output; template arguments as `constexpr` values and `using` types), compiled with
NVRTC through CuPy's RawKernel and launched on the stream's CUDA stream.  Shapes and
strides (in elements) come as device pointers, so `x_shape[i]` reads as in MLX.

One node runs the kernel into one buffer holding every output; each output is a view
node into it, so several outputs cost one launch.

There is no Metal backend: `metal_kernel` makes a callable that raises, naming
`cuda_kernel` as the alternative.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .device import Device, DeviceType
from .ops import build as b

_CUDA_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16",
               "float64": "double", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
               "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
               "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool",
               "complex64": "float2"}

_HEADER = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned int uint;
"""

_ALIGN = 256  # bytes between outputs in the shared buffer


def _ctype(d):
    return _CUDA_TYPES[d.name]


def _template_hash(template):
    parts = []
    for _, v in template:
        parts.append(("t" if v else "f") if isinstance(v, bool) else
                     str(v) if isinstance(v, int) else _ctype(v))
    return "".join("_" + p for p in parts)


def _source(kernel_name, header, body, input_names, inputs, uses, output_names, out_dtypes,
            template):
    """The CUDA source MLX would generate, with shapes and strides as pointers."""
    lines = [_HEADER, header, f'extern "C" __global__ void {kernel_name}(']
    params = []
    for name, x, (shape, strides, ndim) in zip(input_names, inputs, uses):
        params.append(f"    const {_ctype(x._dtype)}* {name}")
        if x.ndim > 0:
            if shape:
                params.append(f"    const int32_t* {name}_shape")
            if strides:
                params.append(f"    const int64_t* {name}_strides")
            if ndim:
                params.append(f"    const int {name}_ndim")
    params += [f"    {_ctype(d)}* {name}" for name, d in zip(output_names, out_dtypes)]
    lines.append(",\n".join(params) + ") {")
    for name, v in template:
        if isinstance(v, bool):
            lines.append(f"  constexpr bool {name} = {'true' if v else 'false'};")
        elif isinstance(v, int):
            lines.append(f"  constexpr int {name} = {v};")
        else:
            lines.append(f"  using {name} = {_ctype(v)};")
    lines += [body, "}"]
    return "\n".join(lines)


_compiled: dict = {}  # (kernel name, source) -> cupy.RawKernel


def _raw_kernel(cp, name, source):
    key = (name, source)
    k = _compiled.get(key)
    if k is None:
        k = _compiled[key] = cp.RawKernel(source, name, options=("--std=c++17",))
    return k


def _refuse_cpu(xp, *args, **params):
    raise RuntimeError("[cuda_kernel] A CUDA kernel runs on a GPU stream only.")


def _launch(xp, *inputs, spec):
    """Run the kernel (xp is CuPy here) into one buffer holding all outputs."""
    cp = xp
    args = []
    for x, d, (shape, strides, ndim) in zip(inputs, spec["in_dtypes"], spec["uses"]):
        if d.name == "bfloat16":  # the backend hands bfloat16 inputs over as float32
            x = (x.view(cp.uint32) >> 16).astype(cp.uint16)
        if spec["contiguous"]:
            x = cp.ascontiguousarray(x)
        args.append(x)
        if x.ndim > 0:
            if shape:
                args.append(cp.asarray(np.array(x.shape, np.int32)))
            if strides:
                args.append(cp.asarray(np.array([s // x.itemsize for s in x.strides],
                                                np.int64)))
            if ndim:
                args.append(np.int32(x.ndim))
    buf = cp.empty(spec["total"], cp.uint8)
    for off, nbytes, d, shape in spec["outputs"]:
        view = buf[off:off + nbytes].view(_storage(d))
        if spec["init"] is not None:
            view[...] = _init_bits(cp, spec["init"], d)
        args.append(view)
    tg = spec["threadgroup"]
    blocks = tuple(max(1, -(-g // t)) for g, t in zip(spec["grid"], tg))
    if all(g > 0 for g in spec["grid"]):
        kernel = _raw_kernel(cp, spec["name"], spec["source"])
        kernel(blocks, tg, tuple(args), shared_mem=spec["shared"])
    return buf


def _storage(d):
    """The NumPy dtype an output's bytes are stored as (bfloat16 as its uint16 bits)."""
    return np.uint16 if d.name == "bfloat16" else d.np


def _init_bits(cp, value, d):
    if d.name == "bfloat16":
        return np.array(value, d.np).view(np.uint16)
    return np.array(value).astype(d.np)


def _select(xp, buf, offset, nbytes, dtype, shape):
    """One output of a kernel's buffer; a bfloat16 one as float32 (the backend keeps
    bfloat16 as bits and converts what a kernel returns)."""
    view = buf[offset:offset + nbytes].view(_storage(dtype)).reshape(shape)
    if dtype.name == "bfloat16":
        return (view.astype(xp.uint32) << 16).view(xp.float32)
    return view


_KERNEL = b.make("cuda_kernel", _refuse_cpu, gpu=_launch)
_SELECT = b.make("cuda_kernel.output", _select)


def _cuda_available():
    try:
        from ..backend import gpu_count
        return gpu_count() > 0
    except Exception:
        return False


class _CustomKernel:
    """The callable `cuda_kernel` returns."""

    def __init__(self, name, input_names, output_names, source, header,
                 ensure_row_contiguous, shared_memory):
        self.name, self.input_names = name, list(input_names)
        self.output_names, self.source, self.header = list(output_names), source, header
        self.contiguous, self.shared = bool(ensure_row_contiguous), int(shared_memory)
        self.uses = [(f"{n}_shape" in source, f"{n}_strides" in source, f"{n}_ndim" in source)
                     for n in self.input_names]

    def __call__(self, *, inputs, output_shapes, output_dtypes, grid, threadgroup,
                 template=None, init_value=None, verbose=False, stream=None):
        inputs = [b.as_array(x, "cuda_kernel") for x in inputs]
        if len(inputs) != len(self.input_names):
            raise ValueError(f"[custom_kernel] Expected `inputs` to have size "
                             f"{len(self.input_names)} but got size {len(inputs)}.")
        for what, v in (("output_shapes", output_shapes), ("output_dtypes", output_dtypes)):
            if len(v) != len(self.output_names):
                raise ValueError(f"[custom_kernel] Expected `{what}` to have size "
                                 f"{len(self.output_names)} but got size {len(v)}.")
        template = list(template or [])
        for _, v in template:
            if not isinstance(v, (bool, int, dt.Dtype)):
                raise ValueError("[cuda_kernel] Invalid template argument. Must be "
                                 "`mlx.core.Dtype`, `int` or `bool`.")
        st = b.resolve(stream)
        if st.stream.device.type.value == 0:
            raise ValueError("[custom_kernel] Only supports the GPU.")
        dtypes = [dt.as_dtype(d) for d in output_dtypes]
        shapes = [tuple(int(n) for n in s) for s in output_shapes]
        kernel_name = f"custom_kernel_{self.name}{_template_hash(template)}"
        source = _source(kernel_name, self.header, self.source, self.input_names, inputs,
                         self.uses, self.output_names, dtypes, template)
        if verbose:
            print(f"Generated source code for `{kernel_name}`:\n```\n{source}\n```")
        layout, total = [], 0
        for d, s in zip(dtypes, shapes):
            nbytes = math.prod(s) * d.size
            layout.append((total, nbytes, d, s))
            total += -(-nbytes // _ALIGN) * _ALIGN
        spec = {"name": kernel_name, "source": source, "uses": self.uses,
                "in_dtypes": [x._dtype for x in inputs], "contiguous": self.contiguous,
                "outputs": layout, "total": max(total, 1), "init": init_value,
                "grid": tuple(int(g) for g in grid),
                "threadgroup": tuple(int(t) for t in threadgroup), "shared": self.shared}
        buf = b.node(_KERNEL, tuple(inputs), (spec["total"],), dt.uint8, {"spec": spec}, st)
        return [b.node(_SELECT, (buf,), s, d, {"offset": off, "nbytes": n, "dtype": d,
                                                "shape": s}, st)
                for off, n, d, s in layout]


def cuda_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True,
                shared_memory=0):
    """A custom CUDA kernel from the body of its function, run through CuPy on GPU
    streams (MLX's `mx.fast.cuda_kernel`).

    Without CuPy and a CUDA GPU it raises RuntimeError, as MLX's CPU build does.
    """
    if not output_names:
        raise ValueError("[custom_kernel] Must specify at least one output.")
    if not _cuda_available():
        raise RuntimeError("[cuda_kernel] No CUDA back-end: custom CUDA kernels need CuPy and "
                           "a CUDA GPU (pip install 'streamlet[cuda]').")
    return _CustomKernel(name, input_names, output_names, source, header,
                         ensure_row_contiguous, shared_memory)


def _no_metal(xp, *args, **params):
    raise RuntimeError("[metal_kernel] No Metal back-end.")


_METAL = b.make("metal_kernel", _no_metal, multi=True)


def _device_of(stream):
    if stream is None:
        return None
    if isinstance(stream, DeviceType):
        return Device(stream)
    return stream if isinstance(stream, Device) else stream.device


def metal_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True,
                 atomic_outputs=False, compile_options=None):
    """MLX's Metal custom kernel: streamlet has no Metal backend, so calling the returned
    function raises RuntimeError; write the kernel in CUDA with `mx.fast.cuda_kernel`.
    While a function is traced for `mx.export_function` the call is recorded, on a GPU
    stream, for a program with Metal to run (as MLX's CPU build does).

    >>> k = mx.fast.metal_kernel("k", ["x"], ["y"], "y[0] = x[0];")
    >>> k(inputs=[mx.ones(1)], output_shapes=[(1,)], output_dtypes=[mx.float32],
    ...   grid=(1, 1, 1), threadgroup=(1, 1, 1))
    Traceback (most recent call last):
    RuntimeError: [metal_kernel] No Metal back-end. ...
    """
    if not output_names:
        raise ValueError("[metal_kernel] Must specify at least one output.")

    def kernel(*, inputs, output_shapes, output_dtypes, grid, threadgroup, template=None,
               init_value=None, verbose=False, stream=None):
        from .export import Elsewhere, in_export_tracing
        for what, v, n in (("inputs", inputs, input_names), ("output_shapes", output_shapes,
                           output_names), ("output_dtypes", output_dtypes, output_names)):
            if len(v) != len(n):
                raise ValueError(f"[metal_kernel] Expected `{what}` to have size {len(n)} "
                                 f"but got size {len(v)}.")
        if not in_export_tracing():
            raise RuntimeError("[metal_kernel] No Metal back-end. streamlet runs custom GPU "
                               "kernels written in CUDA: use mx.fast.cuda_kernel on a CUDA GPU.")
        device = _device_of(stream)
        if device is not None and device.type != DeviceType.gpu:
            raise ValueError("[metal_kernel] Only supports the GPU.")
        params = {"name": name, "input_names": tuple(input_names),
                  "output_names": tuple(output_names), "source": source, "header": header,
                  "contiguous": bool(ensure_row_contiguous), "atomic": bool(atomic_outputs),
                  "options": dict(compile_options or {}),
                  "grid": tuple(int(g) for g in grid),
                  "threadgroup": tuple(int(t) for t in threadgroup),
                  "template": tuple(tuple(t) for t in template or ()), "init": init_value}
        outs = [(tuple(int(n) for n in s), dt.as_dtype(d))
                for s, d in zip(output_shapes, output_dtypes)]
        inputs = [b.as_array(x, "metal_kernel") for x in inputs]
        return list(b.multi(_METAL, inputs, outs, params, Elsewhere(Device(DeviceType.gpu))))
    return kernel
