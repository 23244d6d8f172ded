"""Reductions over axes, with MLX's output dtypes."""
from __future__ import annotations

import builtins
import math

import numpy as np


from . import build as b
from . import shape as _sh  # the rules' ops (imported once: hot path)
from .build import dt
from ..graph import SHAPELESS
from .rules import along_axes, inert_tangent, rebuild, same_shape, to_front


def _sum_dtype(d):
    if d.kind == "b" or (d.kind == "i" and d.size < 4):
        return dt.int32
    if d.kind == "u" and d.size < 4:
        return dt.uint32
    return d


def _same(d):
    return d


def _bool(d):
    return dt.bool_


def _var_dtype(d):
    return dt.float32 if d.kind == "c" else dt.to_inexact(d)


_HALF = ("float16", "bfloat16")


def _wide(a):
    """float16 and bfloat16 inputs as float32: MLX's CPU reductions accumulate those in
    float32 and round once (NumPy adds bfloat16, and float16 along a strided axis, in the
    half type: a sum of 3000 bfloat16 ones was 256)."""
    return a.astype("float32") if a.dtype.name in _HALF else a


def _accumulating(name):
    """The kernel of sum or prod (`name`): half types accumulated in float32 (`_wide`); no
    axis reduced is the input itself (NumPy's sum makes -0 a 0)."""
    def kernel(xp, a, axis, keepdims, dtype):
        if not axis:
            return a.astype(dtype)
        return getattr(xp, name)(_wide(a), axis, None if a.dtype.name in _HALF else dtype,
                                 keepdims=keepdims).astype(dtype, copy=False)
    return kernel


_total, _product = _accumulating("sum"), _accumulating("prod")


def _last_dim(shape, axis):
    """MLX's test for its LogSumExp kernel: the reduced axes end with the last one, the
    others before it consecutive and of size 1."""
    if not axis or axis[-1] != len(shape) - 1:
        return False
    return builtins.all(axis[i] + 1 == axis[i + 1] and shape[axis[i]] == 1
               for i in range(len(axis) - 1))


def _logsumexp(xp, a, axis, keepdims, dtype):
    if a.size and (a.dtype.kind == "c" or not _last_dim(a.shape, axis)):
        # MLX composes it here (and for complex), each op in its own dtype (the sum in float32
        # for the half types): log(sum(exp(a - max))) + max, or max where that is
        # infinite; `a - max` is in the input's dtype, so integers wrap
        from .elementwise import BINARY
        m = xp.max(a, axis=axis, keepdims=True)
        e = xp.exp(BINARY["subtract"][0](xp, a, m).astype(dtype))
        mf = m.astype(dtype)
        out = xp.log(_total(xp, e, axis, True, dtype)) + mf
        out = xp.where(xp.isinf(mf), mf, out)
        return out if keepdims else xp.squeeze(out, axis=axis)
    a = _wide(a.astype(dtype, copy=False))  # MLX's kernel: in float32 for the half types, rounded once
    if a.size == 0:
        out = xp.log(xp.sum(xp.exp(a), axis=axis, keepdims=keepdims))
        return out.astype(dtype, copy=False)
    m = xp.max(a, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
    out = xp.log(xp.sum(xp.exp(a - m), axis=axis, keepdims=True)) + m
    return (out if keepdims else xp.squeeze(out, axis=axis)).astype(dtype, copy=False)


def _count(a, axis):
    n = 1
    for ax in axis:
        n *= a.shape[ax]
    return n


def _const(value, dtype):
    """MLX's `array(value, dtype)` of a double (through float32 for the half types), as a
    NumPy scalar (a CuPy array takes it as an operand, not a 0-d NumPy array)."""
    with np.errstate(all="ignore"):
        v = np.float64(value)
        if np.dtype(dtype).name in _HALF:
            v = np.float32(v)
        return np.asarray(v).astype(dtype)[()]


# mean and var as MLX composes them: mean is `sum(a) * (1 / N)` (the sum in sum's dtype,
# so integers wrap; the reciprocal an array of the mean's dtype), var sums the squared
# deviations in the input's float type and multiplies by 1 / N (divides by max(N - ddof, 0)).
# The count's division happens here, not inside NumPy, whose empty-slice warnings would
# come from NumPy's own frames and escape our warnings filter.
def _mean(xp, a, axis, keepdims, dtype):
    total = _total(xp, a, axis, keepdims, _sum_dtype(dt.from_numpy(a.dtype)).np
                   if a.dtype.kind in "biu" else a.dtype)
    n = _count(a, axis)
    with np.errstate(all="ignore"):
        return total.astype(dtype, copy=False) * _const(1.0 / n if n else np.inf, dtype)


def _var(xp, a, axis, keepdims, ddof, root):
    dtype = dt.to_inexact(dt.from_numpy(a.dtype)).np
    x = a.astype(dtype, copy=False)
    with np.errstate(all="ignore"):
        d = x - _mean(xp, a, axis, True, dtype)
        if d.dtype.kind == "c":
            sq = d.real * d.real + d.imag * d.imag  # real(d * conj(d))
            dtype = sq.dtype
        else:
            sq = d * d
        v = _total(xp, sq, axis, keepdims, dtype)
        n = _count(a, axis)
        if ddof:
            norm = xp.maximum(_const(n, dtype) - _const(ddof, dtype), _const(0, dtype))
            v = v / norm
        else:
            v = v * _const(1.0 / n if n else np.inf, dtype)
        return xp.sqrt(v) if root else v


# -- transform rules: the cotangent of the reduced result spread back over the input ------
def _spread(c, x, axis, keepdims):
    """`c` (shaped like the reduction's result) broadcast back to the input `x`'s shape;
    `axis` is the reduction's, checked and sorted.  Leading axes need no ones put back:
    broadcasting adds them.  Only a shapeless trace needs the shape read from `x` when run
    (`broadcast_like`)."""
    if not keepdims and axis and axis[-1] >= len(axis):
        c = b.node(_sh._EXPAND, (c,), _out_shape(x._shape, axis, True), c._dtype,
                   {"axis": axis}, b.resolve(None))
    if SHAPELESS.on:
        return _sh.broadcast_like(c, x)
    shape = x._shape
    if c._shape == shape:
        return c
    return b.node(_sh._BROADCAST, (c,), shape, c._dtype, {"shape": shape}, b.resolve(None))


def _sum_vjp(c, out, x, axis, keepdims, dtype):
    return (_spread(c, x, axis, keepdims),)


def _sum_jvp(t, out, x, axis, keepdims, dtype):
    return sum(t[0], axis, keepdims)  # noqa: F821 (made from the table)


def _count_factor(n, minus, numerator):
    """`numerator / max(n - minus, 1)`, but NaN where a ddof `minus` leaves no degree of
    freedom (MLX scales such a variance by inf, and its derivative is inf - inf)."""
    if minus and n <= minus:
        return math.nan
    return numerator / builtins.max(n - minus, 1)


def _per_count(x, axis, minus, numerator, c):
    """`_count_factor` for the N elements of `x` a reduction over `axis` takes: a number,
    or under a shapeless trace a node computing it from `x`'s shape."""
    if not SHAPELESS.on:
        return _count_factor(_count(x, axis), minus, numerator)
    return b.node(_PER_COUNT, (x,), (), c._dtype,
                  {"axis": axis, "minus": minus, "numerator": numerator, "dtype": c._dtype.np,
                   "batch": ()}, b.resolve(None))


def _per_count_kernel(xp, x, axis, minus, numerator, dtype, batch):
    value = _count_factor(_count(x, axis), minus, numerator)
    return xp.full(tuple(x.shape[a] for a in batch), value, dtype=dtype)


def _per_count_shape(params, shape):
    return tuple(shape[a] for a in params["batch"]), params


def _per_count_vmap(axes, out, x, axis, batch, **params):
    """The same factor for every example: one per example along the batch axes of `x`."""
    ax = axes[0]
    params = dict(params, axis=tuple(a + (a >= ax) for a in axis),
                  batch=(ax,) + tuple(a + (a >= ax) for a in batch))
    return b.node(_PER_COUNT, (x,), _per_count_shape(params, x._shape)[0], out._dtype, params,
                  b.resolve(None)), 0


# the shape-dependent factor of mean's and var's cotangents: a function of the input's
# shape only, so no gradient flows through it
_PER_COUNT = b.make("per_count", _per_count_kernel, vjp=lambda c, out, x, **p: (None,),
                    jvp=lambda t, out, x, **p: None, vmap=_per_count_vmap,
                    shape=_per_count_shape)


def _mean_vjp(c, out, x, axis, keepdims, dtype):
    return (_spread(c * _per_count(x, axis, 0, 1, c), x, axis, keepdims),)


def _mean_jvp(t, out, x, axis, keepdims, dtype):
    return mean(t[0], axis, keepdims)  # noqa: F821


def _extreme_vjp(c, out, x, axis, keepdims, dtype):
    """max and min: the cotangent shared equally by the elements that reach the extreme."""
    from .elementwise import equal
    mask = equal(x, _spread(out, x, axis, keepdims)).astype(c._dtype)
    share = mask / sum(mask, axis, True)  # noqa: F821
    return (_spread(c, x, axis, keepdims) * share,)


def _extreme_jvp(t, out, x, axis, keepdims, dtype):
    """max and min as MLX: the tangent of the first element that reaches the extreme (its
    arg over the reduced axes, moved last and flattened), not the ties' average."""
    from .indexing import take_along_axis
    if not axis:
        return t[0]
    if builtins.all(x._shape[i] == 1 for i in axis):
        # one element to pick: its own tangent (nothing to index where a kept axis is empty)
        return t[0] if keepdims else _sh.squeeze(t[0], axis)
    kept = [i for i in range(x.ndim) if i not in axis]
    order = kept + list(axis)
    flat = lambda a: _sh.flatten(_sh.transpose(a, order), len(kept), -1)  # noqa: E731
    pick = argmax if out._node.prim.name == "max" else argmin  # noqa: F821
    got = _sh.squeeze(take_along_axis(flat(t[0]), pick(flat(x), -1, True), -1), -1)
    return _sh.expand_dims(got, axis) if keepdims else got


def _prod_vjp(c, out, x, axis, keepdims, dtype):
    """The product of every other element, from two exclusive cumulative products (no
    division, so zeros are fine), over the reduced axes gathered last and flattened."""
    from .scan import cumprod
    from .shape import reshape, transpose
    kept = [i for i in range(x.ndim) if i not in axis]
    order = kept + list(axis)
    moved = transpose(x, order)
    lead = moved._shape[:len(kept)]
    # -1 cannot be inferred beside an empty kept axis
    flat = reshape(moved, lead + ((int(np.prod(moved._shape[len(kept):])),) if 0 in lead
                                  else (-1,)))
    others = cumprod(flat, -1, inclusive=False) * cumprod(flat, -1, reverse=True,
                                                          inclusive=False)
    back = transpose(reshape(others, moved._shape), [order.index(i) for i in range(x.ndim)])
    if x._dtype.kind == "c":
        from .elementwise import conj
        back = conj(back)
    return (back * _spread(c, x, axis, keepdims),)


def _logsumexp_vjp(c, out, x, axis, keepdims, dtype):
    from .elementwise import exp
    return (_spread(c, x, axis, keepdims) * exp(x - _spread(out, x, axis, keepdims)),)


def _no_vjp(c, out, x, **params):
    return (None,)


def _no_jvp(t, out, x, **params):
    from .rules import zero_tangent
    return zero_tangent(t, out)


def _cast_like(x, axis):
    """Whether all/any over `axis` is, as in MLX, a cast to bool: no axis, or only axes of
    length one (which a shapeless trace may see change, so there a reduction)."""
    return not axis or not SHAPELESS.on and builtins.all(x._shape[a] == 1 for a in axis)


def _truth_vjp(c, out, x, axis, keepdims, dtype):
    if not _cast_like(x, axis):
        return (None,)
    return (lambda: _sh.reshape(c, x._shape),)  # the transform casts it to x's dtype


def _truth_jvp(t, out, x, axis, keepdims, dtype):
    if not _cast_like(x, axis):
        return _no_jvp(t, out, x)
    return _sh.reshape(t[0], out._shape).astype(dt.bool_)


# name: (kernel(xp, a, axis, keepdims, **extra), output dtype rule, empty allowed, vjp, jvp)
# (a rule left None is derived: jvp from vjp by the transform)
REDUCTIONS = {
    "sum": (_total,
            _sum_dtype, True, _sum_vjp, _sum_jvp),
    "prod": (_product,
             _sum_dtype, True, _prod_vjp, None),
    "max": (lambda xp, a, axis, keepdims, dtype: xp.max(a, axis, keepdims=keepdims), _same, False,
            _extreme_vjp, _extreme_jvp),
    "min": (lambda xp, a, axis, keepdims, dtype: xp.min(a, axis, keepdims=keepdims), _same, False,
            _extreme_vjp, _extreme_jvp),
    "all": (lambda xp, a, axis, keepdims, dtype: xp.all(b.truth(xp, a), axis, keepdims=keepdims),
            _bool, True, _truth_vjp, _truth_jvp),
    "any": (lambda xp, a, axis, keepdims, dtype: xp.any(b.truth(xp, a), axis, keepdims=keepdims),
            _bool, True, _truth_vjp, _truth_jvp),
    "mean": (_mean, dt.to_inexact, True, _mean_vjp, _mean_jvp),
    "logsumexp": (_logsumexp, dt.to_inexact, None,
                  _logsumexp_vjp, None),  # None: no empty array at all, as MLX
}


def _out_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _kernel(fn):
    def kernel(xp, a, axis, keepdims, dtype, **extra):  # extra: var's ddof and root
        res = xp.asarray(fn(xp, a, axis, keepdims, dtype, **extra))  # NumPy: 0-d -> scalar
        return res if res.dtype == dtype else res.astype(dtype)
    return kernel


def _prepare(a, axis, op, empty_ok):
    a = b.as_array(a, op)
    axes = b.normalize_axes(axis, a.ndim, op)
    if empty_ok is None and 0 in a._shape:
        raise ValueError(f"[{op}] Received empty array.")
    if empty_ok is False:
        for ax in axes:
            if a._shape[ax] == 0:
                raise ValueError(f"[{op}] Cannot {op} reduce over axis {ax} with size 0.")
    return a, axes


def _reduced_shape(params, shape):
    axis = params["axis"]
    if axis is None:  # argmax/argmin of the flattened array
        return ((1,) * len(shape) if params["keepdims"] else ()), params
    axes = (axis,) if isinstance(axis, int) else axis
    return _out_shape(shape, axes, params["keepdims"]), params


# The rows with a GPU kernel of their own, which falls back to the row's `KERNELS` one
_GPU = {"sum": b.GpuKernel("streamlet.backend.cuda_reduce:total")}
KERNELS: dict = {}  # name -> the kernel of the row, on NumPy or CuPy arrays


def _make(name, fn, rule, empty_ok, vjp, jvp):
    KERNELS[name] = _kernel(fn)
    prim = b.make(name, KERNELS[name], gpu=_GPU.get(name), vjp=vjp, jvp=jvp,
                  vmap=along_axes("axis"), shape=_reduced_shape)

    def along(a, axes, keepdims=False, state=None):
        # NOTE: MLX keeps the input's dtype when no axis is reduced (sum of a 0-d bool is bool)
        d = a._dtype if not axes and rule is _sum_dtype else rule(a._dtype)
        params = {"axis": axes, "keepdims": bool(keepdims), "dtype": d.np}
        return b.node(prim, (a,), _out_shape(a._shape, axes, keepdims), d, params,
                      state or b.resolve(None))

    def op(a, /, axis=None, keepdims=False, *, stream=None):
        keepdims = b.bool_arg(keepdims, name, "keepdims")
        st = b.resolve(stream)
        a, axes = _prepare(a, axis, name, empty_ok)
        return along(a, axes, keepdims, st)
    op.along = along  # axes already a tuple of checked axes: the transforms' sums
    b.rename(op, name)
    op.__doc__ = (f"Reduce with {name} over `axis` (all axes if None): "
                  f"`mx.{name}(a, axis=0, keepdims=False, stream=s)`.")
    return op


for _name, _row in REDUCTIONS.items():
    globals()[_name] = _make(_name, *_row)


def _centered(x, axis):
    """x - mean(x) (conjugated for complex x): var's derivative but for its count factor."""
    from .elementwise import conj
    centered = x - mean(x, axis, True)  # noqa: F821
    return conj(centered) if x._dtype.kind == "c" else centered


def _var_vjp(c, out, x, axis, keepdims, dtype, ddof, root):
    """d var / dx = 2 (x - mean) / (N - ddof); std divides that by 2 std."""
    scale = _per_count(x, axis, ddof, 2, c)
    c = _spread(c if not root else c / (2 * out), x, axis, keepdims)
    return (c * _centered(x, axis) * scale,)


def _var_jvp(t, out, x, axis, keepdims, dtype, ddof, root):
    """The transposed vjp, its count factor applied after the sum: over no elements that
    factor is NaN (MLX's 0 * inf), not an empty sum's 0."""
    d = sum(_centered(x, axis) * t[0], axis, keepdims)  # noqa: F821
    n = _count(x, axis) if not SHAPELESS.on else ddof + 1
    # MLX's N / max(N - ddof, 0): inf without a degree of freedom, NaN over no elements
    d = d * (_per_count(x, axis, ddof, 2, d) if n > ddof else math.inf if n else math.nan)
    return d / (2 * out) if root else d


_VAR = b.make("var", _kernel(lambda xp, a, axis, keepdims, dtype, ddof, root:
                             _var(xp, a, axis, keepdims, ddof, root)),
              vjp=_var_vjp, jvp=_var_jvp, vmap=along_axes("axis"), shape=_reduced_shape)


def _variance(a, axis, keepdims, ddof, stream, root):
    op = "std" if root else "var"
    keepdims = b.bool_arg(keepdims, op, "keepdims")
    ddof = b.int_arg(ddof, op, "ddof")
    st = b.resolve(stream)
    a, axes = _prepare(a, axis, op, True)
    d = _var_dtype(a._dtype)
    params = {"axis": axes, "keepdims": keepdims, "dtype": d.np, "ddof": int(ddof),
              "root": root}
    return b.node(_VAR, (a,), _out_shape(a._shape, axes, keepdims), d, params, st)


def var(a, /, axis=None, keepdims=False, ddof=0, *, correction=None, stream=None):
    """Variance over `axis`, dividing by N - ddof (`correction`, if given, is used in
    place of `ddof`, as the array API names it)."""
    return _variance(a, axis, keepdims, ddof if correction is None else correction, stream,
                     False)


def std(a, /, axis=None, keepdims=False, ddof=0, *, correction=None, stream=None):
    """Standard deviation over `axis`, dividing by N - ddof (or N - correction)."""
    return _variance(a, axis, keepdims, ddof if correction is None else correction, stream,
                     True)


def _arg_vmap(axes, out, x, axis, keepdims):
    """argmax/argmin: over the flattened array when `axis` is None, so per batch row."""
    from .creation import zeros
    from .shape import reshape
    x = to_front(x, axes[0])
    size = x._shape[0]
    if size == 0:  # MLX: an index of 0 where one element is reduced, else the op refuses
        item = x._shape[1:]
        if (math.prod(item) if axis is None else item[axis]) != 1:
            name = out._node.prim.name
            raise ValueError(f"[{name}] Cannot {name} reduce zero size array.")
        return zeros((0,) + out._shape, dt.uint32), 0
    if axis is None:
        res = rebuild(out, (reshape(x, (size, -1)),), (size,), {"axis": 1, "keepdims": False})
        return reshape(res, (size,) + out._shape), 0
    return rebuild(out, (x,), (size,) + out._shape, {"axis": axis + 1, "keepdims": keepdims}), 0


def _arg(fn):
    def kernel(xp, a, axis, keepdims):
        if axis is None:
            out = fn(a.reshape(-1), 0)
            return out.astype("uint32").reshape((1,) * a.ndim if keepdims else ())
        return xp.asarray(fn(a, axis, keepdims=keepdims)).astype("uint32")
    return kernel


def _make_arg(name, kernel):
    KERNELS[name] = kernel
    prim = b.make(name, kernel, gpu=b.GpuKernel(f"streamlet.backend.cuda_pick:{name}",
                                                bfloat16="native"),
                  vjp=_no_vjp, jvp=lambda t, out, x, **p: inert_tangent(t, out),
                  vmap=_arg_vmap, shape=_reduced_shape)

    def op(a, /, axis=None, keepdims=False, *, stream=None):
        keepdims = b.bool_arg(keepdims, name, "keepdims")
        st = b.resolve(stream)
        a = b.as_array(a, name)
        if axis is not None and not isinstance(axis, (int, np.integer)):  # one axis, an int:
            b.normalize_axis(axis, a.ndim, name)  # its TypeError comes before the size's
        if a.size == 0:  # MLX refuses any empty array, whatever the axis
            raise ValueError(f"[{name}] Cannot {name} reduce zero size array.")
        if axis is None:
            shape = (1,) * a.ndim if keepdims else ()
            extent = a.size
        else:
            ax = b.normalize_axis(axis, a.ndim, name)
            shape = _out_shape(a._shape, (ax,), keepdims)
            extent = a._shape[ax]
        if extent == 1 and not SHAPELESS.on:
            # one candidate: as in MLX, zeros that do not depend on `a` (an index taken
            # from them has no derivative to refuse)
            from .creation import zeros
            return zeros(shape, dt.uint32, stream=stream)
        return b.node(prim, (a,), shape, dt.uint32,
                      {"axis": None if axis is None else ax, "keepdims": keepdims}, st)
    b.rename(op, name)
    op.__doc__ = f"Index of the {name[3:]} along `axis` (of the flattened array if None), uint32."
    return op


argmax = _make_arg("argmax", _arg(lambda a, axis, **kw: a.argmax(axis, **kw)))
argmin = _make_arg("argmin", _arg(lambda a, axis, **kw: a.argmin(axis, **kw)))



def _softmax(xp, a, axis, dtype, precise):
    if a.size == 0:  # nothing to normalize (xp.max has no identity for an empty axis)
        return a.astype(dtype)
    x = a.astype("float32") if precise and a.dtype.itemsize < 4 else a.astype(dtype, copy=False)
    e = xp.exp(x - x.max(axis=axis, keepdims=True))  # methods: NumPy's functions add a wrapper
    return (e / e.sum(axis=axis, keepdims=True)).astype(dtype, copy=False)


def _softmax_vjp(c, out, x, axis, dtype, precise):
    sv = out * c  # s * c - s * sum(s * c), rounded as MLX's
    return (sv - out * sum(sv, axis, True),)  # noqa: F821


def _softmax_jvp(t, out, x, axis, dtype, precise):
    sv = out * t[0]
    return sv - out * sum(sv, axis, True)  # noqa: F821


_SOFTMAX = b.make("softmax", _softmax, vjp=_softmax_vjp, jvp=_softmax_jvp,
                  vmap=along_axes("axis"), shape=same_shape)


def softmax(a, /, axis=None, *, precise=False, stream=None):
    """exp(a) / sum(exp(a)) over `axis` (all axes if None); `precise` computes half
    precision inputs in float32."""
    precise = b.bool_arg(precise, "softmax", "precise")
    a = b.as_array(a, "softmax")
    axes = b.normalize_axes(axis, a.ndim, "softmax")
    d = dt.to_inexact(a._dtype)
    return b.node(_SOFTMAX, (a,), a._shape, d, {"axis": axes, "dtype": d.np,
                                               "precise": precise}, b.resolve(stream))


def count_nonzero(a, /, *, axis=None, keepdims=False, stream=None):
    """The number of non-zero elements over `axis` (all axes if None), as int32."""
    from .elementwise import not_equal
    from .creation import astype
    # the bools as int32 counts before summing, as MLX (a tangent comes out int32)
    return sum(astype(not_equal(a, 0, stream=stream), dt.int32, stream=stream),  # noqa: F821
               axis, keepdims, stream=stream)


def minmax(a, /, axis=None, keepdims=False, *, stream=None):
    """`(min(a, axis), max(a, axis))`."""
    return (min(a, axis, keepdims, stream=stream),  # noqa: F821 (made from the table)
            max(a, axis, keepdims, stream=stream))  # noqa: F821
