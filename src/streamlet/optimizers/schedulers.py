"""Learning-rate schedules: functions of the step (an int or an array) to a value.

Pass one as an optimizer's ``learning_rate`` to have it recomputed at every step.

>>> import streamlet.optimizers as optim
>>> lr = optim.exponential_decay(0.1, 0.5)
>>> lr(2)
0.025
"""
import math
from typing import Callable, List

import streamlet.core as mx

__all__ = ["exponential_decay", "step_decay", "cosine_decay", "join_schedules",
           "linear_schedule"]


def _positive(name, value):
    if value < 1:
        raise ValueError(f"{name} must be greater than 0, but got {value}.")


def exponential_decay(init: float, decay_rate: float) -> Callable:
    """``init * decay_rate ** step``.

    >>> import streamlet.optimizers as optim
    >>> optim.exponential_decay(1.0, 0.9)(mx.array(2)).item()
    0.809999942779541
    """
    def schedule(step):
        return init * decay_rate**step

    return schedule


def step_decay(init: float, decay_rate: float, step_size: int) -> Callable:
    """``init * decay_rate ** (step // step_size)``: multiplied by ``decay_rate`` every
    ``step_size`` steps.

    >>> import streamlet.optimizers as optim
    >>> optim.step_decay(1.0, 0.5, 10)(25)
    0.25
    """
    _positive("step_size", step_size)

    def schedule(step):
        return init * decay_rate ** (step // step_size)

    return schedule


def cosine_decay(init: float, decay_steps: int, end: float = 0.0) -> Callable:
    """From ``init`` to ``end`` along half a cosine over ``decay_steps`` steps, then ``end``.

    >>> import streamlet.optimizers as optim
    >>> round(optim.cosine_decay(1.0, 10)(5).item(), 6)
    0.5
    """
    _positive("decay_steps", decay_steps)

    def schedule(step):
        s = mx.minimum(step, decay_steps)
        decay = 0.5 * (1.0 + mx.cos(math.pi / decay_steps * s))
        return end + decay * (init - end)

    return schedule


def join_schedules(schedules: List[Callable], boundaries: List[int]) -> Callable:
    """``schedules[0]`` until ``boundaries[0]``, then ``schedules[1]`` (counting its steps from
    the boundary) until ``boundaries[1]``, and so on.

    >>> import streamlet.optimizers as optim
    >>> warmup = optim.linear_schedule(0.0, 1.0, 10)
    >>> lr = optim.join_schedules([warmup, optim.cosine_decay(1.0, 100)], [10])
    >>> round(lr(mx.array(5)).item(), 6), round(lr(mx.array(10)).item(), 6)
    (0.5, 1.0)
    """
    if len(schedules) == 0:
        raise ValueError("Must provide at least 1 schedule to join.")
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"Received {len(boundaries)} boundaries but expected "
                         f"{len(schedules) - 1}.")

    def schedule(step):
        output = schedules[0](step)
        for boundary, later in zip(boundaries, schedules[1:]):
            output = mx.where(step < boundary, output, later(step - boundary))
        return output

    return schedule


def linear_schedule(init: float, end: float, steps: int) -> Callable:
    """From ``init`` to ``end`` linearly over ``steps`` steps, then ``end``.

    >>> import streamlet.optimizers as optim
    >>> optim.linear_schedule(0.0, 1.0, 4)(1).item()
    0.25
    """
    _positive("steps", steps)

    def schedule(step):
        step = mx.minimum(step, steps)
        return step * ((end - init) / steps) + init

    return schedule
