"""Products: inner, outer, tensordot, einsum, kron, trace, vecdot, addmm, masked and
gathered matmuls, convolve, and the Hadamard transform."""
from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np

from . import build as b
from . import dims
from .build import dt
from .linalg import _check_inexact, operands, product_kernel, product_shape, turned
from .rules import to_front, via

_build = b


def _inexact(op, x, y):
    d = dt.promote_types(x._dtype, y._dtype)
    if d.kind not in "fc":
        raise ValueError(f"[{op}] Only inexact types are supported but {x._dtype.name} and "
                         f"{y._dtype.name} were provided which results in {d.name}, which is "
                         "not a floating point type.")
    return d


def _pair(a, b_, op):
    return b.as_array(a, op), b.as_array(b_, op)


def _contract(x, y, ax, ay, dtype):
    """tensordot as one matmul: contracted axes of `x` last, of `y` first."""
    from .linalg import matmul
    from .shape import reshape, transpose
    fx = [i for i in range(x.ndim) if i not in ax]
    fy = [j for j in range(y.ndim) if j not in ay]
    k = math.prod(x._shape[i] for i in ax)
    # -1 cannot be inferred beside an empty contraction
    rows = math.prod(x._shape[i] for i in fx) if k == 0 else -1
    cols = math.prod(y._shape[j] for j in fy) if k == 0 else -1
    xm = reshape(transpose(x, fx + list(ax)), (rows, k))
    ym = reshape(transpose(y, list(ay) + fy), (k, cols))
    out = matmul(xm.astype(dt.from_numpy(dtype)), ym.astype(dt.from_numpy(dtype)))
    return reshape(out, tuple(x._shape[i] for i in fx) + tuple(y._shape[j] for j in fy))


def _inner_kernel(xp, x, y):
    if x.shape[-1] == 0:  # CuPy divides by the empty length
        return xp.zeros(x.shape[:-1] + y.shape[:-1], xp.result_type(x, y))
    return xp.inner(x, y)


_INNER = b.make("inner", product_kernel(_inner_kernel),
                **via(lambda x, y, dtype: _contract(x, y, (x.ndim - 1,), (y.ndim - 1,), dtype)))


def inner(a, b_, /, *, stream=None):
    """Sum-product over the last axes: `mx.inner(x, y)[i, j] == sum(x[i] * y[j])`."""
    from .elementwise import multiply
    x, y = _pair(a, b_, "inner")
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y, stream=stream)
    d = _inexact("matmul", x, y)
    if x._shape[-1] != y._shape[-1]:
        raise ValueError(f"[inner] a and b must have the same last dimension, got {x._shape} "
                         f"and {y._shape}.")
    shape = x._shape[:-1] + y._shape[:-1]
    return b.node(_INNER, (x, y), shape, d, {"dtype": d.np}, b.resolve(stream))


def outer(a, b_, /, *, stream=None):
    """`a.flatten()[:, None] * b.flatten()[None, :]`."""
    from .elementwise import multiply
    from .shape import reshape
    x, y = _pair(a, b_, "outer")
    return multiply(reshape(x, (-1, 1), stream=stream), reshape(y, (-1,), stream=stream),
                    stream=stream)


def _tensordot_axes(x, y, axes):
    if isinstance(axes, (int, np.integer)):
        if axes < 0:
            raise ValueError("[tensordot] axes must be a non-negative integer.")
        n = int(axes)
        if n > x.ndim or n > y.ndim:
            raise ValueError(f"[tensordot] Cannot contract {n} axes of arrays with {x.ndim} "
                             f"and {y.ndim} dimensions.")
        return tuple(range(x.ndim - n, x.ndim)), tuple(range(n))
    if isinstance(axes, (str, bytes)) or not b.is_sequence(axes):
        raise TypeError(f"[tensordot] axes must be an int or a list of two lists, got "
                        f"{type(axes).__name__}.")
    if len(axes) != 2:
        raise ValueError("[tensordot] axes must be a list of two lists.")
    ax, ay = axes
    ax = (ax,) if isinstance(ax, (int, np.integer)) else tuple(ax)
    ay = (ay,) if isinstance(ay, (int, np.integer)) else tuple(ay)
    if len(ax) != len(ay):
        raise ValueError("[tensordot] The two lists of axes must have the same length.")
    return (tuple(b.normalize_axis(i, x.ndim, "tensordot") for i in ax),
            tuple(b.normalize_axis(i, y.ndim, "tensordot") for i in ay))


_TENSORDOT = b.make("tensordot", product_kernel(lambda xp, x, y, axes:
                                                 xp.tensordot(x, y, axes)),
                    **via(lambda x, y, axes, dtype: _contract(x, y, *axes, dtype)))


def tensordot(a, b_, /, axes=2, *, stream=None):
    """Sum-product over the last `axes` axes of `a` and the first of `b`, or over the
    given pair of axis lists."""
    x, y = _pair(a, b_, "tensordot")
    d = _inexact("matmul", x, y)
    ax, ay = _tensordot_axes(x, y, axes)
    for i, j in zip(ax, ay):
        if x._shape[i] != y._shape[j]:
            raise ValueError(f"[tensordot] Axis {i} of {x._shape} and axis {j} of {y._shape} "
                             "differ in size.")
    shape = tuple(n for i, n in enumerate(x._shape) if i not in ax) + \
        tuple(n for j, n in enumerate(y._shape) if j not in ay)
    return b.node(_TENSORDOT, (x, y), shape, d, {"axes": (ax, ay), "dtype": d.np},
                  b.resolve(stream))


def _einsum_parse(subscripts):
    """MLX's split of `subscripts` into the input terms and the output (implicit: the
    ellipsis, then the letters used once, sorted)."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, out = spec.partition("->")
    if not arrow:
        counts = {}
        for c in lhs.replace("...", "", 1):
            if c != ",":
                counts[c] = counts.get(c, 0) + 1
        out = "".join(sorted(("..." if "..." in lhs else "") +
                             "".join(c for c, n in counts.items() if n == 1)))
    return lhs.split(","), out


def _einsum_plan(subscripts, shapes, op):
    """MLX's einsum_path_helper: the expanded terms, output and sizes, the contraction path
    as (positions, terms, output) steps, and (naive scaling, optimized scaling, naive cost,
    optimized cost)."""
    if not shapes:
        raise ValueError(f"[{op}] At least one operand is required.")
    terms, out = _einsum_parse(subscripts)
    if len(terms) != len(shapes):
        raise ValueError(f"[{op}] Number of operands, {len(shapes)}, does not match number "
                         f"of input subscripts, {len(terms)}")
    spare = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             if c not in subscripts]
    longest = 0

    def expand(term, ndim, i):
        nonlocal longest
        letters, k = "", 0
        while k < len(term):
            if not (term[k].isascii() and term[k].isalpha()):
                if term[k:k + 3] != "...":
                    raise ValueError(f"[{op}] Subscripts must be letters, but got "
                                     f"'{term[k]}'.")
                if "." in letters:
                    raise ValueError(f"[{op}] Only one ellipsis per subscript is allowed but "
                                     f"found more in '{term}'.")
                letters += "."
                k += 3
                continue
            letters += term[k]
            k += 1
        if "." not in letters:
            return letters
        n = longest if ndim is None else ndim - len(letters) + 1
        if n < 0:
            raise ValueError(f"[{op}] Operand {i} with shape {shapes[i]} has insufficient "
                             f"dimensions for subscript '{term}'.")
        longest = max(longest, n)
        return letters.replace(".", "".join(spare[len(spare) - n:]))

    terms = [expand(t, len(s), i) for i, (t, s) in enumerate(zip(terms, shapes))]
    out = expand(out, None, -1)
    if len(set(out)) != len(out):
        raise ValueError(f"[{op}] Repeat indices not allowed in output.")
    sizes = {}
    for i, (t, shape) in enumerate(zip(terms, shapes)):
        if len(t) != len(shape):
            raise ValueError(f"[{op}] Invalid number of subscripts {len(t)} for input {i} "
                             f"with {len(shape)} dimensions.")
        own = {}
        for c, n in zip(t, shape):
            if own.setdefault(c, n) != n:
                raise ValueError(f"[{op}] Dimensions of repeated subscripts do not have the "
                                 f"same size ({own[c]} != {n}).")
        for j, (c, n) in enumerate(zip(t, shape)):
            m = sizes.setdefault(c, n)
            if n != 1 and m != 1 and m != n:
                raise ValueError(f"[{op}] Cannot broadcast dimension {j} of input {i} with "
                                 f"shape {shape} to size {m}.")
            sizes[c] = max(m, n)

    def size(term):  # an output letter in no input counts 0, as in MLX
        return math.prod(sizes.get(c, 0) for c in term)

    def cost(chars, inner, n):
        return size(chars) * (max(1, n - 1) + inner)

    def naive(ins, res):
        chars = set().union(*map(set, ins))
        return cost(chars, bool(chars - set(res)), len(ins)), len(chars)

    naive_cost, naive_scaling = naive(terms, out)
    if len(terms) <= 2:
        return terms, out, sizes, [(list(range(len(terms))), terms, out)], \
            (naive_scaling, naive_scaling, naive_cost, naive_cost)
    limit = max([size(out)] + [size(t) for t in terms])
    ins, path, total, scaling = list(terms), [], 0, 0
    pairs = [(i, j) for i in range(len(ins)) for j in range(i + 1, len(ins))]
    found = []  # (removed size, cost, new term, dims, x, y)
    for _ in range(len(terms) - 1):
        def consider(p, q):
            both = set(ins[p]) | set(ins[q])
            keep = {c for i, t in enumerate(ins) if i not in (p, q) for c in t} | set(out)
            new = both & keep
            if size(new) > limit:
                return
            step = cost(both, len(both) > len(new), 2)
            if total + step <= naive_cost:
                found.append((size(set(ins[p])) + size(set(ins[q])) - size(new), step, new,
                              len(both), p, q))
        for p, q in pairs:
            if set(ins[p]) & set(ins[q]):
                consider(p, q)
        if not found:
            for p, q in pairs:
                consider(p, q)
        if not found:  # the rest in one naive step
            step, scale = naive(ins, out)
            path.append((list(range(len(ins))), ins, out))
            total, scaling = total + step, max(scaling, scale)
            break
        removed, step, new, dims, x, y = min(found, key=lambda f: (-f[0], f[1]))
        scaling = max(scaling, dims)
        new = "".join(sorted(new, key=size))
        path.append(([x, y], [ins[x], ins[y]], new))
        ins = [t for i, t in enumerate(ins) if i not in (x, y)] + [new]
        found = [(f[0], f[1], f[2], f[3], f[4] - (f[4] > x) - (f[4] > y),
                  f[5] - (f[5] > x) - (f[5] > y)) for f in found
                 if not {f[4], f[5]} & {x, y}]
        pairs = [(i, len(ins) - 1) for i in range(len(ins) - 1)]
        total += step
    path[-1] = path[-1][:2] + (out,)
    return terms, out, sizes, path, (naive_scaling, scaling, naive_cost, total)


def _einsum_result(subscripts, ops_):
    """The shape and dtype of MLX's einsum, step by step along its path: repeated indices
    taken on the diagonal, an index of one operand alone summed first (bool and small
    integers widen as in `sum`), two operands with an index to contract a matrix product
    (inexact types only, sizes broadcast to the larger), else a broadcast product summed."""
    from .reduction import _sum_dtype
    terms, out, sizes, path, _ = _einsum_plan(subscripts, [x._shape for x in ops_], "einsum")
    for c in out:
        if c not in sizes:
            raise ValueError(f"[einsum] Output subscript '{c}' is not in the inputs.")
    vals = [(dict(zip(t, x._shape)), x._dtype) for t, x in zip(terms, ops_)]
    for positions, ins, res in path:
        counts = {}
        for c in "".join("".join(set(t)) for t in ins + [res]):
            counts[c] = counts.get(c, 0) + 1
        step = []
        for p in positions:
            sizes, d = vals[p]
            if any(counts[c] == 1 for c in sizes):
                sizes, d = {c: n for c, n in sizes.items() if counts[c] > 1}, _sum_dtype(d)
            step.append((sizes, d))
        if len(step) == 2 and set(step[0][0]) - set(res):
            (sa, da), (sb, db) = step
            if any({sa[c], sb[c]} == {0, 1} for c in set(sa) & set(sb)):
                raise ValueError("[einsum] Cannot broadcast a dimension of size 0 to size 1.")
            d = dt.promote_types(da, db)
            _check_inexact("matmul", da, db, d)
            sizes = {c: max(sa.get(c, 0), sb.get(c, 0)) for c in res}
        else:
            d, sizes = functools.reduce(dt.promote_types, [d for _, d in step]), {}
            for part, _ in step:
                for c, n in part.items():
                    sizes[c] = n if sizes.get(c, 1) == 1 else sizes[c]
            if set(sizes) - set(res):
                d = _sum_dtype(d)
            sizes = {c: sizes[c] for c in res}
        vals = [v for i, v in enumerate(vals) if i not in positions] + [(sizes, d)]
    sizes, d = vals[0]
    return tuple(sizes[c] for c in out), d


def _einsum_terms(subscripts, operands):
    """Input terms and output of an einsum, its ellipses spelled out as unused letters."""
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in spec]
    width = max((x.ndim - len(t.replace("...", "")) for t, x in zip(terms, operands)
                 if "..." in t), default=0)
    ell = "".join(free[:width])
    terms = [t.replace("...", ell[width - (x.ndim - len(t.replace("...", ""))):])
             for t, x in zip(terms, operands)]
    if not arrow:
        letters = "".join(terms)
        out = ell + "".join(sorted(c for c in set(letters) - set(ell)
                                   if letters.count(c) == 1))
    return terms, out.replace("...", ell)


def _einsum_vjp(c, out, *operands, subscripts, dtype):
    """The cotangent of operand i is an einsum of the output's cotangent and the other
    operands into operand i's indices (a ones vector stands for an index only it has; an
    index repeated in operand i is renamed, an identity matrix joining the two names)."""
    from .creation import eye, ones
    from .elementwise import conj
    from .shape import broadcast_to
    terms, res = _einsum_terms(subscripts, operands)
    used = set(res).union(*terms)
    fresh = [ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             if ch not in used]

    def grad(i):
        t = terms[i]
        others = [(terms[j], operands[j]) for j in range(len(operands)) if j != i]
        have = set(res).union(*[set(tj) for tj, _ in others])
        sizes = dict(zip(t, operands[i]._shape))
        extra = [(ch, ones((sizes[ch],), c._dtype)) for ch in dict.fromkeys(t) if ch not in have]
        target, deltas, names = "", [], iter(fresh)
        for ch in t:
            if ch in target:  # a repeated index: the gradient lives on the diagonal
                new = next(names)
                deltas.append((ch + new, eye(sizes[ch], dtype=c._dtype)))
                ch = new
            target += ch
        spec = ",".join([res] + [tj for tj, _ in others + extra + deltas]) + "->" + target
        # the other operands conjugated, as the products MLX builds an einsum from take them
        xs = [conj(x) if x._dtype.kind == "c" else x for _, x in others + extra + deltas]
        shape = operands[i]._shape

        def fit(g):
            """An index of length one broadcast against a longer one (MLX broadcasts them):
            summed where operand i has it of length one, spread where the others do."""
            if g._shape == shape:
                return g
            ones_ = tuple(ax for ax, (m, n) in enumerate(zip(g._shape, shape)) if n == 1 != m)
            if ones_:
                g = g.sum(axis=ones_, keepdims=True)
            return broadcast_to(g, shape) if g._shape != shape else g
        if c._dtype.kind in "iu":  # MLX's products and sums take integers; the einsum
            # kernel refuses to contract them: float32 holds their sums exactly (< 2**24)
            return lambda: fit(einsum(spec, c.astype(dt.float32), *[
                x.astype(dt.float32) if x._dtype.kind in "biu" else x for x in xs]
            ).astype(c._dtype))
        return lambda: fit(einsum(spec, c, *xs))
    return tuple(grad(i) for i in range(len(operands)))


def _einsum_jvp(t, out, *operands, subscripts, dtype):
    terms = [einsum(subscripts, *[tj if j == i else x for j, x in enumerate(operands)])
             for i, tj in enumerate(t) if tj is not None]
    return functools.reduce(lambda p, q: p + q, terms)


def _einsum_vmap(axes, out, *operands, subscripts, dtype):
    """A new index for the batch: in front of each batched operand's and the result's."""
    # the ellipses spelled out for the operands as the einsum sees them, without the batch
    unbatched = [SimpleNamespace(ndim=x.ndim - (ax is not None)) for x, ax in zip(operands, axes)]
    terms, res = _einsum_terms(subscripts, unbatched)
    used = set(res).union(*terms)
    new = next(ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               if ch not in used)
    moved = [to_front(x, ax) for x, ax in zip(operands, axes)]
    spec = ",".join(new + t if ax is not None else t for t, ax in zip(terms, axes))
    return einsum(spec + "->" + new + res, *moved), 0


_EINSUM = b.make("einsum", product_kernel(lambda xp, *operands, subscripts:
                                          xp.einsum(subscripts, *operands, optimize="greedy")),
                 vjp=_einsum_vjp, jvp=_einsum_jvp, vmap=_einsum_vmap)


def einsum(subscripts, *operands, stream=None):
    """Einstein summation: `mx.einsum("ij,jk->ik", a, b)` is `a @ b`; on integers as far as
    MLX goes (no contraction of two operands): `mx.einsum("ii", mx.eye(2, dtype=mx.int32))`."""
    if not isinstance(subscripts, str):
        raise TypeError(f"[einsum] subscripts must be a str, got {type(subscripts).__name__}.")
    ops_ = [b.as_array(x, "einsum") for x in operands]
    shape, d = _einsum_result(subscripts, ops_)
    return b.node(_EINSUM, tuple(ops_), shape, d, {"subscripts": subscripts, "dtype": d.np},
                  b.resolve(stream))


def einsum_path(subscripts, *operands):
    """The contraction order einsum would use, and a printable report: `(path, text)`."""
    subscripts = b.str_arg(subscripts, "einsum_path", "subscripts")
    ops_ = [b.as_array(x, "einsum_path") for x in operands]
    *_, path, (naive_scaling, scaling, naive_cost, cost) = _einsum_plan(
        subscripts, [x._shape for x in ops_], "einsum_path")
    text = (f"  Complete contraction:  {subscripts}\n"
            f"         Naive scaling:  {naive_scaling}\n"
            f"     Optimized scaling:  {scaling}\n"
            f"      Naive FLOP count:  {naive_cost}\n"
            f"  Optimized FLOP count:  {cost}\n")
    return [tuple(p) for p, _, _ in path], text


def _kron_composite(x, y, dtype):
    """Every element of `x` times all of `y`: interleaved axes, a broadcast product."""
    from .shape import reshape
    n = max(x.ndim, y.ndim)
    xs, ys = (1,) * (n - x.ndim) + x._shape, (1,) * (n - y.ndim) + y._shape
    xe = reshape(x, tuple(v for s_ in xs for v in (s_, 1)))
    ye = reshape(y, tuple(v for s_ in ys for v in (1, s_)))
    d = dt.from_numpy(dtype)
    return reshape(xe.astype(d) * ye.astype(d), tuple(p * q for p, q in zip(xs, ys)))


_KRON = b.make("kron", lambda xp, x, y, dtype: xp.kron(b.cast(x, dtype), b.cast(y, dtype)),
               **via(_kron_composite))


def kron(a, b, *, stream=None):  # noqa: F811 (`b` names the operand, as in MLX)
    """The Kronecker product: every element of `a` times the whole of `b`."""
    x, y, d = _build.promote_pair(a, b, "kron")
    if x.size == 0 or y.size == 0:
        raise ValueError("[kron] Input arrays cannot be empty.")
    n = max(x.ndim, y.ndim)
    xs, ys = (1,) * (n - x.ndim) + x._shape, (1,) * (n - y.ndim) + y._shape
    shape = tuple(dims.dim(p * q, "kron") for p, q in zip(xs, ys))
    return _build.node(_KRON, (x, y), shape, d, {"dtype": d.np}, _build.resolve(stream))


def trace(a, /, offset=0, axis1=0, axis2=1, dtype=None, *, stream=None):
    """The sum of diagonal `offset` over axis1 and axis2, in sum's dtype unless given."""
    from .arrange import diagonal
    from .creation import astype
    from .reduction import sum as sum_
    a = b.as_array(a, "trace")
    if dtype is not None:
        a = astype(a, dtype, stream=stream)
    return sum_(diagonal(a, offset, axis1, axis2, stream=stream), -1, stream=stream)


def vecdot(a, b_, /, *, axis=-1, stream=None):
    """`sum(conj(a) * b, axis)`, with broadcasting: `mx.vecdot(mx.array([1, 2]),
    mx.array([3, 4]))` is 11."""
    from .elementwise import conj, multiply
    from .reduction import sum as sum_
    x, y = _pair(a, b_, "vecdot")
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("[vecdot] inputs must be at least 1D.")
    ax = b.normalize_axis(axis, x.ndim, "vecdot")  # AxisError: an IndexError as MLX's
    if axis + y.ndim != ax if axis < 0 else axis >= y.ndim:
        raise ValueError(f"[vecdot] axis {axis} is out of bounds for shapes {x._shape} and "
                         f"{y._shape}.")
    if x._shape[ax] != y._shape[ax]:
        raise ValueError(f"[vecdot] a and b must have the same size along axis {axis}, got "
                         f"{x._shape} and {y._shape}.")
    prod = multiply(conj(x, stream=stream) if x._dtype.kind == "c" else x, y, stream=stream)
    return sum_(prod, ax, stream=stream)


def _addmm_composite(c, x, y, alpha, beta, dtype, ta=False, tb=False):
    from .elementwise import add, multiply
    from .linalg import _flagged, matmul
    x, y = _flagged(x, y, ta, tb)
    product = multiply(matmul(x, y), alpha)
    return product if beta == 0 and x._shape[-1] else add(product, multiply(c, beta))


@product_kernel
def _addmm(xp, c, x, y, alpha, beta, ta=False, tb=False):
    x, y = turned(x, ta), turned(y, tb)
    product = xp.matmul(x, y)
    if x.shape[-1] == 0:  # MLX: beta * c alone
        out = xp.empty_like(product)
        out[...] = x.dtype.type(beta) * c
        return out
    if beta == 0:  # c is not read, as in BLAS: its NaNs and infinities do not show
        return x.dtype.type(alpha) * product
    return x.dtype.type(alpha) * product + x.dtype.type(beta) * c


def _addmm_shape(params, cs, xs, ys):
    from .linalg import _matmul_shape
    shape, _ = _matmul_shape(params, xs, ys)
    if b.broadcast_shapes(cs, shape, op="addmm") != shape:
        raise ValueError(f"[addmm] input c with shape {cs} must broadcast to the output "
                         f"shape {shape}.")
    return shape, params


_ADDMM = b.make("addmm", _addmm, **via(_addmm_composite), shape=_addmm_shape)


def addmm(c, a, b_, /, alpha=1.0, beta=1.0, *, stream=None):
    """`alpha * (a @ b) + beta * c` in one rounding (`c` broadcast to the product's shape):
    `mx.addmm(mx.zeros((2, 2)), mx.eye(2), mx.ones((2, 2)), 2.0)` is all 2."""
    x, y, z = b.as_array(a, "addmm"), b.as_array(b_, "addmm"), b.as_array(c, "addmm")
    alpha, beta = b.float_arg(alpha, "addmm", "alpha"), b.float_arg(beta, "addmm", "beta")
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("[addmm] Got 0 dimension input. Inputs must have at least one "
                         "dimension.")
    d = dt.promote_types(dt.promote_types(x._dtype, y._dtype), z._dtype)
    alpha, beta = float(alpha), float(beta)
    if d.kind == "c":  # MLX: a matmul, then the sum scaled by float32 scalars
        from .elementwise import add, multiply
        from .linalg import matmul
        return add(multiply(matmul(x, y, stream=stream), b.scalar(alpha, dt.float32),
                            stream=stream),
                   multiply(b.scalar(beta, dt.float32), z, stream=stream), stream=stream)
    shape = product_shape(x, y, "addmm")
    if d.kind != "f":
        raise ValueError(f"[addmm] Only real floating point types are supported but "
                         f"{z._dtype.name}, {x._dtype.name} and {y._dtype.name} were "
                         f"provided which results in {d.name}, which is not a real floating "
                         "point type.")
    if b.broadcast_shapes(z._shape, shape, op="addmm") != shape:
        raise ValueError(f"[addmm] input c with shape {z._shape} must broadcast to the "
                         f"output shape {shape}.")
    st = b.resolve(stream)
    params = {"alpha": alpha, "beta": beta, "dtype": d.np}
    return b.node_of(_ADDMM, (z._node, *operands(x, y, st, params)), shape, d, params, st)


def _expand_mask(mask, block, rows, cols, stream):
    """A block mask as an elementwise mask of `rows` x `cols` (last two axes)."""
    from .arrange import repeat
    from .indexing import getitem
    m = repeat(repeat(mask, block, axis=-2, stream=stream), block, axis=-1, stream=stream)
    return getitem(m, (Ellipsis, slice(0, rows), slice(0, cols)), stream=stream)


def float_matrices(x, y, op, stream):
    """The operands of a float matrix product as MLX checks them (at least 1-D, the inner
    sizes equal, a real floating type): as matrices (a 1-D one a row or a column), with
    their own ndims and the dtype they promote to."""
    from .shape import expand_dims
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"[{op}] Got 0 dimension input. Inputs must have at least one "
                         "dimension.")
    xa, ya = x.ndim, y.ndim
    x = expand_dims(x, 0, stream=stream) if xa == 1 else x
    y = expand_dims(y, 1, stream=stream) if ya == 1 else y
    if x._shape[-1] != y._shape[-2]:
        raise ValueError(f"[{op}] Last dimension of first input with shape {x._shape} must "
                         f"match second to last dimension of second input with shape "
                         f"{y._shape}.")
    d = dt.promote_types(x._dtype, y._dtype)
    if d.kind != "f":
        raise ValueError(f"[{op}] Only real floating point types are supported but "
                         f"{x._dtype.name} and {y._dtype.name} were provided which results in "
                         f"{d.name}, which is not a real floating point type.")
    return x, y, xa, ya, d


def block_masked_mm(a, b_, /, block_size=64, mask_out=None, mask_lhs=None, mask_rhs=None, *,
                    stream=None):
    """Matrix product with `block_size` blocks of `a`, `b` and the output masked out (bool
    masks) or scaled (float masks); a mask has a block per `block_size` rows and columns,
    and broadcasts to the batch shape."""
    from .creation import astype
    from .elementwise import multiply, where
    from .linalg import matmul
    from .shape import broadcast_to, expand_dims, squeeze
    x, y = _pair(a, b_, "block_masked_mm")
    block_size = b.int_arg(block_size, "block_masked_mm", "block_size")
    if mask_out is None and mask_lhs is None and mask_rhs is None:
        return matmul(x, y, stream=stream)
    if block_size not in (32, 64):
        raise ValueError(f"[block_masked_mm] Only block_sizes 32, 64 are supported. Got "
                         f"block size {block_size}.")
    x, y, xa, ya, d = float_matrices(x, y, "block_masked_mm", stream)
    batch = b.broadcast_shapes(x._shape[:-2], y._shape[:-2], op="block_masked_mm")
    M, K, N = x._shape[-2], x._shape[-1], y._shape[-1]
    x = broadcast_to(astype(x, d, stream=stream), batch + (M, K), stream=stream)
    y = broadcast_to(astype(y, d, stream=stream), batch + (K, N), stream=stream)

    def blocks(mask, expand, rows, cols, dtype):
        """`mask` (axes `expand` added for 1-D operands) as (batch..., blocks, blocks)."""
        if expand:
            mask = expand_dims(mask, expand, stream=stream)
        shape = batch + (-(-rows // block_size), -(-cols // block_size))
        return broadcast_to(astype(mask, dtype, stream=stream), shape, stream=stream)

    def apply(v, mask, rows, cols):
        full = _expand_mask(mask, block_size, rows, cols, stream)
        if mask._dtype == dt.bool_:
            return where(full, v, 0, stream=stream)
        return multiply(v, full, stream=stream)

    if mask_lhs is not None or mask_rhs is not None:
        ml, mr = (b.as_array([True] if m is None else m, "block_masked_mm")
                  for m in (mask_lhs, mask_rhs))
        md = dt.bool_ if ml._dtype == mr._dtype == dt.bool_ else d
        x = apply(x, blocks(ml, (-2,) if xa == 1 else (), M, K, md), M, K)
        y = apply(y, blocks(mr, (-1,) if ya == 1 else (), K, N, md), K, N)
    out = matmul(x, y, stream=stream)
    if mask_out is not None:
        mo = b.as_array(mask_out, "block_masked_mm")
        expand = ((-2,) if xa == 1 else ()) + ((-1,) if ya == 1 else ())
        mo = blocks(mo, expand, M, N, dt.bool_ if mo._dtype == dt.bool_ else d)
        out = apply(out, mo, M, N)
    axes = ((out.ndim - 2,) if xa == 1 else ()) + ((out.ndim - 1,) if ya == 1 else ())
    return squeeze(out, axes, stream=stream) if axes else out


def gather_mm(a, b_, /, lhs_indices=None, rhs_indices=None, *, sorted_indices=False,
              stream=None):
    """Matrix products of the matrices of `a` and `b` picked by the index arrays (indices
    into their flattened batch axes)."""
    from .indexing import take
    from .linalg import matmul
    from .shape import reshape
    x, y = _pair(a, b_, "gather_mm")
    if x.ndim < 2 or y.ndim < 2:
        raise ValueError("[gather_mm] Inputs must have at least two dimensions.")
    xb = reshape(x, (-1,) + x._shape[-2:], stream=stream)
    yb = reshape(y, (-1,) + y._shape[-2:], stream=stream)
    if lhs_indices is not None:
        xb = take(xb, lhs_indices, 0, stream=stream)
    else:
        xb = reshape(xb, x._shape, stream=stream)
    if rhs_indices is not None:
        yb = take(yb, rhs_indices, 0, stream=stream)
    else:
        yb = reshape(yb, y._shape, stream=stream)
    return matmul(xb, yb, stream=stream)


def _segmented_mm(xp, x, y, segments, dtype):
    if xp is not np:  # masks built on the device: its segments read here would wait for it
        seg = segments.reshape(-1, 1, 2)
        k = xp.arange(x.shape[-1])
        mask = ((k >= seg[..., 0]) & (k < seg[..., 1])).astype(dtype)
        return xp.matmul(b.cast(x, dtype) * mask[:, None, :], b.cast(y, dtype))
    segs = segments.reshape(-1, 2).tolist()
    out = xp.empty((len(segs), x.shape[-2], y.shape[-1]), dtype)
    for i, (lo, hi) in enumerate(segs):  # one matmul per segment, not per element
        xp.matmul(b.cast(x[..., lo:hi], dtype), b.cast(y[..., lo:hi, :], dtype), out=out[i])
    return out


_SEGMENTED_MM = b.make("segmented_mm", _segmented_mm)


def segmented_mm(a, b_, /, segments, *, stream=None):
    """For each [start, end) pair in `segments`, `a[:, start:end] @ b[start:end, :]`."""
    x, y = _pair(a, b_, "segmented_mm")
    d = _inexact("segmented_mm", x, y)
    seg = b.as_array(segments, "segmented_mm")
    if x.ndim != 2 or y.ndim != 2 or x._shape[-1] != y._shape[0]:
        raise ValueError(f"[segmented_mm] Expected an MxK and a KxN matrix, got {x._shape} "
                         f"and {y._shape}.")
    if seg.ndim < 1 or seg._shape[-1] != 2 or seg._dtype.kind not in "iu":
        raise ValueError("[segmented_mm] The segments must be integer pairs (shape (..., 2)).")
    shape = seg._shape[:-1] + (x._shape[0], y._shape[1])
    from .shape import reshape
    flat = b.node(_SEGMENTED_MM, (x, y, seg), (math.prod(seg._shape[:-1]),) + shape[-2:], d,
                  {"dtype": d.np}, b.resolve(stream))
    return reshape(flat, shape, stream=stream)


def matrix_norm(a, /, ord=None, axis=None, keepdims=False, *, stream=None):
    """Same as `linalg.norm`."""
    from .linalg import norm
    return norm(a, ord, axis, keepdims, stream=stream)


def _convolve(xp, x, y, mode, dtype):
    return xp.convolve(b.cast(x, dtype), b.cast(y, dtype), mode)


def _convolve_composite(x, y, mode, dtype):
    """The outer product with row i shifted right by i (padded, flattened, cut, folded),
    summed over rows: the full convolution; 'same' and 'valid' are slices of it."""
    from .arrange import pad
    from .reduction import sum as sum_
    from .shape import reshape
    n, m = x._shape[0], y._shape[0]
    d = dt.from_numpy(dtype)
    outer = reshape(x.astype(d), (n, 1)) * reshape(y.astype(d), (1, m))
    skewed = reshape(pad(outer, ((0, 0), (0, n))), (n * (n + m),))[:n * (n + m - 1)]
    full = sum_(reshape(skewed, (n, n + m - 1)), axis=0)
    lo, hi = min(n, m), max(n, m)
    start = {"full": 0, "same": (lo - 1) // 2, "valid": lo - 1}[mode]
    stop = {"full": n + m - 1, "same": start + hi, "valid": hi}[mode]
    return full[start:stop]


_CONVOLVE = b.make("convolve", _convolve, **via(_convolve_composite))


def convolve(a, v, /, mode="full", *, stream=None):
    """The discrete linear convolution of two 1-D arrays ('full', 'same' or 'valid')."""
    x, y = _pair(a, v, "convolve")
    mode = b.str_arg(mode, "convolve", "mode")
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("[convolve] Inputs must be 1D.")
    d = dt.promote_types(x._dtype, y._dtype)
    if d.kind != "f":
        raise ValueError(f"[conv] Invalid input array with type {d.name}. Convolution "
                         "currently only supports floating point types")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"[convolve] Invalid mode '{mode}'.")
    n, m = x._shape[0], y._shape[0]
    if min(n, m) == 0:
        raise ValueError("[convolve] Inputs cannot be empty.")
    size = {"full": n + m - 1, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]
    return b.node(_CONVOLVE, (x, y), (size,), d, {"mode": mode, "dtype": d.np},
                  b.resolve(stream))


# Hadamard matrices of orders 12, 20 and 28, from N. J. A. Sloane's library of Hadamard
# matrices in the form MLX uses, so that results match it: bit j of row i is set where
# the entry is -1.  The transform of a row vector x of size m * 2^k is x @ kron(H_m, H_2^k).
_HADAMARD_ROWS = {
    12: (0x2, 0xaab, 0x3c8, 0x96e, 0xf20, 0x5ba, 0xc8c, 0x6e6, 0x23c, 0xb96, 0x8f0, 0xe5a),
    20: (0x6cc3e, 0xd1c5d, 0xab89b, 0x5f117, 0xb660f, 0x9cbde, 0x397bd, 0x72b7b, 0xe52f7,
         0xca5ef, 0xf79ac, 0xef758, 0xdeeb1, 0xbdd63, 0x7bec6, 0xf0592, 0xe8b05, 0xd922a,
         0xba074, 0x7c0c9),
    28: (0x32961fe, 0x65283fd, 0xc85477b, 0x92a8e77, 0x2751c6f, 0x4ca785f, 0x994b0bf,
         0x4b9bf3c, 0x9537ef8, 0x2a6fdf1, 0x54dbbe3, 0xa9b37c7, 0x5366f8f, 0xa4cdf9e,
         0x79f8cda, 0xf1f5935, 0xe3ef26a, 0xc7de4d5, 0x8fbc9ab, 0x1f7d356, 0x3cfe62d,
         0xfd0ed66, 0xfa1dacd, 0xf63b51b, 0xee72ab6, 0xdee15ec, 0xbfc2b59, 0x7f856b3),
}


def _hadamard_matrix(m):
    bits = np.array(_HADAMARD_ROWS[m], dtype=np.int64)[:, None] >> np.arange(m) & 1
    return (1 - 2 * bits).astype(np.float32)


def _hadamard_split(n):
    """(m, 2^k) with n = m * 2^k and m in 1, 12, 20, 28; None if there is none."""
    for m in (1, 12, 20, 28):
        p = n // m
        if n % m == 0 and p & (p - 1) == 0:
            return m, p
    return None


@functools.lru_cache(maxsize=None)
def _sylvester(q):
    """H_{2^q}, Sylvester's Hadamard matrix (symmetric)."""
    h = np.ones((1, 1))
    for _ in range(q):
        h = np.block([[h, h], [h, -h]])
    return h


def _sylvester_gemms(x, p):
    """`x @ H_p` along the last axis (p = 2^k) as a few GEMMs and no copies: H_p is the
    Kronecker product of H_{2^q} with q <= 5, each contracting one axis of `x` viewed as
    (..., 2^q1, 2^q2, ...), from the left (H @ the axes after it) or, for the last, from
    the right.  The sums are float64's, all but exact for float32 values, so a row's result
    does not depend on what else the GEMM holds (a batch, a vmap)."""
    k = p.bit_length() - 1
    parts = -(-k // 5)
    qs = [k // parts + (i < k % parts) for i in range(parts)]
    y = x.astype(np.float64)
    before = y.size // p
    for q in qs:
        c = 1 << q
        after = y.size // (before * c)
        if after == 1:
            y = y.reshape(-1, c) @ _sylvester(q)
        else:
            y = np.matmul(_sylvester(q), y.reshape(before, c, after))
        before *= c
    return y.reshape(x.shape).astype(np.float32)


def _hadamard(xp, a, scale, dtype, transpose=False):
    x = a.astype("float32").reshape(a.shape or (1,))
    n = x.shape[-1]
    m, p = _hadamard_split(n)
    lead = x.shape[:-1] + (m,)
    if xp is np:  # BLAS: 4-5x the butterflies' speed on the CPU
        if p > 1:
            x = _sylvester_gemms(x.reshape(lead + (p,)), p)
    else:
        h = 1
        while h < p:  # log2(p) butterfly passes over the whole array
            x = x.reshape(lead + (p // (2 * h), 2, h))
            top, bottom = x[..., 0, :], x[..., 1, :]
            x = xp.stack([top + bottom, top - bottom], axis=-2)
            h *= 2
    if m > 1:  # then H_m^T along the axis of size m
        spec = "ai,...ib->...ab" if transpose else "ia,...ib->...ab"
        x = xp.einsum(spec, xp.asarray(_hadamard_matrix(m)), x.reshape(lead + (p,)))
    return (x.reshape(a.shape) * np.float32(scale)).astype(dtype)


def _hadamard_again(x, out, scale, dtype, transpose):
    """The transform (its transpose if `transpose`) applied to `x` in `out`'s dtype."""
    return b.node(_HADAMARD, (x.astype(out._dtype),), x._shape, out._dtype,
                  {"scale": scale, "dtype": dtype, "transpose": transpose}, b.resolve(None))


# the transform is x @ kron(H_m, H_2^k): linear, its vjp the transposed transform (H_m is
# not symmetric for m > 1, where MLX 0.32.4's vjp applies the transform itself)
_HADAMARD = b.make(
    "hadamard_transform", _hadamard,
    vjp=lambda c, out, x, scale, dtype, transpose=False:
        (_hadamard_again(c, out, scale, dtype, not transpose),),
    jvp=lambda t, out, x, scale, dtype, transpose=False:
        _hadamard_again(t[0], out, scale, dtype, transpose),
    vmap=lambda axes, out, x, **p: (
        _hadamard_again(to_front(x, axes[0]), out, p["scale"], p["dtype"],
                        p.get("transpose", False)), 0),
    shape=lambda params, shape: (_hadamard_shape(shape), params))


def _hadamard_shape(shape):
    """The input's shape (MLX's Hadamard keeps it; its scale stays the traced one)."""
    n = shape[-1] if shape else 1
    if not n or _hadamard_split(n) is None:
        raise ValueError(f"[hadamard_transform] Only supports n = m*2^k where m in "
                         f"(1, 12, 20, 28), got n = {n}.")
    return shape


def hadamard_transform(a, scale=None, stream=None):
    """The Hadamard transform along the last axis, of size m * 2^k with m in 1, 12, 20,
    28, times `scale` (default 1/sqrt(n))."""
    a = b.as_array(a, "hadamard_transform")
    if scale is not None:
        scale = b.float_arg(scale, "hadamard_transform", "scale")
    n = a._shape[-1] if a.ndim else 1
    if a.size == 0:
        raise ValueError("[hadamard_transform] Does not support empty arrays.")
    _hadamard_shape(a._shape)
    scale = 1 / math.sqrt(n) if scale is None else float(scale)
    d = a._dtype if a._dtype.kind == "f" else dt.float32
    if n == 1:  # MLX hands the input back, dtype and all, or multiplies it by the scale
        if np.float32(scale) == 1:
            return b.alias(a, b.resolve(stream))
        from .elementwise import multiply
        return multiply(a, b.scalar(scale, d), stream=stream)
    return b.node(_HADAMARD, (a,), a._shape, d, {"scale": scale, "dtype": d.np},
                  b.resolve(stream))
