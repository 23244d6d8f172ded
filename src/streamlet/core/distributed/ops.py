"""The communication ops: graph nodes whose kernels call the group's engine.

Each op is lazy and runs on the stream it is given (by default the default stream of the
engine's device: the CPU for MPI, the GPU for NCCL), after the communication built
before it (see `order`).  On a group of one, the reductions and the gather return their
input unchanged and send and recv raise, as in MLX.
"""
from __future__ import annotations

from ..array import alias
from ..device import DeviceType
from ..ops import build as b
from . import order
from .group import Group, init

_DEVICES = {"cpu": DeviceType.cpu, "gpu": DeviceType.gpu}


def _group(group, op: str) -> Group:
    if group is None:
        return init()
    if not isinstance(group, Group):
        raise TypeError(f"[{op}] Expected a distributed Group, got {type(group).__name__}.")
    return group


def _check_stream(stream) -> None:
    """Refuse a `stream=` of a wrong kind (DESIGN §3) also where no node is built: on a
    group of one, and before a send or recv finds it has no peer."""
    if stream is not None:
        b.resolve(stream)


_HERE = object()  # a rule's ops go to the stream the transform builds on (its node's)


def _node(op, inputs, shape, dtype, group, stream, after=None, **params):
    """One communication node of `op` on the stream that `stream` names, ordered after
    the communication built before it (or after `after`, for a vmap rule's rebuild)."""
    comm = group._comm
    comm.check(op, dtype.np)
    if stream is _HERE:
        state = b.resolve(None)
    else:
        state = b.resolve(_DEVICES[comm.device] if stream is None else stream)
    return order.build(PRIMS[op], inputs, shape, dtype, {"comm": comm, **params}, state,
                       after)


def _pad(grads, primals):
    """Rule results for the data inputs, then None for the order input (no gradient)."""
    return list(grads) + [None] * (len(primals) - len(grads))


# -- kernels: `after` is the order input, whose value is not needed ---------------------
def _reduce_kernel(reduction):
    def kernel(xp, x, *after, comm):
        return comm.all_reduce(xp, x, reduction)
    return kernel


def _gather_kernel(xp, x, *after, comm):
    return comm.all_gather(xp, x)


def _scatter_kernel(xp, x, *after, comm):
    return comm.sum_scatter(xp, x)


def _send_kernel(xp, x, *after, comm, dst):
    return comm.send(xp, x, dst)


def _recv_kernel(xp, *after, comm, src, out_shape, npdtype):
    return comm.recv(xp, out_shape, npdtype, src)


def _identity_kernel(xp, x, group):
    return x


# -- transform rules, built from ops ---------------------------------------------------
# A rule rebuilds communication on the forward node's stream.  A vmap rule orders its
# node after the rebuilt predecessor it is handed (the traced node's own order input,
# which vmap has already replaced), never after the traced nodes, which have no data.
def _like(op, x, comm, stream=_HERE, after=None):
    """`op` of `x` over `comm`, as the public op builds it."""
    return _node(op, (x,), _shape_of(op, x._shape, comm.size), x._dtype, Group(comm),
                 stream, after)


def _shape_of(op, shape, n):
    if op in ("all_gather", "gather_shards"):
        return (shape[0] * n,) + shape[1:] if shape else (n,)
    if op == "sum_scatter":
        return (shape[0] // n,) + shape[1:]
    return shape


def _reduce_rules(op):
    def vjp(cot, out, *primals, comm):  # as MLX: the cotangent passes through unchanged
        return _pad([cot], primals)

    def jvp(tangents, out, *primals, comm):
        return None if tangents[0] is None else _like(op, tangents[0], comm)

    def vmap(axes, out, x, *after, comm):
        return _like(op, x, comm, after=after), axes[0]

    return {"vjp": vjp, "jvp": jvp, "vmap": vmap}


def _gather_vjp(cot, out, x, *after, comm):
    n = x._shape[0] if x._shape else 1
    part = cot[comm.rank * n:(comm.rank + 1) * n]
    return _pad([part if x._shape else part.reshape(())], (x, *after))


def _shards_vjp(cot, out, x, *after, comm):
    """The mean over the group of each rank's cotangent, this rank's block of it."""
    return _pad([_like("sum_scatter", cot, comm) / comm.size], (x, *after))


def _gather_jvp(tangents, out, *primals, comm):
    return None if tangents[0] is None else _like("all_gather", tangents[0], comm)


def _axis_second(x, axis):
    """`x` with its batch `axis` second, so that an op along each example's first axis
    runs along the array's first axis (a batch of scalars becomes one row)."""
    from ..ops.shape import expand_dims, moveaxis, swapaxes
    x = moveaxis(x, axis, 0)
    return expand_dims(x, 0) if x.ndim == 1 else swapaxes(x, 0, 1)


def _first_axis_vmap(op):
    def vmap(axes, out, x, *after, comm):
        if axes[0] is None:
            return _like(op, x, comm, after=after), None
        y = _like(op, _axis_second(x, axes[0]), comm, after=after)
        return y, 1
    return vmap


def _scatter_vjp(cot, out, x, *after, comm):
    return _pad([_like("all_gather", cot, comm)], (x, *after))


def _scatter_jvp(tangents, out, *primals, comm):
    return None if tangents[0] is None else _like("sum_scatter", tangents[0], comm)


def _send_vmap(axes, out, x, *after, comm, dst):
    return _node("send", (x,), x._shape, x._dtype, Group(comm), _HERE, after, dst=dst), axes[0]


def _recv_vmap(axes, out, *after, comm, src, out_shape, npdtype):
    y = _node("recv", (), out_shape, out._dtype, Group(comm), _HERE, after, src=src,
              out_shape=out_shape, npdtype=npdtype)
    return y, None


def _sum_gradients_vjp(cot, out, x, *, group):
    return (_like("all_sum", cot, group._comm),)


PRIMS = {
    "all_sum": b.make("all_sum", _reduce_kernel("sum"), **_reduce_rules("all_sum")),
    "all_max": b.make("all_max", _reduce_kernel("max"), **_reduce_rules("all_max")),
    "all_min": b.make("all_min", _reduce_kernel("min"), **_reduce_rules("all_min")),
    "all_gather": b.make("all_gather", _gather_kernel, vjp=_gather_vjp, jvp=_gather_jvp,
                         vmap=_first_axis_vmap("all_gather")),
    # all_gather whose gradient is the group's mean, scattered: sharded parameters
    "gather_shards": b.make("gather_shards", _gather_kernel, vjp=_shards_vjp,
                            jvp=_gather_jvp, vmap=_first_axis_vmap("all_gather")),
    "sum_scatter": b.make("sum_scatter", _scatter_kernel, vjp=_scatter_vjp,
                          jvp=_scatter_jvp, vmap=_first_axis_vmap("sum_scatter")),
    "send": b.make("send", _send_kernel, vmap=_send_vmap),
    "recv": b.make("recv", _recv_kernel, vmap=_recv_vmap),
}
# The identity whose gradient is summed over a group (AllToShardedLinear's input).
_SUM_GRADIENTS = b.make("sum_gradients", _identity_kernel, vjp=_sum_gradients_vjp,
                        jvp=lambda tangents, out, x, group: tangents[0],
                        vmap=lambda axes, out, x, group: (sum_gradients(x, group), axes[0]))


def gather_shards(x, group=None):
    """`all_gather(x)` whose gradient is the mean of every rank's cotangent, reduced and
    scattered back to this rank's shard (fully sharded data parallelism)."""
    x = b.as_array(x, "gather_shards")
    group = _group(group, "gather_shards")
    if group.size() == 1:
        return alias(x)
    return _node("gather_shards", (x,), _shape_of("all_gather", x._shape, group.size()),
                 x._dtype, group, None)


def sum_gradients(x, group=None):
    """`x` itself, whose gradient is summed over `group` in the backward pass (what a
    layer computing with a shard of the weights needs for its full input gradient)."""
    x = b.as_array(x, "sum_gradients")
    group = _group(group, "sum_gradients")
    if group.size() == 1:
        return alias(x)
    return b.node(_SUM_GRADIENTS, (x,), x._shape, x._dtype, {"group": group},
                  b.resolve(None))


# -- the public ops --------------------------------------------------------------------
def _all_reduce(op, x, group, stream):
    x = b.as_array(x, op)
    group = _group(group, op)
    if group.size() == 1:
        _check_stream(stream)
        return alias(x)
    return _node(op, (x,), x._shape, x._dtype, group, stream)


def all_sum(x, *, group=None, stream=None):
    """Sum `x` over every process of `group` (None: the world from `init()`).

    >>> mx.distributed.all_sum(mx.array([1.0, 2.0])).tolist()   # alone: x itself
    [1.0, 2.0]
    """
    return _all_reduce("all_sum", x, group, stream)


def all_max(x, *, group=None, stream=None):
    """The elementwise maximum of `x` over every process of `group`.

    >>> mx.distributed.all_max(mx.array([3, 1])).tolist()
    [3, 1]
    """
    return _all_reduce("all_max", x, group, stream)


def all_min(x, *, group=None, stream=None):
    """The elementwise minimum of `x` over every process of `group`.

    >>> mx.distributed.all_min(mx.array([3, 1])).tolist()
    [3, 1]
    """
    return _all_reduce("all_min", x, group, stream)


def all_gather(x, *, group=None, stream=None):
    """The `x` of every process of `group`, concatenated along the first axis in rank
    order (a scalar `x` gives a vector of one entry per process).

    >>> mx.distributed.all_gather(mx.ones((2, 3))).shape
    (2, 3)
    """
    x = b.as_array(x, "all_gather")
    group = _group(group, "all_gather")
    n = group.size()
    if n == 1:
        _check_stream(stream)
        return alias(x)
    shape = (x._shape[0] * n,) + x._shape[1:] if x._shape else (n,)
    return _node("all_gather", (x,), shape, x._dtype, group, stream)


def sum_scatter(x, *, group=None, stream=None):
    """Sum `x` over the group and keep this process's share of the first axis: the rows
    `rank * k` to `(rank + 1) * k` of the sum, with `k = x.shape[0] // group.size()`.

    >>> mx.distributed.sum_scatter(mx.ones((4, 2))).shape
    (4, 2)
    """
    x = b.as_array(x, "sum_scatter")
    group = _group(group, "sum_scatter")
    n = group.size()
    if n == 1:
        _check_stream(stream)
        return alias(x)
    if not x._shape or x._shape[0] % n:
        raise ValueError(f"[sum_scatter] Invalid shape={x._shape} for a group of size {n}. "
                         "The first dimension (axis 0) must be divisible by the group size "
                         "and the input must have at least one.")
    shape = (x._shape[0] // n,) + x._shape[1:]
    return _node("sum_scatter", (x,), shape, x._dtype, group, stream)


def _peer(rank, group, stream, op, what) -> int:
    """`rank` as an int, once checked to name a peer in `group` (and `stream` checked)."""
    rank = b.int_arg(rank, op, what)
    _check_stream(stream)
    if group.size() == 1:
        raise ValueError(f"Cannot {op} {'to' if op == 'send' else 'from'} a singleton group")
    if not 0 <= rank < group.size():
        raise ValueError(f"[{op}] Invalid {what}={rank} for a group of size {group.size()}")
    return rank


def send(x, dst, *, group=None, stream=None):
    """Send `x` to the process of rank `dst` in `group`; returns an array equal to `x`
    whose evaluation performs the send.

    >>> mx.distributed.send(mx.ones(2), 0)
    Traceback (most recent call last):
    ValueError: Cannot send to a singleton group
    """
    x = b.as_array(x, "send")
    group = _group(group, "send")
    dst = _peer(dst, group, stream, "send", "destination")
    return _node("send", (x,), x._shape, x._dtype, group, stream, dst=dst)


def recv(shape, dtype, src, *, group=None, stream=None):
    """Receive an array of `shape` and `dtype` from the process of rank `src` in `group`.

    >>> mx.distributed.recv((2,), mx.float32, 0)
    Traceback (most recent call last):
    ValueError: Cannot recv from a singleton group
    """
    if not hasattr(shape, "__iter__"):  # a sequence, as MLX takes it: not a bare size
        raise TypeError(f"[recv] Expected a sequence of ints as the shape, got "
                        f"{type(shape).__name__}.")
    shape = b.check_shape(shape, "recv")
    dtype = b.dt.as_dtype(dtype)
    group = _group(group, "recv")
    src = _peer(src, group, stream, "recv", "source")
    return _node("recv", (), shape, dtype, group, stream, src=src,
                 out_shape=shape, npdtype=dtype.np)


def recv_like(x, src, *, group=None, stream=None):
    """Receive an array shaped and typed like `x` from the process of rank `src`.

    >>> mx.distributed.recv_like(mx.ones(2), 0)
    Traceback (most recent call last):
    ValueError: Cannot recv from a singleton group
    """
    x = b.as_array(x, "recv_like")
    return recv(x._shape, x._dtype, src, group=group, stream=stream)


