"""Shape dimensions as MLX keeps them: 32-bit signed integers.

A dimension given or computed outside that range raises OverflowError naming it,
as MLX 0.32.4 does, before any other check of the shape.
"""
from __future__ import annotations

import numpy as np

from . import build as b

LOW, HIGH = -(2 ** 31), 2 ** 31 - 1


def dim(n, op: str | None = None) -> int:
    """`n` when it fits a shape dimension: `dim(3) == 3`; `dim(2**31)` raises OverflowError."""
    if not LOW <= n <= HIGH:
        where = f"[{op}] " if op else ""
        raise OverflowError(f"{where}Shape dimension {n} is outside the supported range "
                            f"[{LOW}, {HIGH}]. Shape dimensions are 32-bit integers.")
    return n


def shape(value, op: str) -> tuple:
    """A shape argument as `build.check_shape` reads it, its entries checked by `dim` first.

    >>> shape(3, "zeros")
    (3,)
    """
    entries = (value,) if isinstance(value, (int, np.integer)) else value
    if b.is_sequence(entries):
        entries = tuple(entries)
        for n in entries:
            if isinstance(n, (int, np.integer)) and not isinstance(n, bool):
                dim(int(n), op)
            elif isinstance(n, b.array):  # 0-d integer arrays stand for their ints
                return shape(tuple(b.ints_of(n) for n in entries), op)
    return b.check_shape(entries, op)
