"""Regressions found by comparing the process-level APIs (memory, devices, streams, the
single-process distributed API) with MLX 0.32.4 on the CPU."""
import numpy as np
import pytest

import streamlet.core as mx


# -- devices and streams ----------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda M: M.device_count(device_type=M.cpu),
    lambda M: M.is_available(device=M.cpu),
    lambda M: M.set_default_device(device=M.default_device()),
])
def test_device_and_stream_functions_take_mlxs_keyword_names(mlx, call):
    for M in (mx, mlx):
        with M.stream(M.cpu):
            call(M)


@pytest.mark.parametrize("target", ["type", "device"])
def test_set_default_stream_refuses_a_device(mlx, target):
    for M in (mx, mlx):
        d = M.cpu if target == "type" else M.Device(M.cpu)
        before = M.default_stream(M.cpu)
        with pytest.raises(TypeError):
            M.set_default_stream(d)
        assert M.default_stream(M.cpu) == before


def test_stream_context_exit_without_enter_is_harmless(mlx):
    for M in (mx, mlx):
        before = (M.default_device(), M.default_stream(M.cpu))
        ctx = M.stream(M.new_stream(M.cpu))
        assert not ctx.__exit__(None, None, None)  # never entered
        ctx.__enter__()
        ctx.__exit__(None, None, None)
        assert not ctx.__exit__(None, None, None)  # exited already
        assert (M.default_device(), M.default_stream(M.cpu)) == before


def test_a_device_cannot_be_initialized_again(mlx):
    for M in (mx, mlx):
        d = M.Device(M.cpu)
        with pytest.warns(RuntimeWarning) if M is mlx else _nothing():
            with pytest.raises(TypeError):
                d.__init__(M.cpu, 3)
        assert repr(d) == "Device(cpu, 0)"


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_metal_namespace_has_mlxs_metal_only_calls(mlx, capfd):
    for M in (mx, mlx):
        assert M.metal.device_info() == {}
        assert M.metal.start_capture("/tmp/never.gputrace") is None
        assert M.metal.stop_capture() is None
        with pytest.raises(TypeError):
            M.metal.start_capture(1)
        with pytest.raises(TypeError):
            M.metal.start_capture()


# -- distributed on a group of one ------------------------------------------------------
@pytest.mark.parametrize("strict", [0, 1, None, "yes", np.bool_(False)])
def test_init_takes_only_a_bool_strict(mlx, strict):
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.distributed.init(strict)


@pytest.mark.parametrize("backend", [None, 1, b"any"])
def test_init_and_is_available_take_only_a_str_backend(mlx, backend):
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.distributed.init(backend=backend)
        with pytest.raises(TypeError):
            M.distributed.is_available(backend)


def test_init_refuses_a_non_callable_factory_before_the_backend(mlx):
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.distributed.init(backend="any", all_gather_factory=1)


@pytest.mark.parametrize("value", [True, np.int32(0), "array"])
def test_split_and_peers_take_integer_likes(mlx, value):
    for M in (mx, mlx):
        v = M.array(0) if isinstance(value, str) else value
        g = M.distributed.init()
        with pytest.raises(RuntimeError, match="Cannot split"):
            g.split(v)
        with pytest.raises(RuntimeError, match="Cannot split"):
            g.split(0, v)
        with pytest.raises(ValueError, match="singleton"):
            M.distributed.send(M.ones(2), v)
        with pytest.raises(ValueError, match="singleton"):
            M.distributed.recv((2,), M.float32, v)


@pytest.mark.parametrize("value", [2 ** 31, -2 ** 31 - 1, 2 ** 40])
def test_split_and_peers_refuse_past_a_c_int(mlx, value):
    for M in (mx, mlx):
        g = M.distributed.init()
        with pytest.raises(TypeError):
            g.split(value)
        with pytest.raises(TypeError):
            g.split(0, value)
        with pytest.raises(TypeError):
            M.distributed.send(M.ones(2), value)
        with pytest.raises(TypeError):
            M.distributed.recv_like(M.ones(2), value)


@pytest.mark.parametrize("op", ["all_sum", "all_gather", "all_max", "all_min", "sum_scatter"])
@pytest.mark.parametrize("bad", ["a", 1.5, "list", "group", "dtype"])
def test_collectives_alone_refuse_a_wrong_stream(mlx, op, bad):
    for M in (mx, mlx):
        s = {"group": M.distributed.init(), "dtype": M.float32, "list": [0]}.get(bad, bad)
        with pytest.raises(TypeError):
            getattr(M.distributed, op)(M.array([1.0, 2.0]), stream=s)
        # a right one still gives the input back
        y = getattr(M.distributed, op)(M.array([1.0, 2.0]), stream=M.new_stream(M.cpu))
        assert y.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("bad", ["a", 1.5, "group"])
def test_send_and_recv_check_the_stream_before_the_peer(mlx, bad):
    for M in (mx, mlx):
        s = M.distributed.init() if bad == "group" else bad
        with pytest.raises(TypeError):
            M.distributed.send(M.ones(2), 0, stream=s)
        with pytest.raises(TypeError):
            M.distributed.recv((2,), M.float32, 0, stream=s)


@pytest.mark.parametrize("shape", [0, 2, np.int64(2)])
def test_recv_takes_a_sequence_shape_only(mlx, shape):
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.distributed.recv(shape, M.float32, 0)
