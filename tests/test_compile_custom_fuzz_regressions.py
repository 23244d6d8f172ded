"""Cases a differential fuzz of compile, custom_function, checkpoint and export against
MLX 0.32.4 found: the result (value, dtype, shape, the error raised, or how often the
Python function ran) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx

TRANSFORMS = {
    "grad": lambda M, f, x: M.grad(lambda a: f(a).sum())(x),
    "value_and_grad": lambda M, f, x: M.value_and_grad(lambda a: f(a).sum())(x)[1],
    "vjp": lambda M, f, x: M.vjp(f, [x], [M.ones_like(x)])[1][0],
    "jvp": lambda M, f, x: M.jvp(f, [x], [M.ones_like(x)])[1][0],
    "vmap": lambda M, f, x: M.vmap(f)(M.stack([x, 2 * x])),
    "compile": lambda M, f, x: M.compile(lambda a: f(a) + 1)(x),
}


def _transformed_calls(M, transform):
    calls = []

    def body(x):
        calls.append(1)
        return M.sin(x) * x

    compiled = M.compile(body)
    x = M.array([0.5, -1.0, 2.0])
    compiled(x)  # traced once, outside any transform
    values = [TRANSFORMS[transform](M, compiled, x * k).tolist() for k in (1, 2, 3)]
    return values, len(calls)


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_a_transform_of_a_compiled_function_runs_its_python_body(mlx, transform):
    """A compiled function called on a transform's tracers (grad, vmap, an outer compile's
    trace) runs the function itself, as MLX does ("a transformation of a compiled function
    will not by default be compiled"): its body ran 4 times here, where it replayed the
    first trace and ran once."""
    got, want = _transformed_calls(mx, transform), _transformed_calls(mlx, transform)
    assert got[1] == want[1]
    np.testing.assert_allclose(np.array(got[0]), np.array(want[0]), rtol=1e-5)


@pytest.mark.parametrize("result", ["(x * 2, 5)", "(x, None)", "5", "[x, {'a': (x, 1.5)}]"])
def test_custom_function_with_a_rule_refuses_non_array_outputs(mlx, result):
    """With a vjp given, every leaf of the result must be an array (MLX flattens it
    strictly): `(x * 2, 5)` raised nothing and its gradient came out."""
    for M in (mx, mlx):
        f = M.custom_function(lambda x: eval(result))
        f.vjp(lambda x, cotangent, output: x)
        with pytest.raises(ValueError, match="tree_flatten"):
            f(M.array([1.0, 2.0]))


def test_checkpoint_still_takes_non_array_outputs(mlx):
    """The strict outputs above are custom_function's with a rule: a checkpoint returns
    `(x * 2, 5)` and differentiates through it, in MLX as here."""
    def run(M):
        ck = M.checkpoint(lambda x: (x * 2, 5))
        out = ck(M.array([1.0, 2.0]))
        grad = M.grad(lambda x: ck(x)[0].sum())(M.array([1.0, 2.0]))
        return out[0].tolist(), out[1], grad.tolist()
    assert run(mx) == run(mlx)


def _placeholder_errors(M):
    """The errors of evaluating a traced input itself inside the function, and of reading
    one that escaped the trace afterwards (MLX's "Pure Functions" example)."""
    seen, leak = [], []

    def f(x):
        try:
            M.eval(x)
            seen.append(None)
        except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
            seen.append(type(e).__name__)
        leak.append(x)
        return x * 2

    M.compile(f)(M.array(1.0))
    try:
        M.eval(leak[0] + 1)
        seen.append(None)
    except Exception as e:  # noqa: BLE001
        seen.append(type(e).__name__)
    return seen


def test_evaluating_a_traced_input_raises_as_mlx(mlx):
    assert _placeholder_errors(mx) == _placeholder_errors(mlx) == ["ValueError",
                                                                   "RuntimeError"]
