"""`from_dlpack`: arrays from any DLPack producer (NumPy, PyTorch, CuPy...)."""
from __future__ import annotations

from .array import to_array
from .convert import is_buffer, from_buffer


def from_dlpack(x, /, *, copy=None):
    """An array from an object with `__dlpack__` (or the buffer protocol), as MLX 0.32.4.

    The array never follows later changes of the source: a CPU source is copied (with
    its strides), and `copy=False` raises ValueError there, as MLX's CPU build does.  A
    CUDA source is copied too, unless `copy=False`: then the array shares its memory
    (and changes with it).  float64 becomes float32 and complex128 complex64.

    >>> mx.from_dlpack(np.arange(3, dtype=np.int16)).tolist()
    [0, 1, 2]
    """
    if not is_buffer(x):
        raise TypeError(f"[from_dlpack] Expected an object with __dlpack__, got "
                        f"{type(x).__name__}.")
    return to_array(from_buffer(x, None, copy))


__all__ = ["from_dlpack"]
