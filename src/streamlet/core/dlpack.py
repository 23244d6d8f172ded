"""`from_dlpack`: arrays that share memory with any DLPack producer (NumPy, PyTorch, CuPy...)."""
from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .array import array, wrap
from .graph import Node

_CPU, _CUDA = 1, 2
_NARROW = {np.dtype(np.float64): np.dtype(np.float32),
           np.dtype(np.complex128): np.dtype(np.complex64)}


def _wrap(data, state=None) -> array:
    """An evaluated array around `data` itself (no copy)."""
    return wrap(Node(tuple(data.shape), dt.from_numpy(data.dtype), stream=state, data=data))


def from_dlpack(x, /, *, copy=None) -> array:
    """An array from an object with `__dlpack__`; shares its memory unless `copy=True`.

    As in MLX, float64 becomes float32 and complex128 complex64; such a conversion
    copies, so with `copy=False` it raises ValueError.
    """
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"[from_dlpack] Expected an object with __dlpack__, got "
                        f"{type(x).__name__}.")
    device = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else _CPU
    if device == _CUDA:
        return _from_cuda(x, copy)
    data = np.from_dlpack(x, copy=copy)
    target = _NARROW.get(data.dtype)
    if target is not None:
        if copy is False:
            raise ValueError(f"[from_dlpack] {data.dtype} is imported as {target}, which "
                             "needs a copy.")
        data = data.astype(target)
    dt.from_numpy(data.dtype)  # raises TypeError for dtypes MLX has no name for
    return _wrap(data)


def _from_cuda(x, copy):
    from ..backend import gpu_count
    if gpu_count() == 0:
        raise ValueError("[from_dlpack] The object lives on a CUDA device but streamlet has no "
                         "GPU backend here.")
    import cupy

    from .device import gpu
    from .stream import default_stream, resolve
    data = cupy.from_dlpack(x)
    if copy:
        data = data.copy()
    return _wrap(data, resolve(default_stream(gpu)))


__all__ = ["from_dlpack"]
