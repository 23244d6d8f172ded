"""Devices (DESIGN §1): values, equality, queries, and errors when no GPU exists."""
import pytest

import streamlet.core as mx
from conftest import fresh_default_device, gpu_available

no_gpu = pytest.mark.skipif(gpu_available(), reason="a GPU is present")


def test_device_type_members():
    assert mx.cpu is mx.DeviceType.cpu and mx.gpu is mx.DeviceType.gpu
    assert mx.cpu != mx.gpu
    assert {d.name for d in mx.DeviceType} == {"cpu", "gpu"}


def test_device_values_and_repr():
    d = mx.Device(mx.cpu)
    assert d.type is mx.cpu and d.index == 0
    assert repr(d) == "Device(cpu, 0)"
    assert repr(mx.Device(mx.gpu, 1)) == "Device(gpu, 1)"
    with pytest.raises(AttributeError):
        d.index = 2


def test_device_equality_with_type_and_device():
    d = mx.Device(mx.cpu)
    assert d == mx.cpu and mx.cpu == d
    assert d != mx.gpu
    assert d == mx.Device(mx.cpu, 0)
    assert d != mx.Device(mx.cpu, 1)
    assert mx.Device(mx.gpu, 0) != mx.Device(mx.cpu, 0)


def test_device_hash():
    assert hash(mx.Device(mx.cpu)) == hash(mx.Device(mx.cpu, 0))
    table = {mx.Device(mx.cpu): "c", mx.Device(mx.gpu): "g"}
    assert table[mx.Device(mx.cpu, 0)] == "c"
    assert len({mx.Device(mx.cpu), mx.Device(mx.cpu, 0), mx.Device(mx.cpu, 1)}) == 2


def test_device_rejects_non_type():
    with pytest.raises(TypeError):
        mx.Device("cpu")


def test_default_device_matches_availability():
    want = "Device(gpu, 0)" if gpu_available() else "Device(cpu, 0)"
    assert fresh_default_device() == want
    assert isinstance(mx.default_device(), mx.Device)


def test_set_default_device_roundtrip():
    before = mx.default_device()
    try:
        mx.set_default_device(mx.cpu)
        assert mx.default_device() == mx.Device(mx.cpu)
        assert mx.zeros((2,)).tolist() == [0.0, 0.0]
        mx.set_default_device(mx.Device(mx.cpu, 0))
        assert mx.default_device() == mx.cpu
    finally:
        mx.set_default_device(before)


def test_is_available_and_count():
    assert mx.is_available(mx.cpu) and mx.is_available(mx.Device(mx.cpu))
    assert not mx.is_available(mx.Device(mx.cpu, 1))
    assert mx.device_count(mx.cpu) == 1
    assert mx.device_count(mx.gpu) >= 0
    assert mx.is_available(mx.gpu) == (mx.device_count(mx.gpu) > 0)


@pytest.mark.parametrize("arg", [None, mx.cpu, mx.Device(mx.cpu)])
def test_device_info_keys(arg):
    info = mx.device_info() if arg is None else mx.device_info(arg)
    assert isinstance(info, dict)
    assert {"device_name", "architecture"} <= set(info)
    assert isinstance(info["device_name"], str) and info["device_name"]
    assert any("memory" in k and isinstance(v, int) and v > 0 for k, v in info.items())


@no_gpu
@pytest.mark.parametrize("call", [
    lambda: mx.default_stream(mx.gpu),
    lambda: mx.new_stream(mx.gpu),
    lambda: mx.set_default_device(mx.gpu),
    lambda: mx.new_thread_unsafe_stream(mx.gpu),
    lambda: mx.new_thread_local_stream(mx.gpu),
    lambda: mx.zeros((2,), stream=mx.gpu),
    lambda: mx.stream(mx.gpu).__enter__(),
], ids=["default_stream", "new_stream", "set_default_device", "thread_unsafe",
        "thread_local", "op_stream_kw", "stream_context"])
def test_gpu_absent_is_value_error(call):
    before = mx.default_device()
    with pytest.raises(ValueError, match="(?i)gpu"):
        call()
    assert mx.default_device() == before


@no_gpu
def test_gpu_absent_queries():
    assert not mx.is_available(mx.gpu)
    assert mx.device_count(mx.gpu) == 0
    with pytest.raises(ValueError):
        mx.device_info(mx.gpu)


def test_no_device_index_out_of_range():
    with pytest.raises(ValueError):
        mx.new_stream(mx.Device(mx.cpu, 3))
