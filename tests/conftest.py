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


# The suite states the CPU's behaviour unless a test names a GPU stream; on a GPU machine
# the default device would otherwise be the GPU (DESIGN §1).
mx.set_default_device(mx.cpu)
