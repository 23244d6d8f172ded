import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import settings

# float32 matmuls in full precision on the GPU (as MLX's own test suite sets it)
os.environ.setdefault("MLX_ENABLE_TF32", "0")
# JAX (an interop test's peer) takes 75% of a GPU's memory when it first runs there, and
# the test processes share the GPU
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import streamlet.core as mx  # noqa: E402

# CI draws the same examples on every run, so a red run means a changed program, not a
# new draw; HYPOTHESIS_PROFILE=explore draws new ones (run it before landing an op)
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The suite is differential: MLX 0.32.4 (`mlx`, installed by ./dev) is its oracle, and a
# run without it fails instead of passing with most tests skipped.  A developer without
# it can opt out explicitly: STREAMLET_SKIP_ORACLE=1 skips the tests that need it.
SKIP_ORACLE = "STREAMLET_SKIP_ORACLE"
try:
    import mlx.core as mlx_core
    _missing = None
except ImportError as exc:
    mlx_core, _missing = None, exc


def pytest_configure(config):
    if mlx_core is None and not os.environ.get(SKIP_ORACLE):
        raise pytest.UsageError(
            f"The test oracle `mlx` (MLX 0.32.4, in the `dev` extra that ./dev installs) "
            f"cannot be imported: {_missing}. Install it, or set {SKIP_ORACLE}=1 to run "
            "without it (the tests that need it then skip).")


@pytest.fixture
def mlx():
    if mlx_core is None:
        pytest.skip(f"mlx is not installed ({SKIP_ORACLE} is set)")
    return mlx_core


@pytest.fixture
def on_cpu():
    """The CPU as this test's default device (for what only the CPU does: NumPy views,
    factorizations without a stream), whatever device the suite runs on."""
    with mx.stream(mx.cpu):
        yield


# MLX's GPU backend refuses float64, and so does streamlet's: MLX programs put float64
# work on a CPU stream.  In a GPU run the tests of float64 cases do the same.
FLOAT64_REFUSED = "float64 is not supported on the GPU"


@pytest.fixture(autouse=True)
def _float64_cases_on_cpu(request):
    if TEST_DEVICE == "gpu" and "float64" in request.node.name:
        with mx.stream(mx.cpu):
            yield
    else:
        yield


def cpu_if_float64(call):
    """`call()`; in a GPU run, once more on a CPU stream if the GPU refused float64 work
    (for tests that compare against MLX's CPU build over every dtype)."""
    try:
        return call()
    except ValueError as exc:
        if TEST_DEVICE != "gpu" or FLOAT64_REFUSED not in str(exc):
            raise
    with mx.stream(mx.cpu):
        return call()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def gpu_available():
    return mx.is_available(mx.gpu)


requires_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU here")


def errors_of_threads(work, n):
    """Run `work(k)` on threads k = 0..n-1 at once; the exceptions they raised."""
    errors = []

    def run(k):
        try:
            work(k)
        except Exception as exc:  # noqa: BLE001 (returned)
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def fresh_default_device() -> str:
    """repr of the default device a new process starts with (the suite sets the CPU)."""
    code = "import streamlet.core as mx; print(repr(mx.default_device()))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


# The suite runs on the CPU unless asked (`./dev test --device gpu` sets
# STREAMLET_TEST_DEVICE=gpu): then every test that names no device runs on the GPU.
TEST_DEVICE = os.environ.get("STREAMLET_TEST_DEVICE", "cpu")
if TEST_DEVICE not in ("cpu", "gpu"):
    raise RuntimeError(f"STREAMLET_TEST_DEVICE must be cpu or gpu, got {TEST_DEVICE!r}.")
if TEST_DEVICE == "gpu" and not gpu_available():
    raise RuntimeError("STREAMLET_TEST_DEVICE=gpu but no CUDA GPU is usable here.")
mx.set_default_device(mx.gpu if TEST_DEVICE == "gpu" else mx.cpu)
