"""`mx.linalg`: linear algebra. Factorizations run on CPU streams only, as in MLX."""
from .ops.linalg import (cholesky, cholesky_inv, cross, det, eig, eigh, eigvals,  # noqa: F401
                         eigvalsh, inv, lu, lu_factor, norm, pinv, qr, slogdet, solve,
                         solve_triangular, svd, tri_inv)
