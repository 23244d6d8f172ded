"""Multi-head attention and the Transformer (https://arxiv.org/abs/1706.03762)."""
import math
from typing import Any, Callable, Optional

import streamlet.core as mx

from ..utils import checkpoint as _checkpoint
from .activations import relu
from .base import Module
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm


class MultiHeadAttention(Module):
    """Scaled dot-product attention over ``num_heads`` heads, with input and output projections
    (no biases by default), through ``mx.fast.scaled_dot_product_attention``.

    ``mask``, if given, is additive (``-inf`` where not to attend) or boolean, and broadcasts
    with ``(batch, num_heads, queries, keys)``.

    Args:
        dims (int): The model size; the default for every other size.
        num_heads (int): The number of heads (must divide ``dims``).
        query_input_dims (int, optional): The queries' input size. Default: ``dims``.
        key_input_dims (int, optional): The keys' input size. Default: ``dims``.
        value_input_dims (int, optional): The values' input size. Default: ``key_input_dims``.
        value_dims (int, optional): The values' projected size. Default: ``dims``.
        value_output_dims (int, optional): The output size. Default: ``dims``.
        bias (bool): Biases in the projections. Default: ``False``.
    """

    def __init__(self, dims: int, num_heads: int, query_input_dims: Optional[int] = None,
                 key_input_dims: Optional[int] = None, value_input_dims: Optional[int] = None,
                 value_dims: Optional[int] = None, value_output_dims: Optional[int] = None,
                 bias: bool = False):
        super().__init__()
        if dims % num_heads != 0:
            raise ValueError("The input feature dimensions should be divisible by the number "
                             f"of heads ({dims} % {num_heads}) != 0")
        key_input_dims = key_input_dims or dims
        value_dims = value_dims or dims
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims or dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims or key_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims or dims, bias=bias)

    def __call__(self, queries, keys, values, mask=None):
        def heads(x):  # (B, L, D) -> (B, heads, L, D / heads)
            return mx.unflatten(x, -1, (self.num_heads, -1)).transpose(0, 2, 1, 3)

        q = heads(self.query_proj(queries))
        k = heads(self.key_proj(keys))
        v = heads(self.value_proj(values))
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=math.sqrt(1 / q.shape[-1]),
                                                   mask=mask)
        return self.out_proj(out.transpose(0, 2, 1, 3).flatten(-2, -1))

    @staticmethod
    def create_additive_causal_mask(N: int, dtype=mx.float32):
        """An ``(N, N)`` mask with the dtype's lowest value above the diagonal, 0 elsewhere.

        >>> nn.MultiHeadAttention.create_additive_causal_mask(2)[0, 1].item() < -1e38
        True
        """
        indices = mx.arange(N)
        mask = indices[:, None] < indices[None]
        return mask.astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    """Self-attention then an MLP, each with a residual connection and layer norm (before the
    block with ``norm_first``, after it otherwise) and dropout.

    Args:
        dims (int): The model size.
        num_heads (int): The number of attention heads.
        mlp_dims (int, optional): The MLP's hidden size. Default: ``4 * dims``.
        dropout (float): Dropout after attention and the activation. Default: ``0.0``.
        activation (callable): The MLP's activation. Default: :func:`relu`.
        norm_first (bool): Normalize before each block. Default: ``True``.
    """

    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x, dropout):
        return self.linear2(dropout(self.activation(self.linear1(x))))

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + self._mlp(self.ln2(x), self.dropout2)
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + self._mlp(x, self.dropout2))


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory``, then an MLP, each with a residual
    connection, layer norm and dropout; arguments as :class:`TransformerEncoderLayer`."""

    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout3(self.activation(self.linear1(x))))

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(self.cross_attention(y, memory, memory, memory_mask))
            return x + self._mlp(self.ln3(x))
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(x + self.dropout2(self.cross_attention(x, memory, memory, memory_mask)))
        return self.ln3(x + self._mlp(x))


class TransformerEncoder(Module):
    """``num_layers`` :class:`TransformerEncoderLayer` s then a layer norm; with
    ``checkpoint``, each layer recomputes its activations in the backward pass."""

    def __init__(self, num_layers: int, dims: int, num_heads: int,
                 mlp_dims: Optional[int] = None, dropout: float = 0.0, activation=relu,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.layers = [TransformerEncoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, mask):
        for layer in self.layers:
            x = (_checkpoint(layer) if self.checkpoint else layer)(x, mask)
        return self.ln(x)


class TransformerDecoder(Module):
    """``num_layers`` :class:`TransformerDecoderLayer` s then a layer norm; arguments as
    :class:`TransformerEncoder`."""

    def __init__(self, num_layers: int, dims: int, num_heads: int,
                 mlp_dims: Optional[int] = None, dropout: float = 0.0, activation=relu,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.layers = [TransformerDecoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, memory, x_mask, memory_mask):
        for layer in self.layers:
            x = (_checkpoint(layer) if self.checkpoint else layer)(x, memory, x_mask,
                                                                   memory_mask)
        return self.ln(x)


class Transformer(Module):
    """An encoder-decoder Transformer (https://arxiv.org/abs/1706.03762).

    Args:
        dims (int): The model size. Default: ``512``.
        num_heads (int): Attention heads. Default: ``8``.
        num_encoder_layers (int): Default: ``6``.
        num_decoder_layers (int): Default: ``6``.
        mlp_dims (int, optional): The MLPs' hidden size. Default: ``4 * dims``.
        dropout (float): Default: ``0.0``.
        activation (callable): The MLPs' activation. Default: :func:`relu`.
        custom_encoder (Module, optional): Replaces the encoder.
        custom_decoder (Module, optional): Replaces the decoder.
        norm_first (bool): Layer norm before each block. Default: ``True``.
        checkpoint (bool): Gradient checkpointing per layer. Default: ``False``.

    Call it as ``model(src, tgt, src_mask, tgt_mask, memory_mask)``.
    """

    def __init__(self, dims: int = 512, num_heads: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 custom_encoder: Optional[Any] = None, custom_decoder: Optional[Any] = None,
                 norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        common = (dims, num_heads, mlp_dims, dropout, activation, norm_first, checkpoint)
        self.encoder = custom_encoder if custom_encoder is not None \
            else TransformerEncoder(num_encoder_layers, *common)
        self.decoder = custom_decoder if custom_decoder is not None \
            else TransformerDecoder(num_decoder_layers, *common)

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
