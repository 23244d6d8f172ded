"""FFTs against MLX 0.32.4 and NumPy: `axes=None` means every axis for the 2-D and n-D
transforms, and fftfreq/rfftfreq refuse a zero spacing when built."""
import numpy as np
import pytest

import streamlet.core as mx
from parity import assert_same

OPS = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]


@pytest.mark.parametrize("op", OPS)
def test_axes_none_transforms_every_axis(rng, op):
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    if not op.startswith("r"):
        x = (x + 1j * rng.standard_normal(x.shape)).astype(np.complex64)
    got = np.array(getattr(mx.fft, op)(mx.array(x), axes=None))
    want = getattr(np.fft, op)(x, axes=None)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("op", OPS)
def test_axes_none_with_s_is_an_error(mlx, op):
    assert_same(mlx, lambda m: getattr(m.fft, op)(m.ones((2, 3, 4)), s=(3, 3), axes=None))


FREQ = [
    lambda m: m.fft.fftfreq(4, d=0.0),
    lambda m: m.fft.rfftfreq(4, d=0.0),
    lambda m: m.fft.fftfreq(0),
    lambda m: m.fft.rfftfreq(-1),
    lambda m: m.fft.fftfreq(8, d=-0.5),
    lambda m: m.fft.rfftfreq(5, d=0.25),
]


@pytest.mark.parametrize("case", range(len(FREQ)))
def test_frequencies_match_mlx(mlx, case):
    assert_same(mlx, FREQ[case], what=f"case {case}")


def test_zero_spacing_raises_when_built():
    with pytest.raises(ValueError, match="non-zero"):
        mx.fft.fftfreq(4, d=0.0)
