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
from .errors import called
from .scheduler import make_state

_next_index = itertools.count()
_next_tls_index = itertools.count()
_registry_lock = threading.Lock()  # guards _streams
_streams: dict = {}  # index -> Stream, every live concrete stream
_clear_hooks = []  # called by clear_streams (the random module resets its key there)
_generation = [0]  # bumped when the process-wide default device changes


class Stream:
    """An ordered queue of work on one device, a value compared by (device, index).

    Work scheduled on one stream runs in the order it was scheduled; work on
    different streams may run at the same time. Streams are not constructed
    directly: `new_stream`, `new_thread_unsafe_stream`, `default_stream` and
    `stream_from_thread_local_stream` make them.

    Attributes:
        device (Device): the device the stream's work runs on.
        index (int): the stream's number, unique in the process.

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

    def __reduce__(self):
        # a stream belongs to this process (and, when affine, to a thread): MLX refuses
        # to pickle or copy one with TypeError, and so does streamlet
        raise TypeError("cannot pickle 'Stream' object")


class ThreadLocalStream:
    """One handle naming a distinct stream in every thread that uses it.

    Made by `new_thread_local_stream`. Wherever a stream is accepted (`stream=`,
    `stream()`, `synchronize`) it stands for this thread's own concrete stream
    for it, made on the thread's first use; `stream_from_thread_local_stream`
    returns that stream. Its indices are numbered apart from `Stream`'s.

    Attributes:
        device (Device): the device of every stream it resolves to.
        index (int): the handle's number among thread-local streams.

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

    def __reduce__(self):  # as Stream (and MLX): not picklable, not copyable
        raise TypeError("cannot pickle 'ThreadLocalStream' object")


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

    Inside a `stream()` context it is the context's device, for the thread that
    entered it; elsewhere the process-wide default set by `set_default_device`.

    Returns:
        Device: this thread's default device.

    >>> with mx.stream(mx.cpu):
    ...     mx.default_device()
    Device(cpu, 0)
    """
    d = _local.device
    return d if d is not None else _dev.global_default_device()


def set_default_device(device) -> None:
    """Set the process-wide default device.

    It applies to every thread outside a `stream()` context (a context keeps its
    own device until it exits); each thread keeps its own default streams.

    Args:
        device (Device or DeviceType): the new default device.

    Raises:
        ValueError: if the device does not exist here (a GPU without one).

    >>> before = mx.default_device()
    >>> mx.set_default_device(mx.cpu)
    >>> mx.default_device()
    Device(cpu, 0)
    >>> mx.set_default_device(before)
    """
    _dev.set_global_default_device(device)
    _generation[0] += 1


def _new(device, owner, op):
    return Stream._make(check_available(as_device(device), op), owner)


def new_stream(device) -> Stream:
    """A new stream on `device`, usable for evaluation only in the thread that made it.

    The stream is thread-affine: any thread may build ops with `stream=s` and
    `synchronize(s)`, but evaluating work on it from another thread raises
    `RuntimeError` ("There is no Stream(cpu, 3) in current thread."). For a
    stream that every thread may use, see `new_thread_unsafe_stream` and
    `new_thread_local_stream`.

    Args:
        device (Device or DeviceType): where the stream's work runs.

    Returns:
        Stream: a stream with an index not used before in this process.

    Raises:
        ValueError: if the device does not exist here.

    >>> s = mx.new_stream(mx.cpu)
    >>> (mx.ones((2,), stream=s) * 3).tolist()
    [3.0, 3.0]
    """
    s = _new(device, _owner(), "new_stream")
    _local.owned.append(s)
    return s


def new_thread_unsafe_stream(device) -> Stream:
    """A new stream usable from any thread.

    The library orders work on it as it is submitted and keeps its own
    bookkeeping consistent, but it serializes nothing between threads: if two
    threads submit to it at once, which thread's work comes first is up to them.

    Args:
        device (Device or DeviceType): where the stream's work runs.

    Returns:
        Stream: a new stream that no thread owns.

    Raises:
        ValueError: if the device does not exist here.

    >>> import threading
    >>> s = mx.new_thread_unsafe_stream(mx.cpu)
    >>> out = []
    >>> t = threading.Thread(target=lambda: out.append((mx.ones((2,), stream=s) + 1).tolist()))
    >>> t.start(); t.join(); out
    [[2.0, 2.0]]
    """
    return _new(device, None, "new_thread_unsafe_stream")


def new_thread_local_stream(device) -> ThreadLocalStream:
    """One handle that names a separate stream in each thread that uses it.

    Each thread's stream for the handle is made (with `new_stream`) on that
    thread's first use, so it is thread-affine like any `new_stream` stream,
    and work of two threads on the same handle never shares a queue.

    Args:
        device (Device or DeviceType): where the streams' work runs.

    Returns:
        ThreadLocalStream: the handle.

    Raises:
        ValueError: if the device does not exist here.

    >>> tls = mx.new_thread_local_stream(mx.cpu)
    >>> (mx.arange(3, stream=tls) + 1).tolist()
    [1, 2, 3]
    """
    d = check_available(as_device(device), "new_thread_local_stream")
    return ThreadLocalStream(d, next(_next_tls_index))


def stream_from_thread_local_stream(tls: ThreadLocalStream) -> Stream:
    """The concrete stream this thread's use of `tls` resolves to (made on first use).

    Args:
        tls (ThreadLocalStream): the handle.

    Returns:
        Stream: this thread's stream for `tls`; the same one on every call in
        this thread until `clear_streams`, after which a new one is made.

    Raises:
        TypeError: if `tls` is not a ThreadLocalStream.

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

    Every thread has its own default stream per device; `set_default_stream`
    and `stream()` change it for the calling thread only.

    Args:
        device (Device or DeviceType): the device.

    Returns:
        Stream: the stream ops on `device` use when no stream is given.

    Raises:
        ValueError: if the device does not exist here.

    >>> mx.default_stream(mx.cpu) == mx.default_stream(mx.Device(mx.cpu, 0))
    True
    """
    d = check_available(as_device(device), "default_stream")
    s = _local.overrides.get(d)
    return s if s is not None and not s._state.closed else _thread_default(d)


def _thread_default(d) -> Stream:
    """This thread's own default stream for `d` (no context's), made on first use."""
    s = _local.defaults.get(d)
    if s is None or s._state.closed:
        s = _local.defaults[d] = new_stream(d)
    return s


def set_default_stream(s) -> None:
    """Make `s` this thread's default stream for its device.

    The default device is unchanged: `s` is used by ops without `stream=` only
    while `s.device` is the default device. Inside a `stream()` context the
    change lasts until the context exits.

    Args:
        s (Stream or ThreadLocalStream): the new default (a ThreadLocalStream
            stands for this thread's stream for it).

    Raises:
        TypeError: for anything else (a Device too, as in MLX: it names no stream).

    >>> s = mx.new_stream(mx.cpu)
    >>> with mx.stream(mx.cpu):
    ...     mx.set_default_stream(s)
    ...     mx.default_stream(mx.cpu) == s
    True
    >>> mx.default_stream(mx.cpu) == s  # the context restored the default on exit
    False
    """
    if not isinstance(s, (Stream, ThreadLocalStream)):
        raise TypeError(f"[{called('set_default_stream')}] Expected a Stream or "
                        f"ThreadLocalStream, got {type(s).__name__}.")
    s = _concrete(s, "set_default_stream")
    _local.defaults[s.device] = s
    _local.overrides.pop(s.device, None)
    _local.current = None


def get_streams() -> list:
    """Every concrete stream made so far in the process and not destroyed.

    Every thread's streams are listed (defaults, `new_stream` and thread-unsafe
    streams, thread-local resolutions); `ThreadLocalStream` handles are not.
    Streams destroyed by `clear_streams` are left out.

    Returns:
        list[Stream]: the live streams.

    >>> mx.new_stream(mx.cpu) in mx.get_streams()
    True
    """
    with _registry_lock:
        return list(_streams.values())


def made() -> int:
    """How many streams this thread has made (and not cleared): a mark for `stand_ins`."""
    return len(_local.owned)


def stand_ins(states, mark) -> dict:
    """What stands, in any thread, for the streams among `states` this thread owns without
    the user having named them: its resolutions of thread-local streams, its default
    streams, and the streams it made after `mark`.  {state: ThreadLocalStream or Device}
    (`resolve` gives another thread's stream for it)."""
    me = _owner()
    handles = {s._state: ThreadLocalStream(s.device, i) for i, s in _local.resolved.items()}
    handles.update((s._state, d) for d, s in _local.defaults.items())
    new = _local.owned[mark:]
    out = {}
    for st in states:
        if st.owner is not me:
            continue
        if st in handles:
            out[st] = handles[st]
        elif st.stream in new:  # this thread keeps it; each other thread gets its own
            tls = new_thread_local_stream(st.stream.device)
            _local.resolved[tls.index] = st.stream
            out[st] = tls
    return out


def _concrete(s, op) -> Stream:
    if isinstance(s, Stream):
        return s
    if isinstance(s, ThreadLocalStream):
        return stream_from_thread_local_stream(s)
    if isinstance(s, (Device, DeviceType)):
        return default_stream(s)
    raise TypeError(f"[{called(op)}] Expected a Stream, ThreadLocalStream, Device or "
                    f"DeviceType, got {type(s).__name__}.")


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
        st = s._state
        if st.closed:  # never usable again: said now, naming the op, rather than at eval
            raise RuntimeError(f"[{called('stream')}] {s} was destroyed by clear_streams().")
        return st
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
    """Inside it, this thread's default device and that device's default stream are `s`'s.

    `stream(s)` returns one; see there. A context object may be entered again
    after it exits, and nested within itself.

    Args:
        s (Stream, ThreadLocalStream, Device or DeviceType): what to use.

    Raises:
        TypeError: if `s` is None or of another type.

    >>> with mx.StreamContext(mx.cpu):
    ...     mx.default_device()
    Device(cpu, 0)
    """

    def __init__(self, s):
        if not isinstance(s, (Stream, ThreadLocalStream, Device, DeviceType)):
            # refused when made, as MLX does, not only when entered
            raise TypeError("[stream] Expected a Stream, ThreadLocalStream, Device or "
                            f"DeviceType, got {'None' if s is None else type(s).__name__}.")
        self._target = s
        self._saved = {}  # thread id -> what that thread's entries replaced (threads may share it)

    def __enter__(self):
        s = self._target
        if isinstance(s, (Device, DeviceType)):
            dev, stream_ = check_available(as_device(s), "stream"), None
        else:
            stream_ = _concrete(s, "stream")
            dev = stream_.device
        self._saved.setdefault(threading.get_ident(), []).append(
            (_local.device, dict(_local.overrides), dev, _thread_default(dev)))
        _local.device = dev
        if stream_ is not None:
            _local.overrides[dev] = stream_
        _local.current = None
        return self

    def __exit__(self, *exc):
        saved = self._saved.get(threading.get_ident())
        if not saved:  # not entered in this thread (or exited already): nothing to restore
            return False
        _local.device, _local.overrides, dev, default = saved.pop()
        if not saved:
            del self._saved[threading.get_ident()]
        _local.defaults[dev] = default  # undo a set_default_stream made inside, as MLX does
        _local.current = None
        return False


def stream(s) -> StreamContext:
    """Context manager: ops without `stream=` inside it run on `s` (or `s`'s device).

    For the calling thread only, inside the context the default device is
    `s`'s device and, when `s` is a stream, that device's default stream is
    `s`. With a Device or DeviceType only the default device changes. Both are
    restored on exit, also when the block raises; contexts nest.

    Args:
        s (Stream, ThreadLocalStream, Device or DeviceType): what to use (a
            ThreadLocalStream stands for this thread's stream for it).

    Returns:
        StreamContext: the context manager.

    Raises:
        TypeError: if `s` is None or of another type.
        ValueError: if its device does not exist here.

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


def usable_here(state) -> bool:
    """Whether this thread may evaluate on the stream (what `check_usable` checks)."""
    return not state.closed and (state.owner is None or state.owner is _owner())


def _short(s):
    return f"Stream({s.device.type.name}, {s.index})"


def synchronize(stream=None) -> None:
    """Block until all work scheduled on `stream` has finished; raise the error of a failed op.

    As in MLX, any thread may synchronize any stream, another thread's
    `new_stream` included: it waits for the work that had been scheduled on it
    (by any thread) when the call began.

    Args:
        stream (Stream, ThreadLocalStream, Device, DeviceType or None): the
            stream (the keyword is `stream`, as in MLX).
            A Device means its default stream in this thread, a
            ThreadLocalStream this thread's stream for it, None the default
            stream of the default device.

    Raises:
        RuntimeError: with the message of the first operation that failed on
            the stream and that nobody has been told of yet (an `eval` that
            raised it counts as telling); each failure is reported once, and
            the stream stays usable. Also if `stream` was destroyed by
            `clear_streams`.
        TypeError: if `stream` is of another type.

    >>> s = mx.new_stream(mx.cpu)
    >>> x = mx.linalg.inv(mx.zeros((2, 2)), stream=s)
    >>> mx.async_eval(x)
    >>> mx.synchronize(s)
    Traceback (most recent call last):
    RuntimeError: [linalg.inv] The matrix is singular...
    >>> mx.synchronize(s)  # reported once; the stream stays usable
    """
    st = resolve(None if stream is None else _concrete(stream, "synchronize"))
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
    """Finish and destroy the streams this thread made; reset its random state.

    The calling thread's `new_stream` streams, its default streams and its
    thread-local resolutions wait for their work and are destroyed; other
    threads' streams and thread-unsafe streams are not touched. Arrays already
    computed keep their values. Default streams and thread-local resolutions
    are made afresh on next use, while a destroyed `new_stream` stream raises
    `RuntimeError` when used again (an op built on it, naming the op; an eval or
    synchronize of it). The thread's global random key sequence
    starts over unseeded (call `random.seed` again to repeat numbers).

    >>> import threading
    >>> out = []
    >>> def work():
    ...     s = mx.new_stream(mx.cpu)
    ...     x = mx.ones((2,), stream=s) * 2
    ...     mx.eval(x)
    ...     mx.clear_streams()
    ...     out.append((s in mx.get_streams(), x.tolist()))
    ...     try:
    ...         mx.eval(mx.ones((2,), stream=s))
    ...     except RuntimeError as e:
    ...         out.append(str(e))
    >>> t = threading.Thread(target=work); t.start(); t.join()
    >>> out
    [(False, [2.0, 2.0]), '[ones] Stream(Device(cpu, 0), ...) was destroyed by clear_streams().']
    """
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
