"""Identity, Linear and Bilinear layers."""
import math
from typing import Any, Optional

import streamlet.core as mx
from streamlet.core.ops.linalg import matmul_transposed

from .base import Module


def _uniform(scale, shape):
    """U(-scale, scale) of ``shape``: how MLX initializes weights and biases."""
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments.

    >>> nn.Identity(3, foo=1)(mx.array([1, 2])).tolist()
    [1, 2]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    """The affine map ``y = x W^T + b``, ``W`` of shape ``[output_dims, input_dims]``.

    ``W`` and ``b`` start uniform in ``(-k, k)``, ``k = 1 / sqrt(input_dims)``.

    Args:
        input_dims (int): The size of the input features.
        output_dims (int): The size of the output features.
        bias (bool): Whether to add a bias ``b``. Default: ``True``.

    >>> nn.Linear(3, 2)(mx.zeros((5, 3))).shape
    (5, 2)
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True) -> None:
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = _uniform(scale, (output_dims, input_dims))
        if bias:
            self.bias = _uniform(scale, (output_dims,))

    def _extra_repr(self) -> str:
        return (f"input_dims={self.weight.shape[1]}, output_dims={self.weight.shape[0]}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return matmul_transposed(x, self["weight"])  # x @ W.T, as one node

    def to_quantized(self, group_size: Optional[int] = None, bits: Optional[int] = None,
                     mode: str = "affine", quantize_input: bool = False):
        """This layer as a :class:`QuantizedLinear` (or, quantizing the input too, a
        :class:`QQLinear`, for the ``"nvfp4"`` and ``"mxfp8"`` modes only)."""
        from .quantized import QQLinear, QuantizedLinear

        if quantize_input:
            if mode not in ("nvfp4", "mxfp8"):
                raise ValueError("Quantized activations are only supported for 'nvfp4' and "
                                 f"'mxfp8' modes, got {mode}.")
            return QQLinear.from_linear(self, group_size, bits, mode)
        return QuantizedLinear.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    """The bilinear map ``y_i = x_2^T W_i x_1 + b_i``, ``W`` of shape ``[out, in2, in1]``.

    ``W`` and ``b`` start uniform in ``(-k, k)``, ``k = 1 / sqrt(input1_dims)``.

    Args:
        input1_dims (int): The size of ``x_1``'s features.
        input2_dims (int): The size of ``x_2``'s features.
        output_dims (int): The size of the output features.
        bias (bool): Whether to add a bias ``b``. Default: ``True``.

    >>> nn.Bilinear(3, 4, 2)(mx.zeros((5, 3)), mx.zeros((5, 4))).shape
    (5, 2)
    """

    def __init__(self, input1_dims: int, input2_dims: int, output_dims: int,
                 bias: bool = True) -> None:
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = _uniform(scale, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = _uniform(scale, (output_dims,))

    def _extra_repr(self) -> str:
        out, in2, in1 = self.weight.shape
        return (f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, "
                f"bias={'bias' in self}")

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        lead = x1.shape[:-1]
        # (x1 W_i^T) for all i at once, then contract with x2
        y = x1.reshape(-1, in1) @ self.weight.reshape(out * in2, in1).T
        y = y.reshape(-1, out, in2).swapaxes(-2, -1)
        y = (x2.reshape(-1, 1, in2) @ y).squeeze(1).reshape(*lead, out)
        return y + self.bias if "bias" in self else y
