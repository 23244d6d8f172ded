"""Convolutions over channels-last input (``NLC``, ``NHWC``, ``NDHWC``) and their transposes.

Weights have shape ``[out_channels, *kernel_size, in_channels (/ groups)]`` and start uniform
in ``(-k, k)``, ``k = 1 / sqrt(fan_in)``; biases start at zero.
"""
import math
from typing import Union

import streamlet.core as mx

from .base import Module


def _per_axis(value, ndim):
    """An int repeated for every spatial axis (1-d layers keep their ints, as MLX's do)."""
    return (value,) * ndim if ndim > 1 and isinstance(value, int) else value


class _Conv(Module):
    """Shared body: ``_ndim`` spatial axes, core op ``_op`` (``conv2d``, ``conv_transpose2d``...)
    and its last argument, ``groups`` or ``output_padding`` (``_last``)."""

    _ndim = 1
    _op = "conv1d"
    _last = "groups"

    def _setup(self, in_channels, out_channels, kernel_size, stride, padding, dilation, bias,
               last):
        n = self._ndim
        groups = last if self._last == "groups" else 1
        if in_channels % groups != 0:
            raise ValueError(f"The number of input channels ({in_channels}) must be divisible "
                             f"by the number of groups ({groups})")
        kernel_size, stride, padding = (_per_axis(v, n) for v in (kernel_size, stride, padding))
        kernel = (kernel_size,) if n == 1 else tuple(kernel_size)
        if len(kernel) < n:  # MLX reads one size per axis: an IndexError
            raise IndexError(f"[{type(self).__name__}] kernel_size {kernel_size} has fewer "
                             f"than {n} sizes.")
        scale = math.sqrt(1 / (in_channels // groups * math.prod(kernel[:n])))
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *kernel, in_channels // groups))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = padding
        self.stride = stride
        self.dilation = dilation
        if last is not None:
            setattr(self, self._last, last if self._last == "groups" else _per_axis(last, n))

    def _last_args(self):
        return () if self._last is None else (getattr(self, self._last),)

    def _extra_repr(self):
        groups = getattr(self, "groups", 1)
        kernel = self.weight.shape[1] if self._ndim == 1 else self.weight.shape[1:1 + self._ndim]
        last = "".join(f"{self._last}={v}, " for v in self._last_args())
        return (f"{self.weight.shape[-1] * groups}, {self.weight.shape[0]}, "
                f"kernel_size={kernel}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, {last}bias={'bias' in self}")

    def __call__(self, x):
        y = getattr(mx, self._op)(x, self.weight, self.stride, self.padding, self.dilation,
                                  *self._last_args())
        return y + self.bias if "bias" in self else y


class Conv1d(_Conv):
    """A 1-d convolution over ``NLC`` input.

    Args:
        in_channels (int): Input channels ``C``.
        out_channels (int): Output channels.
        kernel_size (int): The filters' size.
        stride (int): Default: ``1``.
        padding (int): Zeros added on both sides. Default: ``0``.
        dilation (int): Default: ``1``.
        groups (int): Default: ``1``.
        bias (bool): Add a learned bias. Default: ``True``.

    >>> nn.Conv1d(3, 8, 3).weight.shape
    (8, 3, 3)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, bias,
                    groups)


class Conv2d(_Conv):
    """A 2-d convolution over ``NHWC`` input; ints stand for the same value on both axes.

    Args:
        in_channels (int): Input channels ``C``.
        out_channels (int): Output channels.
        kernel_size (int or tuple): The filters' size.
        stride (int or tuple): Default: ``1``.
        padding (int or tuple): Zeros added on both sides. Default: ``0``.
        dilation (int or tuple): Default: ``1``.
        groups (int): Default: ``1``.
        bias (bool): Add a learned bias. Default: ``True``.

    >>> nn.Conv2d(3, 8, 3).weight.shape
    (8, 3, 3, 3)
    """

    _ndim, _op = 2, "conv2d"

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, groups: int = 1, bias: bool = True):
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, bias,
                    groups)


class Conv3d(_Conv):
    """A 3-d convolution over ``NDHWC`` input; ints stand for the same value on all axes.

    Args:
        in_channels (int): Input channels ``C``.
        out_channels (int): Output channels.
        kernel_size (int or tuple): The filters' size.
        stride (int or tuple): Default: ``1``.
        padding (int or tuple): Zeros added on both sides. Default: ``0``.
        dilation (int or tuple): Default: ``1``.
        bias (bool): Add a learned bias. Default: ``True``.

    >>> nn.Conv3d(3, 8, 3).weight.shape
    (8, 3, 3, 3, 3)
    """

    _ndim, _op, _last = 3, "conv3d", None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, bias: bool = True):
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, bias,
                    None)


class _ConvTranspose(_Conv):
    _last = "output_padding"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, output_padding=0, bias=True):
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, bias,
                    output_padding)


class ConvTranspose1d(_ConvTranspose):
    """A 1-d transposed convolution over ``NLC`` input.

    Args:
        in_channels (int): Input channels ``C``.
        out_channels (int): Output channels.
        kernel_size (int): The filters' size.
        stride (int): Default: ``1``.
        padding (int): Default: ``0``.
        dilation (int): Default: ``1``.
        output_padding (int): Added to one side of the output. Default: ``0``.
        bias (bool): Add a learned bias. Default: ``True``.

    >>> nn.ConvTranspose1d(3, 8, 3).weight.shape
    (8, 3, 3)
    """

    _op = "conv_transpose1d"


class ConvTranspose2d(_ConvTranspose):
    """A 2-d transposed convolution over ``NHWC`` input; arguments as :class:`ConvTranspose1d`,
    each an int or a pair.

    >>> nn.ConvTranspose2d(3, 8, 3).weight.shape
    (8, 3, 3, 3)
    """

    _ndim, _op = 2, "conv_transpose2d"


class ConvTranspose3d(_ConvTranspose):
    """A 3-d transposed convolution over ``NDHWC`` input; arguments as :class:`ConvTranspose1d`,
    each an int or a triple.

    >>> nn.ConvTranspose3d(3, 8, 3).weight.shape
    (8, 3, 3, 3, 3)
    """

    _ndim, _op = 3, "conv_transpose3d"
