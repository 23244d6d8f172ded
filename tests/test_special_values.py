"""Every elementwise op of the tables, on every dtype, at special values, against mlx.

The inputs are drawn on purpose: ±0, ±inf, NaN, subnormals, the dtype's extremes
(min, max, smallest normal) and a few ordinary values; binary ops see every pair
of them.  One array per (op, dtype), so the whole file runs in a few seconds.
Where MLX refuses a dtype, streamlet must refuse it too (when built, where MLX's
bitwise ops on floats fail only when run).  Integers and bools compare exactly.
Floats must agree on NaN-ness, on the sign of zeros and infinities, and otherwise
within a few units in the last place (MLX's own exp/log/erf approximations and
NumPy's libm round differently).  Complex numbers are compared at finite inputs
(C99's rules for infinite parts differ between the libraries), zeros' signs aside.
Deliberate differences, where MLX 0.32.4 is plainly wrong, are listed in
`TRUE_VALUE` with the reason: those elements are checked against NumPy instead.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import streamlet.core as mx
from conftest import TEST_DEVICE, cpu_if_float64
from streamlet.core.ops.elementwise import BINARY, UNARY

DTYPES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64", "complex64"]
ULPS = 4  # float tolerance, in units of the last place of the dtype
# float64: MLX 0.32.4 computes some float64 math in float32 precision
REL64 = 2.0 ** -22


def _np(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name.rstrip("_"))


def special(name):
    """The special values of a dtype (as a NumPy array of that dtype)."""
    if name == "bool_":
        return np.array([False, True])
    d = _np(name)
    if name.startswith(("int", "uint")):
        info = np.iinfo(d)
        vals = {0, 1, 2, 3, 7, 100, info.max, info.max - 1, info.min, info.min + 1}
        if info.min < 0:
            vals |= {-1, -2, -7, -100}
        return np.array(sorted(vals), dtype=d)
    real = "float32" if name == "complex64" else name
    info = ml_dtypes.finfo(_np(real))
    tiny = float(info.smallest_normal)
    vals = [0.0, -0.0, math.inf, -math.inf, math.nan, float(info.max), -float(info.max),
            tiny, -tiny, float(info.smallest_subnormal), -float(info.smallest_subnormal),
            float(info.eps), 1.0, -1.0, 0.5, -0.5, 2.5, -3.75, 100.0, 0.9, -0.9, 1.5]
    if name == "complex64":
        parts = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -2.5, 0.5, tiny,
                          float(info.max)], np.float32)
        re, im = np.meshgrid(parts, parts)
        return (re + 1j * im).ravel().astype(np.complex64)
    return np.array(vals, dtype=np.float64).astype(d)


def _array(mod, values, name):
    if name == "float64":
        return mod.array(values, mod.float64)
    if name == "bfloat16":
        return mod.array(values.astype(np.float32)).astype(mod.bfloat16)
    return mod.array(values)


# The H200 the GPU suite runs on treats float32 subnormals as zero in CUDA kernels, even
# compiled with --ftz=false (measured: ceilf(1e-45) is 0 and 1e-45 > 0 is false there;
# MLX's own test_subnormal_bool_cast fails on it too).  In a GPU run, MLX's side is
# given and gives those values flushed to signed zeros, and so are streamlet's results.
FLUSHES = TEST_DEVICE == "gpu"
_F32_TINY = float(np.finfo(np.float32).tiny)


def _subnormal(a):
    """Where `a` holds float32 subnormals (as float32, bfloat16 or complex parts)."""
    if a.dtype.kind == "c":
        return _subnormal(a.real) | _subnormal(a.imag)
    if a.dtype.kind not in "fV":
        return np.zeros(a.shape, bool)
    wide = np.abs(a.astype(np.float32))
    return (wide != 0) & (wide < _F32_TINY)


def _flushed(a, dname):
    """`a` with float32 subnormals (bfloat16's included) made signed zeros, in a GPU run."""
    if not FLUSHES or dname not in ("float32", "bfloat16", "complex64") or \
            a.dtype.kind not in "fcV":
        return a
    if a.dtype.kind == "c":
        out = a.copy()
        out.real, out.imag = _flushed(a.real, "float32"), _flushed(a.imag, "float32")
        return out
    wide = a.astype(np.float32)
    return np.where(_subnormal(a), np.copysign(np.float32(0), wide), wide).astype(a.dtype)


def _outcome(mod, fn, *values):
    try:
        out = cpu_if_float64(lambda: fn(*values)) if mod is mx else fn(*values)
        mod.eval(out)
    except Exception as exc:
        return type(exc)
    d = repr(out.dtype).split(".")[-1]
    if d in ("float16", "bfloat16"):
        out = out.astype(mod.float32)
    return d, np.array(out)


def _spacing(want, dname):
    if dname == "bfloat16":
        return np.abs(want).astype(np.float32) * 2.0 ** -7 + 2.0 ** -133
    if dname == "float16":
        return np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    if dname == "float64":
        return np.maximum(np.abs(want) * REL64, np.spacing(np.abs(want)))
    base = np.float32 if dname in ("float32", "complex64") else np.float64
    return np.spacing(np.abs(want).astype(base)).astype(np.float64)


def _mismatch(got, want, dname, ulps=ULPS):
    """Indices where two results of dtype `dname` disagree (see the module docstring)."""
    if got.shape != want.shape:
        return np.ones(max(got.size, want.size), bool)
    if got.dtype.kind in "biu":
        return got != want
    if got.dtype.kind == "c":  # NaN-ness per part, then the distance relative to |want|
        bad = (np.isnan(got.real) != np.isnan(want.real)) | \
            (np.isnan(got.imag) != np.isnan(want.imag))
        with np.errstate(all="ignore"):
            far = np.abs(got - want) > ulps * np.spacing(np.abs(want).astype(np.float32))
        return bad | (far & ~np.isnan(got) & ~np.isnan(want))
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = np.isnan(g) != np.isnan(w)
    exact = ~np.isfinite(w) | ~np.isfinite(g) | (w == 0) | (g == 0)
    both = ~np.isnan(g) & ~np.isnan(w)
    bad |= both & exact & ((g != w) | (np.signbit(g) != np.signbit(w)))
    close = both & ~exact
    with np.errstate(all="ignore"):
        bad |= close & (np.abs(g - w) > ulps * _spacing(w, dname))
    return bad


def _check(op, dname, outcome_mx, outcome_mlx, inputs):
    if isinstance(outcome_mlx, type) or isinstance(outcome_mx, type):
        ok = isinstance(outcome_mlx, type) and isinstance(outcome_mx, type)
        return [] if ok else [f"{op}[{dname}]: streamlet {outcome_mx}, mlx {outcome_mlx}"]
    (dg, got), (dw, want) = outcome_mx, outcome_mlx
    if dg != dw:
        return [f"{op}[{dname}]: dtype {dg}, mlx {dw}"]
    got, want = _flushed(got, dw), _flushed(want, dw)
    bad = _mismatch(got, want, dname if dw == dname else dw, ULPS_OF.get((op, dname), ULPS))
    bad = bad.ravel()
    if FLUSHES and dname in ("float32", "bfloat16") and got.dtype.kind == "f":
        # a subnormal input read as zero has no sign to keep: zeros of either sign agree
        tiny_in = np.any([_subnormal(x).ravel() for x in inputs], axis=0)
        bad &= ~(tiny_in & (got.ravel() == 0) & (want.ravel() == 0))
        if op == "floor_divide":  # a subnormal quotient is floored as a zero
            with np.errstate(all="ignore"):
                q = inputs[0].astype(np.float64) / inputs[1].astype(np.float64)
            bad &= ~_subnormal(q.astype(np.float32)).ravel()
    if dname == "complex64":
        bad &= _complex_compared(op, inputs)
    rule = TRUE_VALUE.get(op)
    if rule is not None:
        ours = rule[0](*inputs, dname) & bad
        bad &= ~ours
        ref = _reference(op, inputs, dname) if ours.any() else None
        if ref is not None:
            bad |= ours & _mismatch(got, ref, dname, ULPS).ravel()
    if not bad.any():
        return []
    idx = np.flatnonzero(bad)[:4]
    shown = ", ".join(f"{tuple(x.ravel()[i] for x in inputs)} -> {got.ravel()[i]!r} "
                      f"(mlx {want.ravel()[i]!r})" for i in idx)
    return [f"{op}[{dname}]: {bad.sum()} of {bad.size} differ: {shown}"]


def _zero(x, d):
    return x == 0


def _tiny(x, d):  # erf of |x| < 2**-20: MLX's approximation gives 0
    return (x != 0) & (np.abs(x.astype(np.float64)) < 2.0 ** -20)


def _wide(x, d):  # float64 math MLX does in float32: overflow, huge arguments, tiny ones
    x = np.abs(x.astype(np.complex128 if d == "complex64" else np.float64))
    return d == "float64" and ((x > 80) | ((x != 0) & (x < 1e-37))) if d != "complex64" \
        else np.zeros(x.shape, bool)


def _exp_underflow(x, d):  # exp of large negative values: MLX's exp flushes to 0
    return np.isfinite(x.astype(np.float64)) & (x.astype(np.float64) < -80) | _wide(x, d)


def _shift_out(x, y, d):  # shift counts outside [0, bits): NumPy's result (0, or -1)
    if d in ("bool_", "complex64") or d.startswith("float"):
        return np.zeros(x.shape, bool)
    bits = np.dtype(d).itemsize * 8
    return (y.astype(np.float64) < 0) | (y.astype(np.float64) >= bits)


def _signed_zero_pair(x, y, d):  # min/max of +0 and -0: IEEE leaves the sign open
    return (x == 0) & (y == 0)


def _any_inf(x, d):  # sign(±inf + 0j) is ±1 (MLX: z / |z| = nan), sign(-0 + 0j) is 0
    return np.isinf(x) | (x == 0)


def _half(x, y, d):  # logaddexp rounded once, where MLX rounds each step in the half dtype
    return np.full(x.shape, d in ("float16", "bfloat16"))


# op -> (elements where streamlet gives the true value and MLX 0.32.4 does not, why);
# those elements are compared with NumPy's float64 value rounded to the dtype
TRUE_VALUE = {
    "erf": (lambda x, d: _zero(x, d) | _tiny(x, d) | _wide(x, d),
            "erf(±0) is ±0 (MLX: -0) and erf(tiny) is 2x/sqrt(pi) (MLX: 0)"),
    "exp": (_exp_underflow, "exp(-100) is a float32 subnormal, exp(100) a finite float64"),
    "expm1": (_exp_underflow, "as exp"),
    "sin": (lambda x, d: _zero(x, d) | _wide(x, d), "sin(-0) is -0; float64 arguments"),
    "cos": (_wide, "float64 arguments beyond float32's range"),
    "tan": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "sinh": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "cosh": (_wide, "as cos"),
    "tanh": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "arcsin": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "arctan": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "arcsinh": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "arctanh": (lambda x, d: _zero(x, d) | _wide(x, d), "as sin"),
    "log1p": (lambda x, d: _zero(x, d) | _wide(x, d), "log1p(-0) is -0; float64"),
    "sign": (lambda x, d: _any_inf(x, d) if d == "complex64" else np.zeros(x.shape, bool),
             "sign of a complex infinity or zero"),
    "left_shift": (_shift_out, "C leaves shifts by >= the width undefined (MLX: the count "
                               "taken mod the width); NumPy's value"),
    "right_shift": (_shift_out, "as left_shift"),
    "minimum": (_signed_zero_pair, "min(+0, -0): IEEE leaves the sign of the zero open"),
    "maximum": (_signed_zero_pair, "as minimum"),
    "logaddexp": (lambda x, y, d: _half(x, y, d) | _exp_underflow(np.minimum(x, y), d)
                  if d not in ("complex64",) else np.zeros(x.shape, bool),
                  "rounded once in half precision; exp underflow as exp"),
}


def _complex_compared(op, inputs):
    """Complex elements compared: finite inputs of moderate size (not near overflow or
    underflow, where MLX's exp(log(z)) powers lose digits); no complex division by zero, no
    zero base of power (C99's infinities differ between the libraries; 0 ** 0 is 1, MLX:
    nan)."""
    ok = np.all([np.isfinite(x) & (np.abs(x) < 1e30) & ((np.abs(x) > 1e-30) | (x == 0))
                 for x in inputs], axis=0)
    if op in ("divide", "floor_divide", "power"):
        ok &= inputs[1 if op != "power" else 0] != 0
    if op == "reciprocal":
        ok &= inputs[0] != 0
    return ok


def _reference(op, inputs, dname):
    """NumPy's value in float64 (complex128), rounded to the dtype; None where NumPy has no
    like-named function or the dtype is not inexact."""
    if dname in DTYPES[:9] or op in ("left_shift", "right_shift", "minimum", "maximum",
                                      "sign"):
        return None if op not in ("left_shift", "right_shift") else \
            getattr(np, op)(*inputs)
    wide = [x.astype(np.complex128 if dname == "complex64" else np.float64) for x in inputs]
    with np.errstate(all="ignore"):
        if op == "erf":
            out = np.array([math.erf(v) for v in wide[0]])
        else:
            out = getattr(np, op)(*wide)
    out = out.astype(_np(dname))
    return out.astype(np.float32) if dname in ("float16", "bfloat16") else out


ULPS_OF = {("logaddexp", "float16"): 64, ("logaddexp", "bfloat16"): 16}
if TEST_DEVICE == "gpu":  # CuPy's complex exp, log and pow round otherwise than NumPy's
    ULPS_OF.update({("logaddexp", "complex64"): 16, ("power", "complex64"): 16})


def _skip(op, dname):
    return False


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_special_values_match_mlx(mlx, op):
    problems = []
    for dname in DTYPES:
        if _skip(op, dname):
            continue
        vals = special(dname)
        ours = _outcome(mx, lambda v: getattr(mx, op)(_array(mx, v, dname)), vals)
        theirs = _outcome(mlx, lambda v: getattr(mlx, op)(_array(mlx, v, dname)),
                          _flushed(vals, dname))
        problems += _check(op, dname, ours, theirs, [vals])
    assert not problems, "\n".join(problems)


def _pairs(op, dname):
    vals = special(dname)
    x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
    if dname.startswith(("int", "uint")) and op in ("floor_divide", "remainder", "divide"):
        # integer division by zero, and min // -1, trap in MLX's C++ (SIGFPE)
        keep = (y != 0) & ~((x == np.iinfo(x.dtype).min) & (y.astype(np.int64) == -1))
        x, y = x[keep], y[keep]
    return x, y


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_special_values_match_mlx(mlx, op):
    problems = []
    for dname in DTYPES:
        if _skip(op, dname):
            continue
        x, y = _pairs(op, dname)
        ours = _outcome(mx, lambda a, b: getattr(mx, op)(_array(mx, a, dname),
                                                         _array(mx, b, dname)), x, y)
        theirs = _outcome(mlx, lambda a, b: getattr(mlx, op)(_array(mlx, a, dname),
                                                             _array(mlx, b, dname)),
                          _flushed(x, dname), _flushed(y, dname))
        problems += _check(op, dname, ours, theirs, [x, y])
    assert not problems, "\n".join(problems)
