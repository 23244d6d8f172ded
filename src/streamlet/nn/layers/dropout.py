"""Dropout, and its channel-wise forms Dropout2d and Dropout3d."""
import streamlet.core as mx

from .base import Module


class _Dropout(Module):
    """Zeroes elements with probability ``p`` in training mode and scales the rest by 1/(1-p).

    ``_spatial`` spatial axes before the channel axis share one draw per channel.
    """

    _spatial = 0

    def __init__(self, p: float = 0.5):
        super().__init__()
        if p < 0 or p >= 1:
            raise ValueError(f"The dropout probability {p} is not in [0, 1)")
        self._p_1 = 1 - p

    def _extra_repr(self) -> str:
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        ndims = (self._spatial + 1, self._spatial + 2)
        if self._spatial and x.ndim not in ndims:
            raise ValueError(f"Received input with {x.ndim} dimensions. Expected {ndims[0]} or "
                             f"{ndims[1]} dimensions.")
        if self._p_1 == 1 or not self.training:
            return x
        shape = list(x.shape)
        for axis in range(2, self._spatial + 2):
            shape[-axis] = 1
        mask = mx.random.bernoulli(p=self._p_1, shape=shape)
        return (mask * x) * (1 / self._p_1)


class Dropout(_Dropout):
    """Zeroes each element with probability ``p`` during training; scales the rest by
    ``1 / (1 - p)`` so that expected values are kept.  The identity in evaluation mode.

    Args:
        p (float): The probability of zeroing an element. Default: ``0.5``.

    >>> nn.Dropout(0.5).eval()(mx.ones((3,))).tolist()
    [1.0, 1.0, 1.0]
    """


class Dropout2d(_Dropout):
    """Zeroes whole channels of ``NHWC`` or ``HWC`` input with probability ``p`` in training,
    scaling the rest by ``1 / (1 - p)`` (for early convolutions, where neighbouring pixels are
    correlated; Thompson et al., CVPR 2015).

    Args:
        p (float): The probability of zeroing a channel. Default: ``0.5``.

    >>> nn.Dropout2d(0.5)(mx.ones((2, 4, 4, 3))).shape
    (2, 4, 4, 3)
    """

    _spatial = 2


class Dropout3d(_Dropout):
    """Zeroes whole channels of ``NDHWC`` or ``DHWC`` input with probability ``p`` in training,
    scaling the rest by ``1 / (1 - p)``.

    Args:
        p (float): The probability of zeroing a channel. Default: ``0.5``.

    >>> nn.Dropout3d(0.5)(mx.ones((2, 2, 4, 4, 3))).shape
    (2, 2, 4, 4, 3)
    """

    _spatial = 3
