import subprocess
import sys

import numpy as np
import pytest

import streamlet.core as mx

try:
    import mlx.core as mlx_core
except ImportError:  # the oracle is optional: tests that need it skip
    mlx_core = None


@pytest.fixture
def mlx():
    if mlx_core is None:
        pytest.skip("mlx is not installed")
    return mlx_core


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def gpu_available():
    return mx.is_available(mx.gpu)


requires_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU here")


def fresh_default_device() -> str:
    """repr of the default device a new process starts with (the suite sets the CPU)."""
    code = "import streamlet.core as mx; print(repr(mx.default_device()))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


# The suite states the CPU's behaviour unless a test names a GPU stream; on a GPU machine
# the default device would otherwise be the GPU (DESIGN §1).
mx.set_default_device(mx.cpu)
