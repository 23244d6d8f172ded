"""Where the per-op time goes on the GPU path (a development aid, prints to stdout)."""
import cProfile
import pstats
import time

import cupy as cp
import numpy as np

import streamlet.core as mx
from streamlet.backend import cuda_fuse


def per(f, n):
    f()
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) / n * 1e6


dev, s = cp.cuda.Device(0), cp.cuda.Stream(non_blocking=True)


def ctx():
    for _ in range(1000):
        with dev, s:
            pass


def empty():
    with s:
        for _ in range(1000):
            cp.empty((16,), np.float32)


def sync():
    for _ in range(1000):
        s.synchronize()


print("ctx_us", per(ctx, 1000), "empty_us", per(empty, 1000), "sync_idle_us", per(sync, 1000))
x = mx.ones((16,))
mx.eval(x)


def eager(n=300):
    y = x
    for _ in range(n):
        y = y + 1
        mx.eval(y)


def chain():
    y = x
    for _ in range(2000):
        y = y * 1.0001 + 0.5
    mx.eval(y)


def build():
    y = x
    for _ in range(2000):
        y = y * 1.0001 + 0.5
    return y


print("eager_us", per(eager, 300), "chain_us", per(chain, 4000), "build_us", per(build, 4000))
for f in (eager, chain):
    pr = cProfile.Profile()
    pr.enable()
    f()
    pr.disable()
    for key in ("tottime", "cumulative"):
        pstats.Stats(pr).sort_stats(key).print_stats(30)
