"""The `streamlet-api` directive: every public name of a module, from its docstrings.

    .. streamlet-api:: streamlet.core

writes one autodoc entry per public name (`public_api.public_names`), grouped into
sections (for `streamlet.core`: by what the name is for), a table for the constants
and data types, and links to the submodules' pages.  The list is computed when the
site is built, so a name added to the library appears without editing the docs.
"""
from __future__ import annotations

import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import public_api

# streamlet.core's sections: names listed by hand first, then by defining module
CORE_NAMES = [
    ("Devices", ["Device", "DeviceType", "default_device", "set_default_device",
                 "is_available", "device_count", "device_info"]),
    ("Streams", ["Stream", "ThreadLocalStream", "new_stream", "new_thread_local_stream",
                 "new_thread_unsafe_stream", "stream_from_thread_local_stream",
                 "default_stream", "set_default_stream", "stream", "StreamContext",
                 "synchronize", "get_streams", "clear_streams"]),
    ("Evaluation", ["eval", "async_eval", "depends"]),
    ("Arrays", ["array"]),
]
CORE_MODULES = [
    ("Data types", ["dtypes"]),
    ("Creating arrays", ["ops.creation", "convert", "dlpack"]),
    ("Elementwise operations", ["ops.factory", "ops.elementwise", "ops.special"]),
    ("Reductions", ["ops.reduction"]),
    ("Cumulative operations", ["ops.scan"]),
    ("Shapes", ["ops.shape", "ops.build"]),
    ("Rearranging", ["ops.arrange"]),
    ("Indexing and updates", ["ops.indexing", "ops.updates"]),
    ("Sorting and selection", ["ops.sorting"]),
    ("Products", ["ops.products", "ops.linalg"]),
    ("Convolutions", ["ops.conv"]),
    ("Quantization", ["ops.quantized"]),
    ("Function transforms", ["transforms", "vmap", "custom"]),
    ("Compile and export", ["compile", "dot", "export", "export_file"]),
    ("Timeline trace", ["timeline"]),
    ("Memory", ["memory"]),
    ("Saving and loading", ["io", "gguf"]),
    ("Printing", ["printing"]),
]
MEMBERS = {"array", "Module", "Optimizer", "Group", "Stream", "ThreadLocalStream",
           "Device", "FunctionExporter", "Dtype", "finfo", "iinfo", "Trace", "TraceOp",
           "TraceWait"}


def describe_data(value) -> str:
    """A line for a public name that is a value, not a function or class."""
    kind = type(value).__name__
    if kind == "Dtype":
        return f"data type, {value.size} byte(s) per element"
    if kind == "DtypeCategory":
        return "a category of data types, for ``issubdtype``"
    if kind == "DeviceType":
        return "a kind of device, for ``Device`` and every ``stream=``"
    if value is None:
        return "``None``: inserts an axis of length 1 when indexing"
    if isinstance(value, float):
        return f"float constant, ``{value!r}``"
    return f"a ``{kind}`` value"


def _sections(modname, names):
    """[(title or None, [names])] for a module's entries."""
    if modname != "streamlet.core":
        classes = [n for n in names if inspect.isclass(getattr(public_api.load(modname), n))]
        return [("Classes", classes), ("Functions", [n for n in names if n not in classes])]
    module = public_api.load(modname)
    left = list(names)
    out = []
    for title, listed in CORE_NAMES:
        take = [n for n in listed if n in left]
        out.append((title, take))
        left = [n for n in left if n not in take]
    for title, homes in CORE_MODULES:
        homes = {f"{modname}.{h}" for h in homes}
        take = [n for n in left if getattr(getattr(module, n), "__module__", None) in homes
                and (inspect.isroutine(getattr(module, n)) or inspect.isclass(getattr(module, n)))]
        out.append((title, take))
        left = [n for n in left if n not in take]
    callables = [n for n in left if inspect.isroutine(getattr(module, n))
                 or inspect.isclass(getattr(module, n))]
    out.append(("Other functions", callables))
    return out


def api_lines(modname: str) -> list[str]:
    """The reStructuredText of a module's reference."""
    module = public_api.load(modname)
    names = public_api.public_names(modname)
    subs = [n for n in names if inspect.ismodule(getattr(module, n))]
    data = [n for n in names if n not in subs and not inspect.isroutine(getattr(module, n))
            and not inspect.isclass(getattr(module, n))]
    lines = []
    for title, entries in _sections(modname, [n for n in names if n not in subs + data]):
        if not entries:
            continue
        lines += [title, "-" * len(title), ""]
        for n in entries:
            obj = getattr(module, n)
            if inspect.isclass(obj):
                lines.append(f".. autoclass:: {modname}.{n}")
                if n in MEMBERS:
                    lines.append("   :members:")
            else:
                lines.append(f".. autofunction:: {modname}.{n}")
            lines.append("")
    if data:
        lines += ["Constants", "---------", "", ".. list-table::", "   :header-rows: 1",
                  "   :widths: 20 80", "", "   * - name", "     - what it is"]
        for n in data:
            lines += [f"   * - ``{n}``", f"     - {describe_data(getattr(module, n))}"]
        lines.append("")
    if subs:
        lines += ["Submodules", "----------", ""]
        lines += [f"- :doc:`{modname}.{n} <{modname}.{n}>`" for n in subs] + [""]
    return lines


class StreamletApi(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        modname = self.arguments[0]
        content = StringList(api_lines(modname), source=f"<streamlet-api {modname}>")
        holder = nodes.section()
        holder.document = self.state.document
        nested_parse_with_titles(self.state, content, holder)
        return holder.children


def setup(app):
    app.add_directive("streamlet-api", StreamletApi)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
