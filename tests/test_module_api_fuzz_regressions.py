"""Regressions and parity checks from a differential fuzz of the nn.Module API and the tree
utilities against MLX: module trees (parameters, children, leaf and named modules), freezing,
update / update_modules (strict or not, bad keys and types: the exception types), apply,
set_dtype, train / eval, load_weights / save_weights (.npz and .safetensors, across the two
libraries), Sequential and Module-as-dict behaviour, layer reprs, nn.quantize with a
class_predicate, and tree_map / tree_map_with_path / tree_flatten / tree_unflatten /
tree_reduce / tree_merge on random nested structures."""
from __future__ import annotations

import collections
import random
import re

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.utils as su


@pytest.fixture
def libs(mlx):
    """(nn, core, utils) of each library: streamlet first, MLX second."""
    import mlx.nn as mlx_nn
    import mlx.utils as mlx_utils

    return [(nn, mx, su), (mlx_nn, mlx, mlx_utils)]


def _norm(x, lib_nn, core):
    """A comparable description of a result: arrays as (dtype, shape, rounded values),
    modules as their class and repr (addresses dropped), containers recursively."""
    if isinstance(x, core.array):
        v = x.astype(core.float32) if x.dtype == core.bfloat16 else x
        return ("A", str(x.dtype).split(".")[-1], tuple(x.shape),
                np.round(np.array(v).astype(np.float64), 4).tolist())
    if isinstance(x, lib_nn.Module):
        return ("M", type(x).__name__, re.sub(r" at 0x[0-9a-f]+", "", repr(x)))
    if isinstance(x, dict):
        return ("D", [(k, _norm(v, lib_nn, core)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_norm(v, lib_nn, core) for v in x])
    if isinstance(x, str):
        return re.sub(r" at 0x[0-9a-f]+", "", x)
    return x


def _outcome(fn, lib):
    lib_nn, core, utils = lib
    try:
        return _norm(fn(lib_nn, core, utils), lib_nn, core)
    except Exception as exc:  # noqa: BLE001 (the exception's type is the outcome)
        return ("raised", type(exc).__name__)


def _same(libs, fn):
    ours, theirs = (_outcome(fn, lib) for lib in libs)
    assert ours == theirs, f"streamlet: {str(ours)[:800]}\nmlx:       {str(theirs)[:800]}"


# ---- the regression: which error a module's repr raises ------------------------------------

def test_repr_raises_the_modules_own_error_before_its_childrens(libs):
    """repr() of a module whose own line and whose child both fail to print raises the
    module's own error (AttributeError of a list weight), as in MLX, not the child's
    (IndexError of a 1-D weight): the module's header is formatted before its children."""
    def fn(lib_nn, core, _):
        inner = lib_nn.Linear(1, 1)
        inner.weight = core.ones((1,))  # weight.shape[1] fails: IndexError
        outer = lib_nn.Linear(1, 1)
        outer.weight = [inner, [core.ones(3)]]  # weight.shape fails: AttributeError
        root = lib_nn.Module()
        root._p = [lib_nn.Module(), outer]
        return repr(root)

    _same(libs, fn)
    with pytest.raises(AttributeError):
        fn(nn, mx, su)


def test_repr_of_a_module_with_a_good_header_and_a_bad_child(libs):
    """The other order still raises the child's error (here IndexError), as in MLX."""
    def fn(lib_nn, core, _):
        outer = lib_nn.Sequential(lib_nn.ReLU(), lib_nn.Linear(1, 1))
        outer.layers[1].weight = core.ones((2,))
        return repr(outer)

    _same(libs, fn)
    with pytest.raises(IndexError):
        fn(nn, mx, su)


def test_a_property_whose_getter_fails_reports_the_getters_error(libs):
    """A property of a Module subclass whose getter raises AttributeError (here: a missing
    attribute it reads) reports that error, naming the attribute really missing, as MLX
    does, instead of claiming the property itself does not exist; plain missing names and
    getattr's default are unchanged."""
    def fn(lib_nn, core, _):
        class Model(lib_nn.Module):
            @property
            def scale(self):
                return self.missing_factor * 2

        class NoInit(lib_nn.Module):
            def __init__(self):
                pass

        out = []
        for probe in (lambda: Model().scale, lambda: Model().nope, lambda: NoInit().training):
            try:
                probe()
            except AttributeError as exc:
                out.append(str(exc))
        out.append(getattr(Model(), "nope", 7))
        return out

    _same(libs, fn)
    assert "missing_factor" in fn(nn, mx, su)[0]
    assert "_training" in fn(nn, mx, su)[2]


# ---- layer reprs and parameter trees -----------------------------------------------------

LAYERS = [
    "Linear(3, 4)", "Linear(3, 4, bias=False)", "Bilinear(2, 3, 4)", "Identity()",
    "Conv1d(2, 4, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)",
    "Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=2)", "Conv3d(2, 4, 3)",
    "ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1)",
    "Embedding(10, 4)", "LayerNorm(4, eps=1e-3, affine=False)", "LayerNorm(4, bias=False)",
    "RMSNorm(4, eps=1e-3)", "GroupNorm(2, 4, pytorch_compatible=True)", "InstanceNorm(4, affine=True)",
    "BatchNorm(4, momentum=0.2)", "BatchNorm(4, affine=False, track_running_stats=False)",
    "Dropout(0.3)", "Dropout2d(0.2)", "Dropout3d()",
    "MultiHeadAttention(8, 2, query_input_dims=4, value_dims=10, value_output_dims=3, bias=True)",
    "Sequential(lib.Linear(2, 3), lib.ReLU(), lib.Sequential(lib.GELU(approx='tanh'), lib.Linear(3, 1)))",
    "Sequential()", "LeakyReLU(0.2)", "PReLU(3, 0.1)", "GLU(-2)", "Softshrink(0.3)", "Step(0.5)",
    "RoPE(8, traditional=True, base=100, scale=2.0)",
    "SinusoidalPositionalEncoding(8, min_freq=0.01, max_freq=2, scale=1.5, cos_first=True)",
    "MaxPool2d((2, 3), stride=(1, 2), padding=(1, 1))", "AvgPool1d(2)",
    "Upsample((2, 3), mode='linear', align_corners=True)",
    "RNN(3, 4, bias=False)", "GRU(3, 4)", "LSTM(3, 4)",
    "TransformerEncoderLayer(8, 2, norm_first=False)",
    "Transformer(dims=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, mlp_dims=16)",
    "QuantizedLinear(64, 32, bias=False, group_size=32, bits=8)", "QuantizedEmbedding(10, 64)",
    "QuantizedLinear(64, 32, mode='mxfp4')",
]


@pytest.mark.parametrize("expr", LAYERS)
def test_layer_repr_and_parameter_tree(libs, expr):
    """The layer's repr, its parameters' and trainable parameters' paths, shapes and dtypes,
    and every submodule's path, type, frozen names and training flag agree with MLX."""
    def fn(lib, core, utils):
        m = eval("lib." + expr)  # noqa: S307 (a fixed list of constructors)
        flat = lambda t: [(k, tuple(v.shape), str(v.dtype).split(".")[-1])  # noqa: E731
                          for k, v in utils.tree_flatten(t)]
        return [repr(m), flat(m.parameters()), flat(m.trainable_parameters()),
                [(k, type(s).__name__, sorted(s._no_grad), s.training)
                 for k, s in m.named_modules()], sorted(m.keys())]

    _same(libs, fn)


# ---- a composite model through the Module API ---------------------------------------------

def _model(lib_nn, core, utils):
    class Model(lib_nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib_nn.Linear(2, 3)
            self.layers = [lib_nn.Linear(3, 3), lib_nn.ReLU(),
                           {"x": lib_nn.Linear(3, 1), "arr": core.ones((2,)), "_p": core.zeros((1,))}]
            self.d = {"q": core.arange(3), "sub": [core.zeros((2, 2)), lib_nn.LayerNorm(3)]}
            self._private = core.ones((4,))
            self.t = (core.ones((1,)), lib_nn.Linear(1, 1))
            self.n = 5
            self.empty = []

    m = Model()
    flat = utils.tree_flatten(m.parameters())
    m.update(utils.tree_unflatten([
        (k, core.array(np.arange(v.size).reshape(v.shape)).astype(v.dtype) * (i + 1))
        for i, (k, v) in enumerate(flat)]))
    return m


MODULE_OPS = {
    "parameters": lambda m, n, c: m.parameters(),
    "trainable": lambda m, n, c: m.trainable_parameters(),
    "children": lambda m, n, c: m.children(),
    "leaf_modules": lambda m, n, c: m.leaf_modules(),
    "named_modules": lambda m, n, c: [(k, type(x).__name__) for k, x in m.named_modules()],
    "modules": lambda m, n, c: [type(x).__name__ for x in m.modules()],
    "repr": lambda m, n, c: repr(m),
    "contains": lambda m, n, c: [k in m for k in ("a", "n", "_private", "t", "empty", "training")],
    "getattr_missing": lambda m, n, c: m.nope,
    "setattr_none": lambda m, n, c: (setattr(m, "a", None), list(m), m.a),
    "setattr_array_over_int": lambda m, n, c: (setattr(m, "n", c.ones(2)), list(m), m.n),
    "setattr_over_method": lambda m, n, c: setattr(m, "parameters", c.ones(1)),
    "delattr": lambda m, n, c: (delattr(m, "a"), delattr(m, "n"), list(m), hasattr(m, "n")),
    "freeze": lambda m, n, c: m.freeze().trainable_parameters(),
    "freeze_no_recurse": lambda m, n, c: m.freeze(recurse=False).trainable_parameters(),
    "freeze_keys": lambda m, n, c: m.freeze(keys=["bias", "d"]).trainable_parameters(),
    "freeze_strict_missing": lambda m, n, c: m.freeze(keys="zzz", strict=True),
    "freeze_strict_somewhere": lambda m, n, c: m.freeze(keys="bias", strict=True).trainable_parameters(),
    "freeze_strict_not_here": lambda m, n, c: m.freeze(keys="bias", strict=True, recurse=False),
    "freeze_tuple_keys": lambda m, n, c: m.freeze(keys=("bias",), strict=True),
    "unfreeze_keys": lambda m, n, c: m.freeze().unfreeze(keys="bias").trainable_parameters(),
    "unfreeze_strict": lambda m, n, c: m.freeze().unfreeze(keys=["bias", "zz"], strict=True),
    "no_grad_sets": lambda m, n, c: [sorted(x._no_grad) for x in m.freeze(keys="weight").modules()],
    "eval": lambda m, n, c: [x.training for x in m.eval().modules()],
    "apply_filtered": lambda m, n, c: m.apply(lambda x: x * 2, lambda mm, k, v: k != "bias").parameters(),
    "filter_and_map": lambda m, n, c: m.filter_and_map(lambda mm, k, v: True, lambda v: type(v).__name__),
    "filter_and_map_leaf": lambda m, n, c: m.filter_and_map(
        lambda mm, k, v: not k.endswith("weight"), lambda v: type(v).__name__,
        lambda mm, k, v: isinstance(v, (c.array, n.Module))),
    "set_dtype": lambda m, n, c: (m.set_dtype(c.float16), m.parameters()),
    "set_dtype_everything": lambda m, n, c: (m.set_dtype(c.bfloat16, None), m.parameters()),
    "set_dtype_predicate": lambda m, n, c: (m.set_dtype(c.int16, lambda d: d == c.int32),
                                            m.parameters()),
    "update_bad_key": lambda m, n, c: m.update({"zz": c.zeros(3)}),
    "update_bad_key_lenient": lambda m, n, c: m.update({"zz": c.zeros(3)}, strict=False).parameters(),
    "update_bad_type": lambda m, n, c: m.update({"a": {"bias": 3}}),
    "update_bad_type_lenient": lambda m, n, c: m.update({"a": {"bias": 3}}, strict=False).a.bias,
    "update_wrong_shape": lambda m, n, c: m.update({"a": {"bias": c.zeros(7)}}).a.bias,
    "update_list_too_long": lambda m, n, c: m.update({"layers": [{}, {}, {}, {}]}),
    "update_array_at_module": lambda m, n, c: m.update({"a": c.zeros(3)}),
    "update_dict_at_list": lambda m, n, c: m.update({"layers": {"0": {}}}),
    "update_none": lambda m, n, c: m.update(None),
    "update_none_lenient": lambda m, n, c: m.update(None, strict=False).parameters(),
    "update_tuple": lambda m, n, c: m.update({"t": [c.zeros(1)]}),
    "update_private": lambda m, n, c: m.update({"_private": c.zeros(4)})._private,
    "update_plain_attribute": lambda m, n, c: m.update({"n": c.zeros(4)}),
    "update_modules": lambda m, n, c: m.update_modules(
        {"a": n.Linear(2, 5), "layers": [{}, n.GELU()]}).children(),
    "update_modules_bad_key": lambda m, n, c: m.update_modules({"zz": n.ReLU()}),
    "update_modules_array": lambda m, n, c: m.update_modules({"a": c.ones(1)}),
    "update_modules_array_lenient": lambda m, n, c: m.update_modules({"a": c.ones(1)}, strict=False).children(),
    "update_modules_at_array": lambda m, n, c: m.update_modules({"d": {"q": n.ReLU()}}),
    "update_modules_out_of_bounds": lambda m, n, c: m.update_modules({"layers": [{}, {}, {}, n.ReLU()]}),
    "update_modules_none": lambda m, n, c: m.update_modules({"a": None}),
    "update_modules_root_list": lambda m, n, c: m.update_modules([n.ReLU()]),
    "update_modules_in_tuple": lambda m, n, c: m.update_modules({"t": [{}, n.ReLU()]}),
}


@pytest.mark.parametrize("op", list(MODULE_OPS))
def test_module_api_on_a_composite_model(libs, op):
    """Each Module method on a model of lists, dicts, tuples, private and plain attributes
    gives MLX's tree (keys, order, values) or raises MLX's exception type."""
    _same(libs, lambda lib_nn, core, utils: MODULE_OPS[op](_model(lib_nn, core, utils),
                                                           lib_nn, core))


def test_apply_to_modules_order(libs):
    def fn(lib_nn, core, utils):
        seen = []
        _model(lib_nn, core, utils).apply_to_modules(lambda k, m: seen.append((k, type(m).__name__)))
        return seen

    _same(libs, fn)


def test_sequential_and_module_as_dict(libs):
    def fn(lib_nn, core, utils):
        seq = lib_nn.Sequential(lib_nn.Linear(2, 3), lib_nn.ReLU(), lib_nn.Linear(3, 1))
        seq.update(utils.tree_map(lambda v: core.ones(v.shape), seq.parameters()))
        out = [type(seq.layers[1]).__name__, type(seq.layers[-1]).__name__, len(seq.layers),
               list(seq.keys()), [k for k, _ in seq.items()], "layers" in seq, "weight" in seq,
               seq(core.ones((2, 2)))]
        for probe in (lambda: seq[0], lambda: len(seq), lambda: lib_nn.Linear(2, 2, bias=False).bias):
            try:
                out.append(probe())
            except Exception as exc:  # noqa: BLE001
                out.append(type(exc).__name__)
        return out

    _same(libs, fn)


def _random_module_spec(r, depth=0):
    keys = ["a", "b", "_c", "w", "bias", "weight", "layers", "q"]
    k = r.random()
    if depth > 3 or k < 0.35:
        return ("arr", r.randint(1, 3))
    if k < 0.55:
        return ("mod", {r.choice(keys): _random_module_spec(r, depth + 1)
                        for _ in range(r.randint(0, 3))}, r.random() < 0.3)
    if k < 0.75:
        return ("list", [_random_module_spec(r, depth + 1) for _ in range(r.randint(0, 3))])
    if k < 0.8:
        return ("tuple", [_random_module_spec(r, depth + 1) for _ in range(r.randint(0, 2))])
    if k < 0.85:
        return ("int", 3)
    return ("dict", {r.choice(keys): _random_module_spec(r, depth + 1) for _ in range(r.randint(0, 3))})


def _build(spec, lib_nn, core, counter):
    kind = spec[0]
    if kind == "arr":
        counter[0] += 1
        a = core.arange(spec[1]) * counter[0]
        return a if counter[0] % 3 else a.astype(core.float32)
    if kind == "mod":
        m = lib_nn.Linear(1, 1) if spec[2] else lib_nn.Module()
        if spec[2]:
            m.weight, m.bias = core.ones((1, 1)), core.zeros((1,))
        for k, v in spec[1].items():
            setattr(m, k, _build(v, lib_nn, core, counter))
        return m
    if kind in ("list", "tuple"):
        items = [_build(v, lib_nn, core, counter) for v in spec[1]]
        return items if kind == "list" else tuple(items)
    if kind == "int":
        return spec[1]
    return {k: _build(v, lib_nn, core, counter) for k, v in spec[1].items()}


def _partial(r, spec, core):
    """A random, mostly matching partial tree of new parameters for `spec`."""
    x = r.random()
    if x < 0.1:
        return core.zeros((r.randint(1, 2),))
    if x < 0.15:
        return r.choice([None, 3, [], {}, "s"])
    kind = spec[0]
    if kind == "arr":
        return core.ones((spec[1],)) * 7
    if kind in ("mod", "dict"):
        out = {k: _partial(r, v, core) for k, v in spec[1].items() if r.random() < 0.6}
        if r.random() < 0.1:
            out["zz"] = core.zeros(1)
        return out
    if kind in ("list", "tuple"):
        out = [_partial(r, v, core) for v in spec[1]]
        if r.random() < 0.1:
            out.append(core.zeros(1))
        return out
    return 5


def _module_swaps(r, spec, lib_nn, core):
    x = r.random()
    if x < 0.1:
        return lib_nn.ReLU()
    if x < 0.15:
        return r.choice([None, 3, [], {}, core.zeros(1)])
    kind = spec[0]
    if kind == "mod" and r.random() < 0.3:
        return lib_nn.GELU()
    if kind in ("mod", "dict"):
        return {k: _module_swaps(r, v, lib_nn, core) for k, v in spec[1].items() if r.random() < 0.6}
    if kind in ("list", "tuple"):
        return [_module_swaps(r, v, lib_nn, core) for v in spec[1]]
    return {}


@pytest.mark.parametrize("seed", range(4))
def test_random_modules_through_random_operations(libs, seed):
    """Random module trees through random freeze / unfreeze / update / update_modules /
    apply / set_dtype / train calls (strict or not, good and bad keys): after each call the
    exception type, parameters, trainable parameters, children, leaf modules, frozen sets,
    training flags and repr agree with MLX."""
    keys_pool = [None, "w", "bias", ["w", "layers"], "zz", "_c", "a", ["q", "_p"]]
    outer = random.Random(seed)
    for _ in range(40):
        spec = ("mod", {outer.choice(["a", "b", "_c", "w", "layers"]): _random_module_spec(outer)
                        for _ in range(outer.randint(1, 4))}, False)
        op_seed = outer.random()

        def fn(lib_nn, core, utils, spec=spec, op_seed=op_seed):
            r = random.Random(op_seed)
            m = _build(spec, lib_nn, core, [0])
            log = []
            for _ in range(5):
                op = r.choice(["freeze", "unfreeze", "update", "update_modules", "apply",
                               "set_dtype", "train"])
                keys, strict, recurse = r.choice(keys_pool), r.random() < 0.5, r.random() < 0.7
                new = (_partial(r, spec, core) if op == "update" else
                       _module_swaps(r, spec, lib_nn, core) if op == "update_modules" else None)
                try:
                    if op == "freeze":
                        m.freeze(keys=keys, strict=strict, recurse=recurse)
                    elif op == "unfreeze":
                        m.unfreeze(keys=keys, strict=strict, recurse=recurse)
                    elif op == "update":
                        m.update(new, strict=strict)
                    elif op == "update_modules":
                        m.update_modules(new, strict=strict)
                    elif op == "apply":
                        m.apply(lambda x: x * 2, (lambda mm, k, v: k != "w" and not k.startswith("_"))
                                if strict else None)
                    elif op == "set_dtype":
                        m.set_dtype(core.float16, None if strict else (lambda d: d == core.int32))
                    else:
                        m.train(strict)
                    log.append((op, "ok"))
                except Exception as exc:  # noqa: BLE001
                    log.append((op, type(exc).__name__))
                try:
                    log.append(_norm([m.parameters(), m.trainable_parameters(), m.children(),
                                      m.leaf_modules(),
                                      [(k, type(x).__name__, sorted(x._no_grad), x.training)
                                       for k, x in m.named_modules()]], lib_nn, core))
                except Exception as exc:  # noqa: BLE001
                    log.append(("state", type(exc).__name__))
            return log

        _same(libs, fn)


# ---- weights on disk --------------------------------------------------------------------

def _seq(lib_nn, core, utils):
    m = lib_nn.Sequential(lib_nn.Linear(2, 3), lib_nn.ReLU(), lib_nn.Linear(3, 1))
    m.update(utils.tree_map(lambda v: core.ones(v.shape) * v.size, m.parameters()))
    return m


@pytest.mark.parametrize("weights, strict", [
    ("missing", True), ("missing", False), ("extra", True), ("extra", False),
    ("not_array", True), ("not_array", False), ("shape", True), ("shape", False),
    ("empty", True), ("empty", False), ("list_index_out_of_range", False),
    ("module_path", False), ("dict", True), ("duplicate", True)])
def test_load_weights_checks(libs, weights, strict):
    """load_weights from a list of pairs: MLX's exception type (ValueError for missing, extra,
    non-array or misshapen weights under strict) or MLX's resulting parameters."""
    def fn(lib_nn, core, utils):
        w = {
            "missing": [("layers.0.weight", core.zeros((3, 2)))],
            "extra": [("layers.0.weight", core.zeros((3, 2))), ("zz", core.zeros(1))],
            "not_array": [(k, 1.0 if k.endswith("bias") else v)
                          for k, v in utils.tree_flatten(_seq(lib_nn, core, utils).parameters())],
            "shape": [(k, core.zeros((5,)) if k == "layers.2.bias" else v)
                      for k, v in utils.tree_flatten(_seq(lib_nn, core, utils).parameters())],
            "empty": [],
            "list_index_out_of_range": [("layers.7.weight", core.zeros(3))],
            "module_path": [("layers.0", core.zeros(3))],
            "dict": dict(utils.tree_flatten(_seq(lib_nn, core, utils).parameters())),
            "duplicate": utils.tree_flatten(_seq(lib_nn, core, utils).parameters())
            + [("layers.0.bias", core.full((3,), 9.0))],
        }[weights]
        m = lib_nn.Sequential(lib_nn.Linear(2, 3), lib_nn.ReLU(), lib_nn.Linear(3, 1))
        m.update(utils.tree_map(lambda v: core.zeros(v.shape), m.parameters()))
        return m.load_weights(w, strict=strict).parameters()

    _same(libs, fn)


@pytest.mark.parametrize("ext", ["npz", "safetensors"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_weights_files_cross_between_the_libraries(libs, tmp_path, ext, dtype):
    """A file save_weights writes loads (strict) into the other library's model with the
    same names, dtypes, shapes and values, both ways, quantized layers and integer and
    boolean arrays included."""
    def build(lib_nn, core, utils):
        m = lib_nn.Sequential(lib_nn.Linear(64, 32), lib_nn.Embedding(10, 64))
        rng = np.random.default_rng(0)
        m.update(utils.tree_map(
            lambda v: core.array(rng.standard_normal(v.shape).astype(np.float32)), m.parameters()))
        lib_nn.quantize(m, group_size=32, class_predicate=lambda p, _: p == "layers.0")
        m.set_dtype(getattr(core, dtype))
        m.flag = core.array([True, False])
        m.small = core.array([1, -2], core.int8)
        return m

    def describe(m, core, utils):
        return [(k, str(v.dtype).split(".")[-1], tuple(v.shape),
                 np.array(v.astype(core.float32) if v.dtype == core.bfloat16 else v).tolist())
                for k, v in utils.tree_flatten(m.parameters())]

    ours, theirs = libs
    for i, (src, dst) in enumerate(((ours, theirs), (theirs, ours))):
        path = str(tmp_path / f"w{i}.{ext}")
        a = build(*src)
        a.save_weights(path)
        b = build(*dst)
        b.update(dst[2].tree_map(lambda v: dst[1].zeros_like(v), b.parameters()))
        b.load_weights(path)
        assert describe(b, dst[1], dst[2]) == describe(a, src[1], src[2])


def test_weights_files_errors(libs, tmp_path):
    def fn(lib_nn, core, utils):
        out = []
        m = _seq(lib_nn, core, utils)
        for call in (lambda: m.save_weights(str(tmp_path / "w.pt")),
                     lambda: m.load_weights(str(tmp_path / "missing.npz")),
                     lambda: m.load_weights(str(tmp_path / "w.bin"))):
            try:
                call()
                out.append("ok")
            except Exception as exc:  # noqa: BLE001
                out.append(type(exc).__name__)
        other = lib_nn.Sequential(lib_nn.Linear(2, 4), lib_nn.ReLU(), lib_nn.Linear(4, 1))
        other.save_weights(str(tmp_path / f"other_{lib_nn.__name__}.npz"))
        try:
            m.load_weights(str(tmp_path / f"other_{lib_nn.__name__}.npz"))
        except Exception as exc:  # noqa: BLE001
            out.append(type(exc).__name__)
        m.load_weights(str(tmp_path / f"other_{lib_nn.__name__}.npz"), strict=False)
        out.append([tuple(v.shape) for _, v in utils.tree_flatten(m.parameters())])
        return out

    _same(libs, fn)


# ---- quantize --------------------------------------------------------------------------

def _qmodel(lib_nn, core, utils):
    class Model(lib_nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = lib_nn.Linear(64, 32)
            self.l2 = lib_nn.Linear(33, 32)
            self.e = lib_nn.Embedding(10, 64)
            self.seq = lib_nn.Sequential(lib_nn.Linear(64, 64, bias=False), lib_nn.ReLU())
            self.ln = lib_nn.LayerNorm(64)

    m = Model()
    rng = np.random.default_rng(1)
    m.update(utils.tree_map(
        lambda v: core.array(rng.standard_normal(v.shape).astype(np.float32)), m.parameters()))
    return m


QUANTIZE = {
    "only_seq": dict(class_predicate=lambda p, m: p.startswith("seq")),
    "a_norm": dict(class_predicate=lambda p, m: p == "ln"),
    "indivisible": dict(class_predicate=lambda p, m: p == "l2"),
    "dict_or_bool": dict(class_predicate=lambda p, m: {"group_size": 32, "bits": 2} if p == "l1"
                         else hasattr(m, "to_quantized") and p != "l2"),
    "truthy": dict(class_predicate=lambda p, m: 1 if p == "l1" else None),
    "bad_dict": dict(class_predicate=lambda p, m: {"zz": 1} if p == "l1" else False),
    "mode": dict(mode="mxfp4", class_predicate=lambda p, m: p in ("l1", "e")),
    "quantize_input": dict(mode="nvfp4", quantize_input=True, class_predicate=lambda p, m: p == "l1"),
    "quantize_input_false": dict(class_predicate=lambda p, m: {"mode": "mxfp8", "quantize_input": False}
                                 if p == "l1" else False),
    "bad_bits": dict(bits=7, class_predicate=lambda p, m: p == "l1"),
    "bad_mode": dict(mode="zz", class_predicate=lambda p, m: p == "l1"),
}


@pytest.mark.parametrize("case", list(QUANTIZE))
def test_quantize_with_a_class_predicate(libs, case):
    """nn.quantize: the paths the predicate sees, which layers are replaced, their reprs,
    parameter trees and frozen sets, or MLX's exception type."""
    def fn(lib_nn, core, utils):
        m = _qmodel(lib_nn, core, utils)
        kw = dict(QUANTIZE[case])
        seen = []
        pred = kw.pop("class_predicate")
        lib_nn.quantize(m, class_predicate=lambda p, mod: seen.append(p) or pred(p, mod), **kw)
        return [seen, repr(m), [(k, type(x).__name__, sorted(x._no_grad)) for k, x in m.named_modules()],
                [(k, tuple(v.shape), str(v.dtype)) for k, v in utils.tree_flatten(m.parameters())],
                sorted(k for k, _ in utils.tree_flatten(m.trainable_parameters()))]

    _same(libs, fn)


# ---- tree utilities --------------------------------------------------------------------

_NT = collections.namedtuple("_NT", "x y")
_TREE_KEYS = ["a", "b", "_c", "0", "1", "10", "x.y", "", "-1", " 1", "01"]


def _random_tree(r, depth=0):
    k = r.random()
    if depth > 3 or k < 0.3:
        return r.choice([None, 0, 1, 2.5, "s", (), [], {}, ("t",), -1])
    if k < 0.55:
        return [_random_tree(r, depth + 1) for _ in range(r.randint(0, 3))]
    if k < 0.7:
        return tuple(_random_tree(r, depth + 1) for _ in range(r.randint(0, 3)))
    if k < 0.75:
        return _NT(_random_tree(r, depth + 1), _random_tree(r, depth + 1))
    return {r.choice(_TREE_KEYS): _random_tree(r, depth + 1) for _ in range(r.randint(0, 3))}


def _unordered(x):
    """tree_merge's dict order is a set's in MLX: compare merged dicts as sorted items."""
    if isinstance(x, dict):
        return ("dict", sorted((repr(k), _unordered(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_unordered(v) for v in x])
    return x


def _one_elem_tuple(x):
    return isinstance(x, tuple) and len(x) == 1


TREE_OPS = {
    "flatten": lambda u, t, t2: u.tree_flatten(t),
    "flatten_prefix_leaf_dict": lambda u, t, t2: u.tree_flatten(t, prefix=".p", is_leaf=_one_elem_tuple,
                                                                destination={}),
    "roundtrip": lambda u, t, t2: u.tree_unflatten(u.tree_flatten(t)),
    "roundtrip_dict": lambda u, t, t2: u.tree_unflatten(u.tree_flatten(t, destination={})),
    "map": lambda u, t, t2: u.tree_map(repr, t),
    "map_list_leaves": lambda u, t, t2: u.tree_map(repr, t, is_leaf=lambda x: isinstance(x, list)),
    "map_two": lambda u, t, t2: u.tree_map(lambda x, y: (x, y), t, t2),
    "map_with_path": lambda u, t, t2: u.tree_map_with_path(lambda p, x: p, t),
    "map_with_path_two": lambda u, t, t2: u.tree_map_with_path(lambda p, x, y: (p, y), t, t2, path="r"),
    "reduce": lambda u, t, t2: u.tree_reduce(lambda a, x: [a, x], t),
    "reduce_init_leaf": lambda u, t, t2: u.tree_reduce(lambda a, x: [a, x], t, 0,
                                                       is_leaf=lambda x: x == []),
    "merge": lambda u, t, t2: _unordered(u.tree_merge(t, t2)),
    "merge_fn": lambda u, t, t2: _unordered(u.tree_merge(t, t2, lambda a, b: ("m", a, b))),
}


def _tree_outcome(op, u, t, t2):
    try:
        out = op(u, t, t2)
        return type(out).__name__, out
    except Exception as exc:  # noqa: BLE001
        return ("raised", type(exc).__name__)


@pytest.mark.parametrize("seed", range(3))
def test_tree_utilities_on_random_trees(libs, seed):
    """Random nested dicts / lists / tuples / named tuples with None, empty containers and
    awkward keys: every tree utility gives MLX's result (structure, container types, keys,
    order) or MLX's exception type."""
    u_ours, u_theirs = libs[0][2], libs[1][2]
    r = random.Random(seed)
    for _ in range(300):
        t, t2 = _random_tree(r), _random_tree(r)
        if r.random() < 0.3:
            t2 = t
        for name, op in TREE_OPS.items():
            ours, theirs = _tree_outcome(op, u_ours, t, t2), _tree_outcome(op, u_theirs, t, t2)
            assert ours == theirs, f"{name}({t!r}, {t2!r}): {ours} vs {theirs}"


TREE_EDGE_CASES = {
    "flatten_prefix_without_dot": lambda u: u.tree_flatten({"a": [1]}, prefix="pq"),
    "flatten_leaf_with_prefix": lambda u: u.tree_flatten(5, prefix="pq"),
    "flatten_into_existing": lambda u: u.tree_flatten({"a": 1}, destination={"zz": 1}),
    "flatten_bad_destination": lambda u: u.tree_flatten({"a": 1}, destination=()),
    "flatten_colliding_paths": lambda u: u.tree_flatten({"a": {"b": 1}, "a.b": 2}, destination={}),
    "flatten_non_string_keys": lambda u: u.tree_flatten({1: [2], None: 3}),
    "unflatten_single_empty_key": lambda u: u.tree_unflatten([("", 5)]),
    "unflatten_empty_key_and_more": lambda u: u.tree_unflatten([("", 5), ("a", 1)]),
    "unflatten_negative_index": lambda u: u.tree_unflatten([("-1", 5), ("0", 1)]),
    "unflatten_leading_zero_collision": lambda u: u.tree_unflatten([("01", 5), ("1", 6)]),
    "unflatten_gaps": lambda u: u.tree_unflatten({"a.0": 1, "a.2": 3, "b": None}),
    "unflatten_duplicates": lambda u: u.tree_unflatten([("a.b", 5), ("a", 6)]),
    "unflatten_triples": lambda u: u.tree_unflatten([("a", 5, 6)]),
    "unflatten_underscored_int": lambda u: u.tree_unflatten([("1_0", 5)]),
    "unflatten_int_key": lambda u: u.tree_unflatten([(1, 5)]),
    "map_with_path_zero_root": lambda u: u.tree_map_with_path(lambda p, x: p, {"a": [1]}, path=0),
    "map_with_path_leaf_root": lambda u: u.tree_map_with_path(lambda p, x: (p, x), 5),
    "map_named_tuple": lambda u: (lambda o: (type(o).__name__, o))(u.tree_map(lambda x: x + 1, _NT(1, [2]))),
    "map_ordered_dict": lambda u: type(u.tree_map(lambda x: 1, collections.OrderedDict(a=1))).__name__,
    "map_short_rest": lambda u: u.tree_map(lambda x, y: (x, y), {"a": [1, 2]}, {"a": [1]}),
    "map_leaf_in_rest": lambda u: u.tree_map(lambda x, y: (x, y), {"a": [1, 2]}, {"a": 5}),
    "reduce_none_leaves": lambda u: u.tree_reduce(lambda a, x: [a, x], [None, 1, None, 2]),
    "reduce_root_is_leaf": lambda u: u.tree_reduce(lambda a, x: [a, x], [1, 2], 0,
                                                   is_leaf=lambda x: isinstance(x, list)),
    "reduce_zero_first": lambda u: u.tree_reduce(lambda a, x: a * 10 + x, [0, 1, 2]),
    "merge_list_and_dict": lambda u: u.tree_merge([1], {"a": 1}),
    "merge_empty_types": lambda u: u.tree_merge([], {}),
    "merge_list_into_tuple": lambda u: u.tree_merge((1, None), [None, 2, 3]),
    "merge_named_tuples": lambda u: u.tree_merge(_NT(1, None), _NT(None, 2)),
    "merge_none_none": lambda u: u.tree_merge(None, None),
    "merge_none_none_fn": lambda u: u.tree_merge(None, None, lambda a, b: "m"),
    "merge_empty_list_and_none": lambda u: u.tree_merge({"a": {"b": []}}, {"a": {"b": None}}),
}


@pytest.mark.parametrize("case", list(TREE_EDGE_CASES))
def test_tree_utility_edge_cases(libs, case):
    ours, theirs = (_tree_outcome(lambda u, t, t2: TREE_EDGE_CASES[case](u), lib[2], None, None)
                    for lib in libs)
    assert ours == theirs


def test_tree_merge_keeps_a_deterministic_key_order():
    """Left alone on purpose: MLX merges dict keys through a set (an order that changes with
    string hashing between runs); streamlet keeps tree_a's keys, then tree_b's new ones."""
    merged = su.tree_merge({"z": 0, "c": [1]}, {"b": 1, "c": [None, 2], "a": 3})
    assert list(merged) == ["z", "c", "b", "a"]
    assert merged == {"z": 0, "c": [1, 2], "b": 1, "a": 3}
