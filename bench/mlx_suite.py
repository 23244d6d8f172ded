"""Run MLX's own Python tests against streamlet (through an import shim) and against MLX.

    .venv/bin/python bench/mlx_suite.py --tests MLX_REPO/python/tests [--impl streamlet]
        [--files test_ops,test_array] [--device cpu|gpu] [--out results.json]
    .venv/bin/python bench/mlx_suite.py --compare mlx.json streamlet.json

The tests are MLX's (fetch ml-explore/mlx and point --tests at its python/tests); none
of them is copied here.  With `--impl streamlet` a meta-path finder makes every
`mlx.X` import resolve to `streamlet.X`, so `import mlx.core as mx` is streamlet.core.
Each file runs in its own pytest process with a per-test timeout; the JSON output maps
"file::Class::test" to passed / failed / error / skipped.  `--compare` prints, file by
file, how many tests pass on MLX and how many of those pass on streamlet.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

SHIM = '''
import importlib, importlib.abc, importlib.util, sys

class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "mlx" or name.startswith("mlx."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        target = "streamlet" + spec.name[3:]
        module = importlib.import_module(target)
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


def run_file(path: Path, impl: str, device: str, timeout: int, shim: str | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (shim, str(path.parent)) if p)
    if device == "gpu":
        env["DEVICE"] = "gpu"
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "out.xml"
        cmd = [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider",
               "-p", "no:randomly", f"--junitxml={xml}", f"--timeout={timeout}",
               "-o", "addopts=", "--rootdir", str(path.parent)]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp,
                                  timeout=timeout * 20)
        except subprocess.TimeoutExpired:
            return {f"{path.stem}::<file>": "timeout"}
        if not xml.exists():
            return {f"{path.stem}::<file>": "crashed: " + proc.stdout[-2000:] + proc.stderr[-2000:]}
        return _parse(xml, path.stem) or {f"{path.stem}::<file>": "crashed: " + proc.stdout[-2000:]}


def _parse(xml: Path, stem: str) -> dict:
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{stem}::{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
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
    files = sorted({k.split("::")[0] for k in ref} | {k.split("::")[0] for k in new})
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tests", type=Path)
    p.add_argument("--impl", choices=["streamlet", "mlx"], default="streamlet")
    p.add_argument("--files", default="")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path)
    p.add_argument("--failures", action="store_true", help="with --compare: list regressions")
    args = p.parse_args()
    if args.compare:
        ref, new = (json.loads(x.read_text()) for x in args.compare)
        print(compare(ref, new))
        if args.failures:
            for k in sorted(ref):
                if ref[k] == "passed" and new.get(k) != "passed":
                    print(f"{k}\t{new.get(k, 'missing')}")
        return
    shim = _shim_dir() if args.impl == "streamlet" else None
    names = [n for n in args.files.split(",") if n] or sorted(
        x.stem for x in args.tests.glob("test_*.py"))
    results = {}
    for name in names:
        r = run_file(args.tests / f"{name}.py", args.impl, args.device, args.timeout, shim)
        ok = sum(v == "passed" for v in r.values())
        print(f"{name}: {ok}/{len(r)} passed", file=sys.stderr, flush=True)
        results.update(r)
    text = json.dumps(results, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
