"""Streams: the values, the per-thread defaults and contexts, and resolution of `stream=`.

All per-thread state lives in `_local`; the process-wide registry of live
streams is `_streams`.  Thread-affinity is checked here, where a stream is
handed to the scheduler, not in the ops.
"""
from __future__ import annotations

import itertools
import threading

from . import device as _dev
from .device import Device, DeviceType, as_device, check_available
from .scheduler import make_state

_next_index = itertools.count()
_next_tls_index = itertools.count()
_registry_lock = threading.Lock()  # guards _streams
_streams: dict = {}  # index -> Stream, every live concrete stream
_clear_hooks = []  # called by clear_streams (the random module resets its key there)
_generation = [0]  # bumped when the process-wide default device changes


class Stream:
    """An ordered queue of work on one device, a value compared by (device, index).

    >>> s = mx.new_stream(mx.cpu)
    >>> s, s.device, s == s, s == mx.new_stream(mx.cpu)
    (Stream(Device(cpu, 0), ...), Device(cpu, 0), True, False)
    """

    __slots__ = ("device", "index", "_state")

    def __init__(self, *args, **kwargs):
        raise TypeError("Streams are made with new_stream(), new_thread_unsafe_stream() "
                        "or default_stream().")

    @classmethod
    def _make(cls, device: Device, owner):
        s = object.__new__(cls)
        object.__setattr__(s, "device", device)
        object.__setattr__(s, "index", next(_next_index))
        object.__setattr__(s, "_state", make_state(s, owner))
        with _registry_lock:
            _streams[s.index] = s
        return s

    def __setattr__(self, name, value):
        raise AttributeError("Stream is immutable")

    def __eq__(self, other):
        if isinstance(other, Stream):
            return self.index == other.index and self.device == other.device
        return NotImplemented

    def __hash__(self):
        return hash((self.index, self.device))

    def __repr__(self):
        return f"Stream({self.device}, {self.index})"


class ThreadLocalStream:
    """One handle naming a distinct stream in every thread that uses it.

    >>> mx.new_thread_local_stream(mx.cpu)
    ThreadLocalStream(Device(cpu, 0), ...)
    """

    __slots__ = ("device", "index")

    def __init__(self, device, index):
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError("ThreadLocalStream is immutable")

    def __eq__(self, other):
        if isinstance(other, ThreadLocalStream):
            return self.index == other.index
        return NotImplemented

    def __hash__(self):
        return hash(("tls", self.index))

    def __repr__(self):
        return f"ThreadLocalStream({self.device}, {self.index})"


class _ThreadState(threading.local):
    """Everything one thread knows about streams; also its identity as a stream owner."""

    def __init__(self):
        self.defaults = {}  # Device -> this thread's default Stream
        self.resolved = {}  # ThreadLocalStream index -> Stream
        self.owned = []  # streams made by this thread (affine, defaults, resolutions)
        self.device = None  # the default device set by a stream() context, if any
        self.overrides = {}  # Device -> Stream set by a stream() context
        self.current = None  # cached state of default_stream(default_device())
        self.generation = -1


_local = _ThreadState()


def _owner():
    """This thread's token; streams it owns refer to it."""
    return _local.__dict__


def default_device() -> Device:
    """The device ops run on without `stream=`: the GPU if present, else the CPU.

    >>> with mx.stream(mx.cpu):
    ...     mx.default_device()
    Device(cpu, 0)
    """
    d = _local.device
    return d if d is not None else _dev.global_default_device()


def set_default_device(d) -> None:
    """Set the process-wide default device: `set_default_device(mx.cpu)`."""
    _dev.set_global_default_device(d)
    _generation[0] += 1


def _new(device, owner, op):
    return Stream._make(check_available(as_device(device), op), owner)


def new_stream(device) -> Stream:
    """A new stream on `device`, usable for evaluation only in the thread that made it.

    >>> s = mx.new_stream(mx.cpu)
    >>> (mx.ones((2,), stream=s) * 3).tolist()
    [3.0, 3.0]
    """
    s = _new(device, _owner(), "new_stream")
    _local.owned.append(s)
    return s


def new_thread_unsafe_stream(device) -> Stream:
    """A new stream usable from any thread.

    The library orders work on it as it is submitted and never crashes, but it
    serializes nothing between threads: if two threads submit to it at once,
    which thread's work comes first is up to them.
    """
    return _new(device, None, "new_thread_unsafe_stream")


def new_thread_local_stream(device) -> ThreadLocalStream:
    """One handle that names a separate stream in each thread that uses it.

    >>> tls = mx.new_thread_local_stream(mx.cpu)
    >>> (mx.arange(3, stream=tls) + 1).tolist()
    [1, 2, 3]
    """
    d = check_available(as_device(device), "new_thread_local_stream")
    return ThreadLocalStream(d, next(_next_tls_index))


def stream_from_thread_local_stream(tls: ThreadLocalStream) -> Stream:
    """The concrete stream this thread's use of `tls` resolves to (made on first use).

    >>> tls = mx.new_thread_local_stream(mx.cpu)
    >>> s = mx.stream_from_thread_local_stream(tls)
    >>> s == mx.stream_from_thread_local_stream(tls), mx.zeros((1,), stream=tls).tolist()
    (True, [0.0])
    """
    if not isinstance(tls, ThreadLocalStream):
        raise TypeError(f"[stream_from_thread_local_stream] Expected a ThreadLocalStream, "
                        f"got {type(tls).__name__}.")
    s = _local.resolved.get(tls.index)
    if s is None or s._state.closed:
        s = new_stream(tls.device)
        _local.resolved[tls.index] = s
    return s


def default_stream(device) -> Stream:
    """This thread's default stream for `device`, made on first use.

    >>> mx.default_stream(mx.cpu) == mx.default_stream(mx.Device(mx.cpu, 0))
    True
    """
    d = check_available(as_device(device), "default_stream")
    s = _local.overrides.get(d) or _local.defaults.get(d)
    if s is None or s._state.closed:
        s = new_stream(d)
        _local.defaults[d] = s
    return s


def set_default_stream(s) -> None:
    """Make `s` this thread's default stream for its device (the default device is unchanged)."""
    s = _concrete(s, "set_default_stream")
    _local.defaults[s.device] = s
    _local.overrides.pop(s.device, None)
    _local.current = None


def get_streams() -> list:
    """Every concrete stream made so far in the process and not destroyed.

    >>> mx.new_stream(mx.cpu) in mx.get_streams()
    True
    """
    with _registry_lock:
        return list(_streams.values())


def _concrete(s, op) -> Stream:
    if isinstance(s, Stream):
        return s
    if isinstance(s, ThreadLocalStream):
        return stream_from_thread_local_stream(s)
    if isinstance(s, (Device, DeviceType)):
        return default_stream(s)
    raise TypeError(f"[{op}] Expected a Stream, ThreadLocalStream, Device or DeviceType, "
                    f"got {type(s).__name__}.")


def resolve(s):
    """The StreamState an op built with `stream=s` records (DESIGN §3)."""
    if s is None:
        st = _local.current
        if st is None or _local.generation != _generation[0] or st.closed:
            st = default_stream(default_device())._state
            _local.current = st
            _local.generation = _generation[0]
        return st
    if type(s) is Stream:
        return s._state
    return _concrete(s, "stream")._state


def build_on(state):
    """Make ops built on this thread without `stream=` go to `state` (the transforms put
    each op they derive from a node on that node's stream); returns the previous state
    for `restore_build`."""
    if _local.current is state and _local.generation == _generation[0]:
        return None  # already so: nothing to restore
    prev = (_local.current, _local.generation)
    _local.current, _local.generation = state, _generation[0]
    return prev


def restore_build(prev) -> None:
    _local.current, _local.generation = prev


class StreamContext:
    """Inside it, this thread's default device and that device's default stream are `s`'s."""

    def __init__(self, s):
        if s is None:
            raise TypeError("[stream] Expected a Stream, ThreadLocalStream, Device or "
                            "DeviceType, got None.")
        self._target = s
        self._saved = []

    def __enter__(self):
        s = self._target
        if isinstance(s, (Device, DeviceType)):
            dev, stream_ = check_available(as_device(s), "stream"), None
        else:
            stream_ = _concrete(s, "stream")
            dev = stream_.device
        self._saved.append((_local.device, dict(_local.overrides), dev,
                            _local.defaults.get(dev)))
        _local.device = dev
        if stream_ is not None:
            _local.overrides[dev] = stream_
        _local.current = None
        return self

    def __exit__(self, *exc):
        _local.device, _local.overrides, dev, default = self._saved.pop()
        if default is not None:  # undo a set_default_stream made inside, as MLX does
            _local.defaults[dev] = default
        _local.current = None
        return False


def stream(s) -> StreamContext:
    """Context manager: ops without `stream=` inside it run on `s` (or `s`'s device).

    >>> s = mx.new_stream(mx.cpu)
    >>> with mx.stream(s):
    ...     mx.default_stream(mx.cpu) == s
    True
    >>> mx.default_stream(mx.cpu) == s
    False
    """
    return StreamContext(s)


def check_usable(state):
    """Raise RuntimeError if this thread may not evaluate on the stream."""
    if state.closed:
        raise RuntimeError(f"{state.stream} was destroyed by clear_streams().")
    if state.owner is not None and state.owner is not _owner():
        raise RuntimeError(f"There is no {_short(state.stream)} in current thread.")


def _short(s):
    return f"Stream({s.device.type.name}, {s.index})"


def synchronize(s=None) -> None:
    """Block until all work scheduled on `s` has finished; raise the error of a failed op.

    `s` is a Stream, a ThreadLocalStream, a Device (its default stream) or None
    (the default stream of the default device).  As in MLX, any thread may synchronize
    any stream, another thread's `new_stream` included: it waits for the work that had
    been scheduled on it (by any thread) when the call began, and raises the first
    failure on it that nobody has reported yet.

    >>> s = mx.new_stream(mx.cpu)
    >>> x = mx.linalg.inv(mx.zeros((2, 2)), stream=s)
    >>> mx.async_eval(x)
    >>> mx.synchronize(s)
    Traceback (most recent call last):
    RuntimeError: [linalg.inv] The matrix is singular...
    >>> mx.synchronize(s)  # reported once; the stream stays usable
    """
    st = resolve(None if s is None else _concrete(s, "synchronize"))
    if st.closed:
        raise RuntimeError(f"{st.stream} was destroyed by clear_streams().")
    if st.completed != st.issued:
        st.wait(st.issued)
    st.backend.synchronize(st)
    if st.errors:
        _report(st)


def _report(st):
    with st.lock:
        errors, st.errors = st.errors, []
    for err in errors:
        if not err.reported:
            err.reported = True
            raise RuntimeError(str(err)) from err


def clear_streams() -> None:
    """Finish and destroy the streams this thread made; reset its random state."""
    owned, _local.owned = _local.owned, []
    for s in owned:
        st = s._state
        st.wait(st.issued)
        st.closed = True
        with _registry_lock:
            _streams.pop(s.index, None)
    _local.defaults.clear()
    _local.resolved.clear()
    _local.overrides.clear()
    _local.current = None
    for hook in _clear_hooks:
        hook()
