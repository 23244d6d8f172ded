"""What error messages of bad input share: the name of the function the user called.

An op builder checks its input with helpers (`as_array`, `normalize_axis`, `resolve`, ...)
that raise "[name] ..." messages; a composite op (`allclose` on `isclose`, `conv1d` on the
convolution, `tri_inv`) reaches them through other builders, and `resolve(stream)` is told
no name at all.  Rather than thread the public name through every builder, the raising
helper asks `called(default)` for it: error paths only, so the cost is never paid by a
call that succeeds.
"""
from __future__ import annotations

import os
import sys

# a frame is the core's if its code is in this folder (a module name would also claim code
# run with a core module's globals, as doctests of its docstrings are)
_CORE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# file -> prefix of its functions' names in messages (MLX writes `[linalg::inv]`)
_PREFIXES = {os.path.join(_CORE, "ops", "linalg.py"): "linalg::"}


class BadType(TypeError, ValueError):
    """A value of a type the function cannot take: a TypeError, and the ValueError MLX
    raises for it ("Invalid type object received in array initialization.")."""


_WRAPPERS = {"method", "wrapper", "op", "op_", "fn", "kernel"}  # names of generic closures


def called(default: str) -> str:
    """The public function of streamlet.core that user code called: the outermost frame of
    the core on the stack that has a public name (an operator such as `__add__` and the
    array methods' wrappers pass it on to the op they call); `default` if none has, or if
    it already names that function."""
    frame = sys._getframe(1)
    chain = []
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_CORE):
            break
        name = code.co_name
        if name == "__init__":  # a class the user called: `mx.array(...)`
            name = getattr(code, "co_qualname", "_").split(".")[0]
        chain.append((name, code.co_filename))
        frame = frame.f_back
    for name, module in reversed(chain):
        if not name.startswith(("_", "<")) and name not in _WRAPPERS:
            name = _PREFIXES.get(module, "") + name
            return default if default == name or default.endswith("::" + name) else name
    return default


def rename(fn, name: str):
    """Give a function made by a factory (`factory.unary` makes every `op`) its public
    name, for `called`, tracebacks and profiles alike."""
    fn.__name__ = fn.__qualname__ = name
    code = fn.__code__
    fields = {"co_name": name}
    if hasattr(code, "co_qualname"):  # Python 3.11+
        fields["co_qualname"] = name
    fn.__code__ = code.replace(**fields)
    return fn
