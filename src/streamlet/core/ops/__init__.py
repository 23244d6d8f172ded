"""Op builders: each computes the output shape and dtype, then makes one graph node."""
from .build import AxisError, broadcast_shapes  # noqa: F401
from .creation import *  # noqa: F401,F403
from .creation import arange, astype, eye, full, identity, linspace, ones, ones_like, zeros, \
    zeros_like, full_like  # noqa: F401
from .elementwise import *  # noqa: F401,F403
from .elementwise import BINARY, UNARY, allclose, array_equal, clip, isclose, round, where  # noqa
from .elementwise import e, euler_gamma, inf, nan, pi  # noqa: F401
from .indexing import getitem  # noqa: F401
from .linalg import matmul  # noqa: F401
from .reduction import REDUCTIONS, argmax, argmin, std, var  # noqa: F401
from .reduction import *  # noqa: F401,F403
from .shape import broadcast_arrays, broadcast_to, concatenate, expand_dims, flatten, \
    reshape, split, squeeze, stack, swapaxes, transpose  # noqa: F401

_elementwise = __import__(__name__ + ".elementwise", fromlist=["x"])
_reduction = __import__(__name__ + ".reduction", fromlist=["x"])
globals().update({name: getattr(_elementwise, name) for name in (*UNARY, *BINARY)})
globals().update({name: getattr(_reduction, name) for name in REDUCTIONS})
