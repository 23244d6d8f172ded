"""Intermediate buffers are freed while an eval runs, not when it ends (DESIGN §4)."""
import importlib

import numpy as np
import pytest

import streamlet.core as mx
eval_module = importlib.import_module("streamlet.core.eval")

MIB = 1 << 20


def chain(x, n, s):
    for _ in range(n):
        x = mx.sin(x, stream=s) + 1  # the add runs on the default stream: a cross-stream chain
    return x


@pytest.mark.parametrize("pooled", [False, True])
def test_chain_peak_stays_at_a_few_buffers(monkeypatch, pooled):
    if pooled:  # every eval through the worker pool and its parked batches
        monkeypatch.setattr(eval_module, "SMALL_WORK", 1)
    a = mx.array(np.ones(MIB, np.float32))  # 4 MiB
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    mx.eval(a)
    mx.reset_peak_memory()
    y, z = chain(a, 20, s1), chain(a, 20, s2)
    mx.eval(y, z)
    # 80 intermediates of 4 MiB were made; only a handful may be alive at once
    assert mx.get_peak_memory() <= 8 * 4 * MIB
    np.testing.assert_allclose(np.asarray(y), np.asarray(z))


def test_single_stream_chain_frees_as_it_goes():
    a = mx.array(np.ones(MIB, np.float32))
    mx.eval(a)
    mx.reset_peak_memory()
    y = a
    for _ in range(30):
        y = mx.exp(y * 0.5)
    mx.eval(y)
    assert mx.get_peak_memory() <= 3 * 4 * MIB


def test_a_buffer_freed_inside_track_does_not_deadlock():
    """The collector can free a watched buffer while `track` holds the account's lock
    (any allocation there can start it); the weak reference's callback then takes the
    same lock on the same thread."""
    import threading

    from streamlet.core.memory import Account
    acc = Account()
    buf = np.ones(1 << 15)
    acc.track(buf)

    def free_inside():
        with acc._lock:
            acc._release(id(buf))  # what that callback does
    t = threading.Thread(target=free_inside, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the account's lock is not re-entrant"
    assert acc.active == 0
