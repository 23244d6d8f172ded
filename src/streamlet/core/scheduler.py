"""Per-stream execution: ordered batches, waits between streams, error capture.

A stream is an ordering, not a thread.  Each stream has a `StreamState`: a queue
of batches (the nodes one eval put on that stream, in order) and two counters,
`issued` and `completed`, which number its nodes.  A node waits for a node of
another stream by waiting until that stream's `completed` reaches the
producer's number: a timeline event.  Batches run either inline on the thread
that called eval (small work, idle streams) or on a small shared pool of
worker threads; a worker never blocks on another stream: it parks the batch
and the producer's completion puts the stream back on the pool.

Ctrl-C raises KeyboardInterrupt in the main thread, which may be running a
stream; CPython raises it only after a call returns or at a backward jump,
never between plain loads and stores.  So each hand-off of a stream to the pool
is written as the stores that record it followed by the one C call that queues
it (`POOL.jobs.append` or `extend`): it happens whole or not at all.  Waking the
workers (`POOL.wake`) may be repeated, and the clean-up after Ctrl-C repeats it.
"""
from __future__ import annotations

import atexit
import collections
import os
import threading
import time
import warnings
import weakref

from ..backend import for_device_type
from .graph import keeps_graph
from .memory import TRACK_BYTES, track as track_memory
from .timeline import TIMELINE

# MLX computes inf and nan silently.  NumPy warns from the frame that called the
# ufunc, which is one of our kernels: filtering those once costs nothing per op,
# where an errstate context costs about 1 µs each time it is entered.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"streamlet(\.|$)")


class StreamError(RuntimeError):
    """A failure of an op while it ran; it poisons that array and everything derived from it."""

    reported = False


class StreamState:
    """The executor side of one Stream."""

    __slots__ = ("stream", "gpu", "owner", "backend", "native", "lock", "cond", "queue",
                 "active", "issued", "completed", "waiters", "sleepers", "errors", "closed",
                 "__weakref__")

    def __init__(self, stream, owner, backend):
        self.stream = stream
        self.gpu = bool(stream.device.type.value)
        self.owner = owner  # the per-thread token of the owning thread; None: any thread
        self.backend = backend
        self.native = None  # the backend's own handle for this stream (a CUDA stream)
        self.lock = threading.Lock()  # guards every field below
        self.cond = threading.Condition(self.lock)
        self.queue = collections.deque()  # Batches not finished; the head is being run
        self.active = False  # some thread is running this stream's queue
        self.issued = 0  # number given to the last node put on this stream
        self.completed = 0  # number of the last node that finished (or failed)
        self.waiters = []  # (number, callback or StreamState to resume): once completed >= number
        self.sleepers = 0  # threads blocked in wait()
        self.errors = []  # StreamErrors not yet reported by eval or synchronize
        self.closed = False  # destroyed by clear_streams

    def _complete(self, seq):
        """With the lock held: nodes up to `seq` are done.  Streams parked on them go to
        the pool at once; returns the callbacks to run once the lock is released.

        Ctrl-C can stop the calling thread anywhere in here; run again, it does what was
        left: each parked stream is handed to the pool exactly once.
        """
        calls = ()
        if self.waiters:
            due = [w for w in self.waiters if w[0] <= seq]
            if due:
                keep = [w for w in self.waiters if w[0] > seq]
                parked = [cb for n, cb in due if type(cb) is StreamState]
                calls = [cb for n, cb in due if type(cb) is not StreamState]
                if parked:
                    calls.append(POOL.wake)
                self.waiters = keep  # then the hand-off: no call in between
                POOL.jobs.extend(parked)
        if self.completed < seq:
            self.completed = seq
        if self.sleepers:
            self.cond.notify_all()
        return calls

    def advance(self, seq):
        """Mark every node up to `seq` finished; wake whoever waits for them."""
        with self.lock:
            calls = self._complete(seq)
        for cb in calls:
            cb()

    def finish(self, batch):
        """The head batch is done: publish it, then stop or hand the rest to the pool.

        Restartable: run again after Ctrl-C stopped it midway, it does what was left.
        """
        with self.lock:
            if self.queue and self.queue[0] is batch:
                self.queue.popleft()
            calls = self._complete(batch.last)
            if not batch.done:
                batch.done = True  # then the hand-off: no call in between
                if self.queue:
                    POOL.jobs.append(self)
                else:
                    self.active = False
        POOL.wake()
        for cb in calls:
            cb()

    def when_done(self, seq, callback) -> bool:
        """Call `callback` (or, given a StreamState, hand that stream to the pool) once
        node `seq` finished; False (and no call) if it already has."""
        with self.lock:
            if self.completed >= seq:
                return False
            self.waiters.append((seq, callback))
            return True

    def wait(self, seq, deadline=None):
        """Block this thread until node `seq` of the stream has finished (or until the
        `time.monotonic()` deadline, if given)."""
        if self.completed >= seq:
            return
        with self.lock:
            self.sleepers += 1
            try:
                while self.completed < seq:
                    if deadline is None:
                        self.cond.wait()
                    elif not self.cond.wait(deadline - time.monotonic()):
                        return
            finally:  # also when Ctrl-C interrupts the wait
                self.sleepers -= 1

    def reset_after_fork(self):
        """In a forked child: the threads that ran or waited for this stream are gone.

        Work they left unfinished fails (its arrays raise a clear error), the timeline
        is caught up and the stream is idle, so new work runs in the child.
        """
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.sleepers = 0
        self.waiters = []
        for batch in self.queue:
            nodes = batch.nodes if batch.nodes is not None else ()
            cancel_nodes(nodes, batch.pos, "the process forked while it was being computed")
        self.queue.clear()
        self.active = False
        self.completed = self.issued


class Batch:
    """The nodes of one eval on one stream, in order, and the producers they wait for."""

    __slots__ = ("nodes", "waits", "signals", "pos", "last", "cancel", "queued", "starts",
                 "done")

    def __init__(self, nodes, waits, signals, last):
        self.nodes = nodes
        self.waits = waits  # node position -> producers on other streams
        self.signals = signals  # positions whose completion another stream waits for
        self.pos = 0  # where a parked batch resumes
        self.last = last  # number of its last node
        self.cancel = None  # why to stop: the nodes not run yet then fail with this reason
        self.queued = False  # in its stream's queue (or run from there already)
        self.starts = False  # its stream was idle: the eval that queued it runs it
        self.done = False  # finished: its stream has stopped or gone to the pool


def cancel_nodes(nodes, start, why, state=None):
    """Fail the nodes of `nodes[start:]` that have not run (None entries have) with
    "[op] Not computed: `why`."; each becomes final, as a failed node does.

    The error is reported to the user only through reads of these arrays (the cause,
    a KeyboardInterrupt, already reached them), unless `state` is given: then the
    stream's synchronize raises it too (a worker's kernel raised a BaseException).
    """
    for i in range(start, len(nodes)):
        node = nodes[i]
        if node is None:
            continue
        if node.data is None and node.error is None:
            name = node.prim.name if node.prim is not None else "eval"
            node.error = StreamError(f"[{name}] Not computed: {why}.")
            if state is None:
                node.error.reported = True
            else:
                with state.lock:
                    state.errors.append(node.error)
                state = None  # one error per stream is enough for synchronize
        if not keeps_graph(node):
            node.prim = None
            node.inputs = ()
            node.params = None


def run_node(node, state):
    """Run one node's kernel; a failure becomes a StreamError stored in the node.

    `backend.execute` sees the node with its inputs, so a GPU backend can order
    itself after inputs made on other devices or streams.  Once run, the node lets
    go of its inputs, unless a transform is tracing it.
    """
    t = TIMELINE.on and TIMELINE.begin(node, state)  # the trace's one test when it is off
    backend = state.backend
    args = []
    for a in node.inputs:
        st = a.stream
        if st is not None and st.backend is not backend:
            st.backend.settle(a)  # a GPU's index checks are read before its data crosses
        if a.error is not None:
            node.error = a.error
            break
        args.append(a.data if st is None or st.backend is backend else backend.import_from(a))
    else:
        a = None  # the loop's last input: no hold on it while the kernel runs (donation)
        try:
            data = node.data = backend.execute(node, args)
            if data.nbytes >= TRACK_BYTES:  # small buffers cost more to watch than to make
                track_memory(data)
        except Exception as exc:  # any kernel failure poisons the node, never the process
            if any(x is None for x in args):  # not a kernel's fault: an input never computed
                exc = RuntimeError("An input was never computed (its evaluation was "
                                   "interrupted, or the process forked while it ran).")
            node.error = failure(node.prim.name, exc)
    if node.error is not None:
        report(node.error, state)
    if t:
        TIMELINE.end(node, state, t)
    if not keeps_graph(node):
        node.prim = None
        node.inputs = ()
        node.params = None


def report(error, state):
    """List `error` once among the stream's errors, for its synchronize to raise."""
    with state.lock:
        if all(e is not error for e in state.errors):
            state.errors.append(error)


def failure(name, exc) -> StreamError:
    """The StreamError of op `name`'s kernel that raised `exc` (a backend's own kernel
    computing several nodes at once gives its error to each, as `run_node` does to one)."""
    if type(exc) is StreamError:  # an input's failure, met again: reported once
        return exc
    text = str(exc) or type(exc).__name__
    error = StreamError(text if text.startswith("[") else f"[{name}] {text}")
    error.__cause__ = exc
    return error


def run_batch(state, batch, blocking, wait=True) -> bool:
    """Run a batch from where it stopped, then the backend's pass over what it deferred
    (`run_deferred`: the GPU's fused kernels, and unless not `wait`, the wait for the
    device); False if it parked waiting for another stream."""
    running = state.backend.running  # a GPU's: its stream made current for the nodes
    if running is not None:
        with running(state, len(batch.nodes) - batch.pos):
            ran = _run_nodes(state, batch, blocking)
    else:
        ran = _run_nodes(state, batch, blocking)
    if not ran:
        return False
    batch.pos = len(batch.nodes)
    state.backend.run_deferred(state, wait)
    return True


def _run_nodes(state, batch, blocking) -> bool:
    """`run_batch`'s run of the nodes; False if it parked."""
    nodes, waits, signals = batch.nodes, batch.waits, batch.signals
    for i in range(batch.pos, len(nodes)):
        if batch.cancel is not None:  # the eval's thread was interrupted
            cancel_nodes(nodes, i, batch.cancel)
            break
        if waits and i in waits:
            t = TIMELINE.on and TIMELINE.wait_begin(nodes[i])
            batch.pos = i  # before a wake-up is registered: it can resume the batch at once
            for producer in waits[i]:
                pstate = producer.stream
                if blocking:
                    pstate.wait(producer.seq)
                elif pstate.when_done(producer.seq, state):
                    return False
            if t:
                TIMELINE.wait_end(nodes[i], t)
            del waits[i]  # and with it this batch's hold on the producers' buffers
        node = nodes[i]
        run_node(node, state)
        nodes[i] = None  # an intermediate's buffer is freed once its last consumer has run
        if signals and i in signals:
            state.advance(node.seq)
    return True


def drain(state, blocking=False):
    """Run the stream's queued batches in order until it is empty or a batch parks.

    `blocking` (the thread that called eval): run the head batch only, waiting
    for other streams if needed, then hand whatever is queued behind it to the pool.
    """
    while True:
        with state.lock:
            batch = state.queue[0]
        try:
            if not run_batch(state, batch, blocking):
                return
        except BaseException as exc:  # not an Exception (those poison their node only)
            if blocking:
                raise  # eval's thread: dispatch cancels the whole eval and re-raises
            # a worker: the batch stops here, the stream and the worker go on
            cancel_nodes(batch.nodes, batch.pos, f"{exc!r} was raised while its stream ran",
                         state)
        with state.lock:
            more = len(state.queue) > 1
        if blocking or not more:
            state.finish(batch)
            return
        with state.lock:
            state.queue.popleft()
            calls = state._complete(batch.last)
        for cb in calls:
            cb()


class _Pool:
    """A few daemon worker threads that drain streams; never one thread per stream."""

    def __init__(self, size):
        self.size = size
        self.jobs = collections.deque()
        self.lock = threading.Lock()  # guards jobs, idle, threads, stopping
        self.cond = threading.Condition(self.lock)
        self.idle = 0
        self.threads = []
        self.stopping = False

    def submit(self, state):
        self.jobs.append(state)
        self.wake()

    def wake(self):
        """Make sure queued jobs have workers: notify idle ones, start more if needed.

        Jobs are queued without the lock (see the module's note on Ctrl-C); this can be
        called any number of times after, as that clean-up does.
        """
        if not self.jobs:
            return
        with self.lock:
            waiting = len(self.jobs)
            self.cond.notify(waiting)
            # once stopping, workers leave instead of waiting: work submitted then gets one
            if waiting > self.idle and (self.stopping or len(self.threads) < self.size):
                self.threads = [t for t in self.threads if t.is_alive()]  # and never started
                t = threading.Thread(target=self._work, name="streamlet-worker", daemon=True)
                self.threads.append(t)
                t.start()

    def _work(self):
        while True:
            with self.lock:
                while not self.jobs and not self.stopping:
                    self.idle += 1
                    self.cond.wait()
                    self.idle -= 1
                if not self.jobs:
                    return
                state = self.jobs.popleft()
            drain(state)

    def reset_after_fork(self):
        """In a forked child only the forking thread exists: no workers, no waiters."""
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.jobs.clear()
        self.idle = 0
        self.threads = []

    def shutdown(self):
        """Let queued work finish, then stop the workers (called at interpreter exit).

        Work finishing during shutdown can wake parked streams and so start workers;
        they are joined too, so no worker runs a kernel while the interpreter finalizes.
        It runs twice: before the interpreter joins the threads that are not daemons
        (idle workers would keep it waiting) and after (workers that such a thread
        started meanwhile: in stopping mode each submit starts one).
        """
        with self.lock:
            self.stopping = True
            self.cond.notify_all()
        while True:
            with self.lock:
                alive = [t for t in self.threads if t.is_alive()]
            if not alive:
                return
            for t in alive:
                t.join()


POOL = _Pool(max(4, os.cpu_count() or 1))
threading._register_atexit(POOL.shutdown)
atexit.register(POOL.shutdown)
_states = weakref.WeakSet()  # every StreamState, for the reset in a forked child


def make_state(stream, owner):
    state = StreamState(stream, owner, for_device_type(stream.device.type.value))
    _states.add(state)
    return state


FORK_WAIT = 30.0  # seconds os.fork() waits at most for the work in flight


def _before_fork():
    """Let the work in flight finish before the process forks: the child then has its
    results, and no worker is inside a kernel (OpenBLAS's own fork handler deadlocks
    when another thread is in a BLAS call, with or without streamlet)."""
    deadline = time.monotonic() + FORK_WAIT
    for state in list(_states):
        if state.completed < state.issued:
            state.wait(state.issued, deadline)


def _after_fork_in_child():
    POOL.reset_after_fork()
    for state in list(_states):
        state.reset_after_fork()


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
