"""MLX's array repr, `set_printoptions` and the `printoptions` context manager.

MLX prints floats with `%g` (or fixed `precision` digits once set), shows at most
three items at each end of any axis longer than six, and never wraps lines.
"""
from __future__ import annotations

import array as _std_array
import contextlib
import math
import operator
import reprlib

import numpy as np

_EDGE = 3  # items shown at each end of a summarized axis
_SUMMARIZE_ABOVE = 6  # an axis longer than this is summarized


class PrintOptions:
    """The global print options: `precision` is -1 for MLX's default `%g` format."""

    __slots__ = ("precision",)

    def __init__(self, precision=-1):
        self.precision = precision

    def __repr__(self):
        return f"PrintOptions(precision={self.precision})"


_OPTIONS = PrintOptions()


def set_printoptions(precision: int = -1) -> None:
    """Print floats with `precision` decimals from now on (-1: the default `%g`; any other
    negative value: six decimals).

    >>> set_printoptions(precision=2); get_printoptions().precision
    2
    >>> set_printoptions()
    """
    _OPTIONS.precision = _checked_precision(precision, "set_printoptions", "None")


def _checked_precision(precision, name: str, returns: str) -> int:
    """`precision` as MLX's binding takes it: an int (or `__index__`) that fits 32 bits."""
    try:
        value = operator.index(precision)
    except TypeError:
        value = None
    if value is None or not -2**31 <= value < 2**31:
        raise TypeError(f"{name}(): incompatible function arguments. The following argument "
                        f"types are supported:\n    1. {name}(precision: int = -1) -> {returns}")
    return value


def get_printoptions() -> PrintOptions:
    """A copy of the current print options."""
    return PrintOptions(_OPTIONS.precision)


@contextlib.contextmanager
def printoptions(precision: int = -1):
    """Use `precision` inside a `with` block; the previous options come back on exit."""
    precision = _checked_precision(precision, "printoptions", "mlx.core._PrintOptionsContext")
    saved = _OPTIONS.precision
    _OPTIONS.precision = precision
    try:
        yield get_printoptions()
    finally:
        _OPTIONS.precision = saved


def _float_text(x: float, precision: int) -> str:
    if x != x:  # C's printf, which MLX uses, shows the sign of a NaN
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if precision == -1 or x in (float("inf"), float("-inf")):
        return f"{x:g}"
    # Any other negative precision is C++'s default one, six digits, in fixed notation.
    return f"{x:.{precision if precision >= 0 else 6}f}"


def _scalar_text(x, kind: str, precision: int) -> str:
    if kind == "b":
        return "True" if x else "False"
    if kind == "c":
        # MLX writes "+" and the imaginary part as is when it is >= 0 (so -0.0 too) or NaN,
        # else "-" and its magnitude: -0.0 shows as "+-0j", a negative NaN as "+-nanj".
        re, im = _float_text(float(x.real), precision), float(x.imag)
        if im >= 0 or im != im:
            return f"{re}+{_float_text(im, precision)}j"
        return f"{re}-{_float_text(-im, precision)}j"
    if kind == "f":
        return _float_text(float(x), precision)
    return str(int(x))


def _edges(n: int):
    """Indices shown along an axis of length n; None marks the '...' gap."""
    if n > _SUMMARIZE_ABOVE:
        return [*range(_EDGE), None, *range(n - _EDGE, n)]
    return list(range(n))


def _block(x: np.ndarray, kind: str, precision: int, indent: int) -> str:
    if x.shape[0] == 0:
        return "[]"
    if x.ndim == 1:
        items = ["..." if i is None else _scalar_text(x[i], kind, precision)
                 for i in _edges(x.shape[0])]
        return "[" + ", ".join(items) + "]"
    sep = ",\n" + " " * (indent + 1)
    rows = ["..." if i is None else _block(x[i], kind, precision, indent + 1)
            for i in _edges(x.shape[0])]
    return "[" + sep.join(rows) + "]"


def format_array(data: np.ndarray, dtype) -> str:
    """MLX's repr of evaluated data: `array([1.5, 2], dtype=float32)`."""
    kind, precision = dtype.kind, _OPTIONS.precision
    if dtype.name == "bfloat16":
        data = data.astype(np.float32)
    if data.ndim == 0:
        body = _scalar_text(data[()], kind, precision)
    else:
        body = _block(data, kind, precision, len("array("))
    return f"array({body}, dtype={dtype.name})"


__all__ = ["PrintOptions", "format_array", "get_printoptions", "printoptions",
           "set_printoptions"]


# reprlib (pytest's failure messages, debuggers) picks its method by type name, and ours is
# `array`, as the standard library's: that method would ask an array's truth value.
_std_repr_array = reprlib.Repr.repr_array


def _repr_array(self, x, level):
    if isinstance(x, _std_array.array):
        return _std_repr_array(self, x, level)
    return self.repr_instance(x, level)


reprlib.Repr.repr_array = _repr_array
