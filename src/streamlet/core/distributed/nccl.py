"""The NCCL engine: GPU arrays between GPUs, through CuPy's NCCL bindings (cupy.cuda.nccl).

Kernels run on the CUDA stream of the node's GPU stream (the CUDA backend makes it CuPy's
current stream), so NCCL's work is ordered with the rest of that stream and the host
does not wait for it.  bfloat16 arrays reach the kernels as float32 (the CUDA backend
computes bfloat16 in float32) and travel as float32.

Bootstrap.  NCCL needs its unique id handed from rank 0 to the others.  We hand it over
MPI, so a group of several processes is launched like an MPI one
(`python -m streamlet.launch --backend nccl -n N`, one process per GPU); a lone process
forms a group of one when MLX_RANK=0 and MLX_WORLD_SIZE=1 are set (as MLX's launcher
sets them).
"""
from __future__ import annotations

import importlib.util
import os

from . import mpi

_LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK")


def _nccl():
    from cupy.cuda import nccl
    return nccl


def is_available() -> bool:
    """True when CuPy has NCCL and a GPU is visible."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        nccl = _nccl()
        import cupy
        return bool(getattr(nccl, "available", True)) and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, no NCCL library: not available, whatever the reason
        return False


def init(strict: bool):
    """The world communicator over NCCL, or None where no group can be formed.

    Under an MPI launcher, `backend="nccl"` forms the group; "any" does only where the
    launch asked for NCCL (`streamlet.launch --backend nccl`, which sets MLX_WORLD_SIZE),
    so a CPU program launched on a GPU host keeps communicating through MPI.
    """
    if not is_available():
        if strict:
            raise RuntimeError("Cannot initialize nccl distributed backend: it needs CuPy "
                               "with NCCL and a CUDA GPU.")
        return None
    try:
        return _world(strict)
    except Exception:
        if strict:
            raise
        return None  # e.g. more processes than GPUs: "any" falls back to MPI


def _world(strict):
    if mpi.launched() and mpi.is_available():
        if not (strict or "MLX_WORLD_SIZE" in os.environ):
            return None
        world = mpi.module().COMM_WORLD
        rank, size, boot = world.Get_rank(), world.Get_size(), world
    elif "MLX_WORLD_SIZE" in os.environ and "MLX_RANK" in os.environ:
        rank, size, boot = int(os.environ["MLX_RANK"]), int(os.environ["MLX_WORLD_SIZE"]), None
        if size > 1:
            raise RuntimeError("[nccl] A group of several processes is bootstrapped "
                               "through MPI: start it with `python -m streamlet.launch "
                               "--backend nccl`.")
    else:
        if strict:
            raise RuntimeError("Cannot initialize nccl distributed backend: start the "
                               "processes with `python -m streamlet.launch --backend nccl "
                               "-n N` (or set MLX_RANK=0 and MLX_WORLD_SIZE=1 for a group "
                               "of one).")
        return None
    import cupy
    local = next((int(os.environ[v]) for v in _LOCAL_RANK_VARS if v in os.environ), rank)
    device = local % cupy.cuda.runtime.getDeviceCount()
    return Comm.create(device, rank, size, boot)


# NCCL's types for the dtypes kernels see; integers it lacks travel widened (a sum of
# int16 in int32, narrowed back, wraps as int16 arithmetic does), bools as bytes
_WIDEN = {"int16": "int32", "uint16": "uint32", "bool": "uint8"}
_BOOL_OPS = {"sum": "max", "max": "max", "min": "min"}  # a sum of bools is their `or`


class Comm:
    """One NCCL communicator (and the MPI communicator that bootstraps its splits)."""

    device = "gpu"

    def __init__(self, comm, device, rank, size, boot):
        self.comm, self.gpu, self.rank, self.size, self.boot = comm, device, rank, size, boot

    @classmethod
    def create(cls, device, rank, size, boot):
        import cupy
        nccl = _nccl()
        uid = nccl.get_unique_id() if rank == 0 else None
        if boot is not None and size > 1:
            uid = boot.bcast(uid, root=0)
        with cupy.cuda.Device(device):
            comm = nccl.NcclCommunicator(size, uid, rank)
        return cls(comm, device, rank, size, boot)

    def split(self, color: int, key: int) -> "Comm":
        if self.boot is None:  # a group of one splits into a group of one
            return Comm.create(self.gpu, 0, 1, None)
        sub = self.boot.Split(color, key)
        return Comm.create(self.gpu, sub.Get_rank(), sub.Get_size(), sub)

    def check(self, op, npdtype):
        """Raise, when the op is built, for what NCCL cannot compute."""
        if npdtype.kind == "c" and op in ("all_max", "all_min"):
            raise TypeError(f"[{op}] The nccl backend has no {op[4:]} of {npdtype.name}.")

    # -- kernels (xp is CuPy; the current CUDA stream is the node's) --------------------
    @staticmethod
    def _type(x):
        nccl = _nccl()
        if x.dtype.kind == "c":
            return getattr(nccl, f"NCCL_FLOAT{x.dtype.itemsize * 4}"), x.size * 2
        return getattr(nccl, f"NCCL_{x.dtype.name.upper()}"), x.size

    def all_reduce(self, xp, x, reduction):
        x = xp.asarray(x, order="C")
        kept, name = x.dtype, x.dtype.name
        if name in _WIDEN:
            x = x.astype(_WIDEN[name])
            if name == "bool":
                reduction = _BOOL_OPS[reduction]
        out = xp.empty_like(x)
        nccl_type, count = self._type(x)
        op = getattr(_nccl(), f"NCCL_{reduction.upper()}")
        self.comm.allReduce(x.data.ptr, out.data.ptr, count, nccl_type, op, _stream(xp))
        return out if out.dtype == kept else out.astype(kept)

    def all_gather(self, xp, x):
        x = xp.asarray(x, order="C")
        out = xp.empty((self.size,) + x.shape, x.dtype)
        self.comm.allGather(x.data.ptr, out.data.ptr, x.nbytes, _nccl().NCCL_UINT8,
                            _stream(xp))
        return out.reshape((self.size * x.shape[0],) + x.shape[1:]) if x.ndim else out

    def sum_scatter(self, xp, x):
        x = xp.asarray(x, order="C")
        kept, name = x.dtype, x.dtype.name
        if name in _WIDEN:
            x = x.astype(_WIDEN[name])
        out = xp.empty((x.shape[0] // self.size,) + x.shape[1:], x.dtype)
        nccl_type, count = self._type(out)
        op = _nccl().NCCL_MAX if name == "bool" else _nccl().NCCL_SUM
        self.comm.reduceScatter(x.data.ptr, out.data.ptr, count, nccl_type, op, _stream(xp))
        return out if out.dtype == kept else out.astype(kept)

    def send(self, xp, x, dst):
        x = xp.asarray(x, order="C")
        self.comm.send(x.data.ptr, x.nbytes, _nccl().NCCL_UINT8, dst, _stream(xp))
        return x

    def recv(self, xp, shape, npdtype, src):
        out = xp.empty(shape, npdtype)
        self.comm.recv(out.data.ptr, out.nbytes, _nccl().NCCL_UINT8, src, _stream(xp))
        return out


def _stream(xp):
    return xp.cuda.get_current_stream().ptr
