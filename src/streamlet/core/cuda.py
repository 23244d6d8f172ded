"""`mx.cuda`: whether the CUDA (CuPy) backend has a GPU to run on."""
from .. import _public

__all__ = ["is_available"]


def is_available() -> bool:
    """True when CuPy is installed and at least one CUDA GPU is visible."""
    from ..backend import gpu_count
    return gpu_count() > 0


def __dir__():
    return _public.names(globals())
