"""Embedding: a lookup table from integer tokens to vectors."""
import math
from typing import Optional

import streamlet.core as mx

from .base import Module


class Embedding(Module):
    """Maps each integer token to a ``dims``-vector, initialized ``N(0, 1 / dims)``.

    Args:
        num_embeddings (int): The number of tokens (the vocabulary size).
        dims (int): The size of each vector.

    >>> nn.Embedding(10, 4)(mx.array([[1, 2, 3]])).shape
    (1, 3, 4)
    """

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        self.weight = mx.random.normal(shape=(num_embeddings, dims), scale=math.sqrt(1 / dims))

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """``x @ weight.T``: the embedding as an output projection (tied weights).

        >>> nn.Embedding(10, 4).as_linear(mx.zeros((2, 4))).shape
        (2, 10)
        """
        return x @ self.weight.T

    def to_quantized(self, group_size: Optional[int] = None, bits: Optional[int] = None,
                     mode: str = "affine", quantize_input: bool = False):
        """This layer as a :class:`QuantizedEmbedding`."""
        from .quantized import QuantizedEmbedding

        if quantize_input:
            raise ValueError("Quantized input is not supported.")
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
