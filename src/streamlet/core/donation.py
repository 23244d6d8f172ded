"""Buffer donation: an elementwise op on the CPU writes its result into an input's buffer
when nothing can read that buffer again, as MLX does.

An input may donate when its node is held by the consuming op alone (no array handle,
no other consumer, no transform keeping it) and its buffer by that node alone (no NumPy
view the user holds, no other node sharing the ndarray, no DLPack capsule): its value is
then never read again, and the output takes its memory over instead of allocating as
much again.  Both are reference counts.  What "alone" reads as is measured once, at
import, through these same functions (`_calibrate`), so it holds on every CPython
version; any other holder raises a count, and then the op allocates as usual.
"""
from __future__ import annotations

import sys

import numpy as np

from . import dtypes
from .graph import keeps_graph
from .memory import TRACK_BYTES

# Not the half types: their kernels compute in float32 and round once, as MLX's do.
_TYPES = frozenset(d for d in dtypes.ALL if d not in (dtypes.float16, dtypes.bfloat16))
DONATES = frozenset(d.np for d in _TYPES)  # the NumPy dtypes of buffers written into


def donor(node, args, at_least=TRACK_BYTES):
    """The buffer among `args` (the data of `node`'s inputs) that `node` may write its
    result into, or None; smaller buffers than `at_least` bytes are not worth the check.
    A node a transform keeps (an eval inside a traced function runs it) takes none: the
    transform's rules read its inputs later."""
    if node.dtype not in _TYPES or keeps_graph(node):
        return None
    shape, dtype, inputs = node.shape, node.dtype.np, node.inputs
    for i in range(len(args)):  # no iterator's tuple holding the items: fixed counts
        inp, d = inputs[i], args[i]
        if type(d) is np.ndarray and d.nbytes >= at_least and d.shape == shape and \
                d.dtype == dtype and not inp.tracer:
            refs = _refs(inp, d)
            if refs[0] <= _ALONE[0] and refs[1] <= _ALONE[1] and refs[2] <= _ALONE[2]:
                return d
    return None


def _refs(inp, d):
    """The references to the input's node, its ndarray and the buffer's owner; a buffer
    that cannot be written, or that NumPy does not own, counts as held elsewhere."""
    if not d.flags.writeable:
        return _HELD
    owner = d.base
    if owner is None:
        if not d.flags.owndata:
            return _HELD
        return sys.getrefcount(inp), sys.getrefcount(d), 0
    if type(owner) is not np.ndarray or owner.base is not None or not owner.flags.owndata:
        return _HELD
    return sys.getrefcount(inp), sys.getrefcount(d), sys.getrefcount(owner)


_HELD = (sys.maxsize,) * 3


def _measure(node, args):
    inputs = node.inputs  # the frame `donor` has when it calls _refs
    inp, d = inputs[0], args[0]
    refs = _refs(inp, d)
    return refs


def _calibrate():
    """The counts `_refs` gives for an input held by its consumer alone, with a buffer
    of its own (and, for views, the owner's count for an owner held by the view alone)."""
    from .graph import Node
    float32 = dtypes.float32
    n = TRACK_BYTES // 4
    own = Node((n,), float32, inputs=(Node((n,), float32, data=np.zeros(n, np.float32)),))
    view = Node((n,), float32,
                inputs=(Node((n,), float32, data=np.zeros((2, n), np.float32)[0]),))
    a = _measure(own, [own.inputs[0].data])
    b = _measure(view, [view.inputs[0].data])
    return min(a[0], b[0]), min(a[1], b[1]), b[2]  # the same counts; the lower if not


_ALONE = _calibrate()
