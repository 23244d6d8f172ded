"""`fast.scaled_dot_product_attention`: streamlet's one node, streamlet's composite of
ops (what it built before, MLX's CPU path) and MLX's own, side by side in one run.

    .venv/bin/python bench/bench_attention.py [--reps 50] [--rounds 7] [--device cpu|gpu]

Each row is a call and an eval, in microseconds: the best of `rounds` rounds of `reps`
calls, the three interleaved round by round (the machines drift).  Shapes are a Llama's
with 4 query heads over 2 key heads: a causal prompt, decode steps at two cache lengths,
and larger heads.  Ratios are streamlet node / the other: lower is better.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import streamlet.core as mx
from streamlet.core import fast

try:
    import mlx.core as mlx_core
except ImportError:  # the oracle is optional here
    mlx_core = None

CASES = {  # name: (batch, query heads, key heads, queries, keys, head dim, mask)
    "prompt 128, causal, D 16": (1, 4, 2, 128, 128, 16, "causal"),
    "decode at 129 keys, D 16": (1, 4, 2, 1, 129, 16, None),
    "decode at 512 keys, D 64": (1, 8, 4, 1, 512, 64, None),
    "prompt 256, causal, D 64": (1, 8, 4, 256, 256, 64, "causal"),
}


def _calls(case):
    b, n_q, n_kv, l_q, l_k, dim, mask = case
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((b, n_q, l_q, dim), (b, n_kv, l_k, dim), (b, n_kv, l_k, dim))]
    scale = dim ** -0.5
    q, k, v = (mx.array(a) for a in arrays)
    mx.eval(q, k, v)
    calls = {
        "node": lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                                     mask=mask)),
        "composite": lambda: mx.eval(fast._attention(q, k, v, scale, mask == "causal", None,
                                                     None, {})),
    }
    if mlx_core is not None:
        mq, mk, mv = (mlx_core.array(a) for a in arrays)
        mlx_core.eval(mq, mk, mv)
        calls["mlx"] = lambda: mlx_core.eval(mlx_core.fast.scaled_dot_product_attention(
            mq, mk, mv, scale=scale, mask=mask))
    return calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args()
    mx.set_default_device(getattr(mx, args.device))
    if mlx_core is not None:
        mlx_core.set_default_device(getattr(mlx_core, args.device))
    print(f"{'case':28} {'node us':>9} {'composite us':>13} {'mlx us':>9} "
          f"{'node/composite':>15} {'node/mlx':>9}")
    for name, case in CASES.items():
        calls = _calls(case)
        best = {k: float("inf") for k in calls}
        for fn in calls.values():
            fn()  # warm-up
        for _ in range(args.rounds):
            for key, fn in calls.items():
                t = time.perf_counter()
                for _ in range(args.reps):
                    fn()
                best[key] = min(best[key], (time.perf_counter() - t) / args.reps * 1e6)
        theirs = best.get("mlx", float("nan"))
        print(f"{name:28} {best['node']:9.1f} {best['composite']:13.1f} {theirs:9.1f} "
              f"{best['node'] / best['composite']:15.2f} {best['node'] / theirs:9.2f}")


if __name__ == "__main__":
    main()
