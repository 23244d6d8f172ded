"""streamlet.nn: the mlx.nn-compatible neural network library (pure Python over streamlet.core).

>>> import streamlet.core as mx
>>> import streamlet.nn as nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
>>> model(mx.zeros((3, 4))).shape
(3, 2)
"""
from . import init, losses  # noqa: F401
from .layers import *  # noqa: F401,F403
from .utils import average_gradients, value_and_grad  # noqa: F401
