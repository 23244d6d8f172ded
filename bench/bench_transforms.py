"""The function transforms against MLX 0.32.4, side by side in one run (CPU).

    .venv/bin/python bench/bench_transforms.py [--profile step|build]
    python bench/bench_transforms.py --device gpu --width 4096 --batch 1024 --step-only

1. One training step, `value_and_grad` of a 4-layer MLP (width 512, batch 256, float32,
   ReLU, mean squared error) and its evaluation: streamlet's time / MLX's (target of
   issue 10: <= 0.5).
2. Graph building: per forward node, what building the backward pass costs (`vjp`
   without evaluating, less the forward's own build) against building the forward
   (target: <= 2x), for a chain of elementwise ops and for the MLP; MLX's figures too.

`--profile step` or `--profile build` prints cProfile's top functions of that part.
`--device gpu` runs both libraries on their GPU (issue 10's H200 step: width 4096, batch
1024, target <= 1.0x MLX CUDA); `--step-only` skips the graph-building figures.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats

import mlx.core as mlx_core
import numpy as np

import streamlet.core as mx
from timing import median_time

WIDTH, BATCH, LAYERS = 512, 256, 4


def mlp_problem(M, width=WIDTH, batch=BATCH, layers=LAYERS):
    rng = np.random.default_rng(0)
    params = [(M.array(rng.standard_normal((width, width)).astype(np.float32) * 0.05),
               M.array(np.zeros(width, np.float32))) for _ in range(layers)]
    x = M.array(rng.standard_normal((batch, width)).astype(np.float32))
    y = M.array(rng.standard_normal((batch, width)).astype(np.float32))
    M.eval(params, x, y)

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = M.maximum(h, 0.0)
        return M.mean(M.square(h - y))
    return loss, params, x, y


def step_time(M, reps=20, width=WIDTH, batch=BATCH):
    loss, params, x, y = mlp_problem(M, width, batch)
    step = M.value_and_grad(loss)
    return median_time(lambda: M.eval(step(params, x, y)), reps)


def chain(M, x, n):
    """n elementwise nodes (unary and binary, with a scalar), no broadcasting."""
    for i in range(n // 4):
        x = M.sin(x) * 1.5
        x = M.tanh(x) + x
    return M.sum(x)


def build_costs(M, n=400, reps=21):
    """(forward build, backward build) seconds per forward node, for the chain and MLP."""
    x = M.array(np.linspace(-1, 1, 16).astype(np.float32))
    M.eval(x)
    nodes = n + 1
    fwd = median_time(lambda: chain(M, x, n), reps) / nodes
    both = median_time(lambda: M.vjp(lambda a: chain(M, a, n), [x], [M.array(1.0)]), reps)
    out = {"chain": (fwd, both / nodes - fwd)}
    loss, params, xb, yb = mlp_problem(M)
    mlp_nodes = 3 * LAYERS - 1 + 3
    fwd = median_time(lambda: loss(params, xb, yb), reps) / mlp_nodes
    both = median_time(lambda: M.value_and_grad(loss)(params, xb, yb), reps) / mlp_nodes
    out["mlp"] = (fwd, both - fwd)
    return out


def build_split(n=400, reps=15):
    """Where streamlet's vjp build time goes, per forward node of the chain: tracing the
    forward, ordering the tape, and the walk (rules and accumulation)."""
    from streamlet.core import transforms as T
    from streamlet.core.graph import TRACING
    x = mx.array(np.linspace(-1, 1, 16).astype(np.float32))
    mx.eval(x)

    def traced():
        with TRACING:
            t, = T._tracers([x])
            return t, chain(mx, t, n)
    t, out = traced()

    def walk():
        with TRACING:
            return T.vjp_nodes([out._node], [t._node], [mx.array(1.0)], [0])
    parts = {"trace": traced, "tape": lambda: T._tape([out._node], {id(t._node)}),
             "walk": walk}
    return {k: median_time(fn, reps) / (n + 1) for k, fn in parts.items()}


def profile(what):
    if what == "step":
        loss, params, x, y = mlp_problem(mx)
        step = mx.value_and_grad(loss)
        fn = lambda: [mx.eval(step(params, x, y)) for _ in range(20)]  # noqa: E731
    else:
        x = mx.array(np.linspace(-1, 1, 16).astype(np.float32))
        fn = lambda: [mx.vjp(lambda a: chain(mx, a, 400), [x], [mx.array(1.0)])  # noqa: E731
                      for _ in range(20)]
    fn()
    prof = cProfile.Profile()
    prof.runcall(fn)
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["step", "build"])
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--width", type=int, default=WIDTH)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--step-only", action="store_true")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    for M in (mx, mlx_core):
        M.set_default_device(getattr(M, args.device))
    ours, theirs = (step_time(M, width=args.width, batch=args.batch) for M in (mx, mlx_core))
    print(f"value_and_grad step, {LAYERS}-layer MLP {args.width} wide, batch {args.batch}, "
          f"float32 ({args.device})")
    print(f"  streamlet {ours * 1e3:8.2f} ms   mlx {theirs * 1e3:8.2f} ms   "
          f"streamlet/mlx {ours / theirs:5.2f}  (target <= 0.5 on the CPU, 1.0 on the GPU)")
    if args.step_only:
        return
    print("graph building, microseconds per forward node")
    print(f"  {'graph':8}{'lib':>11}{'forward':>10}{'backward':>10}{'bwd/fwd':>9}")
    ratio = {}
    for name, M in (("streamlet", mx), ("mlx", mlx_core)):
        for graph, (f, b) in build_costs(M).items():
            ratio[name, graph] = b / f
            print(f"  {graph:8}{name:>11}{f * 1e6:10.2f}{b * 1e6:10.2f}{b / f:9.2f}")
    print(f"  streamlet backward/forward per node: chain {ratio['streamlet', 'chain']:.2f}, "
          f"mlp {ratio['streamlet', 'mlp']:.2f} (target <= 2)")
    split = build_split()
    print("  streamlet's vjp of the chain, microseconds per forward node: " +
          ", ".join(f"{k} {v * 1e6:.2f}" for k, v in split.items()))


if __name__ == "__main__":
    main()
