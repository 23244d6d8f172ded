"""streamlet.core: the mlx.core-compatible surface.

>>> import streamlet.core as mx
>>> s = mx.new_stream(mx.cpu)
>>> (mx.ones((2,)) + mx.ones((2,), stream=s)).tolist()
[2.0, 2.0]
"""
import importlib as _importlib

from . import cuda, distributed, linalg, metal, random  # noqa: F401
from . import operators as _operators
from .. import _public
from .array import array  # noqa: F401
from .device import (Device, DeviceType, cpu, device_count, device_info,  # noqa: F401
                     gpu, is_available)
from .dtypes import (Dtype, DtypeCategory, bfloat16, bool_, complex64,  # noqa: F401
                     complexfloating, finfo, float16, float32, float64, floating, generic,
                     iinfo, inexact, int8, int16, int32, int64, integer, issubdtype, number,
                     promote_types, signedinteger, uint8, uint16, uint32, uint64,
                     unsignedinteger)
from .dtypes import isdtype  # noqa: F401
from .eval import async_eval, eval  # noqa: F401
from .printing import PrintOptions, get_printoptions, printoptions, set_printoptions  # noqa
from .dlpack import from_dlpack  # noqa: F401
from .memory import (clear_cache, get_active_memory, get_cache_memory,  # noqa: F401
                     get_memory_limit, get_peak_memory, reset_peak_memory, set_cache_limit,
                     set_memory_limit, set_wired_limit)
from .ops import *  # noqa: F401,F403
from .ops import __all__ as _ops_names
from .transforms import grad, jvp, stop_gradient, value_and_grad, vjp  # noqa: F401
from .vmap import vmap  # noqa: F401
from .custom import checkpoint, custom_function  # noqa: F401
from .compile import compile, disable_compile, enable_compile  # noqa: F401
from .stream import (Stream, StreamContext, ThreadLocalStream, clear_streams,  # noqa: F401
                     default_device, default_stream, get_streams, new_stream,
                     new_thread_local_stream, new_thread_unsafe_stream, set_default_device,
                     set_default_stream, stream, stream_from_thread_local_stream, synchronize)

_operators.install()
__version__ = "0.1.0"
from .timeline import Trace, TraceOp, TraceWait, start_trace, stop_trace, trace  # noqa: F401,E402,E501

# The public names: MLX's (the op builders come with the ops package's own list) and the few
# streamlet adds (get_streams, stream_from_thread_local_stream, promote_types, AxisError, the
# timeline trace's names; tests/test_public_api.py lists them).
# The modules this package is made of (graph, scheduler, ops, ...) are attributes too, as
# any package's submodules are, but not part of the surface: `__dir__` leaves them out.
__all__ = [*_ops_names,
           "cuda", "distributed", "fast", "fft", "linalg", "metal", "random",
           "array", "Device", "DeviceType", "cpu", "device_count", "device_info", "gpu",
           "is_available",
           "Dtype", "DtypeCategory", "bfloat16", "bool_", "complex64", "complexfloating",
           "finfo", "float16", "float32", "float64", "floating", "generic", "iinfo", "inexact",
           "int8", "int16", "int32", "int64", "integer", "isdtype", "issubdtype", "number",
           "promote_types", "signedinteger", "uint8", "uint16", "uint32", "uint64",
           "unsignedinteger",
           "async_eval", "eval",
           "load", "save", "save_gguf", "save_safetensors", "savez", "savez_compressed",
           "PrintOptions", "get_printoptions", "printoptions", "set_printoptions",
           "from_dlpack",
           "clear_cache", "get_active_memory", "get_cache_memory", "get_memory_limit",
           "get_peak_memory", "reset_peak_memory", "set_cache_limit", "set_memory_limit",
           "set_wired_limit",
           "grad", "jvp", "stop_gradient", "value_and_grad", "vjp", "vmap", "checkpoint",
           "custom_function", "compile", "disable_compile", "enable_compile", "export_to_dot",
           "Stream", "StreamContext", "ThreadLocalStream", "clear_streams", "default_device",
           "default_stream", "get_streams", "new_stream", "new_thread_local_stream",
           "new_thread_unsafe_stream", "set_default_device", "set_default_stream", "stream",
           "stream_from_thread_local_stream", "synchronize",
           "FunctionExporter", "export_function", "exporter", "import_function",
           "Trace", "TraceOp", "TraceWait", "start_trace", "stop_trace"]

# Leaf features, imported on first use (PEP 562) to keep `import streamlet.core` short:
# together about a sixth of its time.  name -> the module that defines it.
_LAZY = {"fast": "fast", "fft": "fft", "export_to_dot": "dot",
         **dict.fromkeys(("load", "save", "save_gguf", "save_safetensors", "savez",
                          "savez_compressed"), "io"),
         **dict.fromkeys(("FunctionExporter", "export_function", "exporter",
                          "import_function"), "export")}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _importlib.import_module(f".{_LAZY[name]}", __name__)
    value = module if name == _LAZY[name] else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return _public.names(globals())
