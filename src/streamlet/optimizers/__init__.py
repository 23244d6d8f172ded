"""streamlet.optimizers: the mlx.optimizers-compatible optimizers and schedules.

>>> import streamlet.nn as nn
>>> import streamlet.optimizers as optim
>>> model = nn.Linear(2, 1)
>>> opt = optim.AdamW(learning_rate=1e-3)
>>> opt.init(model.trainable_parameters())
>>> int(opt.step.item())
0
"""
from .. import _public
from . import optimizers as _optimizers, schedulers as _schedulers
from .optimizers import *  # noqa: F401,F403
from .schedulers import *  # noqa: F401,F403

__all__ = [*_optimizers.__all__, *_schedulers.__all__]


def __dir__():
    return _public.names(globals())
