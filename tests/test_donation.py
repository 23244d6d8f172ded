"""Buffer donation (issue 9): an elementwise op writes into an input's buffer when nothing
can read that buffer again, so a chain of ops on an array nobody holds needs no new
memory; and never when anything can (a handle, a NumPy view, another node, a transform)."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import streamlet.core as mx

pytestmark = pytest.mark.usefixtures("on_cpu")  # the CPU backend donates; the GPU does not

N = 1 << 14  # float32 elements: 64 KiB, above the size the accounting watches


def fresh(seed=0):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def test_a_chain_on_an_array_nobody_holds_needs_no_new_memory():
    x = mx.array(fresh())
    mx.eval(x)
    before = mx.get_active_memory()
    mx.reset_peak_memory()
    y = x
    del x
    for _ in range(5):
        y = mx.exp(mx.reshape(mx.negative(y), (128, -1)).T.T.reshape(-1) * 0.5)
    mx.eval(y)
    assert mx.get_peak_memory() <= before
    want = fresh()
    for _ in range(5):
        want = np.exp(-want * np.float32(0.5))
    np.testing.assert_array_equal(np.array(y), want)


def test_a_binary_op_writes_into_its_unheld_operand():
    scale = mx.array(2.0)
    mx.eval(scale)
    a = mx.array(fresh())
    mx.eval(a)
    before = mx.get_active_memory()
    mx.reset_peak_memory()
    y = mx.multiply(a, scale)
    del a
    mx.eval(y)
    assert mx.get_peak_memory() <= before
    np.testing.assert_array_equal(np.array(y), fresh() * np.float32(2))


HOLDERS = {
    "a handle": lambda x: x,
    "a NumPy view": lambda x: np.asarray(x),
    "a NumPy view of a view": lambda x: np.asarray(x)[::2],
    "np.from_dlpack": lambda x: np.from_dlpack(x),
    "memoryview": lambda x: memoryview(np.asarray(x)),
    "stop_gradient of it": lambda x: mx.stop_gradient(x),
    "a reshape of it": lambda x: mx.reshape(x, (128, -1)),
    "another consumer": lambda x: mx.sin(x),
}


@pytest.mark.parametrize("holder", list(HOLDERS))
def test_an_input_someone_can_still_read_is_never_written(holder):
    x = mx.array(fresh())
    mx.eval(x)
    held = HOLDERS[holder](x)
    if isinstance(held, mx.array):
        mx.eval(held)
    before = np.array(held, copy=True)
    y = mx.exp(x)
    del x
    mx.eval(y)
    np.testing.assert_array_equal(np.array(held), before)
    np.testing.assert_array_equal(np.array(y), np.exp(fresh()))


def test_an_eval_output_is_never_written_by_a_later_op_of_the_same_eval():
    x = mx.array(fresh())
    a = mx.negative(x)
    b = mx.exp(a)  # a is an output too: b must not take its buffer
    del x
    mx.eval(a, b)
    np.testing.assert_array_equal(np.array(a), -fresh())
    np.testing.assert_array_equal(np.array(b), np.exp(-fresh()))


def test_gradients_see_the_forward_values():
    x0 = fresh(3)
    grad = mx.grad(lambda x: mx.sum(mx.exp(mx.sin(x) * 2.0)))(mx.array(x0))
    want = np.exp(np.sin(x0) * 2) * 2 * np.cos(x0)
    np.testing.assert_allclose(np.array(grad), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["multiply", "divide", "maximum"])
def test_an_eval_inside_a_traced_function_writes_into_no_input_a_rule_reads(mlx, op):
    """`z = op(w, exp(x))` run by an eval inside the function: exp(x) is held by z
    alone then, but the gradient of w reads it later."""
    w0, x0 = fresh(4), fresh(5)

    def loss(M):
        def f(w, x):
            z = getattr(M, op)(w, M.exp(x))
            M.eval(z)
            return M.sum(z * z)
        return M.grad(f)(M.array(w0), M.array(x0))
    np.testing.assert_allclose(np.array(loss(mx)), np.array(loss(mlx)), rtol=1e-5, atol=1e-5)


def test_threads_each_donating_on_their_own_streams():
    errors = []

    def work(seed):
        try:
            with mx.stream(mx.new_stream(mx.cpu)):
                for round_ in range(20):
                    keep = mx.array(fresh(seed))
                    y = mx.negative(mx.abs(keep + 0.0) * 1.0)
                    mx.eval(y)
                    np.testing.assert_array_equal(np.array(keep), fresh(seed))
                    np.testing.assert_array_equal(np.array(y), -np.abs(fresh(seed)))
        except Exception as exc:  # reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors, errors[0]


UNARY = [("negative", np.negative), ("abs", np.abs), ("exp", np.exp), ("sin", np.sin)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7), st.booleans(),
                          st.booleans()), min_size=1, max_size=25), st.integers(0, 2**31))
def test_random_programs_dropping_handles_keep_every_held_value(program, seed):
    """Random ops on a pool of arrays, handles dropped at random, evaluated at random: every
    array still held reads as NumPy computed it, whatever buffers were donated."""
    rng = np.random.default_rng(seed)
    pool = [(mx.array(v), v) for v in
            (rng.standard_normal(N).astype(np.float32) for _ in range(3))]
    for kind, pick, drop, evaluate in program:
        a, ref = pool[pick % len(pool)]
        if kind < len(UNARY):
            name, fn = UNARY[kind]
            out = (getattr(mx, name)(a), fn(ref))
        elif kind == 4:
            b, rb = pool[(pick + 1) % len(pool)]
            out = (a * b, ref * rb)
        else:
            out = (mx.reshape(a, (128, -1)).T.T.reshape(-1) + 1.0, ref + np.float32(1))
        if drop and len(pool) > 1:
            pool.pop(pick % len(pool))
        pool.append(out)
        if evaluate:
            mx.eval([p for p, _ in pool])
        del a, out
    for arr, ref in pool:
        np.testing.assert_array_equal(np.array(arr), ref)


def test_load_reads_when_evaluated_and_its_buffer_is_donated(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, fresh(5))
    keep = mx.array(fresh(6))
    mx.eval(keep)
    y = mx.load(path)
    mx.eval(y)
    one_loaded = mx.get_active_memory()
    del y
    mx.reset_peak_memory()
    y = mx.load(path) * mx.array(3.0)  # no data read yet: the file is read by the eval
    mx.eval(y)
    assert mx.get_peak_memory() <= one_loaded
    np.testing.assert_array_equal(np.array(y), fresh(5) * np.float32(3))
    np.testing.assert_array_equal(np.array(keep), fresh(6))


def test_a_load_never_evaluated_closes_its_file_quietly(tmp_path):
    import gc
    import warnings
    path = tmp_path / "x.npy"
    np.save(path, fresh())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        unread = mx.load(path)
        del unread
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)], seen
    assert mx.load(path).shape == (N,)


# -- compiled functions: their elementwise runs write into buffers they read last -----------

def _address(a):
    return np.asarray(a).__array_interface__["data"][0]


@pytest.mark.parametrize("size", [16, N])
def test_a_compiled_run_writes_into_the_input_nobody_holds(size):
    """Even a small one: the run checks once for all its ops."""
    f = mx.compile(lambda x: mx.sin(x) * 2.0 + 1.0)
    x = mx.arange(size, dtype=mx.float32)
    mx.eval(x)
    where = _address(x)
    y = f(x)
    del x
    mx.eval(y)
    assert _address(y) == where
    np.testing.assert_array_equal(
        np.array(y), np.sin(np.arange(size, dtype=np.float32)) * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("holder", ["a handle", "a NumPy view", "another consumer"])
def test_a_compiled_run_never_writes_into_an_input_someone_can_read(holder):
    f = mx.compile(lambda x: mx.exp(x) + 1.0)
    x = mx.array(fresh(1)[:16])
    mx.eval(x)
    held = HOLDERS[holder](x)
    if isinstance(held, mx.array):
        mx.eval(held)
    before = np.array(held, copy=True)
    y = f(x)
    del x
    mx.eval(y)
    np.testing.assert_array_equal(np.array(held), before)
    np.testing.assert_array_equal(np.array(y), np.exp(fresh(1)[:16]) + np.float32(1))


# steps a run may hold: ufuncs (which may write into what they read last), and steps that
# may return their input itself or a view of it (which must stop that)
STEPS = [
    (lambda a, b: mx.negative(a), lambda a, b: -a),
    (lambda a, b: mx.exp(a * 0.1), lambda a, b: np.exp(a * np.float32(0.1))),
    (lambda a, b: a + b, lambda a, b: a + b),
    (lambda a, b: mx.maximum(a, b), np.maximum),
    (lambda a, b: +a, lambda a, b: a),  # positive: the kernel returns its input
    (lambda a, b: mx.broadcast_to(a, a.shape) * 1.0, lambda a, b: a * np.float32(1)),
    (lambda a, b: a.astype(mx.float32), lambda a, b: a),
    (lambda a, b: mx.square(b[0]) + a, lambda a, b: np.square(b[0]) + a),  # a broadcast
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(STEPS) - 1), st.integers(0, 9),
                          st.integers(0, 9)), min_size=1, max_size=12),
       st.lists(st.integers(0, 12), max_size=3), st.integers(0, 2**31))
def test_random_compiled_programs_give_numpys_values_and_keep_their_inputs(steps, extra,
                                                                          seed):
    """Random elementwise programs compiled, their inputs dropped or held at random: the
    results are NumPy's, held inputs keep their values, and so do intermediate values the
    function also returns."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]

    def program(M, xs, ops):
        pool = list(xs)
        for kind, i, j in steps:
            pool.append(ops[kind](pool[i % len(pool)], pool[j % len(pool)]))
        return [pool[-1]] + [pool[k % len(pool)] for k in extra]

    want = program(np, values, [s[1] for s in STEPS])
    f = mx.compile(lambda *xs: program(mx, xs, [s[0] for s in STEPS]))
    keep = rng.random(3) < 0.5
    xs = [mx.array(v) for v in values]
    mx.eval(xs)
    held = [x for x, k in zip(xs, keep) if k]
    out = f(*xs)
    del xs
    mx.eval(out)
    for got, w in zip(out, want):
        np.testing.assert_array_equal(np.array(got), w)
    for x, v in zip(held, [v for v, k in zip(values, keep) if k]):
        np.testing.assert_array_equal(np.array(x), v)


def test_a_compiled_run_never_writes_into_a_value_a_step_returned_as_it_was():
    """floor of integers is its input itself: a later ufunc reading that input last must
    not write into it while the floor's result is still to be read."""
    def fun(x):
        f = -x.astype(mx.int32)
        p = mx.floor(f)  # the same ndarray as f
        q = f * 3  # f's last read
        return p + q
    x = np.arange(-8, 8, dtype=np.float32)
    f = -x.astype(np.int32)
    want = f + f * 3
    a = mx.array(x)
    mx.eval(a)
    y = mx.compile(fun)(a)
    del a
    np.testing.assert_array_equal(np.array(y), want)
