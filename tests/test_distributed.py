"""mx.distributed: the singleton group, the communication order, the transform rules, the
launcher's command lines, and a 4-process run of every op checked against NumPy."""
import doctest
import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import streamlet.core as mx
from streamlet import launch
from streamlet.core.distributed import group as group_mod
from streamlet.core.distributed import mpi, nccl, order
from streamlet.core.distributed.ops import gather_shards, sum_gradients

D = mx.distributed
HERE = Path(__file__).parent


# -- a process on its own: the singleton group -----------------------------------------
def test_init_without_a_launcher_is_the_singleton():
    g = D.init()
    assert (g.rank(), g.size()) == (0, 1)
    assert (D.init().rank(), D.init().size()) == (0, 1)
    assert isinstance(g, D.Group)


@pytest.mark.parametrize("op", ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter"])
def test_singleton_ops_return_the_input(op, rng):
    data = rng.standard_normal((4, 3)).astype(np.float32)
    x = mx.array(data)
    y = getattr(D, op)(x)
    assert y is not x and y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(y), data)
    y[0] = 7.0  # a new handle: assigning into it leaves x alone
    np.testing.assert_array_equal(np.asarray(x), data)


def test_singleton_matches_mlx(mlx, rng):
    data = rng.standard_normal((3,)).astype(np.float32)
    for op in ("all_sum", "all_max", "all_min", "all_gather", "sum_scatter"):
        ours = getattr(D, op)(mx.array(data))
        theirs = getattr(mlx.distributed, op)(mlx.array(data))
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert D.all_sum(2.0).item() == mlx.distributed.all_sum(2.0).item()
    assert D.all_gather(mx.array(1.0)).shape == mlx.distributed.all_gather(mlx.array(1.0)).shape


@pytest.mark.parametrize("call, exc, text", [
    (lambda: D.init().split(0), RuntimeError, "Cannot split the distributed group further"),
    (lambda: D.send(mx.ones(2), 0), ValueError, "Cannot send to a singleton group"),
    (lambda: D.recv((2,), mx.float32, 0), ValueError, "Cannot recv from a singleton group"),
    (lambda: D.recv_like(mx.ones(2), 0), ValueError, "Cannot recv from a singleton group"),
    (lambda: D.init(backend="tcp"), ValueError, "'tcp' was provided"),
    (lambda: D.init(strict=True, backend="mpi"), RuntimeError, "single process"),
    (lambda: D.init(strict=True, backend="ring"), RuntimeError, "ring"),
    (lambda: D.init(backend="ring", all_gather_factory=lambda r, n: None), ValueError,
     "only supported with backend='jaccl'"),
    (lambda: D.init(backend="jaccl", all_gather_factory="f"), TypeError, "callable"),
    (lambda: D.all_sum(mx.ones(2), group=3), TypeError, "[all_sum] Expected a distributed"),
    (lambda: D.init().split(0.5), TypeError, "[split] color must be an integer"),
])
def test_errors_name_the_problem(call, exc, text):
    with pytest.raises(exc) as info:
        call()
    if text == "single process" and "MPI_THREAD_FUNNELED" in str(info.value):
        # an MPI that grants too low a thread level is refused before the world is counted
        # (some MPI builds do): the error names that problem, and it must be so
        MPI = sys.modules["mpi4py.MPI"]
        assert MPI.Query_thread() < MPI.THREAD_SERIALIZED, str(info.value)
        text = "streamlet needs MPI_THREAD_SERIALIZED or better"
    assert text in str(info.value)


def test_is_available_says_which_engines_are_installed():
    assert D.is_available("mpi") == (importlib.util.find_spec("mpi4py") is not None)
    assert D.is_available("ring") is False and D.is_available("jaccl") is False
    assert D.is_available("nope") is False
    assert D.is_available() == (D.is_available("mpi") or D.is_available("nccl"))


def test_mpi_is_not_started_without_a_launcher(monkeypatch):
    for var in mpi._SIZE_VARS + mpi._RANK_VARS:
        monkeypatch.delenv(var, raising=False)
    assert not mpi.launched()
    assert mpi.init(strict=False) is None
    monkeypatch.setenv("PMI_SIZE", "1")
    assert not mpi.launched()
    monkeypatch.setenv("PMI_SIZE", "4")
    assert mpi.launched()


def test_nccl_without_a_gpu_or_launcher(monkeypatch):
    monkeypatch.delenv("MLX_WORLD_SIZE", raising=False)
    assert nccl.init(strict=False) is None
    with pytest.raises(RuntimeError, match="nccl"):
        nccl.init(strict=True)


def test_docstring_examples():
    import streamlet.core.distributed as dist
    import streamlet.nn as nn
    from streamlet.nn.layers import distributed as layers
    finder = doctest.DocTestFinder()
    tests = []
    for module in (dist, group_mod, dist.ops, launch, layers):
        tests += [t for t in finder.find(module, globs={"mx": mx, "nn": nn, **vars(module)})
                  if t.examples]
    assert len(tests) >= 17
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0


# -- groups of several, pretended in one process ---------------------------------------
class FakeComm:
    """`size` pretend ranks in one process: each rank holds the same data, so all_sum is
    x * size; every call is logged with its start and end times."""

    device = "cpu"

    def __init__(self, size=2, rank=0, delay=0.0):
        self.size, self.rank, self.delay, self.log = size, rank, delay, []

    def check(self, op, npdtype):
        pass

    def _call(self, name, x, fn):
        t0 = time.perf_counter()
        time.sleep(self.delay)
        out = fn()
        self.log.append((name, getattr(x, "shape", None), t0, time.perf_counter(),
                         threading.current_thread().name))
        return out

    def all_reduce(self, xp, x, reduction):
        return self._call(reduction, x, lambda: x * self.size if reduction == "sum" else x)

    def all_gather(self, xp, x):
        return self._call("gather", x, lambda: xp.concatenate([x.reshape((-1,) + x.shape[1:])
                                                               ] * self.size))

    def sum_scatter(self, xp, x):
        k = x.shape[0] // self.size
        return self._call("scatter", x, lambda: x[self.rank * k:(self.rank + 1) * k]
                          * self.size)

    def send(self, xp, x, dst):
        return self._call("send", x, lambda: x)

    def recv(self, xp, shape, npdtype, src):
        return self._call("recv", None, lambda: xp.zeros(shape, npdtype))


def fake(**kw):
    comm = FakeComm(**kw)
    return D.Group(comm), comm


def test_collectives_run_in_build_order_across_streams():
    """The first-built collective waits for slow compute on its stream; the second, on
    another stream, is ready at once, and still runs after it."""
    g, comm = fake(delay=0.01)
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    v = mx.random.uniform(shape=(1 << 18,), key=mx.random.key(0))
    mx.eval(v)
    slow = v
    for _ in range(8):
        slow = mx.exp(mx.sin(slow, stream=s1), stream=s1)
    a = D.all_sum(slow, group=g, stream=s1)
    b = D.all_sum(v[:10], group=g, stream=s2)
    mx.eval(a, b)
    (n1, shape1, _, end1, _), (n2, shape2, start2, _, _) = comm.log
    assert (shape1, shape2) == ((1 << 18,), (10,))
    assert start2 >= end1
    np.testing.assert_allclose(np.asarray(b), 2 * np.asarray(v[:10]))


def test_evaluating_a_later_collective_runs_the_earlier_ones():
    g, comm = fake()
    a = D.all_sum(mx.ones(3), group=g)
    b = D.all_max(mx.ones(4), group=g)
    mx.eval(b)  # a is not asked for, but every rank issues it first, so must we
    assert [entry[:2] for entry in comm.log] == [("sum", (3,)), ("max", (4,))]
    assert a.tolist() == [2.0] * 3


def test_communication_from_a_worker_thread():
    g, comm = fake()
    s = mx.new_thread_unsafe_stream(mx.cpu)
    y = D.all_sum(mx.ones((1 << 17,)), group=g, stream=s)
    mx.async_eval(y)
    assert np.asarray(y)[0] == 2.0
    assert len(comm.log) == 1


def test_ops_record_their_stream():
    g, comm = fake()
    s = mx.new_stream(mx.cpu)
    y = D.all_gather(mx.ones((2, 3)), group=g, stream=s)
    assert y.shape == (4, 3)
    assert y._node.stream.stream == s
    z = D.sum_scatter(mx.ones((4, 3)), group=g)
    assert z.shape == (2, 3) and z._node.stream.stream == mx.default_stream(mx.cpu)
    with pytest.raises(ValueError, match="sum_scatter"):
        D.sum_scatter(mx.ones((3,)), group=g)
    with pytest.raises(ValueError, match="Invalid destination=2"):
        D.send(mx.ones(2), 2, group=g)
    assert D.recv((2, 2), mx.int16, 1, group=g).tolist() == [[0, 0], [0, 0]]


def test_order_input_from_another_device_is_a_token():
    """What follows communication on another device waits for a token there, no copy."""
    prev = mx.multiply(mx.ones((1000,), stream=mx.cpu), 2, stream=mx.cpu)  # whatever the default
    state = SimpleNamespace(stream=SimpleNamespace(device=mx.Device(mx.gpu)))
    tok = order._on_device(prev, state)
    assert tok.shape == (0,) and tok is not prev
    assert order._on_device(prev, prev._node.stream) is prev


def test_gradient_rules(rng):
    g, _ = fake(size=3, rank=1)
    x = mx.array(rng.standard_normal((2, 4)).astype(np.float32))
    grad = mx.grad(lambda v: (D.all_sum(v, group=g) ** 2).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), 2 * 3 * np.asarray(x), rtol=1e-6)
    w = mx.arange(6 * 4).reshape(6, 4).astype(mx.float32)
    grad = mx.grad(lambda v: (D.all_gather(v, group=g) * w).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(w)[2:4])
    grad = mx.grad(lambda v: (D.sum_scatter(mx.concatenate([v] * 3), group=g) * x).sum())(x)
    # its adjoint: every rank's cotangent gathered back (here 3 identical blocks of x)
    np.testing.assert_allclose(np.asarray(grad), 3 * np.asarray(x), rtol=1e-6)
    grad = mx.grad(lambda v: (sum_gradients(v, g) * x).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), 3 * np.asarray(x), rtol=1e-6)
    # gather_shards: the cotangents' mean over the group (here 3 equal ones), this block
    grad = mx.grad(lambda v: (gather_shards(v, g) * w).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(w)[2:4])


def test_jvp_and_vmap_rules(rng):
    g, _ = fake(size=2)
    x = mx.array(rng.standard_normal((3, 2)).astype(np.float32))
    t = mx.ones((3, 2))
    _, (tangent,) = mx.jvp(lambda v: D.all_sum(v, group=g), [x], [t])
    assert tangent.tolist() == [[2.0, 2.0]] * 3
    _, (tangent,) = mx.jvp(lambda v: D.all_gather(v, group=g), [x], [t])
    assert tangent.shape == (6, 2)
    got = mx.vmap(lambda v: D.all_gather(v, group=g), in_axes=1)(x)
    want = np.stack([np.concatenate([np.asarray(x)[:, j]] * 2) for j in range(2)])
    np.testing.assert_array_equal(np.asarray(got), want)
    got = mx.vmap(lambda v: D.all_sum(v, group=g))(x)
    np.testing.assert_allclose(np.asarray(got), 2 * np.asarray(x))


# -- the launcher's command lines ------------------------------------------------------
def _args(*argv):
    return launch.parser().parse_args(list(argv))


def test_launch_commands_for_both_mpis(tmp_path):
    args = _args("-n", "3", "train.py", "--lr", "1", "-n", "2")
    assert args.program == ["train.py", "--lr", "1", "-n", "2"]
    cmd = launch.command(args, args.program, "mpiexec", "hydra")
    assert cmd == ["mpiexec", "-n", "3", sys.executable, "train.py", "--lr", "1", "-n", "2"]
    hosts = tmp_path / "hosts.json"
    hosts.write_text('{"hosts": [{"ssh": "a"}, {"ssh": "b"}], "envs": ["K=V"]}')
    args = _args("--hostfile", str(hosts), "-n", "2", "--cwd", "/w", "./run")
    assert launch.command(args, args.program, "mpiexec", "hydra") == [
        "mpiexec", "-n", "4", "-hosts", "a:2,b:2", "-genv", "K", "V", "-wdir", "/w", "./run"]
    as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert launch.command(args, args.program, "mpirun", "openmpi") == [
        "mpirun", "-n", "4", *as_root, "--oversubscribe", "--host", "a:2,b:2", "-x", "K=V",
        "--wdir", "/w", "./run"]
    args = _args("--backend", "nccl", "-n", "2", "x.py")
    assert launch.command(args, args.program, "m", "hydra")[3:6] == [
        "-genv", "MLX_WORLD_SIZE", "2"]
    hosts.write_text("a slots=3\nb\n")
    args = _args("--hostfile", str(hosts), "x.py")
    assert launch.command(args, args.program, "m", "hydra")[:5] == [
        "m", "-n", "4", "-hosts", "a:3,b:1"]


def test_launch_needs_a_program():
    with pytest.raises(SystemExit):
        launch.main(["-n", "2"])


# -- four processes through MPI ---------------------------------------------------------
def _mpi_ready():
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'streamlet[distributed]')"
    try:
        launch.find_mpiexec()
    except SystemExit:
        return "no mpiexec (pip install 'streamlet[distributed]')"
    return None


@pytest.fixture(scope="module")
def four_processes():
    why = _mpi_ready()
    if why:
        pytest.skip(why)
    env = {k: v for k, v in os.environ.items()
           if k not in mpi._SIZE_VARS + mpi._RANK_VARS and not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-m", "streamlet.launch", "-n", "4",
                           str(HERE / "distributed_worker.py")], capture_output=True,
                          text=True, timeout=240, env=env)
    return proc


CHECKS = ["reductions", "gather_and_scatter", "send_recv", "split_groups",
          "streams_keep_program_order", "communication_stream_beside_compute",
          "recycled_outputs_stay_apart", "gradients", "sharded_linear_layers",
          "fully_sharded_module"]


@pytest.mark.parametrize("name", CHECKS)
def test_four_processes(four_processes, name):
    out = four_processes.stdout
    failures = [line for line in out.splitlines() if line.startswith(f"FAIL {name}:")]
    assert not failures, failures[0].replace(" | ", "\n")
    assert out.count(f"OK {name}\n") == 4, out[-3000:] + four_processes.stderr[-3000:]


def test_four_processes_exit_cleanly(four_processes):
    assert four_processes.returncode == 0, four_processes.stderr[-3000:]


def test_data_parallel_example_matches_one_process():
    """examples/data_parallel.py: 4 processes on shards give the single process's losses."""
    why = _mpi_ready()
    if why:
        pytest.skip(why)
    script = [str(HERE.parent / "examples" / "data_parallel.py"), "--steps", "6", "--width",
              "32", "--device", "cpu"]
    env = {k: v for k, v in os.environ.items() if k not in mpi._SIZE_VARS + mpi._RANK_VARS}

    def curve(cmd):
        out = subprocess.run(cmd + script, capture_output=True, text=True, timeout=240,
                             env=env, check=True).stdout
        return [float(line.split()[-1]) for line in out.splitlines() if line.startswith("step")]
    one = curve([sys.executable])
    four = curve([sys.executable, "-m", "streamlet.launch", "-n", "4"])
    assert len(one) == len(four) == 6
    np.testing.assert_allclose(four, one, rtol=1e-5)
    assert one[-1] < one[0]


# -- NCCL on a GPU: a group of one (NCCL allows one rank per GPU) ------------------------
def _nccl_comm(monkeypatch):
    if not (mx.is_available(mx.gpu) and nccl.is_available()):
        pytest.skip("no CUDA GPU with CuPy's NCCL here")
    for var in mpi._SIZE_VARS + mpi._RANK_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MLX_RANK", "0")
    monkeypatch.setenv("MLX_WORLD_SIZE", "1")
    return nccl.init(strict=True)


NCCL_DTYPES = [np.float32, np.float16, "bfloat16", np.float64, np.int8, np.uint8, np.int16,
               np.uint16, np.int32, np.int64, np.bool_]


@pytest.mark.gpu
@pytest.mark.parametrize("npdtype", NCCL_DTYPES, ids=str)
def test_nccl_kernels_on_a_group_of_one(monkeypatch, npdtype, rng):
    """Each op's NCCL call, built past the group-of-one shortcut, on a GPU stream."""
    from streamlet.core.distributed.ops import _like
    comm = _nccl_comm(monkeypatch)
    assert (comm.rank, comm.size, comm.device) == (0, 1, "gpu")
    s = mx.new_stream(mx.gpu)
    name = npdtype if isinstance(npdtype, str) else np.dtype(npdtype).name
    x = mx.array((rng.standard_normal((4, 6)) * 10).astype(np.float32))
    if name == "float64":  # MLX has no float64 on the GPU: refused when the op is built
        with pytest.raises(ValueError, match="float64"):
            _like("all_sum", x.astype(mx.float64, stream=mx.cpu), comm, stream=s)
        return
    x = x.astype(getattr(mx, "bool_" if name == "bool" else name))
    want = x.__array__()  # (np.asarray refuses bfloat16's buffer, as in MLX)
    for op in ("all_sum", "all_max", "all_min", "all_gather", "sum_scatter"):
        y = _like(op, x, comm, stream=s)
        assert y._node.stream.stream == s
        got = y.__array__()
        assert got.dtype == want.dtype and got.shape == want.shape, op
        np.testing.assert_array_equal(got, want, err_msg=op)


@pytest.mark.gpu
def test_nccl_complex_sum_and_errors(monkeypatch):
    from streamlet.core.distributed.ops import _like
    comm = _nccl_comm(monkeypatch)
    x = mx.array(np.array([1 + 2j, 3 - 1j], np.complex64))
    assert np.asarray(_like("all_sum", x, comm, stream=mx.gpu)).tolist() == [1 + 2j, 3 - 1j]
    with pytest.raises(TypeError, match="no max of complex64"):
        _like("all_max", x, comm, stream=mx.gpu)
    g = D.Group(comm)
    assert g.split(0).size() == 1
    assert D.all_sum(mx.ones(3), group=g).tolist() == [1.0] * 3  # a group of one: x itself


@pytest.mark.gpu
def test_nccl_after_cpu_communication_waits_through_a_token(monkeypatch):
    """A CPU collective then a GPU one: the GPU op's order input is a token on the CPU
    stream, and both give the right values."""
    from streamlet.core.distributed.ops import _like
    comm = _nccl_comm(monkeypatch)
    g, fake_comm = fake()
    a = D.all_sum(mx.ones((1 << 16,)), group=g)  # on the CPU
    b = _like("all_sum", mx.full((1 << 16,), 3.0), comm, stream=mx.gpu)
    token = b._node.inputs[-1]
    assert token.shape == (0,) and token.inputs[0] is a._node
    assert np.asarray(b)[0] == 3.0 and np.asarray(a)[0] == 2.0
    assert len(fake_comm.log) == 1
