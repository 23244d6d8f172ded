"""nn.Module: trees of parameters and submodules, updates, freezing, modes and weight files,
each compared with mlx.nn's on the same model."""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from streamlet.utils import tree_flatten, tree_map
from nn_oracle import close, mlx_core, mlx_nn, needs_oracle, twins

pytestmark = needs_oracle


def models(lib):
    """Models of many shapes, built with ``lib`` (streamlet.nn or mlx.nn)."""
    core = mx if lib is nn else mlx_core

    class Custom(lib.Module):
        def __init__(self):
            super().__init__()
            self.stuff = [lib.Linear(2, 2), 0, {"deep": lib.Linear(2, 3, bias=False)}]
            self.table = {"hi": lib.Embedding(4, 2), "bye": [lib.ReLU(), lib.GELU()]}
            self._hidden = lib.Linear(1, 1)  # "_": in the dict, not a parameter
            self.vector = core.ones((3,))
            self.scale = 3.0

    return [
        lib.Sequential(lib.Sequential(lib.Linear(2, 10), lib.relu),
                       lib.Sequential(lib.Linear(10, 10), lib.ReLU()), lib.Linear(10, 1)),
        lib.Sequential(lib.Linear(2, 2), lib.ReLU(), lib.Linear(2, 2), lib.ReLU()),
        lib.MultiHeadAttention(8, 2, bias=True),
        lib.TransformerEncoder(2, 8, 2),
        lib.BatchNorm(3),
        lib.Conv2d(2, 4, 3, padding=1),
        lib.LSTM(3, 4),
        Custom(),
    ]


def both_models():
    mx.random.seed(0)
    ours = models(nn)
    mlx_core.random.seed(0)
    return zip(ours, models(mlx_nn))


def shape_tree(tree):
    return tree_map(lambda x: tuple(x.shape), tree)


def type_tree(tree):
    return tree_map(lambda m: type(m).__name__, tree, is_leaf=nn.Module.is_module) if \
        isinstance(tree, dict) else tree


def mlx_type_tree(tree):
    return tree_map(lambda m: type(m).__name__, tree, is_leaf=mlx_nn.Module.is_module)


def test_trees_have_mlx_layout():
    for a, b in both_models():
        name = type(a).__name__
        assert shape_tree(a.parameters()) == shape_tree(b.parameters()), name
        assert shape_tree(a.trainable_parameters()) == shape_tree(b.trainable_parameters())
        assert type_tree(a.children()) == mlx_type_tree(b.children()), name
        assert type_tree(a.leaf_modules()) == mlx_type_tree(b.leaf_modules()), name
        assert [type(m).__name__ for m in a.modules()] == \
            [type(m).__name__ for m in b.modules()], name
        assert [k for k, _ in a.named_modules()] == [k for k, _ in b.named_modules()], name
        assert repr(a) == repr(b), name
        assert sorted(a.keys()) == sorted(b.keys()), name


def test_seeded_initialization_draws_mlx_parameters():
    for a, b in both_models():
        close(a.parameters(), b.parameters(), rtol=1e-6, atol=1e-7, what=type(a).__name__)


def test_freeze_and_unfreeze_select_mlx_parameters():
    actions = [
        lambda m: m.freeze(),
        lambda m: m.freeze(keys="bias"),
        lambda m: m.freeze(keys=["weight"], recurse=False),
        lambda m: m.freeze().unfreeze(keys="bias"),
        lambda m: m.freeze(recurse=False),
        lambda m: m.freeze().unfreeze(recurse=False),
        lambda m: m.apply_to_modules(lambda k, v: v.freeze() if k.endswith("0") else None),
    ]
    for act in actions:
        for a, b in both_models():
            act(a)
            act(b)
            assert shape_tree(a.trainable_parameters()) == \
                shape_tree(b.trainable_parameters()), type(a).__name__


def test_freeze_strict_keys():
    m = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2))
    m.freeze(keys="bias", strict=True)  # in the model, though not in every module
    assert not any(k.endswith("bias") for k, _ in tree_flatten(m.trainable_parameters()))
    m.unfreeze(keys="bias", strict=True)
    assert any(k.endswith("bias") for k, _ in tree_flatten(m.trainable_parameters()))
    with pytest.raises(KeyError, match="not_a_member"):
        m.freeze(keys="not_a_member", strict=True)
    with pytest.raises(KeyError):
        m.layers[0].freeze(keys="bias", strict=True, recurse=False)


def test_batchnorm_statistics_stay_frozen():
    bn = nn.BatchNorm(3)
    assert sorted(bn.trainable_parameters()) == ["bias", "weight"]
    bn.unfreeze()
    assert sorted(bn.trainable_parameters()) == ["bias", "weight"]
    assert sorted(bn.parameters()) == ["bias", "running_mean", "running_var", "weight"]


def test_attributes_live_in_the_dict_or_on_the_object():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.val = None
            self.val = mx.array(1.0)
            self.pad = (1, 2)
            self.count = 3

    m = Model()
    assert "val" in m and "pad" in m and "count" not in m
    assert m.val.item() == 1.0 and m.count == 3
    m.val = None
    assert m.val is None and "val" not in m
    m.val = mx.array([3])
    assert m.val.item() == 3
    del m.val
    assert not hasattr(m, "val")
    with pytest.raises(AttributeError, match="nothing"):
        m.nothing
    lin = nn.Linear(4, 4)
    del lin.weight
    assert not hasattr(lin, "weight")
    assert lin.state is lin
    lin.state["hello"] = "world"
    assert lin["hello"] == "world"


def test_update_replaces_and_validates_like_mlx():
    for lib in (nn, mlx_nn):
        m = lib.Sequential(lib.Linear(3, 3), lib.Linear(3, 3))
        for bad in ({"layers": [{"value": 0}]}, {"layers": ["hello"]},
                    {"layers": [{"weight": "hi"}]}, {"layers": [{}, {}, {}]}):
            with pytest.raises(ValueError):
                m.update(bad)
        m.update({"layers": [{}, {}, {}], "extra": 1}, strict=False)  # ignored
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    new = mx.zeros((3,))
    assert m.update({"layers": [{}, {"bias": new}]}) is m
    assert m.layers[1].bias is new
    m.apply(lambda x: x.astype(mx.float16))
    assert {x.dtype for _, x in tree_flatten(m.parameters())} == {mx.float16}
    m.apply(lambda x: x * 0, filter_fn=lambda mod, k, v: k != "weight")
    assert m.layers[0].bias.tolist() == [0, 0, 0] and m.layers[0].weight.abs().sum().item() > 0


def test_update_modules_like_mlx():
    for lib in (nn, mlx_nn):
        m = lib.Sequential(lib.Linear(3, 3), lib.Linear(3, 3))
        for bad in ({"values": [0, 1]}, {"layers": [0, 1]},
                    {"layers": [{}, {}, lib.Linear(3, 4)]}):
            with pytest.raises(ValueError):
                m.update_modules(bad)
        m.update_modules({"layers": [{}, lib.Linear(3, 4), lib.Linear(5, 5)]}, strict=False)
        assert len(m.layers) == 2 and m.layers[1].weight.shape == (4, 3)
    m = models(nn)[-1]
    m.update_modules(m.leaf_modules())  # always valid
    gelu = nn.GELU(approx="fast")
    m.update_modules({"table": {"bye": [{}, gelu]}})
    assert m.table["bye"][1] is gelu


def test_train_and_eval_reach_every_module():
    m = models(nn)[3]
    assert m.eval() is m
    assert not any(mod.training for mod in m.modules())
    m.train()
    assert all(mod.training for mod in m.modules())
    assert not m.update(m.parameters()).eval()._training


def test_set_dtype_casts_floating_parameters():
    m = nn.Sequential(nn.Linear(2, 2), nn.Embedding(3, 2))
    m.layers[1].ids = mx.array([1, 2])
    m.set_dtype(mx.bfloat16)
    assert m.layers[0].weight.dtype == mx.bfloat16 and m.layers[1].ids.dtype == mx.int32
    m.set_dtype(mx.float16, predicate=None)
    assert m.layers[1].ids.dtype == mx.float16


def test_load_weights_checks_like_mlx():
    for lib, core in ((nn, mx), (mlx_nn, mlx_core)):
        m = lib.Linear(2, 2)
        bad = [[("weight", core.ones((2, 2)))],
               [("weihgt", core.ones((2, 2)))],
               [("weight", core.ones((2, 2))), ("bias", core.ones((2,))),
                ("bias2", core.ones((2,)))],
               [("weight", core.ones((2, 2))), ("bias", core.ones((2, 1)))],
               [("weight", core.ones((2, 2))), ("bias", 3)]]
        for weights in bad:
            with pytest.raises(ValueError):
                m.load_weights(weights)
        m.load_weights([("weight", core.ones((2, 2)))], strict=False)
        assert m.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
        m.load_weights([], strict=False)
        seq = lib.Sequential(lib.Linear(2, 2))
        seq.load_weights([("layers.0.weight", core.ones((2, 2))),
                          ("layers.1.weight", core.ones((2, 2)))], strict=False)
        assert len(seq.layers) == 1 and seq.layers[0].weight.sum().item() == 4


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_weight_files_load_across_libraries(tmp_path, suffix):
    ours, theirs = twins(lambda lib: lib.Sequential(lib.Linear(3, 4), lib.ReLU(),
                                                     lib.LayerNorm(4), lib.Conv1d(4, 2, 3)))
    theirs.update(mlx_nn.Sequential(mlx_nn.Linear(3, 4), mlx_nn.ReLU(), mlx_nn.LayerNorm(4),
                                    mlx_nn.Conv1d(4, 2, 3)).parameters())
    mlx_file, our_file = tmp_path / f"mlx{suffix}", tmp_path / f"ours{suffix}"
    theirs.save_weights(str(mlx_file))
    ours.load_weights(str(mlx_file))
    close(ours.parameters(), theirs.parameters(), rtol=0, atol=0)
    mx.random.seed(5)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4), nn.Conv1d(4, 2, 3))
    fresh.save_weights(our_file)
    theirs.load_weights(str(our_file))
    close(fresh.parameters(), theirs.parameters(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="Unsupported file extension"):
        fresh.save_weights(str(tmp_path / "w.bin"))


def test_bfloat16_weights_round_trip(tmp_path):
    m = nn.Linear(3, 2)
    m.set_dtype(mx.bfloat16)
    path = str(tmp_path / "w.safetensors")
    m.save_weights(path)
    back = mlx_nn.Linear(3, 2)
    back.load_weights(path)
    assert back.weight.dtype == mlx_core.bfloat16
    np.testing.assert_array_equal(np.array(back.weight.astype(mlx_core.float32)),
                                  np.array(m.weight.astype(mx.float32)))


def test_filter_and_map_keeps_container_positions():
    a = models(nn)[-1]
    b = models(mlx_nn)[-1]

    def keep(module, key, value):
        return not key.endswith("bias")

    def shape(x):
        return tuple(x.shape) if hasattr(x, "shape") else x

    got = a.filter_and_map(keep, map_fn=shape)
    want = b.filter_and_map(keep, map_fn=shape)
    assert got == want
