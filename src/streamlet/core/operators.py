"""Python operators on arrays, each mapped to the op it stands for."""
from __future__ import annotations

from . import ops
from .array import alias, array


def _binary(fn, reflected=False, inplace=False):
    if inplace:
        def method(self, other):
            if type(other) in _OPERANDS or _operand(other):
                return self._rebind(fn(self, other))
            return NotImplemented
    elif reflected:
        def method(self, other):
            if type(other) in _OPERANDS or _operand(other):
                return fn(other, self)
            return NotImplemented
    else:
        def method(self, other):
            if type(other) in _OPERANDS or _operand(other):
                return fn(self, other)
            return NotImplemented
    return method


_OPERANDS = (array, float, int, complex, bool)


def _operand(x):
    return isinstance(x, _OPERANDS) or hasattr(x, "__array__")


# `&` and `|` are bitwise as in MLX: on two bool arrays that is the logical op, and
# `bool & int32` promotes to int32 instead of turning the int array into truth values.
_and, _or = ops.bitwise_and, ops.bitwise_or
_BINARY = {
    "add": ops.add, "sub": ops.subtract, "mul": ops.multiply, "truediv": ops.divide,
    "floordiv": ops.floor_divide, "mod": ops.remainder, "pow": ops.power,
    "matmul": ops.matmul, "and": _and, "or": _or, "xor": ops.bitwise_xor,
    "lshift": ops.left_shift, "rshift": ops.right_shift,
}
_COMPARE = {"eq": ops.equal, "ne": ops.not_equal, "lt": ops.less, "le": ops.less_equal,
            "gt": ops.greater, "ge": ops.greater_equal}


def install():
    for name, fn in _BINARY.items():
        setattr(array, f"__{name}__", _binary(fn))
        setattr(array, f"__r{name}__", _binary(fn, reflected=True))
        setattr(array, f"__i{name}__", _binary(fn, inplace=True))
    for name, fn in _COMPARE.items():
        setattr(array, f"__{name}__", _binary(fn))
    array.__hash__ = object.__hash__
    array.__neg__ = lambda self: ops.negative(self)
    array.__pos__ = alias
    array.__abs__ = lambda self: ops.abs(self)
    array.__invert__ = lambda self: ops.bitwise_invert(self)
    array.__getitem__ = lambda self, index: ops.getitem(self, index)
    array.__divmod__ = lambda self, other: (ops.floor_divide(self, other),
                                           ops.remainder(self, other))
    for name in ("astype", "reshape", "transpose", "swapaxes", "flatten", "squeeze",
                 "sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin",
                 "all", "any", "logsumexp", "abs", "square", "sqrt", "rsqrt", "exp", "log",
                 "log1p", "log2", "log10", "sin", "cos", "round", "split", "expand_dims"):
        setattr(array, name, _method(getattr(ops, name)))
    array.T = property(lambda self: ops.transpose(self))
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
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return fn(self, shape if shape != () or fn is not ops.transpose else None,
                  stream=stream)
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
    array.mT = property(lambda self: ops.matrix_transpose(self))
    array.real = property(lambda self: ops.real(self))
    array.imag = property(lambda self: ops.imag(self))
    array.at = property(ArrayAt)
    array.__setitem__ = assign
    array.__div__ = array.__truediv__
    array.__rdiv__ = array.__rtruediv__
    array.__bytes__ = lambda self: self._host().tobytes()
    array.__array_namespace__ = lambda self, *, api_version=None: _namespace()


def _namespace():
    import streamlet.core
    return streamlet.core
