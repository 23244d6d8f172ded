"""Device arrays the process keeps once made (the row of ones of `cuda_reduce`, RoPE's
default frequencies).

Each is made by kernels on the current stream, which run after any work still queued
there on the memory CuPy's pool hands out for it, and is then waited for, so that every
stream of the device reads it whole.  (A synchronous copy from the host did not wait for
that work, which then wrote over the row.)  Inside a CUDA graph's capture one is made but
not kept: its memory is the graph's pool's, and goes with the graph.
"""
from __future__ import annotations

import threading

import cupy as cp

_kept: dict = {}  # (device, key) -> array
_lock = threading.Lock()


def constant(key, make):
    """The device array `make()` gives, kept under `key` for the current device."""
    kept_key = (cp.cuda.runtime.getDevice(), key)
    value = _kept.get(kept_key)
    if value is None:
        stream = cp.cuda.get_current_stream()
        if stream.is_capturing():
            return make()
        with _lock:
            value = _kept.get(kept_key)
            if value is None:
                value = make()
                stream.synchronize()
                _kept[kept_key] = value
    return value
