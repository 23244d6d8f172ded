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
from .arrange import as_strided, contiguous, diag, diagonal, flip, pad, repeat, roll, tile, \
    tri, tril, triu, view  # noqa: F401
from .creation import asarray, bartlett, blackman, can_cast, empty, empty_like, hamming, \
    hanning, meshgrid, result_type  # noqa: F401
from .elementwise import ALIASES, divmod, nan_to_num  # noqa: F401
from .indexing import slice, take, take_along_axis  # noqa: F401
from .products import addmm, block_masked_mm, convolve, einsum, einsum_path, gather_mm, \
    hadamard_transform, inner, kron, matrix_norm, outer, segmented_mm, tensordot, trace, \
    vecdot  # noqa: F401
from .reduction import count_nonzero, minmax, softmax  # noqa: F401
from .scan import SCANS, cumulative_prod, cumulative_sum, diff  # noqa: F401
from .shape import atleast_1d, atleast_2d, atleast_3d, concat, matrix_transpose, moveaxis, \
    newaxis, permute_dims, unflatten, unstack  # noqa: F401
from .sorting import argpartition, argsort, median, partition, searchsorted, sort, topk, \
    unique  # noqa: F401
from .updates import depends, put_along_axis, slice_update  # noqa: F401

_scan = __import__(__name__ + ".scan", fromlist=["x"])
globals().update({name: getattr(_elementwise, name) for name in ALIASES})
globals().update({name: getattr(_scan, name) for name in SCANS})
from .conv import conv1d, conv2d, conv3d, conv_general, conv_transpose1d, conv_transpose2d, \
    conv_transpose3d  # noqa: F401
from .quantized import dequantize, from_fp8, gather_mm, gather_qmm, qqmm, quantize, \
    quantized_matmul, to_fp8  # noqa: F401,F811 (gather_mm: replaces products' version)

# What `from .ops import *` gives streamlet.core: the op builders (those the tables make and
# those imported above), not the tables, helpers and modules this package also holds.
__all__ = sorted({*UNARY, *BINARY, *ALIASES, *REDUCTIONS, *SCANS,
    "AxisError", "addmm", "allclose", "arange", "argmax", "argmin", "argpartition",
    "argsort", "array_equal", "as_strided", "asarray", "astype", "atleast_1d", "atleast_2d",
    "atleast_3d", "bartlett", "blackman", "block_masked_mm", "broadcast_arrays",
    "broadcast_shapes", "broadcast_to", "can_cast", "clip", "concat", "concatenate",
    "contiguous", "conv1d", "conv2d", "conv3d", "conv_general", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolve", "count_nonzero", "cumulative_prod",
    "cumulative_sum", "depends", "dequantize", "diag", "diagonal", "diff", "divmod", "e",
    "einsum", "einsum_path", "empty", "empty_like", "euler_gamma", "expand_dims", "eye",
    "flatten", "flip", "from_fp8", "full", "full_like", "gather_mm", "gather_qmm",
    "hadamard_transform", "hamming", "hanning", "identity", "inf", "inner", "isclose",
    "kron", "linspace", "matmul", "matrix_norm", "matrix_transpose", "median", "meshgrid",
    "minmax", "moveaxis", "nan", "nan_to_num", "newaxis", "ones", "ones_like", "outer",
    "pad", "partition", "permute_dims", "pi", "put_along_axis", "qqmm", "quantize",
    "quantized_matmul", "repeat", "reshape", "result_type", "roll", "round", "searchsorted",
    "segmented_mm", "slice", "slice_update", "softmax", "sort", "split", "squeeze", "stack",
    "std", "swapaxes", "take", "take_along_axis", "tensordot", "tile", "to_fp8", "topk",
    "trace", "transpose", "tri", "tril", "triu", "unflatten", "unique", "unstack", "var",
    "vecdot", "view", "where", "zeros", "zeros_like"})
