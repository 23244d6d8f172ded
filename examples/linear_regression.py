"""Linear regression by gradient descent, with `value_and_grad`, on synthetic data.

    python examples/linear_regression.py [--steps 200] [--lib mlx]

A random true weight vector labels random inputs (plus a little noise); starting from
small random weights, plain gradient descent on the mean squared error finds it.  The
program takes the array library as an argument (`streamlet.core` or `mlx.core`), so the
same seed gives the same data, the same start and the same loss curve on both.
"""
from __future__ import annotations

import argparse
import importlib
import time


def train(mx, steps=200, lr=0.05, dims=32, examples=512, seed=0):
    """The loss at each step, as Python floats."""
    mx.random.seed(seed)
    w_true = mx.random.normal((dims,))
    x = mx.random.normal((examples, dims))
    y = x @ w_true + 0.01 * mx.random.normal((examples,))
    w = 0.01 * mx.random.normal((dims,))

    def loss_fn(w):
        return 0.5 * mx.mean(mx.square(x @ w - y))

    step = mx.value_and_grad(loss_fn)
    losses = []
    for _ in range(steps):
        loss, grad = step(w)
        w = w - lr * grad
        mx.eval(w, loss)
        losses.append(loss.item())
    error = mx.sqrt(mx.sum(mx.square(w - w_true))).item()
    return losses, error


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lib", choices=["streamlet", "mlx"], default="streamlet")
    args = parser.parse_args()
    mx = importlib.import_module("streamlet.core" if args.lib == "streamlet" else "mlx.core")
    start = time.perf_counter()
    losses, error = train(mx, args.steps)
    took = time.perf_counter() - start
    print(f"loss {losses[0]:.5f} -> {losses[-1]:.5f}, |w - w_true| = {error:.5f}, "
          f"{1e3 * took / args.steps:.3f} ms per step")


if __name__ == "__main__":
    main()
