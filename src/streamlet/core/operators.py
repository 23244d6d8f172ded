"""Python operators on arrays, each mapped to the op it stands for, as MLX 0.32.4 has them.

An operand is an array, a Python scalar, a NumPy array or scalar, another object with
the buffer protocol or DLPack, or an object with `__mlx_array__`.  Anything else raises
ValueError naming the operation (`Cannot perform addition on an mlx.core.array and
str`), except that `==` and `!=` give False and True; None raises TypeError.  As in MLX
there are no reflected bitwise operators, no `divmod` and no `__array_priority__`, so
`numpy_array + array` is NumPy's operation (on a view of the array) and gives NumPy's
result, as MLX does.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as dt
from . import ops
from .array import alias, array, to_array
from .convert import from_buffer, is_buffer, type_name

_SCALARS = (bool, int, float, complex)
_TAKEN = (array, *_SCALARS)
_NUMERIC = frozenset("biufc")


def _operand(x, what):
    """`x` as the ops take it, or MLX's error for an operand an array cannot meet."""
    if type(x) in _SCALARS or isinstance(x, _TAKEN):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        # (an array of the other byte order is no operand to MLX: its cast fails)
        if (x.dtype.kind in _NUMERIC or x.dtype.name == "bfloat16") and \
                (x.dtype.isnative or x.dtype.itemsize == 1) and \
                (isinstance(x, np.generic) or dt.numpy_known(x.dtype)):  # no float128 array
            return x
    elif hasattr(x, "__mlx_array__"):
        return x.__mlx_array__()
    elif x is None:
        raise TypeError(f"Cannot perform {what} on an mlx.core.array and NoneType.")
    elif is_buffer(x):
        return to_array(from_buffer(x))
    raise ValueError(f"Cannot perform {what} on an mlx.core.array and {type_name(x)}")


def _binary(fn, what):
    def method(self, other):
        return fn(self, _operand(other, what))
    return method


def _inexact(x) -> bool:
    if isinstance(x, array):
        return x._dtype.kind in "fc"
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind in "fc" or x.dtype.name == "bfloat16"
    return type(x) in (float, complex)


def _integral(fn, what):
    """A bitwise operator's op: MLX's operators refuse a float operand with ValueError (the
    functions, given float inputs, raise RuntimeError)."""
    def op(a, b):
        for x, y in ((a, b), (b, a)):  # MLX converts an int operand first: one beyond int64
            if type(x) is int and _inexact(y):  # fails there (RuntimeError), not here
                dt.weak_scalar_dtype(y._dtype, x)
        if _inexact(a) or _inexact(b):
            raise ValueError(f"Floating point types not allowed with {what}.")
        return fn(a, b)
    return op


def _reflected(fn, what):
    def method(self, other):
        return fn(_operand(other, what), self)
    return method


def _inplace(fn, what):
    def method(self, other):
        return self._rebind(fn(self, _operand(other, "inplace " + what)))
    return method


def _equality(fn, missing):
    def method(self, other):
        try:
            other = _operand(other, "comparison")
        except ValueError:
            return missing
        return fn(self, other)
    return method


def _itruediv(self, other):
    other = _operand(other, "inplace division")
    if self._dtype.kind not in "fc":
        raise ValueError("In place division cannot cast to non-floating point type.")
    return self._rebind(ops.divide(self, other))


def _matmul(self, other):
    if not isinstance(other, array):
        raise TypeError(f"[matmul] Expected an array, got {type_name(other)}.")
    return ops.matmul(self, other)


def _invert(self):
    if _inexact(self):
        raise ValueError("Floating point types not allowed with bitwise inversion.")
    return ops.bitwise_invert(self)


def _imatmul(self, other):
    return self._rebind(_matmul(self, other))


# name: (op, what MLX calls it, has a reflected form); the bitwise ones take no floats
_BITWISE = frozenset(("and", "or", "xor", "lshift", "rshift"))
_BINARY = {
    "add": (ops.add, "addition", True), "sub": (ops.subtract, "subtraction", True),
    "mul": (ops.multiply, "multiplication", True), "truediv": (ops.divide, "division", True),
    "floordiv": (ops.floor_divide, "floor division", True),
    "mod": (ops.remainder, "modulus", True), "pow": (ops.power, "power", True),
    # `&` and `|` are bitwise as in MLX: on two bool arrays that is the logical op, and
    # `bool & int32` promotes to int32 instead of turning the int array into truth values
    "and": (ops.bitwise_and, "bitwise and", False), "or": (ops.bitwise_or, "bitwise or", False),
    "xor": (ops.bitwise_xor, "bitwise xor", False),
    "lshift": (ops.left_shift, "left shift", False),
    "rshift": (ops.right_shift, "right shift", False),
}
_COMPARE = {"lt": (ops.less, "less than"), "le": (ops.less_equal, "less than or equal"),
            "gt": (ops.greater, "greater than"),
            "ge": (ops.greater_equal, "greater than or equal")}


def install():
    for name, (fn, what, reflected) in _BINARY.items():
        if name in _BITWISE:
            fn = _integral(fn, what)
        setattr(array, f"__{name}__", _binary(fn, what))
        setattr(array, f"__i{name}__", _inplace(fn, what))
        if reflected:
            setattr(array, f"__r{name}__", _reflected(fn, what))
    array.__itruediv__ = _itruediv
    for name, (fn, what) in _COMPARE.items():
        setattr(array, f"__{name}__", _binary(fn, what))
    array.__eq__ = _equality(ops.equal, False)
    array.__ne__ = _equality(ops.not_equal, True)
    array.__matmul__, array.__imatmul__ = _matmul, _imatmul
    array.__hash__ = object.__hash__
    array.__neg__ = lambda self: ops.negative(self)
    array.__pos__ = alias
    array.__abs__ = lambda self: ops.abs(self)
    array.__invert__ = _invert
    array.__getitem__ = lambda self, index: ops.getitem(self, index)
    for name in ("astype", "reshape", "transpose", "swapaxes", "flatten", "squeeze",
                 "sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin",
                 "all", "any", "logsumexp", "abs", "square", "sqrt", "rsqrt", "exp", "log",
                 "log1p", "log2", "log10", "sin", "cos", "round", "split"):
        setattr(array, name, _method(getattr(ops, name)))
    array.T = property(lambda self: ops.transpose(self), doc="The array with its axes reversed.")
    _install_breadth()


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _shape_args(fn):
    """`a.reshape(2, 3)` as well as `a.reshape((2, 3))` (and likewise transpose)."""
    def method(self, *shape, stream=None):
        if not shape and fn is ops.transpose:  # `a.transpose()`, not `a.transpose(())`
            return fn(self, None, stream=stream)
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return fn(self, shape, stream=stream)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _install_breadth():
    from .ops.updates import ArrayAt, assign
    for name in ("conj", "cummax", "cummin", "cumprod", "cumsum", "logcumsumexp", "diag",
                 "diagonal", "moveaxis", "reciprocal", "view"):
        setattr(array, name, _method(getattr(ops, name)))
    array.reshape = _shape_args(ops.reshape)
    array.transpose = _shape_args(ops.transpose)
    array.mT = property(lambda self: ops.matrix_transpose(self),
                        doc="The array with its last two axes swapped.")
    array.real = property(lambda self: ops.real(self), doc="The real part.")
    array.imag = property(lambda self: ops.imag(self), doc="The imaginary part.")
    array.at = property(ArrayAt)
    array.__setitem__ = assign
    array.__div__ = array.__truediv__
    array.__rdiv__ = array.__rtruediv__
    array.__bytes__ = lambda self: self._host().tobytes()
    array.__array_namespace__ = lambda self, *, api_version=None: _namespace()


def _namespace():
    import streamlet.core
    return streamlet.core
