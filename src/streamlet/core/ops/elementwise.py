"""Elementwise ops: one table row each (kernel, dtype rule, unsupported kinds).

A unary row is `name: (kernel(xp, a), rule, refused kinds)`; the rule maps the
input dtype to the dtype the kernel computes and returns in.  Binary rows say
how the common input dtype becomes the output dtype.
"""
from __future__ import annotations

import functools
import math
import types

import numpy as np

from . import build as b
from . import cforms, factory, rules
from .build import dt
from .factory import INTEGRAL
from .special import erf_kernel, erfinv_kernel


def _same(d):
    return d


def _bool(d):
    return dt.bool_


def _abs_rule(d):
    return dt.float32 if d.kind == "c" else d


def _identity_for_ints(fn):
    """floor, ceil and friends leave integers alone (NumPy would make them float64)."""
    def kernel(xp, a):
        return a if a.dtype.kind in "biu" else fn(xp, a)
    return kernel


def _sign(xp, a):
    if a.dtype.kind not in "biuc":  # MLX: sign(nan) is 0 where NumPy gives nan (bfloat16: "V")
        return xp.where(a == a, xp.sign(a), a.dtype.type(0))
    return a if a.dtype.kind == "b" else xp.sign(a)


def _square(xp, a):
    return a if a.dtype.kind == "b" else xp.square(a)


def _sigmoid(xp, a):
    one = a.dtype.type(1)
    return one / (one + xp.exp(-a))


def _round(xp, a, decimals=0):
    if a.dtype.kind in "biu":
        return a if decimals >= 0 else xp.round(a, decimals)
    return xp.round(a, decimals)


def _isinf(xp, a):
    return xp.isinf(a) if a.dtype.kind in "fc" else xp.zeros(a.shape, bool)


def _isnan(xp, a):
    return xp.isnan(a) if a.dtype.kind in "fc" else xp.zeros(a.shape, bool)


def _isfinite(xp, a):
    return xp.isfinite(a) if a.dtype.kind in "fc" else xp.ones(a.shape, bool)


def _rsqrt(xp, a):
    out = a.dtype.type(1) / xp.sqrt(a)
    if xp is not np and a.dtype.kind == "c":  # CuPy's 1 / 0j is nan+nanj; NumPy's, MLX's inf+nanj
        out = xp.where(a == 0, a.dtype.type(complex(math.inf, math.nan)), out)
    return out


def _log_base(np_fn, base):
    """log2 and log10.  A complex one on the GPU is log's parts scaled one by one: CuPy
    divides by the complex log of the base, which makes log2(0j) -inf+nanj (-inf+0j)."""
    scale = 1 / math.log(base)

    def fn(xp, a):
        if xp is np or a.dtype.kind != "c":
            return getattr(xp, np_fn)(a)
        ln = xp.log(a)
        out = xp.empty_like(ln)
        out.real, out.imag = ln.real * scale, ln.imag * scale
        return out
    return fn


def _invert(xp, a):
    return xp.logical_not(a) if a.dtype.kind == "b" else xp.invert(a)


def _scaled(factor):
    """degrees and radians: one multiply in the input's own precision, as MLX does."""
    return lambda xp, a: a * a.dtype.type(factor)


_OWN_PRECISION = ("degrees", "radians")  # a multiply by a constant of the input's dtype


def _reciprocal(xp, a):
    return a.dtype.type(1) / a


def _imag(xp, a):
    return xp.imag(a) if a.dtype.kind == "c" else xp.zeros_like(a)


def _log1p(xp, a):
    """log1p; for complex z near 0 as log|1 + z| + i arg(1 + z) with |1 + z| from log1p
    (NumPy's complex log1p loses a tiny z entirely; MLX keeps it)."""
    if a.dtype.kind != "c":
        return xp.log1p(a)
    x, y = a.real, a.imag
    near = 0.5 * xp.log1p(x * (2 + x) + y * y) + 1j * xp.arctan2(y, 1 + x)
    return xp.where(xp.abs(a) < 0.5, near, xp.log1p(a)).astype(a.dtype)


def _signed_inf(sign):
    """isposinf/isneginf: `a == ±inf`, as MLX (a complex number only with a zero imaginary
    part)."""
    def kernel(xp, a):
        if a.dtype.kind not in "fc":
            return xp.zeros(a.shape, bool)
        return a == a.dtype.type(sign * math.inf)
    return kernel


# name: (kernel(xp, a), output dtype rule, refused kinds, derivative): the derivative is
# `d(m, x, out)` written against the namespace `m` of the table's ops (`GRAPH` builds
# nodes, `kernels(xp)` computes), a number, or a marker of `rules`
UNARY = {
    "abs": (lambda xp, a: xp.abs(a), _abs_rule, "", lambda m, x, y: m.conj_if(m.sign(x), x)),
    "negative": (lambda xp, a: xp.negative(a), _same, "b", -1),
    "sign": (_sign, _same, "", rules.NO_TANGENT),
    "square": (_square, _same, "", lambda m, x, y: 2 * x),
    "sqrt": (lambda xp, a: xp.sqrt(a), dt.to_inexact, "", lambda m, x, y: 0.5 / y),
    "rsqrt": (_rsqrt, dt.to_inexact, "", lambda m, x, y: -0.5 * y / x),
    "exp": (lambda xp, a: xp.exp(a), dt.to_inexact, "", lambda m, x, y: y),
    "expm1": (lambda xp, a: xp.expm1(a), dt.to_inexact, "c", lambda m, x, y: y + 1),
    "log": (lambda xp, a: xp.log(a), dt.to_inexact, "", lambda m, x, y: m.reciprocal(x)),
    "log1p": (_log1p, dt.to_inexact, "", lambda m, x, y: m.reciprocal(x + 1)),
    "log2": (_log_base("log2", 2), dt.to_inexact, "",
              lambda m, x, y: m.reciprocal(x * math.log(2))),
    "log10": (_log_base("log10", 10), dt.to_inexact, "",
              lambda m, x, y: m.reciprocal(x * math.log(10))),
    "sin": (lambda xp, a: xp.sin(a), dt.to_inexact, "", lambda m, x, y: m.cos(x)),
    "cos": (lambda xp, a: xp.cos(a), dt.to_inexact, "", lambda m, x, y: -m.sin(x)),
    "tan": (lambda xp, a: xp.tan(a), dt.to_inexact, "", lambda m, x, y: m.reciprocal(m.square(m.cos(x)))),
    "tanh": (lambda xp, a: xp.tanh(a), dt.to_inexact, "", lambda m, x, y: 1 - m.square(y)),
    "sigmoid": (_sigmoid, dt.to_inexact, "c", lambda m, x, y: y * (1 - y)),
    "erf": (erf_kernel, dt.to_inexact, "c",
              lambda m, x, y: (2 / math.sqrt(math.pi)) * m.exp(-m.square(x))),
    "erfinv": (erfinv_kernel, dt.to_inexact, "c",
              lambda m, x, y: (math.sqrt(math.pi) / 2) * m.exp(m.square(y))),
    "floor": (_identity_for_ints(lambda xp, a: xp.floor(a)), _same, "c", rules.NO_TANGENT),
    "ceil": (_identity_for_ints(lambda xp, a: xp.ceil(a)), _same, "c", rules.NO_TANGENT),
    "isnan": (_isnan, _bool, "", rules.ZERO),
    "isinf": (_isinf, _bool, "", rules.NO_TANGENT),
    "isfinite": (_isfinite, _bool, "", rules.NO_TANGENT),
    "logical_not": (lambda xp, a: a == 0 if a.dtype.kind == "c" else
                    xp.logical_not(b.truth(xp, a)), _bool,
                    "", rules.NOT),
    "bitwise_invert": (_invert, _same, INTEGRAL, rules.ZERO),
    "arcsin": (lambda xp, a: xp.arcsin(a), dt.to_inexact, "", lambda m, x, y: m.rsqrt(1 - m.square(x))),
    "arccos": (lambda xp, a: xp.arccos(a), dt.to_inexact, "", lambda m, x, y: -m.rsqrt(1 - m.square(x))),
    "arctan": (lambda xp, a: xp.arctan(a), dt.to_inexact, "",
              lambda m, x, y: m.reciprocal(1 + m.square(x))),
    "arcsinh": (lambda xp, a: xp.arcsinh(a), dt.to_inexact, "",
              lambda m, x, y: m.rsqrt(m.square(x) + 1)),
    "arccosh": (lambda xp, a: xp.arccosh(a), dt.to_inexact, "",
              lambda m, x, y: m.rsqrt(m.square(x) - 1)),
    "arctanh": (lambda xp, a: xp.arctanh(a), dt.to_inexact, "",
              lambda m, x, y: m.reciprocal(1 - m.square(x))),
    "sinh": (lambda xp, a: xp.sinh(a), dt.to_inexact, "", lambda m, x, y: m.cosh(x)),
    "cosh": (lambda xp, a: xp.cosh(a), dt.to_inexact, "", lambda m, x, y: m.sinh(x)),
    "degrees": (_scaled(180 / math.pi), dt.to_inexact, "", 180 / math.pi),
    "radians": (_scaled(math.pi / 180), dt.to_inexact, "", math.pi / 180),
    "reciprocal": (_reciprocal, dt.to_inexact, "", lambda m, x, y: -m.square(y)),
    "conj": (_identity_for_ints(lambda xp, a: xp.conj(a)), _same, "", rules.CONJ),
    "real": (lambda xp, a: xp.real(a), _abs_rule, "", 1),
    "imag": (_imag, _abs_rule, "", complex(0, -1)),  # of complex arrays only (`imag` below)
    "isposinf": (_signed_inf(1), _bool, "", rules.ZERO),
    "isneginf": (_signed_inf(-1), _bool, "", rules.ZERO),
    "trunc": (_identity_for_ints(lambda xp, a: xp.trunc(a)), _same, "c", rules.ZERO),
    "positive": (lambda xp, a: a, _same, "", 1),
}

def _int_power(xp, x, y):
    """MLX's integer power: a negative exponent gives 0."""
    neg = y < 0
    out = xp.power(x, xp.where(neg, 0, y))
    return xp.where(neg, out.dtype.type(0), out)


def _power(xp, x, y):
    if x.dtype.kind == "b":  # x ** y of truth values: 1 unless x is 0 and y is 1
        return xp.logical_or(x, xp.logical_not(y))
    if x.dtype.kind in "iu":
        return _int_power(xp, x, y)
    return xp.power(x, y)


def _subtract(xp, x, y):
    """MLX subtracts bools modulo 2 (an xor); NumPy refuses to."""
    return xp.not_equal(x, y) if x.dtype.kind == "b" else xp.subtract(x, y)


def _logical(fn):
    return lambda xp, x, y: fn(xp, b.truth(xp, x).astype(bool), b.truth(xp, y).astype(bool))


def _logaddexp(xp, x, y):
    """log(exp(x) + exp(y)) without overflow; exactly x where y is -inf (the sign of -0)."""
    if x.dtype.kind == "c":
        first = (x.real > y.real) | ((x.real == y.real) & (x.imag >= y.imag))  # MLX's max
        hi, lo = xp.where(first, x, y), xp.where(first, y, x)
        out = hi + xp.log1p(xp.exp(lo - hi))  # MLX's branch: the larger real part's
        return xp.where((lo == -math.inf) | (hi == math.inf), hi, out)  # MLX's mask
    out = xp.logaddexp(x, y)
    return xp.where(y == -math.inf, x, xp.where(x == -math.inf, y, out))


def _floor_divide(xp, x, y):
    """MLX's floor_divide: floor(x / y) for floats (inf // 2 is inf, -5 // inf is -0),
    the plain quotient for complex, `x and y` for bools (x / True)."""
    if x.dtype.kind == "b":
        return xp.logical_and(x, y)
    if x.dtype.kind in "iu":
        return xp.floor_divide(x, y)
    return x / y if x.dtype.kind == "c" else xp.floor(x / y)


def _remainder(xp, x, y):
    """MLX's remainder: fmod, moved by y where its sign differs from y's (0 % -inf is 0,
    NumPy's -0); `x and not y` for bools."""
    if x.dtype.kind == "b":
        return xp.logical_and(x, xp.logical_not(y))
    if x.dtype.kind in "iu":
        return xp.remainder(x, y)
    r = xp.fmod(x, y)
    return xp.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)


def _extreme(name):
    """MLX's minimum/maximum: `x` where it is NaN (for complex: either part) or compares
    less (greater) than `y`, else `y`; so `minimum(0, -0)` is -0 and `minimum(-0, 0)` is 0,
    in every float type (NumPy's float16 minimum keeps the first zero).  Complex numbers
    compare as MLX's do, by real part, then imaginary part."""
    def kernel(xp, x, y):
        k = x.dtype.kind
        if k in "biu" or (k == "f" and x.dtype.itemsize >= 4):  # NumPy's own agrees there
            return getattr(xp, name)(x, y)
        if k == "c":
            xr, yr = x.real, y.real
            if name == "minimum":
                take = (xr < yr) | ((xr == yr) & (x.imag < y.imag))
            else:
                take = (xr > yr) | ((xr == yr) & (x.imag > y.imag))
            return xp.where(take | (x != x), x, y)  # a NaN in either part
        take = x < y if name == "minimum" else x > y
        return xp.where(take | (x != x), x, y)
    return kernel


def _extreme_into(name):
    """`_extreme(name)` writing into `out` (`Primitive.donate`; donation leaves out the
    half types): NumPy's ufunc for real numbers, MLX's rule for complex ones."""
    ufunc, kernel = getattr(np, name), _extreme(name)

    def into(x, y, out):
        if out.dtype.kind == "c":
            out[...] = kernel(np, x, y)
            return out
        return ufunc(x, y, out=out)
    return into


def _shift_rule(d):
    return dt.uint8 if d.kind == "b" else d


def _shift(fn):
    """Shifts of bools shift their uint8 values, as MLX."""
    def kernel(xp, x, y):
        if x.dtype.kind == "b":
            x, y = x.astype("uint8"), y.astype("uint8")
        return fn(x, y)
    return kernel




def _chosen(pick):
    """The derivative of minimum/maximum: 1 where that input (`pick` names the comparison
    that takes it) is the one taken."""
    return lambda m, x, y, o: m.cast_like(getattr(m, pick)(x, y), o)


def _power_dx(m, x, y, o):
    return m.power(x, y - 1) * y


def _power_dy(m, x, y, o):
    return m.where(o, m.log(x) * o, 0)  # 0 * log 0 is 0


def _atan2_dx(m, x, y, o):
    return y / (m.square(x) + m.square(y))


def _atan2_dy(m, x, y, o):
    return -x / (m.square(x) + m.square(y))


_CONSTANT = (rules.ZERO, rules.ZERO)  # piecewise constant: comparisons, logic, bits
_LOGICAL = (rules.NO_TANGENT, rules.NO_TANGENT)  # MLX casts the operands to bool first

# name: (kernel(xp, x, y) on inputs of the common dtype, output rule, refused kinds,
#        partial derivatives d(m, x, y, out), as the unary rows' derivative)
BINARY = {
    "add": (lambda xp, x, y: xp.add(x, y), _same, "", (1, 1)),
    "subtract": (_subtract, _same, "", (1, -1)),
    "multiply": (lambda xp, x, y: xp.multiply(x, y), _same, "",
                 (lambda m, x, y, o: y, lambda m, x, y, o: x)),
    "divide": (lambda xp, x, y: xp.true_divide(x, y), dt.to_inexact, "",
               (lambda m, x, y, o: m.reciprocal(y), lambda m, x, y, o: -x / m.square(y))),
    "floor_divide": (_floor_divide, _same, "", _CONSTANT),
    "remainder": (_remainder, _same, "c",
                  (1, lambda m, x, y, o: -m.floor(x / y))),
    "power": (_power, _same, "", (_power_dx, _power_dy)),
    "minimum": (_extreme("minimum"), _same, "",
                (_chosen("less"), _chosen("greater_equal"))),
    "maximum": (_extreme("maximum"), _same, "",
                (_chosen("greater"), _chosen("less_equal"))),
    "arctan2": (lambda xp, x, y: xp.arctan2(x, y), dt.to_inexact, "c", (_atan2_dx, _atan2_dy)),
    "equal": (lambda xp, x, y: xp.equal(x, y), _bool, "", _CONSTANT),
    "not_equal": (lambda xp, x, y: xp.not_equal(x, y), _bool, "", _CONSTANT),
    "less": (lambda xp, x, y: xp.less(x, y), _bool, "", _CONSTANT),
    "less_equal": (lambda xp, x, y: xp.less_equal(x, y), _bool, "", _CONSTANT),
    "greater": (lambda xp, x, y: xp.greater(x, y), _bool, "", _CONSTANT),
    "greater_equal": (lambda xp, x, y: xp.greater_equal(x, y), _bool, "", _CONSTANT),
    "logical_and": (_logical(lambda xp, x, y: xp.logical_and(x, y)), _bool, "", _LOGICAL),
    "logical_or": (_logical(lambda xp, x, y: xp.logical_or(x, y)), _bool, "", _LOGICAL),
    "bitwise_and": (lambda xp, x, y: xp.bitwise_and(x, y), _same, INTEGRAL, _CONSTANT),
    "bitwise_or": (lambda xp, x, y: xp.bitwise_or(x, y), _same, INTEGRAL, _CONSTANT),
    "bitwise_xor": (lambda xp, x, y: xp.bitwise_xor(x, y), _same, INTEGRAL, _CONSTANT),
    "left_shift": (_shift(lambda x, y: x << y), _shift_rule, INTEGRAL, _CONSTANT),
    "right_shift": (_shift(lambda x, y: x >> y), _shift_rule, INTEGRAL, _CONSTANT),
    "logaddexp": (_logaddexp, dt.to_inexact, "",
                  (lambda m, x, y, o: m.sigmoid(x - y), lambda m, x, y, o: m.sigmoid(y - x))),
    "logical_xor": (_logical(lambda xp, x, y: xp.logical_xor(x, y)), _bool, "", _CONSTANT),
}

# Other names MLX gives the same ops.
ALIASES = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
    "conjugate": "conj", "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
}


_HALF = (dt.float16.np, dt.bfloat16.np)


def _in_float32(fn):
    """`fn` computed in float32 for float16 and bfloat16 inputs and rounded once, as MLX
    does (`sigmoid(float16(8))` is 0.99951171875, not 1 from rounding each step)."""
    def kernel(xp, a):
        if a.dtype not in _HALF:
            return fn(xp, a)
        out = fn(xp, a.astype("float32"))
        return out.astype(a.dtype) if out.dtype.kind == "f" else out
    return kernel


def _rsqrt_kernel(xp, a):
    """MLX's CPU takes a half type's rsqrt as the reciprocal of its square root rounded to
    that type, rounding twice (`rsqrt(bfloat16(1.0703125))` is 0.96875, not 0.96484375);
    its GPU rounds once."""
    if xp is not np or a.dtype not in _HALF:
        return _in_float32(_rsqrt)(xp, a)
    root = np.sqrt(a.astype("float32")).astype(a.dtype).astype("float32")
    return (np.float32(1) / root).astype(a.dtype)


# The rows whose kernel is one NumPy ufunc: on the CPU they may write into a donated
# input's buffer (`Primitive.donate`).
_UFUNCS = {name: getattr(np, name) for name in (
    "negative", "sqrt", "exp", "expm1", "log", "sin", "cos", "tan", "tanh", "arcsin",
    "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "sinh", "cosh", "conj", "add",
    "multiply", "arctan2", "bitwise_and", "bitwise_or",
    "bitwise_xor")}
_UFUNCS.update(abs=np.absolute, divide=np.true_divide, minimum=_extreme_into("minimum"),
               maximum=_extreme_into("maximum"))

# The rows with a GPU kernel of their own (the others run their kernel on CuPy arrays):
# erfinv's emulated fused multiply-adds would be hundreds of CuPy launches.
_GPU = {"erfinv": b.GpuKernel("streamlet.backend.cuda_random:erfinv")}

for _name, _row in UNARY.items():
    _fn = _row[0] if _name in _OWN_PRECISION else _in_float32(_row[0])
    _fn = _rsqrt_kernel if _name == "rsqrt" else _fn
    globals()[_name] = factory.unary(_name, _fn, *_row[1:], ufunc=_UFUNCS.get(_name),
                                     gpu=_GPU.get(_name), cform=cforms.UNARY.get(_name))
for _name, _row in BINARY.items():
    globals()[_name] = factory.binary(_name, *_row, ufunc=_UFUNCS.get(_name),
                                      cform=cforms.BINARY.get(_name))
_imag_of_complex = imag  # noqa: F821 (made from the table above)


def imag(a, /, *, stream=None):
    """The imaginary part; of a real array zeros of its dtype, not computed from it (as
    MLX's `zeros_like`: nothing flows back through it, no tangent's sign)."""
    a = b.as_array(a, "imag")
    if a._dtype.kind == "c":
        return _imag_of_complex(a, stream=stream)
    return rules.zeros_for(a, a._dtype, stream)


for _name, _target in ALIASES.items():
    globals()[_name] = globals()[_target]


def _standalone(op):
    """`op` with each operand made an array on its own, as MLX's logical ops take them: no
    weak scalars, so `logical_and(uint8_array, -3)` is true where the array is.  A Python
    int beyond int64 is refused as the other binary ops' operand is (RuntimeError)."""
    def fn(a, b_, /, *, stream=None):
        for v in (a, b_):
            if type(v) is int:
                dt.check_int64(v, op.__name__)
        return op(b.as_array(a, op.__name__), b.as_array(b_, op.__name__), stream=stream)
    b.rename(fn, op.__name__)
    fn.__doc__, fn.same = op.__doc__, op.same
    return fn


logical_and, logical_or = _standalone(logical_and), _standalone(logical_or)  # noqa: F821


def round(a, /, decimals=0, *, stream=None):
    """Round to `decimals` places, halves to even: `mx.round(mx.array([0.5, 1.5]))` is [0, 2].

    Other than 0 decimals, as MLX: `a` times 10**decimals (a float32, then in `a`'s float
    type, float32 for integers), rounded, times the float32 reciprocal of that scale, cast
    back to `a`'s dtype (so float16 with 5 decimals overflows, and integers pass through
    float32)."""
    a = b.as_array(a, "round")
    decimals = b.int_arg(decimals, "round", "decimals")
    st = b.resolve(stream)
    if decimals != 0:
        from .creation import astype
        d = dt.to_inexact(a._dtype)
        with np.errstate(over="ignore", divide="ignore"):
            scale = np.float32(np.power(10.0, decimals))
            inv = np.float32(1) / scale
        x = multiply(a, b.scalar(float(scale), d), stream=stream)  # noqa: F821 (the table's)
        x = b.node(_ROUND, (x,), x._shape, x._dtype, {"decimals": 0}, st)
        x = multiply(x, b.scalar(float(inv), d), stream=stream)  # noqa: F821
        return astype(x, a._dtype, stream=stream)
    return b.node(_ROUND, (a,), a._shape, a._dtype, {"decimals": 0}, st)


_ROUND = b.make("round", _round, vmap=rules.elementwise_vmap, shape=rules.broadcast_shape,
                **rules.from_derivative(rules.NO_TANGENT, "round"))


def _where(xp, c, x, y, dtype):
    return xp.where(b.truth(xp, c), b.cast(x, dtype), b.cast(y, dtype))


def _where_vjp(c, out, cond, x, y, dtype):
    """The cotangent times each mask, as MLX's (a NaN or inf cotangent is NaN in the
    operand not taken)."""
    if cond._dtype is not dt.bool_:
        cond = cond.astype(dt.bool_)
    return (None, lambda: multiply(cond, c),  # noqa: F821
            lambda: multiply(logical_not(cond), c))  # noqa: F821


def _where_jvp(t, out, cond, x, y, dtype):
    """MLX's: each tangent times its mask, so a NaN or inf tangent of the branch not taken
    makes NaN (as the vjp's zero cotangent times that derivative does); a tangent of the
    condition adds zeros (its -0s turn +0) of the result's dtype, not its own."""
    if t[1] is None and t[2] is None:
        return rules.zeros_for(out, out._dtype)
    if cond._dtype is not dt.bool_:
        cond = cond.astype(dt.bool_)
    # a branch promoted to the result's dtype inside the op: its tangent cast as MLX's astype
    t = [u if u is None or i == 0 or u._dtype is out._dtype else u.astype(out._dtype)
         for i, u in enumerate(t)]
    terms = [rules.zeros_for(out, out._dtype) if t[0] is not None else None,
             multiply(cond, t[1]) if t[1] is not None else None,  # noqa: F821
             multiply(logical_not(cond), t[2]) if t[2] is not None else None]  # noqa: F821
    terms = [u for u in terms if u is not None]
    return functools.reduce(lambda u, v: u + v, terms)


_WHERE = b.make("where", _where, vjp=_where_vjp, jvp=_where_jvp, vmap=rules.elementwise_vmap,
                shape=rules.broadcast_shape, cform=cforms.WHERE)


def where(condition, x, y, /, *, stream=None):
    """Pick from `x` where `condition` holds, else from `y` (all three broadcast)."""
    st = b.resolve(stream)
    c = b.as_array(condition, "where")
    x, y, d = b.promote_pair(x, y, "where")
    cs = c._shape
    shape = cs if cs == x._shape == y._shape else \
        b.broadcast_shapes(cs, x._shape, y._shape, op="where")
    return b.node(_WHERE, (c, x, y), shape, d, {"dtype": d.np}, st)


def clip(a, /, a_min, a_max, *, stream=None):
    """Clamp `a` to [a_min, a_max]; either bound may be None."""
    if a_min is None and a_max is None:
        raise ValueError("[clip] At most one of a_min and a_max may be None.")
    a = b.as_array(a, "clip")
    # as MLX: a scalar bound takes its dtype from `a`, not from the result of the first clip
    lo = b.promote_pair(a, a_min, "clip")[1] if b.is_scalar(a_min) else a_min
    hi = b.promote_pair(a, a_max, "clip")[1] if b.is_scalar(a_max) else a_max
    if a_min is not None:
        a = maximum(a, lo, stream=stream)  # noqa: F821 (made from the table above)
    if a_max is not None:
        a = minimum(a, hi, stream=stream)  # noqa: F821
    return a


def isclose(a, b_, /, rtol=1e-5, atol=1e-8, *, equal_nan=False, stream=None):
    """Elementwise `abs(a - b) <= atol + rtol * abs(b)` (infinities close only to themselves),
    built as MLX builds it: each operand an array on its own (a Python float is float32),
    `atol` and `rtol` float32 arrays, `abs(b)` in b's dtype and `a - b` in the common one
    (integers wrap: `abs(int8(-128))` is -128), infinities as `isposinf`/`isneginf` see
    them (a complex number only with a zero imaginary part)."""
    x, y = b.as_array(a, "isclose"), b.as_array(b_, "isclose")
    rtol, atol = b.float_arg(rtol, "isclose", "rtol"), b.float_arg(atol, "isclose", "atol")
    equal_nan = b.bool_arg(equal_nan, "isclose", "equal_nan")
    s = stream
    # noqa: F821 below: the table's ops
    rhs = add(b.scalar(_f32(atol), dt.float32),  # noqa: F821
              multiply(b.scalar(_f32(rtol), dt.float32), abs(y, stream=s), stream=s),  # noqa: F821
              stream=s)
    out = less_equal(abs(subtract(x, y, stream=s), stream=s), rhs, stream=s)  # noqa: F821
    xpos, ypos = isposinf(x, stream=s), isposinf(y, stream=s)  # noqa: F821
    xneg, yneg = isneginf(x, stream=s), isneginf(y, stream=s)  # noqa: F821
    either = logical_or(logical_or(xpos, xneg, stream=s), logical_or(ypos, yneg, stream=s),
                        stream=s)
    both = logical_or(logical_and(xpos, ypos, stream=s), logical_and(xneg, yneg, stream=s),
                      stream=s)
    out = logical_and(out, logical_not(either, stream=s), stream=s)  # noqa: F821
    out = logical_or(out, both, stream=s)
    if equal_nan:
        nan_pair = logical_and(isnan(x, stream=s), isnan(y, stream=s), stream=s)  # noqa: F821
        out = logical_or(out, nan_pair, stream=s)
    return out


def allclose(a, b_, /, rtol=1e-5, atol=1e-8, *, equal_nan=False, stream=None):
    """True (as a bool array) when every element of `a` is close to `b`."""
    from .reduction import all as all_
    return all_(isclose(a, b_, rtol, atol, equal_nan=equal_nan, stream=stream), stream=stream)


def array_equal(a, b_, /, *, equal_nan=False, stream=None):
    """True (as a bool array) when `a` and `b` have the same shape and elements
    (`equal_nan` is keyword-only, as MLX's binding takes it)."""
    from .reduction import all as all_
    x, y = b.as_array(a, "array_equal"), b.as_array(b_, "array_equal")
    equal_nan = b.bool_arg(equal_nan, "array_equal", "equal_nan")
    if x._shape != y._shape:
        return b.array(False)
    same = equal(x, y, stream=stream)  # noqa: F821
    if equal_nan:  # MLX's NaNEqual: `x == y || (isnan(x) && isnan(y))`
        nan_pair = logical_and(isnan(x, stream=stream), isnan(y, stream=stream),  # noqa: F821
                               stream=stream)
        same = logical_or(same, nan_pair, stream=stream)
    return all_(same, stream=stream)


def _divmod(xp, x, y, dtype):
    """floor_divide's and remainder's kernels (MLX's DivMod computes the same: `inf // 2`
    is inf, bools are logical), not NumPy's divmod."""
    x, y = b.cast(x, dtype), b.cast(y, dtype)
    return _floor_divide(xp, x, y), _remainder(xp, x, y)


# one primitive, as MLX's DivMod: its derivatives are zero (both results are piecewise
# constant as MLX defines them, though `a % b` alone has derivative 1 in `a`)
def _divmod_vmap(axes, results, x, y, dtype, outs):
    from .shape import expand_dims
    rank = len(results[0]._shape)
    moved = []
    for v, ax in zip((x, y), axes):
        if ax is not None:
            v = rules.to_front(v, ax)
            lack = rank - (v.ndim - 1)
            v = expand_dims(v, tuple(range(1, lack + 1))) if lack > 0 else v
        moved.append(v)
    return divmod(*moved), [0, 0]


_DIVMOD = b.make("divmod", _divmod, multi=True, vmap=_divmod_vmap,
                 vjp=lambda cots, results, x, y, **p: (None, None),
                 jvp=lambda t, results, x, y, **p: [rules.zero_tangent(t, r) for r in results])


def divmod(a, b_, stream=None):  # noqa: A001 (MLX's name)
    """`[a // b, a % b]` elementwise, computed together: `mx.divmod(mx.array([7, -7]), 3)`."""
    st = b.resolve(stream)
    x, y, d = b.promote_pair(a, b_, "divmod")
    if d.kind == "c":
        raise ValueError("[divmod] Complex type not supported.")
    shape = b.broadcast_shapes(x._shape, y._shape, op="divmod")
    return list(b.multi(_DIVMOD, (x, y), [(shape, d), (shape, d)], {"dtype": d.np}, st))


def _nan_to_num(xp, a, nan, posinf, neginf):
    """Each replacement picked on the input, as MLX (`nan=inf` stays inf, it is not then
    taken for an infinity); the values come rounded to float32 (MLX takes floats)."""
    t = a.dtype.type
    out = xp.where(a != a, t(nan), a)
    out = xp.where(a == t(math.inf), t(posinf), out)
    return xp.where(a == t(-math.inf), t(neginf), out)


_NAN_TO_NUM = b.make("nan_to_num", _nan_to_num, vmap=rules.elementwise_vmap,
                     shape=rules.broadcast_shape,
                     **rules.from_derivative(lambda m, x, y: m.cast_like(m.isfinite(x), x),
                                             "nan_to_num"))


def _f32(v):
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def nan_to_num(a, /, nan=0.0, posinf=None, neginf=None, *, stream=None):
    """Replace NaN by `nan` and infinities by `posinf`/`neginf` (default: the dtype's limits,
    which MLX knows for float16, bfloat16 and float32 only)."""
    a = b.as_array(a, "nan_to_num")
    nan = b.float_arg(nan, "nan_to_num", "nan")
    if posinf is not None:
        posinf = b.float_arg(posinf, "nan_to_num", "posinf")
    if neginf is not None:
        neginf = b.float_arg(neginf, "nan_to_num", "neginf")
    d = a._dtype
    if d.kind not in "fc":
        return b.alias(a, b.resolve(stream))
    # NOTE: MLX raises this for float64 too (it knows no float64 maximum); streamlet keeps
    # float64's own limits there, which tests/test_transforms_gradcheck.py relies on
    if (posinf is None or neginf is None) and d.kind == "c":
        raise ValueError(f"[nan_to_num] Does not yet support given type: {d.name}.")
    big = float(dt.finfo(d).max) if posinf is None or neginf is None else 0.0
    params = {"nan": _f32(nan), "posinf": big if posinf is None else _f32(posinf),
              "neginf": -big if neginf is None else _f32(neginf)}
    return b.node(_NAN_TO_NUM, (a,), a._shape, d, params, b.resolve(stream))


pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
euler_gamma = 0.5772156649015329


# -- the namespaces the derivative columns are written against -------------------------------

def _conj_if(d, x):
    """`d`, conjugated for complex `x` (abs: d|z| = Re(conj(sign z) dz))."""
    return conj(d) if x._dtype.kind == "c" else d  # noqa: F821 (from the table)


GRAPH = types.SimpleNamespace(
    **{name: globals()[name] for name in (*UNARY, *BINARY)}, where=where,
    cast_like=lambda a, o: a.astype(o._dtype), conj_if=_conj_if, kind=lambda a: a._dtype.kind)
_KERNELS: dict = {}


def kernels(xp):
    """The table's kernels on array module `xp` as functions of arrays, with GRAPH's
    names: a derivative computed with them runs the kernels its nodes would run."""
    ns = _KERNELS.get(xp)
    if ns is None:
        fns = {name: functools.partial(row[0], xp) for name, row in (*UNARY.items(),
                                                                     *BINARY.items())}
        ns = _KERNELS[xp] = types.SimpleNamespace(
            **fns, where=lambda c, x, y: xp.where(c.astype(bool), x, y),
            cast_like=lambda a, o: a.astype(o.dtype),
            conj_if=lambda d, x: xp.conj(d) if x.dtype.kind == "c" else d,
            kind=lambda a: a.dtype.kind)
    return ns
