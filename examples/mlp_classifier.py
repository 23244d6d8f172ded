"""An MLP classifier trained with `value_and_grad` over a tree of parameters.

    python examples/mlp_classifier.py [--steps 300] [--lib mlx]

Synthetic data: points of three interleaved spiral arms in the plane, one class per
arm (not linearly separable).  The model is a two-hidden-layer MLP written with core
ops only (its parameters a list of dicts); the loss is the softmax cross entropy of
the logits, minimized by gradient descent with momentum on minibatches.  The array
library is an argument, so the same seed gives the same loss curve on
`streamlet.core` and `mlx.core`.
"""
from __future__ import annotations

import argparse
import importlib
import math


def spirals(mx, points, classes=3, noise=0.15):
    """`points` (x, label) pairs per arm, arms turning 1.5 times around the origin."""
    r = mx.random.uniform(0.1, 1.0, (classes, points))
    angle = r * 3 * math.pi + mx.arange(classes).reshape(classes, 1) * (2 * math.pi / classes)
    angle = angle + noise * mx.random.normal((classes, points))
    x = mx.stack([r * mx.cos(angle), r * mx.sin(angle)], axis=-1).reshape(-1, 2)
    labels = mx.repeat(mx.arange(classes), points)
    return x, labels


def init(mx, sizes):
    """Glorot-uniform weights and zero biases, one dict per layer."""
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = math.sqrt(6 / (n_in + n_out))
        layers.append({"w": mx.random.uniform(-bound, bound, (n_in, n_out)),
                       "b": mx.zeros((n_out,))})
    return layers


def forward(mx, layers, x):
    for layer in layers[:-1]:
        x = mx.maximum(x @ layer["w"] + layer["b"], 0.0)
    return x @ layers[-1]["w"] + layers[-1]["b"]


def cross_entropy(mx, logits, labels):
    picked = mx.take_along_axis(logits, labels.reshape(-1, 1), axis=1).reshape(-1)
    return mx.mean(mx.logsumexp(logits, axis=1) - picked)


def train(mx, steps=300, lr=0.3, momentum=0.9, width=64, batch=96, seed=0):
    """The loss at each step and the final training accuracy."""
    mx.random.seed(seed)
    x, labels = spirals(mx, 300)
    layers = init(mx, [2, width, width, 3])
    velocity = [{k: mx.zeros_like(v) for k, v in layer.items()} for layer in layers]
    loss_and_grad = mx.value_and_grad(
        lambda layers, xb, yb: cross_entropy(mx, forward(mx, layers, xb), yb))
    losses = []
    for _ in range(steps):
        idx = mx.random.randint(0, x.shape[0], (batch,))
        loss, grads = loss_and_grad(layers, x[idx], labels[idx])
        velocity = [{k: momentum * v[k] + g[k] for k in v} for v, g in zip(velocity, grads)]
        layers = [{k: p[k] - lr * v[k] for k in p} for p, v in zip(layers, velocity)]
        mx.eval(layers, velocity, loss)
        losses.append(loss.item())
    accuracy = mx.mean(mx.argmax(forward(mx, layers, x), axis=1) == labels).item()
    return losses, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lib", choices=["streamlet", "mlx"], default="streamlet")
    args = parser.parse_args()
    mx = importlib.import_module("streamlet.core" if args.lib == "streamlet" else "mlx.core")
    losses, accuracy = train(mx, args.steps)
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, training accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
