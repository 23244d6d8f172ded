"""The timeline trace: what ran where and when, and what waited for what.

    with mx.trace() as t:          # or t = mx.start_trace() ... mx.stop_trace()
        mx.eval(work)
    t.save("trace.json")           # Chrome trace / Perfetto JSON: one track per stream
    t.plot("trace.png")            # matplotlib (the `trace` extra): a row per stream

While a trace is on, the scheduler records, for each op that runs, its stream
(and so its device), the thread that ran it, its start and end (host clock,
`time.perf_counter_ns`), its input and output shapes, dtype and output bytes;
and, for each input made on another stream, a wait: the event waited on (the
producer stream's timeline reaching the producer's number, `TraceWait.event`)
and how long the consumer was held up for it (zero when the event had already
fired).  On GPU streams each op is also an NVTX range named as in the trace
(through CuPy's `cupy.cuda.nvtx`), so Nsight Systems shows the same names.

Off, the cost is one attribute test per op (`TIMELINE.on`) and one more per
cross-stream wait.  Traces nest: each one holds the ops that ran between its
start and its stop, from every thread.  Stopping does not wait for work still
in flight (`async_eval`): synchronize first to have it in the trace.

GPU times are the host's: when the op was issued (elementwise ops are deferred
and fused, their kernels launch at the end of the eval), not when the kernel ran
on the device; Nsight shows the device side under the same NVTX names.
"""
from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass

_now = time.perf_counter_ns


class _Timeline:
    """The recorder the scheduler calls into; `on` is the one test on the hot path."""

    __slots__ = ("on", "sessions", "buffers", "waiting", "waited", "lock", "local", "nvtx")

    def __init__(self):
        self.on = False  # some trace is recording
        self.sessions = []  # the Traces recording now, in start order
        self.buffers = []  # one _Buffer per thread that recorded while a trace was on
        self.waiting = {}  # id(node) -> when it began to wait (kept while its batch parks)
        self.waited = {}  # id(node) -> (start, end) of its wait, for its op record
        self.lock = threading.Lock()  # guards sessions, buffers and on
        self.local = threading.local()  # .buf: this thread's _Buffer
        self.nvtx = None  # cupy.cuda.nvtx once a GPU op was traced (False: not available)

    # -- the scheduler's hooks (never raise into it) -----------------------------------------
    def begin(self, node, state):
        """An op is about to run: its start time (and an NVTX range on a GPU stream)."""
        if state.gpu:
            nvtx = self.nvtx
            if nvtx is None:
                nvtx = self.nvtx = _load_nvtx()
            if nvtx:
                nvtx.RangePush(node.prim.name, state.stream.index % 10)
        return _now()

    def end(self, node, state, start):
        """The op has run (its inputs and params are still on the node): record it."""
        end = _now()
        if state.gpu and self.nvtx:
            self.nvtx.RangePop()
        shapes = []
        waits = None
        for inp in node.inputs:
            shapes.append(inp.shape)
            pst = inp.stream
            if pst is not state and pst is not None and inp.seq > 0:
                if waits is None:
                    waits = []
                waits.append((pst, inp.seq))
        blocked = self.waited.pop(id(node), None) if waits else None
        prim = node.prim
        outs = node.params["outs"] if prim.multi else None
        try:
            buf = self.local.buf
        except AttributeError:
            buf = self._new_buffer()
        buf.records.append((prim.name, state, node.seq, start, end, tuple(shapes), node.shape,
                            node.dtype, outs, waits, blocked, node.error))

    def wait_begin(self, node):
        """A node starts waiting for producers on other streams (or resumes after parking)."""
        return self.waiting.setdefault(id(node), _now())

    def wait_end(self, node, start):
        """The node's producers have all finished: keep the wait for the node's op record."""
        self.waited[id(node)] = (self.waiting.pop(id(node), start), _now())

    # -- sessions ----------------------------------------------------------------------------
    def _new_buffer(self):
        buf = self.local.buf = _Buffer(threading.current_thread())
        with self.lock:
            self.buffers.append(buf)
        return buf

    def start(self, trace):
        with self.lock:
            trace._marks = {id(b): len(b.records) for b in self.buffers}
            trace._t0 = _now()
            self.sessions.append(trace)
            self.on = True

    def stop(self, trace):
        with self.lock:
            trace._t1 = _now()
            self.sessions.remove(trace)
            raw = []
            for b in self.buffers:
                records = b.records[trace._marks.get(id(b), 0):]
                if records:
                    raw.append((b.ident, b.name, records))
            if not self.sessions:
                self.on = False
                # a thread still in an op may append after this; a later trace's marks skip it
                for b in self.buffers:
                    b.records.clear()
                self.buffers = [b for b in self.buffers if b.thread.is_alive()]
                self.waiting.clear()
                self.waited.clear()
        return raw


class _Buffer:
    """One thread's records (only that thread appends)."""

    __slots__ = ("thread", "ident", "name", "records")

    def __init__(self, thread):
        self.thread, self.ident, self.name = thread, thread.ident, thread.name
        self.records = []


def _load_nvtx():
    """CuPy's NVTX bindings, or False where CuPy (or its NVTX library) is missing."""
    try:
        from cupy.cuda import nvtx
    except Exception:  # CuPy absent, or present without a usable CUDA: no ranges, no error
        return False
    return nvtx if getattr(nvtx, "available", True) else False


TIMELINE = _Timeline()


@dataclass(frozen=True)
class TraceWait:
    """A consumer op's input made on another stream: the event it waited on.

    `event` is `(producer stream, number)`: the producer's position on its stream's
    timeline, which the consumer needed finished.  `start`/`end` (ns, the trace's clock)
    bound the time the consumer was held up for it; both None when it had already fired.
    """

    stream: object  # the consumer's Stream
    producer: object  # the producer's Stream
    event: tuple
    op: str  # the consumer op's name
    seq: int  # the consumer op's number on its stream
    start: int | None
    end: int | None

    @property
    def blocked(self) -> int:
        """Nanoseconds the consumer was held up (0 if the event had fired)."""
        return 0 if self.start is None else self.end - self.start


@dataclass(frozen=True)
class TraceOp:
    """One op that ran: where (stream, device, thread), when (ns), on what and what it made."""

    name: str
    stream: object
    device: object
    seq: int  # its number on the stream's timeline
    thread: int  # threading.get_ident() of the thread that ran it
    thread_name: str
    start: int  # perf_counter_ns
    end: int
    input_shapes: tuple
    shape: tuple
    dtype: object
    nbytes: int  # bytes of its output(s); 0 if it failed
    error: str | None
    waits: tuple  # TraceWait, one per input from another stream

    @property
    def duration(self) -> int:
        return self.end - self.start


class Trace:
    """A timeline trace: `with mx.trace() as t:` or `t = mx.start_trace()`.

    Once stopped, `ops` lists every op that ran while it was on (`TraceOp`, by start
    time), `waits` every cross-stream wait (`TraceWait`); `save(path)` writes Chrome
    trace JSON (open it in ui.perfetto.dev or chrome://tracing), `plot(path)` a PNG.

    >>> s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    >>> with mx.trace() as t:
    ...     a = mx.multiply(mx.ones((4,), stream=s1), 2, stream=s1)
    ...     b = mx.add(a, 1, stream=s2)
    ...     mx.eval(b)
    >>> [(op.name, op.stream == s2) for op in t.ops]
    [('full', False), ('multiply', False), ('add', True)]
    >>> w = t.waits[0]
    >>> w.producer == s1, w.stream == s2, w.event == (s1, t.ops[1].seq)
    (True, True, True)
    """

    def __init__(self, path=None):
        self.path = path
        self._ops = None
        self._raw = None
        self._t0 = self._t1 = None
        self._marks = {}
        self.recording = False

    # -- on and off --------------------------------------------------------------------------
    def start(self) -> Trace:
        """Start recording (a Trace records once)."""
        if self.recording or self._raw is not None:
            raise RuntimeError("[trace] This trace has already been started.")
        TIMELINE.start(self)
        self.recording = True
        return self

    def stop(self) -> Trace:
        """Stop recording; writes the JSON to `path` if one was given."""
        if not self.recording:
            raise RuntimeError("[trace] This trace is not recording.")
        self.recording = False
        self._raw = TIMELINE.stop(self)
        if self.path is not None:
            self.save(self.path)
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- what it holds -----------------------------------------------------------------------
    @property
    def ops(self) -> list:
        """The ops that ran, by start time (TraceOp)."""
        if self._ops is None:
            if self._raw is None:
                raise RuntimeError("[trace] Stop the trace before reading it.")
            self._ops = sorted((_op(ident, name, r) for ident, name, rs in self._raw for r in rs),
                               key=lambda op: (op.start, op.end))
            self._raw = ()
        return self._ops

    @property
    def waits(self) -> list:
        """Every cross-stream wait of the traced ops (TraceWait), by the consumer's start."""
        return [w for op in self.ops for w in op.waits]

    @property
    def start_time(self) -> int:
        return self._t0

    @property
    def end_time(self) -> int:
        return self._t1

    def __repr__(self):
        if self.recording or self._raw is None and self._ops is None:
            return f"Trace({'recording' if self.recording else 'not started'})"
        streams = {op.stream for op in self.ops}
        return f"Trace({len(self.ops)} ops on {len(streams)} streams, {len(self.waits)} waits)"

    # -- exports -----------------------------------------------------------------------------
    def to_chrome(self) -> dict:
        """The trace as Chrome trace event JSON (a dict), as Perfetto and chrome://tracing read.

        Each device is a process and each stream a thread track of it; an op is a complete
        event (`ph` "X", microseconds from the trace's start) with its shapes, bytes, seq
        and the thread that ran it as args; a wait is a flow (`ph` "s" on the producer's op,
        "f" on the consumer's) and, when it held the consumer up, a "wait" slice on the
        consumer's track.
        """
        return to_chrome(self)

    def save(self, path) -> str:
        """Write the Chrome trace JSON to `path`; returns the path."""
        with open(path, "w") as f:
            json.dump(self.to_chrome(), f)
        return str(path)

    def plot(self, path, *, title=None) -> str:
        """A PNG timeline at `path` (needs matplotlib: `pip install 'streamlet[trace]'`):
        one row per stream, ops as bars, waits as arrows from producer to consumer."""
        return plot(self, path, title=title)


def _op(ident, thread_name, r):
    name, state, seq, start, end, shapes, shape, dtype, outs, waits, blocked, error = r
    stream = state.stream
    if error is not None:
        nbytes = 0
    elif outs is not None:
        nbytes = sum(math.prod(s) * d.size for s, d in outs)
    else:
        nbytes = math.prod(shape) * dtype.size
    ws = ()
    if waits:
        b0, b1 = blocked if blocked else (None, None)
        ws = tuple(TraceWait(stream, pst.stream, (pst.stream, pseq), name, seq, b0, b1)
                   for pst, pseq in waits)
    return TraceOp(name, stream, stream.device, seq, ident, thread_name, start, end, shapes,
                   shape, dtype, nbytes, None if error is None else str(error), ws)


# -- Chrome trace JSON ---------------------------------------------------------------------------

def _track(stream):
    d = stream.device
    return d.type.value * 1000 + d.index + 1, stream.index + 1  # pid, tid: both > 0


def to_chrome(trace) -> dict:
    """See Trace.to_chrome."""
    ops = trace.ops
    t0 = trace.start_time
    us = lambda ns: (ns - t0) / 1000  # noqa: E731
    events = []
    streams = {}
    for op in ops:
        streams.setdefault(op.stream, None)
        for w in op.waits:
            streams.setdefault(w.producer, None)
    devices = {}
    for s in streams:
        pid, tid = _track(s)
        if pid not in devices:
            devices[pid] = s.device
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": repr(s.device)}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": repr(s)}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": s.index}})
    producer_of = {(op.stream, op.seq): op for op in ops}
    flow = 0
    for op in ops:
        pid, tid = _track(op.stream)
        args = {"seq": op.seq, "thread": op.thread_name, "thread_id": op.thread,
                "inputs": [list(s) for s in op.input_shapes], "shape": list(op.shape),
                "dtype": repr(op.dtype), "bytes": op.nbytes}
        if op.error is not None:
            args["error"] = op.error
        for w in op.waits:
            if w.start is not None and w.end > w.start:
                events.append({"ph": "X", "name": "wait", "cat": "wait", "pid": pid, "tid": tid,
                               "ts": us(w.start), "dur": (w.end - w.start) / 1000,
                               "args": {"event": f"{w.producer!r}#{w.event[1]}"}})
                break  # one slice: the node waited for all of its producers at once
        events.append({"ph": "X", "name": op.name, "cat": "op", "pid": pid, "tid": tid,
                       "ts": us(op.start), "dur": op.duration / 1000, "args": args})
        for w in op.waits:
            src = producer_of.get(w.event)
            if src is None:  # produced before the trace started
                continue
            flow += 1
            ppid, ptid = _track(src.stream)
            name = f"{w.producer!r}#{w.event[1]}"
            events.append({"ph": "s", "name": name, "cat": "wait", "id": flow, "pid": ppid,
                           "tid": ptid, "ts": us(src.start)})
            events.append({"ph": "f", "bp": "e", "name": name, "cat": "wait", "id": flow,
                           "pid": pid, "tid": tid, "ts": us(op.start)})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"library": "streamlet", "ops": len(ops),
                          "duration_us": (trace.end_time - t0) / 1000}}


# -- a PNG through matplotlib ------------------------------------------------------------------

def plot(trace, path, *, title=None) -> str:
    """See Trace.plot."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("[trace.plot] matplotlib is needed for a PNG timeline: "
                          "pip install 'streamlet[trace]'") from None
    ops = trace.ops
    streams = sorted({op.stream for op in ops} | {w.producer for op in ops for w in op.waits},
                     key=lambda s: (s.device.type.value, s.device.index, s.index))
    row = {s: i for i, s in enumerate(streams)}
    t0 = trace.start_time
    ms = lambda ns: (ns - t0) / 1e6  # noqa: E731
    fig = Figure(figsize=(12, 1.2 + 0.6 * max(1, len(streams))))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    names = sorted({op.name for op in ops})
    palette = [f"C{i % 10}" for i in range(len(names))]
    color = dict(zip(names, palette))
    for name in names:
        mine = [op for op in ops if op.name == name]
        for s in streams:
            bars = [(ms(op.start), max(ms(op.end) - ms(op.start), 1e-4))
                    for op in mine if op.stream == s]
            if bars:
                ax.broken_barh(bars, (row[s] - 0.35, 0.7), facecolors=color[name],
                               label=name if s == streams[0] or name not in
                               ax.get_legend_handles_labels()[1] else None)
    producer_of = {(op.stream, op.seq): op for op in ops}
    for op in ops:
        for w in op.waits:
            if w.start is not None and w.end > w.start:
                ax.broken_barh([(ms(w.start), ms(w.end) - ms(w.start))],
                               (row[op.stream] - 0.1, 0.2), facecolors="lightgrey")
            src = producer_of.get(w.event)
            if src is not None:
                ax.annotate("", xy=(ms(op.start), row[op.stream]),
                            xytext=(ms(src.end), row[src.stream]),
                            arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8})
    ax.set_yticks(range(len(streams)), [repr(s) for s in streams])
    ax.set_ylim(-0.7, len(streams) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("ms since the trace started")
    ax.set_title(title or f"{len(ops)} ops on {len(streams)} streams")
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize="small", frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


# -- the public functions ----------------------------------------------------------------------

def start_trace(path=None) -> Trace:
    """Start a timeline trace and return it (`mx.stop_trace()` ends it).

    Args:
        path (str, optional): where `stop` writes the Chrome trace JSON.

    Returns:
        Trace: recording until `stop_trace(trace)` or `trace.stop()`.

    >>> t = mx.start_trace()
    >>> mx.eval(mx.ones((3,)) + 1)
    >>> len(mx.stop_trace(t).ops) >= 1
    True
    """
    return Trace(path).start()


def stop_trace(trace=None) -> Trace:
    """Stop `trace` (default: the last one started that still records) and return it.

    Args:
        trace (Trace, optional): the trace to stop.

    Returns:
        Trace: stopped, with its `ops` and `waits`.
    """
    if trace is None:
        with TIMELINE.lock:
            if not TIMELINE.sessions:
                raise RuntimeError("[stop_trace] No trace is recording.")
            trace = TIMELINE.sessions[-1]
    return trace.stop()


def trace(*args, **kwargs):
    """`mx.trace(a, offset=0, axis1=0, axis2=1, dtype=None, *, stream=None)`: MLX's sum
    along a diagonal; `mx.trace()` or `mx.trace(path=...)` with no array: a timeline trace.

    MLX's `trace` always takes its array positionally, so a call without one means the
    timeline: a context manager recording what runs inside it (see `Trace`).

    Args:
        a (array): for the diagonal sum (see MLX's `trace`).
        path (str, optional): for the timeline, where to write its Chrome trace JSON.

    Returns:
        array (diagonal sum) or Trace (timeline, not started until `with` or `start()`).

    >>> mx.trace(mx.eye(3)).item()
    3.0
    >>> with mx.trace() as t:
    ...     mx.eval(mx.ones((2, 2)) * 3)
    >>> [op.name for op in t.ops]
    ['full', 'multiply']
    """
    if args or kwargs.keys() - {"path"}:
        from .ops.products import trace as diagonal_trace
        return diagonal_trace(*args, **kwargs)
    return Trace(**kwargs)
