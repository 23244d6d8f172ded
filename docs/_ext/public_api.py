"""Which names of streamlet are public, for the API reference and its tests.

A module's public names are its `__all__` once that lists at least every name the
module shares with its MLX counterpart; until then (or where `__all__` lists a
module's internal exports only, as `streamlet.core.ops.linalg` does for the op
modules' star import) they are the names the module shares with MLX, plus the
names streamlet adds (EXTRAS). Without MLX installed, `__all__` or `dir()` is used.
Either way, imported helpers (typing constructs, `math`, `mx`) never count.
"""
from __future__ import annotations

import importlib
import inspect

# module documented -> the MLX module it stands for
MODULES = {
    "streamlet.core": "mlx.core",
    "streamlet.core.random": "mlx.core.random",
    "streamlet.core.linalg": "mlx.core.linalg",
    "streamlet.core.fft": "mlx.core.fft",
    "streamlet.core.fast": "mlx.core.fast",
    "streamlet.core.distributed": "mlx.core.distributed",
    "streamlet.core.cuda": "mlx.core.cuda",
    "streamlet.core.metal": "mlx.core.metal",
    "streamlet.nn": "mlx.nn",
    "streamlet.nn.init": "mlx.nn.init",
    "streamlet.nn.losses": "mlx.nn.losses",
    "streamlet.nn.utils": "mlx.nn.utils",
    "streamlet.optimizers": "mlx.optimizers",
    "streamlet.utils": "mlx.utils",
}

# public names streamlet has that MLX 0.32.4's Python modules do not
EXTRAS = {
    "streamlet.core": ["get_streams", "stream_from_thread_local_stream", "promote_types"],
}

# names a module imports for its own use (MLX's module has them too)
HELPERS = {
    "streamlet.nn.utils": ["Module", "tree_flatten", "tree_map", "tree_unflatten"],
}

# submodules documented on pages of their own; other module attributes are not names
SUBMODULES = {
    "streamlet.core": ["random", "linalg", "fft", "fast", "distributed", "cuda", "metal"],
    "streamlet.nn": ["init", "losses", "utils"],
}


def load(modname: str):
    """The module a dotted name stands for (`streamlet.core.linalg` is an attribute)."""
    head, _, tail = modname.rpartition(".")
    try:
        return importlib.import_module(modname)
    except ImportError:
        if not head:
            raise
        return getattr(load(head), tail)


def _oracle(modname: str):
    try:
        return load(MODULES[modname])
    except (ImportError, AttributeError, KeyError):
        return None


def _belongs(modname: str, name: str, obj) -> bool:
    """Whether `obj` is streamlet's own name there, not an imported helper."""
    if inspect.ismodule(obj):
        return name in SUBMODULES.get(modname, ())
    if name in HELPERS.get(modname, ()):
        return False
    if inspect.isroutine(obj) or inspect.isclass(obj):
        return (getattr(obj, "__module__", None) or "").startswith("streamlet")
    # data: dtypes, device types, float constants, newaxis; never typing constructs
    return type(obj).__module__ != "typing"


def public_names(modname: str) -> list[str]:
    """The public names of a streamlet module, sorted."""
    module = load(modname)
    names = set(dir(module))
    oracle = _oracle(modname)
    declared = vars(module).get("__all__")
    if oracle is not None:
        shared = names & set(dir(oracle))
        if declared is not None and set(declared) >= {n for n in shared if not n.startswith("_")
                                                     and _belongs(modname, n,
                                                                  getattr(module, n))}:
            chosen = set(declared)
        else:
            chosen = shared | set(EXTRAS.get(modname, ()))
    else:
        chosen = set(declared) if declared is not None else names
    chosen |= set(SUBMODULES.get(modname, ())) & names
    return sorted(n for n in chosen if not n.startswith("_") and hasattr(module, n)
                  and _belongs(modname, n, getattr(module, n)))


def has_own_doc(obj) -> bool:
    """Whether a routine, class or module carries a docstring of its own."""
    doc = getattr(obj, "__doc__", None)
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
    return bool((doc or "").strip())
