"""The demo (`python -m streamlet`, the README's first command) runs and reports correctly."""
import re
import subprocess
import sys

import numpy as np
import pytest

import streamlet.core as mx


def test_demo_runs_on_the_cpu_and_reports_two_streams():
    n = 1 << 16
    out = subprocess.run([sys.executable, "-m", "streamlet", "--size", str(n), "--steps", "2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "device: Device(cpu, 0)" in text
    assert "results identical on both streams: True" in text
    speedup = float(re.search(r"speedup from two streams: ([0-9.]+)x", text).group(1))
    assert speedup > 0
    a = np.arange(n, dtype=np.float32) * np.float32(1e-6)
    b = np.arange(n, dtype=np.float32) * np.float32(-1e-6)
    step = lambda v: np.exp(np.sin(v)) * np.float32(0.5)  # noqa: E731
    want = float(np.sum(step(a) + step(b), dtype=np.float64))
    got = float(re.search(r"cross-stream sum on Stream\(Device\(cpu, 0\), \d+\): ([-0-9.]+)",
                          text).group(1))
    assert abs(got - want) <= 1e-5 * abs(want)


@pytest.mark.skipif(mx.is_available(mx.gpu), reason="a GPU is present here")
def test_demo_refuses_a_missing_gpu_clearly():
    out = subprocess.run([sys.executable, "-m", "streamlet", "--device", "gpu"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "not available" in out.stderr
