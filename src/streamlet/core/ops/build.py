"""What every op builder shares: input conversion, shape rules, axes, dtype checks."""
from __future__ import annotations

import numbers
import operator

import numpy as np

from .. import dtypes as dt
from ..array import alias, array, const, node, node_of, wrap  # noqa: F401 (node_of, wrap: rules)
from ..errors import BadType, called, rename  # noqa: F401 (rename: for the op factories)
from ..graph import GpuKernel, Primitive
from ..stream import resolve

NO_PARAMS: dict = {}


class AxisError(ValueError, IndexError):
    """An invalid axis: a ValueError as the issue asks, and an IndexError as MLX raises."""


class BadIndex(ValueError, IndexError):
    """An index that does not fit the array: MLX's ValueError, and NumPy's IndexError."""


_PY_SCALARS = (float, int, bool, complex)
_INT64 = (-2**63, 2**63 - 1)  # the Python ints an operand may be (dt.check_int64)


def plain_ints(seq) -> bool:
    """Whether `seq` (a tuple) is not empty and every item a Python int (not a bool, not a
    NumPy int)."""
    for n in seq:
        if type(n) is not int:
            return False
    return bool(seq)


def is_scalar(x) -> bool:
    return type(x) in _PY_SCALARS or (isinstance(x, numbers.Number)
                                      and not isinstance(x, np.ndarray))


_consts: dict = {}  # (type, value, dtype) -> a shared scalar input; values are immutable


def scalar(value, dtype) -> array:
    """The scalar input `value` as `dtype`, shared between ops that use the same one.

    Keys compare by value, and 0.0 == -0.0 (and 0j == -0j): zeros are keyed by their
    repr too, so each sign keeps its own constant; a NaN never equals a key.
    """
    key = (type(value), value, dtype) if value else (type(value), repr(value), dtype)
    c = _consts.get(key)
    if c is None:
        if len(_consts) > 4096:
            _consts.clear()
        c = _consts[key] = const(value, dtype)
    return c


def as_array(x, op: str) -> array:
    """An array from an array, a Python scalar, a list or a NumPy array."""
    if type(x) is array:
        return x
    if isinstance(x, array):
        return x
    if isinstance(x, (bool, numbers.Number, list, tuple, np.ndarray, np.generic)):
        if isinstance(x, (np.ndarray, np.generic)) and not dt.numpy_known(x.dtype) and \
                not (isinstance(x, numbers.Number) and x.ndim == 0):  # str, object, float128
            raise ValueError(f"Invalid type {type(x).__name__} received in array "
                             "initialization.")  # MLX's words (a float128 scalar is a float)
        try:
            return array(x)
        except OverflowError as e:  # an int beyond int64: say which op it was given to
            raise OverflowError(f"[{called(op)}] {str(e).removeprefix('[array] ')}") from None
    raise BadType(f"[{called(op)}] Expected an array or a scalar, got {type(x).__name__}.")


def sequence(xs, op: str):
    """The items of a list or tuple argument (`concatenate(arrays)`); other values raise."""
    if isinstance(xs, (list, tuple)):
        return xs
    if isinstance(xs, (str, bytes, dict, array)) or not hasattr(xs, "__iter__"):
        raise BadType(f"[{called(op)}] Expected a list of arrays, got {type(xs).__name__}.")
    return list(xs)


def promote_pair(a, b, op: str):
    """Two op inputs and their common dtype, Python scalars taking the array's type (weakly)."""
    if type(a) is array:
        if type(b) is array:
            da, db = a._dtype, b._dtype
            return a, b, da if da is db else dt.promote_types(da, db)
        if type(b) is float and a._dtype.kind in "fc":  # the common `x * 0.5`
            d = a._dtype
            return a, scalar(b, d), d
        if is_scalar(b):
            d = _weak(a._dtype, b, op)
            return a, scalar(b, d), d
        b = as_array(b, op)
        return a, b, dt.promote_types(a._dtype, b._dtype)
    if type(b) is array and is_scalar(a):
        d = _weak(b._dtype, a, op)
        return scalar(a, d), b, d
    a, b = as_array(a, op), as_array(b, op)
    return a, b, dt.promote_types(a._dtype, b._dtype)


def promote_many(values, op: str):
    """Arrays and scalars to a common dtype, for ops with several inputs (where, concatenate)."""
    arrays = [v for v in values if isinstance(v, array)]
    if arrays:
        d = arrays[0]._dtype
        for a in arrays[1:]:
            d = dt.promote_types(d, a._dtype)
        for v in values:
            if not isinstance(v, array):
                if is_scalar(v):
                    d = _weak(d, v, op)
                else:
                    d = dt.promote_types(d, as_array(v, op)._dtype)
    else:
        converted = [as_array(v, op) for v in values]
        d = converted[0]._dtype
        for a in converted[1:]:
            d = dt.promote_types(d, a._dtype)
    out = [v if isinstance(v, array) else (scalar(v, d) if is_scalar(v) else as_array(v, op))
           for v in values]
    return out, d


def _weak(d, value, op):
    if d.kind in "fc" and (type(value) is float or
                           type(value) is int and _INT64[0] <= value <= _INT64[1]):
        return d
    try:
        return dt.weak_scalar_dtype(d, value)
    except TypeError:
        raise BadType(f"[{called(op)}] Cannot combine an array with a "
                      f"{type(value).__name__}.") from None
    except (RuntimeError, ValueError) as e:  # an int the dtype cannot hold: name the op
        raise type(e)(f"[{called(op)}] {e}") from None


def broadcast_shapes(*shapes, op: str = "broadcast_shapes") -> tuple:
    """The shape arrays of these shapes broadcast to: `broadcast_shapes((2, 1), (3,)) == (2, 3)`."""
    if not shapes:
        raise ValueError(f"[{op}] No input shapes given.")
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        off = len(out) - len(s)
        for i, n in enumerate(s):
            m = out[off + i]
            if m != n:
                if m == 1:
                    out[off + i] = n
                elif n != 1:
                    shown = " and ".join(str(tuple(x)) for x in shapes)
                    raise ValueError(f"[{called(op)}] Shapes {shown} cannot be broadcast.")
    return tuple(out)


def broadcast_pair(s, t, op: str) -> tuple:
    """`broadcast_shapes(s, t, op=op)` for two arrays' shapes, equal shapes and a
    scalar's () taken without the loop."""
    return s if s == t or not t else t if not s else broadcast_shapes(s, t, op=op)


def ints_of(x):
    """An int argument (or a list or tuple of them) as given, but an integer array as the
    int (0-d) or tuple of ints (1-D) it holds, also inside a list or tuple: MLX's binding
    reads `roll(a, mx.array(1))`, `pad(a, [(mx.array(1), 2)])` and `zeros([mx.array(2)])`
    so."""
    if type(x) is int or x is None:
        return x
    if isinstance(x, array) and x.dtype.kind in "iu" and x.ndim <= 1:
        return int(x.item()) if x.ndim == 0 else tuple(int(v) for v in x.tolist())
    if isinstance(x, (list, tuple)):
        return type(x)(ints_of(v) for v in x)
    return x


def is_sequence(x) -> bool:
    """Whether `x` is a sequence as MLX's binding takes one for `Sequence[int]`: a list, a
    tuple, a range, a NumPy array... (not a generator, set, dict, string or bytes)."""
    return isinstance(x, (list, tuple)) or (
        hasattr(type(x), "__getitem__") and hasattr(type(x), "__len__")
        and not isinstance(x, (str, bytes, dict)))


def seq_arg(value, op: str, what: str):
    """A `Sequence[int]` argument, returned as given when `is_sequence`, else TypeError
    (a generator or a set is no sequence to MLX's binding)."""
    if is_sequence(value):
        return value
    raise TypeError(f"[{called(op)}] {what} must be a sequence of ints, got "
                    f"{type(value).__name__}.")


def check_shape(shape, op: str) -> tuple:
    """A shape as a tuple of ints; other entries raise TypeError, negative sizes ValueError."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if type(shape) is not tuple and is_sequence(shape):
        shape = tuple(shape)
    if not isinstance(shape, tuple) or not all(isinstance(n, (int, np.integer)) for n in shape):
        if isinstance(shape, tuple):  # 0-d integer arrays among the entries
            shape = tuple(ints_of(n) for n in shape)
            if all(isinstance(n, (int, np.integer)) for n in shape):
                return check_shape(shape, op)
        raise TypeError(f"[{called(op)}] Expected a shape (int or sequence of ints), "
                        f"got {shape!r}.")
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"[{called(op)}] Negative dimensions not allowed in shape {shape}.")
    return shape


def normalize_axis(axis, ndim: int, op: str) -> int:
    """`axis` in [0, ndim); a bool is the int it stands for, as MLX's binding takes it."""
    if type(axis) is int and -ndim <= axis < ndim:
        return axis % ndim
    if not isinstance(axis, (int, np.integer)):
        axis = ints_of(axis)  # a 0-d integer array too
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"[{called(op)}] Expected an integer axis, got {type(axis).__name__}.")
    if not -ndim <= axis < ndim:
        raise AxisError(f"[{called(op)}] Invalid axis {axis} for array with {ndim} dimensions.")
    return int(axis) % ndim


def normalize_axes(axis, ndim: int, op: str) -> tuple:
    """Axes as sorted non-negative ints; None means all of them."""
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is tuple:
        if len(axis) == 1:
            return (normalize_axis(axis[0], ndim, op),)
        if plain_ints(axis) and 0 <= min(axis) and max(axis) < ndim and \
                len(set(axis)) == len(axis):
            return tuple(sorted(axis))
    if isinstance(axis, array):  # (0-d arrays inside a sequence: normalize_axis)
        axis = ints_of(axis)
    if isinstance(axis, (int, np.integer)):
        return (normalize_axis(axis, ndim, op),)
    axes = tuple(normalize_axis(a, ndim, op) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"[{op}] Duplicate axes {tuple(axis)}.")
    return tuple(sorted(axes))


def callable_arg(fun, op: str):
    """`fun`, refused with TypeError when it cannot be called: a transform, compile or
    export of it fails when made, as in MLX."""
    if not callable(fun):
        raise TypeError(f"[{op}] Expected a callable, got {type(fun).__name__}.")
    return fun


def int_arg(value, op: str, what: str, bits: int = 32) -> int:
    """An `int` argument as MLX's binding takes it: an int, a bool, a NumPy integer or a 0-d
    integer array (anything with `__index__`) in `bits`-bit range; a float, None or a string
    raises TypeError."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"[{called(op)}] {what} must be an integer, got "
                        f"{type(value).__name__}.") from None
    if not -2**(bits - 1) <= v < 2**(bits - 1):
        raise TypeError(f"[{called(op)}] {what} must be a {bits}-bit integer, got {v}.")
    return v


def bool_arg(value, op: str, what: str) -> bool:
    """A `bool` argument as MLX's binding takes it: True or False only (an int, None or a
    NumPy bool raises TypeError)."""
    if value is True or value is False:
        return value
    raise TypeError(f"[{called(op)}] {what} must be a bool, got {type(value).__name__}.")


def float_arg(value, op: str, what: str):
    """A `float` argument as MLX's binding takes it, returned as given: a float, an int, a
    NumPy number or a 0-d array (anything `float()` takes but a string); a string, bytes,
    None or a complex number raises TypeError."""
    if type(value) is float or type(value) is int:
        return value
    if not isinstance(value, (str, bytes)):
        try:
            float(value)
            return value
        except (TypeError, ValueError):
            pass
    raise TypeError(f"[{called(op)}] {what} must be a float, got {type(value).__name__}.")


def str_arg(value, op: str, what: str) -> str:
    """A `str` argument as MLX's binding takes it: a str only (None, bytes or an int raises
    TypeError; an unknown name is the op's own ValueError)."""
    if isinstance(value, str):
        return value
    raise TypeError(f"[{called(op)}] {what} must be a str, got {type(value).__name__}.")


def make(name: str, kernel, gpu=None, multi=False, moves=False, **rules) -> Primitive:
    """A primitive; `rules` are its transform rules (`vjp`, `jvp`, `vmap`) and its `shape`
    rule (see Primitive); `gpu` its GPU kernel (a GpuKernel, or a function made one).

    A `multi` kernel returns a tuple of results (see `multi`).  A kernel that `moves`
    elements only (reshapes, transposes, slices, gathers, joins) runs on a GPU on the bits
    of bfloat16, which CuPy lacks, rather than on float32 copies of it.
    """
    if moves and gpu is None:
        gpu = GpuKernel(kernel, bfloat16="bits")
    if gpu is not None and not isinstance(gpu, GpuKernel):
        gpu = GpuKernel(gpu)
    return Primitive(name, _boxed(kernel) if multi else kernel, gpu, multi=multi, **rules)


def _boxed(fn):
    """A kernel returning a tuple, held in a 0-d object array (backends hand on arrays)."""
    def kernel(xp, *args, outs, **params):
        box = np.empty((), dtype=object)
        box[()] = tuple(fn(xp, *args, **params))
        return box
    return kernel


class Parts(dict):
    """Cotangents of some of a multi-output node's results, by result index."""


def _select_vmap(axes, out, box, index):
    return box[index], axes[0][index]  # the batched box is the list of its results


SELECT = Primitive("select", lambda xp, box, index: box[()][index],
                   vjp=lambda c, out, box, index: (Parts({index: c}),),
                   jvp=lambda t, out, box, index: None if t[0] is None else t[0][index],
                   vmap=_select_vmap)


def multi(prim, inputs, outs, params, state) -> tuple:
    """`prim` on `inputs` computing one result per `(shape, dtype)` of `outs`: one node
    for all of them and a selection node per result (what the caller gets)."""
    outs = tuple((tuple(shape), d) for shape, d in outs)
    whole = node(prim, inputs, (), outs[0][1], dict(params, outs=outs), state)
    return tuple(node(SELECT, (whole,), shape, d, {"index": i}, state)
                 for i, (shape, d) in enumerate(outs))


def truth(xp, a):
    """`a` read as bool (a condition, all/any): on a GPU a float is tested by its bits,
    since CuPy's kernels flush subnormals to zero where NumPy and MLX read them as true."""
    if xp.__name__ == "numpy" or a.dtype.kind != "f":
        return a
    mask = (1 << (8 * a.itemsize - 1)) - 1
    return (a.view(f"u{a.itemsize}") & mask) != 0


def cast(x, npdtype):
    """`x` in the dtype a kernel computes in (no copy when it already is)."""
    return x if x.dtype == npdtype else x.astype(npdtype)


__all__ = ["AxisError", "BadIndex", "NO_PARAMS", "Parts", "SELECT", "array", "multi",
           "as_array", "broadcast_pair", "broadcast_shapes", "cast", "check_shape", "const",
           "dt", "is_scalar", "make", "node", "normalize_axes", "normalize_axis",
           "promote_many", "promote_pair", "resolve", "scalar"]
