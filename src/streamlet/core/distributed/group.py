"""Groups of processes, the backends that connect them, and init().

A `Group` wraps one engine communicator (`mpi.Comm`, `nccl.Comm`) or the singleton of a
process that was not launched as one of several.  `init()` starts a backend once and
returns its world group on every later call, as MLX does.
"""
from __future__ import annotations

import threading

from ..ops.build import bool_arg, int_arg, str_arg
from . import mpi, nccl, order

BACKENDS = ("any", "mpi", "nccl", "ring", "jaccl")  # the names MLX accepts
_ENGINES = {"mpi": mpi, "nccl": nccl}
_lock = threading.Lock()  # guards _worlds (init may be called from several threads)
_worlds: dict = {}  # backend name (and "any") -> the world Group it started


class _Single:
    """The group of a lone process: communication is the identity, and never called."""

    rank, size, device = 0, 1, None

    def split(self, color, key):
        raise RuntimeError("Cannot split the distributed group further.")


class Group:
    """A group of processes that communicate; made by `init()` and `Group.split`.

    >>> g = mx.distributed.init()
    >>> (g.rank(), g.size())      # a process started without a launcher
    (0, 1)
    """

    __slots__ = ("_comm",)

    def __init__(self, comm):
        self._comm = comm

    def rank(self) -> int:
        """This process's rank in the group, from 0 to size() - 1."""
        return self._comm.rank

    def size(self) -> int:
        """How many processes the group holds."""
        return self._comm.size

    def split(self, color: int, key: int = -1) -> "Group":
        """Split the group: processes that pass the same `color` form a new group, ranked
        by `key` (by their rank in this group when `key` is negative).

        Every process of the group must call it.  Communication built before it has run
        when it returns (split is a collective call of its own).

        >>> mx.distributed.init().split(0)
        Traceback (most recent call last):
        RuntimeError: Cannot split the distributed group further.
        """
        color, key = int_arg(color, "split", "color"), int_arg(key, "split", "key")
        if self._comm.size > 1:
            order.settle()
        return Group(self._comm.split(color, self._comm.rank if key < 0 else key))

    def __repr__(self):
        return f"Group(rank={self.rank()}, size={self.size()})"


def is_available(backend: str = "any") -> bool:
    """Whether streamlet can start `backend` ("any", "mpi", "nccl"; "ring" and "jaccl" are
    MLX's own transports, which streamlet does not have).

    It says the engine is installed, not that a group can be formed: for that, call
    `init(strict=True)`.

    >>> isinstance(mx.distributed.is_available(), bool)
    True
    """
    if str_arg(backend, "is_available", "backend") == "any":
        return any(e.is_available() for e in _ENGINES.values())
    engine = _ENGINES.get(backend)
    return engine is not None and engine.is_available()


def init(strict: bool = False, backend: str = "any", *, all_gather_factory=None) -> Group:
    """Start the communication backend and return the group of all launched processes.

    A process started without a launcher (or without an engine) gets the singleton group
    of size 1, where communication is the identity; with `strict=True` that raises
    instead.  "any" tries NCCL (where a GPU is present) and then MPI.  Later calls
    return the same group.

    >>> world = mx.distributed.init()
    >>> world.size()
    1
    """
    strict, backend = bool_arg(strict, "init", "strict"), str_arg(backend, "init", "backend")
    if all_gather_factory is not None:
        if not callable(all_gather_factory):
            raise TypeError("[init] all_gather_factory must be callable, got "
                            f"{type(all_gather_factory).__name__}.")
        if backend != "jaccl":
            raise ValueError("all_gather_factory is only supported with backend='jaccl'.")
    if backend not in BACKENDS:
        raise ValueError("[distributed] The only valid values for backend are 'any', 'mpi', "
                         f"'nccl', 'jaccl' and 'ring' but '{backend}' was provided.")
    with _lock:
        world = _worlds.get(backend)
        if world is None:
            name, comm = _start(strict, backend)
            if comm is None:
                return Group(_Single())
            world = _worlds[name] = Group(comm)
            _worlds.setdefault("any", world)
    return world


def _start(strict, backend):
    """(engine name, world communicator); the communicator is None where no group can be
    formed (and strict raises instead)."""
    if backend in ("ring", "jaccl"):
        if strict:
            raise RuntimeError(f"[distributed] The '{backend}' backend is MLX's own transport, "
                               "which streamlet does not have: use 'mpi' or 'nccl'.")
        return backend, None
    if backend != "any":
        return backend, _ENGINES[backend].init(strict)
    for name in ("nccl", "mpi"):
        comm = _ENGINES[name].init(False)
        if comm is not None:
            return name, comm
    if strict:
        raise RuntimeError("[distributed] Couldn't initialize any backend")
    return backend, None
