"""`mx.linalg`: linear algebra. Factorizations run on CPU streams only, as in MLX.

>>> q, r = mx.linalg.qr(mx.array([[3.0, 1.0], [4.0, 2.0]]), stream=mx.cpu)
>>> mx.allclose(q @ r, mx.array([[3.0, 1.0], [4.0, 2.0]])).item()
True
>>> mx.linalg.norm(mx.array([3, 4]))
array(5, dtype=float32)
"""
from .. import _public
from .ops.linalg import (cholesky, cholesky_inv, cross, det, eig, eigh, eigvals,  # noqa: F401
                         eigvalsh, inv, lu, lu_factor, norm, pinv, qr, slogdet, solve,
                         solve_triangular, svd, tri_inv)

__all__ = ["cholesky", "cholesky_inv", "cross", "det", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lu", "lu_factor", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_triangular", "svd", "tri_inv"]


def __dir__():
    return _public.names(globals())
