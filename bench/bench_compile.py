"""compile side by side with MLX 0.32.4's own compile, on the CPU (or `--device gpu`).

    .venv/bin/python bench/bench_compile.py [--device cpu|gpu] [--reps 7]

1. A gelu-like chain of 20 elementwise ops on 2^20 float32 (4000 ops of 16 elements
   with `--chain`): compiled throughput, streamlet / MLX (higher is better).
2. An MLP training step (4 layers of 512, batch 256, value_and_grad and an SGD update):
   the Python cost of one call of the compiled step (its replay, nothing evaluated)
   against building the same step uncompiled (streamlet's own ratio: target <= 0.3),
   and the whole step, evaluated, against MLX's compiled step.
"""
from __future__ import annotations

import argparse
import importlib
import sys

import numpy as np
from timing import median_time


def gelu_chain(mx, x, steps=2):
    y = x
    for _ in range(steps):
        u = y * y * y * 0.044715 + y
        u = (mx.tanh(u * 0.7978845608) + 1.0) * 0.5
        y = y * u + 0.001
    return y


def mlp(mx, width=512, depth=4, batch=256, seed=0):
    rng = np.random.default_rng(seed)
    params = [(mx.array(rng.standard_normal((width, width), dtype=np.float32) * 0.05),
               mx.array(np.zeros(width, np.float32))) for _ in range(depth)]
    x = mx.array(rng.standard_normal((batch, width), dtype=np.float32))
    y = mx.array(rng.standard_normal((batch, width), dtype=np.float32))

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = mx.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        return mx.mean(mx.square(h @ w + b - y))

    grad = mx.value_and_grad(loss)

    def step(params, x, y):
        value, g = grad(params, x, y)
        new = [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g)]
        return value, new
    mx.eval(params, x, y)
    return step, params, x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    mods = {}
    for name in ("streamlet", "mlx"):
        try:
            mods[name] = importlib.import_module(name + ".core")
        except ImportError:
            print(f"{name} is not installed", file=sys.stderr)
    results = {}
    for name, mx in mods.items():
        mx.set_default_device(mx.gpu if args.device == "gpu" else mx.cpu)
        x = mx.random.normal((1 << 20,))
        mx.eval(x)
        chain = mx.compile(lambda v: gelu_chain(mx, v))
        results[name, "chain_ms"] = median_time(lambda: mx.eval(chain(x)), args.reps) * 1e3
        small = mx.ones((16,))
        tiny = mx.compile(lambda v: gelu_chain(mx, v, steps=400))
        mx.eval(small)
        results[name, "tiny_chain_us_per_op"] = median_time(
            lambda: mx.eval(tiny(small)), args.reps) * 1e6 / 4000
        step, params, xb, yb = mlp(mx)
        cstep = mx.compile(step)
        mx.eval(cstep(params, xb, yb))
        results[name, "step_build_ms"] = median_time(lambda: step(params, xb, yb),
                                                     args.reps) * 1e3
        results[name, "compiled_call_ms"] = median_time(lambda: cstep(params, xb, yb),
                                                        args.reps) * 1e3
        results[name, "compiled_step_ms"] = median_time(
            lambda: mx.eval(cstep(params, xb, yb)), args.reps) * 1e3
    rows = ["chain_ms", "tiny_chain_us_per_op", "step_build_ms", "compiled_call_ms",
            "compiled_step_ms"]
    print(f"{'figure':24} {'streamlet':>12} {'mlx':>12} {'streamlet/mlx':>14}")
    for r in rows:
        s, m = results.get(("streamlet", r)), results.get(("mlx", r))
        ratio = s / m if s is not None and m else float("nan")
        print(f"{r:24} {s or float('nan'):12.3f} {m or float('nan'):12.3f} {ratio:14.2f}")
    s = results.get(("streamlet", "compiled_call_ms")), results.get(("streamlet", "step_build_ms"))
    if None not in s:
        print(f"streamlet compiled call / uncompiled build: {s[0] / s[1]:.2f} (target <= 0.3)")


if __name__ == "__main__":
    main()
