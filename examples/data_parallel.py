"""Data-parallel training: N processes train one MLP, each on its shard of every batch.

    python -m streamlet.launch -n 4 examples/data_parallel.py     # 4 processes
    python examples/data_parallel.py                              # the same, alone

Every process builds the same model from the same seed and draws the same synthetic
batches; process r computes the loss of rows r::N of each batch, scaled by the global
batch size, so the all_sum of the gradients over the group is the whole batch's
gradient and every process takes the same step as a single process would: the loss
curves agree (up to the order of float additions).

The all_sums run on a communication stream of their own, built last layer first: that
is the order in which the backward pass produces the gradients, so the all_sum of layer
k runs while the backward of layer k - 1 is still computing on the default stream
(communication keeps its build order, see `mx.distributed`).
"""
from __future__ import annotations

import argparse

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from streamlet.utils import tree_flatten, tree_unflatten


def mlp(width, depth, dims, classes):
    layers = [nn.Linear(dims, width), nn.ReLU()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def batches(steps, batch, dims, classes):
    """The same synthetic classification batches on every process: a random teacher's labels."""
    key = mx.random.key(0)
    teacher = mx.random.normal((dims, classes), key=key)
    for i in range(steps):
        x = mx.random.normal((batch, dims), key=mx.random.key(i + 1))
        yield x, mx.argmax(x @ teacher, axis=1)


def all_sum_gradients(grads, group, stream):
    """The group's sum of every gradient, issued last layer first on `stream`."""
    flat = tree_flatten(grads)
    summed = [(k, mx.distributed.all_sum(g, group=group, stream=stream))
              for k, g in reversed(flat)]
    return tree_unflatten(summed[::-1])


def train(args):
    if args.device:
        mx.set_default_device(getattr(mx, args.device))
    group = mx.distributed.init()
    rank, size = group.rank(), group.size()
    mx.random.seed(args.seed)
    model = mlp(args.width, args.depth, args.dims, args.classes)
    mx.eval(model.parameters())
    optimizer = optim.SGD(learning_rate=args.lr)
    comm = mx.new_stream(mx.cpu)

    def loss_fn(model, x, y):  # this shard's part of the whole batch's mean loss
        return nn.losses.cross_entropy(model(x), y, reduction="sum") / args.batch

    step = nn.value_and_grad(model, loss_fn)
    curve = []
    for x, y in batches(args.steps, args.batch, args.dims, args.classes):
        loss, grads = step(model, x[rank::size], y[rank::size])
        grads = all_sum_gradients(grads, group, comm)
        loss = mx.distributed.all_sum(loss, group=group, stream=comm)
        optimizer.update(model, grads)
        mx.eval(loss, model.parameters(), optimizer.state)
        curve.append(loss.item())
    if rank == 0:
        for i, value in enumerate(curve):
            print(f"step {i:3d} loss {value:.7f}", flush=True)
    return curve


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--dims", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "gpu"], help="default: the default device")
    train(p.parse_args())


if __name__ == "__main__":
    main()
