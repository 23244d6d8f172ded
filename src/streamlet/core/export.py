"""export_function, import_function, exporter: a traced function saved to a file, and
replayed from it in another program.

`export_function(file, fun, *args, **kwargs)` traces `fun` as `compile` does (on
placeholders with the example inputs' shapes and dtypes) and writes the traced graph:
each primitive by its stable name with its params, and the constant arrays the graph
reads (closures, model weights, the random key).  The graph stops at evaluated arrays,
so a constant is stored once however many traces read it.  `import_function(file)`
gives a function that replays the graph on new inputs without the Python code of `fun`:
steps built on the default stream run on the caller's default stream, steps given a
device run on the caller's default stream of that device, and the transforms (grad,
vmap, compile) see the primitives as if `fun` had been called.

The file format is streamlet's own (`export_file.py`): MLX's `.mlxfn` files are not read
and MLX does not read ours.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "f.fn")
>>> mx.export_function(path, lambda x, y: mx.exp(x) * y, mx.array(0.0), y=mx.array(3.0))
>>> f = mx.import_function(path)
>>> f(mx.array(0.0), y=mx.array(2.0))[0].item()
2.0
"""
from __future__ import annotations

import os
import threading

import numpy as np

from . import export_file as ef
from .array import array, wait, wrap
from .compile import Tape, _placeholder, _Step
from .device import Device, DeviceType
from .dot import _names, label
from .dtypes import from_name, from_numpy
from .graph import SHAPELESS, TRACING, Node
from .ops.build import SELECT, callable_arg
from .ops.linalg import swapped_axes
from .ops.shape import _TRANSPOSE
from .stream import resolve

_exporting = threading.local()


def in_export_tracing() -> bool:
    """True while this thread traces a function for export (MLX's `in_export_tracing`:
    ops that cannot run here, such as Metal kernels, may still be recorded)."""
    return getattr(_exporting, "depth", 0) > 0


class Elsewhere:
    """The stream of a device this process cannot run (a Metal kernel's while exporting):
    its nodes are recorded in the file and run where the function is imported."""

    class _Stream:
        def __init__(self, device):
            self.device = device

    def __init__(self, device):
        self.stream = Elsewhere._Stream(device)
        self.gpu = bool(device.type.value)


# -- arguments, as MLX takes them ---------------------------------------------------------
def _arrays(values):
    return isinstance(values, (list, tuple)) and all(isinstance(v, array) for v in values)


def _named_arrays(values):
    return isinstance(values, dict) and all(isinstance(k, str) and isinstance(v, array)
                                            for k, v in values.items())


def _inputs(args, kwargs, prefix):
    """(positional arrays, keyword arrays): arrays and keyword arrays, or one tuple or list
    of arrays and/or one dict of them."""
    ok = True
    if not args:
        ok, a, k = _named_arrays(kwargs), [], kwargs
    elif isinstance(args[0], array):
        ok, a, k = _arrays(args) and _named_arrays(kwargs), list(args), kwargs
    elif len(args) == 1 and not kwargs and _arrays(args[0]):
        a, k = list(args[0]), {}
    elif len(args) == 1 and not kwargs and _named_arrays(args[0]):
        a, k = [], args[0]
    elif len(args) == 2 and not kwargs and _arrays(args[0]) and _named_arrays(args[1]):
        a, k = list(args[0]), args[1]
    else:
        ok = False
    if not ok:
        raise ValueError(f"{prefix} Inputs can either be a variable number of positional and "
                         "keyword arrays or a single tuple and/or dictionary of arrays.")
    return a, dict(k)


def _outputs(result):
    if isinstance(result, array):
        return [result]
    if isinstance(result, (list, tuple)) and all(isinstance(r, array) for r in result):
        return list(result)
    raise ValueError("[export_function] Outputs can be either a single array, a tuple, or a "
                     "list of arrays.")


class _Signature:
    """What a trace was made for: its keyword names (sorted) and each input's shape and
    dtype, matched as MLX matches them (dtypes and numbers of dimensions, and shapes unless
    shapeless), except that the keyword names must be the same, not only present (so
    `f(x, y)` and `f(x, bias=b)` are two signatures, where MLX refuses the second)."""

    def __init__(self, keys, inputs):
        self.keys, self.inputs = keys, inputs  # inputs: [(shape, Dtype)]

    def matches(self, args, kwargs, shapeless):
        if len(args) + len(kwargs) != len(self.inputs) or sorted(kwargs) != self.keys:
            return False
        given = list(args) + [kwargs[k] for k in self.keys]
        for x, (shape, d) in zip(given, self.inputs):
            if x._dtype != d or len(x._shape) != len(shape):
                return False
            if not shapeless and x._shape != shape:
                return False
        return True

    def describe(self, lines, n):
        npos = len(self.inputs) - len(self.keys)
        lines.append(f" {n}. Function with {npos} positional inputs and {len(self.keys)} "
                     "keyword inputs:")
        for j, (shape, d) in enumerate(self.inputs):
            where = f"{j + 1}" if j < npos else f'"{self.keys[j - npos]}"'
            lines.append(f"   {where}: {_shape_text(shape)} {d}")


def _shape_text(shape):
    return "(" + ",".join(str(n) for n in shape) + ")"


# -- tracing -----------------------------------------------------------------------------------
def _trace(fun, args, kwargs, shapeless):
    """Trace `fun` on placeholders: (keyword names, placeholders, output nodes, steps,
    constants, the default stream of the trace).  Shapeless, the transforms' rules build
    what follows the shapes of other inputs (as a shapeless compile's trace)."""
    keys = sorted(kwargs)
    flat = list(args) + [kwargs[k] for k in keys]
    _exporting.depth = getattr(_exporting, "depth", 0) + 1
    outer = SHAPELESS.on
    SHAPELESS.on = outer or shapeless
    try:
        with TRACING:
            ph = [_placeholder(x) for x in flat]
            starts = [p._node for p in ph]  # the function may rebind its inputs (`x += 1`)
            default = resolve(None)
            outs = _outputs(fun(*ph[:len(args)], **dict(zip(keys, ph[len(args):]))))
            nodes = [o._node for o in outs]
            steps, constants = _program(nodes, starts, flat)
    finally:
        _exporting.depth -= 1
        SHAPELESS.on = outer
    return keys, starts, nodes, steps, constants, default


def _program(outputs, placeholders, originals):
    """The nodes between the placeholders and `outputs` that have not run (in build order)
    and the evaluated arrays they read (the constants)."""
    stop = {id(p) for p in placeholders}
    own = {id(x._node) for x in originals}
    seen, steps, constants, stack = set(), [], [], list(outputs)
    while stack:
        n = stack.pop()
        if id(n) in seen or id(n) in stop:
            continue
        seen.add(id(n))
        if id(n) in own:
            raise ValueError("[compile] Attempting to compile a function with uncaptured "
                             "inputs is not allowed.")
        if n.prim is not None and n.seq and not n.tracer:
            wait(n)  # already being run: use its value
        if n.prim is None:
            if n.data is None and n.error is None:
                raise ValueError("[export_function] The function reads an array that stands "
                                 "for the input of another transform; export it outside.")
            constants.append(n)
            continue
        steps.append(n)
        stack.extend(n.inputs)
    steps.sort(key=lambda n: n.birth)
    return steps, constants


def _unserializable(n, why):
    return ValueError(f"[export_function] Unable to serialize primitive {label(n.prim)} "
                      f"({n.prim.name}): {why}.")


def _stream_of(n, default):
    if n.stream is default or n.stream is None:
        return None
    d = n.stream.stream.device
    return [d.type.name, d.index]


# -- writing -----------------------------------------------------------------------------------
class FunctionExporter:
    """Exports several traces of one function to one file (what `mx.exporter` returns):
    call it with example inputs once per signature; `close()` (or leaving a `with` block)
    ends the export.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "sum.fn")
    >>> with mx.exporter(path, lambda *xs: sum(xs)) as export:
    ...     export(mx.array(1))
    ...     export(mx.array(1), mx.array(2))
    >>> mx.import_function(path)(mx.array(2), mx.array(3))[0].item()
    5
    """

    def __init__(self, file, fun, shapeless=False, metadata=""):
        self._fun, self._shapeless, self._metadata = fun, bool(shapeless), metadata
        self._callback = None if isinstance(file, str) else file
        self._writer = ef.Writer(file) if self._callback is None else None
        self._signatures, self._traces = [], []
        self._constants, self._saved = [], {}  # footer entries; id(node) -> (node, index)
        self._closed = False
        if self._writer is not None:
            self._writer.write([], self._footer())

    def close(self) -> None:
        """End the export: later calls raise RuntimeError."""
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __call__(self, *args, **kwargs):
        a, k = _inputs(args, kwargs, "[export_function]")
        if self._closed:
            raise RuntimeError("[export_function] Attempting to write after exporting is "
                               "closed.")
        if any(s.matches(a, k, self._shapeless) for s in self._signatures):
            raise RuntimeError("[export_function] Attempting to export a function twice with "
                               "the same signature is not allowed.")
        keys, ph, outs, steps, constants, default = _trace(self._fun, a, k, self._shapeless)
        signature = _Signature(keys, [(p.shape, p.dtype) for p in ph])
        if self._callback is not None:
            _report(self._callback, keys, ph, outs, steps, constants)
            self._signatures.append(signature)
            return
        new, count, saved = [], len(self._constants), dict(self._saved)
        try:
            trace = self._encode(keys, ph, outs, steps, constants, default, new)
        except BaseException:  # a trace that cannot be written leaves no constants behind
            del self._constants[count:]
            self._saved = saved
            raise
        self._signatures.append(signature)
        self._traces.append(trace)
        self._writer.write(new, self._footer())

    def _footer(self):
        return {"format": "streamlet.function", "version": ef.FORMAT_VERSION,
                "shapeless": self._shapeless, "metadata": self._metadata,
                "constants": self._constants, "traces": self._traces}

    def _add(self, data, new):
        """The index of a new constant array `data` (written with the trace)."""
        entry = ef.describe(data)
        self._constants.append(entry)
        new.append((entry, data))
        return len(self._constants) - 1

    def _encode(self, keys, ph, outs, steps, constants, default, new):
        slot = {id(p): i for i, p in enumerate(ph)}
        table = []
        for n in constants:
            saved = self._saved.get(id(n))
            if saved is None:
                saved = self._saved[id(n)] = (n, self._add(wrap(n)._host(), new))
            slot[id(n)] = len(slot)
            table.append(saved[1])
        rows = []
        for n in steps:
            key = ef.key_of(n.prim)
            if key is None:
                raise _unserializable(n, "it is made for one function, not by an op "
                                         "(custom functions cannot be exported)")
            try:
                params = ef.encode(n.params, lambda data: self._add(data, new))
            except ef.Unserializable as exc:
                raise _unserializable(n, f"its params hold a {exc}") from None
            rows.append([key, n.prim.name, [slot[id(i)] for i in n.inputs], list(n.shape),
                         n.dtype.name, params, _stream_of(n, default)])
            slot[id(n)] = len(slot)
        return {"kwargs": keys, "inputs": [[list(p.shape), p.dtype.name] for p in ph],
                "constants": table, "steps": rows, "outputs": [slot[id(o)] for o in outs]}


_LOG_BASE = {"log2": 0, "log10": 1, "log": 2}  # MLX's Log::Base


def _arguments(n):
    """A primitive's state for the callback: MLX's where MLX folds several of our ops
    into one primitive (Log with its base, Sqrt with its reciprocal flag), else our
    params' values (NumPy dtypes as mx dtypes)."""
    name = n.prim.name
    if name in _LOG_BASE:
        return "Log", [_LOG_BASE[name]]
    if name in ("sqrt", "rsqrt"):
        return "Sqrt", [name == "rsqrt"]
    params = [v for k, v in (n.params or {}).items() if k not in _OWN]
    return label(n.prim), [from_numpy(v) if isinstance(v, np.dtype) else v for v in params]


_OWN = ("outs", "ta", "tb")  # params MLX's primitives do not have


def _unfolded(n):
    """The Transpose nodes MLX's graph has before step `n` where `n` is a product that
    reads an operand transposed by its flag (`ops.linalg.operands`), and `n`'s inputs
    with those nodes in place of the operands."""
    params = n.params or {}
    ins = list(n.inputs)
    added = []
    first = len(ins) - 2  # the operands: matmul's inputs 0 and 1, addmm's 1 and 2
    for i, flag in ((first, "ta"), (first + 1, "tb")):
        if params.get(flag):
            src = ins[i]
            axes = swapped_axes(len(src.shape))
            ins[i] = Node(tuple(src.shape[a] for a in axes), src.dtype, _TRANSPOSE, (src,),
                          {"axes": axes}, n.stream)
            added.append(ins[i])
    return added, ins


def _report(callback, keys, ph, outs, steps, constants):
    """MLX's export to a callback: the inputs, keyword inputs, outputs, constants, then one
    call per primitive."""
    name = _names({})

    def data(nodes):
        return [(name(n), tuple(n.shape), n.dtype) for n in nodes]

    callback({"type": "inputs", "inputs": data(ph)})
    npos = len(ph) - len(keys)
    callback({"type": "keyword_inputs",
              "keywords": [(k, name(ph[npos + j])) for j, k in enumerate(keys)]})
    callback({"type": "outputs", "outputs": data(outs)})
    callback({"type": "constants", "constants": [(name(c), wrap(c)) for c in constants]})
    results, kept = {}, []
    for n in steps:
        if n.prim is SELECT:
            results.setdefault(id(n.inputs[0]), []).append(n)
    for n in steps:
        if n.prim is SELECT:
            continue
        got = sorted(results.get(id(n), []), key=lambda s: s.params["index"])
        added, ins = _unfolded(n)
        kept.extend(added)  # alive while named: names go by id
        for t in added:
            callback({"type": "primitive", "inputs": data(t.inputs), "outputs": data([t]),
                      "name": "Transpose", "arguments": _arguments(t)[1]})
        prim, arguments = _arguments(n)
        callback({"type": "primitive", "inputs": data(ins),
                  "outputs": data(got if n.prim.multi else [n]), "name": prim,
                  "arguments": arguments})


def exporter(file, fun, *, shapeless=False, metadata=None) -> FunctionExporter:
    """An object that exports several traces of `fun` to `file`, one per call with example
    inputs (see FunctionExporter).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.fn")
    >>> with mx.exporter(path, lambda x: 2 * x) as export:
    ...     export(mx.array([1.0]))
    ...     export(mx.array([1.0, 2.0]))
    >>> [out.tolist() for (out,) in map(mx.import_function(path), [mx.array([3.0])])]
    [[6.0]]
    """
    return FunctionExporter(_file(file, "exporter"), callable_arg(fun, "exporter"), shapeless,
                            _metadata(metadata))


def _file(file, op):
    if isinstance(file, os.PathLike):
        return os.fspath(file)
    if not isinstance(file, str):
        raise TypeError(f"[{op}] Expected a file path (str), got {type(file).__name__}.")
    return file


def _metadata(metadata):
    if metadata is None:
        return ""
    if not isinstance(metadata, str):
        raise TypeError("[export_function] metadata must be a str (for instance a JSON "
                        f"document), got {type(metadata).__name__}.")
    return metadata


def export_function(file_or_callback, fun, *args, shapeless=False, metadata=None,
                    **kwargs) -> None:
    """Trace `fun` on the example inputs (arrays and keyword arrays, or one tuple of arrays
    and/or one dict of them) and write it to a file, or describe its graph to a callback.

    With `shapeless`, the imported function takes inputs of other shapes (same dtypes and
    numbers of dimensions).  `metadata` is a string kept in the file (`import_function`
    with `return_metadata=True` gives it back).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "abs.fn")
    >>> mx.export_function(path, mx.abs, mx.array([-1.0, 2.0]))
    >>> mx.import_function(path)(mx.array([-3.0, 4.0]))[0].tolist()
    [3.0, 4.0]
    """
    fun, metadata = callable_arg(fun, "export_function"), _metadata(metadata)
    a, k = _inputs(args, kwargs, "[export_function]")
    if callable(file_or_callback) and not isinstance(file_or_callback, (str, os.PathLike)):
        if metadata:
            raise ValueError("[export_function] The metadata argument is only supported when "
                             "exporting to a file, not when using a callback.")
        target = file_or_callback
    else:
        target = _file(file_or_callback, "export_function")
    FunctionExporter(target, fun, shapeless, metadata)(*a, **k)


# -- reading -----------------------------------------------------------------------------------
class _Trace:
    """One imported trace: its signature and its steps, replayed through compile's Tape,
    one per set of streams the steps given a device resolve to.  Steps that do not depend
    on the inputs are built once per tape, as nodes the tape reads (compile's constants),
    so they need no shape rule in a shapeless replay."""

    def __init__(self, record, nodes, arrays, shapeless):
        inputs = [(tuple(s), from_name(d)) for s, d in record["inputs"]]
        self.signature = _Signature(list(record["kwargs"]), inputs)
        self.constants = [_constant(nodes, arrays, i) for i in record["constants"]]
        self.outputs = record["outputs"]
        self.steps, self.devices = [], []
        for key, name, refs, shape, dtype, params, where in record["steps"]:
            device = None if where is None else (where[0], where[1])
            if device is not None and device not in self.devices:
                self.devices.append(device)
            self.steps.append((ef.primitive(key, name), tuple(refs), tuple(shape),
                               from_name(dtype), ef.decode(params, arrays), device))
        first = len(inputs) + len(self.constants)
        self.varying = set(range(len(inputs)))  # values that depend on the inputs
        for k, (_, refs, *_) in enumerate(self.steps):
            if any(r in self.varying for r in refs):
                self.varying.add(first + k)
        self.fixed = next((p.name for k, (p, *_) in enumerate(self.steps)
                           if first + k in self.varying and p.shape is None
                           and p is not SELECT), None)
        self.shapeless = shapeless
        self.tapes = {}

    def replay(self, inputs):
        if self.shapeless and self.fixed is not None:
            for x, (shape, _) in zip(inputs, self.signature.inputs):
                if x._shape != shape:
                    raise ValueError(f"[import_function::call] The primitive {self.fixed} "
                                     "cannot infer its output shape, so this shapeless "
                                     "function runs only on the shapes it was exported with.")
        states = tuple(resolve(Device(DeviceType[t], i)) for t, i in self.devices)
        tape = self.tapes.get(states)
        if tape is None:
            tape = self.tapes[states] = self._tape(dict(zip(self.devices, states)))
        return tape.replay(inputs)

    def _tape(self, where):
        n_in, current = len(self.signature.inputs), resolve(None)
        values = [None] * n_in + list(self.constants)  # the nodes of the constant part
        for p, refs, shape, d, params, dev in self.steps:
            if len(values) in self.varying:
                values.append(None)
                continue
            values.append(Node(shape, d, p, tuple(values[r] for r in refs), params,
                               current if dev is None else where[dev]))
        reads = [r for k, (_, refs, *_) in enumerate(self.steps)
                 if len(self.constants) + n_in + k in self.varying for r in refs]
        slot = {i: i for i in range(n_in)}
        constants = []
        for r in reads + list(self.outputs):
            if r not in slot and r not in self.varying:
                slot[r] = n_in + len(constants)
                constants.append(values[r])
        steps, first = [], n_in + len(self.constants)
        for k, (p, refs, shape, d, params, dev) in enumerate(self.steps):
            if first + k in self.varying:
                slot[first + k] = n_in + len(constants) + len(steps)
                steps.append(_Step(p, tuple(slot[r] for r in refs), shape, d, params,
                                   None if dev is None else where[dev]))
        return Tape(n_in, constants, steps, [slot[o] for o in self.outputs], None, 0,
                    self.shapeless and self.fixed is None)


def _constant(nodes, arrays, i):
    """The leaf node of the file's constant `i`, shared by the traces that read it."""
    n = nodes.get(i)
    if n is None:
        a = arrays[i]
        n = nodes[i] = Node(tuple(a.shape), from_numpy(a.dtype), data=a)
    return n


class _Imported:
    def __init__(self, traces, shapeless):
        self.traces, self.shapeless = traces, shapeless

    def __call__(self, *args, **kwargs):
        a, k = _inputs(args, kwargs, "[import_function::call]")
        for t in self.traces:
            if t.signature.matches(a, k, self.shapeless):
                return tuple(t.replay(a + [k[key] for key in sorted(k)]))
        lines = ["[import_function::call] No imported function found which matches the given "
                 "positional and keyword arguments. Possible functions include:"]
        for n, t in enumerate(self.traces, 1):
            t.signature.describe(lines, n)
        lines.append(f"\nCalled with {len(a)} positional inputs and {len(k)} keyword inputs:")
        lines += [f"  {i + 1}: {_shape_text(x._shape)} {x._dtype}" for i, x in enumerate(a)]
        lines += [f'  "{key}": {_shape_text(x._shape)} {x._dtype}' for key, x in sorted(k.items())]
        raise ValueError("\n".join(lines))


def import_function(file, return_metadata=False):
    """The function `export_function` wrote to `file`: called with arrays and keyword
    arrays (or one tuple and/or one dict of them) matching one of its traces, it returns a
    tuple of arrays.  With `return_metadata`, `(function, metadata)`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.fn")
    >>> mx.export_function(path, lambda x: x.sum(), mx.ones((2, 2)), metadata="v1")
    >>> f, meta = mx.import_function(path, return_metadata=True)
    >>> f(mx.ones((2, 2)))[0].item(), meta
    (4.0, 'v1')
    """
    footer, arrays = ef.read(_file(file, "import_function"))
    shapeless, nodes = bool(footer["shapeless"]), {}  # nodes: the constants traces read
    traces = [_Trace(r, nodes, arrays, shapeless) for r in footer["traces"]]
    imported = _Imported(traces, shapeless)

    def call(*args, **kwargs):
        return imported(*args, **kwargs)
    call.__doc__ = f"The function imported from {file}."
    return (call, footer["metadata"]) if return_metadata else call


__all__ = ["FunctionExporter", "export_function", "exporter", "import_function",
           "in_export_tracing"]
