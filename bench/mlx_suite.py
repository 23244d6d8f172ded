"""Run MLX's own Python tests against streamlet (through an import shim) and against MLX.

    .venv/bin/python bench/mlx_suite.py --tests MLX_REPO/python/tests [--impl streamlet]
        [--files test_ops,test_array] [--device cpu|gpu] [--out results.json]
    .venv/bin/python bench/mlx_suite.py --compare mlx.json streamlet.json
    .venv/bin/python bench/mlx_suite.py --compare-times mlx_t.json streamlet_t.json
    .venv/bin/python bench/mlx_suite.py --tests ... --files mpi_test_distributed --launch 8

The tests are MLX's (fetch ml-explore/mlx and point --tests at its python/tests); none
of them is copied here.  With `--impl streamlet` a meta-path finder makes every
`mlx.X` import resolve to `streamlet.X`, so `import mlx.core as mx` is streamlet.core.
Each file runs in its own pytest process with a per-test timeout; the JSON output maps
"file::Class::test" to passed / failed / error / skipped.  `--compare` prints, file by
file, how many tests pass on MLX and how many of those pass on streamlet.

`--launch N` runs each file as N processes under `python -m streamlet.launch` (MLX's
`mpi_test_distributed.py` wants 8); a test passes when it passes in every process.  With
`--stubs`, an `mlx.X` that streamlet does not have yet (or a name missing from a module
other than mlx.core) imports as a stub that raises NotImplementedError when used, so a
file fails only the tests that need it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SHIM = '''
import importlib, importlib.abc, importlib.util, os, sys, types

def _stub(name):
    module = types.ModuleType(name)
    def missing(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        def absent(*args, **kwargs):
            raise NotImplementedError(f"streamlet has no {name}.{attr} yet")
        return absent
    module.__getattr__ = missing
    module.__path__ = []
    return module

class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "mlx" or name.startswith("mlx."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        target = "streamlet" + spec.name[3:]
        try:
            module = importlib.import_module(target)
        except ImportError as exc:  # missing, or not importable yet (work in progress)
            if not os.environ.get("MLX_SHIM_STUBS") or (
                    isinstance(exc, ModuleNotFoundError) and not target.startswith(exc.name or "")):
                raise
            module = _stub(spec.name)
        if os.environ.get("MLX_SHIM_STUBS") and not spec.name.startswith("mlx.core") \
                and not hasattr(module, "__getattr__"):
            module.__getattr__ = _stub(spec.name).__getattr__  # names not written yet
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass

sys.meta_path.insert(0, _Alias())
'''


def _shim_dir() -> str:
    d = Path(tempfile.mkdtemp(prefix="mlx-shim-"))
    (d / "sitecustomize.py").write_text(SHIM)
    return str(d)


# One process of a launched run: pytest with a report of its own, named by the MPI rank.
RANKED = """import os, sys, pytest
rank = next((os.environ[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
             if v in os.environ), "0")
sys.exit(pytest.main(sys.argv[2:] + [f"--junitxml={sys.argv[1]}/out.{rank}.xml"]))
"""


def run_file(path: Path, impl: str, device: str, timeout: int, shim: str | None,
             launch: int = 0, stubs: bool = False) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (shim, str(path.parent),
                                                     os.environ.get("PYTHONPATH")) if p)
    if device == "gpu":
        env["DEVICE"] = "gpu"
    if stubs:
        env["MLX_SHIM_STUBS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "out.xml"
        opts = [str(path), "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                f"--timeout={timeout}", "-o", "addopts=", "--rootdir", str(path.parent)]
        if launch:
            cmd = [sys.executable, "-m", "streamlet.launch", "-n", str(launch),
                   sys.executable, "-c", RANKED, tmp] + opts
        else:
            cmd = [sys.executable, "-m", "pytest"] + opts + [f"--junitxml={xml}"]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp,
                                  timeout=timeout * 20)
        except subprocess.TimeoutExpired:
            return {f"{path.stem}::<file>": "timeout"}
        xmls = sorted(Path(tmp).glob("out*.xml"))
        if not xmls or (launch and len(xmls) != launch):
            return {f"{path.stem}::<file>": "crashed: " + proc.stdout[-2000:] + proc.stderr[-2000:]}
        return _merge([_parse(x, path.stem) for x in xmls]) or {
            f"{path.stem}::<file>": "crashed: " + proc.stdout[-2000:]}


def _merge(runs: list) -> dict:
    """Per test: passed where every process passed it, else the first other outcome."""
    out = {}
    for run in runs:
        for name, status in run.items():
            if out.get(name, "passed") == "passed":
                out[name] = status
    return out


TIMES: dict = {}  # "file::Class::test" -> seconds, as pytest's report gives them


def _parse(xml: Path, stem: str) -> dict:
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{stem}::{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        TIMES[name] = max(TIMES.get(name, 0.0), float(case.get("time") or 0.0))
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                status = child.tag if child.tag == "error" else "failed"
                status += ": " + (child.get("message") or "")[:300]
            elif child.tag == "skipped":
                status = "skipped"
        out[name] = status
    return out


def compare(ref: dict, new: dict) -> str:
    files = sorted({k.split("::")[0] for k in new})
    rows = ["| file | MLX passes | streamlet passes (of those) | streamlet only |",
            "| --- | ---: | ---: | ---: |"]
    tot = [0, 0, 0]
    for f in files:
        ok_ref = {k for k, v in ref.items() if k.startswith(f + "::") and v == "passed"}
        ok_new = {k for k, v in new.items() if k.startswith(f + "::") and v == "passed"}
        vals = [len(ok_ref), len(ok_ref & ok_new), len(ok_new - ok_ref)]
        tot = [t + v for t, v in zip(tot, vals)]
        rows.append(f"| {f} | " + " | ".join(map(str, vals)) + " |")
    rows.append("| **total** | " + " | ".join(f"**{v}**" for v in tot) + " |")
    return "\n".join(rows)


def compare_times(ref: dict, new: dict, top: int = 15) -> str:
    """Seconds of the tests timed in both runs, file by file and in all, and the tests
    whose time exceeds the reference's most."""
    both = sorted(set(ref) & set(new))
    rows = ["| file | MLX s | streamlet s | ratio |", "| --- | ---: | ---: | ---: |"]
    for f in sorted({k.split("::")[0] for k in both}):
        r = sum(ref[k] for k in both if k.startswith(f + "::"))
        n = sum(new[k] for k in both if k.startswith(f + "::"))
        rows.append(f"| {f} | {r:.1f} | {n:.1f} | {n / r if r else float('nan'):.2f} |")
    r, n = sum(ref[k] for k in both), sum(new[k] for k in both)
    rows.append(f"| **total** | **{r:.1f}** | **{n:.1f}** | **{n / r:.2f}** |")
    rows.append("\nmost above MLX's time:")
    for k in sorted(both, key=lambda k: ref[k] - new[k])[:top]:
        rows.append(f"{k}\t{ref[k]:.2f} s\t{new[k]:.2f} s")
    return "\n".join(rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tests", type=Path)
    p.add_argument("--impl", choices=["streamlet", "mlx"], default="streamlet")
    p.add_argument("--files", default="")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--jobs", "-j", type=int, default=1, help="test files run at once")
    p.add_argument("--out", type=Path)
    p.add_argument("--times", type=Path, help="write each test's seconds here (JSON)")
    p.add_argument("--compare", nargs=2, type=Path)
    p.add_argument("--compare-times", nargs=2, type=Path)
    p.add_argument("--failures", action="store_true", help="with --compare: list regressions")
    p.add_argument("--launch", type=int, default=0, help="run each file as N processes")
    p.add_argument("--stubs", action="store_true", help="stub mlx modules streamlet lacks")
    args = p.parse_args()
    if args.compare_times:
        ref, new = (json.loads(x.read_text()) for x in args.compare_times)
        print(compare_times(ref, new))
        return
    if args.compare:
        ref, new = (json.loads(x.read_text()) for x in args.compare)
        print(compare(ref, new))
        if args.failures:
            files = {k.split("::")[0] for k in new}
            for k in sorted(ref):
                if k.split("::")[0] in files and ref[k] == "passed" and new.get(k) != "passed":
                    print(f"{k}\t{new.get(k, 'missing')}")
        return
    shim = _shim_dir() if args.impl == "streamlet" else None
    if args.tests is not None:
        args.tests = args.tests.resolve()
    names = [n for n in args.files.split(",") if n] or sorted(
        x.stem for x in args.tests.glob("test_*.py"))
    results = {}

    def one(name):
        return name, run_file(args.tests / f"{name}.py", args.impl, args.device, args.timeout,
                              shim, args.launch, args.stubs)
    with ThreadPoolExecutor(args.jobs) as pool:  # files in parallel processes
        for name, r in pool.map(one, names):
            ok = sum(v == "passed" for v in r.values())
            print(f"{name}: {ok}/{len(r)} passed", file=sys.stderr, flush=True)
            results.update(r)
    text = json.dumps(results, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    if args.times:
        args.times.write_text(json.dumps(TIMES, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
