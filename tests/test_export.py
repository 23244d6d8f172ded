"""export_function / import_function / exporter: round trips of random programs and of
nn models, several traces, kwargs, shapeless traces, streams, transforms of imported
functions, the callback, and the errors (MLX 0.32.4's where it has them)."""
import json
import os
import random
import threading

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from streamlet.core import export_file
from streamlet.core.array import node

from conftest import requires_gpu


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "fn.slfn")


def _same(got, want, rtol=1e-6, atol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.__array__(), w.__array__(), rtol=rtol, atol=atol)


# -- random programs ---------------------------------------------------------------------------
# Each step maps (v, w, inputs) to a new (3, 4) float32 array from v and w.
def _row_take(v, w, k):
    return v[k["i"]] + w


STEPS = [
    lambda v, w, k: mx.sin(v) * w,
    lambda v, w, k: mx.exp(mx.clip(v, -3, 3)) - w,
    lambda v, w, k: mx.tanh(v) + mx.sigmoid(w),
    lambda v, w, k: mx.sqrt(mx.abs(v)) / (1 + mx.abs(w)),
    lambda v, w, k: mx.maximum(v, w) - mx.minimum(v, 0.5),
    lambda v, w, k: mx.log1p(mx.abs(v)) * 2.0 - w ** 2,
    lambda v, w, k: mx.where(v > w, v, -w),
    lambda v, w, k: v - v.mean(axis=1, keepdims=True) + w.max(axis=0, keepdims=True),
    lambda v, w, k: v * mx.logsumexp(w, axis=-1, keepdims=True),
    lambda v, w, k: mx.softmax(v, axis=-1) + mx.cumsum(w, axis=0),
    lambda v, w, k: v.reshape(4, 3).T + w,
    lambda v, w, k: mx.concatenate([v[:, 2:], w[:, :2]], axis=1),
    lambda v, w, k: mx.broadcast_to(v[0:1], (3, 4)) * w[::-1],
    lambda v, w, k: mx.squeeze(mx.expand_dims(v, 0), 0) + mx.flip(w, axis=1),
    lambda v, w, k: (v @ w.T) @ w / 4,
    lambda v, w, k: mx.matmul(v, k["m"]) + w,
    _row_take,
    lambda v, w, k: mx.take_along_axis(v, mx.argsort(w, axis=1), axis=1),
    lambda v, w, k: mx.sort(v, axis=1) - w,
    lambda v, w, k: v.at[k["i"]].add(w),
    lambda v, w, k: v + mx.random.normal((3, 4), key=k["key"]),
    lambda v, w, k: v * mx.random.uniform(shape=(3, 4), key=mx.random.split(k["key"])[1]),
    lambda v, w, k: v.astype(mx.float16).astype(mx.float32) + w.astype(mx.bfloat16),
    lambda v, w, k: mx.pad(v, ((0, 0), (1, 1)))[:, 1:-1] * w,
    lambda v, w, k: mx.tile(v[:, :2], (1, 2)) + mx.repeat(w[:, ::2], 2, axis=1),
    lambda v, w, k: v + (w > 0).astype(mx.float32) * mx.array([1.0, -2.0, 3.0, 0.5]),
    lambda v, w, k: mx.stack([v, w]).sum(axis=0) * mx.var(w, axis=0),
    lambda v, w, k: mx.transpose(mx.stack([v, w], axis=-1), (2, 0, 1))[1] + v,
]


def _program(seed):
    r = random.Random(seed)
    chosen = [r.randrange(len(STEPS)) for _ in range(r.randint(3, 8))]

    def fun(x, y, i, m, key):
        ins = {"i": i, "m": m, "key": key}
        v, w = x, y
        for c in chosen:
            v, w = STEPS[c](v, w, ins).astype(mx.float32), v
        return v, w.sum(axis=0), mx.argmax(v, axis=1)
    return fun


def _inputs(seed):
    g = np.random.default_rng(seed)
    return (mx.array(g.standard_normal((3, 4)).astype(np.float32)),
            mx.array(g.standard_normal((3, 4)).astype(np.float32)),
            mx.array(g.integers(0, 3, size=3).astype(np.int32)),
            mx.array(g.standard_normal((4, 4)).astype(np.float32)),
            mx.random.key(seed))


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_round_trip(path, seed):
    fun = _program(seed)
    mx.export_function(path, fun, *_inputs(seed))
    imported = mx.import_function(path)
    for s in (seed, seed + 1000):  # the example inputs, then new values
        ins = _inputs(s)
        got = imported(*ins)
        assert isinstance(got, tuple)
        _same(got, fun(*ins))


def test_every_step_round_trips(path):
    ins = _inputs(7)
    for k, step in enumerate(STEPS):
        def fun(x, y, i, m, key):
            return step(x, y, {"i": i, "m": m, "key": key})
        mx.export_function(path, fun, *ins)
        _same(mx.import_function(path)(*_inputs(8)), [fun(*_inputs(8))])


def test_dtypes_and_shapes_of_every_kind(path):
    def fun(a, b, c):
        return a * 2, b + 1, mx.logical_not(c), a.astype(mx.bfloat16) * 3, b // 3
    ins = (mx.array([[1.5, -2.0]], mx.float16), mx.array([7, -8, 9], mx.int64),
           mx.array([True, False]))
    mx.export_function(path, fun, *ins)
    _same(mx.import_function(path)(*ins), fun(*ins), rtol=0, atol=0)


def test_constants_of_every_dtype_round_trip(path):
    consts = [mx.array(np.arange(6).reshape(2, 3).astype(d))
              for d in (np.float32, np.float16, np.int8, np.uint16, np.int64, np.bool_,
                        np.complex64)]
    consts.append(mx.array([1.0, -2.5], mx.bfloat16))
    mx.eval(consts)

    def fun():
        return consts
    mx.export_function(path, fun)
    _same(mx.import_function(path)(), consts, rtol=0, atol=0)


def test_params_of_every_kind_round_trip():
    values = [None, True, 3, -2.5, float("inf"), float("nan"), -0.0, 1 + 2j, "text",
              (1, (2, 3)), [1, 2], {"a": 1, (1, 2): [3]}, slice(1, None, 2), Ellipsis,
              mx.float16, np.dtype(np.int16), np.float32(1.5), np.arange(3)]
    arrays = []

    def add(a):
        arrays.append(a)
        return len(arrays) - 1
    encoded = json.loads(json.dumps(export_file.encode(values, add)))
    back = export_file.decode(encoded, arrays)
    assert len(back) == len(values)
    for got, want in zip(back, values):
        if isinstance(want, float) and want != want:
            assert got != got
        elif isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)
        else:
            assert got == want and type(got) is type(want)
    assert str(export_file.encode(-0.0, add)) == "-0.0"
    with pytest.raises(export_file.Unserializable):
        export_file.encode({"f": print}, add)
    with pytest.raises(ValueError, match="Unsupported dtype"):
        export_file.decode({"$": "npscalar", "dtype": "object", "v": 1}, [])


# -- nn models -------------------------------------------------------------------------------
def _check_model(path, model, x, fun=None):
    mx.eval(model.parameters())
    fun = fun or model
    mx.export_function(path, fun, x)
    imported = mx.import_function(path)
    _same(imported(x), [fun(x)], rtol=1e-5, atol=1e-5)
    return imported


def test_mlp_round_trips(path):
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    _check_model(path, model, mx.random.normal((5, 8)))


def test_conv_net_round_trips(path):
    mx.random.seed(1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.BatchNorm(4), nn.Conv2d(4, 2, 3, stride=2))
    model.eval()
    _check_model(path, model, mx.random.normal((2, 8, 8, 3)))


def test_transformer_layer_round_trips(path):
    mx.random.seed(2)
    model = nn.TransformerEncoderLayer(16, 4, 32)
    model.eval()
    mask = nn.MultiHeadAttention.create_additive_causal_mask(5)
    _check_model(path, model, mx.random.normal((2, 5, 16)), lambda x: model(x, mask))


def test_embedding_and_rope_round_trip(path):
    mx.random.seed(3)
    emb, rope, norm = nn.Embedding(10, 8), nn.RoPE(8), nn.RMSNorm(8)
    mx.eval(emb.parameters(), norm.parameters())

    def fun(tokens):
        return norm(rope(emb(tokens)[None]))
    tokens = mx.array([1, 4, 9, 0])
    mx.export_function(path, fun, tokens)
    _same(mx.import_function(path)(mx.array([3, 3, 2, 7])), [fun(mx.array([3, 3, 2, 7]))])


def test_quantized_model_round_trips(path):
    mx.random.seed(4)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 64))
    nn.quantize(model, group_size=32)
    _check_model(path, model, mx.random.normal((3, 64)))


def test_exported_model_keeps_its_weights(path):
    model = nn.Linear(4, 2)
    x = mx.ones((1, 4))
    imported = _check_model(path, model, x)
    want = model(x)
    model.weight = model.weight * 0  # later changes to the model do not reach the file
    _same(imported(x), [want])


# -- signatures, kwargs, several traces -------------------------------------------------------
def test_kwargs_are_matched_by_name(path):
    def fun(x, *, scale, shift):
        return x * scale - shift
    x, a, b = mx.array([1.0, 2.0]), mx.array(3.0), mx.array(0.5)
    mx.export_function(path, fun, x, scale=a, shift=b)
    f = mx.import_function(path)
    _same(f(x, shift=a, scale=b), [fun(x, scale=b, shift=a)])
    _same(f((x,), {"scale": a, "shift": b}), [fun(x, scale=a, shift=b)])
    with pytest.raises(ValueError, match="No imported function"):
        f(x, scale=a, offset=b)


def test_several_traces_by_shape_dtype_and_count(path):
    def fun(*xs, bias=None):
        out = sum(x * (k + 1) for k, x in enumerate(xs))
        return out if bias is None else out + bias
    calls = [((mx.array([1.0, 2.0]),), {}),
             ((mx.array([1.0, 2.0, 3.0]),), {}),
             ((mx.array([1, 2]),), {}),
             ((mx.array([1.0]), mx.array([2.0])), {}),
             ((mx.array([1.0]),), {"bias": mx.array([5.0])})]
    with mx.exporter(path, fun) as export:
        for a, k in calls:
            export(*a, **k)
    f = mx.import_function(path)
    for a, k in calls:
        new = [x + 1 for x in a]
        got = f(*new, **k)
        _same(got, [fun(*new, **k)])
    assert f(mx.array([1, 2]))[0].dtype == mx.int32
    with pytest.raises(ValueError, match=r"(?s)Possible functions include.*Called with 1"):
        f(mx.array([1.0, 2.0, 3.0, 4.0]))


def test_exporter_refuses_a_repeated_signature_and_writes_after_close(path):
    export = mx.exporter(path, lambda x: x + 1)
    export(mx.array([1.0]))
    with pytest.raises(RuntimeError, match="twice"):
        export(mx.array([2.0]))
    export.close()
    with pytest.raises(RuntimeError, match="closed"):
        export(mx.array([1.0, 2.0]))
    assert mx.import_function(path)(mx.array([4.0]))[0].item() == 5.0


def test_file_is_whole_after_each_trace(path):
    export = mx.exporter(path, lambda x: x * 2)
    assert mx.import_function(path).__call__ is not None  # an empty export reads back
    export(mx.array([1.0]))
    assert mx.import_function(path)(mx.array([3.0]))[0].item() == 6.0
    export(mx.array([1, 2]))
    assert mx.import_function(path)(mx.array([3, 4]))[0].tolist() == [6, 8]


def test_a_constant_read_by_several_traces_is_stored_once(path):
    big = mx.random.normal((64, 256))
    mx.eval(big)
    with mx.exporter(path, lambda *xs: big * 2 + sum(xs)) as export:
        for n in range(4):
            export(*[mx.array(1.0)] * n)
    assert big.nbytes < os.path.getsize(path) < big.nbytes + 8192
    f = mx.import_function(path)
    _same(f(mx.array(1.0), mx.array(2.0)), [big * 2 + 3])


def test_metadata_round_trips(path):
    meta = json.dumps({"model": "mlp", "layers": [1, 2]})
    mx.export_function(path, mx.abs, mx.array([-1.0]), metadata=meta)
    f, got = mx.import_function(path, return_metadata=True)
    assert got == meta and f(mx.array([-2.0]))[0].item() == 2.0
    mx.export_function(path, mx.abs, mx.array([-1.0]))
    assert mx.import_function(path, return_metadata=True)[1] == ""


# -- shapeless ---------------------------------------------------------------------------------
def test_shapeless_follows_new_shapes(path):
    w = mx.random.normal((6, 3))
    mx.eval(w)

    def fun(x, y):
        h = mx.maximum(x @ w, 0) * y[..., None]
        return mx.softmax(h, axis=-1).sum(axis=1), h.reshape(-1)
    mx.export_function(path, fun, mx.ones((2, 5, 6)), mx.ones((2, 5)), shapeless=True)
    f = mx.import_function(path)
    for b, n in ((2, 5), (1, 9), (4, 1)):
        x, y = mx.random.normal((b, n, 6)), mx.random.normal((b, n))
        _same(f(x, y), fun(x, y))
    with pytest.raises(ValueError, match="No imported function"):
        f(mx.ones((2, 6)), mx.ones((2, 5)))  # other numbers of dimensions do not match


def test_shapeless_conv_follows_new_shapes(path):
    mx.random.seed(5)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
    mx.eval(conv.parameters())
    mx.export_function(path, conv, mx.ones((1, 8, 8, 2)), shapeless=True)
    f = mx.import_function(path)
    for shape in ((1, 8, 8, 2), (3, 11, 6, 2)):
        x = mx.random.normal(shape)
        _same(f(x), [conv(x)], rtol=1e-5, atol=1e-5)


def test_shapeless_without_a_shape_rule_runs_on_its_own_shapes(path):
    def fun(x):  # linalg.inv has no shape rule
        return mx.linalg.inv(x, stream=mx.cpu) + mx.arange(2)  # arange: inputs-free
    x = mx.array([[2.0, 0.0], [0.0, 4.0]])
    mx.export_function(path, fun, x, shapeless=True)
    f = mx.import_function(path)
    _same(f(x), [fun(x)])
    with pytest.raises(ValueError, match="linalg.inv"):
        f(mx.eye(3))


# -- streams -----------------------------------------------------------------------------------
def _stream(a):
    return a._node.stream.stream


def test_imported_runs_on_the_callers_stream(path):
    mx.export_function(path, lambda x: mx.exp(x) + 1, mx.ones((3,)))
    f = mx.import_function(path)
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        (out,) = f(mx.ones((3,)))
    assert _stream(out) == s
    np.testing.assert_allclose(np.array(out), np.e + 1, rtol=1e-6)
    (out,) = f(mx.ones((3,)))
    assert _stream(out) == mx.default_stream(mx.default_device())


def test_a_step_given_a_device_runs_on_that_devices_default(path):
    other = mx.new_stream(mx.cpu)
    mx.export_function(path, lambda x: mx.sin(x, stream=other) * 2, mx.ones((2,)))
    footer, _ = export_file.read(path)
    assert [st[6] for st in footer["traces"][0]["steps"]] == [["cpu", 0], None]
    f = mx.import_function(path)
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        (out,) = f(mx.ones((2,)))
    assert _stream(out) == s and other != s  # the exporting program's stream is not kept
    np.testing.assert_allclose(np.array(out), 2 * np.sin(1.0), rtol=1e-6)


def test_imported_runs_in_other_threads(path):
    mx.export_function(path, lambda x: (x * x).sum(), mx.ones((4,)))
    f = mx.import_function(path)
    got = {}

    def work(k):
        s = mx.new_stream(mx.cpu)
        with mx.stream(s):
            got[k] = f(mx.full((4,), float(k)))[0].item()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {k: 4.0 * k * k for k in range(4)}


# -- transforms of imported functions ----------------------------------------------------------
def _exported_mlp(path):
    w1, w2 = mx.random.normal((4, 8)), mx.random.normal((8, 2))
    mx.eval(w1, w2)

    def fun(x, w):
        return (mx.tanh(x @ w1) @ w2 * w).sum(axis=-1)
    return fun


def test_grad_vjp_jvp_of_imported_match_the_original(path):
    fun = _exported_mlp(path)
    x, w = mx.random.normal((3, 4)), mx.random.normal((2,))
    mx.export_function(path, fun, x, w)
    f = mx.import_function(path)

    def loss(g):
        return lambda x, w: (g(x, w)[0] if g is f else g(x, w)).square().sum()
    _same(mx.grad(loss(f), argnums=(0, 1))(x, w), mx.grad(loss(fun), argnums=(0, 1))(x, w),
          rtol=1e-5)
    ct = mx.ones((3,))
    _same(mx.vjp(lambda x: f(x, w)[0], [x], [ct])[1], mx.vjp(lambda x: fun(x, w), [x], [ct])[1],
          rtol=1e-5)
    t = mx.ones((3, 4))
    _same(mx.jvp(lambda x: f(x, w)[0], [x], [t])[1], mx.jvp(lambda x: fun(x, w), [x], [t])[1],
          rtol=1e-5)


def test_vmap_and_compile_of_imported_match_the_original(path):
    fun = _exported_mlp(path)
    x, w = mx.random.normal((4,)), mx.random.normal((2,))
    mx.export_function(path, fun, x, w)
    f = mx.import_function(path)
    xs = mx.random.normal((5, 4))
    _same([mx.vmap(lambda x: f(x, w)[0])(xs)], [mx.vmap(lambda x: fun(x, w))(xs)], rtol=1e-5)
    _same([mx.compile(lambda x: f(x, w)[0] * 2)(x)], [fun(x, w) * 2], rtol=1e-5)


def test_exported_gradient_step(path):
    w = mx.array([[1.0, -1.0], [0.5, 2.0]])

    def step(w, x):
        return mx.value_and_grad(lambda w: mx.tanh(x @ w).sum())(w)
    x = mx.array([[0.3, 0.4]])
    mx.export_function(path, step, w, x)
    _same(mx.import_function(path)(w, x), list(step(w, x)), rtol=1e-6)


# -- the callback ------------------------------------------------------------------------------
def test_callback_describes_the_graph_as_mlx(path, mlx):
    def run(m):
        events = []
        x, y = m.array([1.0, 2.0]), m.array([3.0, 2.5])
        m.export_function(events.append, lambda x, y: m.log(m.abs(x - y)).astype(m.int32) +
                          m.array([1, 2], dtype=m.int32), x, y=y)
        return events
    ours, theirs = run(mx), run(mlx)
    assert [e["type"] for e in ours] == [e["type"] for e in theirs]
    for a, b in zip(ours, theirs):
        if a["type"] == "primitive":
            assert a["name"] == b["name"]
            assert [str(v) for v in a["arguments"]] == [str(v) for v in b["arguments"]]
        elif a["type"] == "keyword_inputs":
            assert [k for k, _ in a["keywords"]] == [k for k, _ in b["keywords"]]
        elif a["type"] != "constants":
            assert [(s, str(d)) for _, s, d in a[a["type"]]] == \
                [(s, str(d)) for _, s, d in b[b["type"]]]
    consts = next(e for e in ours if e["type"] == "constants")["constants"]
    assert [c.tolist() for _, c in consts] == [[1, 2]]


# -- errors ------------------------------------------------------------------------------------
def test_bad_inputs_and_outputs_raise_value_error(path):
    x = mx.array(1.0)
    for args in (("hi",), (x, "hi"), ([[x]],), ([x], {"a": 1}), (x, [x])):
        with pytest.raises(ValueError, match="Inputs can either be"):
            mx.export_function(path, lambda *a: x, *args)
    for result in ((x, 1), [x, [x]], None, 3.0):
        with pytest.raises(ValueError, match="Outputs can be"):
            mx.export_function(path, lambda: result)
    mx.export_function(path, lambda a, b: a + b, x, x)
    f = mx.import_function(path)
    for args in ((x, 1.0), (x, x, x), (x, [x])):
        with pytest.raises(ValueError):
            f(*args)


def test_custom_function_cannot_be_exported(path):
    @mx.custom_function
    def f(x):
        return mx.sin(x)

    @f.vjp
    def f_vjp(x, ct, out):
        return ct

    with pytest.raises(ValueError, match=r"Unable to serialize primitive CustomFunction"):
        mx.export_function(path, f, mx.array(1.0))
    with pytest.raises(ValueError, match=r"Unable to serialize primitive CustomFunction"):
        mx.export_function(path, mx.checkpoint(mx.sin), mx.array(1.0))


def test_a_failed_trace_leaves_the_exporter_usable(path):
    @mx.custom_function
    def f(x):
        return x

    @f.vjp
    def f_vjp(x, ct, out):
        return ct
    big = mx.arange(1000.0)
    mx.eval(big)
    with mx.exporter(path, lambda x: f(x * big) if x.ndim == 2 else x + big) as export:
        with pytest.raises(ValueError, match="CustomFunction"):
            export(mx.ones((1, 1)))
        export(mx.array(1.0))
    assert os.path.getsize(path) < big.nbytes + 4096
    _same(mx.import_function(path)(mx.array(2.0)), [big + 2])


def test_params_that_cannot_be_written_name_the_primitive(path):
    from streamlet.core.transforms import COPY

    def fun(x):
        return node(COPY, (x,), x.shape, x.dtype, {"f": len}, x._node.stream)
    with pytest.raises(ValueError, match=r"primitive Copy \(copy\): its params hold a "
                                         r"builtins.builtin_function_or_method"):
        mx.export_function(path, fun, mx.array(1.0))


def test_files_that_are_not_ours(path, tmp_path, mlx):
    with pytest.raises(RuntimeError, match="Failed to open"):
        mx.import_function(str(tmp_path / "missing.slfn"))
    theirs = str(tmp_path / "mlx.mlxfn")
    mlx.export_function(theirs, lambda x: x + 1, mlx.array(1.0))
    with pytest.raises(RuntimeError, match="not read"):
        mx.import_function(theirs)
    mx.export_function(path, mx.abs, mx.array(1.0))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    with pytest.raises(RuntimeError, match="truncated"):
        mx.import_function(path)


def test_unknown_primitive_in_the_file_names_it(path):
    mx.export_function(path, mx.sin, mx.array(1.0))
    footer, arrays = export_file.read(path)
    footer["traces"][0]["steps"][0][:2] = ["core.ops.nowhere:_GONE", "gone"]
    writer = export_file.Writer(path)
    writer.write([(c, a) for c, a in zip(footer["constants"], arrays)], footer)
    with pytest.raises(ValueError, match=r"primitive gone \(core.ops.nowhere:_GONE\)"):
        mx.import_function(path)


def test_a_moved_primitive_is_found_by_its_name(path):
    mx.export_function(path, mx.sort, mx.array([3.0, 1.0]))
    footer, arrays = export_file.read(path)
    footer["traces"][0]["steps"][0][0] = "core.ops.old_module:_SORT"
    export_file.Writer(path).write([], footer)
    assert mx.import_function(path)(mx.array([2.0, -1.0]))[0].tolist() == [-1.0, 2.0]


def test_metadata_errors(path):
    with pytest.raises(TypeError):
        mx.export_function(path, mx.abs, mx.array(1.0), metadata={"a": 1})
    with pytest.raises(ValueError, match="callback"):
        mx.export_function(lambda e: None, mx.abs, mx.array(1.0), metadata="m")


def test_uncaptured_input_raises(path):
    x = mx.array([1.0, 2.0]) + 1  # not evaluated: the trace would keep its old value

    with pytest.raises(ValueError, match="uncaptured inputs"):
        mx.export_function(path, lambda y: y + x, x)


def test_metal_kernel_is_recorded_while_exporting(path):
    k = mx.fast.metal_kernel("copy", ["a"], ["out"], "out[0] = a[0];")

    def call(a, stream=mx.gpu):
        return k(inputs=[a], grid=(4, 1, 1), threadgroup=(4, 1, 1), output_shapes=[a.shape],
                 output_dtypes=[a.dtype], stream=stream)[0]
    mx.export_function(path, call, mx.zeros((2, 2)))
    footer, _ = export_file.read(path)
    (step,) = [s for s in footer["traces"][0]["steps"] if s[1] == "metal_kernel"]
    assert step[6] == ["gpu", 0]
    with pytest.raises(ValueError, match="Only supports the GPU"):
        mx.export_function(path, lambda a: call(a, mx.cpu), mx.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="No Metal back-end"):
        call(mx.zeros((2, 2)))


@requires_gpu
def test_exported_on_the_cpu_replays_on_the_gpu(path):
    w = mx.random.normal((4, 3))
    mx.eval(w)

    def fun(x):
        return mx.softmax(mx.tanh(x @ w), axis=-1).sum(axis=0)
    x = mx.random.normal((5, 4))
    with mx.stream(mx.cpu):
        mx.export_function(path, fun, x)
        want = fun(x)
    f = mx.import_function(path)
    with mx.stream(mx.gpu):
        (got,) = f(x)
    assert _stream(got).device == mx.gpu
    _same([got], [want], rtol=1e-5, atol=1e-6)


@requires_gpu
@pytest.mark.parametrize("seed", range(8))
def test_random_programs_exported_on_the_cpu_replay_on_the_gpu(path, seed):
    fun = _program(seed)
    with mx.stream(mx.cpu):
        mx.export_function(path, fun, *_inputs(seed))
        want = fun(*_inputs(seed + 1))
    with mx.stream(mx.gpu):
        got = mx.import_function(path)(*_inputs(seed + 1))
    assert all(_stream(g).device == mx.gpu for g in got[:2])
    _same(got, want, rtol=1e-4, atol=1e-5)


_GRADIENTS = {  # a gradient function and the input shapes of two calls
    "product of a transpose": (lambda x, w: mx.grad(lambda a, b: mx.tanh(a @ b.T).sum(),
                                                    argnums=(0, 1))(x, w),
                               [((3, 4), (5, 4)), ((6, 2), (3, 2))]),
    "broadcast bias, mean": (lambda x, b: mx.grad(lambda a, c: (a + c).mean(),
                                                  argnums=(0, 1))(x, b),
                             [((3, 4), (4,)), ((6, 2), (2,))]),
    "linear layer": (lambda x, w, b: mx.grad(
        lambda a, c, d: mx.addmm(d, a, c.T).square().mean(), argnums=(1, 2))(x, w, b),
        [((3, 4), (5, 4), (5,)), ((6, 2), (3, 2), (3,))]),
    "max over an axis": (lambda x: mx.grad(lambda a: mx.max(a, axis=1).sum())(x),
                         [((3, 4),), ((2, 7),)]),
}


@pytest.mark.parametrize("name", sorted(_GRADIENTS))
def test_a_shapeless_exported_gradient_replays_at_other_shapes(path, name):
    """The trace of a shapeless export builds its gradients' broadcasts and sums as a
    shapeless compile does, following the inputs' shapes (they were written down)."""
    fun, calls = _GRADIENTS[name]
    rng = np.random.default_rng(9)

    def inputs(shapes):
        return [mx.array(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    mx.export_function(path, fun, *inputs(calls[0]), shapeless=True)
    imported = mx.import_function(path)
    for shapes in calls:
        args = inputs(shapes)
        want = fun(*args)
        _same(imported(*args), want if isinstance(want, (list, tuple)) else [want])
