"""Side-by-side timings of fft transforms, the Hadamard transform and linear algebra:
streamlet, mlx and NumPy.

Run: `.venv/bin/python bench/bench_ops_b.py`.  Each op is built and evaluated from
scratch per repetition (inputs already evaluated); the median of 5 after one warm-up
is reported with ratios to NumPy and to mlx.
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
SIG = RNG.standard_normal((64, 16384)).astype(np.float32)
Z = (RNG.standard_normal((64, 16384)) + 1j * RNG.standard_normal((64, 16384))).astype(
    np.complex64)
IMG = RNG.standard_normal((16, 256, 256)).astype(np.float32)
M512 = (RNG.standard_normal((512, 512)) + 512 * np.eye(512)).astype(np.float32)
AUDIO = RNG.standard_normal(1 << 20).astype(np.float32)


def _np_stft(x, n_fft=512, hop=128):
    pad = np.pad(x, n_fft // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(pad, n_fft)[::hop]
    return np.fft.rfft(frames, axis=-1).astype(np.complex64).T


def _np_fwht(x):
    """The fast Walsh-Hadamard transform as NumPy code would write it (log2 n passes)."""
    n, h = x.shape[-1], 1
    while h < n:
        x = x.reshape(x.shape[:-1] + (n // (2 * h), 2, h))
        x = np.stack([x[..., 0, :] + x[..., 1, :], x[..., 0, :] - x[..., 1, :]], axis=-2)
        x = x.reshape(x.shape[:-3] + (n,))
        h *= 2
    return x / np.float32(np.sqrt(n))


# name: (NumPy version, version for an mlx-like module M given prepared inputs)
CASES = {
    "fft complex 64x16384": (lambda: np.fft.fft(Z), lambda M, z, *_: M.fft.fft(z)),
    "rfft 64x16384": (lambda: np.fft.rfft(SIG), lambda M, z, s, *_: M.fft.rfft(s)),
    "irfft 64x8193 -> 64x16384": (
        lambda: np.fft.irfft(np.fft.rfft(SIG)),
        lambda M, z, s, *_: M.fft.irfft(M.fft.rfft(s))),
    "fft2 16x256x256 (real in)": (lambda: np.fft.fft2(IMG).astype(np.complex64),
                                  lambda M, z, s, img, *_: M.fft.fft2(img)),
    "stft n_fft=512 hop=128 of 1M": (lambda: _np_stft(AUDIO),
                                     lambda M, z, s, img, m, a: M.fft.stft(a, n_fft=512,
                                                                          hop_length=128)),
    "hadamard_transform 64x16384": (lambda: _np_fwht(SIG),
                                    lambda M, z, s, *_: M.hadamard_transform(s)),
    "linalg.inv 512x512": (lambda: np.linalg.inv(M512),
                           lambda M, z, s, img, m, a: M.linalg.inv(m, stream=M.cpu)),
    "linalg.svd 512x512": (lambda: np.linalg.svd(M512),
                           lambda M, z, s, img, m, a: M.linalg.svd(m, stream=M.cpu)),
}


def main():
    compare_ops(CASES, (Z, SIG, IMG, M512, AUDIO), {"streamlet": sl, "mlx": mlx})


if __name__ == "__main__":
    main()
