"""Initializers: each call returns a function that maps an array to a new one of its shape.

>>> import streamlet.nn.init as init
>>> init.constant(0.5)(mx.zeros((2,))).tolist()
[0.5, 0.5]
"""
import math
from typing import Callable, Literal

import streamlet.core as mx
from .. import _public


def constant(value: float, dtype=mx.float32) -> Callable:
    """Fill with ``value``.

    >>> nn.init.constant(2.0)(mx.zeros((2,))).tolist()
    [2.0, 2.0]
    """
    def initializer(a):
        return mx.full(a.shape, value, dtype=dtype)

    return initializer


def normal(mean: float = 0.0, std: float = 1.0, dtype=mx.float32) -> Callable:
    """Draw from ``N(mean, std^2)``.

    >>> nn.init.normal()(mx.zeros((2, 3))).shape
    (2, 3)
    """
    def initializer(a):
        return mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)

    return initializer


def uniform(low: float = 0.0, high: float = 1.0, dtype=mx.float32) -> Callable:
    """Draw from ``U(low, high)``.

    >>> bool(mx.all(nn.init.uniform(2, 3)(mx.zeros((4,))) >= 2))
    True
    """
    def initializer(a):
        return mx.random.uniform(low, high, a.shape, dtype=dtype)

    return initializer


def identity(dtype=mx.float32) -> Callable:
    """The identity matrix (for square 2-d arrays only).

    >>> nn.init.identity()(mx.zeros((2, 2))).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    def initializer(arr):
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"The input array must be a square matrix but got shape "
                             f"{arr.shape}.")
        return mx.eye(n=arr.shape[0], dtype=dtype)

    return initializer


def _calculate_fan_in_fan_out(x):
    """(fan in, fan out) of a weight ``[out, *receptive field, in]``."""
    if x.ndim < 2:
        raise ValueError("Glorot / He initialization requires at least 2 dimensional input but "
                         f"input with {x.ndim} dimensions.")
    field = math.prod(x.shape[1:-1])
    return x.shape[-1] * field, x.shape[0] * field


def _fan(a, mode):
    fan_in, fan_out = _calculate_fan_in_fan_out(a)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Invalid mode: {mode}. Valid modes are: fan_in, fan_out")
    return fan_in if mode == "fan_in" else fan_out


def glorot_normal(dtype=mx.float32) -> Callable:
    """Glorot (Xavier) normal: ``N(0, gain^2 * 2 / (fan_in + fan_out))``; the initializer takes
    ``(array, gain=1.0)``.

    >>> nn.init.glorot_normal()(mx.zeros((2, 3)), gain=2.0).shape
    (2, 3)
    """
    def initializer(a, gain: float = 1.0):
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)

    return initializer


def glorot_uniform(dtype=mx.float32) -> Callable:
    """Glorot (Xavier) uniform: ``U(-l, l)``, ``l = gain * sqrt(6 / (fan_in + fan_out))``.

    >>> nn.init.glorot_uniform()(mx.zeros((2, 3))).shape
    (2, 3)
    """
    def initializer(a, gain: float = 1.0):
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def he_normal(dtype=mx.float32) -> Callable:
    """He (Kaiming) normal: ``N(0, gain^2 / fan)``; the initializer takes
    ``(array, mode='fan_in' | 'fan_out', gain=1.0)``.

    >>> nn.init.he_normal()(mx.zeros((2, 3)), mode="fan_out").shape
    (2, 3)
    """
    def initializer(a, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        std = gain / math.sqrt(_fan(a, mode))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)

    return initializer


def he_uniform(dtype=mx.float32) -> Callable:
    """He (Kaiming) uniform: ``U(-l, l)``, ``l = gain * sqrt(3 / fan)``.

    >>> nn.init.he_uniform()(mx.zeros((2, 3))).shape
    (2, 3)
    """
    def initializer(a, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def sparse(sparsity: float, mean: float = 0.0, std: float = 1.0, dtype=mx.float32) -> Callable:
    """``N(mean, std^2)`` with ``ceil(sparsity * columns)`` random zeros in each row (2-d only).

    >>> w = nn.init.sparse(0.5)(mx.zeros((3, 4)))
    >>> (w == 0).sum(axis=1).tolist()
    [2, 2, 2]
    """
    def initializer(a):
        if a.ndim != 2:
            raise ValueError("Only tensors with 2 dimensions are supported")
        rows, cols = a.shape
        zeros = int(math.ceil(sparsity * cols))
        order = mx.argsort(mx.random.uniform(shape=a.shape), axis=1)
        a = mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
        a[mx.arange(rows).reshape(rows, 1), order[:, :zeros]] = 0
        return a

    return initializer


def orthogonal(gain: float = 1.0, dtype=mx.float32) -> Callable:
    """A (semi-)orthogonal matrix times ``gain``, from the QR decomposition of a normal draw
    (2-d only).

    >>> q = nn.init.orthogonal()(mx.zeros((3, 3)))
    >>> bool(mx.allclose(q @ q.T, mx.eye(3), atol=1e-5))
    True
    """
    def initializer(a):
        if a.ndim != 2:
            raise ValueError("Orthogonal initialization requires a 2D array but got a "
                             f"{a.ndim}D array.")
        rows, cols = a.shape
        n = max(rows, cols)
        q, r = mx.linalg.qr(mx.random.normal(shape=(n, n)), stream=mx.cpu)
        q = q * mx.sign(mx.diag(r))  # a unique Q: R's diagonal made positive
        return (q[:rows, :cols] * gain).astype(dtype)

    return initializer


__all__ = ["constant", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "identity",
           "normal", "orthogonal", "sparse", "uniform"]


def __dir__():
    return _public.names(globals())
