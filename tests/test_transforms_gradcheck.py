"""Numerical gradient checks of every differentiable primitive, in float64.

Each case is a small function of float64 inputs (random, away from kinks and outside
each op's domain edges).  For a random weighting `w` of its outputs the loss
`sum(w * f(x))` must have

- `mx.grad` equal to central differences (every input element perturbed),
- `mx.jvp` (contracted with `w`) equal to the gradient dotted with the tangents,
- `mx.vmap` over a batch of two equal to the function applied to each item.

The cases together must reach every primitive that has a vjp rule, and every
primitive must either have a vjp rule or be on the commented list of primitives that
are not differentiable: a new primitive without rules fails here.
"""
from __future__ import annotations

import gc
import importlib
import math
import pkgutil

import numpy as np
import pytest

import streamlet
import streamlet.core as mx
from streamlet.core.graph import Primitive
from streamlet.core.ops import arrange, shape as shape_ops
from streamlet.core.ops.elementwise import BINARY, UNARY

F64 = mx.float64
# float64 has no GPU (as in MLX): the checks run on the CPU whatever the suite's device;
# the rules build the same graphs on every device
pytestmark = pytest.mark.usefixtures("on_cpu")


# -- inputs -----------------------------------------------------------------------------------

class Spec:
    """How to draw one float64 input: `draw(rng)` gives a NumPy array."""

    def __init__(self, draw):
        self.draw = draw


def normal(*shape, scale=1.0):
    return Spec(lambda rng: rng.standard_normal(shape) * scale)


def uniform(lo, hi, *shape):
    return Spec(lambda rng: rng.uniform(lo, hi, shape))


def away_from_ints(*shape):
    """Values whose fractional part stays in [0.2, 0.8] (floor, round, remainder)."""
    return Spec(lambda rng: rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape))


def spd(n, batch=()):
    """Symmetric positive definite matrices, well conditioned."""
    def draw(rng):
        a = rng.standard_normal(batch + (n, n))
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    return Spec(draw)


def symmetric(n):
    """A symmetric matrix with well separated eigenvalues (eigenvectors are smooth)."""
    def draw(rng):
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (q * (np.arange(n) * 1.5 + 1.0)) @ q.T
    return Spec(draw)


def well_conditioned(n, batch=()):
    def draw(rng):
        return rng.standard_normal(batch + (n, n)) + 2 * n * np.eye(n) * 0.5
    return Spec(draw)


def distinct(*shape):
    """A permutation of well separated values (sort, max, median: no ties)."""
    def draw(rng):
        n = int(np.prod(shape))
        return (rng.permutation(n) * 0.37 + rng.uniform(0, 0.05, n) - n * 0.18).reshape(shape)
    return Spec(draw)


def as_spec(s):
    return s if isinstance(s, Spec) else normal(*s)


class Case:
    """`fn` of float64 inputs drawn by `specs`; `low` for functions computing in float32
    or complex64 (a larger step, looser tolerances)."""

    def __init__(self, name, fn, *specs, vmap=True, jvp=True, low=False):
        self.name, self.fn, self.specs = name, fn, [as_spec(s) for s in specs]
        self.vmap, self.jvp, self.low = vmap, jvp, low
        self.eps, self.rtol, self.atol = (1e-3, 3e-3, 3e-4) if low else (1e-6, 1e-5, 1e-7)

    def __repr__(self):
        return self.name


# -- the cases --------------------------------------------------------------------------------

UNARY_DOMAIN = {
    "sqrt": uniform(0.5, 2, 3, 4), "rsqrt": uniform(0.5, 2, 3, 4),
    "log": uniform(0.5, 2, 3, 4), "log2": uniform(0.5, 2, 3, 4),
    "log10": uniform(0.5, 2, 3, 4), "log1p": uniform(-0.5, 2, 3, 4),
    "reciprocal": uniform(0.5, 2, 3, 4), "arcsin": uniform(-0.9, 0.9, 3, 4),
    "arccos": uniform(-0.9, 0.9, 3, 4), "arctanh": uniform(-0.9, 0.9, 3, 4),
    "erfinv": uniform(-0.9, 0.9, 3, 4), "arccosh": uniform(1.2, 3, 3, 4),
    "tan": uniform(-1.2, 1.2, 3, 4), "floor": away_from_ints(3, 4),
    "ceil": away_from_ints(3, 4), "trunc": away_from_ints(3, 4),
    "abs": distinct(3, 4), "sign": distinct(3, 4),
}
INTEGER_ONLY = {"bitwise_invert"}  # refuse floats: their rules are checked in the oracle tests


LOW_PRECISION = {"erfinv"}  # a float32 approximation in every dtype, as MLX's


def _times(op):
    """A predicate's result times its input: the loss needs a float output."""
    return lambda *a: a[0] * op(*a)


def _unary_cases():
    for name in UNARY:
        if name in INTEGER_ONLY:
            continue
        fn = getattr(mx, name)
        with mx.stream(mx.cpu):  # at import, before any fixture: float64 is CPU work
            probe = fn(mx.array([0.5], dtype=F64))
        fn = fn if probe.dtype != mx.bool_ else _times(fn)
        yield Case(name, fn, UNARY_DOMAIN.get(name, normal(3, 4)), low=name in LOW_PRECISION)


BINARY_DOMAIN = {
    "divide": (normal(3, 4), uniform(0.5, 2, 4)),
    "power": (uniform(0.5, 2, 3, 4), normal(4)),
    "remainder": (away_from_ints(3, 4), uniform(1.0, 1.0, 4)),
    "floor_divide": (away_from_ints(3, 4), uniform(1.0, 1.0, 4)),
    "minimum": (distinct(3, 4), distinct(4)),
    "maximum": (distinct(3, 4), distinct(4)),
    "arctan2": (normal(3, 4), uniform(0.5, 2, 4)),
}
BINARY_INTEGER_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                       "right_shift"}


def _binary_cases():
    for name in BINARY:
        if name in BINARY_INTEGER_ONLY:
            continue
        fn = getattr(mx, name)
        with mx.stream(mx.cpu):  # as in _unary_cases
            probe = fn(mx.array([0.5], dtype=F64), mx.array([0.5], dtype=F64))
        fn = fn if probe.dtype != mx.bool_ else _times(fn)
        x, y = BINARY_DOMAIN.get(name, (normal(3, 4), normal(4)))  # y broadcasts
        yield Case(name, fn, x, y)


def _take_idx():
    return mx.array([2, 0, 3, 3])


def _slogdet(a, stream=None):
    sign, logdet = mx.linalg.slogdet(a, stream=stream)
    return logdet


CPU = mx.cpu
CASES = [
    *_unary_cases(),
    *_binary_cases(),
    Case("binary_same_shape", lambda x, y: x * y + x / (y * y + 1), (2, 3), (2, 3)),
    Case("scalar_operands", lambda x: 2.5 ** x - 3 / (x * x + 1) + (1 - x), (3,)),
    Case("round", lambda x: mx.round(x) * x, away_from_ints(5)),
    Case("where", lambda c, x, y: mx.where(c > 0, x, y), (4, 3), (4, 3), (3,)),
    Case("clip", lambda x: mx.clip(x, -0.5, 0.5), distinct(12)),
    Case("nan_to_num", lambda x: mx.nan_to_num(x * 2), (4,)),
    Case("isclose", lambda x, y: mx.isclose(x, y) + x * y, (4,), (4,)),
    # MLX's DivMod has zero derivatives for both results: the quotient's are right
    Case("divmod", lambda x: mx.divmod(x, 1.5)[0] * x, away_from_ints(5)),
    Case("astype", lambda x: mx.astype(x, mx.float32).astype(F64) * x, (5,), low=True),
    # reductions
    Case("sum", lambda x: mx.sum(x, axis=1), (3, 4)),
    Case("sum_keepdims", lambda x: mx.sum(x, axis=(0, 2), keepdims=True) * x, (2, 3, 2)),
    Case("sum_all", lambda x: mx.sum(x), (3, 4)),
    Case("mean", lambda x: mx.mean(x, axis=0), (3, 4)),
    Case("prod", lambda x: mx.prod(x, axis=-1), uniform(0.5, 1.5, 3, 4)),
    Case("prod_zero", lambda x: mx.prod(x * mx.array([1.0, 0.0, 1.0, 1.0], dtype=F64), axis=-1),
         uniform(0.5, 1.5, 3, 4)),
    Case("max", lambda x: mx.max(x, axis=1), distinct(3, 4)),
    Case("min", lambda x: mx.min(x), distinct(3, 4)),
    Case("logsumexp", lambda x: mx.logsumexp(x, axis=1), (3, 4)),
    Case("logsumexp_all", lambda x: mx.logsumexp(x, keepdims=True), (3, 4)),
    Case("var", lambda x: mx.var(x, axis=1, ddof=1), (3, 4)),
    Case("std", lambda x: mx.std(x, axis=0), (3, 4)),
    Case("softmax", lambda x: mx.softmax(x, axis=-1), (3, 4)),
    Case("softmax_precise", lambda x: mx.softmax(x, axis=0, precise=True), (3, 4)),
    Case("all_any", lambda x: x * mx.all(x > -10) + x * mx.any(x > 10), (3,)),
    Case("argmax", lambda x: x * mx.argmax(x, axis=0).astype(F64), distinct(4, 3)),
    Case("median", lambda x: mx.median(x, axis=1), distinct(3, 5)),
    # scans
    Case("cumsum", lambda x: mx.cumsum(x, axis=1), (3, 4)),
    Case("cumsum_rev_excl", lambda x: mx.cumsum(x, axis=0, reverse=True, inclusive=False),
         (3, 4)),
    Case("cumprod", lambda x: mx.cumprod(x, axis=1), uniform(0.5, 1.5, 3, 4)),
    Case("cumprod_rev", lambda x: mx.cumprod(x, axis=0, reverse=True), uniform(0.5, 1.5, 3, 4)),
    Case("cummax", lambda x: mx.cummax(x, axis=1), distinct(3, 4)),
    Case("cummin", lambda x: mx.cummin(x, axis=0, reverse=True), distinct(3, 4)),
    Case("logcumsumexp", lambda x: mx.logcumsumexp(x, axis=1), (3, 4)),
    Case("diff", lambda x: mx.diff(x, n=2, axis=1), (3, 5)),
    # shape ops
    Case("reshape", lambda x: mx.reshape(x, (4, 3)) * mx.arange(3).astype(F64), (3, 4)),
    Case("transpose", lambda x: mx.transpose(x, (2, 0, 1)), (2, 3, 4)),
    Case("broadcast_to", lambda x: mx.broadcast_to(x, (2, 3, 4)), (3, 1)),
    Case("expand_squeeze", lambda x: mx.squeeze(mx.expand_dims(x, (0, 2)), 0), (3, 4)),
    Case("concatenate", lambda x, y: mx.concatenate([x, y, x], axis=1), (2, 3), (2, 1)),
    Case("split_stack", lambda x: mx.stack(mx.split(x, [1, 3], axis=1)[::2]), (2, 4)),
    Case("slice_getitem", lambda x: x[1:, ::2], (3, 5)),
    Case("getitem_int_array", lambda x: x[mx.array([2, 0, 2])], (3, 4)),
    Case("getitem_mixed", lambda x: x[mx.array([1, 0]), :, mx.array([2, 2])], (2, 3, 4)),
    Case("getitem_newaxis", lambda x: x[None, 1, ..., None], (3, 4)),
    Case("take", lambda x: mx.take(x, _take_idx(), axis=1), (3, 4)),
    Case("take_flat", lambda x: mx.take(x, mx.array([[5, 1], [1, 0]])), (3, 4)),
    Case("take_along_axis", lambda x: mx.take_along_axis(
        x, mx.array([[0, 0], [2, 1], [1, 2]]), axis=1), (3, 3)),
    Case("dynamic_slice", lambda x: mx.slice(x, mx.array([1, 0]), (0, 1), (2, 2)), (4, 3)),
    Case("pad", lambda x: mx.pad(x, ((1, 2), (0, 1))), (2, 3)),
    Case("pad_edge", lambda x: mx.pad(x, ((1, 2), (2, 1)), mode="edge"), (2, 3)),
    Case("tile", lambda x: mx.tile(x, (2, 1, 3)), (2, 3)),
    Case("repeat", lambda x: mx.repeat(x, 3, axis=1), (2, 3)),
    Case("roll", lambda x: mx.roll(x, (1, -2), axis=(0, 1)), (3, 4)),
    Case("flip", lambda x: x[::-1, ::-2] * arrange.flip(x, axis=1)[:, :2], (3, 4)),
    Case("broadcast_like", lambda x, y: shape_ops.broadcast_like(x, y) * y, (3, 1), (2, 3, 4)),
    Case("reshape_like", lambda x, y: shape_ops.reshape_like(x, y) * y, (3, 4), (2, 6)),
    Case("diagonal", lambda x: mx.diagonal(x, 1, 0, 2), (3, 2, 4)),
    Case("diag", lambda x: mx.diag(x, k=1), (3,)),
    Case("diag_of_matrix", lambda x: mx.diag(x, k=-1), (3, 3)),
    Case("trace", lambda x: mx.trace(x), (3, 3)),
    Case("tril_triu", lambda x: mx.tril(x, -1) + 2 * mx.triu(x, 1), (3, 4)),
    Case("as_strided", lambda x: mx.as_strided(x, (3, 3), (2, 1), 1), (8,)),
    Case("contiguous", lambda x: mx.contiguous(mx.transpose(x)), (3, 4)),
    Case("moveaxis_swapaxes", lambda x: mx.swapaxes(mx.moveaxis(x, 0, -1), 0, 1), (2, 3, 4)),
    Case("full_like", lambda x: mx.full_like(x, 2.0) * x + mx.zeros_like(x), (3,)),
    Case("unflatten_flatten", lambda x: mx.flatten(mx.unflatten(x, 1, (2, 2)), 0, 1), (3, 4)),
    Case("broadcast_arrays", lambda x, y: mx.broadcast_arrays(x, y)[1] * 1.0, (3, 1), (4,)),
    # sorting
    Case("sort", lambda x: mx.sort(x, axis=1), distinct(3, 4)),
    Case("argsort", lambda x: mx.take_along_axis(x, mx.stop_gradient(mx.argsort(x, axis=0)), 0),
         distinct(3, 4)),
    Case("partition", lambda x: mx.partition(x, 2, axis=-1), distinct(2, 5)),
    Case("argpartition", lambda x: mx.take_along_axis(
        x, mx.stop_gradient(mx.argpartition(x, 1)), -1), distinct(2, 5)),
    Case("topk", lambda x: mx.topk(x, 2, axis=1), distinct(3, 4)),
    Case("searchsorted", lambda x: x * mx.searchsorted(mx.array([-1.0, 0.0, 1.0]), x),
         distinct(5)),
    # updates
    Case("scatter_set", lambda x, v: _set(x, (mx.array([0, 2]),), v), (3, 4), (2, 4)),
    Case("scatter_add", lambda x, v: x.at[mx.array([0, 0, 2])].add(v), (3, 4), (3, 4)),
    # MLX 0.32.4 has no jvp of these scatters either
    Case("scatter_max", lambda x, v: x.at[mx.array([1, 2])].maximum(v), distinct(3, 4),
         distinct(2, 4), jvp=False),
    Case("scatter_min", lambda x, v: x.at[mx.array([0, 1])].minimum(v), distinct(3, 4),
         distinct(2, 4), jvp=False),
    Case("slice_update", lambda x, v: _set(x, (slice(1, 3), slice(None, None, 2)), v), (3, 4),
         (2, 2)),
    Case("dynamic_slice_update", lambda x, v: mx.slice_update(x, v, mx.array([1]), (0,)),
         (4, 2), (2, 2)),
    Case("masked_scatter", lambda x, v: _set(x, mx.stop_gradient(x > 0), v), distinct(3, 4),
         (12,)),
    Case("put_along_axis", lambda x, v: mx.put_along_axis(
        x, mx.array([[1], [0], [2]]), v, axis=1), (3, 3), (3, 1)),
    # products
    Case("matmul", lambda x, y: x @ y, (3, 4), (4, 2)),
    Case("matmul_batched", lambda x, y: mx.matmul(x, y), (2, 1, 3, 4), (3, 4, 2)),
    Case("matmul_vector", lambda x, y: mx.matmul(x, y) + mx.matmul(y, y), (3,), (3,)),
    Case("matvec", lambda x, y: x @ y + y @ mx.transpose(x), (3, 3), (3,)),
    Case("addmm", lambda c, x, y: mx.addmm(c, x, y, alpha=0.5, beta=2.0), (3, 2), (3, 4),
         (4, 2)),
    Case("inner_outer", lambda x, y: mx.inner(x, y) + mx.outer(x[0], y[1]).sum(), (2, 3),
         (2, 3)),
    Case("tensordot", lambda x, y: mx.tensordot(x, y, axes=([1, 0], [0, 2])), (3, 2, 4),
         (2, 5, 3)),
    Case("einsum", lambda x, y: mx.einsum("ij,jk->ik", x, y) + mx.einsum("ii->i", x @ y),
         (3, 4), (4, 3)),
    Case("einsum_repeated", lambda x, y: mx.einsum("iij,j->i", x, y), (2, 2, 3), (3,)),
    Case("kron", lambda x, y: mx.kron(x, y), (2, 3), (2, 2)),
    Case("vecdot", lambda x, y: mx.vecdot(x, y), (2, 3), (2, 3)),
    Case("block_masked_mm", lambda x, y: mx.block_masked_mm(x, y, 32, mask_out=mx.array(
        [[True, False], [True, True]]), mask_lhs=mx.array([[True, True], [False, True]])),
         (64, 48), (48, 64)),
    Case("gather_mm", lambda x, y: mx.gather_mm(x, y, mx.array([1, 0, 1]),
                                                mx.array([0, 0, 1])), (2, 3, 4), (2, 4, 2)),
    Case("convolve", lambda x, v: mx.convolve(x, v), (6,), (3,)),
    Case("hadamard", lambda x: mx.hadamard_transform(x, scale=0.5), (3, 8), low=True),
    # conv
    Case("conv1d", lambda x, w: mx.conv1d(x, w, stride=2, padding=1), (2, 7, 3), (4, 3, 3)),
    Case("conv2d_groups", lambda x, w: mx.conv2d(x, w, padding=(1, 0), dilation=(1, 2),
                                                 groups=2), (1, 5, 6, 4), (4, 3, 2, 2)),
    Case("conv_general", lambda x, w: mx.conv_general(x, w, stride=1, padding=1,
                                                      input_dilation=2, flip=True),
         (1, 4, 2), (3, 2, 2)),
    Case("conv_transpose2d", lambda x, w: mx.conv_transpose2d(x, w, stride=2, padding=1),
         (1, 3, 3, 2), (2, 3, 3, 2)),
    # linalg
    Case("norm_vector", lambda x: mx.linalg.norm(x, axis=1), (3, 4)),
    Case("norm_all", lambda x: mx.linalg.norm(x), (3, 4)),
    Case("norm_ord3", lambda x: mx.linalg.norm(x, 3, axis=0), uniform(0.5, 1.5, 3, 4)),
    Case("norm_inf", lambda x: mx.linalg.norm(x, math.inf, axis=-1), distinct(3, 4)),
    Case("norm_l1", lambda x: mx.linalg.norm(x, 1, axis=-1), distinct(3, 4)),
    Case("norm_fro", lambda x: mx.linalg.norm(x, "fro"), (3, 4)),
    Case("norm_matrix_inf", lambda x: mx.linalg.norm(x, math.inf), distinct(3, 4)),
    Case("norm_matrix_1", lambda x: mx.linalg.norm(x, -1, axis=(0, 1)), distinct(3, 4)),
    Case("cross", lambda x, y: mx.linalg.cross(x, y), (2, 3), (2, 3)),
    Case("inv", lambda a: mx.linalg.inv(a, stream=CPU), well_conditioned(3, (2,))),
    Case("tri_inv", lambda a: mx.linalg.tri_inv(a, stream=CPU), well_conditioned(3)),
    Case("tri_inv_upper", lambda a: mx.linalg.tri_inv(a, upper=True, stream=CPU),
         well_conditioned(3)),
    Case("solve", lambda a, y: mx.linalg.solve(a, y, stream=CPU), well_conditioned(3), (3, 2)),
    Case("solve_vector", lambda a, y: mx.linalg.solve(a, y, stream=CPU), well_conditioned(3),
         (3,)),
    Case("solve_triangular", lambda a, y: mx.linalg.solve_triangular(a, y, stream=CPU),
         well_conditioned(3), (3, 2)),
    Case("solve_triangular_upper", lambda a, y: mx.linalg.solve_triangular(
        a, y, upper=True, stream=CPU), well_conditioned(3), (3,)),
    Case("cholesky_inv", lambda a: mx.linalg.cholesky_inv(mx.tril(a), stream=CPU),
         well_conditioned(3)),
    Case("det", lambda a: mx.linalg.det(a, stream=CPU), well_conditioned(3, (2,))),
    Case("det_4x4", lambda a: mx.linalg.det(a, stream=CPU), well_conditioned(4)),
    Case("slogdet", lambda a: _slogdet(a), well_conditioned(3)),  # MLX's closed form
    Case("slogdet_4x4", lambda a: _slogdet(a, CPU), well_conditioned(4)),
    # fft
    Case("fft", lambda x: mx.fft.fft(x, axis=0), (4, 3), low=True),
    Case("ifft_n", lambda x: mx.fft.ifft(x, n=6), (2, 4), low=True),
    Case("rfft", lambda x: mx.fft.rfft(x), (2, 6), low=True),
    Case("rfft_odd", lambda x: mx.fft.rfft(x, n=5), (2, 6), low=True),
    Case("irfft", lambda x, y: mx.fft.irfft(x + 1j * y, n=6), (2, 4), (2, 4), low=True),
    Case("fft2_ortho", lambda x: mx.fft.fft2(x, norm="ortho"), (3, 4), low=True),
    Case("rfftn", lambda x: mx.fft.rfftn(x), (2, 3, 4), low=True),
    Case("irfft2", lambda x: mx.fft.irfft2(mx.fft.rfft2(x) * 2), (4, 4), low=True),
    Case("stft", lambda x, w: mx.fft.stft(x, n_fft=8, hop_length=3, win_length=6, window=w),
         (20,), uniform(0.5, 1.5, 6), low=True),
    Case("stft_constant_twosided", lambda x: mx.fft.stft(
        x, n_fft=8, hop_length=4, pad_mode="constant", onesided=False), (2, 12), low=True),
    Case("istft", lambda x, y, w: mx.fft.istft(x + 1j * y, n_fft=8, hop_length=3,
                                               win_length=6, window=w), (5, 4), (5, 4),
         uniform(0.5, 1.5, 6), low=True),
    Case("istft_length", lambda x: mx.fft.istft(x + 0j, n_fft=8, hop_length=4, length=15,
                                                center=False), (5, 3), low=True),
    Case("fftshift", lambda x: mx.fft.fftshift(x) + mx.fft.ifftshift(x, axes=[0]), (3, 4)),
    # complex intermediates
    Case("complex_chain", lambda x, y: mx.abs(mx.exp((x + 1j * y) * 0.5) * mx.conj(x - 1j * y)),
         (3,), (3,), low=True),
    Case("complex_parts", lambda x, y: mx.real((x + 1j * y) ** 2) + mx.imag(mx.sqrt(
        (x + 2) + 1j * y)), uniform(0.5, 1, 3), (3,), low=True),
    # quantized
    # quantized products compute in float32, as MLX's
    # (MLX 0.32.4 has no jvp with respect to their scales and biases)
    Case("quantized_matmul", lambda x, s, bias: _qmm(x, s, bias), (3, 64), (8, 1), (8, 1),
         low=True, jvp=False),
    Case("quantized_matmul_x", lambda x: _qmm(x, 1.0, 0.0), (3, 64), low=True),
    Case("gather_qmm", lambda x, s: _gather_qmm(x, s), (2, 1, 64), (8, 1), low=True, jvp=False),
    Case("gather_qmm_x", lambda x: _gather_qmm(x, 1.0), (2, 1, 64), low=True),
    Case("dequantize", lambda s, bias: _dequantize(s, bias), (8, 1), (8, 1)),
    # fast: statistics and angles in float32, as MLX's
    Case("rms_norm", lambda x, w: mx.fast.rms_norm(x, w, 1e-5), (3, 8), (8,), low=True),
    Case("layer_norm", lambda x, w, bias: mx.fast.layer_norm(x, w, bias, 1e-5), (3, 8), (8,),
         (8,), low=True),
    Case("layer_norm_plain", lambda x: mx.fast.layer_norm(x, None, None, 1e-5), (3, 8),
         low=True),
    # the normalizations' cotangent for x is one node (norm_dx) whose rules trace its ops
    Case("rms_norm_dx", lambda x, w, c: mx.vjp(lambda a: mx.fast.rms_norm(a, w, 1e-5), [x],
                                               [c])[1][0], (3, 8), (8,), (3, 8), low=True),
    Case("layer_norm_dx", lambda x, c: mx.vjp(lambda a: mx.fast.layer_norm(a, None, None, 1e-5),
                                              [x], [c])[1][0], (3, 8), (3, 8), low=True),
    Case("rope", lambda x: mx.fast.rope(x, 4, traditional=False, base=10000.0, scale=1.0,
                                        offset=2), (1, 3, 6), low=True),
    Case("rope_traditional", lambda x: mx.fast.rope(x, 6, traditional=True, base=100.0,
                                                    scale=0.5, offset=1), (2, 3, 6), low=True),
    Case("rope_freqs", lambda x, f: mx.fast.rope(x, 4, traditional=False, base=None, scale=1.0,
                                                 offset=mx.array([1, 3]), freqs=f), (2, 3, 4),
         uniform(0.5, 2, 2), low=True),
    Case("rope_freqs_traditional", lambda x, f: mx.fast.rope(
        x, 4, traditional=True, base=None, scale=0.5, offset=2, freqs=f), (1, 2, 3, 6),
         uniform(0.5, 2, 2), low=True),
    Case("sdpa", lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5),
         (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)),
    Case("sdpa_causal_gqa", lambda q, k, v: mx.fast.scaled_dot_product_attention(
        q, k, v, scale=0.7, mask="causal"), (1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)),
    Case("cross_entropy", lambda x: mx.fast.cross_entropy(x, mx.array([1, 0, 3])), (3, 4),
         low=True),
    # random draws with differentiable parameters (a fixed key)
    Case("truncated_normal", lambda lo, hi: mx.random.truncated_normal(
        lo, hi, key=mx.random.key(3)), uniform(-1.5, -0.5, 4), uniform(0.5, 1.5, 4),
         low=True, vmap=False),
    Case("normal_loc_scale", lambda m, sd: mx.random.normal((3,), F64, m, sd,
                                                           key=mx.random.key(4)), (3,),
         uniform(0.5, 1.5, 3), vmap=False),
    # other
    Case("depends", lambda x, y: mx.depends([x * 2], [y])[0] + y, (3,), (3,)),
    Case("custom_function", lambda x: _custom(x), (3,)),
    Case("checkpoint", lambda x: mx.checkpoint(lambda a: mx.sin(a) * a)(x), (3,)),
]



def _set(x, index, v):
    x[index] = v
    return x


_QW = np.random.default_rng(7).standard_normal((8, 64)).astype(np.float32)


def _quantized():
    w, scales, biases = mx.quantize(mx.array(_QW), group_size=32, bits=4)
    return w, scales.astype(F64), biases.astype(F64)


def _qmm(x, s, bias):
    w, scales, biases = _quantized()
    return mx.quantized_matmul(x, w, scales * s, biases + bias, transpose=True, group_size=32,
                               bits=4)


def _gather_qmm(x, s):
    w, scales, bias = _quantized()
    w, s, bias = (mx.stack([a, a]) for a in (w, scales * s, bias))
    return mx.gather_qmm(x, w, s, bias, rhs_indices=mx.array([1, 0]), transpose=True,
                         group_size=32, bits=4)


def _dequantize(s, bias):
    w, scales, biases = _quantized()
    scales = mx.broadcast_to(s, scales.shape) * scales
    biases = mx.broadcast_to(bias, biases.shape) + biases
    return mx.dequantize(w, scales, biases, group_size=32, bits=4)


@mx.custom_function
def _cube(x):
    return x * x * x


@_cube.vjp
def _cube_vjp(x, cotangent, output):
    return 3 * x * x * cotangent


@_cube.jvp
def _cube_jvp(x, tangent):
    return 3 * x * x * tangent


def _custom(x):
    return _cube(x) + mx.sin(x)


# -- the checks -------------------------------------------------------------------------------

def _inputs(case, seed=0):
    rng = np.random.default_rng(seed + sum(map(ord, case.name)))
    return [np.asarray(s.draw(rng), dtype=np.float64) for s in case.specs], rng


def _outputs(out):
    """The inexact outputs as float64: complex ones as their real and imaginary parts."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    got = []
    for o in outs:
        if o.dtype == mx.complex64:
            got += [mx.real(o).astype(F64), mx.imag(o).astype(F64)]
        elif o.dtype in (mx.float32, F64):
            got.append(o.astype(F64))
    return got


def _weights(case, arrays, rng):
    """One weighting per float output, as NumPy arrays."""
    outs = _outputs(case.fn(*[mx.array(a, dtype=F64) for a in arrays]))
    assert outs, f"{case.name}: no inexact output"
    return [rng.standard_normal(o.shape) for o in outs]


def _loss_fn(case, weights):
    ws = [mx.array(w, dtype=F64) for w in weights]

    def loss(*xs):
        outs = _outputs(case.fn(*xs))
        total = mx.array(0.0, dtype=F64)
        for o, w in zip(outs, ws):
            total = total + mx.sum(o * w)
        return total
    return loss


# An elementwise op's derivative on the CPU is one fused node (`rules.Derivative`), whose
# rules trace the derivative's formula: the vjp of each case of such an op, as a function
# of the cotangent and the inputs, is checked as any case is (its gradient holds the op's
# second derivative).
FUSED_DERIVATIVE = {n for n, row in UNARY.items() if callable(row[3])} | {
    n for n, row in BINARY.items() if any(callable(d) for d in row[3])} | {
    "nan_to_num", "truncated_normal"}


def _derivative_case(case):
    with mx.stream(mx.cpu):  # at import, as in _unary_cases
        out = _outputs(case.fn(*[mx.array(a, dtype=F64) for a in _inputs(case)[0]]))[0]

    def vjp(c, *xs):
        return mx.vjp(case.fn, list(xs), [c])[1]
    return Case(f"{case.name}_vjp", vjp, out.shape, *case.specs, low=case.low,
                vmap=case.vmap)


CASES += [_derivative_case(c) for c in list(CASES) if c.name in FUSED_DERIVATIVE]


def _value(loss, arrays):
    return loss(*[mx.array(a, dtype=F64) for a in arrays]).item()


def _grads(loss, xs):
    """The gradient with respect to every input, as a list (one input: MLX returns it bare)."""
    got = mx.grad(loss, argnums=list(range(len(xs))))(*xs)
    return [got] if len(xs) == 1 else list(got)


def _central(loss, arrays, k, direction, eps):
    up = [x.copy() for x in arrays]
    down = [x.copy() for x in arrays]
    up[k] += eps * direction
    down[k] -= eps * direction
    return (_value(loss, up) - _value(loss, down)) / (2 * eps)


FULL = 48  # inputs up to this size are perturbed element by element, larger ones along
DIRECTIONS = 6  # this many random directions


def _check_numerically(case, loss, arrays, grads, rng):
    for k, (a, g) in enumerate(zip(arrays, grads)):
        g = np.array(g)
        if a.size <= FULL:
            directions = [np.eye(a.size)[i].reshape(a.shape) for i in range(a.size)]
        else:
            directions = [rng.standard_normal(a.shape) for _ in range(DIRECTIONS)]
        numeric = np.array([_central(loss, arrays, k, d, case.eps) for d in directions])
        analytic = np.array([np.sum(g * d) for d in directions])
        np.testing.assert_allclose(analytic, numeric, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: gradient of input {k}")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_gradient_matches_central_differences(case):
    arrays, rng = _inputs(case)
    loss = _loss_fn(case, _weights(case, arrays, rng))
    xs = [mx.array(a, dtype=F64) for a in arrays]
    grads = _grads(loss, xs)
    for k, g in enumerate(grads):
        assert g.dtype == F64 and g.shape == xs[k].shape, (case.name, k, g.dtype, g.shape)
    _check_numerically(case, loss, arrays, grads, rng)


@pytest.mark.parametrize("case", [c for c in CASES if c.jvp], ids=repr)
def test_jvp_agrees_with_vjp(case):
    """<w, J t> from jvp equals <J^T w, t> from the gradient, for random tangents."""
    arrays, rng = _inputs(case, seed=1)
    weights = _weights(case, arrays, rng)
    xs = [mx.array(a, dtype=F64) for a in arrays]
    tangents = [mx.array(rng.standard_normal(a.shape), dtype=F64) for a in arrays]
    outs, tans = mx.jvp(lambda *a: _outputs(case.fn(*a)), xs, tangents)
    assert len(tans) == len(weights)
    forward = sum(float(np.sum(np.array(t) * w)) for t, w in zip(tans, weights))
    grads = _grads(_loss_fn(case, weights), xs)
    backward = sum(float(np.sum(np.array(g) * np.array(t))) for g, t in zip(grads, tangents))
    tol = 1e-5 if case.low else 1e-9
    assert math.isclose(forward, backward, rel_tol=tol, abs_tol=tol), (forward, backward)


VMAP_CASES = [c for c in CASES if c.vmap]


@pytest.mark.parametrize("case", VMAP_CASES, ids=repr)
def test_vmap_matches_a_loop(case):
    """Every input batched along axis 0 (two items) gives each item's result, stacked."""
    first, _ = _inputs(case, seed=2)
    second, _ = _inputs(case, seed=3)
    batched = [mx.array(np.stack([a, b]), dtype=F64) for a, b in zip(first, second)]
    got = mx.vmap(lambda *a: _outputs(case.fn(*a)))(*batched)
    for item, arrays in enumerate((first, second)):
        want = _outputs(case.fn(*[mx.array(a, dtype=F64) for a in arrays]))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.array(g[item]), np.array(w), rtol=1e-10, atol=1e-12,
                                       err_msg=f"{case.name}: item {item}")


# -- every primitive: a vjp rule, or a reason it has none ----------------------------------------

# Primitives without a vjp rule, and why.  A primitive missing from here and without a
# vjp fails `test_every_primitive_has_a_vjp_or_a_reason`.
NOT_DIFFERENTIABLE = {
    # no inexact input to differentiate
    "arange": "creation", "eye": "creation", "full": "creation", "linspace": "creation",
    "tri": "creation", "window": "creation", "fftfreq": "creation",
    "load": "reads a file", "random_bits": "a key in, bits out",
    "uniform": "key in; bounds are applied by ops after it",
    "normal": "key in; loc and scale are applied by ops after it",
    "gumbel": "key in", "permutation": "key in",
    "laplace_log1p": "applied to uniform draws only",
    "from_fp8": "uint8 in", "fp4.unpack": "packed integers in",
    "to_fp8": "integer out", "fp4.pack": "integer out", "view": "a reinterpretation of bits",
    "unique": "values picked by sorting; MLX 0.32.4 has no unique",
    "communication_order": "a token", "send": "no value out", "recv": "no input",
    "cuda_kernel": "user kernels (MLX's CustomKernel has no vjp)",
    "cuda_kernel.output": "user kernels", "metal_kernel": "raises: there is no Metal backend",
    # MLX 0.32.4 does not differentiate these either (its vjp raises)
    "linalg.cholesky": "MLX: no vjp", "linalg.qr": "MLX: no vjp", "linalg.svd": "MLX: no vjp",
    "linalg.eig": "MLX: no vjp", "linalg.eigvals": "MLX: no vjp",
    "linalg.eigh": "MLX: no vjp", "linalg.eigvalsh": "MLX: no vjp",
    "linalg.lu": "MLX: no vjp", "linalg.lu_factor": "MLX: no vjp",
    "linalg.pinv": "MLX: through svd, no vjp", "segmented_mm": "MLX: no vjp",
    "multivariate_normal_sqrt_cov": "MLX: through svd, no vjp",
    # by design
    "stop_gradient": "gradients stop here",
    "identity": "array.py's placeholder, never in a traced graph",
    "compiled": "fused runs; compile replays single ops under a transform",
    "compiled_graph": "a compiled program on the GPU; replayed step by step under a transform",
    "scaled_dot_product_attention_vjp": "built only where no other transform runs; "
                                        "inside one, attention's vjp traces its composite",
}

# Primitives with a vjp that these cases do not reach, and where they are checked.
CHECKED_ELSEWHERE = {
    "all_sum", "all_max", "all_min", "all_gather", "gather_shards", "sum_scatter",
    "sum_gradients",  # tests/test_distributed.py::test_gradient_rules
    "copy",  # the tracers' own copy: every transform goes through it
    "vmap_loop",  # vmap's per-slice fallback: test_grad_of_vmap_is_the_stacked_grads
    "custom_function",  # made per call: tests/test_transforms_oracle.py
    "per_count",  # a shape's count (no gradient): tests/test_compile.py, shapeless means
    "shape_guard",  # identity: tests/test_transforms_fuzz_regressions.py (shapeless)
    "bitwise_invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift",  # integers only: zero cotangents, checked against mlx in the oracle tests
    "quantize.params", "quantize.pack", "quantize.component",  # MLX's fallback's rules and
    "categorical", "permutation_take",  # tests/test_programs2_fuzz_regressions.py
}


def _all_primitives():
    """Every primitive the package makes when imported (modules that need a GPU skip)."""
    for info in pkgutil.walk_packages(streamlet.__path__, "streamlet."):
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 (CuPy-only backends)
            pass
    return [o for o in gc.get_objects() if type(o) is Primitive  # not a test's own
            and getattr(o.kernel, "__module__", "").startswith("streamlet")]


def _kind(name):
    """A primitive's entry in NOT_DIFFERENTIABLE: compile's fused runs are named by their
    ops (CompiledMultiplyAdd)."""
    return "compiled" if name.startswith("Compiled") else name


def test_every_primitive_has_a_vjp_or_a_reason():
    prims = _all_primitives()
    names = {p.name for p in prims}
    missing = sorted({p.name for p in prims if p.vjp is None and
                      _kind(p.name) not in NOT_DIFFERENTIABLE})
    assert not missing, f"primitives without a vjp rule and not listed: {missing}"
    stale = sorted(n for n in NOT_DIFFERENTIABLE if n in names and
                   all(p.vjp is not None for p in prims if p.name == n))
    assert not stale, f"listed as not differentiable but they have a vjp: {stale}"


def _reached(case):
    """The primitives of the graph a case builds (walked before anything runs)."""
    arrays, _ = _inputs(case)
    out = case.fn(*[mx.array(a, dtype=F64) for a in arrays])
    stack = [o._node for o in (out if isinstance(out, (list, tuple)) else [out])]
    seen, prims = set(), set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.prim is not None:
            prims.add(n.prim)
        stack.extend(n.inputs)
    return prims


def test_the_cases_reach_every_differentiable_primitive():
    """By vjp rule: the two primitives of an elementwise op (direct, casting) share one."""
    reached = set()
    for case in CASES:
        reached |= {p.vjp for p in _reached(case)}
    unreached = sorted({p.name for p in _all_primitives() if p.vjp is not None and
                        p.vjp not in reached} - CHECKED_ELSEWHERE)
    assert not unreached, f"differentiable primitives no case checks: {unreached}"


@pytest.mark.parametrize("name,fn", [
    ("linalg.cholesky", lambda a: mx.linalg.cholesky(a, stream=CPU)),
    ("linalg.qr", lambda a: mx.linalg.qr(a, stream=CPU)[1]),
    ("linalg.svd", lambda a: mx.linalg.svd(a, compute_uv=False, stream=CPU)),
    ("linalg.eigh", lambda a: mx.linalg.eigh(a, stream=CPU)[0]),
    ("linalg.pinv", lambda a: mx.linalg.pinv(a, stream=CPU)),
    ("linalg.svd", lambda a: mx.linalg.norm(a, 2, stream=CPU)),
    ("segmented_mm", lambda a: mx.segmented_mm(a, a, mx.array([[0, 1], [1, 3]]))),
])
def test_a_primitive_without_a_rule_raises_naming_it(name, fn):
    """Never a zero gradient: the error names the primitive, for grad, vjp and jvp."""
    a = mx.array(np.eye(3) * 2 + 0.1)
    for transform in (lambda: mx.grad(lambda x: fn(x).sum())(a),
                      lambda: mx.vjp(fn, [a], [mx.ones(fn(a).shape)]),
                      lambda: mx.jvp(fn, [a], [mx.ones_like(a)])):
        with pytest.raises(ValueError, match=f"primitive {name} has no"):
            transform()


@pytest.mark.parametrize("case", VMAP_CASES, ids=repr)
def test_grad_of_vmap_is_the_stacked_grads(case):
    """The gradient of the batch's summed loss is each item's gradient, stacked."""
    first, rng = _inputs(case, seed=4)
    second, _ = _inputs(case, seed=5)
    weights = _weights(case, first, rng)
    loss = _loss_fn(case, weights)
    batched = [mx.array(np.stack([a, b]), dtype=F64) for a, b in zip(first, second)]

    def total(*xs):
        return mx.sum(mx.vmap(loss)(*xs))
    got = _grads(total, batched)
    for item, arrays in enumerate((first, second)):
        want = _grads(loss, [mx.array(a, dtype=F64) for a in arrays])
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.array(g[item]), np.array(w), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{case.name}: item {item}")


def test_grad_of_the_loop_fallback_for_a_multi_output_primitive(monkeypatch):
    """Without its vmap rule, divmod is batched by vmap's per-slice loop; the loop's vjp
    gives each slice's gradients, and a shared (unbatched) input's summed over slices."""
    from streamlet.core.ops import elementwise
    monkeypatch.setattr(elementwise._DIVMOD, "vmap", None)
    rng = np.random.default_rng(7)
    x = rng.uniform(1.2, 1.8, (3, 4)) + rng.integers(0, 3, (3, 4))
    y = rng.uniform(0.6, 0.9, 4)

    def item(a, b):
        q, r = mx.divmod(a * b, b + 1)
        return mx.sum(q * a + mx.sin(r) * b)

    def total(a, b):
        return mx.sum(mx.vmap(item, in_axes=(0, None))(a, b))
    gx, gy = _grads(total, [mx.array(x, dtype=F64), mx.array(y, dtype=F64)])
    want = [_grads(item, [mx.array(x[i], dtype=F64), mx.array(y, dtype=F64)]) for i in range(3)]
    np.testing.assert_allclose(np.array(gx), np.stack([np.array(w[0]) for w in want]),
                               rtol=1e-12)
    np.testing.assert_allclose(np.array(gy), sum(np.array(w[1]) for w in want), rtol=1e-12)
