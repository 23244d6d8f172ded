"""The docstring examples of the public surface run, with `mx` bound to streamlet.core."""
import doctest
import importlib
import inspect

import numpy as np
import pytest

import streamlet.core as mx

# the public modules, and the internal ones whose module docstrings hold examples (dir(mx)
# no longer lists the modules streamlet.core is made of, so they are named here)
MODULES = ["streamlet.core", "streamlet.core.linalg", "streamlet.core.random",
           "streamlet.core.fft", "streamlet.core.export", "streamlet.core.gguf",
           "streamlet.core.io", "streamlet.core.capsule", "streamlet._public"]


def _public(module):
    for name in getattr(module, "__all__", None) or dir(module):
        if not name.startswith("_"):
            yield name, getattr(module, name)


def _collect():
    finder = doctest.DocTestFinder(recurse=False)
    seen, tests = set(), []
    for modname in MODULES:
        try:
            module = importlib.import_module(modname)
        except ImportError:
            continue
        objects = [(modname, module)] + [(f"{modname}.{n}", o) for n, o in _public(module)]
        objects += [(f"array.{n}", o) for n, o in vars(mx.array).items()
                    if not n.startswith("_") or n in ("__init__", "__getitem__")]
        for name, obj in objects:
            if id(obj) in seen or not (inspect.isroutine(obj) or inspect.isclass(obj)
                                       or inspect.ismodule(obj) or isinstance(obj, property)):
                continue
            seen.add(id(obj))
            target = obj.fget if isinstance(obj, property) else obj
            home = inspect.getmodule(target)
            try:
                found = finder.find(target, name, globs=dict(vars(home)) if home else {})
            except (TypeError, ValueError):
                continue
            tests += [t for t in found if t.examples]
    return tests


TESTS = _collect()


def test_there_are_examples_to_run():
    assert len(TESTS) >= 5


@pytest.mark.parametrize("test", TESTS, ids=[t.name for t in TESTS])
def test_docstring_example(test):
    test.globs = {**test.globs, "mx": mx, "np": np}  # as doctest would, plus `mx`
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append, clear_globs=False)
    if runner.summarize(verbose=False).failed:
        pytest.fail("".join(report), pytrace=False)


FOUNDATION = ["Device", "DeviceType", "default_device", "set_default_device", "is_available",
              "device_count", "device_info", "Stream", "ThreadLocalStream", "default_stream",
              "set_default_stream", "new_stream", "new_thread_unsafe_stream",
              "new_thread_local_stream", "stream_from_thread_local_stream", "get_streams",
              "stream", "StreamContext", "synchronize", "clear_streams", "array", "eval",
              "async_eval", "finfo", "iinfo", "issubdtype", "promote_types", "zeros", "ones",
              "full", "arange", "linspace", "eye", "identity", "zeros_like", "ones_like",
              "full_like", "where", "clip", "array_equal", "allclose", "isclose", "sum", "prod",
              "mean", "var", "std", "max", "min", "argmax", "argmin", "all", "any",
              "logsumexp", "reshape", "transpose", "swapaxes", "expand_dims", "squeeze",
              "flatten", "broadcast_to", "broadcast_shapes", "concatenate", "stack", "split",
              "matmul", "add", "exp", "erfinv", "less_equal", "logical_not"]


@pytest.mark.parametrize("name", FOUNDATION)
def test_foundation_names_exist_and_are_documented(name):
    obj = getattr(mx, name)
    assert (obj.__doc__ or "").strip(), f"{name} has no docstring"
    if name in ("inv", "solve"):
        return
    assert callable(obj)


@pytest.mark.parametrize("name", ["inv", "solve"])
def test_linalg_documented(name):
    assert (getattr(mx.linalg, name).__doc__ or "").strip()


def test_readme_example_runs_where_it_says(capsys):
    import pathlib
    import re
    readme = pathlib.Path(__file__).resolve().parents[1] / "README.md"
    code = re.search(r"```python\n(.*?)```", readme.read_text(), re.S).group(1)
    ns = {}
    exec(code, ns)
    printed = capsys.readouterr().out.strip()
    assert printed == re.search(r"print\(.*\)\s+# (.*)", code).group(1)
    s1, s2 = ns["s1"], ns["s2"]
    assert ns["b"]._node.stream.stream == s1
    assert ns["c"]._node.stream.stream == s2 and ns["d"]._node.stream.stream == s2
    a = np.array(ns["a"])
    np.testing.assert_allclose(np.array(ns["d"]), np.sin(a) * 2 + np.exp(a) + 1, rtol=1e-6)
