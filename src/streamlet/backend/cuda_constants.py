"""Device arrays the process keeps once made (the row of ones of `cuda_reduce`, RoPE's
default frequencies).

Each is made by kernels on the current stream, so after whatever that stream still has
queued on the memory CuPy's pool recycled for it (a copy from the host on another stream
was not: a kernel queued before it wrote over the row afterwards), then waited for, so
that every stream of the device reads it whole.  Inside a CUDA graph's capture one is
made but not kept: its memory is the graph's pool's, and goes with the graph.
"""
from __future__ import annotations

import threading

import cupy as cp

_kept: dict = {}  # (device, key) -> array
_lock = threading.Lock()


def constant(key, make):
    """The device array `make()` gives, kept under `key` for the current device."""
    full = (cp.cuda.runtime.getDevice(), key)
    value = _kept.get(full)
    if value is None:
        stream = cp.cuda.get_current_stream()
        if stream.is_capturing():
            return make()
        with _lock:
            value = _kept.get(full)
            if value is None:
                value = make()
                stream.synchronize()
                _kept[full] = value
    return value
