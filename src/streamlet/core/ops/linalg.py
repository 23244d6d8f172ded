"""Matrix products and `mx.linalg`: factorizations, solvers, norms, cross products.

Factorizations run on CPU streams only, as in MLX; asking for a GPU stream raises
ValueError when the op is built. A factorization with several results (qr, svd,
eig, eigh, lu, lu_factor, slogdet) makes ONE node that computes them all and
returns a tuple, plus one cheap selection node per result, so `Q, R = qr(a)`
factors `a` once. The tuple node (its value a 0-d object array holding the results) is
internal: only selection nodes reach the user.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import build as bl
from . import elementwise as _ew, shape as _sh  # the rules' ops (imported once: hot path)
from .build import dt
from ..graph import SHAPELESS
from .rules import via


_HALF = (dt.float16.np, dt.bfloat16.np)


def product_kernel(fn):
    """A product kernel `fn(xp, *operands, **params)` in the output `dtype`: float16 and
    bfloat16 products accumulate in float32 and round once, as MLX's CPU gemm does."""
    def kernel(xp, *operands, dtype, **params):
        work = dt.float32.np if dtype in _HALF else dtype
        out = xp.asarray(fn(xp, *[x if x.dtype == work else x.astype(work) for x in operands],
                            **params))
        return out.astype(dtype) if out.dtype != dtype else out
    kernel.__name__ = fn.__name__
    return kernel


def turned(a, flag):
    """A kernel's operand as a product with transposed-operand flags reads it: a NumPy or
    CuPy array, its last two axes swapped (a view) where `flag` is set."""
    return a.swapaxes(-1, -2) if flag else a


@product_kernel
def _matmul(xp, x, y, ta=False, tb=False):
    return xp.matmul(turned(x, ta), turned(y, tb))


def _flagged(x, y, ta, tb):
    """The operands a product with transposed-operand flags multiplies, as transposes."""
    return (_sh.swapaxes(x, -1, -2) if ta else x), (_sh.swapaxes(y, -1, -2) if tb else y)


def _matrices(x, y):
    """`x` and `y` as stacks of matrices (1-D: a row, resp. a column)."""
    return (_sh.expand_dims(x, -2) if x.ndim == 1 else x,
            _sh.expand_dims(y, -1) if y.ndim == 1 else y)


def _as_product(c, x, y):
    """The cotangent `c` shaped like the product of `_matrices(x, y)`."""
    if x.ndim == 1:
        c = _sh.expand_dims(c, -2 if y.ndim > 1 else -1)
    if y.ndim == 1:
        c = _sh.expand_dims(c, -1)
    return c


def _adjoint(m):
    return _sh.swapaxes(_ew.conj(m) if m._dtype.kind == "c" else m, -1, -2)


def _product(a, b_, st, ta=False, tb=False):
    """`a @ b_` of the nodes of two real matrices of one dtype on `st`, either taken
    transposed (`ta`, `tb`: no transpose node, the kernel reads the transposed view):
    the matmul, nothing to check."""
    d = a.dtype
    params = {"dtype": d.np}
    if ta:
        params["ta"] = True
    if tb:
        params["tb"] = True
    shape = (a.shape[1] if ta else a.shape[0], b_.shape[0] if tb else b_.shape[1])
    return bl.node_of(_MATMUL, (a, b_), shape, d, params, st)


def _plain(c, x, y) -> bool:
    """Whether the cotangent `c` and the inputs `x`, `y` of a product are nodes of real
    matrices of one dtype (the vjp's short way)."""
    d = c.dtype
    return len(x.shape) == len(y.shape) == 2 and d is x.dtype is y.dtype and d.kind == "f"


def _plain_cotangents(c, x, y, ta, tb, st):
    """Thunks of the cotangents of `x` and `y` for the product `A @ B` (A = x, or x's
    transpose with `ta`; B likewise) given its cotangent `c`, all matrix nodes: dA = c B^T
    and dB = A^T c, each one product reading its operands transposed by flags.  A
    transposed operand's cotangent is the transpose of that product (a node), as MLX
    computes it: the product the other way round would round differently."""
    def dx():
        g = _product(c, y, st, False, not tb)
        return _transposed(g, st) if ta else g

    def dy():
        g = _product(x, c, st, not ta, False)
        return _transposed(g, st) if tb else g
    return dx, dy


def _transposed(a, st):
    """The transpose node of the matrix `a` on `st`, nothing to check."""
    n = a._node
    return bl.node_of(_sh._TRANSPOSE, (n,), n.shape[::-1], n.dtype, {"axes": (1, 0)}, st)


def _folded_cotangents(c, x, y, tb, st):
    """Thunks of the cotangents of a stack `x` of matrices (its batch folded into rows, as
    MLX folds it) times the matrix `y` (or its transpose, `tb`), given the product's
    cotangent `c`: `c @ y.T` as one product node reading `y` as it is or by a flag (the
    general rule reads a transpose node of `y` by a flag: the same layout), and the folded
    `x.T @ c` (then transposed for `tb`), without the rule's transpose nodes."""
    d = c.dtype

    def dx():
        params = {"dtype": d.np} if tb else {"dtype": d.np, "tb": True}
        return bl.node_of(_MATMUL, (c, y), x.shape, d, params, st)

    def dy():
        g = _product(_rows(bl.wrap(x))._node, _rows(bl.wrap(c))._node, st, True, False)
        return _transposed(g, st) if tb else g
    return dx, dy


def _rows(a):
    """The stack of matrices `a` as one matrix, its batch folded into the rows (their
    count written out: -1 can't be inferred for an empty row)."""
    return _sh.reshape(a, (math.prod(a._shape[:-1]), a._shape[-1]))


def _matmul_cotangents(n, c, wanted, cot, accumulate):
    """matmul's `cotangents` (`Primitive`): `c @ y.T` and `x.T @ c` for matrices, and for a
    stack of them times a matrix (a Linear layer's 3-D input)."""
    x, y = n.inputs
    c = c._node
    p = n.params
    d = c.dtype
    if _plain(c, x, y):
        dx, dy = _plain_cotangents(c, x, y, p.get("ta", False), p.get("tb", False), n.stream)
    elif len(x.shape) > 2 and len(y.shape) == 2 and d is x.dtype is y.dtype and \
            d.kind == "f" and not p.get("ta") and not SHAPELESS.on:
        dx, dy = _folded_cotangents(c, x, y, p.get("tb", False), n.stream)
    else:
        return False
    if x in wanted:
        accumulate(cot, x, dx())
    if y in wanted:
        accumulate(cot, y, dy())
    return True


def _matmul_vjp(c, out, x, y, dtype, ta=False, tb=False):
    if _plain(c._node, x._node, y._node):
        return _plain_cotangents(c._node, x._node, y._node, ta, tb, bl.resolve(None))
    dx, dy = _general_cotangents(c, *_flagged(x, y, ta, tb))
    swap = _sh.swapaxes  # a transposed operand's cotangent is the transposed one
    return ((lambda: swap(dx(), -1, -2)) if ta else dx,
            (lambda: swap(dy(), -1, -2)) if tb else dy)


def _general_cotangents(c, x, y):
    """Thunks of the cotangents of `x` and `y` for `x @ y` (any ranks, complex too)."""
    squeeze = _sh.squeeze
    xm, ym = _matrices(x, y)
    cm = _as_product(c, x, y)

    def dx():
        g = matmul(cm, _adjoint(ym))
        return squeeze(g, -2) if x.ndim == 1 else g

    def dy():
        if x.ndim > 2 and y.ndim <= 2 and not SHAPELESS.on:
            # MLX folds the batch into the rows (one product, one rounding for half types)
            g = matmul(_adjoint(_rows(xm)), _rows(cm))
        else:
            g = matmul(_adjoint(xm), cm)
        return squeeze(g, -1) if y.ndim == 1 else g
    return dx, dy


def _matmul_jvp(t, out, x, y, dtype, ta=False, tb=False):
    terms = [matmul(*_flagged(t[0], y, ta, tb))] if t[0] is not None else []
    if t[1] is not None:
        terms.append(matmul(*_flagged(x, t[1], ta, tb)))
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def _matmul_vmap(axes, out, x, y, dtype, ta=False, tb=False):
    """Both as stacks of matrices with the batch axis first and ones up to the common
    number of batch axes; the dimensions added for 1-D inputs are taken off again."""
    from .rules import to_front
    from .shape import expand_dims, squeeze
    if ta or tb:  # batch axes first, then the flagged operands transposed
        x, y = (v if ax is None else to_front(v, ax) for v, ax in zip((x, y), axes))
        x, y = _flagged(x, y, ta, tb)
        axes = tuple(None if ax is None else 0 for ax in axes)
    ranks = [v.ndim - (ax is not None) for v, ax in zip((x, y), axes)]
    mats = []
    for v, ax, r, where in zip((x, y), axes, ranks, (-2, -1)):
        if ax is not None:
            v = to_front(v, ax)
        mats.append(expand_dims(v, where) if r == 1 else v)
    depth = max(max(r, 2) - 2 for r in ranks)
    for i, (v, ax) in enumerate(zip(mats, axes)):
        lack = depth - (v.ndim - 1 - 2)
        if ax is not None and lack > 0:
            mats[i] = expand_dims(v, tuple(range(1, lack + 1)))
    res = matmul(*mats)
    drop = tuple(a for a, r in zip((-2, -1), ranks) if r == 1)
    return (squeeze(res, drop) if drop else res), 0


def _matmul_shape(params, xs, ys):
    if params.get("ta"):
        xs = xs[:-2] + xs[:-3:-1]
    if params.get("tb"):
        ys = ys[:-2] + ys[:-3:-1]
    x2 = (1,) + xs if len(xs) == 1 else xs
    y2 = ys + (1,) if len(ys) == 1 else ys
    if x2[-1] != y2[-2]:
        raise ValueError(f"[matmul] Last dimension of first input with shape {xs} must match "
                         f"second to last dimension of second input with shape {ys}.")
    batch = bl.broadcast_shapes(x2[:-2], y2[:-2], op="matmul")
    return batch + (x2[-2],) * (len(xs) > 1) + (y2[-1],) * (len(ys) > 1), params


_MATMUL = bl.make("matmul", _matmul,
                  gpu=bl.GpuKernel("streamlet.backend.cuda_gemm:matmul", bfloat16="native"),
                  vjp=_matmul_vjp, jvp=_matmul_jvp, vmap=_matmul_vmap,
                  shape=_matmul_shape, cotangents=_matmul_cotangents)


def _check_inexact(op, da, db, d):
    if d.kind not in "fc":
        raise ValueError(f"[{op}] Only inexact types are supported but {da.name} and {db.name} "
                         f"were provided which results in {d.name}, which is not a floating "
                         "point type.")


def matmul(a, b, /, *, stream=None):
    """Matrix product with NumPy's rules for 1-D inputs and batch broadcasting."""
    st = bl.resolve(stream)
    x, y = bl.as_array(a, "matmul"), bl.as_array(b, "matmul")
    d = _product_dtype(x, y)
    params = {"dtype": d.np}
    return bl.node_of(_MATMUL, operands(x, y, st, params), product_shape(x, y, "matmul"), d,
                      params, st)


def _product_dtype(x, y):
    """The dtype of `x @ y` (MLX's error for integers)."""
    d = x._dtype if x._dtype is y._dtype else dt.promote_types(x._dtype, y._dtype)
    _check_inexact("matmul", x._dtype, y._dtype, d)
    return d


def matmul_transposed(a, w):
    """`a @ w.T` for a matrix `w` (a Linear layer's weight) on the default stream: the
    node `matmul` makes of it, reading `w` transposed by its flag, without building the
    transpose node that the product then reads through."""
    st = bl.resolve(None)
    x, y = bl.as_array(a, "matmul"), bl.as_array(w, "matmul")
    if y.ndim != 2:
        return matmul(x, _sh.transpose(y))
    d = _product_dtype(x, y)
    params = {"dtype": d.np}
    xn = _untransposed(x._node, st, params, "ta")
    params["tb"] = True
    return bl.node_of(_MATMUL, (xn, y._node), shapes_product(x._shape, y._shape[::-1],
                                                             "matmul"), d, params, st)


def operands(x, y, st, params) -> tuple:
    """The nodes a product of `x` and `y` built on `st` reads: an operand that is an
    unevaluated transpose of the last two axes made on `st` is read through that
    transpose's input and a flag put in `params` (`ta`, `tb`), so `x @ w.T` is one node
    whose kernel takes the transposed view."""
    return _untransposed(x._node, st, params, "ta"), _untransposed(y._node, st, params, "tb")


def swapped_axes(ndim) -> tuple:
    """The axes of a transpose of the last two of `ndim` axes, the one a flag stands for."""
    return (*range(ndim - 2), ndim - 1, ndim - 2)


def _untransposed(n, st, params, flag):
    # a worker evaluating `n` meanwhile clears these fields, never sets others: any of
    # them read not cleared is the transpose's own
    prim, inputs, own = n.prim, n.inputs, n.params
    if prim is _sh._TRANSPOSE and inputs and own is not None and n.stream is st:
        axes = own["axes"]
        if len(axes) >= 2 and axes == swapped_axes(len(axes)):
            params[flag] = True
            return inputs[0]
    return n


def product_shape(x, y, op):
    """The shape of `x @ y` (NumPy's rules for 1-D inputs), with MLX's errors naming `op`."""
    return shapes_product(x._shape, y._shape, op)


def shapes_product(xs, ys, op):
    """`product_shape` of operands of shapes `xs` and `ys`."""
    if not xs or not ys:
        raise ValueError(f"[{op}] Got 0 dimension input. Inputs must have at least one "
                         "dimension.")
    xm = (1,) + xs if len(xs) == 1 else xs
    ym = ys + (1,) if len(ys) == 1 else ys
    if xm[-1] != ym[-2]:
        raise ValueError(f"[{op}] Last dimension of first input with shape {xs} must "
                         f"match second to last dimension of second input with shape "
                         f"{ys}.")
    batch = bl.broadcast_pair(xm[:-2], ym[:-2], op)
    return batch + (xm[-2],) * (len(xs) > 1) + (ym[-1],) * (len(ys) > 1)


# -- shared checks -------------------------------------------------------------------------
_REAL = (dt.float32, dt.float64)
_REAL_OR_COMPLEX = (dt.float32, dt.float64, dt.complex64)


def _cpu_only(st, op):
    if st.stream.device.type.value != 0:
        raise ValueError(f"[{op}] This op is not yet supported on the GPU. Explicitly pass a "
                         "CPU stream to run it (stream=mx.cpu).")


def _matrix(a, op, allowed=_REAL, square=None):
    """`a` as an array of matrices of an allowed dtype; `square` is the message if not square."""
    a = bl.as_array(a, op)
    if a._dtype not in allowed:
        names = [d.name for d in allowed]
        listed = " or ".join(names) if len(names) == 2 else \
            ", ".join(names[:-1]) + " or " + names[-1]
        raise ValueError(f"[{op}] Arrays must have type {listed}. Received array with type "
                         f"{a._dtype.name}.")
    if a.ndim < 2:
        raise ValueError(f"[{op}] Arrays must have >= 2 dimensions. Received array with "
                         f"{a.ndim} dimensions.")
    if square and a._shape[-1] != a._shape[-2]:
        raise ValueError(f"[{op}] {square}")
    return a


def _linalg(fn, what):
    """A kernel whose LinAlgError (singular, not positive definite...) reads `what: why`."""
    def kernel(xp, *args, **params):
        try:
            return fn(xp, *args, **params)
        except np.linalg.LinAlgError as exc:
            raise RuntimeError(f"{what}: {exc}") from None
    return kernel


def _op(name, fn, what=None, multi=False, **rules):
    kernel = _linalg(fn, what or f"[linalg.{name}] failed")
    return bl.make(f"linalg.{name}", kernel, multi=multi, **rules)


def _unary(prim, a, shape, d, st, **params):
    return bl.node(prim, (a,), shape, d, params, st)


# -- kernels (NumPy's LAPACK under `xp.linalg`) -----------------------------------------------
def _tri(xp, a, upper):
    return xp.triu(a) if upper else xp.tril(a)


def _eye_like(xp, a):
    return xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape)


_PANEL = 16  # columns factored one at a time; wider blocks split in two and use matmul


def _getrf_columns(xp, a):
    """Row-pivoted elimination of a batch (count, m, n) in place, one column per step.

    Returns the row permutation: row i of the result is row perm[i] of the input.
    """
    count, m, n = a.shape
    rows = xp.arange(count)
    perm = xp.broadcast_to(xp.arange(m), (count, m)).copy()
    for k in range(min(m, n)):
        p = k + xp.argmax(xp.abs(a[:, k:, k]), axis=1)
        top, low = a[rows, k].copy(), a[rows, p].copy()
        a[rows, k], a[rows, p] = low, top
        pt, pl = perm[rows, k].copy(), perm[rows, p].copy()
        perm[rows, k], perm[rows, p] = pl, pt
        pivot = a[:, k, k]
        a[:, k + 1:, k] /= xp.where(pivot == 0, 1, pivot)[:, None]
        a[:, k + 1:, k + 1:] -= a[:, k + 1:, k, None] * a[:, k, None, k + 1:]
    return perm


def _getrf(xp, a):
    """LU with partial pivoting of a batch in place (recursive: the trailing update is a
    matmul, so large matrices run at BLAS speed). Returns the row permutation."""
    count, m, n = a.shape
    k = min(m, n)
    if k <= _PANEL:
        return _getrf_columns(xp, a)
    h = k // 2
    rows = xp.arange(count)[:, None]
    perm1 = _getrf(xp, a[:, :, :h])
    a[:, :, h:] = a[rows, perm1, h:]
    unit_lower = xp.tril(a[:, :h, :h], -1) + xp.eye(h, dtype=a.dtype)
    a[:, :h, h:] = xp.linalg.solve(unit_lower, a[:, :h, h:])
    a[:, h:, h:] -= a[:, h:, :h] @ a[:, :h, h:]
    perm2 = _getrf(xp, a[:, h:, h:])
    a[:, h:, :h] = a[rows, h + perm2, :h]
    return xp.concatenate([perm1[:, :h], xp.take_along_axis(perm1[:, h:], perm2, 1)], 1)


def _pivots(xp, perm, k):
    """LAPACK's row swaps (0-based) that produce the permutation `perm`."""
    count, m = perm.shape
    rows = xp.arange(count)
    current = xp.broadcast_to(xp.arange(m), (count, m)).copy()  # original row at each slot
    where = current.copy()  # slot of each original row
    piv = xp.empty((count, k), dtype=xp.uint32)
    for i in range(k):
        p = where[rows, perm[:, i]]
        piv[:, i] = p
        moved = current[rows, i].copy()
        current[rows, i], current[rows, p] = perm[:, i], moved
        where[rows, moved], where[rows, perm[:, i]] = p, i
    return piv


def _lu_factor_kernel(xp, a):
    """(LU packed, row permutation) of a batch of m x n matrices."""
    m, n = a.shape[-2:]
    lu = a.reshape((math.prod(a.shape[:-2]), m, n)).copy()  # -1 is ambiguous when empty
    perm = _getrf(xp, lu)
    return lu.reshape(a.shape), perm.reshape(a.shape[:-2] + (m,))


def _lu(xp, a):
    lu, perm = _lu_factor_kernel(xp, a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lower = xp.tril(lu[..., :, :k], -1) + xp.eye(m, k, dtype=lu.dtype)
    rows_of_a = xp.argsort(perm, axis=-1).astype(xp.uint32)
    return rows_of_a, lower, xp.triu(lu[..., :k, :])


def _lu_factor(xp, a):
    lu, perm = _lu_factor_kernel(xp, a)
    m, n = a.shape[-2:]
    piv = _pivots(xp, perm.reshape((math.prod(a.shape[:-2]), m)), min(m, n))
    return lu, piv.reshape(a.shape[:-2] + (min(m, n),))


def _qr(xp, a):
    return tuple(xp.linalg.qr(a, mode="reduced"))


def _svd(xp, a):
    u, s, vt = xp.linalg.svd(a, full_matrices=True)
    return u, s.astype(xp.float32 if a.dtype == xp.complex64 else a.dtype), vt


def _svdvals(xp, a):
    s = xp.linalg.svd(a, compute_uv=False)
    return s.astype(xp.float32 if a.dtype == xp.complex64 else a.dtype)


def _real_of(xp, a):
    return xp.float32 if a.dtype == xp.complex64 else a.dtype


def _eigh(xp, a, uplo):
    w, v = xp.linalg.eigh(a, UPLO=uplo)
    return w.astype(_real_of(xp, a)), v


def _eigvalsh(xp, a, uplo):
    return xp.linalg.eigvalsh(a, UPLO=uplo).astype(_real_of(xp, a))


def _eigvals(xp, a):
    """In MLX's order: MLX hands its row-major matrix to LAPACK's geev, which reads the
    transpose (same eigenvalues, found in another order)."""
    return xp.linalg.eigvals(xp.swapaxes(a, -1, -2)).astype(xp.complex64)


def _eig(xp, a):
    """numpy's eigenpairs of `a`, put in the order of `_eigvals` (nearest value first)."""
    w, v = xp.linalg.eig(a)
    want = _eigvals(xp, a)
    dist = xp.abs(want[..., :, None] - w[..., None, :])
    order = xp.empty(w.shape, dtype=xp.intp)
    for i in range(w.shape[-1]):
        j = xp.argmin(dist[..., i, :], axis=-1)
        order[..., i] = j
        xp.put_along_axis(dist, j[..., None, None], xp.inf, axis=-1)
    return want, xp.take_along_axis(v, order[..., None, :], -1).astype(xp.complex64)


def _nonsingular_triangle(xp, a, upper):
    """The triangle of `a`; a zero on its diagonal fails as LAPACK's trtri does (solve's
    LU of it may round past the zero pivot)."""
    if (xp.diagonal(a, 0, -2, -1) == 0).any():
        raise np.linalg.LinAlgError("Singular matrix")
    return _tri(xp, a, upper)


def _tri_inv(xp, a, upper):
    return _tri(xp, xp.linalg.solve(_nonsingular_triangle(xp, a, upper), _eye_like(xp, a)),
                upper)


def _cholesky_inv(xp, a, upper):
    """inv(L)^T inv(L) (or inv(U) inv(U)^T), as MLX: forming L L^T first would square the
    condition number."""
    li = _tri_inv(xp, a, upper)
    lt = xp.swapaxes(li, -1, -2)
    return li @ lt if upper else lt @ li


def _potrf2(a):
    """LAPACK's recursive Cholesky (dpotrf2) of the lower triangle of `a`, in place; at a
    pivot that is not positive it stops, leaving the entries as far as they got."""
    n1 = a.shape[0] // 2
    if n1 == 0:
        if not a[0, 0] > 0:  # NaN too
            return False
        a[0, 0] = np.sqrt(a[0, 0])
        return True
    if not _potrf2(a[:n1, :n1]):
        return False
    a[n1:, :n1] = np.linalg.solve(a[:n1, :n1], a[n1:, :n1].T).T
    a[n1:, n1:] -= a[n1:, :n1] @ a[n1:, :n1].T
    return _potrf2(a[n1:, n1:])


def _cholesky(xp, a, upper):
    """numpy's Cholesky; where a matrix is not positive definite, MLX hands back what
    LAPACK's potrf left (no error), and so do we."""
    if not xp.isnan(a).any():  # NOTE: numpy's OpenBLAS runs on through a NaN pivot
        try:
            return xp.linalg.cholesky(a, upper=upper)
        except np.linalg.LinAlgError:
            pass
    out = np.tril(np.swapaxes(a, -1, -2) if upper else a).copy()
    for m in out.reshape((-1,) + a.shape[-2:]):  # views: each factored in place
        try:
            if np.isnan(m).any():
                raise np.linalg.LinAlgError
            m[...] = np.linalg.cholesky(m)
        except np.linalg.LinAlgError:
            _potrf2(m)
            m[...] = np.tril(m)
    return np.swapaxes(out, -1, -2) if upper else out


def _det(xp, a, result):
    return xp.asarray(xp.linalg.det(a)).astype(result)


def _slogdet(xp, a, result):
    sign, logdet = xp.linalg.slogdet(a)
    return xp.asarray(sign).astype(result), xp.asarray(logdet).astype(result)


def _solve_tri(xp, a, y, upper):
    return xp.linalg.solve(_nonsingular_triangle(xp, a, upper), y)


def _solve(xp, a, y, vector):
    return xp.linalg.solve(a, y[..., None])[..., 0] if vector else xp.linalg.solve(a, y)


# -- transform rules (built from ops; the factorizations MLX 0.32.4 does not differentiate,
# cholesky, qr, svd, eig, eigh, lu and pinv, have none) -------------------------------------
def _mT(m):
    from .shape import swapaxes
    return swapaxes(m, -1, -2)


def _triangle_of(m, upper):
    from .arrange import tril, triu
    return triu(m) if upper else tril(m)


def _inv_vjp(c, out, a):
    return (lambda: -(_mT(out) @ c @ _mT(out)),)  # d inv(a) = -inv(a) da inv(a)


def _inv_jvp(t, out, a):
    return -(out @ t[0] @ out)


def _tri_inv_vjp(c, out, a, upper):
    return (lambda: _triangle_of(-(_mT(out) @ c @ _mT(out)), upper),)


def _tri_inv_jvp(t, out, a, upper):
    return -(out @ _triangle_of(t[0], upper) @ out)


def _solve_vjp(c, out, a, y, vector):
    """x = a^-1 y: y's cotangent solves with a^T, a's is minus it times x^T."""
    from .shape import expand_dims
    cy = solve(_mT(a), expand_dims(c, -1))[..., 0] if vector else solve(_mT(a), c)
    if vector:
        return lambda: -(expand_dims(cy, -1) * expand_dims(out, -2)), cy
    return lambda: -(cy @ _mT(out)), cy


def _solve_jvp(t, out, a, y, vector):
    from .shape import expand_dims
    rhs = t[1]
    if t[0] is not None:
        moved = (t[0] @ expand_dims(out, -1))[..., 0] if vector else t[0] @ out
        rhs = -moved if rhs is None else rhs - moved
    return solve(a, rhs)


def _solve_tri_vjp(c, out, a, y, upper):
    cy = solve_triangular(_mT(a), c, upper=not upper)
    return lambda: _triangle_of(-(cy @ _mT(out)), upper), cy


def _solve_tri_jvp(t, out, a, y, upper):
    rhs = t[1]
    if t[0] is not None:
        moved = _triangle_of(t[0], upper) @ out
        rhs = -moved if rhs is None else rhs - moved
    return solve_triangular(a, rhs, upper=upper)


def _cholesky_inv_composite(a, upper):
    li = tri_inv(a, upper)
    return li @ _mT(li) if upper else _mT(li) @ li


def _det_vjp(c, d, a, result):  # d det = det tr(a^-1 da)
    from .shape import expand_dims
    return (lambda: expand_dims(c * d, (-2, -1)) * _mT(inv(a)),)


def _det_jvp(t, d, a, result):
    from .reduction import sum as sum_
    return d * sum_(_mT(inv(a)) * t[0], axis=(-2, -1))


def _slogdet_vjp(cots, results, a, result, outs):
    from .shape import expand_dims
    c = cots[1]  # the sign is piecewise constant
    return (None if c is None else lambda: expand_dims(c, (-2, -1)) * _mT(inv(a)),)


def _slogdet_jvp(t, results, a, result, outs):
    from .creation import zeros_like
    from .reduction import sum as sum_
    return [zeros_like(results[0]), sum_(_mT(inv(a)) * t[0], axis=(-2, -1))]


def _matrices_vmap(axes, out, a, **params):
    """Ops on stacks of matrices: the batch axis goes first, the kernel takes it along."""
    from .rules import rebuild, to_front
    a = to_front(a, axes[0])
    return rebuild(out, (a,), (a._shape[0],) + out._shape), 0


def _solve_vmap(axes, out, a, y, **params):
    """The batch axis first in each batched input, ones after it so that the inputs' own
    batch axes line up (`a` has two matrix axes, `y` one when a vector)."""
    from .rules import rebuild, to_front
    core = (2, 1 if params.get("vector") else 2)
    depth = max(v.ndim - (ax is not None) - c for v, ax, c in zip((a, y), axes, core))
    moved = []
    for v, ax, c in zip((a, y), axes, core):
        if ax is not None:
            v = to_front(v, ax)
            lack = depth - (v.ndim - 1 - c)
            v = _sh.expand_dims(v, tuple(range(1, lack + 1))) if lack > 0 else v
        moved.append(v)
    size = next(v._shape[0] for v, ax in zip(moved, axes) if ax is not None)
    return rebuild(out, moved, (size,) + out._shape), 0


def _public_vmap(op):
    """Multi-output factorizations of stacks of matrices: the public op on the input with
    its batch axis first gives every result batched in front."""
    def rule(axes, results, a, **params):
        from .rules import to_front
        kept = {k: v for k, v in params.items() if k not in ("outs", "result")}
        got = op(to_front(a, axes[0]), **{{"uplo": "UPLO"}.get(k, k): v for k, v in kept.items()})
        return list(got), [0] * len(results)
    return rule


_SINGULAR = "The matrix is singular"
_INV = _op("inv", lambda xp, a: xp.linalg.inv(a), f"[linalg.inv] {_SINGULAR}",
           vjp=_inv_vjp, jvp=_inv_jvp, vmap=_matrices_vmap)
_TRI_INV = _op("tri_inv", _tri_inv, f"[linalg.tri_inv] {_SINGULAR}", vjp=_tri_inv_vjp,
               jvp=_tri_inv_jvp, vmap=_matrices_vmap)
_CHOL = _op("cholesky", _cholesky, vmap=_matrices_vmap)
_CHOL_INV = _op("cholesky_inv", _cholesky_inv, f"[linalg.cholesky_inv] {_SINGULAR}",
                **via(_cholesky_inv_composite))
_SOLVE = _op("solve", _solve, f"[linalg.solve] {_SINGULAR}", vjp=_solve_vjp, jvp=_solve_jvp,
             vmap=_solve_vmap)
_SOLVE_TRI = _op("solve_triangular", _solve_tri, f"[linalg.solve_triangular] {_SINGULAR}",
                 vjp=_solve_tri_vjp, jvp=_solve_tri_jvp, vmap=_solve_vmap)
_PINV = _op("pinv", lambda xp, a: xp.linalg.pinv(a), "[linalg.pinv] SVD did not converge",
            vmap=_matrices_vmap)
_DET = _op("det", _det, vjp=_det_vjp, jvp=_det_jvp, vmap=_matrices_vmap)
_SLOGDET = _op("slogdet", _slogdet, multi=True, vjp=_slogdet_vjp, jvp=_slogdet_jvp,
               vmap=_public_vmap(lambda a: slogdet(a)))
_QR = _op("qr", _qr, multi=True, vmap=_public_vmap(lambda a: qr(a)))
_SVD = _op("svd", _svd, multi=True, vmap=_public_vmap(lambda a: svd(a)))
_SVDVALS = _op("svd", _svdvals, vmap=_matrices_vmap)
_EIG = _op("eig", _eig, multi=True, vmap=_public_vmap(lambda a: eig(a)))
_EIGVALS = _op("eigvals", _eigvals, vmap=_matrices_vmap)
_EIGH = _op("eigh", _eigh, multi=True, vmap=_public_vmap(lambda a, UPLO: eigh(a, UPLO)))
_EIGVALSH = _op("eigvalsh", _eigvalsh, vmap=_matrices_vmap)
_LU = _op("lu", _lu, multi=True, vmap=_public_vmap(lambda a: lu(a)))
_LU_FACTOR = _op("lu_factor", _lu_factor, multi=True, vmap=_public_vmap(lambda a: lu_factor(a)))


# -- public ops ---------------------------------------------------------------------------------
def inv(a, *, stream=None):
    """Inverse of a square matrix (CPU streams only, as in MLX).

    A singular matrix fails when the op runs: eval raises RuntimeError.
    """
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::inv")
    a = _matrix(a, "linalg::inv", square="Inverses are only defined for square matrices.")
    return _unary(_INV, a, a._shape, a._dtype, st)


def tri_inv(a, upper=False, *, stream=None):
    """Inverse of a triangular matrix; only the `upper` (or lower) triangle is read."""
    upper = bl.bool_arg(upper, "linalg::tri_inv", "upper")
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::tri_inv")
    a = _matrix(a, "linalg::inv", square="Inverses are only defined for square matrices.")
    return _unary(_TRI_INV, a, a._shape, a._dtype, st, upper=upper)


def cholesky(a, upper=False, *, stream=None):
    """Cholesky factor L (or U with `upper=True`) of a symmetric positive definite matrix."""
    upper = bl.bool_arg(upper, "linalg::cholesky", "upper")
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::cholesky")
    a = _matrix(a, "linalg::cholesky", square="Cholesky decomposition is only defined for "
                "square matrices.")
    return _unary(_CHOL, a, a._shape, a._dtype, st, upper=upper)


def cholesky_inv(a, upper=False, *, stream=None):
    """Inverse of `L @ L.T` (or `U.T @ U`) from its Cholesky factor `a`."""
    upper = bl.bool_arg(upper, "linalg::cholesky_inv", "upper")
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::cholesky_inv")
    a = _matrix(a, "linalg::cholesky_inv", square="Cholesky inverse is only defined for "
                "square matrices.")
    return _unary(_CHOL_INV, a, a._shape, a._dtype, st, upper=upper)


def pinv(a, *, stream=None):
    """Moore-Penrose pseudo-inverse (through the SVD)."""
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::pinv")
    a = _matrix(a, "linalg::pinv")
    return _unary(_PINV, a, a._shape[:-2] + a._shape[:-3:-1], a._dtype, st)


def _det_input(a, op, st):
    _cpu_only(st, op)
    a = bl.as_array(a, op)
    if a._dtype.kind == "c":
        raise ValueError(f"[{op}] Complex inputs are not supported.")
    if a.ndim < 2:
        raise ValueError(f"[{op}] Arrays must have >= 2 dimensions. Received array with "
                         f"{a.ndim} dimensions.")
    if a._shape[-1] != a._shape[-2]:
        raise ValueError(f"[{op}] Only defined for square matrices.")
    out = a._dtype if a._dtype.kind == "f" else dt.float32
    if a._shape[-1] > 3 and out not in _REAL:  # MLX has closed forms up to 3 x 3 only
        raise ValueError(f"[linalg::lu_factor] Arrays must have type float32 or float64. "
                         f"Received array with type {a._dtype.name}.")
    return _astype(a, out, st), out


def _det_small(a, st):
    """MLX's closed form of the determinant up to 3 x 3: elementwise ops in a's dtype."""
    from .indexing import getitem
    s = st.stream
    n = a._shape[-1]
    if n == 0:
        return _sh.broadcast_to(bl.const(1.0, a._dtype), a._shape[:-2], stream=s)
    e = [[getitem(a, (Ellipsis, i, j), stream=s) for j in range(n)] for i in range(n)]
    if n == 1:
        return e[0][0]

    def cross2(i, j, k, m):  # e[i][j] * e[k][m] - e[i][m] * e[k][j]
        return _ew.subtract(_ew.multiply(e[i][j], e[k][m], stream=s),
                            _ew.multiply(e[i][m], e[k][j], stream=s), stream=s)
    if n == 2:
        return cross2(0, 0, 1, 1)
    terms = [_ew.multiply(e[0][j], cross2(1, k, 2, m), stream=s)
             for j, k, m in ((0, 1, 2), (1, 0, 2), (2, 0, 1))]
    return _ew.add(_ew.subtract(terms[0], terms[1], stream=s), terms[2], stream=s)


def _astype(a, d, st):
    from .creation import _cast
    return _cast(a, d, stream=st.stream)


def det(a, *, stream=None):
    """Determinant; integers give float32, float16 and bfloat16 keep their type."""
    st = bl.resolve(stream)
    a, out = _det_input(a, "linalg::det", st)
    if a._shape[-1] <= 3:
        return _det_small(a, st)
    return _unary(_DET, a, a._shape[:-2], out, st, result=out.np)


def slogdet(a, *, stream=None):
    """(sign, log|det|) of square matrices; a singular matrix gives (0, -inf)."""
    st = bl.resolve(stream)
    a, out = _det_input(a, "linalg::slogdet", st)
    if a._shape[-1] <= 3:
        raw = _det_small(a, st)
        return (_ew.sign(raw, stream=st.stream),
                _ew.log(_ew.abs(raw, stream=st.stream), stream=st.stream))
    shape = a._shape[:-2]
    return bl.multi(_SLOGDET, (a,), [(shape, out), (shape, out)], {"result": out.np}, st)


def qr(a, *, stream=None):
    """Reduced QR factorization: Q (m x k) and R (k x n), k = min(m, n)."""
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::qr")
    a = _matrix(a, "linalg::qr")
    *batch, m, n = a._shape
    k, batch = min(m, n), tuple(batch)
    return bl.multi(_QR, (a,), [(batch + (m, k), a._dtype), (batch + (k, n), a._dtype)],
                  bl.NO_PARAMS, st)


def svd(a, compute_uv=True, *, stream=None):
    """U, S, Vt with full matrices; only S (real) when `compute_uv=False`."""
    compute_uv = bl.bool_arg(compute_uv, "linalg::svd", "compute_uv")
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::svd")
    a = bl.as_array(a, "linalg::svd")
    if a.ndim < 2:
        raise ValueError(f"[linalg::svd] Input array must have >= 2 dimensions. Received "
                         f"array with {a.ndim} dimensions.")
    a = _matrix(a, "linalg::svd", _REAL_OR_COMPLEX)
    *batch, m, n = a._shape
    batch = tuple(batch)
    real = dt.float32 if a._dtype.kind == "c" else a._dtype
    s = (batch + (min(m, n),), real)
    if not compute_uv:
        return _unary(_SVDVALS, a, *s, st)
    return bl.multi(_SVD, (a,), [(batch + (m, m), a._dtype), s, (batch + (n, n), a._dtype)],
                  bl.NO_PARAMS, st)


def _eig_input(a, op, st):
    _cpu_only(st, op)
    return _matrix(a, op, _REAL_OR_COMPLEX, square="Only defined for square matrices.")


def _check_uplo(uplo, op):
    if bl.str_arg(uplo, op, "UPLO") not in ("L", "U"):
        raise ValueError(f"[{op}] UPLO must be 'L' or 'U'.")
    return uplo


def eig(a, *, stream=None):
    """Eigenvalues and right eigenvectors of a general square matrix, as complex64."""
    st = bl.resolve(stream)
    a = _eig_input(a, "linalg::eig", st)
    return bl.multi(_EIG, (a,), [(a._shape[:-1], dt.complex64), (a._shape, dt.complex64)],
                  bl.NO_PARAMS, st)


def eigvals(a, *, stream=None):
    """Eigenvalues of a general square matrix, as complex64."""
    st = bl.resolve(stream)
    a = _eig_input(a, "linalg::eigvals", st)
    return _unary(_EIGVALS, a, a._shape[:-1], dt.complex64, st)


def eigh(a, UPLO="L", *, stream=None):
    """Eigenvalues (ascending, real) and eigenvectors of a symmetric/Hermitian matrix."""
    st = bl.resolve(stream)
    a = _eig_input(a, "linalg::eigh", st)
    real = dt.float32 if a._dtype.kind == "c" else a._dtype
    return bl.multi(_EIGH, (a,), [(a._shape[:-1], real), (a._shape, a._dtype)],
                  {"uplo": _check_uplo(UPLO, "linalg::eigh")}, st)


def eigvalsh(a, UPLO="L", *, stream=None):
    """Eigenvalues (ascending, real) of a symmetric/Hermitian matrix."""
    st = bl.resolve(stream)
    a = _eig_input(a, "linalg::eigvalsh", st)
    real = dt.float32 if a._dtype.kind == "c" else a._dtype
    return _unary(_EIGVALSH, a, a._shape[:-1], real, st,
                  uplo=_check_uplo(UPLO, "linalg::eigvalsh"))


def lu(a, *, stream=None):
    """(P, L, U) with `a == (L @ U)[..., P, :]`; P is a uint32 row permutation."""
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::lu")
    a = _matrix(a, "linalg::lu")
    *batch, m, n = a._shape
    k, batch = min(m, n), tuple(batch)
    return bl.multi(_LU, (a,), [(batch + (m,), dt.uint32), (batch + (m, k), a._dtype),
                              (batch + (k, n), a._dtype)], bl.NO_PARAMS, st)


def lu_factor(a, *, stream=None):
    """(LU, pivots): L and U packed in one matrix and LAPACK-style 0-based row swaps."""
    st = bl.resolve(stream)
    _cpu_only(st, "linalg::lu_factor")
    a = _matrix(a, "linalg::lu_factor")
    *batch, m, n = a._shape
    return bl.multi(_LU_FACTOR, (a,), [(a._shape, a._dtype), (tuple(batch) + (min(m, n),),
                                                            dt.uint32)], bl.NO_PARAMS, st)


def _solve_inputs(a, y, op, st):
    _cpu_only(st, op)
    a, y = bl.as_array(a, op), bl.as_array(y, op)
    d = dt.promote_types(a._dtype, y._dtype)
    if d not in _REAL:
        raise ValueError(f"[{op}] Input arrays must promote to float32 or float64.  Received "
                         f"arrays with type {a._dtype.name} and {y._dtype.name}.")
    if a.ndim < 2:
        raise ValueError(f"[{op}] First input must have >= 2 dimensions. Received array with "
                         f"{a.ndim} dimensions.")
    if a._shape[-1] != a._shape[-2]:
        raise ValueError(f"[{op}] First input must be a square matrix.")
    k = y._shape[-1] if y.ndim == 1 else (y._shape[-2] if y.ndim >= 2 else -1)
    if k != a._shape[-1]:
        shown_a = ",".join(map(str, a._shape))
        shown_y = ",".join(map(str, y._shape))
        raise ValueError(f"[{op}] Last dimension of first input with shape ({shown_a}) must "
                         f"match second to last dimension of second input with shape "
                         f"({shown_y}).")
    _matrix(a, "linalg::lu" if op == "linalg::solve" else "linalg::inv")  # as MLX factors it
    if y.ndim == 1:
        shape = a._shape[:-1]
    else:
        shape = bl.broadcast_shapes(a._shape[:-2], y._shape[:-2], op=op) + y._shape[-2:]
    return _astype(a, d, st), _astype(y, d, st), shape, d


def solve(a, b, *, stream=None):
    """Solve `a @ x = y` for x (CPU streams only, as in MLX); y may be a vector."""
    st = bl.resolve(stream)
    a, y, shape, d = _solve_inputs(a, b, "linalg::solve", st)
    return bl.node(_SOLVE, (a, y), shape, d, {"vector": y.ndim == 1}, st)


def solve_triangular(a, b, *, upper=False, stream=None):
    """Solve `a @ x = y` where `a` is (read as) lower or `upper` triangular."""
    upper = bl.bool_arg(upper, "linalg::solve_triangular", "upper")
    st = bl.resolve(stream)
    a, y, shape, d = _solve_inputs(a, b, "linalg::solve_triangular", st)
    if y.ndim == 1:
        from .shape import expand_dims, squeeze
        col = expand_dims(y, -1, stream=st.stream)
        out = bl.node(_SOLVE_TRI, (a, col), a._shape[:-1] + (1,), d, {"upper": bool(upper)}, st)
        return squeeze(out, -1, stream=st.stream)
    return bl.node(_SOLVE_TRI, (a, y), shape, d, {"upper": bool(upper)}, st)


# -- norm and cross (any stream) ----------------------------------------------------------------
_MATRIX_ORDS = (1, -1, 2, -2, math.inf, -math.inf, "fro", "nuc")


def _norm(xp, x, ord, axis, keepdims, compute, result):
    x = bl.cast(x, compute)
    if axis is None:
        ones = (1,) * x.ndim
        x, axis = x.reshape(-1), 0
        if keepdims:
            return xp.asarray(xp.linalg.norm(x, ord=ord)).astype(result).reshape(ones)
    if axis == ():  # the 2-norm over no axes
        return xp.abs(x).astype(result)
    return xp.asarray(xp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)).astype(result)


def _norm_composite(x, ord, axis, keepdims, compute, result):
    """The norm from ops (NumPy's meanings of `ord`), for the transforms."""
    from .elementwise import abs as abs_, power, sqrt
    from .reduction import max as max_, min as min_, sum as sum_
    from .shape import reshape, squeeze
    x = x.astype(dt.from_numpy(compute))
    ones = (1,) * x.ndim
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
        if keepdims:
            return reshape(_norm_composite(x, ord, 0, True, compute, result), ones)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    m = abs_(x) if x._dtype.kind == "c" or ord not in (None, 2, "fro") else x
    if ord in (None, 2, "fro") and (len(axes) == 1 or ord != 2):
        r = sqrt(sum_(m * m if m._dtype.kind != "c" else abs_(m) ** 2, axes, keepdims=True))
    elif len(axes) == 2 and ord in (1, -1, math.inf, -math.inf):
        summed, picked = (axes[0], axes[1]) if ord in (1, -1) else (axes[1], axes[0])
        pick = max_ if ord > 0 else min_
        r = pick(sum_(m, summed, keepdims=True), picked, keepdims=True)
    elif len(axes) == 2:  # 2, -2, "nuc": through the singular values (no vjp, as MLX)
        from .shape import expand_dims, transpose
        rest = [i for i in range(x.ndim) if i not in axes]
        sv = svd(transpose(x, rest + list(axes)), compute_uv=False)
        r = expand_dims({2: max_, -2: min_, "nuc": sum_}[ord](sv, -1), tuple(sorted(axes)))
    elif ord == math.inf:
        r = max_(m, axes, keepdims=True)
    elif ord == -math.inf:
        r = min_(m, axes, keepdims=True)
    elif ord == 0:
        r = sum_((m != 0).astype(m._dtype), axes, keepdims=True)
    elif ord == 1:
        r = sum_(m, axes, keepdims=True)
    else:
        r = power(sum_(power(m, ord), axes, keepdims=True), 1.0 / ord)
    if not keepdims:
        r = squeeze(r, axes)
    return r.astype(dt.from_numpy(result))


_NORM = bl.make("linalg.norm", _norm, **via(_norm_composite))


def _norm_axes(a, ord, axis, op):
    if axis is None:
        if ord is None:
            return None
        if a.ndim > 2:
            raise ValueError(f"[{op}] Received too many axes for norm.")
        axis = tuple(range(a.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if isinstance(ord, str) and len(axes) != 2:
        raise ValueError(f"[{op}] Norm '{ord}' only supported for matrices, but received "
                         f"{len(axes)} axis/axes.")
    if len(axes) > 2 or (not axes and ord is not None):
        raise ValueError(f"[{op}] Received too many axes for norm.")
    norm_axes = tuple(bl.normalize_axis(x, a.ndim, op) for x in axes)
    if len(set(norm_axes)) != len(norm_axes):
        raise ValueError(f"[{op}] Received duplicate axes {axes}.")
    if len(axes) == 2 and ord is not None and ord not in _MATRIX_ORDS:
        shown = f"'{ord}'" if isinstance(ord, str) else f"{ord:g}"
        raise ValueError(f"[{op}] Invalid ord {'value ' if isinstance(ord, str) else ''}"
                         f"{shown} for matrix norm.")
    return norm_axes


def _check_norm_reduction(a, ord, axes, keepdims):
    """MLX's norms with a max or min reduce with it: over an empty axis, it raises."""
    if axes is None or isinstance(ord, str) or ord is None or abs(ord) not in (1, 2, math.inf):
        return
    if len(axes) == 1:
        if abs(ord) != math.inf:
            return
        size, shown = a._shape[axes[0]], axes[0]
    elif abs(ord) == 2:  # over the singular values
        size, shown = min(a._shape[i] for i in axes), a.ndim - 2
    else:  # 1: over the column sums, inf: over the row sums
        kept, gone = axes if ord in (math.inf, -math.inf) else axes[::-1]
        size, shown = a._shape[kept], kept - (not keepdims and kept > gone)
    if size == 0:
        name = "max" if ord > 0 else "min"
        raise ValueError(f"[{name}] Cannot {name} reduce over axis {shown} with size 0.")


def _norm_result(dtype, ord, axes):
    """float32 for integers; complex input keeps complex64 (as MLX) unless the norm is a
    2-norm of a vector, Frobenius or nuclear."""
    if dtype.kind != "c":
        return dt.float32 if dtype.kind in "biu" else dtype
    real = ord in (None, "fro", "nuc") or (ord == 2 and len(axes) == 1)
    return dt.float32 if real else dtype


def norm(a, /, ord=None, axis=None, keepdims=False, *, stream=None):
    """Vector or matrix norm with NumPy's `ord` meanings; integers give float32."""
    op = "linalg::norm"
    keepdims = bl.bool_arg(keepdims, op, "keepdims")
    st = bl.resolve(stream)
    a = bl.as_array(a, op)
    if ord is not None and not isinstance(ord, (str, numbers.Real)):
        raise TypeError(f"[{op}] ord must be None, a number or a string.")
    axes = _norm_axes(a, ord, axis, op)
    _check_norm_reduction(a, ord, axes, keepdims)
    if axes is not None and len(axes) == 2 and ord in (2, -2, "nuc"):
        _cpu_only(st, "linalg::svd")
        _matrix(a, "linalg::svd", _REAL_OR_COMPLEX)
    out = _norm_result(a._dtype, ord, axes)
    if a._dtype in (dt.float16, dt.bfloat16):  # MLX works in the half type, each op rounding
        from ..stream import stream as _on
        with _on(st.stream):
            return _norm_composite(a, ord, None if axes is None else
                                   (axes[0] if len(axes) == 1 else axes), keepdims, a._dtype.np,
                                   out.np)
    compute = a._dtype if a._dtype in _REAL_OR_COMPLEX else dt.float32
    red = tuple(range(a.ndim)) if axes is None else axes
    shape = tuple(1 if i in red else n for i, n in enumerate(a._shape)) if keepdims else \
        tuple(n for i, n in enumerate(a._shape) if i not in red)
    ax = None if axes is None else (axes[0] if len(axes) == 1 else axes)
    return bl.node(_NORM, (a,), shape, out, {"ord": ord, "axis": ax, "keepdims": bool(keepdims),
                                             "compute": compute.np, "result": out.np}, st)


def _cross(xp, x, y, axis, dtype):
    work = xp.int8 if dtype == xp.bool_ else dtype  # bool minus is xor, as in MLX
    nd = max(x.ndim, y.ndim)
    x, y = (bl.cast(v, work).reshape((1,) * (nd - v.ndim) + v.shape) for v in (x, y))
    x, y = (xp.moveaxis(v, axis, -1) for v in (x, y))
    x, y = (v if v.shape[-1] == 3 else xp.concatenate([v, xp.zeros_like(v[..., :1])], -1)
            for v in (x, y))
    x1, x2, x3 = x[..., 0], x[..., 1], x[..., 2]
    y1, y2, y3 = y[..., 0], y[..., 1], y[..., 2]
    out = xp.stack([x2 * y3 - x3 * y2, x3 * y1 - x1 * y3, x1 * y2 - x2 * y1], -1)
    return bl.cast(xp.moveaxis(out, -1, axis), dtype)


def _cross_composite(x, y, axis, dtype):
    from .shape import concatenate, moveaxis, stack
    d = dt.from_numpy(dtype)
    nd = max(x.ndim, y.ndim)
    x, y = (v.astype(d) for v in (x, y))
    x, y = (moveaxis(v.reshape((1,) * (nd - v.ndim) + v._shape), axis, -1) for v in (x, y))
    x, y = (v if v._shape[-1] == 3 else concatenate([v, v[..., :1] * 0], -1) for v in (x, y))
    x1, x2, x3 = x[..., 0], x[..., 1], x[..., 2]
    y1, y2, y3 = y[..., 0], y[..., 1], y[..., 2]
    return moveaxis(stack([x2 * y3 - x3 * y2, x3 * y1 - x1 * y3, x1 * y2 - x2 * y1], -1), -1,
                    axis)


_CROSS = bl.make("linalg.cross", _cross, **via(_cross_composite))


def cross(a, b, axis=-1, *, stream=None):
    """Cross product of 3-vectors (2-vectors get a zero third component) along `axis`."""
    op = "linalg::cross"
    st = bl.resolve(stream)
    x, y, d = bl.promote_pair(a, b, op)
    x, y = bl.as_array(x, op), bl.as_array(y, op)
    for v in (x, y):  # MLX checks the axis against each input's own dimensions
        if v._shape[bl.normalize_axis(axis, v.ndim, op)] not in (2, 3):
            raise ValueError(f"[{op}] The specified axis must have size 2 or 3.")
    nd = max(x.ndim, y.ndim)
    xs, ys = ([1] * (nd - v.ndim) + list(v._shape) for v in (x, y))
    ax = bl.normalize_axis(axis, nd, op)
    if xs[ax] not in (2, 3) or ys[ax] not in (2, 3):
        raise ValueError(f"[{op}] The specified axis must have size 2 or 3.")
    if d == dt.bool_ and (xs[ax] == 2) != (ys[ax] == 2):
        raise ValueError("[negative] Not supported for bool, use logical_not instead.")
    xs[ax] = ys[ax] = 3
    shape = bl.broadcast_shapes(tuple(xs), tuple(ys), op=op)
    return bl.node(_CROSS, (x, y), shape, d, {"axis": ax, "dtype": d.np}, st)


__all__ = ["matmul"]
