"""conv2d of a ResNet-like block: streamlet against mlx.core, side by side in one run.

    .venv/bin/python bench/bench_conv.py [--batch 8] [--forms]

Prints each convolution's time (median of 5, float32, NHWC) and the throughput ratio
(MLX time / streamlet time; higher is better; the issue-12 target is >= 1.0), then the
whole block (conv-relu-conv plus the shortcut, and a strided block with a 1x1
projection).  `--forms` also times NumPy formulations of the 3x3 convolution's kernel:
one GEMM over strided windows (what streamlet runs), a sum of shifted matmuls, and
tensordot on the windows, which is how the kernel was chosen.
"""
from __future__ import annotations

import argparse

import mlx.core as mlx_core
import numpy as np

import streamlet.core as mx
from timing import median_time


def _cases(n):
    # (name, input NHWC, weight OHWI, stride, padding, groups)
    return [
        ("3x3 64->64, 56x56", (n, 56, 56, 64), (64, 3, 3, 64), 1, 1, 1),
        ("3x3/2 64->128, 56x56", (n, 56, 56, 64), (128, 3, 3, 64), 2, 1, 1),
        ("1x1/2 64->128 projection", (n, 56, 56, 64), (128, 1, 1, 64), 2, 0, 1),
        ("3x3 128->128, 28x28", (n, 28, 28, 128), (128, 3, 3, 128), 1, 1, 1),
        ("3x3 256->256, 14x14", (n, 14, 14, 256), (256, 3, 3, 256), 1, 1, 1),
        ("7x7/2 3->64 stem, 112x112", (n, 112, 112, 3), (64, 7, 7, 3), 2, 3, 1),
        ("3x3 depthwise 128, 28x28", (n, 28, 28, 128), (128, 3, 3, 1), 1, 1, 128),
    ]


def _block(M, x, w1, w2, proj=None, stride=1):
    """A basic residual block: conv-relu-conv, plus the input (or its projection)."""
    y = M.maximum(M.conv2d(x, w1, stride=stride, padding=1), 0)
    y = M.conv2d(y, w2, padding=1)
    return M.maximum(y + (x if proj is None else M.conv2d(x, proj, stride=stride)), 0)


def _time(M, fn, arrays):
    inputs = [M.array(a) for a in arrays]
    M.eval(*inputs)
    return median_time(lambda: M.eval(fn(M, *inputs)))


def _row(name, ours, theirs):
    print(f"{name:<30}{ours * 1e3:>14.2f}{theirs * 1e3:>10.2f}{theirs / ours:>8.2f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--forms", action="store_true")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"float32 NHWC, batch {args.batch}, median of 5; ratio = MLX time / streamlet time")
    print(f"{'case':<30}{'streamlet ms':>14}{'mlx ms':>10}{'ratio':>8}")
    for name, xs, ws, stride, pad, groups in _cases(args.batch):
        x = rng.standard_normal(xs, dtype=np.float32)
        w = rng.standard_normal(ws, dtype=np.float32) * 0.1
        fn = lambda M, x, w: M.conv2d(x, w, stride=stride, padding=pad,  # noqa: E731
                                      groups=groups)
        _row(name, _time(mx, fn, (x, w)), _time(mlx_core, fn, (x, w)))
    n = args.batch
    x = rng.standard_normal((n, 56, 56, 64), dtype=np.float32)
    w64 = [rng.standard_normal((64, 3, 3, 64), dtype=np.float32) * 0.05 for _ in range(2)]
    w128 = [rng.standard_normal((128, 3, 3, c), dtype=np.float32) * 0.05 for c in (64, 128)]
    proj = rng.standard_normal((128, 1, 1, 64), dtype=np.float32) * 0.1
    blocks = [("block 64, 56x56", lambda M, x, a, b: _block(M, x, a, b), (x, *w64)),
              ("block 64->128 /2 + projection",
               lambda M, x, a, b, p: _block(M, x, a, b, p, 2), (x, *w128, proj))]
    for name, fn, arrays in blocks:
        _row(name, _time(mx, fn, arrays), _time(mlx_core, fn, arrays))
    if args.forms:
        _forms(rng, n)


def _forms(rng, n):
    """NumPy formulations of a padded 3x3 convolution, for the kernel's choice."""
    x = rng.standard_normal((n, 56, 56, 64), dtype=np.float32)
    w = rng.standard_normal((64, 3, 3, 64), dtype=np.float32)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    st = xp.strides
    win = np.lib.stride_tricks.as_strided(xp, (n, 56, 56, 3, 3, 64),
                                          (st[0], st[1], st[2], st[1], st[2], st[3]))

    def gemm():
        return win.reshape(-1, 9 * 64) @ w.reshape(64, -1).T

    def shifted():
        out = np.zeros((n, 56, 56, 64), np.float32)
        for i in range(3):
            for j in range(3):
                out += xp[:, i:i + 56, j:j + 56] @ w[:, i, j].T
        return out

    def tensordot():
        return np.tensordot(win, w, axes=([3, 4, 5], [1, 2, 3]))

    print("\nNumPy kernels of the 3x3 64->64 convolution (ms, median of 5)")
    for name, fn in (("strided windows + one GEMM", gemm), ("9 shifted matmuls", shifted),
                     ("tensordot on windows", tensordot)):
        print(f"{name:<30}{median_time(fn) * 1e3:>14.2f}")


if __name__ == "__main__":
    main()
