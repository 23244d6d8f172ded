"""Threefry-2x32 (20 rounds) over whole arrays, laid out as MLX lays out random bits.

For one key, n words come from floor(n/2) counter pairs: the pair (y, y + H), H = ceil(n/2),
hashes to words y and y + H; when n is odd the middle word is the first half of the hash
of (n // 2, 0).  Counter ranges are independent, so the work is cut into cache-sized
chunks, each run as a sequence of in-place NumPy ops, and the chunks are shared between
the calling thread and workers, one per core (NumPy releases the GIL).  A compiled loop
(numba, a dependency) does the same work for large draws; both give the same bits.

A *transform* turns hashed words into output values chunk by chunk (`WORDS`, `UNIT`,
`ERFINV_UNIT`); each has a NumPy form and a numba form that round identically.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .special import erfinv_f32

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = 0x1BD11BDA
CHUNK = 1 << 14          # counter pairs per chunk: a few 64 KiB buffers, resident in L2
PARALLEL_MIN = 1 << 16   # below this many pairs one thread does it all
TWO_M32 = np.float32(2.0 ** -32)     # float32(bits) / float32(2^32 - 1) == float32(bits) * 2^-32
BELOW_ONE = np.float32(np.nextafter(np.float32(1), np.float32(0)))
NORMAL_LOW = np.float32(np.nextafter(np.float32(-1), np.float32(0)))

_pool = None
_pool_lock = threading.Lock()  # guards the creation of _pool


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(1, (os.cpu_count() or 1) - 1), "streamlet-threefry")
    return _pool


def _after_fork_in_child():
    """A forked child has none of the parent's threads: its first draw makes a new pool
    (the inherited one counts idle workers that do not exist there, and waits forever)."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def key_schedule(k0, k1):
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    return k0, k1, k0 ^ k1 ^ PARITY


def hash_inplace(xp, key, x0, x1, tmp):
    """Threefry-2x32 of the counter pairs (x0, x1) under `key`, in place (uint32 arrays)."""
    ks = key_schedule(*key)
    u32 = np.uint32
    xp.add(x0, u32(ks[0]), out=x0)
    xp.add(x1, u32(ks[1]), out=x1)
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            xp.add(x0, x1, out=x0)
            xp.left_shift(x1, u32(r), out=tmp)
            xp.right_shift(x1, u32(32 - r), out=x1)
            xp.bitwise_or(x1, tmp, out=x1)
            xp.bitwise_xor(x1, x0, out=x1)
        xp.add(x0, u32(ks[(i + 1) % 3]), out=x0)
        xp.add(x1, u32((ks[(i + 2) % 3] + i + 1) & 0xFFFFFFFF), out=x1)


# -- transforms: words -> values --------------------------------------------------------
def _words_np(xp, w, out, param):
    out[...] = w


def _unit_np(xp, w, out, upper):
    """MLX's uniform in [0, 1): float32(bits) / (2^32 - 1), clamped to `upper`."""
    xp.multiply(w.astype(np.float32), TWO_M32, out=out)
    xp.minimum(out, upper, out=out)


def _erfinv_unit_np(xp, w, out, param):
    """erfinv of MLX's uniform(-0.99999994, 1): what `normal` scales by sqrt(2)."""
    _unit_np(xp, w, out, BELOW_ONE)
    xp.multiply(out, np.float32(2), out=out)
    xp.add(out, NORMAL_LOW, out=out)
    out[...] = erfinv_f32(xp, out)


class Transform:
    """How hashed words become output values: a dtype, a NumPy kernel, a numba element."""

    __slots__ = ("dtype", "numpy", "element")

    def __init__(self, dtype, numpy, element):
        self.dtype, self.numpy, self.element = dtype, numpy, element


WORDS = Transform(np.uint32, _words_np, "words")
UNIT = Transform(np.float32, _unit_np, "unit")
ERFINV_UNIT = Transform(np.float32, _erfinv_unit_np, "erfinv_unit")


# -- the layout --------------------------------------------------------------------------
def _span_numpy(xp, key, transform, param, out, half, a, b):
    """Counter pairs [a, b): words a.. and half + odd + a.. of `out`."""
    h = out.shape[0] - half
    chunk = CHUNK if xp is np else b - a  # a GPU wants one launch per op, not cache blocks
    tmp = xp.empty(min(chunk, b - a), np.uint32)
    for s in range(a, b, chunk):
        e = min(s + chunk, b)
        x0 = xp.arange(s, e, dtype=np.uint32)
        x1 = x0 + np.uint32(h)
        hash_inplace(xp, key, x0, x1, tmp[: e - s])
        transform.numpy(xp, x0, out[s:e], param)
        transform.numpy(xp, x1, out[h + s:h + e], param)


def _middle(xp, key, transform, param, out, half):
    x0 = xp.full(1, half, np.uint32)
    x1 = xp.zeros(1, np.uint32)
    hash_inplace(xp, key, x0, x1, xp.empty(1, np.uint32))
    transform.numpy(xp, x0, out[half:half + 1], param)


def fill(xp, key, n, transform=WORDS, param=None, out=None):
    """`n` values from one key's words, in MLX's order: `fill(np, (0, 0), 2)` is split's."""
    if out is None:
        out = xp.empty(n, transform.dtype)
    half = n // 2
    fast = compiled(n) if xp is np else None
    if n % 2:
        (fast.middle if fast else _middle)(xp, key, transform, param, out, half)
    if half == 0:
        return out
    span = fast.span if fast else _span_numpy
    if xp is np:
        in_parts(half, lambda a, b: span(xp, key, transform, param, out, half, a, b))
    else:
        span(xp, key, transform, param, out, half, 0, half)
    return out


def map_chunks(fn, x, out):
    """out = fn(x) elementwise, NumPy arrays, in cache-sized chunks shared between cores."""
    src, dst = x.reshape(-1), out.reshape(-1)

    def work(a, b):
        for s in range(a, b, CHUNK):
            e = min(s + CHUNK, b)
            dst[s:e] = fn(src[s:e])
    in_parts(src.shape[0], work)
    return out


def in_parts(n, work):
    """`work(a, b)` over [0, n) cut into chunk-aligned parts, one per core, run at once."""
    parts = min(os.cpu_count() or 1, n // PARALLEL_MIN)
    if parts <= 1:
        work(0, n)
        return
    step = (n // parts + CHUNK - 1) // CHUNK * CHUNK
    jobs = []
    for a in range(step, n, step):
        try:
            jobs.append(_executor().submit(work, a, min(a + step, n)))
        except RuntimeError:  # the interpreter is exiting (a thread still computing): here
            work(a, min(a + step, n))
    work(0, step)
    for job in jobs:
        job.result()


def key_bytes(xp, keys, nbytes):
    """MLX's RandomBits: each key (rows of `keys`, shape (k, 2)) fills `nbytes` bytes."""
    n = (nbytes + 3) // 4
    blocks = [fill(xp, (k[0], k[1]), n).view(np.uint8)[:nbytes] for k in keys.tolist()]
    if len(blocks) == 1:
        return blocks[0]
    return xp.concatenate(blocks) if blocks else xp.empty(0, np.uint8)


_UNLOADED = object()
_numba = _UNLOADED  # the compiled twin: loaded on the first large draw, None without numba
# Values below which NumPy does the work while numba is not loaded yet: importing numba and
# its first call (loading the cached kernels) cost about 0.3 s a process, 1 << 20 values
# about 30 ms on NumPy, so small programs never pay for the JIT (bench/RESULTS.md).
JIT_MIN = 1 << 20


def compiled(n=None):
    """threefry_numba for work of `n` values (None: any size), or None for the NumPy path:
    where numba is not installed, or for small work while numba is not loaded yet (both
    paths give the same bits)."""
    global _numba
    if _numba is _UNLOADED:
        if n is not None and n < JIT_MIN:
            return None
        try:
            from . import threefry_numba as module
        except ImportError:
            module = None
        _numba = module
    return _numba
