"""streamlet.nn and streamlet.optimizers against MLX 0.32.4's, side by side in one run.

    .venv/bin/python bench/bench_nn.py [--reps 5] [--device cpu|gpu]

1. A training step of an MLP (4 Linear layers of 512 with ReLU, batch 256, float32):
   `nn.value_and_grad` of the MSE loss, an AdamW update, everything evaluated.
2. The Llama of examples/llama.py, in two sizes: the tests' tiny one (where the time is
   the per-op cost) and a small one (512 wide, 4 layers, vocabulary 4096: the GEMMs
   count).  Prompt 128 tokens, then 64 greedy tokens through the KV cache on a
   generation stream.  MLX's model is built from the seed and saved; ours loads its
   weights, so both generate the same tokens (checked).

Ratios are streamlet / MLX times: lower is better (issue 12's CPU target: <= 0.5).
"""
from __future__ import annotations

import argparse
import pathlib
import tempfile

import mlx.core as mlx_core
import mlx.nn as mlx_nn
import mlx.optimizers as mlx_optim
import numpy as np

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from timing import example_module, median_time

LIBS = {"streamlet": (mx, nn, optim), "mlx": (mlx_core, mlx_nn, mlx_optim)}
SMALL = {"vocab": 4096, "dims": 512, "heads": 8, "kv_heads": 4, "hidden": 1376, "layers": 4}


def mlp_step(lib, device, width=512, depth=4, batch=256):
    M, N, O = LIBS[lib]
    M.set_default_device(getattr(M, device))
    M.random.seed(0)
    layers = []
    for i in range(depth):
        layers.append(N.Linear(width, width))
        if i < depth - 1:
            layers.append(N.ReLU())
    model = N.Sequential(*layers)
    opt = O.AdamW(learning_rate=1e-3)
    rng = np.random.default_rng(0)
    x = M.array(rng.standard_normal((batch, width), dtype=np.float32))
    y = M.array(rng.standard_normal((batch, width), dtype=np.float32))
    loss_and_grad = N.value_and_grad(model, lambda m, x, y: N.losses.mse_loss(m(x), y))

    def step():
        loss, grads = loss_and_grad(model, x, y)
        opt.update(model, grads)
        M.eval(loss, model.parameters(), opt.state)
    return step


def llama_run(lib, device, config, weights, prompt, tokens, example):
    M, N, _ = LIBS[lib]
    M.set_default_device(getattr(M, device))
    model = example.llama(N, M)(config).load_weights(weights)
    M.eval(model.parameters())
    out = {}

    def run():
        out["tokens"] = example.generate(M, model, prompt, tokens, getattr(M, device))
    return run, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args()
    rows = []
    times = {lib: median_time(mlp_step(lib, args.device), args.reps) for lib in LIBS}
    rows.append(("MLP training step (AdamW), ms", times))
    example = example_module("llama")
    prompt = [int(t) for t in np.random.default_rng(1).integers(0, 64, 128)]
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in (("tiny", example.CONFIG), ("small", SMALL)):
            mlx_core.random.seed(0)
            weights = str(pathlib.Path(tmp) / f"{name}.safetensors")
            example.llama(mlx_nn, mlx_core)(config).save_weights(weights)
            times, tokens = {}, {}
            for lib in LIBS:
                run, out = llama_run(lib, args.device, config, weights, prompt, 64, example)
                times[lib] = median_time(run, args.reps)
                tokens[lib] = out["tokens"]
            same = "same tokens" if tokens["streamlet"] == tokens["mlx"] else "TOKENS DIFFER"
            rows.append((f"Llama {name}: prompt 128 + 64 tokens, ms ({same})", times))
    print(f"{'workload':58} {'streamlet':>10} {'mlx':>10} {'ratio':>7}")
    for name, t in rows:
        print(f"{name:58} {t['streamlet'] * 1e3:10.2f} {t['mlx'] * 1e3:10.2f} "
              f"{t['streamlet'] / t['mlx']:7.2f}")


if __name__ == "__main__":
    main()
