"""Loss functions.  Each takes ``reduction``: ``'none'``, ``'mean'`` or ``'sum'``."""
import math
from typing import Literal, Optional, get_args

import streamlet.core as mx
from .. import _public


Reduction = Literal["none", "mean", "sum"]


def _reduce(loss, reduction: Reduction = "none"):
    if reduction not in get_args(Reduction):
        raise ValueError(f"Invalid reduction. Must be one of {get_args(Reduction)}.")
    if reduction == "mean":
        return mx.mean(loss)
    return mx.sum(loss) if reduction == "sum" else loss


def _same_shape(a, b, a_name, b_name):
    if a.shape != b.shape:
        raise ValueError(f"{a_name.capitalize()} shape {a.shape} does not match {b_name} shape "
                         f"{b.shape}.")


def _weighted(loss, weights):
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise ValueError(f"Weights with shape {weights.shape} is not the same as output loss "
                         f"with shape {loss.shape}.")
    return loss * weights


def cross_entropy(logits, targets, weights: Optional[mx.array] = None, axis: int = -1,
                  label_smoothing: float = 0.0, reduction: Reduction = "none"):
    """The cross entropy of ``logits`` (unnormalized) against ``targets``: class indices, or
    probabilities of ``logits``' shape.

    Args:
        logits (array): The unnormalized log probabilities.
        targets (array): Class indices (``logits`` without ``axis``) or probabilities.
        weights (array, optional): Per-element weights of the unreduced loss.
        axis (int): The class axis. Default: ``-1``.
        label_smoothing (float): In ``[0, 1)``. Default: ``0``.
        reduction (str): Default: ``'none'``.

    >>> nn.losses.cross_entropy(mx.array([[0.0, 0.0]]), mx.array([1])).tolist()
    [0.6931471824645996]
    """
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"Label smoothing must be in [0, 1), got {label_smoothing}.")
    as_probs = targets.ndim == logits.ndim
    expected = list(logits.shape)
    if not as_probs:
        expected.pop(axis)
    if targets.shape != tuple(expected):
        raise ValueError(f"Targets shape {targets.shape} does not match logits shape "
                         f"{logits.shape}.")
    fast = getattr(getattr(mx, "fast", None), "cross_entropy", None)
    if (fast is not None and mx.default_device() == mx.gpu and not as_probs
            and label_smoothing == 0 and axis in (-1, logits.ndim - 1)
            and mx.issubdtype(logits.dtype, mx.floating)
            and mx.issubdtype(targets.dtype, mx.integer)):
        loss = fast(logits, targets).astype(logits.dtype)
    else:
        logits = logits - mx.stop_gradient(mx.max(logits, axis=axis, keepdims=True))
        if as_probs:
            score = mx.sum(logits * targets, axis=axis)
        else:
            score = mx.take_along_axis(logits, mx.expand_dims(targets, axis), axis).squeeze(axis)
        normalizer = mx.logsumexp(logits, axis=axis)
        if label_smoothing > 0:
            smoothing = -logits.mean(axis=axis) * label_smoothing
            loss = normalizer - (1 - label_smoothing) * score + smoothing
        else:
            loss = normalizer - score
    return _reduce(_weighted(loss, weights), reduction)


def binary_cross_entropy(inputs, targets, weights: Optional[mx.array] = None,
                         with_logits: bool = True, reduction: Reduction = "mean"):
    """The binary cross entropy of ``inputs`` (logits, or probabilities without
    ``with_logits``; their logs clipped at -100) against ``targets`` in [0, 1].

    >>> nn.losses.binary_cross_entropy(mx.array([0.0]), mx.array([1.0])).item() > 0.69
    True
    """
    _same_shape(inputs, targets, "inputs", "targets")
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_p = mx.clip(mx.log(inputs), a_min=-100, a_max=None)
        log_q = mx.clip(mx.log(1 - inputs), a_min=-100, a_max=None)
        loss = -(targets * log_p + (1 - targets) * log_q)
    return _reduce(_weighted(loss, weights), reduction)


def l1_loss(predictions, targets, reduction: Reduction = "mean"):
    """``|predictions - targets|``.

    >>> nn.losses.l1_loss(mx.array([1.0, 2.0]), mx.array([0.0, 0.0])).item()
    1.5
    """
    _same_shape(predictions, targets, "predictions", "targets")
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions, targets, reduction: Reduction = "mean"):
    """``(predictions - targets) ** 2``.

    >>> nn.losses.mse_loss(mx.array([1.0, 2.0]), mx.array([0.0, 0.0])).item()
    2.5
    """
    _same_shape(predictions, targets, "predictions", "targets")
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs, targets, axis: int = -1, reduction: Reduction = "none"):
    """The negative log likelihood: ``-inputs`` (log probabilities) at the target classes.

    >>> nn.losses.nll_loss(mx.array([[-1.0, -2.0]]), mx.array([1])).tolist()
    [2.0]
    """
    loss = -mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis).squeeze(axis)
    return _reduce(loss, reduction)


def gaussian_nll_loss(inputs, targets, vars, full: bool = False, eps: float = 1e-6,
                      reduction: Reduction = "mean"):
    """The negative log likelihood of ``targets`` under Gaussians of mean ``inputs`` and
    variance ``vars`` (at least ``eps``): ``(log(vars) + (targets - inputs)^2 / vars) / 2``,
    plus ``log(2 pi) / 2`` with ``full``.

    >>> nn.losses.gaussian_nll_loss(mx.array([0.0]), mx.array([0.0]), mx.array([1.0])).item()
    0.0
    """
    _same_shape(inputs, targets, "inputs", "targets")
    _same_shape(inputs, vars, "inputs", "vars")
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(inputs, targets, axis: int = -1, reduction: Reduction = "none"):
    """The Kullback-Leibler divergence ``sum(exp(targets) * (targets - inputs))``, both log
    probabilities.

    >>> nn.losses.kl_div_loss(mx.array([[-1.0]]), mx.array([[-1.0]])).tolist()
    [0.0]
    """
    return _reduce(mx.sum(mx.exp(targets) * (targets - inputs), axis), reduction)


def smooth_l1_loss(predictions, targets, beta: float = 1.0, reduction: Reduction = "mean"):
    """``0.5 d^2 / beta`` where ``d = |predictions - targets| < beta``, else ``d - beta / 2``.

    >>> nn.losses.smooth_l1_loss(mx.array([0.5, 3.0]), mx.array([0.0, 0.0]), reduction="sum").item()
    2.625
    """
    _same_shape(predictions, targets, "predictions", "targets")
    diff = mx.abs(predictions - targets)
    loss = mx.where(diff < beta, 0.5 * mx.square(diff) / beta, mx.abs(diff) - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(anchors, positives, negatives, axis: int = -1, p: int = 2,
                 margin: float = 1.0, eps: float = 1e-6, reduction: Reduction = "none"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the ``p``-norm distances ``d``.

    >>> x = mx.array([[0.0, 0.0]])
    >>> nn.losses.triplet_loss(x, x, x + 10).tolist()
    [0.0]
    """
    def distance(b):
        return mx.power(mx.power(mx.abs(anchors - b), p).sum(axis) + eps, 1.0 / p)

    loss = mx.maximum(distance(positives) - distance(negatives) + margin, 0)
    return _reduce(loss, reduction)


def hinge_loss(inputs, targets, reduction: Reduction = "none"):
    """``max(1 - inputs * targets, 0)``, targets in {-1, 1}.

    >>> nn.losses.hinge_loss(mx.array([0.5, 2.0]), mx.array([1.0, 1.0])).tolist()
    [0.5, 0.0]
    """
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(inputs, targets, delta: float = 1.0, reduction: Reduction = "none"):
    """``e^2 / 2`` where ``e = |inputs - targets| <= delta``, else ``delta (e - delta / 2)``.

    >>> nn.losses.huber_loss(mx.array([0.5, 3.0]), mx.array([0.0, 0.0])).tolist()
    [0.125, 2.5]
    """
    errors = mx.abs(inputs - targets)
    quadratic = mx.minimum(errors, delta)
    return _reduce(0.5 * quadratic**2 + delta * (errors - quadratic), reduction)


def log_cosh_loss(inputs, targets, reduction: Reduction = "none"):
    """``log(cosh(inputs - targets))``, computed stably.

    >>> nn.losses.log_cosh_loss(mx.array([0.0]), mx.array([0.0])).tolist()
    [0.0]
    """
    errors = inputs - targets
    return _reduce(mx.logaddexp(errors, -errors) - math.log(2), reduction)


def cosine_similarity_loss(x1, x2, axis: int = 1, eps: float = 1e-8,
                           reduction: Reduction = "none"):
    """The cosine similarity ``x1 . x2 / max(|x1| |x2|, eps)`` along ``axis``.

    >>> nn.losses.cosine_similarity_loss(mx.array([[1.0, 0.0]]), mx.array([[2.0, 0.0]])).tolist()
    [1.0]
    """
    norms = mx.linalg.norm(x1, axis=axis) * mx.linalg.norm(x2, axis=axis)
    return _reduce(mx.sum(x1 * x2, axis=axis) / mx.maximum(norms, eps), reduction)


def margin_ranking_loss(inputs1, inputs2, targets, margin: float = 0.0,
                        reduction: Reduction = "none"):
    """``max(0, -targets * (inputs1 - inputs2) + margin)``, targets in {-1, 1}.

    >>> nn.losses.margin_ranking_loss(mx.array([1.0]), mx.array([2.0]), mx.array([1.0])).tolist()
    [1.0]
    """
    if not inputs1.shape == inputs2.shape == targets.shape:
        raise ValueError("The shapes of the arguments do not match. The provided shapes are "
                         f"inputs1.shape={inputs1.shape}, inputs2.shape={inputs2.shape}, and "
                         f"targets.shape={targets.shape}.")
    return _reduce(mx.maximum(0, -targets * (inputs1 - inputs2) + margin), reduction)


__all__ = ["binary_cross_entropy", "cosine_similarity_loss", "cross_entropy", "gaussian_nll_loss",
           "hinge_loss", "huber_loss", "kl_div_loss", "l1_loss", "log_cosh_loss",
           "margin_ranking_loss", "mse_loss", "nll_loss", "smooth_l1_loss", "triplet_loss"]


def __dir__():
    return _public.names(globals())
