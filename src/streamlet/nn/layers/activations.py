"""Activation functions, and a Module for each (``nn.relu`` and ``nn.ReLU()``).

The element-wise functions are compiled shapeless, as MLX's are.
"""
import inspect
import math
from functools import partial

import streamlet.core as mx

from .base import Module


@partial(mx.compile, shapeless=True)
def sigmoid(x):
    """The logistic sigmoid ``1 / (1 + exp(-x))``.

    >>> nn.sigmoid(mx.array([0.0])).tolist()
    [0.5]
    """
    return mx.sigmoid(x)


@partial(mx.compile, shapeless=True)
def relu(x):
    """The rectified linear unit ``max(x, 0)``.

    >>> nn.relu(mx.array([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    return mx.maximum(x, 0)


@partial(mx.compile, shapeless=True)
def relu2(x):
    """The squared ReLU ``max(x, 0) ** 2``.

    >>> nn.relu2(mx.array([-1.0, 3.0])).tolist()
    [0.0, 9.0]
    """
    return mx.square(mx.maximum(x, 0))


@partial(mx.compile, shapeless=True)
def relu6(x):
    """ReLU capped at 6: ``min(max(x, 0), 6)``.

    >>> nn.relu6(mx.array([-1.0, 7.0])).tolist()
    [0.0, 6.0]
    """
    return mx.minimum(mx.maximum(x, 0), 6.0)


@partial(mx.compile, shapeless=True)
def leaky_relu(x, negative_slope=0.01):
    """``max(negative_slope * x, x)``.

    >>> nn.leaky_relu(mx.array([-2.0, 2.0]), 0.5).tolist()
    [-1.0, 2.0]
    """
    return mx.maximum(negative_slope * x, x)


@partial(mx.compile, shapeless=True)
def log_softmax(x, axis=-1):
    """``x - log(sum(exp(x)))`` along ``axis``, shifted by the max for stability.

    >>> nn.log_softmax(mx.array([0.0, 0.0])).tolist()  # log(1/2) each
    [-0.6931471824645996, -0.6931471824645996]
    """
    # NOTE: shift first: the max rounds the normalizer away if it is added before subtracting
    x = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


@partial(mx.compile, shapeless=True)
def elu(x, alpha=1.0):
    """The exponential linear unit ``where(x > 0, x, alpha * (exp(x) - 1))``.

    >>> nn.elu(mx.array([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """
    return mx.where(x > 0, x, alpha * (mx.exp(x) - 1))


@partial(mx.compile, shapeless=True)
def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis``.

    >>> nn.softmax(mx.array([1.0, 1.0])).tolist()
    [0.5, 0.5]
    """
    return mx.softmax(x, axis=axis)


@partial(mx.compile, shapeless=True)
def softplus(x):
    """``log(1 + exp(x))``.

    >>> round(nn.softplus(mx.array([0.0])).item(), 6)
    0.693147
    """
    return mx.logaddexp(x, 0)


@partial(mx.compile, shapeless=True)
def softsign(x):
    """``x / (1 + |x|)``.

    >>> nn.softsign(mx.array([1.0, -3.0])).tolist()
    [0.5, -0.75]
    """
    return mx.divide(x, 1 + mx.abs(x))


@partial(mx.compile, shapeless=True)
def softshrink(x, lambd: float = 0.5):
    """``x - sign(x) * lambd`` where ``|x| > lambd``, else 0.

    >>> nn.softshrink(mx.array([-2.0, 0.25, 1.5])).tolist()
    [-1.5, 0.0, 1.0]
    """
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


@partial(mx.compile, shapeless=True)
def celu(x, alpha=1.0):
    """``max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)``.

    >>> nn.celu(mx.array([0.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


@partial(mx.compile, shapeless=True)
def silu(x):
    """The sigmoid linear unit (swish) ``x * sigmoid(x)``.

    >>> nn.silu(mx.array([0.0])).tolist()
    [0.0]
    """
    return x * mx.sigmoid(x)


@partial(mx.compile, shapeless=True)
def log_sigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``.

    >>> round(nn.log_sigmoid(mx.array([0.0])).item(), 6)
    -0.693147
    """
    return -softplus(-x)


@partial(mx.compile, shapeless=True)
def gelu(x):
    """The Gaussian error linear unit ``x * Phi(x)`` (``Phi`` the normal CDF), exactly.

    See :func:`gelu_approx` and :func:`gelu_fast_approx` for cheaper approximations.

    >>> nn.gelu(mx.array([0.0])).tolist()
    [0.0]
    """
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


@partial(mx.compile, shapeless=True)
def gelu_approx(x):
    """GELU through ``tanh``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    Within 0.0005 of :func:`gelu` on [-6, 6].

    >>> nn.gelu_approx(mx.array([0.0])).tolist()
    [0.0]
    """
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@partial(mx.compile, shapeless=True)
def gelu_fast_approx(x):
    """GELU through the sigmoid: ``x * sigmoid(1.702 x)`` (within 0.015 of :func:`gelu`).

    >>> nn.gelu_fast_approx(mx.array([0.0])).tolist()
    [0.0]
    """
    return x * mx.sigmoid(1.702 * x)


def glu(x, axis: int = -1):
    """The gated linear unit: split ``axis`` in halves ``a, b`` and return ``a * sigmoid(b)``.

    >>> nn.glu(mx.array([2.0, 0.0])).tolist()
    [1.0]
    """
    a, b = mx.split(x, indices_or_sections=2, axis=axis)
    return a * mx.sigmoid(b)


@partial(mx.compile, shapeless=True)
def step(x, threshold: float = 0.0):
    """The binary step: 1 where ``x >= threshold``, else 0.

    >>> nn.step(mx.array([-1.0, 0.0, 2.0])).tolist()
    [0, 1, 1]
    """
    return mx.where(x >= threshold, 1, 0)


@partial(mx.compile, shapeless=True)
def selu(x):
    """The scaled ELU ``1.0507 * elu(x, 1.67326)``.

    >>> nn.selu(mx.array([0.0])).tolist()
    [0.0]
    """
    return elu(x, 1.67326) * 1.0507


@partial(mx.compile, shapeless=True)
def prelu(x, alpha):
    """The parametric ReLU ``max(0, x) + alpha * min(0, x)``, ``alpha`` an array.

    >>> nn.prelu(mx.array([-2.0, 2.0]), mx.array([0.5])).tolist()
    [-1.0, 2.0]
    """
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


@partial(mx.compile, shapeless=True)
def mish(x):
    """``x * tanh(softplus(x))`` (https://arxiv.org/abs/1908.08681).

    >>> nn.mish(mx.array([0.0])).tolist()
    [0.0]
    """
    return x * mx.tanh(softplus(x))


@partial(mx.compile, shapeless=True)
def hardswish(x):
    """``x * min(max(x + 3, 0), 6) / 6``.

    >>> nn.hardswish(mx.array([-4.0, 3.0])).tolist()
    [-0.0, 3.0]
    """
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


@partial(mx.compile, shapeless=True)
def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """``x`` clipped to ``[min_val, max_val]``.

    >>> nn.hard_tanh(mx.array([-3.0, 0.5, 3.0])).tolist()
    [-1.0, 0.5, 1.0]
    """
    return mx.minimum(mx.maximum(x, min_val), max_val)


@partial(mx.compile, shapeless=True)
def hard_shrink(x, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0.

    >>> nn.hard_shrink(mx.array([-1.0, 0.25])).tolist()
    [-1.0, 0.0]
    """
    return mx.where(mx.abs(x) > lambd, x, 0)


@partial(mx.compile, shapeless=True)
def softmin(x, axis=-1):
    """``softmax(-x)`` along ``axis``.

    >>> nn.softmin(mx.array([1.0, 1.0])).tolist()
    [0.5, 0.5]
    """
    return mx.softmax(-x, axis=axis)


def tanh(x):
    """The hyperbolic tangent, ``mx.tanh(x)``.

    >>> nn.tanh(mx.array([0.0])).tolist()
    [0.0]
    """
    return mx.tanh(x)


class _Activation(Module):
    """A module that applies ``_fn`` with the constructor's arguments (``_args``: name,
    default, attribute).  An attribute named with ``_`` keeps an array argument out of the
    parameters, as MLX does for ``LeakyReLU``, ``ELU`` and ``CELU``."""

    _fn = None
    _args = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        bound = self.__signature__.bind(*args, **kwargs)
        bound.apply_defaults()
        for name, _, attribute in self._args:
            setattr(self, attribute, bound.arguments[name])

    def __call__(self, x):
        return type(self)._fn(x, *(getattr(self, attribute) for _, _, attribute in self._args))


def _activation(name, fn, *args, out="(2, 4)"):
    """The Module class ``name`` applying ``fn``; ``args`` are its (name, default[, attribute])
    arguments; ``out`` is the result's shape for an input of shape (2, 4) (for the docstring)."""
    args = tuple((a[0], a[1], a[2] if len(a) > 2 else a[0]) for a in args)
    params = [inspect.Parameter(a, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
              for a, d, _ in args]
    doc = (f"Applies :func:`{fn.__name__}` (see it for the formula).\n\n"
           f"    >>> nn.{name}()(mx.zeros((2, 4))).shape\n    {out}\n    ")
    return type(name, (_Activation,), {"_fn": staticmethod(fn), "_args": args, "__doc__": doc,
                                       "__signature__": inspect.Signature(params),
                                       "__module__": __name__})


Sigmoid = _activation("Sigmoid", sigmoid)
Mish = _activation("Mish", mish)
ReLU = _activation("ReLU", relu)
ReLU2 = _activation("ReLU2", relu2)
ReLU6 = _activation("ReLU6", relu6)
LeakyReLU = _activation("LeakyReLU", leaky_relu, ("negative_slope", 1e-2, "_negative_slope"))
ELU = _activation("ELU", elu, ("alpha", 1.0, "_alpha"))
Softmax = _activation("Softmax", softmax)
Softplus = _activation("Softplus", softplus)
Softsign = _activation("Softsign", softsign)
Softshrink = _activation("Softshrink", softshrink, ("lambd", 0.5))
CELU = _activation("CELU", celu, ("alpha", 1.0, "_alpha"))
SiLU = _activation("SiLU", silu)
LogSoftmax = _activation("LogSoftmax", log_softmax)
LogSigmoid = _activation("LogSigmoid", log_sigmoid)
Tanh = _activation("Tanh", tanh)
Hardswish = _activation("Hardswish", hardswish)
Step = _activation("Step", step, ("threshold", 0.0))
SELU = _activation("SELU", selu)
HardTanh = _activation("HardTanh", hard_tanh)
HardShrink = _activation("HardShrink", hard_shrink, ("lambd", 0.5))
Softmin = _activation("Softmin", softmin)
GLU = _activation("GLU", glu, ("axis", -1), out="(2, 2)")


class PReLU(Module):
    """The parametric ReLU with a learned slope per channel (see :func:`prelu`).

    Args:
        num_parameters (int): How many slopes ``a`` to learn. Default: ``1``.
        init (float): Their initial value. Default: ``0.25``.

    >>> nn.PReLU()(mx.array([-4.0])).tolist()
    [-1.0]
    """

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)


_GELU_KINDS = {"none": gelu, "precise": gelu_approx, "tanh": gelu_approx,
               "fast": gelu_fast_approx}


class GELU(Module):
    """The Gaussian error linear unit, exact or approximated.

    Args:
        approx ('none' | 'precise' | 'tanh' | 'fast'): ``'none'``: :func:`gelu`;
            ``'precise'`` (or PyTorch's name ``'tanh'``): :func:`gelu_approx`;
            ``'fast'``: :func:`gelu_fast_approx`. Default: ``'none'``.

    >>> nn.GELU(approx="fast")(mx.array([0.0])).tolist()
    [0.0]
    """

    def __init__(self, approx="none"):
        super().__init__()
        if approx not in _GELU_KINDS:
            raise ValueError(f"The approximation should be in {list(_GELU_KINDS)} but "
                             f"'{approx}' was given")
        self._approx = approx

    def __call__(self, x):
        return _GELU_KINDS[self._approx](x)
