"""What the timeline trace costs: stream_bench's chain (4000 ops on 16 floats, one eval)
and eager (500 evals of one op) workloads with the trace off and on, one run of each in
turn in one process, so both see the same (noisy) machine; medians and minima per op.

    .venv/bin/python bench/bench_trace.py [--rounds 41]

Where the imported streamlet has no trace (a tree from before it, by PYTHONPATH), only
the "off" figures are printed, so two runs give before/after with the trace off.
"""
from __future__ import annotations

import argparse
import statistics
import time

import streamlet.core as mx


def chain(x):
    y = x
    for _ in range(2000):
        y = y * 1.0001 + 0.5
    mx.eval(y)


def eager(x):
    y = x
    for _ in range(500):
        y = y + 1
        mx.eval(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=41)
    args = ap.parse_args()
    x = mx.ones((16,))
    mx.eval(x)
    can_trace = hasattr(mx, "start_trace")

    def traced(fn):
        with mx.trace():
            fn(x)

    print(f"{'workload':8} {'off median':>10} {'on median':>10} {'on/off':>7} "
          f"{'off min':>8} {'on min':>8} {'on - off (min)':>15}   (us per op)")
    for name, fn, n in (("chain", chain, 4000), ("eager", eager, 500)):
        fn(x)
        if can_trace:
            traced(fn)
        off, on = [], []
        for r in range(args.rounds):  # interleaved, so both see the same machine
            for which in ((off, on) if r % 2 else (on, off)):
                if which is on and not can_trace:
                    continue
                t0 = time.perf_counter()
                traced(fn) if which is on else fn(x)
                which.append((time.perf_counter() - t0) / n * 1e6)
        m_off = statistics.median(off)
        if not on:
            print(f"{name:8} {m_off:10.3f} {'-':>10} {'-':>7} {min(off):8.3f}")
            continue
        m_on = statistics.median(on)
        print(f"{name:8} {m_off:10.3f} {m_on:10.3f} {m_on / m_off:7.2f} {min(off):8.3f} "
              f"{min(on):8.3f} {min(on) - min(off):15.3f}")


if __name__ == "__main__":
    main()
