"""Types as users meet them: the stubs of streamlet.core (written by stubs/gen.py) are
current and follow the code, and mypy accepts a typed program and reports each misuse."""
import ast
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "src" / "streamlet" / "core"
STUBS = {"streamlet.core": CORE / "__init__.pyi",
         **{f"streamlet.core.{m}": CORE / f"{m}.pyi"
            for m in ("cuda", "fast", "fft", "linalg", "metal", "random")},
         "streamlet.core.distributed": CORE / "distributed" / "__init__.pyi"}
PROGRAMS = ROOT / "tests" / "typed"


def _gen():
    spec = importlib.util.spec_from_file_location("stubgen", ROOT / "stubs" / "gen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _declared(tree):
    """Top-level names a stub declares, and its functions' (non-overloaded) definitions."""
    names, functions = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.FunctionDef) and not node.decorator_list:
                functions[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.asname == a.name}
    return names, functions


def _kinds(args: ast.arguments):
    out = [(a.arg, "POSITIONAL_ONLY") for a in args.posonlyargs]
    out += [(a.arg, "POSITIONAL_OR_KEYWORD") for a in args.args]
    out += [(args.vararg.arg, "VAR_POSITIONAL")] if args.vararg else []
    out += [(a.arg, "KEYWORD_ONLY") for a in args.kwonlyargs]
    out += [(args.kwarg.arg, "VAR_KEYWORD")] if args.kwarg else []
    return out


def test_stubs_are_current():
    gen = _gen()
    stale = gen.stale(gen.render())
    assert not stale, f"stale stubs {[str(p) for p in stale]}: run stubs/gen.py"


def test_stubs_declare_the_public_names_with_the_codes_parameters():
    for modname, path in STUBS.items():
        module = importlib.import_module(modname)
        names, functions = _declared(ast.parse(path.read_text()))
        assert set(module.__all__) <= names, modname
        for name, node in functions.items():
            if name.startswith("_") or name not in module.__all__:
                continue
            sig = inspect.signature(getattr(module, name))
            code = [(p.name, p.kind.name) for p in sig.parameters.values()]
            assert _kinds(node.args) == code, f"{modname}.{name}"


def _mypy(*files):
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
           "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", "--hide-error-context",
           *map(str, files)]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1), run.stdout + run.stderr  # 2: mypy itself failed
    return re.findall(r"^(\S+?):(\d+): error: .*\[([a-z-]+)\]$", run.stdout, re.M), run.stdout


def test_mypy_accepts_typed_use_and_reports_each_misuse():
    """Run as a user's program is: streamlet found installed, typed by its py.typed marker
    and stubs; then the stubs themselves (pyproject.toml's [tool.mypy] files)."""
    # without mypy, `python -m mypy` exits 1 as mypy does on errors, and would find none
    pytest.importorskip("mypy.api", reason="mypy (in the dev extra) is not installed")
    typed, misuse = PROGRAMS / "typed_use.py", PROGRAMS / "misuse.py"
    errors, out = _mypy(typed, misuse)
    marked = {(i, m.group(1)) for i, line in enumerate(misuse.read_text().splitlines(), 1)
              if (m := re.search(r"# E: ([a-z-]+)$", line))}
    assert len(marked) >= 10
    found = {(int(line), code) for path, line, code in errors if path.endswith("misuse.py")}
    assert found == marked, out
    assert not [e for e in errors if not e[0].endswith("misuse.py")], out
    errors, out = _mypy()
    assert not errors and "error" not in out, out  # the stubs and the typed program are clean
