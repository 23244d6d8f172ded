"""Regressions found by comparing the device/stream/memory API with MLX 0.32.4 on the CPU."""
import copy
import pickle

import numpy as np
import pytest

import streamlet.core as mx


def test_synchronize_takes_the_stream_keyword(mlx):
    for M in (mx, mlx):
        s = M.new_stream(M.cpu)
        M.eval(M.ones((2,), stream=s))
        assert M.synchronize(stream=s) is None
        assert M.synchronize(stream=M.cpu) is None
        assert M.synchronize(stream=None) is None


@pytest.mark.parametrize("bad", ["cpu", 0.5, [None]])
def test_stream_context_refuses_a_wrong_type_when_made(mlx, bad):
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.stream(bad)  # not only on __enter__
        with pytest.raises(TypeError):
            M.StreamContext(bad)


@pytest.mark.parametrize("bad", [1.5, "1", 2 ** 70])
def test_device_index_must_be_an_integer(mlx, bad):
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.Device(M.cpu, bad)


def test_device_index_accepts_integer_likes(mlx):
    for M in (mx, mlx):
        assert M.Device(M.cpu, np.int64(0)) == M.Device(M.cpu, 0)
        assert repr(M.Device(M.cpu, True)) == "Device(cpu, 1)"


@pytest.mark.parametrize("kind", ["stream", "thread_local"])
def test_streams_are_neither_pickled_nor_copied(mlx, kind):
    for M in (mx, mlx):
        s = M.new_stream(M.cpu) if kind == "stream" else M.new_thread_local_stream(M.cpu)
        name = type(s).__name__
        for f in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match=f"cannot pickle '{name}' object"):
                f(s)


@pytest.mark.parametrize("name", ["set_memory_limit", "set_cache_limit", "set_wired_limit"])
def test_limits_accept_integer_likes_and_refuse_past_size_t(mlx, name):
    for M in (mx, mlx):
        f = getattr(M, name)
        first = f(np.int64(1 << 31))
        assert f(M.array(1 << 30)) in (1 << 31, 0)  # set_wired_limit: always 0 on MLX's CPU
        assert f(True) in (1 << 30, 0)
        with pytest.raises(TypeError):
            f(1 << 64)
        with pytest.raises(TypeError):
            f(-1)
        with pytest.raises(TypeError):
            f(1.5)
        f(first)
    # a refused value leaves the limit alone
    before = mx.set_memory_limit(1 << 30)
    with pytest.raises(TypeError):
        mx.set_memory_limit(1 << 64)
    assert mx.set_memory_limit(before) == 1 << 30
