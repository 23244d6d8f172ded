"""The docstring examples of streamlet.nn, streamlet.optimizers and streamlet.utils run."""
import doctest
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from streamlet.utils import tree_flatten, tree_map
from nn_oracle import skip_unless


def _modules():
    names = ["streamlet.utils"]
    for package in (nn, optim):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return [importlib.import_module(n) for n in names]


def _collect():
    finder = doctest.DocTestFinder()
    tests, seen = [], set()
    for module in _modules():
        for test in finder.find(module, module.__name__):
            if test.examples and test.name not in seen:
                seen.add(test.name)
                tests.append(test)
    return tests


TESTS = _collect()
# examples that call core ops still being written elsewhere
NEEDS = {"LayerNorm": ("fast.layer_norm",), "InstanceNorm": ("fast.layer_norm",)}
GLOBALS = {"mx": mx, "nn": nn, "optim": optim, "np": np, "tree_flatten": tree_flatten,
           "tree_map": tree_map}


def test_public_names_have_examples():
    documented = {t.name.split(".")[-1] for t in TESTS}
    public = [n for n in dir(nn) if not n.startswith("_") and (inspect.isclass(getattr(nn, n))
              or inspect.isfunction(getattr(nn, n)))]
    missing = [n for n in public if n not in documented and getattr(nn, n).__module__
               .startswith("streamlet") and not getattr(nn, n).__module__.endswith(
                   "distributed") and "Transformer" not in n and n not in
               ("RoPE", "MultiHeadAttention", "QuantizedLinear", "QuantizedEmbedding",
                "QQLinear", "quantize", "value_and_grad")]
    assert len(TESTS) > 100 and not missing, missing


@pytest.mark.parametrize("test", TESTS, ids=[t.name for t in TESTS])
def test_docstring_example(test):
    skip_unless(*NEEDS.get(test.name.split(".")[-1], ()))
    test.globs = {**test.globs, **GLOBALS}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    mx.random.seed(0)
    runner.run(test, out=report.append, clear_globs=False)
    if runner.summarize(verbose=False).failed:
        pytest.fail("".join(report), pytrace=False)

