"""One process of tests/test_distributed.py's multi-process run (not collected by pytest).

    python -m streamlet.launch -n 4 tests/distributed_worker.py

Every rank runs every check and prints `OK name` or `FAIL name: reason`; the expected
values come from NumPy, each rank drawing all ranks' inputs from the same seeds.
"""
from __future__ import annotations

import sys
import threading
import traceback

import ml_dtypes
import numpy as np

import streamlet.core as mx

mx.set_default_device(mx.cpu)
D = mx.distributed
WORLD = D.init(strict=True, backend="mpi")
R, N = WORLD.rank(), WORLD.size()
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def inputs(shape, npdtype, seed=0, group_ranks=None):
    """Each rank's input (by its world rank), drawn the same way on every rank."""
    out = []
    for r in group_ranks if group_ranks is not None else range(N):
        g = np.random.default_rng(1000 * seed + r)
        if npdtype == np.bool_:
            out.append(g.random(shape) < 0.3)
        elif np.dtype(npdtype).kind in "iu":
            info = np.iinfo(npdtype)
            out.append(g.integers(max(info.min, -50), min(info.max, 50), shape).astype(npdtype))
        elif np.dtype(npdtype).kind == "c":
            out.append((g.standard_normal(shape) + 1j * g.standard_normal(shape))
                       .astype(npdtype))
        else:
            out.append(g.standard_normal(shape).astype(npdtype))
    return out


DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.uint8,
          np.int16, np.uint16, np.int32, np.uint32, np.int64, np.complex64, np.bool_]


@check
def reductions():
    for k, npdtype in enumerate(DTYPES):
        for shape in [(), (7,), (3, 5)]:
            xs = inputs(shape, npdtype, seed=k)
            x = mx.array(xs[R], dtype=mx.float64 if npdtype == np.float64 else None)
            stack = np.stack([a.astype(np.float64) if npdtype == ml_dtypes.bfloat16 else a
                              for a in xs])
            got = {op: getattr(D, op)(x).__array__() for op in ("all_sum", "all_max",
                                                                 "all_min")}
            if npdtype == np.bool_:
                want = {"all_sum": stack.any(0), "all_max": stack.any(0),
                        "all_min": stack.all(0)}
            elif np.dtype(npdtype).kind == "c":
                want = {"all_sum": stack.sum(0), "all_max": np.maximum.reduce(stack),
                        "all_min": np.minimum.reduce(stack)}
            else:
                want = {"all_sum": stack.sum(0).astype(stack.dtype), "all_max": stack.max(0),
                        "all_min": stack.min(0)}
            for op, w in want.items():
                g = got[op]
                assert g.shape == shape and g.dtype == np.dtype(npdtype), (op, npdtype, shape)
                tol = {np.float16: 1e-2, ml_dtypes.bfloat16: 5e-2}.get(npdtype, 1e-5)
                if op == "all_sum" and np.dtype(npdtype).kind in "fcV":
                    np.testing.assert_allclose(g.astype(np.complex128 if npdtype ==
                                                        np.complex64 else np.float64),
                                               w, rtol=tol, atol=tol, err_msg=f"{op} {npdtype}")
                else:
                    np.testing.assert_array_equal(g.astype(w.dtype), w,
                                                  err_msg=f"{op} {npdtype}")


@check
def gather_and_scatter():
    for k, (shape, npdtype) in enumerate([((), np.float32), ((2, 3), np.int16),
                                          ((4,), np.bool_), ((1, 2, 2), np.float16)]):
        xs = inputs(shape, npdtype, seed=10 + k)
        got = np.asarray(D.all_gather(mx.array(xs[R])))
        want = np.stack(xs) if shape == () else np.concatenate(xs)
        np.testing.assert_array_equal(got, want)
    xs = inputs((N * 2, 3), np.float32, seed=20)
    got = np.asarray(D.sum_scatter(mx.array(xs[R])))
    np.testing.assert_allclose(got, np.sum(xs, 0)[2 * R:2 * R + 2], rtol=1e-5)
    try:
        D.sum_scatter(mx.ones((N + 1,)))
    except ValueError as e:
        assert "sum_scatter" in str(e)
    else:
        raise AssertionError("sum_scatter of an indivisible shape did not raise")


@check
def send_recv():
    x = mx.arange(5) * (R + 1)
    nxt, prv = (R + 1) % N, (R - 1) % N
    if R % 2 == 0:  # evens send first, odds receive first: no rank waits on itself
        sent = D.send(x, nxt)
        got = D.recv_like(x, prv)
    else:
        got = D.recv((5,), mx.int32, prv)
        sent = D.send(x, nxt)
    mx.eval(sent, got)
    assert np.asarray(sent).tolist() == np.asarray(x).tolist()
    assert np.asarray(got).tolist() == (np.arange(5) * (prv + 1)).tolist()


@check
def split_groups():
    sub = WORLD.split(R % 2)
    members = [r for r in range(N) if r % 2 == R % 2]
    assert (sub.size(), sub.rank()) == (len(members), members.index(R))
    assert D.all_sum(mx.array(R), group=sub).item() == sum(members)
    rev = WORLD.split(0, key=N - R)  # a key orders the ranks
    assert rev.rank() == N - 1 - R
    assert D.all_gather(mx.array([R]), group=rev).tolist() == list(range(N))[::-1]


@check
def streams_keep_program_order():
    """Collectives on two streams whose inputs are ready in opposite orders on even and
    odd ranks still meet in build order (they differ in size, so a mix-up would fail)."""
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    base = mx.random.uniform(shape=(1 << 20,), key=mx.random.key(3))
    mx.eval(base)

    def slow(v, s):
        for _ in range(6):
            v = mx.exp(mx.sin(v, stream=s), stream=s) * 0.5
        return v
    a_in = slow(base, s1) if R % 2 == 0 else base * 1.0
    b_in = (base * 1.0 if R % 2 == 0 else slow(base, s2))[:1000]
    a = D.all_sum(a_in, stream=s1)  # built first: every rank issues it first
    b = D.all_max(b_in, stream=s2)
    mx.eval(a, b)
    slow_np = np.asarray(slow(base, s1))
    base_np = np.asarray(base)
    n_even = (N + 1) // 2
    np.testing.assert_allclose(np.asarray(a), n_even * slow_np + (N - n_even) * base_np,
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(b), np.maximum(slow_np, base_np)[:1000] if N > 1
                               else base_np[:1000], rtol=1e-6)


@check
def communication_stream_beside_compute():
    """async_eval puts the all_sum on its stream's worker while compute runs elsewhere;
    results are right and the calling thread is free meanwhile."""
    comm_s, comp_s = mx.new_thread_unsafe_stream(mx.cpu), mx.new_stream(mx.cpu)
    g = mx.ones((1 << 18,)) * (R + 1)
    w = mx.random.uniform(shape=(1 << 19,), key=mx.random.key(5))
    mx.eval(g, w)
    total = D.all_sum(g, stream=comm_s)
    mx.async_eval(total)
    y = mx.exp(mx.sin(w, stream=comp_s), stream=comp_s)
    mx.eval(y, total)
    assert np.asarray(total)[:3].tolist() == [N * (N + 1) / 2] * 3
    seen = []
    t = threading.Thread(target=lambda: seen.append(D.all_sum(mx.array([1.0]),
                                                              stream=comm_s).item()))
    t.start()
    t.join(60)
    assert seen == [float(N)], seen


@check
def recycled_outputs_stay_apart():
    """Large outputs reuse freed blocks; outputs still alive keep their own values."""
    kept = []
    for i in range(5):
        y = D.all_sum(mx.full((1 << 19,), float(i + R)))
        mx.eval(y)
        if i % 2 == 0:
            kept.append((i, y))
        del y
    for i, y in kept:
        v = np.asarray(y)
        assert v[0] == v[-1] == N * i + N * (N - 1) / 2, (i, v[0])


@check
def gradients():
    x = mx.array([1.0, 2.0, 3.0])
    g = mx.grad(lambda v: (D.all_sum(v) * v).sum())(x)
    # as MLX: all_sum's cotangent passes through, so d/dv (all_sum(v) * v) = v + all_sum(v)
    np.testing.assert_allclose(np.asarray(g), [N * 1 + 1, N * 2 + 2, N * 3 + 3])
    from streamlet.core.distributed.ops import sum_gradients
    w = mx.array([float(R + 1)] * 3)
    g = mx.grad(lambda v: (sum_gradients(v) * w).sum())(x)
    np.testing.assert_allclose(np.asarray(g), [N * (N + 1) / 2] * 3)
    part = mx.grad(lambda v: (D.all_gather(v) * mx.arange(3 * N)).sum())(x)
    np.testing.assert_allclose(np.asarray(part), np.arange(3 * R, 3 * R + 3))


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@check
def sharded_linear_layers():
    import streamlet.nn as nn
    from streamlet.nn.layers.distributed import clip_grad_norm_sharded, shard_linear
    mx.random.seed(11)  # the same layers and inputs on every rank
    lin, x = nn.Linear(16, 8), mx.random.normal((3, 16))
    out, inp = slice(R * 8 // N, (R + 1) * 8 // N), slice(R * 16 // N, (R + 1) * 16 // N)
    y = lin(x)
    _close(shard_linear(lin, "all-to-sharded")(x), y[:, out])
    _close(shard_linear(lin, "sharded-to-all")(x[:, inp]), y)
    model = nn.Sequential(nn.Linear(16, 8), nn.Linear(8, 4))
    sharded = nn.Sequential(shard_linear(model.layers[0], "all-to-sharded"),
                            shard_linear(model.layers[1], "sharded-to-all"))

    def loss(m, v):
        return (m(v) ** 2).sum()
    l1, g1 = nn.value_and_grad(model, loss)(model, x)
    l2, g2 = nn.value_and_grad(sharded, loss)(sharded, x)
    _close(l1, l2, 1e-4)
    w0, w1 = g1["layers"][0], g1["layers"][1]
    s0, s1 = g2["layers"][0], g2["layers"][1]
    _close(w0["weight"][out], s0["weight"], 1e-4)
    _close(w0["bias"][out], s0["bias"], 1e-4)
    _close(w1["weight"][:, out], s1["weight"], 1e-4)
    _close(w1["bias"], s1["bias"], 1e-4)
    # the input's gradient is whole on every rank (summed over the shards)
    _close(mx.grad(lambda v: loss(model, v))(x), mx.grad(lambda v: loss(sharded, v))(x), 1e-4)
    clipped, norm = clip_grad_norm_sharded({"a": mx.ones((2,)) * (R + 1)}, 1.0)
    want = np.sqrt(sum(2 * (r + 1) ** 2 for r in range(N)))
    _close(norm, want)
    _close(clipped["a"], np.ones(2) * (R + 1) / (want + 1e-6))


@check
def fully_sharded_module():
    import streamlet.nn as nn
    from streamlet.nn.layers.distributed import FullyShardedModule, fully_shard
    mx.random.seed(12)
    whole = nn.Linear(8, 4)
    mx.random.seed(12)
    fsdp = fully_shard(nn.Linear(8, 4))
    assert isinstance(fsdp, FullyShardedModule)
    assert fsdp.module.weight.shape == (4 // N, 8)
    xs = [mx.random.normal((2, 8), key=mx.random.key(100 + r)) for r in range(N)]
    _close(fsdp(xs[R]), whole(xs[R]))

    def loss(m, v):
        return (m(v) ** 2).sum()
    _, g = nn.value_and_grad(fsdp, loss)(fsdp, xs[R])
    mean = [np.mean([np.asarray(nn.value_and_grad(whole, loss)(whole, v)[1][k]) for v in xs], 0)
            for k in ("weight", "bias")]
    rows = slice(R * 4 // N, (R + 1) * 4 // N)
    _close(g["module"]["weight"], mean[0][rows], 1e-4)
    _close(g["module"]["bias"], mean[1][rows], 1e-4)


def main():
    failed = 0
    for fn in CHECKS:
        try:
            fn()
            line = f"OK {fn.__name__}\n"
        except Exception:
            failed += 1
            line = f"FAIL {fn.__name__}: " + traceback.format_exc().replace("\n", " | ") + "\n"
        sys.stdout.write(line)  # one write per line: the ranks share the launcher's pipe
        sys.stdout.flush()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
