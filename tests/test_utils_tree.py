"""streamlet.utils against mlx.utils on nested trees (drawn by hypothesis) and edge cases."""
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from streamlet import utils
from nn_oracle import needs_oracle

mlx_utils = pytest.importorskip("mlx.utils")

keys = st.text("abcxyz_", min_size=1, max_size=3)
leaves = st.integers(-5, 5)
trees = st.recursive(leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.tuples(kids, kids), st.dictionaries(keys, kids, max_size=3)),
    max_leaves=12)
# trees that survive flattening: no empty containers, no tuples (they come back as lists)
flat_trees = st.recursive(leaves, lambda kids: st.one_of(
    st.lists(kids, min_size=1, max_size=3), st.dictionaries(keys, kids, min_size=1, max_size=3)),
    max_leaves=12)


class Pair(NamedTuple):
    m: int
    b: int


class Vector(tuple):
    pass


pytestmark = needs_oracle


@given(trees)
@settings(max_examples=60, deadline=None)
def test_flatten_map_reduce_match_mlx(tree):
    assert utils.tree_flatten(tree) == mlx_utils.tree_flatten(tree)
    assert utils.tree_flatten(tree, prefix=".p", destination={}) == \
        mlx_utils.tree_flatten(tree, prefix=".p", destination={})
    assert utils.tree_map(lambda x: x * 2, tree) == mlx_utils.tree_map(lambda x: x * 2, tree)
    assert utils.tree_map_with_path(lambda p, x: (p, x), tree, path="r") == \
        mlx_utils.tree_map_with_path(lambda p, x: (p, x), tree, path="r")
    assert utils.tree_reduce(lambda a, x: a * 3 + x, tree, 1) == \
        mlx_utils.tree_reduce(lambda a, x: a * 3 + x, tree, 1)
    assert utils.tree_reduce(lambda a, x: a - x, tree) == \
        mlx_utils.tree_reduce(lambda a, x: a - x, tree)
    is_leaf = lambda x: isinstance(x, tuple)  # noqa: E731
    assert utils.tree_flatten(tree, is_leaf=is_leaf) == \
        mlx_utils.tree_flatten(tree, is_leaf=is_leaf)


@given(flat_trees)
@settings(max_examples=60, deadline=None)
def test_unflatten_inverts_flatten(tree):
    flat = utils.tree_flatten(tree)
    assert utils.tree_unflatten(flat) == tree
    assert utils.tree_unflatten(dict(flat)) == mlx_utils.tree_unflatten(dict(flat))


@given(trees, st.randoms())
@settings(max_examples=60, deadline=None)
def test_merge_of_complementary_halves_is_the_tree(tree, rnd):
    picks = {}

    def half(path, x, first):
        side = picks.setdefault(path, rnd.random() < 0.5)
        return x if side == first else None

    a = utils.tree_map_with_path(lambda p, x: half(p, x, True), tree)
    b = utils.tree_map_with_path(lambda p, x: half(p, x, False), tree)
    merged = utils.tree_merge(a, b)
    assert merged == mlx_utils.tree_merge(a, b)
    if utils.tree_flatten(tree):
        assert utils.tree_flatten(merged) == utils.tree_flatten(tree)


def test_multiple_trees_map_leafwise():
    a, b = {"x": [1, 2], "y": 3}, {"x": [10, 20], "y": 30, "z": 0}
    assert utils.tree_map(lambda p, q: p + q, a, b) == {"x": [11, 22], "y": 33}
    paths = []
    utils.tree_map_with_path(lambda p, *_: paths.append(p), a, b)
    assert paths == ["x.0", "x.1", "y"]


def test_tuple_types_are_kept():
    pair = utils.tree_map(lambda x: x + 1, Pair(1, 2))
    vec = utils.tree_map(lambda x: x + 1, Vector([1, 2]))
    assert isinstance(pair, Pair) and pair == Pair(2, 3)
    assert isinstance(vec, Vector) and vec == (2, 3)
    assert utils.tree_merge(Pair(1, None), Pair(None, 2)) == Pair(1, 2)
    merged = utils.tree_merge(Vector([1, 2]), Vector([3, 4]), lambda p, q: p * q)
    assert isinstance(merged, Vector) and merged == (3, 8)
    assert utils.tree_map_with_path(lambda p, x: p, Pair(0, 0)) == Pair("0", "1")


def test_flatten_options():
    assert utils.tree_flatten([[[0]]]) == [("0.0.0", 0)]
    assert utils.tree_flatten([[[0]]], prefix=".hello") == [("hello.0.0.0", 0)]
    assert utils.tree_flatten({"a": {"b": 1}}, destination={}) == {"a.b": 1}
    assert utils.tree_flatten({"a": {}, "b": []}) == []
    assert utils.tree_flatten(5) == [("", 5)]
    with pytest.raises(ValueError, match="Destination"):
        utils.tree_flatten([1], destination=(1,))


def test_unflatten_lists_and_dicts():
    assert utils.tree_unflatten([("", 7)]) == 7
    assert utils.tree_unflatten([("0", "a"), ("2", "c")]) == ["a", {}, "c"]
    assert utils.tree_unflatten({"w.1.b": 1, "w.0.a": 0}) == {"w": [{"a": 0}, {"b": 1}]}
    tree = utils.tree_unflatten([("01", "a"), ("1", "b"), ("2", "c")])
    assert tree == {"01": "a", "1": "b", "2": "c"}
    assert tree == mlx_utils.tree_unflatten([("01", "a"), ("1", "b"), ("2", "c")])


def test_merge_rules():
    assert utils.tree_merge({"a": 0}, {"b": 1}) == {"a": 0, "b": 1}
    with pytest.raises(ValueError, match="merge function"):
        utils.tree_merge({"a": 0}, {"a": 0})
    with pytest.raises(ValueError, match="Cannot merge dict with list"):
        utils.tree_merge({}, [])
    assert utils.tree_merge({"a": {}}, {"a": {}}, lambda *_: 1 / 0) == {"a": {}}
    assert utils.tree_merge([{"a": 1}, {}], [{"b": 2}, {}]) == [{"a": 1, "b": 2}, {}]
    assert utils.tree_merge({"a": ()}, {"a": ()}) == {"a": ()}
    assert utils.tree_merge({"a": 1, "b": {}, "c": {}}, {"a": {}, "b": {}, "c": 2}) == \
        {"a": 1, "b": {}, "c": 2}


def test_arrays_as_leaves():
    tree = {"w": mx.ones((2,)), "b": [mx.zeros((1,))]}
    doubled = utils.tree_map(lambda x: x * 2, tree)
    assert doubled["w"].tolist() == [2.0, 2.0] and doubled["b"][0].tolist() == [0.0]
    total = utils.tree_reduce(lambda acc, x: acc + x.sum(), tree, 0.0)
    assert total.item() == 2.0
    assert [k for k, _ in utils.tree_flatten(tree)] == ["w", "b.0"]
