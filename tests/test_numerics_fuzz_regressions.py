"""Silent differences from MLX found by fuzzing fft, linalg, random and io against it:
a complex input keeps complex64 through the norms MLX computes in complex, and a 0-d
`.npy` array loads 0-d."""
from __future__ import annotations

import math

import numpy as np
import pytest

import streamlet.core as mx

_Z = [[1 + 2j, 3 - 1j], [0.5j, 2 + 0j]]


@pytest.mark.parametrize("ord_, axis", [
    (None, None), (2, 0), (1, 0), (-1, 0), (0, 0), (3, 0), (math.inf, 0), (-math.inf, 0),
    (0.5, 0), ("fro", None), ("nuc", None), (2, None), (-2, None), (1, None), (-1, None),
    (math.inf, None), (-math.inf, None)])
def test_complex_norm_dtype_and_value_match_mlx(mlx, ord_, axis):
    ours = mx.linalg.norm(mx.array(_Z), ord=ord_, axis=axis, stream=mx.cpu)
    theirs = mlx.linalg.norm(mlx.array(_Z), ord=ord_, axis=axis, stream=mlx.cpu)
    assert str(ours.dtype) == str(theirs.dtype)
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool_", "complex64", "bfloat16"])
def test_scalar_npy_round_trip_stays_0d(tmp_path, mlx, dtype):
    path = str(tmp_path / "s.npy")
    mx.save(path, mx.array(3).astype(getattr(mx, dtype)))
    ours, theirs = mx.load(path), mlx.load(path)
    assert ours.shape == theirs.shape == ()
    assert np.array(ours.astype(mx.float32)).shape == ()
    assert ours.astype(mx.float32).item() == theirs.astype(mlx.float32).item()


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2",
                                  "rfft2", "irfft2"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "complex64"])
def test_fft_over_no_axes_hands_the_input_back(mlx, name, dtype):
    x = np.arange(6).reshape(2, 3)
    ours = getattr(mx.fft, name)(mx.array(x).astype(getattr(mx, dtype)), axes=[])
    theirs = getattr(mlx.fft, name)(mlx.array(x).astype(getattr(mlx, dtype)), axes=[])
    assert (str(ours.dtype), ours.shape) == (str(theirs.dtype), theirs.shape)
    np.testing.assert_array_equal(np.array(ours), np.array(theirs))


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("axes", [None, []])
def test_fftshift_of_a_scalar_is_the_scalar(mlx, name, axes):
    ours = getattr(mx.fft, name)(mx.array(2.5), axes=axes)
    theirs = getattr(mlx.fft, name)(mlx.array(2.5), axes=axes)
    assert ours.shape == theirs.shape == () and ours.item() == theirs.item()
