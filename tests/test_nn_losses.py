"""Every loss of nn.losses against mlx.nn.losses, for each reduction and option."""
import numpy as np
import pytest

import streamlet.nn as nn
from nn_oracle import close, mlx_nn, needs_oracle, ours, theirs

pytestmark = needs_oracle

rng = np.random.default_rng(0)
F = np.float32
logits = rng.normal(size=(4, 5)).astype(F)
classes = rng.integers(0, 5, size=(4,)).astype(np.int32)
probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
pred, target = rng.normal(size=(3, 4)).astype(F), rng.normal(size=(3, 4)).astype(F)
unit = rng.uniform(0.05, 0.95, size=(3, 4)).astype(F)
binary = (rng.random(size=(3, 4)) > 0.5).astype(F)
signs = np.where(rng.random(size=(3, 4)) > 0.5, 1.0, -1.0).astype(F)
logp = np.log(probs).astype(F)

# name, arrays, keyword arguments
CASES = [
    ("cross_entropy", (logits, classes), {}),
    ("cross_entropy", (logits, probs.astype(F)), {}),
    ("cross_entropy", (logits, classes), {"label_smoothing": 0.3}),
    ("cross_entropy", (logits, probs.astype(F)), {"label_smoothing": 0.1}),
    ("cross_entropy", (logits.T.copy(), classes), {"axis": 0}),
    ("cross_entropy", (logits, classes), {"weights": unit[0]}),
    ("binary_cross_entropy", (pred, binary), {}),
    ("binary_cross_entropy", (unit, binary), {"with_logits": False}),
    ("binary_cross_entropy", (np.array([0.0, 1.0, 0.5], F), np.array([0.0, 1.0, 1.0], F)),
     {"with_logits": False}),
    ("binary_cross_entropy", (pred, unit), {"weights": unit}),
    ("l1_loss", (pred, target), {}),
    ("mse_loss", (pred, target), {}),
    ("nll_loss", (logp, classes), {}),
    ("nll_loss", (logp.T.copy(), classes), {"axis": 0}),
    ("gaussian_nll_loss", (pred, target, unit), {}),
    ("gaussian_nll_loss", (pred, target, unit * 0), {"full": True, "eps": 1e-3}),
    ("kl_div_loss", (logp, logp[::-1].copy()), {}),
    ("kl_div_loss", (logp, logp[::-1].copy()), {"axis": 0}),
    ("smooth_l1_loss", (pred, target), {}),
    ("smooth_l1_loss", (pred, target), {"beta": 0.5}),
    ("triplet_loss", (pred, target, unit), {}),
    ("triplet_loss", (pred, target, unit), {"p": 1, "margin": 0.5, "axis": 0}),
    ("hinge_loss", (pred, signs), {}),
    ("huber_loss", (pred, target), {}),
    ("huber_loss", (pred, target), {"delta": 0.5}),
    ("log_cosh_loss", (pred * 30, target), {}),
    ("cosine_similarity_loss", (pred, target), {}),
    ("cosine_similarity_loss", (pred, np.zeros_like(target)), {"axis": 0, "eps": 1e-4}),
    ("margin_ranking_loss", (pred, target, signs), {}),
    ("margin_ranking_loss", (pred, target, signs), {"margin": 0.5}),
]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name,arrays,kwargs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_loss_matches_mlx(name, arrays, kwargs, reduction):
    kw_ours = {k: ours(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    kw_mlx = {k: theirs(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    got = getattr(nn.losses, name)(*map(ours, arrays), **kw_ours, reduction=reduction)
    want = getattr(mlx_nn.losses, name)(*map(theirs, arrays), **kw_mlx, reduction=reduction)
    close(got, want, rtol=1e-5, atol=1e-6, what=name)


def test_default_reductions_match_mlx():
    for name, arrays, kwargs in CASES:
        if not kwargs:
            close(getattr(nn.losses, name)(*map(ours, arrays)),
                  getattr(mlx_nn.losses, name)(*map(theirs, arrays)), rtol=1e-5, atol=1e-6,
                  what=name)


def test_bad_arguments_raise_like_mlx():
    bad = [("cross_entropy", (logits, classes[:2]), {}),
           ("cross_entropy", (logits, probs[:2]), {}),
           ("cross_entropy", (logits, classes), {"label_smoothing": 1.0}),
           ("cross_entropy", (logits, classes), {"weights": unit}),
           ("binary_cross_entropy", (pred, binary[:2]), {}),
           ("binary_cross_entropy", (pred, binary), {"weights": unit[0]}),
           ("l1_loss", (pred, target[:2]), {}), ("mse_loss", (pred, target.T.copy()), {}),
           ("gaussian_nll_loss", (pred, target, unit[:1]), {}),
           ("gaussian_nll_loss", (pred, target[:1], unit), {}),
           ("smooth_l1_loss", (pred, target[:1]), {}),
           ("margin_ranking_loss", (pred, target, signs[:1]), {}),
           ("mse_loss", (pred, target), {"reduction": "max"})]
    for name, arrays, kwargs in bad:
        kw_ours = {k: ours(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        kw_mlx = {k: theirs(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        with pytest.raises(ValueError):
            getattr(mlx_nn.losses, name)(*map(theirs, arrays), **kw_mlx)
        with pytest.raises(ValueError):
            getattr(nn.losses, name)(*map(ours, arrays), **kw_ours)
