"""Repeated evals as programs (`core.auto_graph`): a GPU stream's by default; here the
CPU's too (the same plans, run step by step on NumPy), so that each result can be
compared bit for bit with the plain eval's."""
import copy
import importlib.util
import pathlib
import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx
import streamlet.nn as nn
from conftest import errors_of_threads, requires_gpu
from streamlet.core import auto_graph, gpu_program

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def on_the_cpu():
    """The CPU as default device whatever the suite's (`STREAMLET_TEST_DEVICE`): programs
    are counted and compared bit for bit where they run step by step on NumPy; the GPU's
    test names its devices."""
    was = mx.default_device()
    mx.set_default_device(mx.cpu)
    yield
    mx.set_default_device(was)


@pytest.fixture
def programs(monkeypatch):
    """Programs on CPU streams too, for graphs of 4 nodes or more; counts program runs."""
    monkeypatch.setattr(auto_graph, "DEVICES", {0, 1})
    monkeypatch.setattr(auto_graph, "MIN_NODES", 4)
    monkeypatch.setattr(auto_graph, "MIN_RUN", 4)
    runs = []
    real = gpu_program.WHOLE.kernel

    def counted(*args, **params):
        runs.append(params["program"])
        return real(*args, **params)
    monkeypatch.setattr(gpu_program.WHOLE, "kernel", counted)
    auto_graph.forget()
    yield runs
    auto_graph.forget()


def _off(monkeypatch):
    monkeypatch.setattr(auto_graph, "ON", False)


def mlp_step(params, x, y, lr=0.1):
    def loss(params):
        h = x
        for w, b in params:
            h = mx.maximum(h @ w + b, 0.0)
        return mx.mean(mx.square(h - y))
    value, grads = mx.value_and_grad(loss)(params)
    return value, grads, [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)]


def _train(steps=5):
    rng = np.random.default_rng(3)
    params = [(mx.array(rng.standard_normal((8, 8)).astype(np.float32) * 0.3),
               mx.array(rng.standard_normal(8).astype(np.float32))) for _ in range(3)]
    x = mx.array(rng.standard_normal((5, 8)).astype(np.float32))
    y = mx.array(rng.standard_normal((5, 8)).astype(np.float32))
    values, grads = [], []
    for _ in range(steps):
        v, g, params = mlp_step(params, x, y)
        mx.eval(v, params)
        values.append(np.array(v))
        grads.append(np.array(g[0][0]))  # held by the loop: computed by the eval too
    return values, grads, [np.array(a) for p in params for a in p]


def test_a_repeated_training_step_runs_as_programs_with_the_same_bits(programs, monkeypatch):
    got = _train()
    # the first eval's ops and shapes are seen, the second's structure, each later one runs
    # as one program (no index checks in it)
    assert len(programs) == 3
    assert len({id(p) for p in programs}) == 1
    _off(monkeypatch)
    want = _train()
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def _graph(x, held=None):
    """Eight nodes from x; `held` gets the middle one."""
    h = mx.exp(mx.sin(x) * 2.0)
    mid = mx.sqrt(h + 1.0)
    if held is not None:
        held.append(mid)
    return mx.sum(mx.tanh(mid) - mid * 0.5, axis=0)


def _middle(xv):
    """`_graph`'s middle node in NumPy, in xv's dtype."""
    d = xv.dtype.type
    return np.sqrt(np.exp(np.sin(xv) * d(2)) + d(1))


def _out(xv):
    m = _middle(xv)
    return (np.tanh(m) - m * xv.dtype.type(0.5)).sum(0)


def test_an_array_the_caller_holds_is_computed_by_the_program(programs):
    for k in range(4):
        held = []
        x = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
        out = _graph(x, held)
        mx.eval(out)
        assert held[0]._node.data is not None  # computed by this eval, not left for later
        np.testing.assert_allclose(np.array(held[0]), _middle(np.array(x)), rtol=1e-6)
    assert len(programs) == 2


def test_a_node_nobody_holds_goes_with_its_graph(programs):
    """Left out of the program's results: nothing computes it, nothing keeps it."""
    for k in range(4):
        held = []
        out = _graph(mx.array(RNG.standard_normal((3, 4)).astype(np.float32)), held)
        ref = weakref.ref(held.pop()._node)
        mx.eval(out)
        if k == 3:
            gc.collect()
            assert ref() is None
    assert len(programs) == 2


def test_a_node_an_unevaluated_array_reads_is_computed_for_it(programs):
    """An array built on an intermediate and not evaluated yet holds it: a result, so the
    later eval of that array reads it rather than computing it again."""
    for k in range(4):
        xv = RNG.standard_normal((3, 4)).astype(np.float32)
        held = []
        out = _graph(mx.array(xv), held)
        later = held.pop() * 3.0
        mx.eval(out)
        assert later._node.inputs[0].data is not None
        np.testing.assert_allclose(np.array(later), _middle(xv) * np.float32(3), rtol=1e-6)
    assert len(programs) == 2


def test_params_that_differ_in_bits_make_other_graphs(programs):
    """0.0 and -0.0 are equal but not the same fill; a program keyed by equality would
    give one's sign for the other."""
    signs = []
    for fill in (0.0, 0.0, -0.0, -0.0, 0.0):
        a = mx.full((4,), fill) * 1.0
        b = mx.full((4,), fill) * 2.0
        out = mx.multiply(mx.add(a, b), 1.0)
        mx.eval(out)
        signs.append(bool(np.signbit(np.array(out)).all()))
    assert signs == [False, False, True, True, False]


def test_graphs_with_slices_repeat_and_other_bounds_make_other_graphs(programs):
    """A basic slice is part of the key (slices hash only from Python 3.12 on)."""
    xv = RNG.standard_normal((6, 4)).astype(np.float32)
    for stop in (3, 3, 3, 2, 2, 3):
        h = mx.exp(mx.array(xv)[1:stop] * 2.0)
        out = mx.sum(h * h + 1.0, axis=0)
        mx.eval(out)
        np.testing.assert_allclose(np.array(out), (np.exp(xv[1:stop] * 2) ** 2 + 1).sum(0),
                                   rtol=1e-5)
    # the third and the last runs with stop 3 take the program of the second's structure
    assert len(programs) == 2


_PARAM_VALUES = st.recursive(
    st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.sampled_from(["a", "b"]),
              st.floats(allow_nan=False, width=32), st.sampled_from([-0.0, 0.0]),
              st.sampled_from([np.dtype(np.float32), np.dtype(np.int32), np.dtype(">f4")]),
              st.builds(slice, st.integers(0, 3), st.integers(0, 3))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(st.sampled_from(["x", "y", "z"]), inner,
                                            max_size=3)),
    max_leaves=6)


def _exactly(a, b):
    """Equal values of equal types all the way down, floats by their bits."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(map(_exactly, a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(map(_exactly, a.values(), b.values()))
    if type(a) is float:
        return a.hex() == b.hex()
    if type(a) is slice:
        return _exactly((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    return a == b


def _lookalike(v):
    """`v` with every leaf and sequence swapped for one that `==` may not tell apart."""
    if type(v) is bool:
        return int(v)
    if type(v) is int:
        return bool(v) if v in (0, 1) else float(v)
    if type(v) is float:
        return -v if v == 0 else v
    if type(v) in (list, tuple):
        return (tuple if type(v) is list else list)(map(_lookalike, v))
    if type(v) is dict:
        return {k: _lookalike(x) for k, x in v.items()}
    if type(v) is slice:
        return slice(_lookalike(v.start), _lookalike(v.stop))
    return v.newbyteorder() if isinstance(v, np.dtype) else v


@settings(max_examples=300, deadline=None)
@given(_PARAM_VALUES, _PARAM_VALUES)
def test_params_keys_are_equal_only_for_the_same_values(a, b):
    """True is not 1, 0.0 is not -0.0, (True,) is not (1,): equal keys mean equal params."""
    ka = auto_graph.frozen(a)
    hash(ka)
    for other in (b, _lookalike(a), copy.deepcopy(a)):
        assert (ka == auto_graph.frozen(other)) == _exactly(a, other)


def test_leaves_of_other_shapes_and_dtypes_make_other_graphs(programs):
    for shape, dtype in [((3, 4), np.float32), ((3, 4), np.float32), ((5, 4), np.float32),
                         ((5, 4), np.float16), ((5, 4), np.float16), ((3, 4), np.float32)]:
        xv = RNG.standard_normal(shape).astype(dtype)
        out = _graph(mx.array(xv))
        mx.eval(out)
        assert out.shape == (4,) and np.array(out).dtype == dtype
        np.testing.assert_allclose(np.array(out), _out(xv),
                                   rtol=2e-3 if dtype == np.float16 else 1e-5)
    # ops and shapes seen first, then structures: the second float16 and the last run so
    assert len(programs) == 2


def test_index_checks_run_between_programs_and_still_raise(programs):
    table = mx.array(RNG.standard_normal((6, 4)).astype(np.float32))
    for idx in ([1, 2, 3], [0, 5, 1], [2, 2, 4]):
        out = _graph(_graph(table)[None] + mx.take(table, mx.array(idx), axis=0))
        mx.eval(out)
    assert len(programs) >= 2
    with pytest.raises((IndexError, ValueError, RuntimeError)):
        out = _graph(_graph(table)[None] + mx.take(table, mx.array([0, 9, 1]), axis=0))
        mx.eval(out)
        out.tolist()


def test_a_program_that_fails_raises_and_later_evals_go_on(programs, monkeypatch):
    """exp's kernel fails in the fourth eval, inside its program: the results fail with
    its error (as the plain eval's would), and later evals of the same graph run again."""
    prim = mx.exp(mx.ones(1))._node.prim
    real, broken = prim.kernel, []

    def kernel(xp, *args, **params):
        if broken:
            raise FloatingPointError("exp broke")
        return real(xp, *args, **params)
    monkeypatch.setattr(prim, "kernel", kernel)
    monkeypatch.setattr(prim, "donate", None)  # (NumPy's ufunc would write in place)
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    for _ in range(3):
        mx.eval(_graph(mx.array(xv)))
    assert programs
    broken.append(True)
    out = _graph(mx.array(xv))
    with pytest.raises(RuntimeError, match="exp broke"):
        mx.eval(out)
    with pytest.raises(RuntimeError, match="exp broke"):
        out.tolist()
    assert len(programs) == 2
    broken.clear()
    np.testing.assert_allclose(np.array(_graph(mx.array(xv))), _out(xv), rtol=1e-5)
    assert len(programs) == 3


def test_graphs_a_transform_traces_run_as_they_are(programs):
    def f(x):
        y = _graph(x)
        mx.eval(y)  # inside the transform: its nodes keep their graph
        return mx.sum(y * y)
    x = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
    grads = [np.array(mx.grad(f)(x)) for _ in range(3)]
    for g in grads[1:]:
        np.testing.assert_array_equal(g, grads[0])


def test_threads_repeating_one_graph_share_its_program(programs):
    def work(seed):
        rng = np.random.default_rng(seed)
        with mx.stream(mx.new_stream(mx.cpu)):
            for _ in range(6):
                xv = rng.standard_normal((3, 4)).astype(np.float32)
                out = _graph(mx.array(xv))
                mx.eval(out)
                np.testing.assert_allclose(np.array(out), _out(xv), rtol=1e-5)
    errors = errors_of_threads(work, 4)
    assert not errors, errors
    assert len({id(p) for p in programs}) == 1 and len(programs) == 4 * 6 - 2


def test_clear_cache_forgets_the_programs(programs):
    for _ in range(3):
        mx.eval(_graph(mx.ones((3, 4))))
    assert len(programs) == 1 and auto_graph._seen
    mx.clear_cache()
    assert not auto_graph._seen
    gc.collect()
    for _ in range(2):
        mx.eval(_graph(mx.ones((3, 4))))
    assert len(programs) == 1  # seen anew


_OPS = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: mx.maximum(a, b),
        lambda a, b: a - b * 0.5, lambda a, b: mx.exp(-mx.abs(a)) + b,
        lambda a, b: mx.sum(a, axis=-1, keepdims=True) * b,
        lambda a, b: (a @ b.T) @ b * 0.1]


def _same_bits_with_and_without_programs(run):
    """`run()` (lists of results of its evals) with programs from 2 nodes on any stream,
    then plainly: the same bits."""
    auto_graph.forget()
    saved = auto_graph.DEVICES, auto_graph.MIN_NODES, auto_graph.MIN_RUN
    auto_graph.DEVICES, auto_graph.MIN_NODES, auto_graph.MIN_RUN = {0, 1}, 2, 2
    try:
        got = run()
    finally:
        auto_graph.DEVICES, auto_graph.MIN_NODES, auto_graph.MIN_RUN = saved
        auto_graph.forget()
    want = run()
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_OPS) - 1), st.integers(0, 50),
                          st.integers(0, 50)), min_size=4, max_size=24),
       st.integers(0, 2**16))
def test_random_graphs_give_the_plain_evals_bits(ops, seed):
    """A random graph of ops over a few leaves, evaluated three times on new leaf values
    (and some intermediates held), as programs and plainly."""
    def run():
        rng = np.random.default_rng(seed)
        outs = []
        for _ in range(3):
            values = [mx.array(rng.standard_normal((3, 3)).astype(np.float32))
                      for _ in range(3)]
            held = []
            for k, (op, i, j) in enumerate(ops):
                values.append(_OPS[op](values[i % len(values)], values[j % len(values)]))
                if k % 5 == 2:
                    held.append(values[-1])
            mx.eval(values[-1])
            outs.append([np.array(a) for a in [values[-1]] + held])
        return outs
    _same_bits_with_and_without_programs(run)


def test_runs_reading_too_much_stay_nodes(monkeypatch, programs):
    """A program would keep a copy of what it reads: over the bound, no program."""
    monkeypatch.setattr(auto_graph, "MAX_INPUT_BYTES", 3 * 4 * 4 - 1)
    for _ in range(4):
        xv = RNG.standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(np.array(_graph(mx.array(xv))), _out(xv), rtol=1e-5)
    assert not programs
    monkeypatch.setattr(auto_graph, "MAX_INPUT_BYTES", 3 * 4 * 4 + 64)  # x and scalars
    auto_graph.forget()
    for _ in range(3):
        mx.eval(_graph(mx.ones((3, 4))))
    assert len(programs) == 1


def test_the_setting_turns_it_off(monkeypatch, programs):
    _off(monkeypatch)
    for _ in range(3):
        mx.eval(_graph(mx.ones((3, 4))))
    assert not programs and not auto_graph._seen


@requires_gpu
def test_a_repeated_training_step_on_the_gpu_is_captured_with_the_cpus_values(monkeypatch):
    """An embedding, a product, a gather of the targets and its scatter in the gradient:
    the steps between the index-checking nodes become programs, captured into CUDA graphs
    from their second run; every step's loss and the final weights are the CPU's."""
    rng = np.random.default_rng(8)
    table0 = rng.standard_normal((16, 8)).astype(np.float32)
    w0 = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
    tokens = rng.integers(0, 16, (6, 5)).astype(np.int32)

    def train(device):
        with mx.stream(device):
            table, w = mx.array(table0), mx.array(w0)
            x, y = mx.array(tokens[:, :-1]), mx.array(tokens[:, 1:])

            def loss(table, w):
                h = mx.tanh(table[x] * 1.5) @ w
                picked = mx.take_along_axis(h, y[..., None], axis=-1)[..., 0]
                return mx.mean(mx.logsumexp(h, axis=-1) - picked)
            losses = []
            for _ in range(6):
                v, (gt, gw) = mx.value_and_grad(loss, argnums=(0, 1))(table, w)
                table, w = table - 0.5 * gt, w - 0.5 * gw
                mx.eval(v, table, w)
                losses.append(v.item())
            return losses, np.array(table), np.array(w)
    monkeypatch.setattr(auto_graph, "MIN_NODES", 4)  # runs of 8 and 21 nodes
    auto_graph.forget()
    got = train(mx.gpu)
    captured = [st for _, plan in auto_graph._seen.values() if plan for seg in plan
                for st in seg.program.native.values()]
    assert captured and all(getattr(st, "graph", None) is not None for st in captured)
    want = train(mx.cpu)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4)
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _decode(steps=9):
    """The example Llama's greedy decoding, its caches growing a row a token (their shapes
    and RoPE's offset change each step): the tokens and each step's last logits."""
    spec = importlib.util.spec_from_file_location(
        "llama", pathlib.Path(__file__).parent.parent / "examples" / "llama.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    mx.random.seed(0)
    model = example.llama(nn, mx)(example.CONFIG)
    mx.eval(model.parameters())
    logits, cache = model(mx.array([[3, 17, 5, 42, 9]]))
    tokens, last = [], []
    for _ in range(steps):
        logits = logits[:, -1, :]
        token = mx.argmax(logits, axis=-1)
        mx.eval(token, logits)
        tokens.append(token.item())
        last.append(np.array(logits))
        logits, cache = model(token[:, None], cache)
    return tokens, last


def test_a_decode_loop_runs_as_programs_between_the_nodes_that_change(programs, monkeypatch):
    """The steps' ops repeat with other shapes: the nodes whose shapes changed (the
    caches' concatenations) and those reading a changed shape (attention) run as they
    are between programs (RoPE's offset is a scalar input of one), from the fourth
    decoding step on (ops seen, then what changed, then the masked structure); every
    logit is the plain eval's."""
    got = _decode()
    assert programs
    per_step = len({id(p) for p in programs})
    assert len(programs) == per_step * 5 and per_step >= 3  # the layers' runs, and the head
    _off(monkeypatch)
    want = _decode()
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a, b)


def test_evals_that_change_in_most_nodes_are_not_programs(programs):
    for n in range(3, 9):
        xv = RNG.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(np.array(_graph(mx.array(xv))), _out(xv), rtol=1e-5)
    assert not programs


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_OPS) + 1), st.integers(0, 50),
                          st.integers(0, 50)), min_size=4, max_size=24),
       st.integers(0, 2**16))
def test_random_graphs_over_a_growing_cache_give_the_plain_evals_bits(ops, seed):
    """As above, with a cache that grows a row each eval (read through its sum over rows,
    and extended by a row of a value) and a param that changes each eval (a roll's
    shift): seven evals, the later ones through loosely keyed plans."""
    def run():
        rng = np.random.default_rng(seed)
        cache = mx.array(rng.standard_normal((2, 3)).astype(np.float32))
        outs = []
        for t in range(7):
            values = [mx.array(rng.standard_normal((3, 3)).astype(np.float32))
                      for _ in range(3)]
            for k, (op, i, j) in enumerate(ops):
                a, b = values[i % len(values)], values[j % len(values)]
                if op == len(_OPS):
                    cache = mx.concatenate([cache, a[:1]], axis=0)
                    values.append(mx.sum(cache, axis=0, keepdims=True) * b)
                elif op == len(_OPS) + 1:
                    values.append(mx.roll(a, t, axis=1) - b)
                else:
                    values.append(_OPS[op](a, b))
            mx.eval(values[-1], cache)
            outs.append([np.array(values[-1]), np.array(cache)])
        return outs
    _same_bits_with_and_without_programs(run)
