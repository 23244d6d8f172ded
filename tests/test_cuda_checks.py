"""The GPU's index-bounds bookkeeping (`backend.cuda_checks`), on the CPU: NumPy stands in
for CuPy's flag kernel and events, so what is checked is which flags each node waits for
and which error reaches it, not the device."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
import threading
import types

import numpy as np
import pytest

from streamlet.core import dtypes as dt
from streamlet.core.graph import Node, Primitive


class _Event:
    done = True  # the stand-in device has run everything queued

    def __init__(self, **kwargs):
        self.waits = 0

    def record(self, stream):
        pass

    def synchronize(self):
        self.waits += 1


class _Flag:
    def __init__(self, value):
        self.value = bool(value)

    def __or__(self, other):
        return _Flag(self.value or other.value)

    def get(self):
        return np.bool_(self.value)


def _reduction(*args, **kwargs):
    def kernel(idx, n):
        idx = np.asarray(idx)
        return _Flag(np.any((idx < -n) | (idx >= n)))
    return kernel


@pytest.fixture
def checks(monkeypatch):
    """A private copy of the module over the stand-in (the real one, on a GPU machine,
    stays as the backend imported it)."""
    fake = types.ModuleType("cupy")
    fake.asarray = np.asarray
    fake.ReductionKernel = _reduction
    fake.cuda = types.SimpleNamespace(Event=_Event)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    import streamlet.backend
    path = pathlib.Path(streamlet.backend.__file__).with_name("cuda_checks.py")
    spec = importlib.util.spec_from_file_location("streamlet.backend._checks_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Stream:
    def __init__(self):
        self.lock = threading.Lock()
        self.errors = []


class _Handle:
    def __init__(self):
        self.lock = threading.RLock()
        self.checks = []
        self.stream = None


OP = Primitive("op", lambda xp, *xs: xs[0])
TAKE = Primitive("take", lambda xp, x, i: x)


def _node(*inputs):
    n = Node((2,), dt.float32, OP, tuple(inputs))
    n.stream = _Stream()
    return n


def test_a_node_waits_for_each_unread_flag_once_through_diamonds(checks):
    """A residual network's diamonds (x + f(x)) gave each node its inputs' flags
    concatenated: 2^depth copies of one flag (0.4 s per generated token on the H200)."""
    h = _Handle()
    table, index = _node(), _node()
    x = Node((2,), dt.float32, TAKE, (table, index))
    x.stream = _Stream()
    checks.inherit(x, h)
    checks.watch(x, [(np.array([0, 1]), 4)], h)
    for _ in range(12):
        y = _node(x)
        checks.inherit(y, h)
        x = _node(x, y)
        checks.inherit(x, h)
    assert len(x.checks) == 1
    checks.settle([x])
    assert x.checks is None and x.error is None


def test_a_flag_read_meanwhile_passes_or_fails_the_consumer(checks):
    h = _Handle()
    ok, bad = (Node((2,), dt.float32, TAKE, (_node(), _node())) for _ in range(2))
    for n, idx in ((ok, [0, 3]), (bad, [0, 4])):
        n.stream = _Stream()
        checks.inherit(n, h)
        checks.watch(n, [(np.array(idx), 4)], h)
    early = _node(ok, bad)
    checks.inherit(early, h)
    assert len(early.checks) == 2
    checks.settle([ok])  # ok's flag is read and passed: nothing left to wait for
    after_ok = _node(ok)
    checks.inherit(after_ok, h)
    assert after_ok.checks is None
    checks.settle([early])  # reads bad's flag: early fails with its error
    assert "Index out of bounds" in str(early.error) and early.error in early.stream.errors
    later = _node(bad)  # bad itself was not settled, but its flag failed: so does later
    with pytest.raises(Exception, match="Index out of bounds"):
        checks.inherit(later, h)


def test_a_chain_shares_its_tuple_of_flags(checks):
    h = _Handle()
    x = Node((2,), dt.float32, TAKE, (_node(), _node()))
    x.stream = _Stream()
    checks.inherit(x, h)
    checks.watch(x, [(np.array([0, 1]), 4)], h)
    chain = [x]
    for _ in range(5):
        chain.append(_node(chain[-1]))
        checks.inherit(chain[-1], h)
    assert all(n.checks is x.checks for n in chain)


def test_equal_tuples_of_flags_are_taken_as_they_are(checks):
    """Two inputs carrying the same flags in tuples of their own (each branch of a
    residual filtered its read flags anew): the consumer takes one of those tuples, not a
    merged copy built at every node of a decode step."""
    h = _Handle()
    x = Node((2,), dt.float32, TAKE, (_node(), _node()))
    x.stream = _Stream()
    checks.inherit(x, h)
    checks.watch(x, [(np.array([0, 1]), 4)], h)
    a, b = _node(x), _node(x)
    checks.inherit(a, h)
    checks.inherit(b, h)
    b.checks = tuple(list(a.checks))  # equal, not the same object
    assert b.checks == a.checks and b.checks is not a.checks
    z = _node(a, b)
    checks.inherit(z, h)
    assert z.checks is a.checks


@pytest.mark.parametrize("idx", [[0, 3], [0, 4]])
def test_the_flush_reads_its_streams_flags_and_fails_what_came_from_a_bad_one(checks, idx):
    h, state = _Handle(), _Stream()
    x = Node((2,), dt.float32, TAKE, (_node(), _node()))
    x.stream = _Stream()
    checks.inherit(x, h)
    checks.watch(x, [(np.array(idx), 4)], h)
    y, unrelated = _node(x), _node()
    for n in (y, unrelated):
        checks.inherit(n, h)
    checks.settle_watched(h, state)
    assert h.checks == [] and x.checks[0].flag is None  # read once, by the flush
    bad = idx[-1] >= 4
    assert [str(e) for e in state.errors] == ([str(x.checks[0].error)] if bad else [])
    later = _node(y)  # y's flag read: nothing left to wait for (or its error at once)
    if bad:
        with pytest.raises(Exception, match="Index out of bounds"):
            checks.inherit(later, h)
    else:
        checks.inherit(later, h)
        assert later.checks is None
    checks.settle([y, unrelated])  # y read: it takes the error (or nothing)
    assert (y.error is not None) == bad and unrelated.error is None
    assert y.checks is None


class _ReadMeanwhile:
    """A check that another thread reads, and finds failed, right after `inherit` first
    looks at its flag (that reader sets the error, then clears the flag)."""

    def __init__(self):
        self._flag, self.error, self.looks = object(), None, 0

    @property
    def flag(self):
        self.looks += 1
        if self.looks == 2:
            self.error, self._flag = RuntimeError("[take] Index out of bounds"), None
        return self._flag


class _Passed:
    flag = error = None


def test_a_flag_read_while_a_consumer_inherits_keeps_its_failure(checks):
    h = _Handle()
    a, b = _node(), _node()
    a.checks, b.checks = (_ReadMeanwhile(),), (_Passed(),)
    y = _node(a, b)
    checks.inherit(y, h)  # no lock: the failed check must stay with the consumer
    assert y.checks == a.checks
    checks.settle([y])
    assert "Index out of bounds" in str(y.error)
