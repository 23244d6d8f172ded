"""What the side-by-side scripts share: a median timer and the ops table of streamlet,
mlx and NumPy (scripts run as `python bench/NAME.py`, so this imports as `timing`)."""
from __future__ import annotations

import importlib.util
import pathlib
import statistics
import time


def median_time(fn, reps=5):
    """Median seconds of `fn()` over `reps` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def example_module(name):
    """The program `examples/NAME.py` as a module (the examples are scripts, not a package)."""
    path = pathlib.Path(__file__).parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare_ops(cases, arrays, modules):
    """Print one row per case: NumPy, then each module's build-and-eval, with ratios.

    `cases` maps a name to (NumPy call, fn(M, *inputs)); `arrays` are the NumPy inputs,
    made into evaluated arrays of each module first; `modules` maps a name to a module
    (None where it is not installed).
    """
    names = list(modules)
    print(f"{'op':36} {'numpy ms':>9} " + " ".join(f"{n + ' ms':>13}" for n in names)
          + f" {names[0] + '/np':>14}" + "".join(f" {names[0] + '/' + n:>14}" for n in names[1:]))
    for name, (np_fn, fn) in cases.items():
        t_np = median_time(np_fn)
        ts = [median_time(_lazy(m, fn, arrays)) if m is not None else float("nan")
              for m in modules.values()]
        print(f"{name:36} {t_np * 1e3:9.2f} " + " ".join(f"{t * 1e3:13.2f}" for t in ts)
              + f" {ts[0] / t_np:14.2f}" + "".join(f" {ts[0] / t:14.2f}" for t in ts[1:]))


def _lazy(M, fn, arrays):
    inputs = [M.array(x) for x in arrays]
    M.eval(*inputs)
    return lambda: M.eval(fn(M, *inputs))
