"""Logistic regression by gradient descent, with `value_and_grad`, on synthetic data.

    python examples/logistic_regression.py [--steps 200] [--lib mlx]

Labels come from the sign of a random linear function of the inputs; the model learns
a weight vector and a bias by minimizing the binary cross entropy (computed from the
logits with `logaddexp`, stable for large ones).  The array library is an argument, so
the same seed gives the same loss curve on `streamlet.core` and `mlx.core`.
"""
from __future__ import annotations

import argparse
import importlib


def train(mx, steps=200, lr=0.5, dims=16, examples=1024, seed=0):
    """The loss at each step and the final training accuracy."""
    mx.random.seed(seed)
    w_true = mx.random.normal((dims,))
    x = mx.random.normal((examples, dims))
    labels = (x @ w_true > 0).astype(mx.float32)
    params = {"w": 0.01 * mx.random.normal((dims,)), "b": mx.zeros(())}

    def loss_fn(params):
        logits = x @ params["w"] + params["b"]
        # -log sigmoid(z) for the positives, -log(1 - sigmoid(z)) for the negatives
        return mx.mean(mx.logaddexp(0.0, logits) - labels * logits)

    step = mx.value_and_grad(loss_fn)
    losses = []
    for _ in range(steps):
        loss, grads = step(params)
        params = {k: params[k] - lr * grads[k] for k in params}
        mx.eval(params, loss)
        losses.append(loss.item())
    predicted = (x @ params["w"] + params["b"] > 0).astype(mx.float32)
    return losses, mx.mean(predicted == labels).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lib", choices=["streamlet", "mlx"], default="streamlet")
    args = parser.parse_args()
    mx = importlib.import_module("streamlet.core" if args.lib == "streamlet" else "mlx.core")
    losses, accuracy = train(mx, args.steps)
    print(f"loss {losses[0]:.5f} -> {losses[-1]:.5f}, training accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
