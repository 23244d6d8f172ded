"""The CPU backend: kernels run on NumPy arrays in the thread that drains the stream."""
from __future__ import annotations

import numpy as np

xp = np


def execute(node, args):
    return node._prim.kernel(np, *args, **node._params)


def synchronize(state):
    """CPU work is finished when the scheduler says so."""


def to_numpy(data, state):
    return data


def for_export(data, state):
    return data
