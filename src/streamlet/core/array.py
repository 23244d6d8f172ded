"""The lazy array: a graph node until evaluated, then a buffer on its device."""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .convert import create, numpy_view
from .graph import TRACING, Node, Primitive
from .memory import TRACK_BYTES, track as track_memory
from .scheduler import StreamError
from .stream import resolve

try:
    from ._buffer import Exporter as _Exporter  # the buffer protocol on every CPython
except ImportError:  # not compiled (no C compiler at install): CPython 3.12's __buffer__
    _Exporter = object


class array(_Exporter):
    """An N-dimensional array, evaluated lazily: `mx.array([1, 2, 3]).tolist() == [1, 2, 3]`.

    The array is a handle to a graph node (`_node`), as in MLX.  In-place operators and
    `a[i] = v` point the handle at a new node: every reference to this handle sees the
    new value, and arrays computed from it before keep the old node.  The handle keeps
    its node's shape and dtype at hand for the op builders.
    """

    __slots__ = ("_node", "_shape", "_dtype", "__weakref__")

    def __init__(self, val, dtype=None):
        made = create(val, dtype, True)
        if isinstance(made, array):
            self._node, self._shape, self._dtype = made._node, made._shape, made._dtype
            return
        d = dt.from_numpy(made.dtype)
        self._node = Node(made.shape, d, data=made)
        self._shape = made.shape
        self._dtype = d
        if made.nbytes >= TRACK_BYTES:
            track_memory(made)

    def _rebind(self, other) -> "array":
        """Point this handle at `other`'s node (in-place operators, `a[i] = v`)."""
        self._node, self._shape, self._dtype = other._node, other._shape, other._dtype
        return self

    # -- metadata, known when the op is built ---------------------------------
    @property
    def shape(self) -> tuple:
        """The size of each axis, a tuple of ints (known when the op is built)."""
        return self._shape

    @property
    def dtype(self):
        """The data type of the elements (known when the op is built)."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes."""
        return self._dtype.size

    @property
    def nbytes(self) -> int:
        """The size of the array's data in bytes: `size * itemsize`."""
        return self.size * self._dtype.size

    # -- evaluation --------------------------------------------------------------
    def _host(self) -> np.ndarray:
        """The evaluated value as a NumPy array (a copy from the GPU, a view on the CPU)."""
        n = self._node
        wait(n)
        if n.stream is None:
            return n.data
        return n.stream.backend.to_numpy(n.data, n.stream)

    def item(self):
        """The value of a one-element array as a Python scalar."""
        if self.size != 1:
            raise ValueError("[item] Only one-element arrays can be converted to a Python scalar.")
        return self._host().item()

    def tolist(self):
        """The value as nested Python lists: `mx.array([[1, 2]]).tolist() == [[1, 2]]`."""
        return self._host().tolist()

    def __array__(self, dtype=None, copy=None):
        """A NumPy view of the array's buffer (writing to it writes to the array, as in
        MLX), or a copy with `copy=True`, or in `dtype`."""
        data = self._host()
        if copy:
            return np.array(data, dtype=dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != data.dtype:
            if copy is False:
                raise ValueError(f"[array] Cannot convert {self._dtype.name} to "
                                 f"{np.dtype(dtype)} without a copy.")
            return data.astype(dtype)
        return self._view(data)

    def _view(self, data):
        """A NumPy view of the buffer, writable where it is the array's own (the CPU); a
        host copy of GPU memory is read-only, since a write to it could not reach the array."""
        view = numpy_view(self, data)
        if data is not self._node.data and view.flags.writeable:
            view.flags.writeable = False
        return view

    def _buffer_source(self):
        """What the buffer protocol lends (`_buffer.c`): a NumPy view of the evaluated
        data, and the format MLX gives where NumPy's differs (else None)."""
        view = self._view(self._host())
        if self._dtype is dt.bfloat16:  # NumPy exports no bfloat16: its bits, named as MLX
            return view.view(np.uint16), b"bfloat16"
        if view.dtype.char in "lL":  # 8-byte ints as MLX exports them: 'q'/'Q', not 'l'/'L'
            view = view.view("q" if view.dtype.char == "l" else "Q")
        return view, None

    if _Exporter is object:
        def __buffer__(self, flags):
            return memoryview(self._buffer_source()[0])

    def __format__(self, spec):
        if self._shape:
            if spec:
                raise TypeError("unsupported format string passed to mx.array.__format__")
            return repr(self)
        return format(self.item(), spec)

    def _exported(self):
        """The evaluated buffer as the backend hands it to DLPack consumers."""
        n = self._node
        wait(n)
        if n.stream is None:
            return n.data
        return n.stream.backend.for_export(n.data, n.stream)

    def __dlpack__(self, **kwargs):
        data = self._exported()
        if self._dtype is dt.bfloat16 and isinstance(data, np.ndarray):
            from .capsule import export_bfloat16  # NumPy's DLPack has no bfloat16
            return export_bfloat16(data, kwargs)
        return data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._exported().__dlpack_device__()

    # -- Python protocols ---------------------------------------------------------
    def __repr__(self):
        return format_array(self._host(), self._dtype)

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-dimensional array.")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-dimensional array.")
        return (self[i] for i in range(self._shape[0]))

    def __bool__(self):
        if self.size != 1:
            raise ValueError("[convert] Only length-1 arrays can be converted to Python scalars.")
        return bool(self._host().item())

    def __int__(self):
        return int(self.item())

    def __float__(self):
        return float(self.item())

    def __complex__(self):
        return complex(self.item())

    def __index__(self):
        if self._shape or self._dtype.kind not in "iu":
            raise TypeError("Only 0-dimensional integer arrays can be converted to an index.")
        return int(self.item())

    __hash__ = object.__hash__

    def __getstate__(self):
        return {"data": np.array(self.__array__(), copy=True), "dtype": self._dtype.name}

    def __setstate__(self, state):
        array.__init__(self, state["data"], dt.from_name(state["dtype"]))

    def __copy__(self):
        return wrap(self._node)

    def __deepcopy__(self, memo):
        return array(self)


def format_array(data: np.ndarray, dtype) -> str:
    """MLX's repr: `array([1.5, 2], dtype=float32)`; the rules live in printing.py."""
    from .printing import format_array as fmt
    return fmt(data, dtype)


def wait(n) -> None:
    """Make sure node `n` has run (evaluating it if nobody has); raise its failure."""
    if n.prim is not None:
        if not n.seq:
            from .eval import dispatch
            dispatch([n], blocking=True)
        n.stream.wait(n.seq)
    st = n.stream
    if st is not None and st.gpu:
        st.backend.settle(n)  # its index checks, if not read yet
    if n.error is not None:
        raise_error(n)
    if n.data is None:
        if n.prim is not None:  # scheduled, its stream moved on, and it never ran
            raise RuntimeError("[eval] This array was never computed: its evaluation was "
                               "interrupted, or the process forked while it ran.")
        raise placeholder_error()


def placeholder_error() -> Exception:
    """MLX's error for evaluating an array without a primitive and without a value: an
    input of a function being transformed (ValueError), or one that escaped its trace."""
    if TRACING.here():
        return ValueError("[eval] Attempting to eval an array during function "
                          "transformations like compile or vmap is not allowed.")
    return RuntimeError("[eval] Attempting to eval an array without a primitive.\nIf you "
                        "are compiling a function, make sure all the inputs and outputs "
                        "are captured.")


def raise_error(n):
    """Raise node `n`'s failure; once raised, synchronize() need not raise it again."""
    err = n.error
    err.reported = True
    raise RuntimeError(str(err)) from err


def leaf(data, state=None) -> array:
    """An evaluated array around the buffer `data` itself (on `state`'s device if given)."""
    return wrap(Node(tuple(data.shape), dt.from_numpy(data.dtype), stream=state, data=data))


def to_array(x) -> array:
    """`x` itself if it is an array, else an evaluated array around the NumPy array `x`."""
    return x if isinstance(x, array) else leaf(x)


def wrap(n) -> array:
    """A new handle to node `n`."""
    a = array.__new__(array)
    a._node, a._shape, a._dtype = n, n.shape, n.dtype
    return a


def const(value, dtype) -> array:
    """A scalar input of an op, already evaluated and usable on any device (a float NaN or
    infinity as an integer is what C's conversion gives, as in MLX; a float for float16
    goes through float32, `dt.scalar_value`)."""
    value = dt.scalar_value(value, dtype)
    try:
        data = dtype.np.type(value)
    except (ValueError, OverflowError):
        if not isinstance(value, float):
            raise
        with np.errstate(all="ignore"):
            data = np.array(value, np.float32).astype(dtype.np)[()]
    return wrap(Node((), dtype, data=data))


def alias(a, state=None) -> array:
    """A new handle to `a`'s node, for ops that change nothing (MLX returns a new array
    there, and `b[i] = v` then rebinds only `b`)."""
    return wrap(a._node)


_IDENTITY = Primitive("identity", lambda xp, x: x)


_F64 = dt.float64
_MIXED = object()  # inputs with different marks: `TRACING.mark` decides


def node(prim, inputs, shape, dtype, params, state) -> array:
    """A new unevaluated array: `prim` applied to the arrays `inputs` on the stream `state`."""
    k = len(inputs)
    if k == 2:
        ins = (inputs[0]._node, inputs[1]._node)
    elif k == 1:
        ins = (inputs[0]._node,)
    else:
        ins = tuple([x._node for x in inputs])
    return node_of(prim, ins, shape, dtype, params, state)


def node_of(prim, ins, shape, dtype, params, state) -> array:
    """`node` given the input nodes `ins` (a tuple) rather than arrays."""
    if state is not None and state.gpu and (dtype is _F64 or any(i.dtype is _F64 for i in ins)):
        raise ValueError("float64 is not supported on the GPU")  # MLX's rule and words
    n = Node(shape, dtype, prim, ins, params, state)
    if TRACING.depth:
        mark = None
        for i in ins:
            t = i.tracer
            if t is not None and t is not mark:
                mark = t if mark is None else _MIXED
        if mark is not None:
            n.tracer = mark if mark is TRACING.thread.token else TRACING.mark(ins)
    a = array.__new__(array)
    a._node, a._shape, a._dtype = n, shape, dtype
    return a


__all__ = ["array", "alias", "const", "leaf", "node", "node_of", "to_array", "wrap",
           "StreamError"]
