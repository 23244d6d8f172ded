"""`mx.linalg`: linear algebra (CPU streams, as in MLX)."""
from .ops.linalg import inv, solve  # noqa: F401
