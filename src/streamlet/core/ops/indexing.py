"""`a[index]`: ints, slices, None, Ellipsis and integer arrays."""
from __future__ import annotations

import numpy as np

from . import build as b


class _Slot:
    """Where the i-th array input goes when the index is rebuilt at run time."""

    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"<input {self.i}>"


def _gather(xp, a, *arrays, index):
    return a[tuple(arrays[s.i] if type(s) is _Slot else s for s in index)]


_GETITEM = b.make("getitem", _gather)


def _dummy(shape):
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=shape,
                                           strides=(0,) * len(shape))


def getitem(a, index, *, stream=None):
    """`a[index]` as an op on a stream."""
    if not isinstance(index, tuple):
        index = (index,)
    template, probe, arrays = [], [], []
    for x in index:
        if isinstance(x, (list, np.ndarray)) or isinstance(x, b.array):
            x = b.as_array(x, "getitem") if not isinstance(x, b.array) else x
            if x._dtype.kind not in "iu":
                raise ValueError(f"[getitem] Array indices must be integers, got {x._dtype.name} "
                                 "(boolean masks have a data-dependent shape).")
            template.append(_Slot(len(arrays)))
            probe.append(np.zeros(x._shape, np.intp))
            arrays.append(x)
        elif x is None or x is Ellipsis or isinstance(x, slice):
            template.append(x)
            probe.append(x)
        elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            template.append(int(x))
            probe.append(int(x))
        else:
            raise TypeError(f"[getitem] Cannot index an array with {type(x).__name__}.")
    try:
        shape = _dummy(a._shape)[tuple(probe)].shape
    except IndexError as exc:
        raise IndexError(f"[getitem] {exc} (array shape {a._shape}).") from None
    return b.node(_GETITEM, (a, *arrays), shape, a._dtype, {"index": tuple(template)},
                  b.resolve(stream))
