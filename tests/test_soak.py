"""Soak: many threads evaluating at once on every kind of stream, with failures injected,
and memory that stays flat over many build-and-eval cycles and stream creations.

Bounded here (seconds); STREAMLET_SOAK=1 runs the sizes of issue 14 (16 threads x 2000
evals, 10^5 cycles, 10^4 streams) and prints the figures recorded in bench/RESULTS.md.
Every join is bounded, so a hang fails the test.
"""
import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core.array import node
from streamlet.core.graph import Primitive
from streamlet.core.stream import resolve

SOAK = bool(os.environ.get("STREAMLET_SOAK"))
THREADS, EVALS = (16, 2000) if SOAK else (6, 40)
SIZES = (8, 16, 256)  # 256 x 256 = 65 536 elements: large enough for the worker threads
KEYS = 8  # random draws use one of these keys, so each has a reference value


def _raising(xp, a, message):
    raise ValueError(message)


RAISING = Primitive("injected", _raising)


def _inject(kind, x, s, tag):
    """`x` made to depend on a failure of `kind`; returns the new array and the text its
    error must contain."""
    n = x.shape[0]
    if kind == "raise":  # an op whose kernel raises
        return node(RAISING, (x,), x.shape, x.dtype, {"message": f"boom {tag}"},
                    resolve(s)), f"[injected] boom {tag}"
    if kind == "singular":  # (linalg runs on CPU streams only, as in MLX)
        bad = mx.linalg.inv(mx.zeros((n, n), stream=mx.cpu), stream=mx.cpu)
        return mx.add(x, bad, stream=s), "[linalg.inv] The matrix is singular"
    if kind == "gpu_oom":  # 1 TiB on the GPU
        huge = mx.zeros((1 << 18, 1 << 20), stream=mx.gpu)
        return mx.add(x, mx.sum(huge, stream=mx.gpu), stream=s), "Out of memory"
    # out of memory: NumPy cannot allocate 1 EiB, whatever the machine
    huge = mx.zeros((1 << 30, 1 << 30), dtype=mx.uint8, stream=mx.cpu)
    return (mx.add(x, mx.sum(huge, stream=mx.cpu).astype(mx.float32), stream=s),
            "Unable to allocate")


class Load:
    """The shared state of one soak run: streams, published arrays, counters."""

    def __init__(self, seed):
        self.seed = seed
        self.tls = mx.new_thread_local_stream(mx.cpu)
        self.unsafe = [mx.new_thread_unsafe_stream(mx.cpu) for _ in range(2)]
        # where there is a GPU, its streams take part too, and its out of memory
        self.gpu = [mx.gpu, mx.new_thread_local_stream(mx.gpu),
                    mx.new_thread_unsafe_stream(mx.gpu)] if mx.is_available(mx.gpu) else []
        self.failures = ["raise", "singular", "oom"] + (["gpu_oom"] if self.gpu else [])
        self.lock = threading.Lock()  # guards published and the counters
        self.published = {n: [] for n in SIZES}  # size -> [(array, reference, error text)]
        self.counts = {"evals": 0, "checked": 0, "failed as expected": 0, "cross-thread": 0,
                       "random": 0, "clear_streams": 0}
        self.problems = []
        self.random_refs = {}
        for n in SIZES:  # reference draws, made once on this thread
            for k in range(KEYS):
                u = mx.random.uniform(shape=(n, n), key=mx.random.key(1000 + k))
                self.random_refs[n, k] = np.array(u)

    def add(self, **counts):
        with self.lock:
            for k, v in counts.items():
                self.counts[k] += v

    def worker(self, t, evals):
        rng = random.Random(self.seed * 1000 + t)
        own = mx.new_stream(mx.cpu)
        with mx.stream(mx.cpu):  # the CPU also when the suite runs with the GPU as default
            for i in range(evals):
                try:
                    own = self.step(rng, t, i, own)
                except Exception as exc:  # a wrong value or an unexpected error: reported
                    with self.lock:
                        self.problems.append(f"thread {t} eval {i}: {exc!r}")
                    if len(self.problems) > 20:
                        return

    def step(self, rng, t, i, own):
        n = rng.choice(SIZES)
        choices = [None, self.tls, own, mx.cpu] + self.unsafe + self.gpu
        streams = rng.sample(choices, rng.randint(1, 4))
        pick = lambda: rng.choice(streams)  # noqa: E731
        r = np.random.default_rng(rng.getrandbits(32)).random((n, n), dtype=np.float32)
        m = np.full((n, n), 1.0 / n, np.float32)
        x, ref, err = mx.array(r), r, None
        outs = []  # (array, reference, error text or None)
        for k in range(rng.randint(1, 12)):
            op = rng.randrange(6)
            s = pick()
            if op == 0:
                x, ref = mx.add(mx.multiply(x, 0.5, stream=s), 1.0, stream=s), ref * 0.5 + 1
            elif op == 1:
                x, ref = mx.sin(x, stream=s), np.sin(ref)
            elif op == 2:
                x, ref = mx.matmul(x, mx.array(m), stream=s), ref @ m
            elif op == 3:
                key = rng.randrange(KEYS)
                u = mx.random.uniform(shape=(n, n), key=mx.random.key(1000 + key), stream=s)
                x, ref = mx.add(x, u, stream=s), ref + self.random_refs[n, key]
                self.add(random=1)
            elif op == 4:
                with self.lock:
                    pub = rng.choice(self.published[n]) if self.published[n] else None
                if pub is not None:  # another thread's array, scheduled or computed
                    x, ref = mx.add(x, pub[0], stream=s), ref + pub[1]
                    err = err or pub[2]
                    self.add(**{"cross-thread": 1})
            elif op == 5 and err is None and rng.random() < 0.3:
                branch = (x, ref)  # computed before the failure: must stay right
                x, err = _inject(rng.choice(self.failures), x, s, f"{t}.{i}")
                outs.append((mx.multiply(branch[0], 2.0, stream=pick()), branch[1] * 2, None))
            if rng.random() < 0.3:
                outs.append((x, ref, err))
        outs.append((x, ref, err))
        self.evaluate(rng, [o[0] for o in outs])
        for a, want, text in outs:
            self.check(a, want, text)
        if rng.random() < 0.2:
            mx.async_eval(x)
            with self.lock:
                lst = self.published[n]
                lst.append((x, ref, err))
                if len(lst) > 8:
                    lst.pop(0)
        if rng.random() < 0.01:  # this thread's streams destroyed and made anew
            mx.synchronize(own)
            mx.clear_streams()
            own = mx.new_stream(mx.cpu)
            self.add(clear_streams=1)
        self.add(evals=1)
        return own

    def evaluate(self, rng, arrays):
        how = rng.randrange(4)
        try:
            if how == 0:
                mx.eval(arrays)
            elif how == 1:
                mx.async_eval(arrays)
            elif how == 2:
                mx.eval({"a": arrays[-1], "rest": arrays[:-1]})
            # 3: the reads below evaluate
        except RuntimeError:
            pass  # a failure injected on purpose: check() tells which arrays must raise

    def check(self, a, want, text):
        for _ in range(2):  # every read, not only the first
            try:
                got = np.array(a)
            except RuntimeError as exc:
                if text is None or text not in str(exc):
                    raise AssertionError(f"unexpected error {exc} (wanted {text})") from None
                self.add(**{"failed as expected": 1})
                continue
            if text is not None:
                raise AssertionError(f"no error, wanted {text}")
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5)
            self.add(checked=1)


def run_load(threads, evals, seed=0, timeout=600):
    load = Load(seed)
    workers = [threading.Thread(target=load.worker, args=(t, evals), daemon=True)
               for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - start
    hung = sum(w.is_alive() for w in workers)
    return load, hung, elapsed


@pytest.mark.usefixtures("on_cpu")
def test_threads_streams_failures_under_load():
    load, hung, elapsed = run_load(THREADS, EVALS, timeout=1800 if SOAK else 120)
    assert hung == 0, f"{hung} threads hung; counts {load.counts}"
    assert not load.problems, "\n".join(load.problems)
    c = load.counts
    assert c["evals"] == THREADS * EVALS
    assert c["checked"] > 0 and c["failed as expected"] > 0 and c["random"] > 0
    assert c["cross-thread"] > 0
    if SOAK:
        print(f"\nsoak: {THREADS} threads x {EVALS} evals in {elapsed:.1f} s "
              f"({c['evals'] / elapsed:.0f} evals/s), {c}")


# -- memory stays flat ------------------------------------------------------------------------

MEMORY = """
    import gc, json, sys
    import numpy as np
    import streamlet.core as mx
    from streamlet.core import scheduler
    cycles, creations = int(sys.argv[1]), int(sys.argv[2])

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    held = mx.array(np.ones(4096, np.float32))  # one tracked buffer held throughout
    base = np.linspace(0, 1, 2048, dtype=np.float32)
    s1, s2 = mx.new_stream(mx.cpu), mx.new_thread_unsafe_stream(mx.cpu)

    def cycle(i):
        x = mx.array(base)
        y = mx.exp(mx.multiply(x, 0.001, stream=s1), stream=s1)
        u = mx.random.uniform(shape=(2048,), key=mx.random.key(i % 8), stream=s2)
        z = mx.sum(mx.add(y, u, stream=s2), stream=s2) + mx.sum(x * 2)
        if i % 3:
            mx.eval(z)
        else:
            mx.async_eval(z)
        return z.item()

    def streams(j):
        s = mx.new_stream(mx.cpu)
        mx.sum(mx.ones((4,), stream=s) + 1, stream=s).item()
        if j % 100 == 99:
            mx.clear_streams()

    def measure():
        gc.collect()
        return {"rss": rss(), "active": mx.get_active_memory(), "objects": len(gc.get_objects()),
                "streams": len(mx.get_streams()), "states": len(scheduler._states)}

    out = {}
    for name, fn, n in (("cycles", cycle, cycles), ("streams", streams, creations)):
        for i in range(max(n // 1000, 1) * 100):  # warm up: caches, pools, first imports
            fn(i)
        before = measure()
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        seconds = time.perf_counter() - start
        out[name] = {"before": before, "after": measure(), "n": n, "seconds": seconds}
    print(json.dumps(out))
"""


def test_memory_flat_over_cycles_and_stream_creations():
    cycles, creations = (100_000, 10_000) if SOAK else (6_000, 1_500)
    code = "import time\n" + textwrap.dedent(MEMORY)
    proc = subprocess.run([sys.executable, "-c", code, str(cycles), str(creations)],
                          capture_output=True, text=True, timeout=1800 if SOAK else 120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    got = json.loads(proc.stdout)
    for name, r in got.items():
        b, a = r["before"], r["after"]
        assert a["rss"] <= 1.05 * b["rss"], (name, r)
        assert a["active"] <= 1.05 * b["active"] and b["active"] > 0, (name, r)
        assert a["objects"] <= b["objects"] + 2000, (name, r)  # no objects left per cycle
        assert a["streams"] == b["streams"] and a["states"] <= b["states"] + 200, (name, r)
    if SOAK:
        for name, r in got.items():
            b, a = r["before"], r["after"]
            print(f"\n{name}: {r['n']} in {r['seconds']:.1f} s, RSS {b['rss'] >> 20} -> "
                  f"{a['rss'] >> 20} MiB ({100 * (a['rss'] / b['rss'] - 1):+.2f}%), active "
                  f"{b['active']} -> {a['active']} B, objects {b['objects']} -> {a['objects']}")
