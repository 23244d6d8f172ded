"""Side-by-side benchmark: streamlet and MLX (and NumPy) on stream_bench.py's workloads.

    ./dev bench [--rounds 3] [--device cpu|gpu] [--only a,b]

Each round runs stream_bench.py once per module, in separate processes, one
after the other, so both see the same machine; the table gives the median over
rounds of each figure and the ratio streamlet / reference.  NumPy's own `a + b`
and matmul are timed in the same run as the floor for those two workloads.
Each figure is echoed to stderr as soon as it is measured (the run takes minutes); the
table goes to stdout at the end.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from timing import median_time

HERE = Path(__file__).resolve().parent
LOWER_IS_BETTER = ("_us", "_ms")


def run_bench(module, device, only, label):
    """stream_bench.py's figures for `module`, each echoed to stderr as it arrives."""
    cmd = [sys.executable, str(HERE / "stream_bench.py"), module, "--device", device]
    if only:
        cmd += ["--only", only]
    print(f"{label} {module}:", file=sys.stderr, flush=True)
    figures, t0 = {}, time.perf_counter()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            if line.strip():
                k, v = line.split("\t")
                figures[k] = float(v)
                print(f"  {k:<24} {float(v):>12.3f}   ({time.perf_counter() - t0:.1f} s)",
                      file=sys.stderr, flush=True)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return figures


def numpy_floor():
    rng = np.random.default_rng(0)
    n = 1 << 24
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    m = rng.standard_normal((1024, 1024), dtype=np.float32)
    return {"add_GBps": 12 * n / median_time(lambda: a + b) / 1e9,
            "matmul_gflops": 2 * 1024**3 / median_time(lambda: m @ m) / 1e9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    try:
        import mlx.core  # noqa: F401
        refs = ["mlx"]
    except ImportError:
        refs = []
    results = {m: [] for m in ["streamlet", *refs]}
    floors = []
    for i in range(args.rounds):
        for m in results:
            results[m].append(run_bench(m, args.device, args.only, f"round {i + 1}/{args.rounds}"))
        if args.device == "cpu":
            print(f"round {i + 1}/{args.rounds} NumPy floor", file=sys.stderr, flush=True)
            floors.append(numpy_floor())
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in results.items()}
    header = "| workload | streamlet |" + "".join(f" {r} | ratio to {r} |" for r in refs)
    if floors:
        header += " NumPy | ratio to NumPy |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for k, v in med["streamlet"].items():
        row = f"| {k} | {v:.3f} |"
        for r in refs:
            ref = med[r].get(k)
            row += f" {ref:.3f} | {v / ref:.2f} |" if ref else " – | – |"
        if floors:
            f = statistics.median(x[k] for x in floors) if k in floors[0] else None
            row += f" {f:.3f} | {v / f:.2f} |" if f else " – | – |"
        print(row)
    lower = [k for k in med["streamlet"] if any(s in k for s in LOWER_IS_BETTER)]
    print(f"\n(lower is better for {', '.join(lower)}; higher for the rest; "
          f"median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
