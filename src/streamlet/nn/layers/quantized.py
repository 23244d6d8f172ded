"""Quantized layers (QuantizedLinear, QuantizedEmbedding, QQLinear) and ``nn.quantize``.

Weights are packed by ``mx.quantize`` (modes ``affine``, ``mxfp4``, ``nvfp4``, ``mxfp8``) into
``weight`` (uint32), ``scales`` and, for ``affine``, ``biases`` -- the names MLX saves them
under, so quantized checkpoints load.
"""
import math
from typing import Callable, Optional, Union

import streamlet.core as mx
from streamlet.utils import tree_map_with_path

from .base import Module

# mode: (group size, bits) used when they are not given
_MODE_DEFAULTS = {"affine": (64, 4), "mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}


def _defaults_for_mode(mode, group_size, bits):
    if mode not in _MODE_DEFAULTS:
        raise ValueError(f"Invalid quantization mode '{mode}'. "
                         f"Valid modes are: {', '.join(_MODE_DEFAULTS)}.")
    default_group, default_bits = _MODE_DEFAULTS[mode]
    return group_size or default_group, bits or default_bits


def _set_quantized(layer, weight, group_size, bits, mode):
    """Quantize ``weight`` into ``layer.weight``, ``.scales`` and (affine) ``.biases``."""
    layer.weight, layer.scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
    layer.biases = biases[0] if biases else None


def quantize(model: Module, group_size: int = None, bits: int = None, *, mode: str = "affine",
             quantize_input: bool = False,
             class_predicate: Optional[Callable[[str, Module], Union[bool, dict]]] = None):
    """Replace, in place, the leaf modules of ``model`` selected by ``class_predicate`` with
    their ``to_quantized()`` form (by default every one that has it: Linear and Embedding).

    Args:
        model (Module): The model to quantize.
        group_size (int, optional): See :func:`streamlet.core.quantize`.
        bits (int, optional): See :func:`streamlet.core.quantize`.
        mode (str): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or ``"mxfp8"``. Default: ``"affine"``.
        quantize_input (bool): Quantize activations too (``"nvfp4"`` and ``"mxfp8"`` Linear
            layers only). Default: ``False``.
        class_predicate (callable, optional): ``(path, module)`` -> ``False`` (keep), ``True``
            (quantize with the arguments above) or a dict of ``to_quantized`` arguments.
    """
    class_predicate = class_predicate or (lambda _, m: hasattr(m, "to_quantized"))

    def maybe_quantize(path, m):
        choice = class_predicate(path, m)
        if not choice:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"Unable to quantize model of type {type(m)}")
        if isinstance(choice, bool):
            kwargs = {"group_size": group_size, "bits": bits, "mode": mode}
            if quantize_input:
                kwargs["quantize_input"] = True
            return m.to_quantized(**kwargs)
        if isinstance(choice, dict):
            if "quantize_input" in choice and not choice["quantize_input"]:
                choice.pop("quantize_input")
            return m.to_quantized(**choice)
        raise ValueError("``class_predicate`` must return a bool or a dict of parameters to "
                         "pass to ``to_quantized``")

    leaves = tree_map_with_path(maybe_quantize, model.leaf_modules(), is_leaf=Module.is_module)
    model.update_modules(leaves)


class QuantizedEmbedding(Module):
    """:class:`Embedding` with a quantized table (frozen).

    Args:
        num_embeddings (int): The number of tokens.
        dims (int): The size of each vector.
        group_size (int, optional): See :func:`streamlet.core.quantize`.
        bits (int, optional): See :func:`streamlet.core.quantize`.
        mode (str): The quantization mode. Default: ``"affine"``.
    """

    def __init__(self, num_embeddings: int, dims: int, group_size: int = None,
                 bits: int = None, mode: str = "affine"):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        weight = mx.random.normal(shape=(num_embeddings, dims), scale=math.sqrt(1 / dims))
        _set_quantized(self, weight, group_size, bits, mode)
        self.num_embeddings = num_embeddings
        self.dims = dims
        self.freeze()

    def _quantization(self):
        return {"group_size": self.group_size, "bits": self.bits, "mode": self.mode}

    def __call__(self, x):
        biases = self.get("biases")
        return mx.dequantize(self["weight"][x], scales=self["scales"][x],
                             biases=None if biases is None else biases[x],
                             **self._quantization())

    def as_linear(self, x):
        """``x @ dequantized(weight).T``: the embedding as an output projection (tied weights)."""
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self.get("biases"), transpose=True,
                                   **self._quantization())

    def _extra_repr(self):
        return (f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    @classmethod
    def from_embedding(cls, embedding_layer: Module, group_size: int = None, bits: int = None,
                       mode: str = "affine"):
        """The :class:`QuantizedEmbedding` of an :class:`Embedding`."""
        num, dims = embedding_layer.weight.shape
        layer = cls(num, dims, group_size, bits, mode=mode)
        _set_quantized(layer, embedding_layer.weight, group_size, bits, mode)
        return layer


class QuantizedLinear(Module):
    """:class:`Linear` with a quantized weight (its parameters are frozen).

    Args:
        input_dims (int): The size of the input features.
        output_dims (int): The size of the output features.
        bias (bool): Add a bias. Default: ``True``.
        group_size (int, optional): See :func:`streamlet.core.quantize`.
        bits (int, optional): See :func:`streamlet.core.quantize`.
        mode (str): The quantization mode. Default: ``"affine"``.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = None, bits: int = None, mode: str = "affine"):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        _set_quantized(self, weight, group_size, bits, mode)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self):
        out_dims, packed = self.weight.shape
        return (f"input_dims={packed * 32 // self.bits}, output_dims={out_dims}, "
                f"bias={'bias' in self}, group_size={self.group_size}, bits={self.bits}, "
                f"mode={self.mode}")

    def __call__(self, x):
        x = mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                biases=self.get("biases"), transpose=True,
                                group_size=self.group_size, bits=self.bits, mode=self.mode)
        return x + self["bias"] if "bias" in self else x

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: int = None, bits: int = None,
                    mode: str = "affine"):
        """The :class:`QuantizedLinear` of a :class:`Linear`."""
        output_dims, input_dims = linear_layer.weight.shape
        layer = cls(input_dims, output_dims, False, group_size, bits, mode=mode)
        _set_quantized(layer, linear_layer.weight, group_size, bits, mode)
        if "bias" in linear_layer:
            layer.bias = linear_layer.bias
        return layer


class QQLinear(Module):
    """A linear layer that quantizes its input as well as its weight (``mx.qqmm``), for the
    ``"nvfp4"`` and ``"mxfp8"`` modes; no bias.

    In evaluation mode the weight is stored quantized (``weight`` and ``scales``); in training
    mode it is kept in full precision and quantized on the fly, so that it gets gradients.
    ``train()`` and ``eval()`` switch between the two.

    Args:
        input_dims (int): The size of the input features.
        output_dims (int): The size of the output features.
        group_size (int, optional): See :func:`streamlet.core.quantize`.
        bits (int, optional): See :func:`streamlet.core.quantize`.
        mode (str): ``"nvfp4"`` or ``"mxfp8"``. Default: ``"nvfp4"``.
    """

    def __init__(self, input_dims: int, output_dims: int, group_size: int = None,
                 bits: int = None, mode: str = "nvfp4"):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        self._quantized = False

    def _extra_repr(self):
        out_dims, in_dims = self.weight.shape
        if self.weight.dtype == mx.uint32:
            in_dims = in_dims * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def quantize(self):
        """Store the weight quantized (no-op if it is)."""
        if not self._quantized:
            self.weight, self.scales = mx.quantize(self.weight, self.group_size, self.bits,
                                                   mode=self.mode)
            self._quantized = True

    def dequantize(self):
        """Store the weight in full precision (no-op if it is)."""
        if self._quantized:
            self.weight = mx.dequantize(self.weight, scales=self.scales,
                                        group_size=self.group_size, bits=self.bits,
                                        mode=self.mode)
            del self.scales
            self._quantized = False

    def _set_training_mode(self, mode: bool):
        super()._set_training_mode(mode)
        if self._training:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x):
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: int = None, bits: int = None,
                    mode: str = "nvfp4"):
        """The :class:`QQLinear` of a :class:`Linear` without bias."""
        output_dims, input_dims = linear_layer.weight.shape
        if linear_layer.get("bias") is not None:
            raise NotImplementedError("QQLinear does not support bias yet.")
        layer = cls(input_dims, output_dims, group_size, bits, mode=mode)
        layer.weight = linear_layer.weight
        layer.train(linear_layer.training)
        return layer
