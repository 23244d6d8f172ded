"""GPU figures that stream_bench.py does not take: the device copy bandwidth and cuBLAS
TF32 matmul measured in the same process (the floors of issue 5's targets), and a
two-stream overlap workload (a host-to-device copy on one stream while the other
computes).  Run with `PYTHONPATH=src python3 bench/bench_gpu.py`; prints name<TAB>value.
"""
import time

import cupy as cp
import numpy as np

import streamlet.core as mx


def med(f, reps=5, sync=lambda: cp.cuda.Device().synchronize()):
    f()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]


def floors(out):
    n = 1 << 28
    a = cp.random.random(n, dtype=cp.float32)
    c = cp.empty_like(a)
    out["device_copy_GBps"] = 8 * n / med(lambda: cp.copyto(c, a)) / 1e9
    del a, c
    from cupy_backends.cuda.libs import cublas
    m = cp.random.standard_normal((8192, 8192), dtype=cp.float32)
    h = cp.cuda.device.get_cublas_handle()
    old = cublas.getMathMode(h)
    cublas.setMathMode(h, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
    out["cublas_tf32_gflops"] = 2 * 8192 ** 3 / med(lambda: m @ m) / 1e9
    cublas.setMathMode(h, old)
    out["cublas_fp32_gflops"] = 2 * 8192 ** 3 / med(lambda: m @ m, 3) / 1e9


def ours(out):
    n = 1 << 28
    a = mx.ones((n,)) * 0.5
    b = mx.ones((n,)) * 0.25
    mx.eval(a, b)
    out["ours_add_GBps"] = 12 * n / med(lambda: mx.eval(a + b), sync=lambda: None) / 1e9
    del a, b
    m = mx.ones((8192, 8192)) * 0.01
    mx.eval(m)
    out["ours_matmul_tf32_gflops"] = 2 * 8192 ** 3 / med(lambda: mx.eval(mx.matmul(m, m)),
                                                        sync=lambda: None) / 1e9


def overlap(out):
    """1 GiB host array copied to the GPU on s1 while s2 runs matmuls; vs all on s1."""
    s1, s2 = mx.new_stream(mx.gpu), mx.new_stream(mx.gpu)
    host = np.ones(1 << 28, np.float32)
    w = mx.ones((4096, 4096), stream=s2) * (1 / 4096)
    mx.eval(w)

    def copy(s):
        return mx.add(mx.array(host), 1.0, stream=s)  # mx.array copies the host data: fresh

    def compute(s, k):
        v = w
        for _ in range(k):
            v = mx.matmul(v, w, stream=s)
        return v

    def timed(make):
        ts = []
        for _ in range(4):
            outs = make()  # graphs (and the host copies of mx.array) built outside the timing
            t = time.perf_counter()
            mx.eval(*outs)
            ts.append(time.perf_counter() - t)
        return sorted(ts[1:])[1]
    t_copy = timed(lambda: [copy(s1)])
    t_mm = timed(lambda: [compute(s2, 8)]) / 8
    k = max(1, round(t_copy / t_mm))
    serial = timed(lambda: [copy(s1), compute(s1, k)])
    both = timed(lambda: [copy(s1), compute(s2, k)])
    out["h2d_copy_ms"] = t_copy * 1e3
    out["overlap_matmuls"] = k
    out["overlap_serial_ms"] = serial * 1e3
    out["overlap_two_streams_ms"] = both * 1e3
    out["overlap_speedup"] = serial / both


if __name__ == "__main__":
    import sys
    results = {}
    parts = sys.argv[1:] or ["floors", "ours", "overlap"]
    for part in parts:
        globals()[part](results)
    for k, v in results.items():
        print(f"{k}\t{v:.3f}")
