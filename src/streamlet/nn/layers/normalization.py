"""Normalization layers: LayerNorm, RMSNorm, GroupNorm, InstanceNorm, BatchNorm.

Features are the last axis; learned scales start at 1 and offsets at 0.
"""
import math
from typing import Tuple

import streamlet.core as mx

from .base import Module


def _check_eps(name, eps):
    if eps <= 0.0:
        raise ValueError(f"[{name}] 'eps' must be positive but got {eps}.")


def _affine(module, x):
    """``weight * x + bias`` when the module learns them, else ``x``."""
    return module.weight * x + module.bias if "weight" in module else x


class LayerNorm(Module):
    """``(x - E[x]) / sqrt(Var[x] + eps) * weight + bias`` over the last axis
    (https://arxiv.org/abs/1607.06450).

    Args:
        dims (int): The size of the last axis.
        eps (float): Added to the variance. Default: ``1e-5``.
        affine (bool): Learn ``weight`` (and ``bias``). Default: ``True``.
        bias (bool): With ``affine``, learn ``bias`` too. Default: ``True``.

    >>> nn.LayerNorm(4)(mx.arange(8.0).reshape(2, 4)).shape
    (2, 4)
    """

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        return mx.fast.layer_norm(x, self.get("weight"), self.get("bias"), self.eps)


class RMSNorm(Module):
    """``x / sqrt(E[x^2] + eps) * weight`` over the last axis, accumulating in float32
    (https://arxiv.org/abs/1910.07467).

    Args:
        dims (int): The size of the last axis.
        eps (float): Added to the mean square. Default: ``1e-5``.

    >>> nn.RMSNorm(4).weight.tolist()
    [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Layer normalization over groups of features and all spatial axes
    (https://arxiv.org/abs/1803.08494); input ``(N, ..., C)``.

    Args:
        num_groups (int): How many groups to split the features into.
        dims (int): The number of features ``C``.
        eps (float): Added to the variance. Default: ``1e-5``.
        affine (bool): Learn a per-feature ``weight`` and ``bias``. Default: ``True``.
        pytorch_compatible (bool): Group consecutive features, as PyTorch does, instead of
            strided ones. Default: ``False``.

    >>> nn.GroupNorm(2, 4)(mx.ones((1, 3, 4))).shape
    (1, 3, 4)
    """

    def __init__(self, num_groups: int, dims: int, eps: float = 1e-5, affine: bool = True,
                 pytorch_compatible: bool = False):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0:
            raise ValueError(f"The number of groups ({num_groups}) must be a positive integer.")
        if dims <= 0:
            raise ValueError(f"The number of features ({dims}) must be a positive integer.")
        if dims % num_groups != 0:
            raise ValueError(f"The number of features ({dims}) must be evenly divisible by the "
                             f"number of groups ({num_groups}).")
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (f"{self.num_groups}, {self.dims}, eps={self.eps}, affine={'weight' in self}, "
                f"pytorch_compatible={self.pytorch_compatible}")

    def _pytorch_compatible_group_norm(self, x):
        batch, *rest, dims = x.shape
        groups = self.num_groups
        size = dims // groups
        x = x.reshape(batch, -1, groups, size).transpose(0, 2, 1, 3).reshape(batch, groups, -1)
        x = mx.fast.layer_norm(x, None, None, self.eps)
        x = x.reshape(batch, groups, -1, size).transpose(0, 2, 1, 3)
        return x.reshape(batch, *rest, dims)

    def _group_norm(self, x):
        batch, *rest, dims = x.shape
        x = x.reshape(batch, -1, self.num_groups)
        mean = mx.mean(x, axis=1, keepdims=True)
        var = mx.var(x, axis=1, keepdims=True)
        return ((x - mean) * mx.rsqrt(var + self.eps)).reshape(batch, *rest, dims)

    def __call__(self, x):
        norm = self._pytorch_compatible_group_norm if self.pytorch_compatible \
            else self._group_norm
        return _affine(self, norm(x))


class InstanceNorm(Module):
    """Normalizes each sample's channels over the spatial axes
    (https://arxiv.org/abs/1607.08022); input ``(N, ..., C)`` with at least 3 axes.

    Args:
        dims (int): The number of features ``C``.
        eps (float): Added to the variance. Default: ``1e-5``.
        affine (bool): Learn a per-feature ``weight`` and ``bias``. Default: ``False``.

    >>> nn.InstanceNorm(3)(mx.ones((2, 4, 4, 3))).shape
    (2, 4, 4, 3)
    """

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        if x.ndim < 3:
            raise ValueError("InstanceNorm expects inputs with at least 3 dimensions (N, ..., C)"
                             f" but the input has {x.ndim} dimensions.")
        batch, *spatial, features = x.shape
        channels_first = mx.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))
        y = mx.fast.layer_norm(channels_first.reshape(batch, features, -1), None, None, self.eps)
        y = mx.transpose(y.reshape(batch, features, *spatial), (0, *range(2, x.ndim), 1))
        return _affine(self, y)


class BatchNorm(Module):
    """Batch normalization (https://arxiv.org/abs/1502.03167) of ``NC``, ``NLC`` or ``NHWC``
    input over every axis but the last.

    In training mode it normalizes with the batch's statistics and updates the running mean
    and (unbiased) variance with ``momentum``; in evaluation mode it uses the running ones.
    The running statistics are frozen parameters: saved with the weights, never trained.

    Args:
        num_features (int): The number of features ``C``.
        eps (float): Added to the variance. Default: ``1e-5``.
        momentum (float): Weight of the new batch in the running statistics. Default: ``0.1``.
        affine (bool): Learn a per-feature ``weight`` and ``bias``. Default: ``True``.
        track_running_stats (bool): Keep running statistics. Default: ``True``.

    >>> bn = nn.BatchNorm(4)
    >>> bn(mx.arange(8.0).reshape(2, 4)).shape
    (2, 4)
    >>> sorted(bn.trainable_parameters())
    ['bias', 'weight']
    """

    _STATS = ["running_mean", "running_var"]

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=self._STATS, recurse=False)

    def unfreeze(self, *args, **kwargs):
        """As :meth:`Module.unfreeze`, but the running statistics stay frozen."""
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(keys=self._STATS, recurse=False)
        return self

    def _extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={'weight' in self}, track_running_stats={self.track_running_stats}")

    def _calc_stats(self, x, ddof: int = 0) -> Tuple:
        """Mean and variance over every axis but the last."""
        axes = tuple(range(x.ndim - 1))
        return mx.mean(x, axis=axes), mx.var(x, axis=axes, ddof=ddof)

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(
                f"Expected input tensor to have 2, 3 or 4 dimensions, but got {x.ndim}")
        if self.training and math.prod(x.shape[:-1]) == 1:
            raise ValueError("BatchNorm training requires more than one value per channel.")
        mean, var = self._calc_stats(x)
        if self.training and self.track_running_stats:
            mu = self.momentum
            _, unbiased = self._calc_stats(x, ddof=1)
            self.running_mean = (1 - mu) * self.running_mean + mu * mean
            self.running_var = (1 - mu) * self.running_var + mu * unbiased
        elif self.track_running_stats:
            mean, var = self.running_mean, self.running_var
        return _affine(self, (x - mean) * mx.rsqrt(var + self.eps))
