"""`mx.cuda`: whether the CUDA (CuPy) backend has a GPU to run on."""


def is_available() -> bool:
    """True when CuPy is installed and at least one CUDA GPU is visible."""
    from ..backend import gpu_count
    return gpu_count() > 0
