"""Run by test_nn_distributed.py under `python -m streamlet.launch -n 2`: nn.average_gradients
on every rank against the mean of every rank's gradients (which each rank can compute)."""
import sys
import traceback

import numpy as np

import streamlet.core as mx
import streamlet.nn as nn
from streamlet.utils import tree_flatten, tree_unflatten


def gradients(rank, dtype=np.float32):
    rng = np.random.default_rng(rank)
    shapes = {"w": (3, 4), "layers": [{"b": (5,)}, {"k": (2, 2, 2)}], "s": ()}
    return {"w": rng.normal(size=shapes["w"]).astype(dtype),
            "layers": [{"b": rng.normal(size=(5,)).astype(dtype)},
                       {"k": rng.normal(size=(2, 2, 2)).astype(np.float16)}],
            "s": np.array(rng.normal(), dtype)}


def check(size, all_reduce_size, mixed):
    rank = mx.distributed.init().rank()
    mine = gradients(rank)
    if not mixed:  # one dtype: the arrays are concatenated into all-reduces
        mine["layers"][1]["k"] = mine["layers"][1]["k"].astype(np.float32)
    flat = tree_flatten(mine)
    want = dict(tree_flatten(gradients(0)))
    for r in range(1, size):
        for k, v in tree_flatten(gradients(r)):
            want[k] = want[k] + v
    tree = nn.average_gradients(tree_unflatten([(k, mx.array(v)) for k, v in flat]),
                                all_reduce_size=all_reduce_size)
    got = dict(tree_flatten(tree))
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(np.array(got[k]).astype(np.float32),
                                   (want[k] / size).astype(np.float32), rtol=2e-3, atol=2e-3,
                                   err_msg=k)
        assert got[k].shape == tuple(want[k].shape), k


def main():
    size = mx.distributed.init().size()
    failed = 0
    for all_reduce_size, mixed in ((0, False), (16, False), (32 * 1024**2, False),
                                   (32 * 1024**2, True)):
        try:
            check(size, all_reduce_size, mixed)
            line = f"OK {all_reduce_size} {mixed}\n"
        except Exception:
            failed += 1
            line = f"FAIL {all_reduce_size} {mixed}: " + traceback.format_exc().replace(
                "\n", " | ") + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
