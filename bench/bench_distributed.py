"""all_sum against mpi4py's own Allreduce, and communication hidden behind compute.

    .venv/bin/python bench/bench_distributed.py [-n 4] [--mb 64] [--reps 7]

Starts itself as N processes (`python -m streamlet.launch`).  Each run, in one process
world and interleaved so that both see the same machine:

- mpi4py: `comm.Allreduce(a, b)` on preallocated NumPy float32 buffers of --mb MB;
- streamlet: `mx.eval(mx.distributed.all_sum(x))` of an evaluated array of that size.

Bandwidth is bytes / median seconds (each repetition starts after a barrier); rank 0
prints both and their ratio.  Then the overlap: a compute chain on one stream and an
all_sum on a communication stream, each alone and both in one eval (the second puts
them on one stream); "hidden" is the share of the shorter that the two-stream eval saved.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _median(fn, reps, comm):
    fn()
    times = []
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    # every rank waits for the slowest: the collective's time is the largest
    return statistics.median(comm.allreduce(t, op=max_op(comm)) for t in times)


def max_op(comm):
    from mpi4py import MPI
    return MPI.MAX


def worker(args):
    import numpy as np
    import streamlet.core as mx
    from mpi4py import MPI

    mx.set_default_device(mx.cpu)
    comm = MPI.COMM_WORLD
    group = mx.distributed.init(strict=True, backend="mpi")
    n = args.mb * (1 << 20) // 4
    a = np.full(n, comm.rank + 1, np.float32)
    b = np.empty_like(a)
    x = mx.array(a)
    mx.eval(x)

    def ours():
        mx.eval(mx.distributed.all_sum(x, group=group))

    rows = {"mpi4py": [], "streamlet": []}
    for _ in range(3):  # alternate, so that drift of a shared machine hits both
        rows["mpi4py"].append(_median(lambda: comm.Allreduce(a, b), args.reps, comm))
        rows["streamlet"].append(_median(ours, args.reps, comm))
    check = np.asarray(mx.distributed.all_sum(x, group=group))
    assert check[0] == sum(range(1, comm.size + 1)), check[0]
    t_mpi, t_ours = min(rows["mpi4py"]), min(rows["streamlet"])
    if comm.rank == 0:
        nbytes = a.nbytes
        print(f"all_sum of {args.mb} MB float32 over {comm.size} processes")
        print(f"{'':10} {'ms':>8} {'GB/s':>7}")
        for name, t in (("mpi4py", t_mpi), ("streamlet", t_ours)):
            print(f"{name:10} {t * 1e3:8.1f} {nbytes / t / 1e9:7.2f}")
        print(f"ratio (streamlet / mpi4py bandwidth): {t_mpi / t_ours:.2f}", flush=True)
    overlap(mx, group, comm, args)


def overlap(mx, group, comm, args):
    compute_s, comm_s = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    w = mx.random.uniform(shape=(1 << 22,))
    g = mx.random.uniform(shape=(args.mb * (1 << 18),))
    mx.eval(w, g)

    def compute(s):
        v = w
        for _ in range(args.chain):
            v = mx.exp(mx.sin(v, stream=s), stream=s)
        return v

    def talk(s):
        return mx.distributed.all_sum(g, group=group, stream=s)

    t_compute = _median(lambda: mx.eval(compute(compute_s)), args.reps, comm)
    t_comm = _median(lambda: mx.eval(talk(comm_s)), args.reps, comm)
    t_one = _median(lambda: mx.eval(compute(compute_s), talk(compute_s)), args.reps, comm)
    t_two = _median(lambda: mx.eval(compute(compute_s), talk(comm_s)), args.reps, comm)
    if comm.rank == 0:
        hidden = (t_one - t_two) / min(t_compute, t_comm)
        print(f"overlap: compute {t_compute * 1e3:.1f} ms, all_sum {t_comm * 1e3:.1f} ms, "
              f"one stream {t_one * 1e3:.1f} ms, two streams {t_two * 1e3:.1f} ms, "
              f"hidden {hidden:.0%} of the shorter", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=4, help="processes")
    p.add_argument("--mb", type=int, default=64, help="megabytes per all_sum")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--chain", type=int, default=8, help="sin/exp pairs of the overlap")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    cmd = [sys.executable, "-m", "streamlet.launch", "-n", str(args.n), __file__, "--worker",
           "--mb", str(args.mb), "--reps", str(args.reps), "--chain", str(args.chain)]
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
