"""Every layer of streamlet.nn (also importable from ``streamlet.nn`` itself)."""
from ... import _public
from .activations import (CELU, ELU, GELU, GLU, SELU, HardShrink, Hardswish, HardTanh,  # noqa
                          LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU2, ReLU6,
                          Sigmoid, SiLU, Softmax, Softmin, Softplus, Softshrink, Softsign, Step,
                          Tanh, celu, elu, gelu, gelu_approx, gelu_fast_approx, glu,
                          hard_shrink, hard_tanh, hardswish, leaky_relu, log_sigmoid,
                          log_softmax, mish, prelu, relu, relu2, relu6, selu, sigmoid, silu,
                          softmax, softmin, softplus, softshrink, softsign, step, tanh)
from .base import Module  # noqa: F401
from .containers import Sequential  # noqa: F401
from .convolution import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,  # noqa
                          ConvTranspose3d)
from .distributed import (AllToShardedLinear, FullyShardedModule,  # noqa: F401
                          QuantizedAllToShardedLinear, QuantizedShardedToAllLinear,
                          ShardedToAllLinear, fully_shard)
from .dropout import Dropout, Dropout2d, Dropout3d  # noqa: F401
from .embedding import Embedding  # noqa: F401
from .linear import Bilinear, Identity, Linear  # noqa: F401
from .normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm  # noqa
from .pooling import AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d  # noqa
from .positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding  # noqa: F401
from .quantized import QQLinear, QuantizedEmbedding, QuantizedLinear, quantize  # noqa: F401
from .recurrent import GRU, LSTM, RNN  # noqa: F401
from .transformer import (MultiHeadAttention, Transformer, TransformerDecoder,  # noqa: F401
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .upsample import Upsample  # noqa: F401

# the layers and activations (the files they live in are not part of the surface)
__all__ = ["ALiBi", "AllToShardedLinear", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "BatchNorm", "Bilinear", "CELU", "Conv1d", "Conv2d", "Conv3d",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Dropout",
           "Dropout2d", "Dropout3d", "ELU", "Embedding", "FullyShardedModule", "GELU",
           "GLU", "GRU", "GroupNorm", "HardShrink", "HardTanh", "Hardswish",
           "Identity", "InstanceNorm", "LSTM", "LayerNorm", "LeakyReLU", "Linear",
           "LogSigmoid", "LogSoftmax", "MaxPool1d", "MaxPool2d", "MaxPool3d", "Mish",
           "Module", "MultiHeadAttention", "PReLU", "QQLinear",
           "QuantizedAllToShardedLinear", "QuantizedEmbedding", "QuantizedLinear",
           "QuantizedShardedToAllLinear", "RMSNorm", "RNN", "ReLU", "ReLU2", "ReLU6",
           "RoPE", "SELU", "Sequential", "ShardedToAllLinear", "SiLU", "Sigmoid",
           "SinusoidalPositionalEncoding", "Softmax", "Softmin", "Softplus",
           "Softshrink", "Softsign", "Step", "Tanh", "Transformer",
           "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer", "Upsample", "celu", "elu", "fully_shard", "gelu",
           "gelu_approx", "gelu_fast_approx", "glu", "hard_shrink", "hard_tanh",
           "hardswish", "leaky_relu", "log_sigmoid", "log_softmax", "mish", "prelu",
           "quantize", "relu", "relu2", "relu6", "selu", "sigmoid", "silu", "softmax",
           "softmin", "softplus", "softshrink", "softsign", "step", "tanh"]


def __dir__():
    return _public.names(globals())
