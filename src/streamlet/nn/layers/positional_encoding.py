"""Positional encodings: rotary (RoPE), sinusoidal, and ALiBi attention biases."""
import math
from typing import Optional

import streamlet.core as mx

from .base import Module


class RoPE(Module):
    """Rotary positional encoding (https://arxiv.org/abs/2104.09864), by ``mx.fast.rope``.

    Args:
        dims (int): How many leading features to rotate; the rest pass unchanged.
        traditional (bool): Rotate consecutive pairs instead of pairs half the features apart
            (slower). Default: ``False``.
        base (float): The base of the angular frequencies. Default: ``10000``.
        scale (float): Multiplies the positions. Default: ``1.0``.

    Call it as ``rope(x, offset=0)``, the positions running along the second-to-last axis
    from ``offset``.
    """

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000,
                 scale: float = 1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset: int = 0):
        return mx.fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                            scale=self.scale, offset=offset)


class SinusoidalPositionalEncoding(Module):
    """Sinusoidal embeddings of positions (https://arxiv.org/abs/1706.03762).

    Args:
        dims (int): The size of the embeddings (positive and even).
        min_freq (float): The lowest frequency. Default: ``0.0001``.
        max_freq (float): The highest frequency. Default: ``1``.
        scale (float, optional): Multiplies the embeddings. Default: ``sqrt(2 / dims)``.
        cos_first (bool): ``[cos, sin]`` instead of ``[sin, cos]``. Default: ``False``.
        full_turns (bool): Multiply the frequencies by ``2 pi``. Default: ``False``.

    >>> nn.SinusoidalPositionalEncoding(8)(mx.arange(5)).shape
    (5, 8)
    """

    def __init__(self, dims: int, min_freq: float = 0.0001, max_freq: float = 1,
                 scale: Optional[float] = None, cos_first: bool = False,
                 full_turns: bool = False):
        super().__init__()
        if dims <= 0 or dims % 2 != 0:
            raise ValueError("[SinusoidalPositionalEncoding] dims must be positive and even "
                             f"but got {dims}.")
        half = dims // 2
        # from 1 down to 0 over the frequencies (one frequency when dims == 2)
        one_zero = mx.array([1.0]) if half == 1 else 1 - mx.arange(0, half) / (half - 1)
        low, high = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (high - low) + low)  # "_": not a parameter
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = scale if scale is not None else (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x):
        y = x[..., None] * self._sigmas
        parts = [mx.cos(y), mx.sin(y)] if self.cos_first else [mx.sin(y), mx.cos(y)]
        y = mx.concatenate(parts, axis=-1)
        return y * self.scale if self.scale != 1 else y


class ALiBi(Module):
    """Attention with linear biases (https://arxiv.org/abs/2108.12409): adds to attention
    scores ``(B, heads, queries, keys)`` a fixed bias proportional to the query-key distance.

    >>> nn.ALiBi()(mx.zeros((1, 4, 3, 3))).shape
    (1, 4, 3, 3)
    """

    @staticmethod
    def create_alibi_matrix(q_sequence_length: int, k_sequence_length: int, num_heads: int,
                            offset: int = 0, dtype=mx.float32):
        """The bias ``-|i - j| * slope_h`` of shape ``(1, num_heads, queries, keys)``.

        >>> nn.ALiBi.create_alibi_matrix(2, 2, 1).tolist()
        [[[[0.0, -0.00390625], [-0.00390625, 0.0]]]]
        """
        queries = mx.arange(offset, q_sequence_length)
        keys = mx.arange(0, k_sequence_length)
        distance = -mx.abs(mx.expand_dims(queries[:, None] - keys[None, :], axis=(0, 1)))
        slope = ALiBi.create_alibi_slope(num_heads=num_heads, dtype=dtype)
        return (distance * slope).astype(dtype)

    @staticmethod
    def create_alibi_slope(num_heads: int, dtype=mx.float32):
        """The geometric per-head slopes, shape ``(num_heads, 1, 1)``.

        >>> nn.ALiBi.create_alibi_slope(2).reshape(-1).tolist()
        [0.0625, 0.00390625]
        """
        out = mx.array(_alibi_slopes(num_heads), dtype=dtype)
        return mx.expand_dims(out, axis=(-1, -2))

    def __call__(self, attention_scores, offset: int = 0, mask=None):
        bias = ALiBi.create_alibi_matrix(q_sequence_length=attention_scores.shape[-2] + offset,
                                         k_sequence_length=attention_scores.shape[-1],
                                         num_heads=attention_scores.shape[1], offset=offset,
                                         dtype=attention_scores.dtype)
        if mask is not None:
            bias = bias + mask
        return attention_scores + bias


def _alibi_slopes(n: int) -> list:
    """2^(-8 i / n) for a power of two n; otherwise the nearest power's, then every other one
    of twice that power's."""
    if math.log2(n).is_integer():
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]
    power = 2 ** math.floor(math.log2(n))
    return _alibi_slopes(power) + _alibi_slopes(2 * power)[0::2][: n - power]
