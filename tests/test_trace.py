"""The timeline trace (mx.trace): what it records, its Chrome/Perfetto JSON, its PNG, NVTX.

Perfetto's own reader (`perfetto.trace_processor`) downloads its trace_processor binary
when it starts, which this project's machines cannot do, so `check_chrome_json` checks
what Perfetto's legacy-JSON importer relies on: complete events ("X") with numeric
microsecond `ts`/`dur`, one thread track per stream named by metadata ("M"), slices on a
track that nest or are disjoint, and flow pairs ("s" inside the producer's slice, "f"
bound to the consumer's slice with "bp": "e") sharing one id.
"""
import json
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core import auto_graph, timeline
from streamlet.core.timeline import TIMELINE

from conftest import requires_gpu

BIG = 1 << 20  # elements: large enough that two streams run on two threads


def ops_on(t, *streams):
    return [op for op in t.ops if op.stream in streams]


def evaluated(*arrays):
    mx.eval(*arrays)
    return arrays if len(arrays) > 1 else arrays[0]


# -- what an op record holds ---------------------------------------------------------------------

def test_ops_have_their_stream_device_thread_times_shapes_and_bytes():
    s = mx.new_stream(mx.cpu)
    a = evaluated(mx.ones((2, 3), stream=s))
    bm = evaluated(mx.ones((3, 4), dtype=mx.float16, stream=s))
    with mx.trace() as t:
        c = mx.matmul(a, mx.astype(bm, mx.float32, stream=s), stream=s)
        d = mx.sum(c, axis=0, stream=s)
        e = mx.astype(d, mx.int16, stream=s)
        mx.eval(e)
    ops = ops_on(t, s)
    assert [op.name for op in ops] == ["astype", "matmul", "sum", "astype"]
    me = threading.get_ident()
    for op in ops:
        assert op.stream == s and op.device == mx.Device(mx.cpu)
        assert op.thread == me and op.thread_name == threading.current_thread().name
        assert t.start_time <= op.start < op.end <= t.end_time
        assert op.error is None and op.waits == ()
    assert [op.seq for op in ops] == sorted(op.seq for op in ops)
    assert all(ops[i].end <= ops[i + 1].start for i in range(len(ops) - 1))
    assert ops[1].input_shapes == ((2, 3), (3, 4)) and ops[1].shape == (2, 4)
    assert ops[2].input_shapes == ((2, 4),) and ops[2].shape == (4,)
    assert [op.nbytes for op in ops] == [np.array(bm).astype(np.float32).nbytes,
                                        np.array(c).nbytes, np.array(d).nbytes,
                                        np.array(e).nbytes]
    assert [op.dtype for op in ops] == [mx.float32, mx.float32, mx.float32, mx.int16]
    assert np.array(e).nbytes == 8


def test_bytes_of_a_multi_output_op_count_every_output():
    s = mx.new_stream(mx.cpu)
    x = evaluated(mx.arange(10, dtype=mx.int32, stream=s))
    with mx.trace() as t:
        q, r = mx.divmod(x, 3, stream=s)
        mx.eval(q, r)
    by_name = {}
    for op in ops_on(t, s):
        by_name.setdefault(op.name, []).append(op)
    assert by_name["divmod"][0].nbytes == np.array(q).nbytes + np.array(r).nbytes == 80
    assert [op.nbytes for op in by_name["select"]] == [40, 40]


def test_a_failed_op_is_recorded_with_its_error_and_no_bytes(on_cpu):
    s = mx.new_stream(mx.cpu)
    with mx.trace() as t:
        bad = mx.linalg.inv(mx.zeros((2, 2), stream=s), stream=s)
        after = mx.add(bad, 1, stream=s)
        with pytest.raises(RuntimeError) as info:
            mx.eval(after)
    ops = {op.name: op for op in ops_on(t, s)}
    assert list(ops) == ["full", "linalg.inv", "add"]
    inv = ops["linalg.inv"]
    assert inv.error is not None and "singular" in inv.error and inv.error in str(info.value)
    assert ops["add"].error == inv.error  # poisoned by its input, recorded the same
    assert inv.nbytes == ops["add"].nbytes == 0
    assert ops["full"].error is None and ops["full"].nbytes == 16


# -- waits between streams -----------------------------------------------------------------------

def test_a_dependency_between_two_streams_is_a_wait_on_the_producers_event():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    x = evaluated(mx.ones((8,), stream=s1))
    with mx.trace() as t:
        y = mx.exp(x, stream=s1)
        z = mx.add(y, x, stream=s2)  # y from s1: a wait; x was made before the trace
        mx.eval(z)
    (exp,) = ops_on(t, s1)
    (add,) = ops_on(t, s2)
    assert exp.name == "exp" and add.name == "add"
    assert len(add.waits) == 2 and t.waits == list(add.waits)
    w = next(w for w in add.waits if w.event == (s1, exp.seq))
    assert w.stream == s2 and w.producer == s1 and w.op == "add" and w.seq == add.seq
    assert add.start >= exp.end
    old = next(w for w in add.waits if w.event != (s1, exp.seq))
    assert old.producer == s1 and old.event[1] < exp.seq  # x's number on s1, before y's
    assert exp.waits == ()


def test_a_stream_held_up_by_another_records_how_long_it_waited():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    x = evaluated(mx.random.uniform(shape=(BIG,), stream=s1))
    with mx.trace() as t:
        y = x
        for _ in range(8):
            y = mx.sin(y, stream=s1)
        z = mx.add(y, 1, stream=s2)  # s2 needs all of s1's chain first
        for _ in range(9):  # more work on s2: the calling thread takes it and waits there
            z = mx.multiply(z, 0.5, stream=s2)
        mx.eval(z)
    first, *rest = ops_on(t, s2)
    producer = ops_on(t, s1)[-1]
    (w,) = first.waits
    assert w.event == (s1, producer.seq)
    assert w.start is not None and w.start <= producer.end <= w.end <= first.start
    assert w.blocked == w.end - w.start > 0
    assert all(op.waits == () for op in rest)
    # s1 ran on a worker while the calling thread ran s2
    assert {op.thread for op in ops_on(t, s1)} != {threading.get_ident()}
    assert {op.thread_name for op in ops_on(t, s1)} == {"streamlet-worker"}
    assert {op.thread for op in ops_on(t, s2)} == {threading.get_ident()}
    want = np.array(x)
    for _ in range(8):
        want = np.sin(want)
    np.testing.assert_allclose(np.array(z), (want + 1) * 0.5 ** 9, rtol=1e-5)


def test_async_work_on_workers_is_recorded_once_synchronized():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    x = evaluated(mx.random.uniform(shape=(BIG,), stream=s1))
    with mx.trace() as t:
        y = mx.exp(mx.sin(x, stream=s1), stream=s1)
        z = mx.cos(mx.add(y, x, stream=s2), stream=s2)
        mx.async_eval(z)
        mx.synchronize(s2)
    assert [op.name for op in ops_on(t, s1)] == ["sin", "exp"]
    assert [op.name for op in ops_on(t, s2)] == ["add", "cos"]
    add = ops_on(t, s2)[0]
    w = next(w for w in add.waits if w.event[1] == ops_on(t, s1)[-1].seq)
    if w.start is not None:  # s2 parked on s1's event (which fires just after exp's end)
        assert w.start <= w.end and ops_on(t, s1)[-1].end <= w.end <= add.start
    assert add.start >= ops_on(t, s1)[-1].end


# -- on and off, nesting, threads ----------------------------------------------------------------

def test_nothing_is_recorded_when_no_trace_is_on(monkeypatch):
    s = mx.new_stream(mx.cpu)
    assert TIMELINE.on is False

    calls = []  # (a hook raising here would kill a worker thread: a hang, not a failure)
    for hook in ("begin", "end", "wait_begin", "wait_end"):
        monkeypatch.setattr(type(TIMELINE), hook, lambda *a, hook=hook: calls.append(hook))
    s2 = mx.new_stream(mx.cpu)
    y = mx.add(mx.exp(mx.ones((BIG,), stream=s), stream=s), 1, stream=s2)
    mx.eval(y, mx.sin(mx.ones((BIG,), stream=s2), stream=s2))  # workers and a wait
    assert np.array(y)[0] == pytest.approx(np.e + 1)
    monkeypatch.undo()
    assert calls == []  # the recorder was never called with the trace off
    with mx.trace() as t:
        pass
    assert ops_on(t, s, s2) == [] and t.waits == []
    after = mx.exp(mx.ones((4,), stream=s), stream=s)
    mx.eval(after)  # after the trace stopped: not in it
    assert ops_on(t, s) == []
    assert TIMELINE.on is False and all(not b.records for b in TIMELINE.buffers)


def test_nested_traces_each_hold_what_ran_while_they_were_on():
    s = mx.new_stream(mx.cpu)
    x = evaluated(mx.ones((4,), stream=s))
    with mx.trace() as outer:
        mx.eval(mx.exp(x, stream=s))
        with mx.trace() as inner:
            mx.eval(mx.sin(x, stream=s))
        assert TIMELINE.on is True  # the outer one still records
        mx.eval(mx.cos(x, stream=s))
    assert TIMELINE.on is False
    assert [op.name for op in ops_on(outer, s)] == ["exp", "sin", "cos"]
    assert [op.name for op in ops_on(inner, s)] == ["sin"]
    assert ops_on(inner, s)[0] == ops_on(outer, s)[1]


def test_start_and_stop_functions():
    s = mx.new_stream(mx.cpu)
    t = mx.start_trace()
    assert t.recording and repr(t) == "Trace(recording)"
    with pytest.raises(RuntimeError):
        t.ops  # not stopped yet
    mx.eval(mx.exp(mx.ones((3,), stream=s), stream=s))
    assert mx.stop_trace() is t and not t.recording
    assert [op.name for op in ops_on(t, s)] == ["full", "exp"]
    with pytest.raises(RuntimeError, match="No trace is recording"):
        mx.stop_trace()
    with pytest.raises(RuntimeError):
        t.start()  # a trace records once
    with pytest.raises(RuntimeError):
        t.stop()


def test_many_threads_evaluating_at_once_lose_nothing(monkeypatch):
    # each op traced on its own: its rounds repeat one graph, which a program would run
    # whole where STREAMLET_AUTO_GRAPHS puts them on CPU streams too
    monkeypatch.setattr(auto_graph, "ON", False)
    n_threads, rounds, chain = 4, 40, 5
    barrier = threading.Barrier(n_threads + 1)
    owners, errors = {}, []
    shared = mx.new_thread_unsafe_stream(mx.cpu)  # every thread's crossings go through it

    def work():
        try:
            s = mx.new_stream(mx.cpu)
            owners[s] = threading.get_ident()
            barrier.wait(timeout=30)
            for k in range(rounds):
                y = mx.full((16,), float(k), stream=s)
                for _ in range(chain):
                    y = mx.add(y, 1, stream=s)
                if k % 8 == 0:  # now and then across streams
                    y = mx.multiply(mx.exp(y, stream=shared), 1, stream=s)
                mx.eval(y)
                want = float(k + chain) if k % 8 else float(np.exp(np.float32(k + chain)))
                assert np.array(y)[0] == pytest.approx(want, rel=1e-6)
            barrier.wait(timeout=30)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for th in threads:
        th.start()
    with mx.trace() as t:
        barrier.wait(timeout=30)  # every thread starts once the trace is on
        barrier.wait(timeout=60)  # and has finished before it stops
    for th in threads:
        th.join(timeout=60)
    assert not errors and not any(th.is_alive() for th in threads)
    crossings = len(range(0, rounds, 8))
    for s, ident in owners.items():
        ops = ops_on(t, s)
        assert len(ops) == rounds * (chain + 1) + crossings
        assert {op.thread for op in ops} == {ident}
        assert [op.seq for op in ops] == sorted(op.seq for op in ops)
        assert all(a.end <= b.start for a, b in zip(ops, ops[1:]))
        waits = [w for op in ops for w in op.waits]
        assert len(waits) == crossings and all(w.producer != s for w in waits)
    exps = ops_on(t, shared)
    assert [op.name for op in exps] == ["exp"] * (n_threads * crossings)
    assert len({op.seq for op in exps}) == len(exps)  # its timeline numbers none twice
    assert all(op.thread in owners.values() or op.thread_name == "streamlet-worker"
               for op in exps)


# -- Chrome trace / Perfetto JSON ----------------------------------------------------------------

def check_chrome_json(doc, trace):
    """The structure Perfetto's (and chrome://tracing's) JSON importer reads; see the top."""
    doc = json.loads(json.dumps(doc))  # plain JSON, nothing Python-only
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    tracks, procs, slices, flows = {}, {}, {}, {}
    for e in events:
        assert e["ph"] in ("M", "X", "s", "f"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["pid"] > 0
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                tracks[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e["name"] == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["name"], str) and e["dur"] >= 0
            slices.setdefault((e["pid"], e["tid"]), []).append(e)
        else:
            assert isinstance(e["id"], int)
            flows.setdefault(e["id"], {})[e["ph"]] = e
    # a track per stream, named by it, in a process per device
    assert set(slices) <= set(tracks)
    op_tracks = {tracks[k] for k, es in slices.items() if any(e["cat"] == "op" for e in es)}
    assert op_tracks == {repr(op.stream) for op in trace.ops}
    for (pid, _), name in tracks.items():
        assert procs[pid] == repr(next(s for s in mx.get_streams() if repr(s) == name).device)
    # slices of one track nest or are disjoint (sorted by start, each ends before the next)
    eps = 1e-3
    for es in slices.values():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        for a, b in zip(es, es[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + eps or \
                b["ts"] + b["dur"] <= a["ts"] + a["dur"] + eps, (a, b)
    # op slices: one per op, with its shapes and bytes
    op_slices = [e for es in slices.values() for e in es if e["cat"] == "op"]
    assert len(op_slices) == len(trace.ops)
    assert sorted(e["args"]["bytes"] for e in op_slices) == sorted(op.nbytes for op in trace.ops)
    # flows: pairs, the start inside the producer's slice, the end at the consumer's start
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, fid
        s, f = pair["s"], pair["f"]
        assert f["bp"] == "e" and s["name"] == f["name"]
        assert any(x["ts"] - eps <= s["ts"] <= x["ts"] + x["dur"] + eps
                   for x in slices[(s["pid"], s["tid"])] if x["cat"] == "op")
        assert any(abs(x["ts"] - f["ts"]) <= eps
                   for x in slices[(f["pid"], f["tid"])] if x["cat"] == "op")
        assert (s["pid"], s["tid"]) != (f["pid"], f["tid"])  # across streams
    return events, flows


def test_chrome_json_has_a_track_per_stream_and_flows_for_waits(tmp_path):
    s1, s2, s3 = (mx.new_stream(mx.cpu) for _ in range(3))
    x = evaluated(mx.random.uniform(shape=(BIG,), stream=s1))
    with mx.trace(path=str(tmp_path / "t.json")) as t:
        a = mx.sin(x, stream=s1)
        b = mx.cos(x, stream=s2)
        c = mx.add(a, b, stream=s3)  # two waits, two flows into s3
        d = mx.multiply(c, 2, stream=s1)  # and one back to s1
        mx.eval(d)
    doc = json.loads((tmp_path / "t.json").read_text())  # written on exit, as asked
    assert doc == json.loads(json.dumps(t.to_chrome()))
    events, flows = check_chrome_json(doc, t)
    assert len(flows) == 3
    by_track = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "thread_name":
            by_track[e["args"]["name"]] = (e["pid"], e["tid"])
    t1, t2, t3 = (by_track[repr(st)] for st in (s1, s2, s3))
    pairs = sorted(((p["s"]["pid"], p["s"]["tid"]), (p["f"]["pid"], p["f"]["tid"]))
                   for p in flows.values())
    assert pairs == sorted([(t1, t3), (t2, t3), (t3, t1)])
    (sin,), (cos,) = ops_on(t, s1)[:1], ops_on(t, s2)
    (add_op,) = ops_on(t, s3)
    assert {p["s"]["name"] for p in flows.values()} == \
        {f"{s1!r}#{sin.seq}", f"{s2!r}#{cos.seq}", f"{s3!r}#{add_op.seq}"}
    x_ops = [e for e in events if e["ph"] == "X" and e["cat"] == "op"]
    add = next(e for e in x_ops if e["name"] == "add")
    assert (add["pid"], add["tid"]) == by_track[repr(s3)]
    assert add["args"]["inputs"] == [[BIG], [BIG]] and add["args"]["bytes"] == 4 * BIG
    assert add["args"]["shape"] == [BIG] and add["args"]["dtype"] == "mlx.core.float32"


def test_chrome_json_of_a_traced_demo_workload_is_well_formed():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    a, b = evaluated(mx.ones((BIG,), stream=s1), mx.ones((BIG,), stream=s2))
    with mx.trace() as t:
        for _ in range(3):
            a = mx.exp(mx.sin(a, stream=s1), stream=s1)
            b = mx.exp(mx.sin(b, stream=s2), stream=s2)
        mx.eval(mx.sum(a + b, stream=s2))
    check_chrome_json(t.to_chrome(), t)


# -- the PNG ------------------------------------------------------------------------------------

def _small_trace():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    x = evaluated(mx.ones((64,), stream=s1))
    with mx.trace() as t:
        mx.eval(mx.add(mx.exp(x, stream=s1), 1, stream=s2))
    return t


def test_png_timeline(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread
    t = _small_trace()
    path = t.plot(tmp_path / "t.png", title="two streams")
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(path)
    assert img.shape[0] > 100 and img.shape[1] > 500
    assert img[..., :3].std() > 0.05  # something is drawn, not a blank canvas


def test_png_without_matplotlib_says_what_to_install(monkeypatch, tmp_path):
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends",
                "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    t = _small_trace()
    with pytest.raises(ImportError, match=r"streamlet\[trace\]"):
        t.plot(tmp_path / "t.png")
    assert not (tmp_path / "t.png").exists()


# -- NVTX ---------------------------------------------------------------------------------------

class FakeNvtx:
    def __init__(self):
        self.calls = []

    def RangePush(self, message, id_color=-1):  # noqa: N802 - CuPy's names
        self.calls.append(("push", message, threading.get_ident()))

    def RangePop(self):  # noqa: N802
        self.calls.append(("pop", threading.get_ident()))


def test_ops_on_gpu_streams_are_nvtx_ranges_named_as_in_the_trace(monkeypatch):
    fake = FakeNvtx()
    monkeypatch.setattr(TIMELINE, "nvtx", fake)
    s = mx.new_stream(mx.cpu)
    cpu_only = mx.new_stream(mx.cpu)
    x = evaluated(mx.ones((8,), stream=s))
    monkeypatch.setattr(s._state, "gpu", True)  # the scheduler's view: a GPU stream
    mx.eval(mx.exp(x, stream=s))
    assert fake.calls == []  # no trace, no ranges
    with mx.trace() as t:
        y = mx.multiply(mx.sin(x, stream=s), 2, stream=s)
        mx.eval(y, mx.cos(x, stream=cpu_only))
    names = [op.name for op in ops_on(t, s)]
    assert names == ["sin", "multiply"]
    me = threading.get_ident()
    assert fake.calls == [("push", "sin", me), ("pop", me), ("push", "multiply", me), ("pop", me)]


def test_nvtx_is_import_safe_without_cupy(monkeypatch):
    # the submodules too: where CuPy is loaded already (a GPU run) `from cupy.cuda import
    # nvtx` takes cupy.cuda from sys.modules without importing cupy
    for name in ("cupy", "cupy.cuda", "cupy.cuda.nvtx"):
        monkeypatch.setitem(sys.modules, name, None)
    assert timeline._load_nvtx() is False
    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    cuda.nvtx = types.SimpleNamespace(available=False)
    cupy.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    assert timeline._load_nvtx() is False
    cuda.nvtx = FakeNvtx()
    assert timeline._load_nvtx() is cuda.nvtx


@requires_gpu
def test_gpu_stream_ops_are_traced_with_their_device():
    g = mx.new_stream(mx.gpu)
    c = mx.new_stream(mx.cpu)
    x = evaluated(mx.ones((1024,), stream=g))
    with mx.trace() as t:
        y = mx.exp(x, stream=g)
        z = mx.add(y, 1, stream=c)  # a GPU result read on the CPU: a wait
        mx.eval(z)
    (exp,) = ops_on(t, g)
    assert exp.device == mx.Device(mx.gpu) and exp.nbytes == 4096
    (add,) = ops_on(t, c)
    assert add.waits[0].event == (g, exp.seq)
    check_chrome_json(t.to_chrome(), t)


# -- mx.trace is still MLX's diagonal sum --------------------------------------------------------

def test_trace_with_an_array_is_the_diagonal_sum(mlx):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert mx.trace(mx.array(a)).item() == mlx.trace(mlx.array(a)).item() == 15.0
    assert mx.trace(mx.array(a), 1).item() == mlx.trace(mlx.array(a), 1).item()
    assert mx.trace(mx.array(a), offset=-1, axis1=1, axis2=0).item() == \
        mlx.trace(mlx.array(a), offset=-1, axis1=1, axis2=0).item()
    assert mx.trace(mx.array(a), dtype=mx.int32).dtype == mx.int32
    assert isinstance(mx.trace(), mx.Trace) and not mx.trace().recording
    with pytest.raises(TypeError):
        mx.trace(offset=1)  # the diagonal sum's array is missing, as in MLX


# -- the demo -----------------------------------------------------------------------------------

def test_demo_writes_the_trace_and_the_png(tmp_path):
    out = subprocess.run([sys.executable, "-m", "streamlet", "--size", "65536", "--steps", "2",
                          "--trace", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"Chrome/Perfetto JSON: {tmp_path / 'trace.json'}" in out.stdout
    doc = json.loads((tmp_path / "trace.json").read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert len(names) >= 2 and any(e["ph"] == "s" for e in doc["traceEvents"])
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "op"]
    assert {"sin", "exp", "multiply", "add", "sum"} <= {e["name"] for e in ops}
    pytest.importorskip("matplotlib")
    assert f"timeline PNG: {tmp_path / 'trace.png'}" in out.stdout
    assert (tmp_path / "trace.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_without_matplotlib_skips_the_png(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; "
            "from streamlet.__main__ import main; "
            f"main(['--size', '4096', '--steps', '1', '--trace', {str(tmp_path)!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "timeline PNG skipped" in out.stdout
    assert (tmp_path / "trace.json").exists() and not (tmp_path / "trace.png").exists()
