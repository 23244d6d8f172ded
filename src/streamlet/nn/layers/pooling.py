"""Max and average pooling over the spatial axes of channels-last input (1, 2 or 3 of them)."""
import math

import streamlet.core as mx

from .base import Module


def _per_axis(value, n, message):
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(message)
        return tuple(value)
    if not isinstance(value, int):
        raise ValueError(message)
    return (value,) * n


def _sliding_windows(x, window, strides):
    """A view of ``x`` (``N, *spatial, C``) as ``N, *out_spatial, *window, C``."""
    if x.ndim < 3:
        raise ValueError("To extract sliding windows at least 1 spatial dimension (3 total) is "
                         f"needed but the input only has {x.ndim} dimensions.")
    spatial = x.shape[1:-1]
    if not len(spatial) == len(window) == len(strides):
        raise ValueError("To extract sliding windows the window shapes and strides must have "
                         "the same number of spatial dimensions as the signal but the signal "
                         f"has {len(spatial)} dims and the window shape has {len(window)} and "
                         f"strides have {len(strides)}.")
    if all(w == s and n % w == 0 for n, w, s in zip(spatial, window, strides)):
        # tiles that cover the input exactly: a reshape and a transpose, no strided view
        split = [x.shape[0], *(d for n, w in zip(spatial, window) for d in (n // w, w)),
                 x.shape[-1]]
        last = len(split) - 1
        return x.reshape(split).transpose(0, *range(1, last, 2), *range(2, last, 2), last)
    row = [math.prod(x.shape[i + 1:]) for i in range(x.ndim)]  # row-major element strides
    out = [(n - w) // s + 1 for n, w, s in zip(spatial, window, strides)]
    shape = [x.shape[0], *out, *window, x.shape[-1]]
    step = [row[0], *(r * s for r, s in zip(row[1:-1], strides)), *row[1:-1], row[-1]]
    return mx.as_strided(x, shape, step)


class _Pool(Module):
    """Pools ``_ndim`` spatial axes with ``_reduce`` (``mx.max`` or ``mx.mean``), padding both
    sides of each with ``_pad_value``."""

    _ndim = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name, n = type(self).__name__, self._ndim
        message = (f"[{name}] '{{}}' must be an integer or a tuple containing {n} "
                   f"integer{'s' if n > 1 else ''}")
        kernel = _per_axis(kernel_size, n, message.format("kernel_size"))
        stride = kernel if stride is None else _per_axis(stride, n, message.format("stride"))
        padding = _per_axis(padding, n, message.format("padding"))
        for what, values in (("kernel_size", kernel), ("stride", stride)):
            if any(v <= 0 for v in values):
                raise ValueError(f"[{name}] '{what}' must be positive but got {values}.")
        if any(p < 0 for p in padding):
            raise ValueError(f"[{name}] 'padding' must be non-negative but got {padding}.")
        # kept in the module's dict as MLX keeps them (lists show in children())
        self._kernel_size, self._stride = list(kernel), list(stride)
        self._padding = [(p, p) for p in padding]
        self._axes = tuple(range(-n - 1, -1))

    def _extra_repr(self):
        padding = tuple(p for p, _ in self._padding)
        return (f"kernel_size={tuple(self._kernel_size)}, stride={tuple(self._stride)}, "
                f"padding={padding}")

    def __call__(self, x):
        if any(p for p, _ in self._padding):
            x = mx.pad(x, [(0, 0), *self._padding, (0, 0)], constant_values=self._pad_value)
        windows = _sliding_windows(x, self._kernel_size, self._stride)
        return type(self)._reduce(windows, self._axes)


def _pool(name, ndim, reduce, pad_value, what, pad_what):
    axes = {1: "the spatial axis", 2: "the height and width axes",
            3: "the depth, height and width axes"}[ndim]
    kind = "int" if ndim == 1 else f"int or tuple of {ndim} ints"
    example = ", ".join(["4"] + ["8"] * ndim + ["3"])
    doc = f"""Applies {ndim}-d {what} pooling: the {what} of each window on {axes}.

    Args:
        kernel_size ({kind}): The size of the window.
        stride ({kind}, optional): Its step. Default: ``kernel_size``.
        padding ({kind}, optional): {pad_what} padding on both sides. Default: ``0``.

    >>> nn.{name}(kernel_size=2)(mx.zeros(({example}))).shape
    ({", ".join(["4"] + ["4"] * ndim + ["3"])})
    """
    return type(name, (_Pool,), {"_ndim": ndim, "_reduce": staticmethod(reduce),
                                 "_pad_value": pad_value, "__doc__": doc,
                                 "__module__": __name__})


MaxPool1d = _pool("MaxPool1d", 1, mx.max, -float("inf"), "maximum", "Negative infinity")
MaxPool2d = _pool("MaxPool2d", 2, mx.max, -float("inf"), "maximum", "Negative infinity")
MaxPool3d = _pool("MaxPool3d", 3, mx.max, -float("inf"), "maximum", "Negative infinity")
AvgPool1d = _pool("AvgPool1d", 1, mx.mean, 0, "average", "Zero")
AvgPool2d = _pool("AvgPool2d", 2, mx.mean, 0, "average", "Zero")
AvgPool3d = _pool("AvgPool3d", 3, mx.mean, 0, "average", "Zero")

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d"]
