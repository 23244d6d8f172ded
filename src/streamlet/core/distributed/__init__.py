"""`mx.distributed`: communication between processes, as ops on streams.

Processes on CPUs and across hosts talk through MPI (mpi4py), GPUs through NCCL (CuPy);
`python -m streamlet.launch -n N script.py` starts N processes.  Communication ops are
lazy nodes like any other: they run on the stream they are given, so a program can put
communication on a stream of its own and compute on another meanwhile.  Every
communication op of a process runs after the one built before it (`order`), so ranks
that build the same program issue their collectives in the same order.

>>> world = mx.distributed.init()
>>> mx.distributed.all_sum(mx.ones(3), group=world).tolist()   # a process on its own
[1.0, 1.0, 1.0]
"""
from ... import _public
from .group import Group, init, is_available  # noqa: F401
from .ops import (all_gather, all_max, all_min, all_sum, recv, recv_like, send,  # noqa: F401
                  sum_scatter)

__all__ = ["Group", "all_gather", "all_max", "all_min", "all_sum", "init", "is_available",
           "recv", "recv_like", "send", "sum_scatter"]


def __dir__():
    return _public.names(globals())
