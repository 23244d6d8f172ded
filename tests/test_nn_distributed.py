"""nn.average_gradients: a group of one returns the gradients; two processes (through
streamlet.launch) average them, grouped into all-reduces or not, with mixed dtypes too."""
import subprocess
import sys
from pathlib import Path

import pytest

import streamlet.core as mx
import streamlet.nn as nn


def test_a_single_process_keeps_its_gradients():
    grads = {"w": mx.ones((2, 3)), "b": [mx.zeros((2,))]}
    assert nn.average_gradients(grads) is grads
    assert nn.average_gradients(grads, all_reduce_size=0) is grads


def test_two_processes_average_their_gradients():
    pytest.importorskip("mpi4py")
    worker = Path(__file__).with_name("nn_distributed_worker.py")
    proc = subprocess.run([sys.executable, "-m", "streamlet.launch", "-n", "2", str(worker)],
                          capture_output=True, text=True, timeout=280)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len([line for line in lines if line.startswith("OK")]) == 8, proc.stdout
