"""streamlet.optimizers against mlx.optimizers: updates and state on given gradients over several
steps, schedules, gradient clipping, MultiOptimizer, and training through nn.value_and_grad."""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from streamlet.utils import tree_flatten, tree_map, tree_unflatten
from nn_oracle import (close, mlx_core, mlx_nn, mlx_optim, needs_oracle, ours, skip_unless,
                       theirs, twins)

pytestmark = needs_oracle

# class name, constructor arguments (a callable learning rate is built per library)
OPTIMIZERS = [
    ("SGD", {"learning_rate": 0.1}),
    ("SGD", {"learning_rate": 0.1, "momentum": 0.9}),
    ("SGD", {"learning_rate": 0.05, "momentum": 0.8, "weight_decay": 0.01, "dampening": 0.3}),
    ("SGD", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True}),
    ("RMSprop", {"learning_rate": 0.01}),
    ("RMSprop", {"learning_rate": 0.01, "alpha": 0.5, "eps": 1e-4}),
    ("Adagrad", {"learning_rate": 0.1}),
    ("AdaDelta", {"learning_rate": 1.0}),
    ("AdaDelta", {"learning_rate": 0.5, "rho": 0.5, "eps": 1e-3}),
    ("Adam", {"learning_rate": 0.01}),
    ("Adam", {"learning_rate": 0.01, "betas": [0.8, 0.9], "bias_correction": True}),
    ("AdamW", {"learning_rate": 0.01}),
    ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1, "bias_correction": True}),
    ("Adamax", {"learning_rate": 0.01}),
    ("Adamax", {"learning_rate": 0.01, "betas": [0.5, 0.6], "eps": 1e-3}),
    ("Lion", {"learning_rate": 0.01}),
    ("Lion", {"learning_rate": 0.01, "betas": [0.5, 0.7], "weight_decay": 0.1}),
    ("Adafactor", {}),
    ("Adafactor", {"learning_rate": 0.01, "relative_step": False, "beta_1": 0.9,
                   "weight_decay": 0.1, "scale_parameter": False}),
    ("Adafactor", {"warmup_init": True, "clip_threshold": 0.5, "decay_rate": -0.5}),
    ("Muon", {"learning_rate": 0.02}),
    ("Muon", {"learning_rate": 0.02, "nesterov": False, "weight_decay": 0, "ns_steps": 3}),
    ("Adam", {"learning_rate": ("cosine_decay", 0.1, 3)}),
    ("SGD", {"learning_rate": ("exponential_decay", 0.1, 0.5), "momentum": 0.5}),
]


def params_and_grads(steps, dtype=np.float32):
    rng = np.random.default_rng(0)
    shapes = {"w": (4, 3), "layers": [{"k": (2, 3, 2)}, {"b": (3,)}], "s": ()}
    make = lambda shape: rng.normal(size=shape).astype(dtype)  # noqa: E731
    params = tree_map(make, shapes, is_leaf=lambda x: isinstance(x, tuple))
    grads = [tree_map(make, shapes, is_leaf=lambda x: isinstance(x, tuple))
             for _ in range(steps)]
    return params, grads


def build(lib_optim, name, kwargs):
    kwargs = dict(kwargs)
    lr = kwargs.get("learning_rate")
    if isinstance(lr, tuple):
        kwargs["learning_rate"] = getattr(lib_optim, lr[0])(*lr[1:])
    return getattr(lib_optim, name)(**kwargs)


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
def test_updates_and_state_match_mlx(name, kwargs):
    params, grads = params_and_grads(4)
    a, b = build(optim, name, kwargs), build(mlx_optim, name, kwargs)
    p_ours, p_mlx = tree_map(ours, params), tree_map(theirs, params)
    for step, g in enumerate(grads):
        p_ours = a.apply_gradients(tree_map(ours, g), p_ours)
        p_mlx = b.apply_gradients(tree_map(theirs, g), p_mlx)
        close(p_ours, p_mlx, rtol=2e-5, atol=2e-6, what=f"{name} step {step}")
        close(a.state, b.state, rtol=2e-5, atol=2e-6, what=f"{name} state {step}")
    assert a.step.item() == 4 and a.step.dtype == mx.uint64


@pytest.mark.parametrize("name", sorted({n for n, _ in OPTIMIZERS}))
def test_dtypes_and_shapes_are_kept(name):
    params = {"w": mx.ones((5, 5), mx.float16), "b": [mx.ones((3,), mx.bfloat16)]}
    grads = tree_map(mx.ones_like, params)
    opt = getattr(optim, name)(0.1) if name != "Adafactor" else optim.Adafactor()
    out = opt.apply_gradients(grads, params)
    assert out["w"].dtype == mx.float16 and out["b"][0].dtype == mx.bfloat16
    assert out["w"].shape == (5, 5) and out["b"][0].shape == (3,)


def test_explicit_init_builds_the_state_tree():
    params = {"first": [mx.zeros((10,)), mx.zeros((1,))], "second": mx.zeros((1,))}
    opt = optim.SGD(learning_rate=1e-2, momentum=0.9)
    opt.init(params)
    assert [k for k, _ in tree_flatten(opt.state)] == ["step", "learning_rate", "first.0.v",
                                                       "first.1.v", "second.v"]
    m = mlx_optim.SGD(learning_rate=1e-2, momentum=0.9)
    m.init(tree_map(theirs, params))
    close(opt.state, m.state)
    # init keeps state that exists and adds what is missing
    opt.state["second"]["v"] = mx.ones((1,))
    opt.init({**params, "third": [mx.zeros((2,))]})
    assert opt.state["second"]["v"].tolist() == [1.0]
    assert opt.state["third"][0]["v"].tolist() == [0.0, 0.0]


def test_state_can_be_replaced_and_saved():
    params, grads = params_and_grads(3)
    a = optim.Adam(0.01)
    p = a.apply_gradients(tree_map(ours, grads[0]), tree_map(ours, params))
    saved = dict(tree_flatten(a.state))
    b = optim.Adam(0.01)
    b.state = tree_unflatten(list(saved.items()))
    pa = a.apply_gradients(tree_map(ours, grads[1]), p)
    pb = b.apply_gradients(tree_map(ours, grads[1]), p)
    close(pa, pb, rtol=0, atol=0)
    opt = optim.SGD(0.1)
    opt.state["hello"] = "world"
    assert opt.state["hello"] == "world"
    opt.state = {0: 1}
    assert opt.state == {0: 1}


def test_learning_rate_can_be_set():
    opt = optim.Adam(0.1)
    opt.learning_rate = 0.5
    assert opt.learning_rate.item() == 0.5 and isinstance(opt.learning_rate, mx.array)
    multi = optim.MultiOptimizer([optim.SGD(0.1), optim.Adam(0.2)], [lambda k, g: "w" in k])
    multi.learning_rate = 0.3
    assert [o.learning_rate.item() for o in multi.optimizers] == [pytest.approx(0.3)] * 2


def test_multi_optimizer_matches_mlx():
    params, grads = params_and_grads(3)

    def make(lib):
        return lib.MultiOptimizer([lib.SGD(0.1, momentum=0.9), lib.Adam(0.01), lib.Lion(0.01)],
                                  [lambda k, g: k.startswith("w"), lambda k, g: g.ndim == 1])

    a, b = make(optim), make(mlx_optim)
    p_ours, p_mlx = tree_map(ours, params), tree_map(theirs, params)
    for g in grads:
        p_ours = a.apply_gradients(tree_map(ours, g), p_ours)
        p_mlx = b.apply_gradients(tree_map(theirs, g), p_mlx)
        flat_ours, flat_mlx = dict(tree_flatten(p_ours)), dict(tree_flatten(p_mlx))
        assert flat_ours.keys() == flat_mlx.keys()
        for k in flat_ours:
            close(flat_ours[k], flat_mlx[k], rtol=1e-5, atol=1e-6, what=k)
    close(a.state, b.state, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="filters"):
        optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(0.1)])
    with pytest.raises(ValueError, match="Invalid state"):
        a.state = {"states": [{}]}


def test_hyperparameter_checks_match_mlx():
    bad = [("SGD", (0.1,), {"nesterov": True}), ("RMSprop", (0.1,), {"alpha": -1}),
           ("RMSprop", (0.1,), {"eps": 0}), ("Adagrad", (0.1,), {"eps": 0}),
           ("AdaDelta", (0.1,), {"rho": -0.1}), ("AdaDelta", (0.1,), {"eps": 0}),
           ("Adam", (0.1,), {"betas": [1.0, 0.9]}), ("Adam", (0.1,), {"eps": -1}),
           ("AdamW", (0.1,), {"betas": [0.9, -0.1]}), ("Lion", (0.1,), {"betas": [0.9, 1.0]})]
    for name, args, kwargs in bad:
        for lib in (optim, mlx_optim):
            with pytest.raises(ValueError):
                getattr(lib, name)(*args, **kwargs)


SCHEDULES = [
    ("exponential_decay", (0.1, 0.9)), ("step_decay", (0.1, 0.5, 3)),
    ("cosine_decay", (0.1, 10)), ("cosine_decay", (0.1, 10, 0.01)),
    ("linear_schedule", (0.0, 0.1, 5)), ("linear_schedule", (1.0, 0.5, 7)),
]


@pytest.mark.parametrize("name,args", SCHEDULES, ids=[f"{n}-{i}" for i, (n, _) in
                                                      enumerate(SCHEDULES)])
def test_schedule_matches_mlx(name, args):
    ours_fn, mlx_fn = getattr(optim, name)(*args), getattr(mlx_optim, name)(*args)
    for step in range(0, 14, 3):
        for s_ours, s_mlx in ((step, step), (mx.array(step), mlx_core.array(step)),
                              (mx.array(step, mx.uint64), mlx_core.array(step, mlx_core.uint64))):
            got, want = ours_fn(s_ours), mlx_fn(s_mlx)
            if hasattr(want, "shape"):
                close(got, want, rtol=1e-6, atol=1e-7, what=f"{name} at {step}")
            else:
                assert got == pytest.approx(want)


def test_joined_schedules_match_mlx():
    def make(lib):
        warmup = lib.linear_schedule(0.0, 1e-1, 10)
        return lib.join_schedules([warmup, lib.cosine_decay(1e-1, 20), lib.step_decay(
            1e-2, 0.5, 2)], [10, 30])

    a, b = make(optim), make(mlx_optim)
    for step in range(0, 40, 3):
        close(a(mx.array(step)), b(mlx_core.array(step)), rtol=1e-6, atol=1e-8, what=str(step))
    for args in (([], []), ([optim.linear_schedule(0, 1, 2)], [3])):
        with pytest.raises(ValueError):
            optim.join_schedules(*args)
    for name, args in (("step_decay", (0.1, 0.9, 0)), ("cosine_decay", (0.1, 0)),
                       ("linear_schedule", (0.1, 0.2, 0))):
        with pytest.raises(ValueError):
            getattr(optim, name)(*args)


def test_scheduled_learning_rate_follows_the_step():
    opt = optim.SGD(learning_rate=optim.linear_schedule(1.0, 0.0, 4))
    params = {"w": mx.zeros((1,))}
    rates = []
    for _ in range(5):
        opt.apply_gradients({"w": mx.ones((1,))}, params)
        rates.append(round(opt.learning_rate.item(), 6))
    m = mlx_optim.SGD(learning_rate=mlx_optim.linear_schedule(1.0, 0.0, 4))
    want = []
    for _ in range(5):
        m.apply_gradients({"w": mlx_core.ones((1,))}, {"w": mlx_core.zeros((1,))})
        want.append(round(m.learning_rate.item(), 6))
    assert rates == want == [1.0, 0.75, 0.5, 0.25, 0.0]


@pytest.mark.parametrize("max_norm", [0.0, 0.5, 1.0, 100.0])
def test_clip_grad_norm_matches_mlx(max_norm):
    _, grads = params_and_grads(1)
    g = grads[0]
    g["half"] = np.arange(6, dtype=np.float16).reshape(2, 3)
    got, norm = optim.clip_grad_norm(tree_map(ours, g), max_norm)
    want, mlx_norm = mlx_optim.clip_grad_norm(tree_map(theirs, g), max_norm)
    close(norm, mlx_norm, rtol=1e-6)
    close(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        optim.clip_grad_norm(tree_map(ours, g), -1.0)


def test_update_changes_the_model():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    before = [np.array(x) for _, x in tree_flatten(model.parameters())]
    grads = tree_map(mx.ones_like, model.trainable_parameters())
    optim.SGD(0.5).update(model, grads)
    after = [np.array(x) for _, x in tree_flatten(model.parameters())]
    for x, y in zip(before, after):
        np.testing.assert_allclose(y, x - 0.5, rtol=1e-6)


def _train(lib, core, lib_optim, model, steps, x, y):
    opt = lib_optim.AdamW(learning_rate=lib_optim.cosine_decay(1e-2, steps))

    def loss_fn(model, x, y):
        return lib.losses.cross_entropy(model(x), y, reduction="mean")

    step = lib.value_and_grad(model, loss_fn)
    losses = []
    for _ in range(steps):
        loss, grads = step(model, x, y)
        opt.update(model, grads)
        core.eval(model.parameters(), opt.state)
        losses.append(loss.item())
    return losses


def test_training_with_value_and_grad_follows_mlx():
    skip_unless("value_and_grad")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=(16,)).astype(np.int32)
    a, b = twins(lambda nn: nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Dropout(0.0),
                                          nn.Linear(16, 3)))
    got = _train(nn, mx, optim, a, 8, ours(x), ours(y))
    want = _train(mlx_nn, mlx_core, mlx_optim, b, 8, theirs(x), theirs(y))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert got[-1] < got[0]
    close(a.parameters(), b.parameters(), rtol=1e-4, atol=1e-5)


def test_value_and_grad_skips_frozen_parameters():
    skip_unless("value_and_grad")
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    model.layers[0].freeze()
    loss, grads = nn.value_and_grad(model, lambda x: model(x).sum())(mx.ones((4, 3)))
    assert [k for k, _ in tree_flatten(grads)] == ["layers.1.weight", "layers.1.bias"]
    assert grads["layers"][0] == {}
    np.testing.assert_allclose(np.array(grads["layers"][1]["bias"]), [4.0])


def test_compiled_training_step_follows_mlx():
    skip_unless("value_and_grad", "compile")
    rng = np.random.default_rng(2)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 1)).astype(np.float32)

    def run(lib, core, lib_optim, model, x, y):
        opt = lib_optim.Adam(learning_rate=lib_optim.exponential_decay(0.1, 0.9))
        opt.init(model.trainable_parameters())
        state = [model.state, opt.state]

        def loss_fn(x, y):
            return lib.losses.mse_loss(model(x), y)

        def step(x, y):
            loss, grads = lib.value_and_grad(model, loss_fn)(x, y)
            opt.update(model, grads)
            return loss

        step = core.compile(step, inputs=state, outputs=state)
        losses = [step(x, y).item() for _ in range(5)]
        return losses, model

    a, b = twins(lambda nn: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    got, a = run(nn, mx, optim, a, ours(x), ours(y))
    want, b = run(mlx_nn, mlx_core, mlx_optim, b, theirs(x), theirs(y))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    close(a.parameters(), b.parameters(), rtol=1e-4, atol=1e-5)


def test_cnn_training_follows_mlx():
    skip_unless("value_and_grad", "conv2d")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 12, 12, 2)).astype(np.float32)
    y = rng.integers(0, 4, size=(8,)).astype(np.int32)

    def build(nn):
        # no bias before BatchNorm: its gradient is rounding noise, which Adam would amplify
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm(4),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 4, 3, stride=2), nn.SiLU(),
                             nn.Dropout(0.2), lambda h: h.reshape(h.shape[0], -1),
                             nn.Linear(16, 4))

    a, b = twins(build)
    mx.random.seed(11)  # the same dropout masks on both sides
    mlx_core.random.seed(11)
    got = _train(nn, mx, optim, a, 6, ours(x), ours(y))
    want = _train(mlx_nn, mlx_core, mlx_optim, b, 6, theirs(x), theirs(y))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    close(a.parameters(), b.parameters(), rtol=1e-3, atol=1e-4)
