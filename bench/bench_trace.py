"""What the timeline trace costs: stream_bench's chain and eager workloads with the trace
off and on, alternating in one process (median of each over the rounds).

    .venv/bin/python bench/bench_trace.py [--rounds 7]

Where the imported streamlet has no trace (a tree from before it, by PYTHONPATH), only
the "off" figures are printed, so two runs give before/after with the trace off.
"""
from __future__ import annotations

import argparse
import statistics

from timing import median_time

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
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    x = mx.ones((16,))
    mx.eval(x)
    can_trace = hasattr(mx, "start_trace")
    figures = {k: [] for k in ("chain_off", "chain_on", "eager_off", "eager_on")}
    for _ in range(args.rounds):
        figures["chain_off"].append(median_time(lambda: chain(x)) / 4000 * 1e6)
        figures["eager_off"].append(median_time(lambda: eager(x)) / 500 * 1e6)
        if can_trace:
            for name, fn, n in (("chain_on", chain, 4000), ("eager_on", eager, 500)):
                def traced():
                    with mx.trace():
                        fn(x)
                figures[name].append(median_time(traced) / n * 1e6)
    med = {k: statistics.median(v) for k, v in figures.items() if v}
    print(f"{'workload':10} {'off us/op':>10} {'on us/op':>10} {'on - off':>9} {'on/off':>7}")
    for w in ("chain", "eager"):
        off, on = med[f"{w}_off"], med.get(f"{w}_on")
        if on is None:
            print(f"{w:10} {off:10.3f}")
        else:
            print(f"{w:10} {off:10.3f} {on:10.3f} {on - off:9.3f} {on / off:7.2f}")


if __name__ == "__main__":
    main()
