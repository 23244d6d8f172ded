"""stream_bench's two_stream workload in absolute times, streamlet and MLX in one run.

    .venv/bin/python bench/bench_two_streams.py

Two chains of 6 x (sin, exp on the chain's stream, then `* 0.5` on the default stream)
over 2^23 float32.  "one stream" puts both chains' sin/exp on s1, "two streams" puts
chain B's on s2; the speedup is their ratio.  Since the multiplies run on the default
stream, "one stream" already spans two streams: whatever overlap a library finds there
lowers its speedup while making both runs faster, so the absolute times are printed too.
"""
from __future__ import annotations

import importlib

from timing import median_time


def measure(mx):
    mx.set_default_device(mx.cpu)
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    a, b = mx.random.uniform(shape=(1 << 23,)), mx.random.uniform(shape=(1 << 23,))
    mx.eval(a, b)

    def work(v, s):
        for _ in range(6):
            v = mx.exp(mx.sin(v, stream=s), stream=s) * 0.5
        return v
    one_chain = median_time(lambda: mx.eval(work(a, s1)), 3)
    one = median_time(lambda: mx.eval(work(a, s1), work(b, s1)), 3)
    two = median_time(lambda: mx.eval(work(a, s1), work(b, s2)), 3)
    return one_chain, one, two


def main():
    print(f"{'module':10} {'one chain ms':>13} {'one stream ms':>14} {'two streams ms':>15}"
          f" {'speedup':>8} {'two / one chain':>16}")
    for name in ("streamlet", "mlx"):
        try:
            mx = importlib.import_module(name + ".core")
        except ImportError:
            continue
        c, one, two = measure(mx)
        print(f"{name:10} {c * 1e3:13.1f} {one * 1e3:14.1f} {two * 1e3:15.1f}"
              f" {one / two:8.2f} {two / c:16.2f}")


if __name__ == "__main__":
    main()
