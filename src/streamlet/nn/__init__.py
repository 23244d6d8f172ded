"""streamlet.nn: the mlx.nn-compatible neural network library (pure Python over streamlet.core).

>>> import streamlet.core as mx
>>> import streamlet.nn as nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
>>> model(mx.zeros((3, 4))).shape
(3, 2)
"""
from .. import _public
from . import init, layers, losses, utils  # noqa: F401
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layer_names
from .layers import (activations, base, containers, convolution, distributed,  # noqa: F401
                     dropout, embedding, linear, normalization, pooling, positional_encoding,
                     quantized, recurrent, transformer, upsample)
from .utils import average_gradients, value_and_grad  # noqa: F401

# the files of layers that mlx.nn shows too (nn.activations.sigmoid, ...)
_LAYER_MODULES = ["activations", "base", "containers", "convolution", "distributed", "dropout",
                  "embedding", "linear", "normalization", "pooling", "positional_encoding",
                  "quantized", "recurrent", "transformer", "upsample"]
# the layers, the public submodules (init, losses, layers, utils) and the training helpers
__all__ = [*_layer_names, "init", "layers", "losses", "utils", *_LAYER_MODULES,
           "average_gradients", "value_and_grad"]


def __dir__():
    return _public.names(globals())
