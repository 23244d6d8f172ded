"""Backends: the CPU (NumPy) one always, the CUDA (CuPy) one when CuPy and a GPU exist."""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def _cuda():
    try:
        from . import cuda
    except ImportError:
        return None
    return cuda if cuda.device_count() > 0 else None


def gpu_count() -> int:
    mod = _cuda()
    return 0 if mod is None else mod.device_count()


def gpu_info(index: int) -> dict:
    return _cuda().device_info(index)


def for_device_type(type_value: int):
    """The backend module for a DeviceType value (0 cpu, 1 gpu)."""
    if type_value == 0:
        from . import cpu
        return cpu
    return _cuda()
