"""Recurrent layers over ``NLD`` (or unbatched ``LD``) sequences: RNN, GRU, LSTM.

Weights start uniform in ``(-k, k)``, ``k = 1 / sqrt(hidden_size)``.  The input projection of
the whole sequence is one matmul; the recurrence then runs step by step.
"""
import math
from typing import Callable, Optional

import streamlet.core as mx

from .activations import tanh
from .base import Module


def _uniform(scale, *shape):
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


def _project(x, weight, bias):
    """``x @ weight.T (+ bias)`` for the whole sequence at once."""
    return x @ weight.T if bias is None else mx.addmm(bias, x, weight.T)


class RNN(Module):
    """An Elman recurrent layer: ``h_{t+1} = nonlinearity(W_xh x_t + W_hh h_t + b)``.

    Returns the hidden states of every step, ``NLH`` (or ``LH``).

    Args:
        input_size (int): The input features ``D``.
        hidden_size (int): The hidden state's size ``H``.
        bias (bool): Learn a bias. Default: ``True``.
        nonlinearity (callable, optional): Default: :func:`tanh`.

    >>> nn.RNN(3, 5)(mx.zeros((2, 7, 3))).shape
    (2, 7, 5)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: Optional[Callable] = None):
        super().__init__()
        self.nonlinearity = nonlinearity or tanh
        if not callable(self.nonlinearity):
            raise ValueError(f"Nonlinearity must be callable. Current value: {nonlinearity}.")
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _uniform(scale, hidden_size, input_size)
        self.Whh = _uniform(scale, hidden_size, hidden_size)
        self.bias = _uniform(scale, hidden_size) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
                f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}")

    def __call__(self, x, hidden=None):
        x = _project(x, self.Wxh, self.bias)
        states = []
        for t in range(x.shape[-2]):
            pre = x[..., t, :] if hidden is None else mx.addmm(x[..., t, :], hidden, self.Whh.T)
            hidden = self.nonlinearity(pre)
            states.append(hidden)
        return mx.stack(states, axis=-2)


class GRU(Module):
    """A gated recurrent unit layer::

        r, z = sigmoid(W_x{r,z} x_t + W_h{r,z} h_t + b_{r,z})
        n = tanh(W_xn x_t + b_n + r * (W_hn h_t + b_hn))
        h_{t+1} = (1 - z) * n + z * h_t

    Returns the hidden states of every step, ``NLH`` (or ``LH``).

    Args:
        input_size (int): The input features ``D``.
        hidden_size (int): The hidden state's size ``H``.
        bias (bool): Learn biases. Default: ``True``.

    >>> nn.GRU(3, 5)(mx.zeros((2, 7, 3))).shape
    (2, 7, 5)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, 3 * hidden_size, input_size)
        self.Wh = _uniform(scale, 3 * hidden_size, hidden_size)
        self.b = _uniform(scale, 3 * hidden_size) if bias else None
        self.bhn = _uniform(scale, hidden_size) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self.b is not None}")

    def __call__(self, x, hidden=None):
        x = _project(x, self.Wx, self.b)
        H = self.hidden_size
        x_rz, x_n = x[..., :-H], x[..., -H:]
        states = []
        for t in range(x.shape[-2]):
            rz, n = x_rz[..., t, :], x_n[..., t, :]
            if hidden is not None:
                h = hidden @ self.Wh.T
                h_n = h[..., -H:] if self.bhn is None else h[..., -H:] + self.bhn
                rz = rz + h[..., :-H]
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            if hidden is not None:
                n = n + r * h_n
            elif self.bhn is not None:
                n = n + r * self.bhn
            n = mx.tanh(n)
            hidden = (1 - z) * n if hidden is None else (1 - z) * n + z * hidden
            states.append(hidden)
        return mx.stack(states, axis=-2)


class LSTM(Module):
    """A long short-term memory layer::

        i, f, o = sigmoid(W_x{i,f,o} x_t + W_h{i,f,o} h_t + b_{i,f,o})
        g = tanh(W_xg x_t + W_hg h_t + b_g)
        c_{t+1} = f * c_t + i * g;   h_{t+1} = o * tanh(c_{t+1})

    Returns the hidden and the cell states of every step, each ``NLH`` (or ``LH``).

    Args:
        input_size (int): The input features ``D``.
        hidden_size (int): The hidden state's size ``H``.
        bias (bool): Learn a bias. Default: ``True``.

    >>> [s.shape for s in nn.LSTM(3, 5)(mx.zeros((2, 7, 3)))]
    [(2, 7, 5), (2, 7, 5)]
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, 4 * hidden_size, input_size)
        self.Wh = _uniform(scale, 4 * hidden_size, hidden_size)
        self.bias = _uniform(scale, 4 * hidden_size) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self.bias is not None}")

    def __call__(self, x, hidden=None, cell=None):
        x = _project(x, self.Wx, self.bias)
        hiddens, cells = [], []
        for t in range(x.shape[-2]):
            ifgo = x[..., t, :]
            if hidden is not None:
                ifgo = mx.addmm(ifgo, hidden, self.Wh.T)
            i, f, g, o = mx.split(ifgo, 4, axis=-1)
            i, f, g, o = mx.sigmoid(i), mx.sigmoid(f), mx.tanh(g), mx.sigmoid(o)
            cell = i * g if cell is None else f * cell + i * g
            hidden = o * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return mx.stack(hiddens, axis=-2), mx.stack(cells, axis=-2)
