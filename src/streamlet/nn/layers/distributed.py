"""Tensor parallelism over `mx.distributed`: linear layers whose weights are sharded across
a group, the helpers that shard them, and the sharded form of gradient clipping.

An "all-to-sharded" layer takes the full input and gives this process its slice of the
output features (its input gradient is summed over the group); a "sharded-to-all" layer
takes a slice of the input features and all_sums the partial products, so every process
gets the full output.  On a group of one they are plain (quantized) linear layers.

>>> lin = nn.Linear(8, 4)
>>> shard_linear(lin, "all-to-sharded")(mx.zeros((2, 8))).shape   # a group of one
(2, 4)
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import streamlet.core as mx
from streamlet.core.distributed.ops import gather_shards, sum_gradients
from streamlet.utils import tree_flatten, tree_map, tree_map_with_path, tree_reduce, \
    tree_unflatten

from .base import Module
from .linear import Linear

__all__ = ["AllToShardedLinear", "FullyShardedModule", "QuantizedAllToShardedLinear",
           "QuantizedShardedToAllLinear", "ShardedToAllLinear", "clip_grad_norm_sharded",
           "fully_shard", "shard_inplace", "shard_linear"]

SHARDINGS = ("all-to-sharded", "sharded-to-all")


def _split(weight, segments, axis):
    """mx.split, where `segments` may also be fractions of the axis (a fused QKV weight)."""
    if isinstance(segments, int) or isinstance(segments[0], int):
        return mx.split(weight, segments, axis=axis)
    n = weight.shape[axis]
    return mx.split(weight, [int(s * n) for s in segments], axis=axis)


def _shard(parameters: dict, predicate: Callable, group) -> dict:
    """`parameters` with each array cut to this process's share, where `predicate(path,
    array)` gives the axis (or `(axis, segments)`, or None to keep it whole)."""
    n, r = group.size(), group.rank()

    def shard(path, weight):
        if not isinstance(weight, mx.array):
            return weight
        spec = predicate(path, weight)
        if spec is None:
            return weight
        if isinstance(spec, int):
            axis, segments = spec, 1
        elif isinstance(spec, tuple):
            axis, segments = spec
        else:
            raise ValueError("The sharding function should return int or tuple[int, list]")
        parts = [_split(part, n, axis)[r] for part in _split(weight, segments, axis)]
        return mx.contiguous(mx.concatenate(parts, axis=axis))

    return tree_map_with_path(shard, parameters)


def _predicate(sharding: str, segments):
    """The sharding predicate of a linear layer's parameters for `sharding`."""
    if sharding not in SHARDINGS:
        raise ValueError(f"Sharding type sharding={sharding!r} not supported, choose one of "
                         "'all-to-sharded' or 'sharded-to-all'")
    if sharding == "all-to-sharded":  # output features: weight rows and the bias
        return lambda path, w: ((-1, segments) if path.endswith("bias")
                                else (max(w.ndim - 2, 0), segments))
    return lambda path, w: None if path.endswith("bias") else (-1, segments)  # input features


def shard_inplace(module: Module, sharding: Union[str, Callable], *,
                  segments: Union[int, list] = 1, group=None) -> None:
    """Replace `module`'s parameters with this process's shards of them.

    `sharding` is "all-to-sharded", "sharded-to-all", or a predicate `(path, weight) ->
    axis | (axis, segments) | None`.  The module's computation is unchanged: it must do
    its own communication (see `shard_linear` for layers that do).

    >>> lin = nn.Linear(4, 4)
    >>> shard_inplace(lin, "sharded-to-all"); lin.weight.shape   # a group of one
    (4, 4)
    """
    if isinstance(sharding, str):
        sharding = _predicate(sharding, segments)
    module.update(_shard(module.parameters(), sharding, group or mx.distributed.init()))


def shard_linear(module: Module, sharding: str, *, segments: Union[int, list] = 1,
                 group=None) -> Module:
    """A new layer computing `module` (a Linear or QuantizedLinear) with sharded weights
    and the communication that `sharding` needs; `module` itself is left as it was.

    >>> shard_linear(nn.Linear(4, 6), "sharded-to-all").weight.shape
    (6, 4)
    """
    _predicate(sharding, segments)
    dense = isinstance(module, Linear)
    cls = {("all-to-sharded", True): AllToShardedLinear,
           ("sharded-to-all", True): ShardedToAllLinear,
           ("all-to-sharded", False): QuantizedAllToShardedLinear,
           ("sharded-to-all", False): QuantizedShardedToAllLinear}[sharding, dense]
    make = cls.from_linear if dense else cls.from_quantized_linear
    return make(module, segments=segments, group=group)


class _Sharded(Module):
    """What the sharded layers share: the group, the sharded side, shape checks, repr."""

    sharding = ""  # "all-to-sharded" (output features) or "sharded-to-all" (input features)

    def _setup(self, input_dims, output_dims, group):
        """The group and the local (output, input) weight shape; raises if indivisible."""
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if self.sharding == "all-to-sharded":
            if output_dims % n:
                raise ValueError(f"Cannot shard the output of size {output_dims} across "
                                 f"{n} devices.")
            return output_dims // n, input_dims
        if input_dims % n:
            raise ValueError(f"The input of size {input_dims} cannot be sharded across "
                             f"{n} devices.")
        return output_dims, input_dims // n

    def _dims(self):
        """The (input, output) feature sizes of the whole, unsharded layer."""
        out_dims, in_dims = self.weight.shape
        bits = getattr(self, "bits", None)
        if bits:
            in_dims = in_dims * 32 // bits
        n = self.group.size()
        if self.sharding == "all-to-sharded":
            return in_dims, out_dims * n
        return in_dims * n, out_dims

    def _extra_repr(self) -> str:
        in_dims, out_dims = self._dims()
        text = f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}"
        if getattr(self, "bits", None):
            text += f", group_size={self.group_size}, bits={self.bits}, mode={self.mode}"
        return text

    def __call__(self, x):
        if self.sharding == "all-to-sharded":
            x = self._project(sum_gradients(x, self.group))  # the input's gradient is summed
        else:
            x = mx.distributed.all_sum(self._project(x), group=self.group)
        return x + self["bias"] if "bias" in self else x


class _Dense(_Sharded):
    def __init__(self, input_dims: int, output_dims: int, bias: bool = True, group=None):
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        out_local, in_local = self._setup(input_dims, output_dims, group)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(out_local, in_local))
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(out_local,) if
                                          self.sharding == "all-to-sharded" else (output_dims,))

    def _project(self, x):
        return x @ self["weight"].T

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1, group=None):
        """This sharded layer made from `linear_layer`'s weights (this process's shard)."""
        group = group or mx.distributed.init()
        output_dims, input_dims = linear_layer.weight.shape
        layer = cls(input_dims, output_dims, "bias" in linear_layer, group)
        layer.update(_shard(linear_layer.parameters(), _predicate(cls.sharding, segments),
                            group))
        return layer


class _Quantized(_Sharded):
    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = 64, bits: int = 4, mode: str = "affine", group=None):
        super().__init__()
        self.group_size, self.bits, self.mode = group_size, bits, mode
        scale = math.sqrt(1.0 / input_dims)
        out_local, in_local = self._setup(input_dims, output_dims, group)
        weight = mx.random.uniform(low=-scale, high=scale, shape=(out_local, in_local))
        self.weight, self.scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
        self.biases = biases[0] if biases else None
        if bias:
            self.bias = mx.zeros((out_local,) if self.sharding == "all-to-sharded"
                                 else (output_dims,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        """Unfreeze what the layer holds; its own (quantized) parameters stay frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)
        return self

    def _project(self, x):
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self.get("biases"), transpose=True,
                                   group_size=self.group_size, bits=self.bits, mode=self.mode)

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *,
                              segments: Union[int, list] = 1, group=None):
        """This sharded layer made from a QuantizedLinear's weights (this process's shard)."""
        q = quantized_linear_layer
        group = group or mx.distributed.init()
        output_dims, packed = q.weight.shape
        layer = cls(packed * 32 // q.bits, output_dims, "bias" in q, group_size=q.group_size,
                    bits=q.bits, mode=getattr(q, "mode", "affine"), group=group)
        layer.update(_shard(q.parameters(), _predicate(cls.sharding, segments), group))
        return layer


class AllToShardedLinear(_Dense):
    """A Linear layer of which this process computes a slice of the output features
    (`output_dims // group.size()` of them); the input's gradient is summed over the group.

    Args:
        input_dims (int): The size of the input features.
        output_dims (int): The size of the output features of the whole layer.
        bias (bool): Add a bias. Default: ``True``.
        group (Group, optional): The group to shard across. Default: the world.

    >>> AllToShardedLinear(4, 6)(mx.zeros((2, 4))).shape
    (2, 6)
    """

    sharding = "all-to-sharded"


class ShardedToAllLinear(_Dense):
    """A Linear layer that takes this process's slice of the input features and sums the
    partial products over the group, so every process gets the whole output.

    Args:
        input_dims (int): The size of the input features of the whole layer.
        output_dims (int): The size of the output features.
        bias (bool): Add a bias. Default: ``True``.
        group (Group, optional): The group to shard across. Default: the world.

    >>> ShardedToAllLinear(4, 6)(mx.zeros((2, 4))).shape
    (2, 6)
    """

    sharding = "sharded-to-all"


class QuantizedAllToShardedLinear(_Quantized):
    """:class:`AllToShardedLinear` with a quantized weight (its parameters are frozen).

    Args:
        input_dims, output_dims, bias, group: as :class:`AllToShardedLinear`.
        group_size, bits, mode: as :func:`streamlet.core.quantize`.
    """

    sharding = "all-to-sharded"


class QuantizedShardedToAllLinear(_Quantized):
    """:class:`ShardedToAllLinear` with a quantized weight (its parameters are frozen).

    Args:
        input_dims, output_dims, bias, group: as :class:`ShardedToAllLinear`.
        group_size, bits, mode: as :func:`streamlet.core.quantize`.
    """

    sharding = "sharded-to-all"


def _shardable(module, key, value):
    return not isinstance(value, FullyShardedModule) and Module.valid_parameter_filter(
        module, key, value)


class FullyShardedModule(Module):
    """`module` with every parameter sharded along its first axis across `group`: the
    whole parameters are gathered for each call, and the gradients come back as this
    process's shard of their mean over the group, so each process stores and updates
    only its shard.

    Args:
        module (Module): The module to shard (its parameters are replaced by shards).
        group (Group, optional): The group to shard across. Default: the world.
        compute_dtype (Dtype, optional): The dtype the gathered parameters are cast to.
    """

    def __init__(self, module: Module, group=None, compute_dtype: Optional[mx.Dtype] = None):
        super().__init__()
        group = group or mx.distributed.init()
        n = group.size()
        flat = tree_flatten(module.filter_and_map(_shardable))
        for path, a in flat:
            if a.ndim == 0:
                raise ValueError(f"Cannot shard parameter '{path}' because it is a scalar.")
            if a.shape[0] % n:
                raise ValueError(f"Cannot shard parameter '{path}' with shape {a.shape} "
                                 f"across {n} devices: axis 0 must be divisible by {n}.")
        object.__setattr__(self, "_paths", [k for k, _ in flat])
        object.__setattr__(self, "_shapes", [a.shape for _, a in flat])
        module.update(_shard(module.filter_and_map(_shardable), lambda p, w: 0, group))
        self.module = module
        self.group, self.compute_dtype = group, compute_dtype

    def _extra_repr(self) -> str:
        return f"num_sharded_params={len(self._paths)}"

    def _gather(self, shards):
        """The whole parameters from this process's shards, in one all_gather."""
        cast = self.compute_dtype
        flat = mx.concatenate([(s if cast is None else s.astype(cast)).reshape(1, -1)
                               for s in shards], axis=1)
        whole = gather_shards(flat, self.group)  # (group size, every shard's size)
        ends, total = [], 0
        for s in shards[:-1]:
            total += s.size
            ends.append(total)
        parts = mx.split(whole, ends, axis=1)
        return [p.reshape(shape) for p, shape in zip(parts, self._shapes)]

    def _gathered_call(self, fn, *args, **kwargs):
        shards = self.module.filter_and_map(_shardable)
        whole = self._gather([a for _, a in tree_flatten(shards)])
        self.module.update(tree_unflatten(list(zip(self._paths, whole))))
        try:
            return fn(*args, **kwargs)
        finally:
            self.module.update(shards)

    def __call__(self, *args, **kwargs):
        return self._gathered_call(self.module, *args, **kwargs)

    def as_linear(self, *args, **kwargs):
        """The wrapped module's `as_linear` (a tied embedding) with gathered parameters."""
        return self._gathered_call(self.module.as_linear, *args, **kwargs)


def fully_shard(module: Module, *, group=None, compute_dtype: Optional[mx.Dtype] = None):
    """`module` wrapped in a :class:`FullyShardedModule` (unchanged on a group of one, if
    already wrapped, or if it has no parameters).

    >>> lin = nn.Linear(4, 4)
    >>> fully_shard(lin) is lin   # a group of one
    True
    """
    group = group or mx.distributed.init()
    if group.size() == 1 or isinstance(module, FullyShardedModule):
        return module
    wrapped = FullyShardedModule(module, group=group, compute_dtype=compute_dtype)
    return wrapped if wrapped._paths else module


def clip_grad_norm_sharded(gradients, max_norm: float, group=None):
    """Clip gradients sharded across `group` by their global norm: the squared norms of
    every process's shard are summed over the group.  Returns `(clipped, norm)`.

    >>> clipped, norm = clip_grad_norm_sharded({"w": mx.array([3.0, 4.0])}, 1.0)
    >>> round(norm.item(), 4), [round(v, 4) for v in clipped["w"].tolist()]
    (5.0, [0.6, 0.8])
    """
    local = tree_reduce(lambda acc, g: acc + g.square().sum(), gradients, 0.0)
    norm = mx.sqrt(mx.distributed.all_sum(local, group=group))
    scale = mx.minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * scale, gradients), norm
