"""Transforms of functions of a module's parameters: value_and_grad, checkpoint; and
average_gradients (and, from nn.layers.distributed, clip_grad_norm_sharded) for
distributed training."""
from functools import wraps
from typing import Any, Callable, Optional

import streamlet.core as mx
from streamlet.utils import tree_flatten, tree_map, tree_unflatten

from .. import _public

from .layers.base import Module
from .layers.distributed import clip_grad_norm_sharded  # noqa: F401  (MLX's place for it)


def _over_parameters(model: Module, fn: Callable, transform: Callable) -> Callable:
    """``transform`` (an ``mx`` transform) of ``fn`` as a function of ``model``'s trainable
    parameters, which are swapped into the model for the call."""
    def with_parameters(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    transformed = transform(with_parameters)

    @wraps(fn)
    def call(*args, **kwargs):
        return transformed(model.trainable_parameters(), *args, **kwargs)

    return call


def value_and_grad(model: Module, fn: Callable) -> Callable:
    """``fn``'s value and its gradient with respect to ``model``'s trainable parameters.

    The result returns ``(value, grads)``, ``grads`` a tree like
    ``model.trainable_parameters()``.

    Args:
        model (Module): The model whose trainable parameters to differentiate by.
        fn (callable): The scalar function (usually the loss, calling ``model``).
    """
    return _over_parameters(model, fn, mx.value_and_grad)


def checkpoint(module: Module, fn: Optional[Callable] = None) -> Callable:
    """``fn`` (by default ``module`` itself) with gradient checkpointing: the backward pass
    recomputes the intermediate values instead of keeping them (``mx.checkpoint``).

    Args:
        module (Module): The module whose trainable parameters the checkpoint covers.
        fn (callable, optional): The function to checkpoint. Default: ``module``.
    """
    # the module, not module.__call__, so that a later monkey-patched __call__ is used
    return _over_parameters(module, module if fn is None else fn, mx.checkpoint)


def average_gradients(gradients: Any, group=None, all_reduce_size: int = 32 * 1024**2,
                      communication_stream=None):
    """The mean of ``gradients`` over the processes of ``group`` (``mx.distributed``).

    Small arrays are concatenated into all-reduces of about ``all_reduce_size`` bytes (no
    grouping if ``<= 0``).  Without ``mx.distributed`` (or with a group of one process) the
    gradients are returned unchanged.

    >>> average_gradients({"w": mx.ones((2,))})["w"].tolist()
    [1.0, 1.0]
    """
    distributed = getattr(mx, "distributed", None)
    if distributed is None and group is None:
        return gradients  # a single process
    group = group or distributed.init()
    N = group.size()
    if N == 1:
        return gradients

    def all_mean(x):
        return distributed.all_sum(x, group=group, stream=communication_stream) / N

    flat = tree_flatten(gradients)
    if all_reduce_size <= 0 or len({g.dtype for _, g in flat}) > 1:
        return tree_map(all_mean, gradients)
    if not flat:
        return gradients
    out, batch, size = [], [], 0
    for key, g in flat + [(None, None)]:
        if key is not None:
            batch.append((key, g))
            size += g.size * g.dtype.size
        if batch and (key is None or size >= all_reduce_size):
            big = all_mean(mx.concatenate([g.reshape(-1) for _, g in batch]))
            offsets = [0]
            for _, g in batch:
                offsets.append(offsets[-1] + g.size)
            parts = mx.split(big, offsets[1:-1])
            out.extend((k, p.reshape(g.shape)) for (k, g), p in zip(batch, parts))
            batch, size = [], 0
    return tree_unflatten(out)


__all__ = ["average_gradients", "checkpoint", "clip_grad_norm_sharded", "value_and_grad"]


def __dir__():
    return _public.names(globals())
