"""The documentation site (docs/): its examples run, it builds without warnings, and every
public name is in its API reference with a docstring of its own.

Each page's Python blocks (`.. code-block:: python`) run top to bottom in one namespace,
in a fresh interpreter per page, as a reader would run them; the examples assert what
they show. The build needs the `docs` extra (Sphinx), which `dev` includes: without it
that test skips.
"""
import importlib.util
import inspect
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import public_api  # noqa: E402

BLOCK = re.compile(r"^( *)\.\. code-block:: python[ \t]*\n((?:\1 +:.*\n)*)", re.M)


def python_blocks(text):
    """[(line number of its first line, code)] of the page's Python code blocks."""
    out = []
    lines = text.splitlines()
    for m in BLOCK.finditer(text):
        start = text.count("\n", 0, m.end())  # index of the first line after the options
        while start < len(lines) and not lines[start].strip():
            start += 1
        indent = len(m.group(1))
        body = []
        for line in lines[start:]:
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            body.append(line)
        code = textwrap.dedent("\n".join(body)).rstrip("\n")
        out.append((start + 1, code + "\n"))
    return out


PAGES = sorted(p for p in DOCS.rglob("*.rst") if python_blocks(p.read_text()))

RUNNER = r"""
import sys, traceback
path, blocks = sys.argv[1], eval(sys.stdin.read())
ns = {"__name__": "__main__"}
for line, code in blocks:
    try:
        # padded so that a traceback's line numbers are the page's
        exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
    except BaseException:
        traceback.print_exc()
        print(f"the block at {path} line {line} failed", file=sys.stderr)
        sys.exit(1)
print(f"ran {len(blocks)} blocks")
"""


def test_the_pages_have_examples():
    names = {p.name for p in PAGES}
    assert {"streams.rst", "index.rst", "differences.rst"} <= names, names
    assert len(python_blocks((DOCS / "streams.rst").read_text())) >= 15


def test_block_extraction_keeps_indentation_and_stops_at_the_text():
    page = ("Intro\n\n.. code-block:: python\n   :caption: x\n\n   a = 1\n   if a:\n"
            "       b = 2\n\n   c = 3\n\nText after.\n\n  .. code-block:: python\n\n"
            "     d = 4\n")
    assert python_blocks(page) == [(6, "a = 1\nif a:\n    b = 2\n\nc = 3\n"), (16, "d = 4\n")]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_examples_run(page):
    blocks = python_blocks(page.read_text())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", RUNNER, str(page.relative_to(ROOT))],
                          input=repr(blocks), capture_output=True, text=True, timeout=240,
                          env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith(f"ran {len(blocks)} blocks")


# -- the API reference ---------------------------------------------------------------------
def _documented_objects():
    for modname in public_api.MODULES:
        module = public_api.load(modname)
        for name in public_api.public_names(modname):
            obj = getattr(module, name)
            if inspect.isroutine(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
                yield f"{modname}.{name}", obj


def test_every_module_has_public_names():
    counts = {m: len(public_api.public_names(m)) for m in public_api.MODULES}
    assert counts["streamlet.core"] > 250 and counts["streamlet.nn"] > 80, counts
    assert all(counts.values()), counts
    core = public_api.public_names("streamlet.core")
    for name in ("new_stream", "new_thread_local_stream", "get_streams", "random", "float32"):
        assert name in core
    for helper in ("np", "graph", "scheduler", "builtins", "annotations"):
        assert helper not in core


def test_every_public_name_has_a_docstring():
    missing = [name for name, obj in _documented_objects() if not public_api.has_own_doc(obj)]
    assert not missing, missing


STREAM_API = ["new_stream", "new_thread_local_stream", "new_thread_unsafe_stream",
              "default_stream", "set_default_stream", "stream", "synchronize", "get_streams",
              "clear_streams", "eval", "async_eval", "stream_from_thread_local_stream",
              "default_device", "set_default_device", "device_count", "is_available",
              "device_info", "Device", "Stream", "ThreadLocalStream", "StreamContext"]


@pytest.mark.parametrize("name", STREAM_API)
def test_stream_device_and_eval_api_has_args_and_returns(name):
    import streamlet.core as mx
    obj = getattr(mx, name)
    doc = inspect.getdoc(obj)
    takes = [p for p in inspect.signature(obj).parameters if p not in ("self",)] \
        if not inspect.isclass(obj) else ["(class)"]
    if takes and name not in ("Stream", "ThreadLocalStream"):
        assert "Args:" in doc, f"{name}: no Args section"
    if inspect.isclass(obj):
        assert "Attributes:" in doc or "Args:" in doc
    elif name not in ("set_default_stream", "set_default_device", "synchronize", "eval",
                      "async_eval", "clear_streams"):
        assert "Returns:" in doc, f"{name}: no Returns section"
    assert ">>>" in doc, f"{name}: no example"


def test_the_reference_pages_name_every_documented_module():
    listed = (DOCS / "api" / "index.rst").read_text()
    for modname in public_api.MODULES:
        assert (DOCS / "api" / f"{modname}.rst").exists()
        assert f"   {modname}\n" in listed


def _sphinx_runs():
    """Whether `python -m sphinx` can run: Sphinx installed, not just some folder named
    sphinx on the path (a namespace package, found but not runnable)."""
    try:
        return importlib.util.find_spec("sphinx.__main__") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _sphinx_runs(), reason="the docs extra (Sphinx) is not installed")
def test_site_builds_without_warnings_and_lists_every_public_name(tmp_path):
    out = tmp_path / "html"
    done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                           "--keep-going", "-E", "-d", str(tmp_path / "doctrees"),
                           str(DOCS), str(out)], capture_output=True, text=True, timeout=280,
                          cwd=ROOT)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr[-5000:]
    missing = []
    for modname in public_api.MODULES:
        html = (out / "api" / f"{modname}.html").read_text()
        for name in public_api.public_names(modname):
            obj = getattr(public_api.load(modname), name)
            if inspect.ismodule(obj):
                want = f"{modname}.{name}.html"
            elif inspect.isroutine(obj) or inspect.isclass(obj):
                want = f'id="{modname}.{name}"'
            else:
                want = f"<code class=\"docutils literal notranslate\"><span class=\"pre\">{name}"
            if want not in html:
                missing.append(f"{modname}.{name}")
    assert not missing, missing
    assert "Using streams" in (out / "streams.html").read_text()


# -- the page on MLX and the README agree on what is missing ---------------------------------
def _readme_section(title):
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"README has no section {title!r}"
    return m.group(1)


def _lacks():
    page = (DOCS / "differences.rst").read_text()
    return page.split("What streamlet lacks\n")[1]


def test_differences_page_lists_the_readme_not_implemented_items():
    readme = _readme_section("Not implemented (yet)")
    lacks = _lacks()
    spans = re.findall(r"`([^`]+)`", readme.split("\n\n")[0])
    assert len(spans) >= 8
    missing = [s for s in spans if f"``{s}``" not in lacks]
    assert not missing, missing
    bullets = len(re.findall(r"^- ", readme, re.M))
    assert len(re.findall(r"^- \*\*", lacks, re.M)) == bullets


def _mlx_names_streamlet_lacks():
    """MLX's public functions and classes (not its imported helpers) that streamlet lacks,
    as the docs write them: `name` for mlx.core, `fast.name` for mlx.core.fast, ..."""
    out = []
    for modname, mlxname in public_api.MODULES.items():
        try:
            oracle = public_api.load(mlxname)
        except ImportError:
            pytest.skip("needs the mlx oracle")
        ours = set(public_api.public_names(modname))
        for name in dir(oracle):
            obj = getattr(oracle, name)
            if name.startswith("_") or name in ours or inspect.ismodule(obj):
                continue
            home = getattr(obj, "__module__", None) or ""
            if home != mlxname and not home.startswith(mlxname + "."):
                continue  # imported there: typing constructs, tree_flatten in optimizers, ...
            prefix = "" if modname == "streamlet.core" else modname.split(".")[-1] + "."
            out.append(prefix + name)
    return out


def test_what_mlx_has_and_streamlet_lacks_is_in_the_readme_and_the_page():
    lacking = _mlx_names_streamlet_lacks()
    assert "gather_qqmm" in lacking  # the check sees a known gap
    readme, lacks = _readme_section("Not implemented (yet)"), _lacks()
    assert not [n for n in lacking if f"`{n}`" not in readme], lacking
    assert not [n for n in lacking if f"``{n}``" not in lacks], lacking


def test_array_members_have_docstrings():
    import streamlet.core as mx
    try:
        import mlx.core as mlx_core
        names = [n for n in dir(mlx_core.array) if not n.startswith("_")]
    except ImportError:
        names = [n for n in dir(mx.array) if not n.startswith("_")]
    missing = [n for n in names if not hasattr(mx.array, n)
               or not (inspect.getdoc(getattr(mx.array, n)) or "").strip()]
    assert not missing, missing
