"""The stream demo: two independent workloads on one stream, then on two.

    python -m streamlet [--device cpu|gpu] [--size N] [--steps K] [--trace DIR]

The last run is traced: its timeline is written as Chrome trace JSON (open it in
ui.perfetto.dev) and, where matplotlib is installed, as a PNG, in DIR (default: a
new temporary directory).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import streamlet.core as mx


def workload(x, steps, s):
    """A chain of elementwise ops, every one of them on stream `s`."""
    for _ in range(steps):
        x = mx.multiply(mx.exp(mx.sin(x, stream=s), stream=s), 0.5, stream=s)
    return x


def timed(fn, reps=3):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--size", type=int, default=1 << 22, help="elements per workload")
    ap.add_argument("--steps", type=int, default=6, help="sin/exp/multiply rounds per workload")
    ap.add_argument("--trace", metavar="DIR", help="where to write the timeline trace "
                    "(default: a new temporary directory)")
    args = ap.parse_args(argv)
    dev = mx.gpu if args.device == "gpu" else mx.cpu
    if not mx.is_available(dev):
        raise SystemExit(f"{args.device}: not available here (see `python -m streamlet --help`)")
    s1, s2 = mx.new_stream(dev), mx.new_stream(dev)
    a = mx.arange(args.size, dtype=mx.float32, stream=s1) * 1e-6
    b = mx.arange(args.size, dtype=mx.float32, stream=s2) * -1e-6
    mx.eval(a, b)
    print(f"device: {mx.Device(dev)} ({mx.device_info(dev).get('device_name', '?')})")
    print(f"two workloads of {args.steps * 3} ops on {args.size} float32 each")

    one = timed(lambda: mx.eval(workload(a, args.steps, s1), workload(b, args.steps, s1)))
    print(f"  both on {s1}: {one * 1e3:8.1f} ms")
    two = timed(lambda: mx.eval(workload(a, args.steps, s1), workload(b, args.steps, s2)))
    print(f"  A on {s1}, B on {s2}: {two * 1e3:8.1f} ms")
    print(f"speedup from two streams: {one / two:.2f}x")

    # The same results whichever streams computed them.
    x1 = workload(a, args.steps, s1)
    x2 = workload(a, args.steps, s2)
    same = mx.array_equal(x1, x2).item()
    print(f"results identical on both streams: {same}")
    # A dependency across streams: s2 consumes what s1 produces; the scheduler orders them.
    # Traced, with the two workloads on two streams: the timeline shows both at once.
    with mx.trace() as t:
        mx.eval(workload(a, args.steps, s1), workload(b, args.steps, s2))
        total = mx.sum(workload(a, 1, s1) + workload(b, 1, s2), stream=s2)
        mx.eval(total)
    print(f"cross-stream sum on {s2}: {total.item():.4f}")
    write_trace(t, args.trace)


def write_trace(t, where):
    """The trace as JSON and, with matplotlib, as a PNG; says where they are."""
    where = where or tempfile.mkdtemp(prefix="streamlet-trace-")
    os.makedirs(where, exist_ok=True)
    streams = {op.stream for op in t.ops}
    print(f"trace: {len(t.ops)} ops on {len(streams)} streams, {len(t.waits)} cross-stream "
          f"waits, {len({op.thread for op in t.ops})} threads")
    print(f"  Chrome/Perfetto JSON: {t.save(os.path.join(where, 'trace.json'))}")
    try:
        print(f"  timeline PNG: {t.plot(os.path.join(where, 'trace.png'))}")
    except ImportError:
        print("  timeline PNG skipped (matplotlib is not installed: pip install "
              "'streamlet[trace]')")


if __name__ == "__main__":
    main()
