"""Upsample: nearest, (multi)linear and (bi)cubic resampling of the spatial axes.

Input is ``(N, *spatial, C)``.  Each interpolation is a weighted sum of gathered samples: one
``(indices, weights)`` pair per tap and spatial axis.
"""
import operator
from functools import reduce
from itertools import product
from math import ceil
from typing import Literal, Tuple, Union

import streamlet.core as mx

from .base import Module


def _axis_shape(values, dim, ndims):
    """``values`` (1-d) shaped to broadcast along spatial axis ``dim`` of ``ndims``."""
    shape = [1] * ndims
    shape[dim] = -1
    return values.reshape(shape)


def _scaled_indices(N, scale, align_corners, dim, ndims):
    """The (fractional) source position of each of the ``int(scale * N)`` outputs."""
    M = int(scale * N)
    positions = mx.arange(M, dtype=mx.float32)
    if align_corners:
        positions = positions * ((N - 1) / max(M - 1, 1))
    else:
        step = 1 / scale
        positions = positions * step - ((M - 1) * step - N + 1) / 2
    return _axis_shape(positions, dim, ndims)


def _nearest_indices(N, scale, dim, ndims):
    M = int(scale * N)
    indices = mx.arange(M, dtype=mx.float32)
    indices = ((indices + 0.5) * (N / M) - 0.5).round() if M > N else indices * (N / M)
    return _axis_shape(indices.astype(mx.uint32), dim, ndims)


def _clip_index(indices, N):
    return mx.clip(indices, a_min=0, a_max=N - 1).astype(mx.uint32)


def _linear_indices(N, scale, align_corners, dim, ndims):
    x = mx.clip(_scaled_indices(N, scale, align_corners, dim, ndims), a_min=0, a_max=N - 1)
    left, right = mx.floor(x), mx.ceil(x)
    weight = mx.expand_dims(x - left, -1)
    return ((left.astype(mx.uint32), 1 - weight), (right.astype(mx.uint32), weight))


def _cubic_weight(distance, inner, a=-0.75):
    """Keys' cubic kernel at ``distance`` (in [0, 1] for ``inner`` taps, else [1, 2])."""
    x = distance
    if inner:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    return (((x - 5) * x + 8) * x - 4) * a


def _cubic_indices(N, scale, align_corners, dim, ndims):
    x = _scaled_indices(N, scale, align_corners, dim, ndims)
    left = mx.floor(x)
    right = mx.floor(x + 1)
    taps = ((left, True), (right, True), (left - 1, False), (right + 1, False))
    return tuple((_clip_index(t, N), _cubic_weight(mx.abs(x - t), inner)[..., None])
                 for t, inner in taps)


def _triangle_kernel(x):
    return mx.maximum(1.0 - x, 0.0)


def _cubic_kernel(x):
    """Keys' cubic with a = -0.5 (Pillow's), on its support [0, 2]."""
    return mx.where(x <= 1.0, _cubic_weight(x, True, -0.5),
                    mx.where(x <= 2.0, _cubic_weight(x, False, -0.5), 0.0))


def _antialiased(kernel, radius):
    """Indices for ``kernel``: widened by 1 / scale when downscaling (a low-pass filter, as
    PyTorch's ``antialias=True``), taps outside the input dropped and weights renormalized."""

    def indices(N, scale, align_corners, dim, ndims):
        x = _scaled_indices(N, scale, align_corners, dim, ndims)
        widen = 1.0 / scale if scale < 1 else 1.0
        taps = ceil(radius * widen) + 1
        base = mx.floor(x)
        positions = [base + k for k in range(-taps + 1, taps)]
        weights = [mx.where((p >= 0) & (p < N), kernel(mx.abs(x - p) / widen), 0.0)
                   for p in positions]
        total = sum(weights)
        total = mx.where(total > 0, total, 1.0)
        return tuple((_clip_index(p, N), mx.expand_dims(w / total, -1))
                     for p, w in zip(positions, weights))

    return indices


def _check_scales(x, scale_factor):
    if x.ndim - 2 != len(scale_factor):
        raise ValueError("A scale needs to be provided for each spatial dimension")


def upsample_nearest(x, scale_factor: Tuple):
    """Nearest-neighbour upsampling of ``x``'s spatial axes by ``scale_factor`` (one each).

    >>> upsample_nearest(mx.array([[[1], [2]]]), (2.0,)).reshape(-1).tolist()
    [1, 1, 2, 2]
    """
    _check_scales(x, scale_factor)
    dims = len(scale_factor)
    if tuple(map(int, scale_factor)) == tuple(scale_factor):
        # integer factors: repeat each element by broadcasting
        batch, *spatial, channels = x.shape
        x = x.reshape(batch, *(d for n in spatial for d in (n, 1)), channels)
        grown = [batch, *(d for n, s in zip(spatial, scale_factor) for d in (n, int(s))),
                 channels]
        x = mx.broadcast_to(x, grown)
        return x.reshape(batch, *(n * int(s) for n, s in zip(spatial, scale_factor)), channels)
    indices = [_nearest_indices(n, s, i, dims)
               for i, (n, s) in enumerate(zip(x.shape[1:-1], scale_factor))]
    return x[(slice(None), *indices)]


def _interpolate(x, scale_factor, indices_fn, align_corners=False):
    """Every combination of taps over all axes at once, weighted by the product of weights."""
    _check_scales(x, scale_factor)
    dims = len(scale_factor)
    per_axis = [indices_fn(n, s, align_corners, i, dims)
                for i, (n, s) in enumerate(zip(x.shape[1:-1], scale_factor))]
    out = None
    for taps in product(*per_axis):
        idx, weights = zip(*taps)
        term = reduce(operator.mul, weights) * x[(slice(None), *idx)]
        out = term if out is None else out + term
    return out


def _interpolate_separable(x, scale_factor, indices_fn, align_corners=False):
    """One spatial axis after another: gather along it and sum the weighted taps."""
    _check_scales(x, scale_factor)
    dims = len(scale_factor)
    out = x
    for i, (n, s) in enumerate(zip(x.shape[1:-1], scale_factor)):
        taps = [mx.take(out, idx.reshape(-1), axis=i + 1) * w
                for idx, w in indices_fn(n, s, align_corners, i, dims)]
        out = sum(taps)
    return out


def _check_antialias(align_corners, antialias):
    if antialias and align_corners:
        raise ValueError("[Upsample] antialias=True with align_corners=True is not supported. "
                         "Use align_corners=False for antialiased interpolation.")


def upsample_linear(x, scale_factor: Tuple, align_corners: bool = False,
                    antialias: bool = False):
    """(Multi)linear upsampling of ``x``'s spatial axes by ``scale_factor`` (one each).

    >>> upsample_linear(mx.array([[[1.0], [2.0]]]), (2.0,)).reshape(-1).tolist()
    [1.0, 1.25, 1.75, 2.0]
    """
    _check_antialias(align_corners, antialias)
    if antialias:
        return _interpolate_separable(x, scale_factor, _antialiased(_triangle_kernel, 1.0))
    if not align_corners:
        return _interpolate_separable(x, scale_factor, _linear_indices)
    return _interpolate(x, scale_factor, _linear_indices, align_corners)


def upsample_cubic(x, scale_factor: Tuple, align_corners: bool = False,
                   antialias: bool = False):
    """(Bi)cubic upsampling of ``x``'s spatial axes by ``scale_factor`` (one each): Keys'
    kernel with a = -0.75 (OpenCV's), or a = -0.5 with ``antialias`` (as PyTorch).

    >>> upsample_cubic(mx.ones((1, 2, 1)), (2.0,)).shape
    (1, 4, 1)
    """
    _check_antialias(align_corners, antialias)
    if antialias:
        return _interpolate_separable(x, scale_factor, _antialiased(_cubic_kernel, 2.0))
    return _interpolate(x, scale_factor, _cubic_indices, align_corners)


_MODES = {"nearest": lambda x, s, corners, aa: upsample_nearest(x, s),
          "linear": upsample_linear, "cubic": upsample_cubic}


class Upsample(Module):
    """Resamples the spatial axes (``1`` to ``ndim - 2``) of ``(N, *spatial, C)`` input.

    ``"linear"`` is bilinear, trilinear... over several axes; ``"cubic"`` bicubic over two.
    With ``align_corners`` the corner samples of input and output coincide.  ``antialias``
    (``"linear"`` and ``"cubic"``, not with ``align_corners``) low-pass filters when
    downscaling, as PyTorch's ``F.interpolate(antialias=True)``; for ``"cubic"`` it also
    switches the kernel to a = -0.5, as PyTorch does.

    Args:
        scale_factor (float or tuple): The factor for every spatial axis, or one per axis.
        mode (str): ``"nearest"``, ``"linear"`` or ``"cubic"``. Default: ``"nearest"``.
        align_corners (bool): Default: ``False``.
        antialias (bool): Default: ``False``.

    >>> x = mx.arange(1, 5).reshape((1, 2, 2, 1))
    >>> nn.Upsample(scale_factor=2)(x).squeeze().tolist()
    [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
    >>> nn.Upsample(scale_factor=2, mode="linear")(x).squeeze()[0].tolist()
    [1.0, 1.25, 1.75, 2.0]
    """

    def __init__(self, scale_factor: Union[float, Tuple],
                 mode: Literal["nearest", "linear", "cubic"] = "nearest",
                 align_corners: bool = False, antialias: bool = False):
        super().__init__()
        if mode not in _MODES:
            raise ValueError(f"[Upsample] Got unsupported upsampling algorithm: {mode}")
        if antialias and mode == "nearest":
            raise ValueError("[Upsample] Antialiasing is not supported for nearest neighbor "
                             "upsampling")
        _check_antialias(align_corners, antialias)
        if isinstance(scale_factor, (list, tuple)):
            self.scale_factor = tuple(map(float, scale_factor))
        else:
            self.scale_factor = float(scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self) -> str:
        text = (f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
                f"align_corners={self.align_corners}")
        return text + (", antialias=True" if self.antialias else "")

    def __call__(self, x):
        dims = x.ndim - 2
        if dims <= 0:
            raise ValueError("[Upsample] The input should have at least 1 spatial dimension "
                             f"which means it should be at least 3D but {x.ndim}D was provided")
        scale = self.scale_factor
        if isinstance(scale, tuple):
            if len(scale) != dims:
                raise ValueError("[Upsample] One scale per spatial dimension is required but "
                                 f"scale_factor={scale} and the number of spatial dimensions "
                                 f"were {dims}")
        else:
            scale = (scale,) * dims
        return _MODES[self.mode](x, scale, self.align_corners, self.antialias)
