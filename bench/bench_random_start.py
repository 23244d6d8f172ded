"""4M normals in a fresh process: the first call and the later ones, with and without numba.

    .venv/bin/python bench/bench_random_start.py [log2 size, default 22] [--runs 3]

Each figure comes from new processes (median over --runs): the NumPy path (numba made
unimportable), numba with an empty kernel cache (the first call compiles), and numba with
the cache those runs left (the first call loads the kernels from disk).  `import` is the
time of `import streamlet.core`; `first` the first draw (numba's own import included),
`later` the median of the next five.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
if sys.argv[1] == "numpy":
    sys.modules["numba"] = None  # an ImportError for streamlet's lazy `import numba`
t0 = time.perf_counter()
import streamlet.core as mx
from streamlet.core.ops import threefry
t1 = time.perf_counter()
n, key = 1 << int(sys.argv[2]), mx.random.key(0)
draw = lambda: mx.eval(mx.random.normal(shape=(n,), key=key))
draw()
t2 = time.perf_counter()
later = []
for _ in range(5):
    t = time.perf_counter(); draw(); later.append(time.perf_counter() - t)
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "later": sorted(later)[2],
                  "numba": threefry.compiled() is not None}))
"""


def child(mode, log2n, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(log2n)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log2n", nargs="?", type=int, default=22)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows = {"NumPy (no numba)": [], "numba, empty cache": [], "numba, cached kernels": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            rows["NumPy (no numba)"].append(child("numpy", args.log2n, cache))
            rows["numba, empty cache"].append(child("numba", args.log2n, cache))
            rows["numba, cached kernels"].append(child("numba", args.log2n, cache))
    print(f"2^{args.log2n} float32 normals, fresh processes, median of {args.runs}")
    print(f"{'path':<24}{'import s':>10}{'first s':>10}{'later s':>10}")
    for name, runs in rows.items():
        assert all(r["numba"] == (name != "NumPy (no numba)") for r in runs)
        med = {k: statistics.median(r[k] for r in runs) for k in ("import", "first", "later")}
        print(f"{name:<24}{med['import']:>10.3f}{med['first']:>10.3f}{med['later']:>10.3f}")


if __name__ == "__main__":
    main()
