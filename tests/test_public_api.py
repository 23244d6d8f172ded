"""The public surface as users meet it: `dir()` of every public module lists MLX's names and
streamlet's documented extras, never the helpers and modules the package is made of."""
import importlib
import inspect
import subprocess
import sys

import pytest

import streamlet.core as mx

# streamlet module -> its MLX counterpart
MODULES = {
    "streamlet.core": "mlx.core",
    "streamlet.core.random": "mlx.core.random",
    "streamlet.core.linalg": "mlx.core.linalg",
    "streamlet.core.fft": "mlx.core.fft",
    "streamlet.core.fast": "mlx.core.fast",
    "streamlet.core.distributed": "mlx.core.distributed",
    "streamlet.core.metal": "mlx.core.metal",
    "streamlet.core.cuda": "mlx.core.cuda",
    "streamlet.nn": "mlx.nn",
    "streamlet.nn.layers": "mlx.nn.layers",
    "streamlet.nn.init": "mlx.nn.init",
    "streamlet.nn.losses": "mlx.nn.losses",
    "streamlet.nn.utils": "mlx.nn.utils",
    "streamlet.optimizers": "mlx.optimizers",
    "streamlet.utils": "mlx.utils",
}

# Public names streamlet has beyond MLX 0.32.4's `dir()`, each documented (README, docstrings).
EXTRAS = {
    "streamlet.core": {
        "get_streams",                     # every stream of this thread (README: Streams)
        "stream_from_thread_local_stream",  # this thread's stream of a ThreadLocalStream
        "promote_types",                   # the dtype two dtypes promote to
        "AxisError",                       # the ValueError/IndexError a bad axis raises
        "trace",                           # MLX's matrix trace, and the timeline trace
        "start_trace", "stop_trace",       # the timeline trace without a `with` block
        "Trace", "TraceOp", "TraceWait",   # what a timeline trace records
    },
    "streamlet.core.random": {
        "state",  # MLX has it too, behind a module __getattr__ that dir() does not see
        "bits",   # raw random bits of a key (MLX's C++ random::bits)
    },
}

# The modules a public module may list (everything else it holds is internal).
SUBMODULES = {
    "streamlet.core": {"cuda", "distributed", "fast", "fft", "linalg", "metal", "random"},
    "streamlet.nn": {"init", "layers", "losses", "utils",  # and the files of layers, as mlx.nn
                     "activations", "base", "containers", "convolution", "distributed",
                     "dropout", "embedding", "linear", "normalization", "pooling",
                     "positional_encoding", "quantized", "recurrent", "transformer", "upsample"},
}


def _public(names):
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


@pytest.mark.parametrize("modname", MODULES)
def test_dir_lists_mlx_names_and_documented_extras_only(modname, mlx):
    ours = _public(dir(importlib.import_module(modname)))
    theirs = _public(dir(importlib.import_module(MODULES[modname])))
    unknown = ours - theirs - EXTRAS.get(modname, set())
    assert not unknown, f"dir({modname}) lists names that are neither MLX's nor extras"


@pytest.mark.parametrize("modname", MODULES)
def test_dir_lists_public_submodules_only(modname):
    module = importlib.import_module(modname)
    modules = {n for n in dir(module) if inspect.ismodule(getattr(module, n))}
    assert modules == SUBMODULES.get(modname, set())


@pytest.mark.parametrize("modname", MODULES)
def test_all_names_exist_and_dir_is_all(modname):
    module = importlib.import_module(modname)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing
    assert _public(dir(module)) == set(module.__all__)
    assert len(module.__all__) == len(set(module.__all__))


def test_no_leaked_helpers_in_core_and_random():
    assert {"np", "math", "builtins", "graph", "scheduler", "b", "dt", "ops", "rules",
            "UNARY"}.isdisjoint(dir(mx))
    assert {"np", "math", "threading", "tf", "b", "dt", "ew"}.isdisjoint(dir(mx.random))
    assert {"grad", "exp", "new_stream", "random", "linalg", "bfloat16"} <= set(dir(mx))


def test_linalg_is_the_public_module():
    # the ops package's star import used to rebind mx.linalg to the internal ops.linalg
    assert mx.linalg.__name__ == "streamlet.core.linalg"
    assert not hasattr(mx.linalg, "_CHOL")


def test_star_import_gives_the_public_names():
    ns = {}
    exec("from streamlet.core import *", ns)
    assert set(ns) - {"__builtins__"} == set(mx.__all__)


def test_internals_stay_importable_by_module_path():
    code = ("import streamlet.core.graph, streamlet.core.scheduler, streamlet.core.ops.build\n"
            "from streamlet.core import graph\n"
            "from streamlet.core.ops.elementwise import UNARY\n"
            "assert graph.Node is streamlet.core.graph.Node and 'exp' in UNARY\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="the traceback module suggests from 3.12")
def test_misspelled_name_suggests_a_public_one():
    import traceback
    try:
        mx.gradd  # noqa: B018
    except AttributeError as exc:
        text = "".join(traceback.format_exception(exc))
    assert "Did you mean: 'grad'" in text


def test_leaf_features_load_on_first_use():
    code = ("import sys\nimport streamlet.core as mx\n"
            "lazy = ['streamlet.core.' + m for m in ('export', 'io', 'fft', 'fast', 'dot')]\n"
            "assert not [m for m in lazy if m in sys.modules], 'imported eagerly'\n"
            "assert mx.fft.fft(mx.ones(4)).tolist()[0] == 4 and callable(mx.save)\n"
            "assert mx.fast.rms_norm is sys.modules['streamlet.core.fast'].rms_norm\n"
            "assert 'export_function' in dir(mx) and 'streamlet.core.io' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
