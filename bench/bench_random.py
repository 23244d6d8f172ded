"""streamlet.random against mlx.core.random, side by side in one run (median of 5).

    .venv/bin/python bench/bench_random.py [log2 size, default 24]

Prints the time of each draw of 2^N float32 values and streamlet's throughput ratio
(MLX time / streamlet time; higher is better).  Targets (issue 3): normal >= 2x, uniform >= 3x.
"""
from __future__ import annotations

import sys

import mlx.core as mlx_core

import streamlet.core as mx
from timing import median_time


def main(log2n=24):
    n = 1 << log2n
    cases = {
        "uniform": lambda m: m.random.uniform(shape=(n,), key=m.random.key(1)),
        "normal": lambda m: m.random.normal((n,), key=m.random.key(1)),
        "split (bits)": lambda m: m.random.split(m.random.key(1), n // 2),
        "randint": lambda m: m.random.randint(0, 100, (n,), key=m.random.key(1)),
        "gumbel": lambda m: m.random.gumbel((n,), key=m.random.key(1)),
    }
    print(f"2^{log2n} float32 values, median of 5")
    print(f"{'op':<14}{'streamlet ms':>14}{'mlx ms':>10}{'ratio':>8}")
    for name, case in cases.items():
        ours = median_time(lambda: mx.eval(case(mx)))
        theirs = median_time(lambda: mlx_core.eval(case(mlx_core)))
        print(f"{name:<14}{ours * 1e3:>14.1f}{theirs * 1e3:>10.1f}{theirs / ours:>8.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 24)
