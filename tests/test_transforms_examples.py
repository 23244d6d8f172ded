"""The training examples (examples/linear_regression.py, logistic_regression.py,
mlp_classifier.py) run a few steps on streamlet and on mlx from the same seed: the same
data, the same initial parameters, the same loss curve; and the loss goes down."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import streamlet.core as mx

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name,steps,rtol", [("linear_regression", 40, 1e-4),
                                             ("logistic_regression", 40, 1e-5),
                                             ("mlp_classifier", 120, 1e-4)])
def test_loss_curve_matches_mlx(mlx, name, steps, rtol):
    example = _load(name)
    ours, ours_end = example.train(mx, steps=steps)
    theirs, theirs_end = example.train(mlx, steps=steps)
    assert len(ours) == steps
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-6)
    assert np.mean(ours[-5:]) < 0.8 * np.mean(ours[:5])
    assert ours_end == pytest.approx(theirs_end, rel=1e-2, abs=1e-3)
