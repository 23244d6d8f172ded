"""Scans along an axis (cumsum, cumprod, cummax, cummin, logcumsumexp) and diff."""
from __future__ import annotations

import numpy as np

from . import build as b
from .build import dt
from .rules import along_axes, same_shape, stop_gradient, via, zeros_for


def _sum_dtype(d):
    return dt.int32 if d.kind == "b" else d


def _same(d):
    return d


# the exclusive scans' first values, as MLX's: a complex infinity in both parts, and
# bfloat16 (NumPy kind "V") as the other floats
_EXTREMES = {"f": (-np.inf, np.inf), "V": (-np.inf, np.inf), "b": (False, True),
             "c": (complex(-np.inf, -np.inf), complex(np.inf, np.inf))}


def _lowest(xp, dtype):
    return _EXTREMES[dtype.kind][0] if dtype.kind in _EXTREMES else np.iinfo(dtype).min


def _highest(xp, dtype):
    return _EXTREMES[dtype.kind][1] if dtype.kind in _EXTREMES else np.iinfo(dtype).max


def _accumulate(xp, name, a, axis):
    """`xp.<name>.accumulate(a, axis)`; CuPy has no ufunc accumulate, so there the scan
    doubles its reach each pass (log2(n) whole-array passes, no host round trip)."""
    if xp is np:
        return getattr(np, name).accumulate(a, axis)
    fn, out, k, n = getattr(xp, name), a.copy(), 1, a.shape[axis]
    lead = (slice(None),) * axis
    while k < n:
        out[lead + (slice(k, None),)] = fn(out[lead + (slice(k, None),)],
                                           out[lead + (slice(0, n - k),)])
        k *= 2
    return out


def _stepwise(xp, step, a, axis):
    """The scan one position at a time: `out[i] = step(out[i - 1], a[i])` along `axis`."""
    out = a.copy()
    w = xp.moveaxis(out, axis, 0)
    with np.errstate(all="ignore"):
        for i in range(1, w.shape[0]):
            w[i] = step(w[i - 1], w[i])
    return out


def _before(x, y):
    """MLX's `x < y` of complex numbers: by real part, then by imaginary part (NaN: False)."""
    return (y.real > x.real) | ((y.real == x.real) & (y.imag > x.imag))


def _any(xp, mask):
    """Whether a fix-up is needed: on the host asked, on a GPU assumed (no round trip)."""
    return xp is not np or bool(mask.any())


def _cummax(xp, a, axis):
    if a.dtype.kind == "c" and _any(xp, xp.isnan(a)):  # MLX's `x < y ? y : x`: no NaN kept
        return _stepwise(xp, lambda y, x: xp.where(_before(x, y), y, x), a, axis)
    return _accumulate(xp, "maximum", a, axis)


def _cummin(xp, a, axis):
    if a.dtype.kind == "c" and _any(xp, xp.isnan(a)):  # MLX's `x < y ? x : y`
        return _stepwise(xp, lambda y, x: xp.where(_before(x, y), x, y), a, axis)
    out = _accumulate(xp, "minimum", a, axis)
    if a.dtype.kind in "fV":
        zero = out == 0
        if _any(xp, zero):  # MLX keeps the running minimum on a tie: the first zero's sign
            n = a.shape[axis]
            at = xp.arange(n).reshape((n,) + (1,) * (a.ndim - axis - 1))
            first = _accumulate(xp, "minimum", xp.where(a == 0, at, n - 1), axis)
            negative = xp.take_along_axis(xp.signbit(a), first, axis)
            out = xp.where(zero, xp.where(negative, -abs(out), abs(out)), out)
    return out


def _logcumsumexp(xp, a, axis):
    if a.dtype.kind == "c":  # MLX's logaddexp, step by step (log of cumsum changes branch)
        from .elementwise import BINARY
        add = BINARY["logaddexp"][0]
        return _stepwise(xp, lambda y, x: add(xp, y, x), a, axis)
    work = a if a.dtype.itemsize >= 4 else a.astype("float32")
    out = _accumulate(xp, "logaddexp", work, axis)
    zero = out == 0
    if _any(xp, zero):  # MLX adds -inf exactly: a lone -0.0 among -infs stays -0.0
        seen = work != -np.inf
        lone = xp.cumsum(seen, axis) == 1
        negative = xp.cumsum(seen & xp.signbit(work), axis) == 1
        out = xp.where(zero & lone & negative, -abs(out), out)
    return out


# name: (scan(xp, a, axis) in the output dtype, output dtype rule, identity(xp, dtype))
SCANS = {
    "cumsum": (lambda xp, a, axis: xp.cumsum(a, axis, dtype=a.dtype), _sum_dtype,
               lambda xp, d: 0),
    "cumprod": (lambda xp, a, axis: xp.cumprod(a, axis, dtype=a.dtype), _same,
                lambda xp, d: 1),
    "cummax": (_cummax, _same, _lowest),
    "cummin": (_cummin, _same, _highest),
    "logcumsumexp": (_logcumsumexp, dt.to_inexact, lambda xp, d: -np.inf),
}


def _scan_kernel(fn, identity):
    def kernel(xp, a, axis, reverse, inclusive, dtype):
        a = b.cast(a, dtype)
        if reverse:
            a = xp.flip(a, axis)
        if not inclusive and a.shape[axis]:  # as MLX: the identity is the first operand
            head = [slice(None)] * a.ndim     # (an exclusive sum of -0.0 starts 0 + -0.0)
            head[axis] = slice(0, 1)
            body = list(head)
            body[axis] = slice(None, -1)
            first = xp.empty_like(a[tuple(head)])
            first[...] = identity(xp, a.dtype)
            a = xp.concatenate([first, a[tuple(body)]], axis)
        out = fn(xp, a, axis)
        if out.dtype != dtype:
            out = out.astype(dtype)
        return xp.flip(out, axis) if reverse else out
    return kernel


# -- transform rules (MLX's: ops/primitives.cpp, Scan::vjp) --------------------------------
def _cumsum_vjp(c, out, x, axis, reverse, inclusive, dtype):
    return (cumsum(c, axis, reverse=not reverse, inclusive=inclusive),)  # noqa: F821


def _cumsum_jvp(t, out, x, axis, reverse, inclusive, dtype):
    return cumsum(t[0], axis, reverse=reverse, inclusive=inclusive)  # noqa: F821


def _cumprod_vjp(c, out, x, axis, reverse, inclusive, dtype):
    """Before the first zero: d/dx_i = sum_j>=i c_j out_j / x_i; at the first zero the
    same with that zero read as one; after it, zero."""
    from .elementwise import equal, logical_and, not_equal, where
    other = cumprod(x, axis, reverse=reverse, inclusive=not inclusive)  # noqa: F821
    incl, excl = (out, other) if inclusive else (other, out)
    zero = b.const(0, x._dtype)
    is_zero = equal(incl, zero)
    first_zero = logical_and(is_zero, not_equal(excl, zero))

    def partial(p):
        return cumsum(p * c, axis, reverse=not reverse, inclusive=inclusive)  # noqa: F821
    with_one = cumprod(where(first_zero, b.const(1, x._dtype), x), axis,  # noqa: F821
                       reverse=reverse, inclusive=inclusive)
    return (where(first_zero, partial(with_one), where(is_zero, zero, partial(out) / x)),)


def _logcumsumexp_vjp(c, out, x, axis, reverse, inclusive, dtype):
    """The cotangent split by sign so that its logarithm exists (TensorFlow's approach)."""
    from .elementwise import abs as abs_, exp, greater, less, log, where
    lowest = b.const(dt.finfo(c._dtype).min, c._dtype)
    log_abs = log(abs_(c))

    def side(keep):
        lg = where(keep, log_abs, lowest)
        return exp(logcumsumexp(lg - out, axis, reverse=not reverse,  # noqa: F821
                                inclusive=inclusive) + x)
    return (side(greater(c, 0)) - side(less(c, 0)),)


def _logcumsumexp_jvp(t, out, x, axis, reverse, inclusive, dtype):
    """sum over the window of exp(x_j - out_i) t_j, the tangent split by sign as in the vjp
    (an empty window, the first place of an exclusive scan, gives 0)."""
    from .elementwise import abs as abs_, exp, greater, isneginf, less, log, where
    tx = t[0]
    lowest = b.const(dt.finfo(out._dtype).min, out._dtype)
    shifted = log(abs_(tx)) + x

    def side(keep):
        lg = where(keep, shifted, lowest)
        return exp(logcumsumexp(lg, axis, reverse=reverse, inclusive=inclusive)  # noqa: F821
                   - out)
    return where(isneginf(out), b.const(0, out._dtype), side(greater(tx, 0)) - side(less(tx, 0)))


def _extreme_scan_vjp(c, out, x, axis, reverse, inclusive, dtype):
    """cummax/cummin: each position's cotangent goes to the element holding the running
    extreme there (ties: the latest in scan order)."""
    from .creation import arange
    from .elementwise import equal, where
    from .indexing import _along_index, _scatter_add
    from .shape import reshape
    n = x._shape[axis]
    if 0 in x._shape:  # nothing to scatter into (the scatter refuses an empty axis)
        return (zeros_for(x, c._dtype),)
    x_win, ext_win, c_win = x, out, c
    if not inclusive:
        lo, hi = (1, n) if reverse else (0, n - 1)
        x_win = x[(slice(None),) * axis + (slice(lo, hi),)]
        elo, ehi = (0, n - 1) if reverse else (1, n)
        ext_win = out[(slice(None),) * axis + (slice(elo, ehi),)]
        c_win = c[(slice(None),) * axis + (slice(elo, ehi),)]
        iota = arange(lo, hi)
    else:
        iota = arange(0, n)
    iota = reshape(iota, tuple(iota.size if i == axis else 1 for i in range(x.ndim)))
    masked = where(equal(x_win, ext_win), iota, n if reverse else -1)
    owner = cummin(masked, axis, reverse=True) if reverse else \
        cummax(masked, axis)  # noqa: F821
    owner = stop_gradient(owner.astype(dt.uint32))
    return (_scatter_add(c_win, x, _along_index(owner, c_win._shape, axis)),)


_SCAN_RULES = {
    "cumsum": {"vjp": _cumsum_vjp, "jvp": _cumsum_jvp},
    "cumprod": {"vjp": _cumprod_vjp},
    "cummax": {"vjp": _extreme_scan_vjp},
    "cummin": {"vjp": _extreme_scan_vjp},
    "logcumsumexp": {"vjp": _logcumsumexp_vjp, "jvp": _logcumsumexp_jvp},
}


def _make_scan(name, fn, rule, identity):
    prim = b.make(name, _scan_kernel(fn, identity), vmap=along_axes("axis"), shape=same_shape,
                  **_SCAN_RULES[name])
    takes_dtype = name in ("cumsum", "cumprod")

    def op(a, /, axis=None, *, reverse=False, inclusive=True, dtype=None, stream=None):
        from .shape import flatten
        reverse = b.bool_arg(reverse, name, "reverse")
        inclusive = b.bool_arg(inclusive, name, "inclusive")
        a = b.as_array(a, name)
        d = None if dtype is None else dt.as_dtype(dtype)  # its TypeError before the axis's
        if axis is None:
            a, axis = flatten(a, stream=stream), 0
        ax = b.normalize_axis(axis, a.ndim, name)
        d = rule(a._dtype) if d is None else d
        if rule(d) is not d:  # `cumsum(a, dtype=bool)`: MLX sums `a.astype(bool)` as int32
            from .creation import astype
            a, d = astype(a, d, stream=stream), rule(d)
        params = {"axis": ax, "reverse": reverse, "inclusive": inclusive,
                  "dtype": d.np}
        return b.node(prim, (a,), a._shape, d, params, b.resolve(stream))

    if not takes_dtype:
        def op_(a, /, axis=None, *, reverse=False, inclusive=True, stream=None):
            return op(a, axis, reverse=reverse, inclusive=inclusive, stream=stream)
        fn_ = op_
    else:
        fn_ = op
    b.rename(op, name)
    b.rename(fn_, name)
    fn_.__doc__ = (f"{name} along `axis` (of the flattened array if None); `reverse` scans "
                   f"from the end, `inclusive=False` shifts in the identity: "
                   f"`mx.{name}(a, axis=0, reverse=False, inclusive=True)`.")
    return fn_


for _name, _row in SCANS.items():
    globals()[_name] = _make_scan(_name, *_row)
cumulative_sum, cumulative_prod = cumsum, cumprod  # noqa: F821 (made from the table)


# NumPy's diff of booleans is `not_equal`, as MLX's
def _diff_composite(a, n, axis):
    lead = (slice(None),) * axis
    for _ in range(n):
        m = a._shape[axis]
        a = a[lead + (slice(1, m),)] - a[lead + (slice(0, m - 1),)]
    return a


_DIFF = b.make("diff", lambda xp, a, n, axis: xp.diff(a, n, axis), **via(_diff_composite))


def diff(a, /, n=1, axis=-1, *, stream=None):
    """The n-th discrete difference along `axis`: `a[1:] - a[:-1]`, n times."""
    a = b.as_array(a, "diff")
    n = b.int_arg(n, "diff", "n")
    if n < 0:
        raise ValueError(f"[diff] Order must be non-negative but got {n}.")
    if a.ndim == 0:
        raise ValueError("[diff] Requires an array of at least one dimension.")
    ax = b.normalize_axis(axis, a.ndim, "diff")
    if n == 0:
        return b.alias(a, b.resolve(stream))
    shape = a._shape[:ax] + (max(a._shape[ax] - n, 0),) + a._shape[ax + 1:]
    return b.node(_DIFF, (a,), shape, a._dtype, {"n": int(n), "axis": ax}, b.resolve(stream))
