"""Memory queries (`get_active_memory`, `get_peak_memory`, limits, cache) from our own accounting.

The scheduler reports each new output buffer with `track(data)`; buffers of
`TRACK_BYTES` or more are counted until they are freed (a weak reference's callback
takes them off), smaller ones are not counted: watching each would cost more than
the op that made it (a weak reference is about 1 µs, an op on 16 floats under 1 µs).
A view is charged to the buffer it views, once.

NumPy frees memory straight to the allocator, so the CPU keeps no cache: the cache
is CuPy's memory pool where one is in use.
"""
from __future__ import annotations

import os
import sys
import threading
import weakref

TRACK_BYTES = 1 << 16

_lock = threading.Lock()  # guards _live, _state
_live: dict = {}  # id(buffer) -> (weakref, nbytes)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


_state = {"active": 0, "peak": 0, "memory_limit": int(0.8 * _physical_memory()),
          "cache_limit": None, "wired_limit": 0}


def track(data) -> None:
    """Count a buffer a kernel returned until it is freed (no-op below TRACK_BYTES).

    The scheduler calls it for each evaluated node whose output has `nbytes >= TRACK_BYTES`.
    """
    root = data
    while getattr(root, "base", None) is not None and hasattr(root.base, "nbytes"):
        root = root.base
    key = id(root)
    nbytes = root.nbytes
    if nbytes < TRACK_BYTES or key in _live:
        return
    try:
        ref = weakref.ref(root, lambda _, key=key: _release(key))
    except TypeError:  # a buffer type without weak references cannot be watched
        return
    with _lock:
        _live[key] = (ref, nbytes)
        active = _state["active"] = _state["active"] + nbytes
        if active > _state["peak"]:
            _state["peak"] = active


def _release(key) -> None:
    with _lock:
        entry = _live.pop(key, None)
        if entry is not None:
            _state["active"] -= entry[1]


def get_active_memory() -> int:
    """Bytes held now by live array buffers the library made (of TRACK_BYTES or more)."""
    return _state["active"]


def get_peak_memory() -> int:
    """The largest `get_active_memory()` since the start or the last `reset_peak_memory()`."""
    return _state["peak"]


def reset_peak_memory() -> None:
    """Start peak tracking afresh (from zero, as MLX does)."""
    with _lock:
        _state["peak"] = 0


def _cupy_pool():
    cupy = sys.modules.get("cupy")
    return None if cupy is None else cupy.get_default_memory_pool()


def get_cache_memory() -> int:
    """Bytes freed by arrays but kept for reuse: CuPy's pool; the CPU keeps none."""
    pool = _cupy_pool()
    return 0 if pool is None else int(pool.total_bytes() - pool.used_bytes())


def clear_cache() -> None:
    """Give cached memory back (CuPy's pool); afterwards `get_cache_memory()` is 0."""
    pool = _cupy_pool()
    if pool is not None:
        pool.free_all_blocks()


def _set(name, limit, op) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise TypeError(f"{op}(): limit must be a non-negative int, got {limit!r}.")
    with _lock:
        previous = _state[name]
        _state[name] = limit
    return previous


def get_memory_limit() -> int:
    """The memory limit in bytes (a guideline, as in MLX): 80% of RAM by default."""
    return _state["memory_limit"]


def set_memory_limit(limit: int) -> int:
    """Set the memory limit; returns the previous one."""
    return _set("memory_limit", limit, "set_memory_limit")


def set_cache_limit(limit: int) -> int:
    """Set the cache limit (defaults to the memory limit); returns the previous one."""
    if _state["cache_limit"] is None:
        _state["cache_limit"] = _state["memory_limit"]
    previous = _set("cache_limit", limit, "set_cache_limit")
    pool = _cupy_pool()
    if pool is not None:
        pool.set_limit(size=limit or 0)
    return previous


def set_wired_limit(limit: int) -> int:
    """Wired memory is a macOS notion: the value is kept and returned, nothing else."""
    return _set("wired_limit", limit, "set_wired_limit")


__all__ = ["clear_cache", "get_active_memory", "get_cache_memory", "get_memory_limit",
           "get_peak_memory", "reset_peak_memory", "set_cache_limit", "set_memory_limit",
           "set_wired_limit"]
