"""mx.fft against NumPy and mlx: values, complex64/float32 outputs, shapes, errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6)).astype(np.float32)
Z = (X + 1j * RNG.standard_normal((4, 6))).astype(np.complex64)
SIG = RNG.standard_normal((3, 100)).astype(np.float32)
WIN = np.hanning(12).astype(np.float32)
ONE_AXIS = ("fft", "ifft", "rfft", "irfft")
TWO_AXES = ("fft2", "ifft2", "rfft2", "irfft2")
N_AXES = ("fftn", "ifftn", "rfftn", "irfftn")


def _cases():
    cases = {}
    for op in ONE_AXIS:
        cases[op] = lambda M, op=op: getattr(M.fft, op)(M.array(X))
        cases[f"{op}_n_axis0"] = lambda M, op=op: getattr(M.fft, op)(M.array(X), n=7, axis=0)
        cases[f"{op}_crop"] = lambda M, op=op: getattr(M.fft, op)(M.array(X), n=3)
        cases[f"{op}_ortho"] = lambda M, op=op: getattr(M.fft, op)(M.array(X), norm="ortho")
        cases[f"{op}_forward"] = lambda M, op=op: getattr(M.fft, op)(M.array(Z), norm="forward")
        cases[f"{op}_int"] = lambda M, op=op: getattr(M.fft, op)(M.array([1, 2, 3, 4]))
        cases[f"{op}_f16"] = lambda M, op=op: getattr(M.fft, op)(M.array(X).astype(M.float16))
    for op in TWO_AXES + N_AXES:
        cases[op] = lambda M, op=op: getattr(M.fft, op)(M.array(X))
        cases[f"{op}_s"] = lambda M, op=op: getattr(M.fft, op)(M.array(X), s=(3, 8), axes=(0, 1))
        cases[f"{op}_swapped"] = lambda M, op=op: getattr(M.fft, op)(M.array(Z), axes=(1, 0))
        cases[f"{op}_one_axis"] = lambda M, op=op: getattr(M.fft, op)(M.array(X), axes=[0])
    for op in N_AXES:
        cases[f"{op}_3d"] = lambda M, op=op: getattr(M.fft, op)(M.array(X).reshape(2, 2, 6))
    cases.update({
        "fftfreq": lambda M: M.fft.fftfreq(7, 0.3),
        "rfftfreq": lambda M: M.fft.rfftfreq(8),
        "fftshift": lambda M: M.fft.fftshift(M.array(X)),
        "ifftshift_axis": lambda M: M.fft.ifftshift(M.array(X).astype(M.int32), axes=1),
        "stft": lambda M: M.fft.stft(M.array(SIG), n_fft=16),
        "stft_hop_nocenter": lambda M: M.fft.stft(M.array(SIG), n_fft=16, hop_length=5,
                                                  center=False),
        "stft_window": lambda M: M.fft.stft(M.array(SIG), n_fft=16, win_length=12,
                                            window=M.array(WIN)),
        "stft_edge_ortho": lambda M: M.fft.stft(M.array(SIG), n_fft=16, pad_mode="edge",
                                                norm="ortho"),
        "stft_twosided": lambda M: M.fft.stft(M.array(SIG), n_fft=16, pad_mode="constant",
                                              onesided=False),
        "stft_complex": lambda M: M.fft.stft(M.array(SIG) * (1 + 2j), n_fft=16),
        "stft_strided_input": lambda M: M.fft.stft(M.array(SIG.T.copy()).T, n_fft=16,
                                                   hop_length=7, center=False),
        "istft": lambda M: M.fft.istft(M.fft.stft(M.array(SIG), n_fft=16)),
        "istft_window": lambda M: M.fft.istft(
            M.fft.stft(M.array(SIG), n_fft=16, win_length=12, window=M.array(WIN)),
            win_length=12, window=M.array(WIN)),
        "istft_odd_hop": lambda M: M.fft.istft(M.fft.stft(M.array(SIG), n_fft=15, hop_length=3),
                                               n_fft=15, hop_length=3),
        "istft_nocenter_twosided": lambda M: M.fft.istft(
            M.fft.stft(M.array(SIG), n_fft=16, center=False, onesided=False),
            center=False, onesided=False),
        "istft_length": lambda M: [M.fft.istft(M.fft.stft(M.array(SIG), n_fft=16), length=n)
                                   for n in (90, 120)],
    })
    return cases


CASES = _cases()


def as_list(out):
    return list(out) if isinstance(out, list) else [out]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mlx(name, mlx):
    ours, theirs = as_list(CASES[name](mx)), as_list(CASES[name](mlx))
    for o, t in zip(ours, theirs, strict=True):
        assert o.shape == t.shape
        assert repr(o.dtype) == repr(t.dtype)
        np.testing.assert_allclose(np.array(o), np.array(t), rtol=1e-4, atol=1e-4)


BAD = {
    "n_zero": lambda M: M.fft.fft(M.array(X), n=0),
    "bad_norm": lambda M: M.fft.rfft(M.array(X), norm="x"),
    "dup_axes": lambda M: M.fft.fft2(M.array(X), axes=(0, 0)),
    "s_axes_sizes": lambda M: M.fft.rfft2(M.array(X), s=(3,), axes=(0, 1)),
    "s_without_axes": lambda M: M.fft.fftn(M.array(X), s=(3, 4)),
    "freq_zero": lambda M: M.fft.fftfreq(0),
    "stft_long_window": lambda M: M.fft.stft(M.array(SIG), n_fft=16, win_length=20),
    "stft_pad_mode": lambda M: M.fft.stft(M.array(SIG), n_fft=16, pad_mode="wrap"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_raise_value_error_like_mlx(name, mlx):
    for M in (mx, mlx):
        with pytest.raises(ValueError):
            BAD[name](M)


@pytest.mark.parametrize("f", [lambda: mx.fft.fft(mx.array(X), axis=2),
                               lambda: mx.fft.fft(mx.array(1.0)),
                               lambda: mx.fft.fftshift(mx.array(X), axes=3)])
def test_bad_axes_raise_value_and_index_error(f):
    with pytest.raises(ValueError):
        f()
    with pytest.raises(IndexError):
        f()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.data())
def test_random_transforms_against_numpy(shape, data):
    op = data.draw(st.sampled_from(ONE_AXIS + N_AXES))
    a = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    norm = data.draw(st.sampled_from(["backward", "ortho", "forward"]))
    if op in ONE_AXIS:
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        n = data.draw(st.one_of(st.none(), st.integers(1, 9)))
        if op == "irfft" and n is None and shape[axis] == 1:
            n = 2
        kw = {"n": n, "axis": axis}
    else:
        axes = data.draw(st.permutations(range(len(shape))))
        s = [data.draw(st.integers(1, 7)) for _ in axes]
        kw = {"s": s, "axes": list(axes)}
    ours = getattr(mx.fft, op)(mx.array(a), norm=norm, **kw)
    want = getattr(np.fft, op)(a, norm=norm, **kw)
    assert ours.shape == want.shape
    assert ours.dtype == (mx.float32 if op.startswith("irfft") else mx.complex64)
    np.testing.assert_allclose(np.array(ours), want, rtol=1e-4, atol=1e-4)


def test_fft_runs_on_the_given_stream_after_its_input():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    a = mx.array(X) * mx.ones((4, 6), stream=s1)
    out = mx.fft.rfft(a, stream=s2)
    assert out._node.stream.stream == s2
    np.testing.assert_allclose(np.array(out), np.fft.rfft(X), rtol=1e-5, atol=1e-5)


def test_istft_inverts_stft():
    spec = mx.fft.stft(mx.array(SIG), n_fft=32, hop_length=8, window=mx.array(np.hanning(32)))
    back = mx.fft.istft(spec, hop_length=8, window=mx.array(np.hanning(32)))
    assert back.shape == (3, 96)  # 13 frames of 8 samples cover the first 96
    np.testing.assert_allclose(np.array(back)[:, 16:80], SIG[:, 16:80], atol=1e-5)
