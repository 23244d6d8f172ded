"""Matrix products and the linear algebra the foundation needs (inv, solve)."""
from __future__ import annotations

import numpy as np

from . import build as b
from .build import dt


def _matmul(xp, x, y, dtype):
    return xp.matmul(b.cast(x, dtype), b.cast(y, dtype))


_MATMUL = b.make("matmul", _matmul)


def _check_inexact(op, da, db, d):
    if d.kind not in "fc":
        raise ValueError(f"[{op}] Only inexact types are supported but {da.name} and {db.name} "
                         f"were provided which results in {d.name}, which is not a floating "
                         "point type.")


def matmul(a, b_, /, *, stream=None):
    """Matrix product with NumPy's rules for 1-D inputs and batch broadcasting."""
    st = b.resolve(stream)
    x, y = b.as_array(a, "matmul"), b.as_array(b_, "matmul")
    d = dt.promote_types(x._dtype, y._dtype)
    _check_inexact("matmul", x._dtype, y._dtype, d)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("[matmul] Got 0 dimension input. Inputs must have at least one "
                         "dimension.")
    xs = (1,) + x._shape if x.ndim == 1 else x._shape
    ys = y._shape + (1,) if y.ndim == 1 else y._shape
    if xs[-1] != ys[-2]:
        raise ValueError(f"[matmul] Last dimension of first input with shape {x._shape} must "
                         f"match second to last dimension of second input with shape "
                         f"{y._shape}.")
    batch = b.broadcast_shapes(xs[:-2], ys[:-2], op="matmul")
    shape = batch + (xs[-2],) * (x.ndim > 1) + (ys[-1],) * (y.ndim > 1)
    return b.node(_MATMUL, (x, y), shape, d, {"dtype": d.np}, st)


def _float_square(a, op):
    a = b.as_array(a, op)
    if a.ndim < 2 or a._shape[-1] != a._shape[-2]:
        raise ValueError(f"[{op}] Expected a square matrix (or a batch of them), got shape "
                         f"{a._shape}.")
    if a._dtype.kind not in "f":
        raise ValueError(f"[{op}] Arrays must have type float32 or float64, got {a._dtype.name}.")
    return a


def _cpu_only(st, op):
    if st.stream.device.type.value != 0:
        raise ValueError(f"[{op}] This op is not yet supported on the GPU. Use "
                         "stream=mx.cpu instead.")


def _linalg(fn, what):
    def kernel(xp, *args):
        try:
            return fn(xp, *args)
        except np.linalg.LinAlgError as exc:
            raise RuntimeError(f"{what}: {exc}") from None
    return kernel


_INV = b.make("linalg.inv", _linalg(lambda xp, a: xp.linalg.inv(a),
                                    "[linalg.inv] The matrix is singular"))
_SOLVE = b.make("linalg.solve", _linalg(lambda xp, a, y: xp.linalg.solve(a, y),
                                        "[linalg.solve] The matrix is singular"))


def inv(a, /, *, stream=None):
    """Inverse of a square matrix (CPU streams only, as in MLX).

    A singular matrix fails when the op runs: eval raises RuntimeError.
    """
    st = b.resolve(stream)
    _cpu_only(st, "linalg.inv")
    a = _float_square(a, "linalg.inv")
    return b.node(_INV, (a,), a._shape, a._dtype, b.NO_PARAMS, st)


def solve(a, y, /, *, stream=None):
    """Solve a @ x = y for x (CPU streams only, as in MLX)."""
    st = b.resolve(stream)
    _cpu_only(st, "linalg.solve")
    a = _float_square(a, "linalg.solve")
    y = b.as_array(y, "linalg.solve")
    d = dt.promote_types(a._dtype, y._dtype)
    if y.ndim == 1:
        if y._shape[0] != a._shape[-1]:
            raise ValueError(f"[linalg.solve] Incompatible shapes {a._shape} and {y._shape}.")
        shape = a._shape[:-1]
        y2 = y
    else:
        if y._shape[-2] != a._shape[-1]:
            raise ValueError(f"[linalg.solve] Incompatible shapes {a._shape} and {y._shape}.")
        shape = b.broadcast_shapes(a._shape[:-2], y._shape[:-2], op="linalg.solve") + \
            y._shape[-2:]
        y2 = y
    from .creation import astype
    return b.node(_SOLVE, (astype(a, d, stream=st.stream), astype(y2, d, stream=st.stream)),
                  shape, d, b.NO_PARAMS, st)
