"""export_to_dot: the pending graph of some arrays in Graphviz's DOT format, as MLX writes
it (evaluated arrays are sources, primitives rectangles, results not read again sinks)."""
from __future__ import annotations

from . import trees
from .array import array
from .ops.build import SELECT

_NAMES = {"broadcast_to": "Broadcast", "getitem": "Gather", "take": "Gather",
          "where": "Select", "astype": "AsType", "concatenate": "Concatenate"}


def label(prim) -> str:
    """A primitive's name as MLX prints it (`multiply` is `Multiply`)."""
    name = _NAMES.get(prim.name)
    return name or "".join(w[:1].upper() + w[1:] for w in prim.name.replace(".", "_").split("_"))


def _node_label(n) -> str:
    """A node's label: its primitive's, and for a compiled function's whole GPU program the
    steps it runs (MLX draws each of them as a node: `CompiledMultiplyAdd`, `Sum`)."""
    program = (n.params or {}).get("program")
    steps = getattr(program, "steps", None)
    if not steps:
        return label(n.prim)
    inner = ", ".join(label(s.prim) for s in steps if s.prim is not SELECT)
    return f"{label(n.prim)}({inner})"


def _names(namer):
    def name(n):
        got = namer.get(id(n))
        if got is None:
            k, letters = len(namer) + 1, ""
            while k > 0:
                letters = chr(ord("A") + (k - 1) % 26) + letters
                k = (k - 1) // 26
            got = namer[id(n)] = letters
        return got
    return name


def _order(nodes):
    """Nodes reachable from `nodes` through pending inputs, producers first."""
    seen, out, stack = set(), [], [(n, False) for n in reversed(nodes)]
    while stack:
        n, done = stack.pop()
        if done:
            out.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        if n.prim is not None:
            stack.extend((i, False) for i in reversed(n.inputs))
    return out


def export_to_dot(file, *args, **kwargs) -> None:
    """Write the graph behind the given arrays (or trees of them) to `file` (a path or an
    object with `write`); keyword arguments name arrays in the drawing.

    >>> import io; f = io.StringIO(); mx.export_to_dot(f, mx.array(1) + mx.array(2))
    >>> f.getvalue().startswith("digraph")
    True
    """
    if file is None:
        raise TypeError("[export_to_dot] Expected a file name (str) or a file-like object, "
                        "got None.")
    nodes = [a._node for a in trees.leaves((args, kwargs), strict=True)]
    for k, a in kwargs.items():
        if not isinstance(a, array):  # as MLX, whose keywords name single arrays
            raise TypeError(f"[export_to_dot] The keyword argument {k!r} names a "
                            f"{type(a).__name__}, not an array.")
    namer = {id(a._node): k for k, a in kwargs.items()}
    name = _names(namer)
    order = _order(nodes)
    read = {id(i) for n in order if n.prim is not None for i in n.inputs}
    lines = ["digraph {"]
    for n in order:
        if n.prim is None:
            lines.append(f'{{ rank=source; "{name(n)}"; }}')
            continue
        if n.prim is SELECT:  # a result of a multi-output primitive
            box = n.inputs[0]
            lines.append(f'{{ {"" if id(n) in read else "rank=sink; "}"{name(n)}"; }}')
            lines.append(f'{id(box)} -> "{name(n)}"')
            continue
        lines.append(f'{{ {id(n)} [label ="{_node_label(n)}", shape=rectangle]; }}')
        lines.extend(f'"{name(i)}" -> {id(n)}' for i in n.inputs)
        if n.prim.multi:
            continue
        lines.append(f'{{ {"" if id(n) in read else "rank=sink; "}"{name(n)}"; }}')
        lines.append(f'{id(n)} -> "{name(n)}"')
    text = "\n".join(lines) + "\n}"
    if isinstance(file, str):
        with open(file, "w") as f:
            f.write(text)
    elif hasattr(file, "write"):
        file.write(text)
    else:
        raise ValueError("[export_to_dot] Accepts file-like objects or strings to be used "
                         "as filenames.")


__all__ = ["export_to_dot", "label"]
