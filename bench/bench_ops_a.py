"""Side-by-side timings of sort, cumsum, take and einsum: streamlet, mlx and NumPy.

Run: `.venv/bin/python bench/bench_ops_a.py`.  Each op is built and evaluated
from scratch per repetition; the median of 5 is reported with ratios to NumPy.
"""
from __future__ import annotations

import numpy as np

import streamlet.core as sl
from timing import compare_ops

try:
    import mlx.core as mlx
except ImportError:  # mlx is an optional oracle
    mlx = None

RNG = np.random.default_rng(0)
A = RNG.standard_normal((1000, 1000)).astype(np.float32)
IDX = RNG.integers(0, A.size, 1_000_000).astype(np.int32)
B = RNG.standard_normal((32, 128, 128)).astype(np.float32)
C = RNG.standard_normal((32, 128, 128)).astype(np.float32)

# name: (NumPy version, version for an mlx-like module M taking prepared inputs)
CASES = {
    "sort 1000x1000 axis=-1": (lambda: np.sort(A, -1), lambda M, a, *_: M.sort(a, -1)),
    "cumsum 1000x1000 axis=1": (lambda: np.cumsum(A, 1), lambda M, a, *_: M.cumsum(a, 1)),
    "take 1M of 1M": (lambda: np.take(A, IDX), lambda M, a, idx, *_: M.take(a, idx)),
    "einsum bij,bjk->bik 32x128^3": (
        lambda: np.einsum("bij,bjk->bik", B, C, optimize="greedy"),
        lambda M, a, idx, b, c: M.einsum("bij,bjk->bik", b, c)),
}


def main():
    compare_ops(CASES, (A, IDX, B, C), {"streamlet": sl, "mlx": mlx})


if __name__ == "__main__":
    main()
