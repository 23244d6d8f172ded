"""Optimizers: each keeps its state as a tree beside the parameters and maps
(gradient, parameter, state) to the updated parameter, one array at a time.

>>> import streamlet.optimizers as optim
>>> opt = optim.SGD(learning_rate=0.5)
>>> opt.apply_gradients({"w": mx.array([1.0])}, {"w": mx.array([2.0])})["w"].tolist()
[1.5]
"""
from typing import Callable, List, Optional, Tuple, Union

import streamlet.core as mx
from streamlet.utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten

__all__ = ["Optimizer", "MultiOptimizer", "SGD", "RMSprop", "Adagrad", "AdaDelta", "Adam",
           "AdamW", "Adamax", "Lion", "Adafactor", "Muon", "clip_grad_norm"]

Schedule = Union[float, Callable[[mx.array], mx.array]]


def _empty_states(tree):
    """``{}`` at every leaf of ``tree``: the state of parameters not yet initialized."""
    return tree_map(lambda _: {}, tree)


def _grow_state(params, state):
    """``state`` extended (in place where it is a dict) to cover every leaf of ``params``.

    A sequence's state entries are each grown with the parameter at their index, so a state
    longer than ``params`` is an ``IndexError`` (as MLX), not silently cut."""
    if isinstance(params, (list, tuple)):
        state = list(state)
        state = [_grow_state(params[i], s) for i, s in enumerate(state)] + \
            list(_empty_states(params[len(state):]))
        return type(params)(state)
    if isinstance(params, dict):
        for k, v in params.items():
            state[k] = _grow_state(v, state[k]) if k in state else _empty_states(v)
    return state


class Optimizer:
    """The base of every optimizer.

    ``state`` is a tree: ``step`` (a uint64 array), the hyperparameters that are arrays (such
    as ``learning_rate``, recomputed each step where it is a schedule) and, for each
    parameter, a dict of its own state at the parameter's place.  Subclasses define
    ``init_single`` (fill a parameter's state dict) and ``apply_single`` (one update).

    Args:
        schedulers (dict, optional): Hyperparameter name -> schedule (a function of the step).
    """

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})

    def update(self, model, gradients: dict):
        """Apply ``gradients`` to ``model``'s parameters, in place (``model.update``).

        >>> import streamlet.optimizers as optim
        >>> model = nn.Linear(2, 1)
        >>> grads = tree_map(mx.ones_like, model.trainable_parameters())
        >>> optim.SGD(0.1).update(model, grads)
        """
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters: dict):
        """Create the state of every parameter in ``parameters`` that has none yet.

        Done by the first :meth:`apply_gradients` if not called; call it to have the state
        before the first step (to compile a training step over it, say).

        >>> import streamlet.optimizers as optim
        >>> opt = optim.Adam(1e-3)
        >>> opt.init({"w": mx.zeros((2,))})
        >>> sorted(opt.state["w"])
        ['m', 'v']
        """
        _grow_state(parameters, self._state)
        tree_map(lambda p, s: s or self.init_single(p, s), parameters, self._state)
        self._initialized = True

    def init_single(self, parameter: mx.array, state: dict):
        """Fill ``state`` (empty) for ``parameter``."""
        raise NotImplementedError()

    def apply_gradients(self, gradients: dict, parameters: dict):
        """The updated parameters, a tree like ``gradients``; advances the step.

        ``parameters`` must hold (at least) every path of ``gradients``.
        """
        if not self._initialized:
            self.init(gradients)
        for name, schedule in self._schedulers.items():
            self.state[name] = schedule(self.step)
        self.state["step"] = self.step + 1
        return tree_map(self.apply_single, gradients, parameters, self.state)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """One parameter's update: returns the new parameter, updates ``state`` in place."""
        raise NotImplementedError()

    @property
    def state(self):
        """The optimizer's state tree (a live reference)."""
        return self._state

    @state.setter
    def state(self, state: dict):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        """How many updates were applied (a uint64 array)."""
        return self.state["step"]

    @property
    def learning_rate(self):
        """The learning rate (an array; the schedule's value where it is scheduled)."""
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name: str, param: Schedule):
        """Store hyperparameter ``name`` in the state: a value, or a schedule of the step."""
        if callable(param):
            self._schedulers[name] = param
            value = param(self.step)
        else:
            value = mx.array(param)
        self.state[name] = value


class MultiOptimizer(Optimizer):
    """Different optimizers for different parameters.

    ``filters[i](path, gradient)`` selects the parameters of ``optimizers[i]``; the first that
    holds wins, and the last optimizer (which has no filter) takes the rest.

    Args:
        optimizers (list[Optimizer]): The optimizers.
        filters (list[callable]): One fewer than ``optimizers``.

    >>> import streamlet.optimizers as optim
    >>> opt = optim.MultiOptimizer([optim.SGD(1.0), optim.SGD(0.0)],
    ...                            [lambda path, g: path.startswith("a")])
    >>> out = opt.apply_gradients({"a": mx.array(1.0), "b": mx.array(1.0)},
    ...                           {"a": mx.array(5.0), "b": mx.array(5.0)})
    >>> out["a"].item(), out["b"].item()
    (4.0, 5.0)
    """

    def __init__(self, optimizers, filters: list = []):
        super().__init__()
        self._state = {}
        if len(filters) != len(optimizers) - 1:
            raise ValueError(f"Given {len(filters)} filters but {len(optimizers) - 1} needed.")
        self.optimizers = optimizers
        self.filters = filters + [lambda *args, **kwargs: True]

    def _split_dictionary(self, gradients: dict):
        if len(self.optimizers) == 1:
            return [gradients]
        parts = [[] for _ in self.optimizers]
        for k, g in tree_flatten(gradients):
            index = next(i for i, keep in enumerate(self.filters) if keep(k, g))
            parts[index].append((k, g))
        return [tree_unflatten(p) if p else {} for p in parts]

    def init(self, parameters: dict):
        for optimizer, part in zip(self.optimizers, self._split_dictionary(parameters)):
            optimizer.init(part)

    def apply_gradients(self, gradients: dict, parameters: dict):
        tree = {}
        for optimizer, part in zip(self.optimizers, self._split_dictionary(gradients)):
            tree = tree_merge(tree, optimizer.apply_gradients(part, parameters))
        return tree

    @property
    def state(self):
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state: dict):
        if "states" not in state or len(state["states"]) != len(self.optimizers):
            raise ValueError("Invalid state provided")
        for optimizer, s in zip(self.optimizers, state["states"]):
            optimizer.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        for optimizer in self.optimizers:
            optimizer.learning_rate = learning_rate


def _zeros_like(parameter):
    """Zeros like ``parameter``, which must be an array: a Python scalar or other leaf in the
    gradient tree is a TypeError, as MLX's ``zeros_like`` binding refuses it."""
    if not isinstance(parameter, mx.array):
        raise TypeError("zeros_like(): incompatible function arguments: expected an array, "
                        f"got {type(parameter).__name__}.")
    return mx.zeros_like(parameter)


def _lr(optimizer, gradient):
    return optimizer.learning_rate.astype(gradient.dtype)


def _check(condition, message):
    """A ValueError unless ``condition``; callers spell it as MLX does, so NaN passes."""
    if not condition:
        raise ValueError(message)


class SGD(Optimizer):
    r"""Stochastic gradient descent, with optional momentum, dampening, Nesterov momentum and
    weight decay (L2 added to the gradient)::

        v = momentum * v + (1 - dampening) * g;   w = w - lr * (g + momentum * v if nesterov else v)

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        momentum (float): Default: ``0``.
        weight_decay (float): Default: ``0``.
        dampening (float): Default: ``0``.
        nesterov (bool): Default: ``False`` (needs momentum and no dampening).
    """

    def __init__(self, learning_rate: Schedule, momentum: float = 0.0,
                 weight_decay: float = 0.0, dampening: float = 0.0, nesterov: bool = False):
        _check(not (nesterov and (momentum <= 0 or dampening != 0)),
               "Nesterov momentum requires a momentum and zero dampening.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter, state):
        state["v"] = _zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        if self.momentum <= 0:
            return parameter - _lr(self, gradient) * gradient
        v = self.momentum * state.get("v")
        v = v + ((1 - self.dampening) * gradient if self.dampening > 0 else gradient)
        state["v"] = v
        step = gradient + self.momentum * v if self.nesterov else v
        return parameter - _lr(self, gradient) * step


class RMSprop(Optimizer):
    r"""RMSprop (Tieleman and Hinton, 2012)::

        v = alpha * v + (1 - alpha) * g^2;   w = w - lr * g / (sqrt(v) + eps)

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        alpha (float): The smoothing constant. Default: ``0.99``.
        eps (float): Default: ``1e-8``.
    """

    def __init__(self, learning_rate: Schedule, alpha: float = 0.99, eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps
        _check(not alpha < 0.0, f"RMSprop alpha should be >=0, {alpha} was provided instead")
        _check(not eps <= 0.0, f"RMSprop epsilon should be >0, {eps} was provided instead")

    def init_single(self, parameter, state):
        state["v"] = _zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = _lr(self, gradient)
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    r"""Adagrad (Duchi et al., 2011)::

        v = v + g^2;   w = w - lr * g / (sqrt(v) + eps)

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        eps (float): Default: ``1e-8``.
    """

    def __init__(self, learning_rate: Schedule, eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        _check(not eps <= 0.0, f"Adagrad epsilon should be >0, {eps} was provided instead")

    def init_single(self, parameter, state):
        state["v"] = _zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = _lr(self, gradient)
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    r"""AdaDelta (Zeiler, 2012)::

        v = rho v + (1 - rho) g^2;   d = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho u + (1 - rho) d^2;   w = w - lr * d

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        rho (float): Default: ``0.9``.
        eps (float): Default: ``1e-6``.
    """

    def __init__(self, learning_rate: Schedule, rho: float = 0.9, eps: float = 1e-6):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps
        _check(not rho < 0.0, f"AdaDelta rho should be >=0, {rho} was provided instead")
        _check(not eps <= 0.0, f"AdaDelta epsilon should be >0, {eps} was provided instead")

    def init_single(self, parameter, state):
        state["v"] = _zeros_like(parameter)
        state["u"] = _zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr, rho, eps = _lr(self, gradient), self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        d = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        state["u"] = rho * state["u"] + (1 - rho) * mx.square(d)
        state["v"] = v
        return parameter - lr * d


class Adam(Optimizer):
    r"""Adam (Kingma and Ba, 2015)::

        m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2;   w = w - lr * m / (sqrt(v) + eps)

    with, if ``bias_correction``, ``m`` and ``v`` divided by ``1 - b1^t`` and ``1 - b2^t``.

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        betas (tuple[float, float]): ``(b1, b2)``. Default: ``(0.9, 0.999)``.
        eps (float): Default: ``1e-8``.
        bias_correction (bool): Default: ``False``.
    """

    def __init__(self, learning_rate: Schedule, betas: List[float] = [0.9, 0.999],
                 eps: float = 1e-8, bias_correction: bool = False):
        super().__init__()
        for i, beta in enumerate(betas):
            _check(0.0 <= beta < 1.0,
                   f"Adam beta{i + 1} should be in [0, 1), {beta} was provided instead")
        _check(0.0 <= eps, f"Adam epsilon should be >=0, {eps} was provided instead")
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter, state):
        state["m"] = _zeros_like(parameter)
        state["v"] = _zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = _lr(self, gradient)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"], state["v"] = m, v
        if not self.bias_correction:
            return parameter - lr * m / (mx.sqrt(v) + self.eps)
        step = self.step
        c1 = (lr / (1 - b1**step)).astype(gradient.dtype)
        c2 = mx.rsqrt(1 - b2**step).astype(gradient.dtype)
        return parameter - (c1 * m) / (mx.sqrt(v) * c2 + self.eps)


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov and Hutter, 2019): the parameter is first
    scaled by ``1 - lr * weight_decay``, then updated as by :class:`Adam`.

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        betas (tuple[float, float]): Default: ``(0.9, 0.999)``.
        eps (float): Default: ``1e-8``.
        weight_decay (float): Default: ``0.01``.
        bias_correction (bool): Default: ``False``.
    """

    def __init__(self, learning_rate: Schedule, betas: List[float] = [0.9, 0.999],
                 eps: float = 1e-8, weight_decay: float = 0.01, bias_correction: bool = False):
        super().__init__(learning_rate=learning_rate, betas=betas, eps=eps,
                         bias_correction=bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state):
        decayed = parameter * (1 - _lr(self, gradient) * self.weight_decay)
        return super().apply_single(gradient, decayed, state)


class Adamax(Adam):
    r"""Adamax, Adam's infinity-norm variant::

        m = b1 m + (1 - b1) g;   v = max(b2 v, |g|);   w = w - lr * m / (v + eps)

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        betas (tuple[float, float]): Default: ``(0.9, 0.999)``.
        eps (float): Default: ``1e-8``.
    """

    def __init__(self, learning_rate: Schedule, betas: List[float] = [0.9, 0.999],
                 eps: float = 1e-8):
        super().__init__(learning_rate, betas, eps)

    def apply_single(self, gradient, parameter, state):
        lr = _lr(self, gradient)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"], state["v"] = m, v
        return parameter - lr * m / (v + self.eps)


class Lion(Optimizer):
    r"""Lion (Chen et al., 2023): the sign of an interpolated momentum::

        c = b1 m + (1 - b1) g;   m = b2 m + (1 - b2) g;   w = w - lr * sign(c)

    with decoupled weight decay.  Use a learning rate 3-10x smaller than AdamW's.

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        betas (tuple[float, float]): Default: ``(0.9, 0.99)``.
        weight_decay (float): Default: ``0``.
    """

    def __init__(self, learning_rate: Schedule, betas: List[float] = [0.9, 0.99],
                 weight_decay: float = 0.0):
        super().__init__()
        for i, beta in enumerate(betas):
            _check(0.0 <= beta < 1.0,
                   f"Lion beta{i + 1} should be in [0, 1), {beta} was provided instead")
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter, state):
        state["m"] = _zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = _lr(self, gradient)
        b1, b2 = self.betas
        m = state["m"]
        c = b1 * m + (1 - b1) * gradient
        state["m"] = b2 * m + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = (1 - lr * self.weight_decay) * parameter
        return parameter - lr * mx.sign(c)


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer and Stern, 2018): second moments factored into row and column
    averages for parameters of 2 or more dimensions, updates clipped by their RMS.

    Args:
        learning_rate (float or callable, optional): Needed unless ``relative_step``.
        eps (tuple[float, float]): Added to the squared gradient, and the least parameter
            scale. Default: ``(1e-30, 1e-3)``.
        clip_threshold (float): The update's RMS bound. Default: ``1.0``.
        decay_rate (float): The second moments decay as ``1 - t^decay_rate``. Default: ``-0.8``.
        beta_1 (float, optional): First moment decay; none kept if ``None``. Default: ``None``.
        weight_decay (float): Default: ``0``.
        scale_parameter (bool): Scale the learning rate by the parameter's RMS. Default: ``True``.
        relative_step (bool): Use ``min(1e-2, 1/sqrt(t))`` as the learning rate. Default:
            ``True``.
        warmup_init (bool): With ``relative_step``, ``min(1e-6 t, 1/sqrt(t))``. Default:
            ``False``.
    """

    def __init__(self, learning_rate: Union[Schedule, None] = None,
                 eps: Tuple[float, float] = (1e-30, 1e-3), clip_threshold: float = 1.0,
                 decay_rate: float = -0.8, beta_1: Optional[float] = None,
                 weight_decay: float = 0.0, scale_parameter: bool = True,
                 relative_step: bool = True, warmup_init: bool = False):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter, state):
        if parameter.ndim >= 2:
            shape, dtype = parameter.shape, parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=dtype)
        else:
            state["exp_avg_sq"] = _zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = _zeros_like(parameter)

    def _compute_rms(self, inputs):
        return mx.sqrt(mx.mean(mx.square(inputs)))

    def _compute_learning_rate(self, step, parameter_rms):
        if self.relative_step:
            least = 1e-6 * step if self.warmup_init else 1e-2
            step_size = mx.minimum(least, mx.rsqrt(step))
        else:
            step_size = self.learning_rate
        step_size = step_size.astype(parameter_rms.dtype)
        scale = mx.maximum(self.eps[1], parameter_rms) if self.scale_parameter else 1.0
        return scale * step_size

    def _approximate_exp_moving_avg(self, exp_avg_sq_row, exp_avg_sq_col):
        rows = mx.rsqrt(exp_avg_sq_row / mx.mean(exp_avg_sq_row, axis=-1, keepdims=True))
        cols = mx.rsqrt(exp_avg_sq_col)
        return mx.expand_dims(rows, axis=-1) * mx.expand_dims(cols, axis=-2)

    def apply_single(self, gradient, parameter, state):
        step = self.step
        parameter_rms = self._compute_rms(parameter)
        lr = self._compute_learning_rate(step, parameter_rms)
        beta_2 = 1.0 - (step**self.decay_rate).astype(parameter_rms.dtype)
        update = mx.square(gradient) + self.eps[0]
        if gradient.ndim >= 2:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(update, axis=-1)
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(update, axis=-2)
            state["exp_avg_sq_row"], state["exp_avg_sq_col"] = row, col
            update = self._approximate_exp_moving_avg(row, col) * gradient
        else:
            sq = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * update
            state["exp_avg_sq"] = sq
            update = mx.rsqrt(sq) * gradient
        update = update / mx.maximum(1.0, self._compute_rms(update) / self.clip_threshold)
        update = lr * update
        if self.beta_1 is not None:
            update = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = update
        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * lr)
        return parameter - update


class Muon(Optimizer):
    r"""Muon (MomentUm Orthogonalized by Newton-Schulz, https://kellerjordan.github.io/posts/muon/):
    SGD momentum whose update, for 2-d (and flattened higher) parameters, is replaced by the
    nearest semi-orthogonal matrix (5-step Newton-Schulz iteration).

    Args:
        learning_rate (float or callable): The learning rate (or its schedule).
        momentum (float): Default: ``0.95``.
        weight_decay (float): Added to the gradient as L2. Default: ``0.01``.
        nesterov (bool): Default: ``True``.
        ns_steps (int): Newton-Schulz iterations. Default: ``5``.
    """

    def __init__(self, learning_rate: Schedule, momentum: float = 0.95,
                 weight_decay: float = 0.01, nesterov: bool = True, ns_steps: int = 5):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter, state):
        state["v"] = _zeros_like(parameter)

    def _zeropower_via_newtonschulz5(self, X, steps: int):
        assert X.ndim == 2, ("Expected a 2D array for Newton-Schulz iteration, got shape "
                             f"{X.shape} instead.")
        a, b, c = 3.4445, -4.7750, 2.0315  # a quintic that pushes singular values towards 1
        tall = X.shape[-2] > X.shape[-1]
        if tall:
            X = X.T
        X = X / (mx.linalg.norm(X, keepdims=True) + 1e-7)
        for _ in range(steps):
            A = X @ X.T
            B = mx.addmm(b * A, A, A, beta=1.0, alpha=c)
            X = mx.addmm(a * X, B, X, beta=1.0, alpha=1.0)
        return X.T if tall else X

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = self.momentum * state["v"]
        v = v + (1 - self.momentum) * gradient
        state["v"] = v
        update = gradient * (1 - self.momentum) + v * self.momentum if self.nesterov else v
        lr = _lr(self, gradient)
        if update.ndim >= 2:
            shape = update.shape
            flat = update.reshape(shape[0], -1) if update.ndim > 2 else update
            update = self._zeropower_via_newtonschulz5(flat, steps=self.ns_steps)
            update = update.reshape(shape) if len(shape) > 2 else update
            lr = lr * max(1, update.shape[-2] / update.shape[-1]) ** 0.5
        return parameter - lr * update


def clip_grad_norm(grads, max_norm):
    """Scale ``grads`` so that their global L2 norm is at most ``max_norm``.

    Returns ``(clipped gradients, the norm before clipping)``.

    >>> import streamlet.optimizers as optim
    >>> clipped, norm = optim.clip_grad_norm({"w": mx.array([3.0, 4.0])}, max_norm=1.0)
    >>> norm.item(), [round(x, 4) for x in clipped["w"].tolist()]
    (5.0, [0.6, 0.8])
    """
    if max_norm < 0:
        raise ValueError(f"max_norm should be >=0, {max_norm} was provided instead")

    def squared_norm(g):
        return (g.astype(mx.float32) if g.dtype == mx.float16 else g).square().sum()

    total_norm = mx.sqrt(tree_reduce(lambda acc, g: acc + squared_norm(g), grads, 0.0))
    normalizer = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)

    def scale(g):
        scaled = g * normalizer
        return scaled.astype(g.dtype) if mx.issubdtype(g.dtype, mx.floating) else scaled

    return tree_map(scale, grads), total_norm
