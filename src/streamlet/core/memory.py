"""Memory queries (`get_active_memory`, `get_peak_memory`, limits, cache) from our own accounting.

The scheduler reports each new output buffer with `track(data)`; buffers of
`TRACK_BYTES` (4 KiB: 1024 float32) or more are counted until they are freed (a weak
reference's callback takes them off), smaller ones are not counted: watching each would
cost more than the op that made it (a weak reference is about 1 µs, an op on 16 floats
under 1 µs, on 1024 floats a few µs).  A view is charged to the buffer it views, once.

NumPy frees memory straight to the allocator, so the CPU keeps no cache: the cache
is CuPy's memory pool where one is in use.
"""
from __future__ import annotations

import operator
import os
import sys
import threading
import weakref

TRACK_BYTES = 1 << 12


class Account:
    """Live buffers and the peak of their total; the library keeps one (`ACCOUNT`)."""

    def __init__(self):
        # guards _live, active, peak; re-entrant because a weak reference's callback
        # (_release) runs wherever the garbage collector frees a buffer, `track` included
        self._lock = threading.RLock()
        self._live: dict = {}  # id(buffer) -> (weak reference, size in bytes)
        self.active = 0
        self.peak = 0

    def track(self, data) -> None:
        """Count a kernel's output buffer until it is freed (no-op below TRACK_BYTES)."""
        root = data
        while getattr(root, "base", None) is not None and hasattr(root.base, "nbytes"):
            root = root.base
        key, nbytes = id(root), root.nbytes
        if nbytes < TRACK_BYTES or key in self._live:
            return
        try:
            ref = weakref.ref(root, lambda _, key=key: self._release(key))
        except TypeError:  # a buffer type without weak references cannot be watched
            return
        with self._lock:
            self._live[key] = (ref, nbytes)
            self.active += nbytes
            self.peak = max(self.peak, self.active)

    def _release(self, key) -> None:
        with self._lock:
            entry = self._live.pop(key, None)
            if entry is not None:
                self.active -= entry[1]

    def reset_peak(self) -> None:
        with self._lock:
            self.peak = 0


ACCOUNT = Account()
track = ACCOUNT.track


def get_active_memory() -> int:
    """Bytes held now by live array buffers the library made (of TRACK_BYTES or more)."""
    return ACCOUNT.active


def get_peak_memory() -> int:
    """The largest `get_active_memory()` since the start or the last `reset_peak_memory()`."""
    return ACCOUNT.peak


def reset_peak_memory() -> None:
    """Start peak tracking afresh (from zero, as MLX does)."""
    ACCOUNT.reset_peak()


def _cupy_pool():
    cupy = sys.modules.get("cupy")
    return None if cupy is None else cupy.get_default_memory_pool()


def get_cache_memory() -> int:
    """Bytes freed by arrays but kept for reuse: CuPy's pool (within the cache limit);
    the CPU keeps none."""
    pool = _cupy_pool()
    return 0 if pool is None else _trim(pool)


def apply_cache_limit() -> None:
    """Give back the GPU cache where it exceeds a limit set (the CUDA backend calls this
    when a stream synchronizes)."""
    if _limits["cache_limit"] is not None:
        pool = _cupy_pool()
        if pool is not None:
            _trim(pool)


def _trim(pool) -> int:
    """The pool's cached bytes, all given back first where they exceed the cache limit
    (CuPy's pool has no limit of its own on what it keeps: it is applied when asked)."""
    cached = int(pool.total_bytes() - pool.used_bytes())
    limit = _limits["cache_limit"]
    if limit is not None and cached > limit:
        pool.free_all_blocks()
        cached = int(pool.total_bytes() - pool.used_bytes())
    return cached


def clear_cache() -> None:
    """Give cached memory back (CuPy's pool, and the buffers of the programs that repeated
    evals ran as, `auto_graph`); afterwards `get_cache_memory()` is 0."""
    from .auto_graph import forget
    forget()
    pool = _cupy_pool()
    if pool is not None:
        pool.free_all_blocks()


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


_limits_lock = threading.Lock()  # guards _limits
_limits = {"memory_limit": int(0.8 * _physical_memory()), "cache_limit": None,
           "wired_limit": 0}


def _set(name, limit, op) -> int:
    # MLX takes a size_t: any integer (bool, NumPy integer, integer scalar array too,
    # through __index__) in [0, 2**64), and TypeError for anything else
    try:
        value = int(operator.index(limit))
    except TypeError:
        value = -1
    if not 0 <= value < 1 << 64:
        raise TypeError(f"{op}(): limit must be an integer in [0, 2**64), got {limit!r}.")
    limit = value
    with _limits_lock:
        previous = _limits[name]
        if previous is None:  # the cache limit defaults to the memory limit
            previous = _limits["memory_limit"]
        _limits[name] = limit
    return previous


def get_memory_limit() -> int:
    """The memory limit in bytes (a guideline, as in MLX): 80% of RAM by default."""
    return _limits["memory_limit"]


def set_memory_limit(limit: int) -> int:
    """Set the memory limit; returns the previous one."""
    return _set("memory_limit", limit, "set_memory_limit")


def set_cache_limit(limit: int) -> int:
    """Set the cache limit (defaults to the memory limit); returns the previous one."""
    previous = _set("cache_limit", limit, "set_cache_limit")
    apply_cache_limit()
    return previous


def set_wired_limit(limit: int) -> int:
    """Wired memory is a macOS notion: the value is kept and returned, nothing else."""
    return _set("wired_limit", limit, "set_wired_limit")


__all__ = ["clear_cache", "get_active_memory", "get_cache_memory", "get_memory_limit",
           "get_peak_memory", "reset_peak_memory", "set_cache_limit", "set_memory_limit",
           "set_wired_limit"]
