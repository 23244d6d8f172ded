"""Per-call overhead of the C API against the same work from Python, in one run.

    .venv/bin/python bench/bench_capi.py [--iters N] [--rounds R]

Builds libstreamlet_c into a temporary folder, compiles a C program that times
`mlx_add` on two scalars followed by `mlx_array_eval` (a stream made with
mlx_stream_new_device, the result handle reused as MLX-C programs do), then
times `c = mx.add(a, b, stream=s); mx.eval(c)` in this process. Prints the
median microseconds per iteration of each over R rounds and the ratio C/Python
(issue 15 asks for <= 1.5).
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "capi"))

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "mlx/c/mlx.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  int iters = atoi(argv[1]), rounds = atoi(argv[2]);
  mlx_device dev = mlx_device_new_type(MLX_CPU, 0);
  mlx_stream s = mlx_stream_new_device(dev);
  mlx_array a = mlx_array_new_float(1.0f), b = mlx_array_new_float(2.0f);
  mlx_array c = mlx_array_new();
  for (int i = 0; i < 1000; i++) {  /* warm up */
    mlx_add(&c, a, b, s);
    mlx_array_eval(c);
  }
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int i = 0; i < iters; i++) {
      if (mlx_add(&c, a, b, s) || mlx_array_eval(c)) return 1;
    }
    printf("%.6f\n", (now() - t0) / iters * 1e6);
  }
  float v;
  mlx_array_item_float32(&v, c);
  fprintf(stderr, "result %g\n", v);
  mlx_array_free(a); mlx_array_free(b); mlx_array_free(c);
  mlx_stream_free(s); mlx_device_free(dev);
  return v == 3.0f ? 0 : 2;
}
"""


def c_times(iters, rounds):
    """Microseconds per iteration of the C program, one figure per round."""
    import build

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        sys.exit("no C compiler")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        build.build(tmp)
        (tmp / "bench.c").write_text(PROGRAM)
        subprocess.run([cc, "-O2", "-o", str(tmp / "bench"), str(tmp / "bench.c"),
                        f"-I{ROOT / 'include'}", f"-L{tmp}", "-lstreamlet_c",
                        f"-Wl,-rpath,{tmp}"], check=True)
        out = subprocess.run([str(tmp / "bench"), str(iters), str(rounds)], check=True,
                             capture_output=True, text=True).stdout
    return [float(x) for x in out.split()]


def python_times(iters, rounds):
    """Microseconds per iteration of the same work from Python, one figure per round."""
    import streamlet.core as mx

    s = mx.new_stream(mx.cpu)
    a, b = mx.array(1.0, mx.float32), mx.array(2.0, mx.float32)
    add, ev = mx.add, mx.eval
    for _ in range(1000):
        ev(add(a, b, stream=s))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            c = add(a, b, stream=s)
            ev(c)
        times.append((time.perf_counter() - t0) / iters * 1e6)
    assert c.item() == 3.0
    return times


def main():
    """Run both and print the medians and their ratio."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    c = statistics.median(c_times(args.iters, args.rounds))
    py = statistics.median(python_times(args.iters, args.rounds))
    print(f"mlx_add on scalars + mlx_array_eval, median of {args.rounds} rounds of "
          f"{args.iters}:")
    print(f"  C API   {c:8.2f} us per iteration")
    print(f"  Python  {py:8.2f} us per iteration")
    print(f"  C / Python = {c / py:.2f}")


if __name__ == "__main__":
    main()
