"""The CPU backend: kernels run on NumPy arrays in the thread that drains the stream.

A backend module provides: execute(node, args), run_deferred(state, wait) (the
scheduler's call once a batch of a stream's nodes has run: the backend's pass over the
work its `execute` deferred, and with `wait` the wait for it), import_from(node) (an
input that another backend produced), to_numpy(data, state), for_export(data, state),
settle(node), synchronize(state), and running(state, count): None, or the context the
scheduler runs the `count` nodes of a batch of a stream in (a GPU's current stream).
"""
from __future__ import annotations

import numpy as np

from ..core.donation import donor
from ..core.memory import TRACK_BYTES

xp = np


def execute(node, args):
    params = node.params
    prim = node.prim
    if prim.donate is not None:
        # a compiled run (it has params) checks once for many ops: any size is worth it
        d = donor(node, args, 0 if params else TRACK_BYTES)
        if d is not None:
            return prim.donate(*args, out=d, **params) if params else prim.donate(*args, out=d)
    out = prim.kernel(np, *args, **params) if params else prim.kernel(np, *args)
    # NumPy gives scalars for full reductions and scalar indexing; arrays are ndarrays
    return out if type(out) is np.ndarray else np.asarray(out)


running = None  # nothing to set up around a batch: NumPy has no current stream


def run_deferred(state, wait=True):
    """Nothing deferred: each CPU kernel ran in `execute`."""


def synchronize(state):
    """CPU work is finished when the scheduler says so."""


def to_numpy(data, state):
    return data


def for_export(data, state):
    return data


def settle(node):
    """Nothing to read later: NumPy raised for a bad index when the kernel ran."""


def import_from(node):
    """An input made on another device, brought to the host once its producer has finished."""
    return node.stream.backend.to_numpy(node.data, node.stream)
