"""Gradients through layers: nn.value_and_grad of a loss over each layer gives MLX's value and
gradients (with respect to every trainable parameter), for the same parameters and inputs."""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import close, mlx_nn, needs_oracle, ours, skip_unless, theirs, twins

pytestmark = needs_oracle

F = np.float32

# id, build(lib), input shape (or an int vocabulary for token inputs), core ops needed,
# and how to call the layer (default: on the input)
CASES = [
    ("linear", lambda nn: nn.Linear(4, 3), (5, 4), ()),
    ("bilinear", lambda nn: nn.Bilinear(3, 3, 2), (5, 3), (), lambda m, x: m(x, 2 * x)),
    ("embedding", lambda nn: nn.Embedding(7, 3), 7, ()),
    ("mlp", lambda nn: nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 8), nn.SiLU(),
                                     nn.Linear(8, 2)), (4, 3), ()),
    ("activations", lambda nn: nn.Sequential(nn.Linear(3, 6), nn.Mish(), nn.ELU(), nn.CELU(),
                                             nn.Softplus(), nn.LeakyReLU(), nn.Hardswish(),
                                             nn.LogSoftmax(), nn.PReLU(6)), (4, 3), ()),
    ("glu", lambda nn: nn.Sequential(nn.Linear(3, 6), nn.GLU()), (4, 3), ()),
    ("conv1d", lambda nn: nn.Conv1d(3, 4, 3, padding=1), (2, 7, 3), ("conv1d",)),
    ("conv2d", lambda nn: nn.Conv2d(2, 3, 3, stride=2), (2, 7, 7, 2), ("conv2d",)),
    ("conv_transpose2d", lambda nn: nn.ConvTranspose2d(2, 3, 3, stride=2), (1, 4, 4, 2),
     ("conv_transpose2d",)),
    ("group_norm", lambda nn: nn.GroupNorm(2, 4), (2, 3, 4), ()),
    ("batch_norm", lambda nn: nn.BatchNorm(4), (6, 4), ()),
    ("layer_norm", lambda nn: nn.LayerNorm(4), (3, 4), ("fast.layer_norm",)),
    ("rms_norm", lambda nn: nn.RMSNorm(4), (3, 4), ("fast.rms_norm",)),
    ("max_pool", lambda nn: nn.Sequential(nn.Conv1d(2, 2, 1), nn.MaxPool1d(2)), (2, 6, 2),
     ("conv1d",)),
    ("avg_pool", lambda nn: nn.Sequential(nn.Conv2d(2, 2, 1), nn.AvgPool2d(2, stride=1)),
     (1, 4, 4, 2), ("conv2d",)),
    ("max_pool_overlap", lambda nn: nn.Sequential(nn.Conv2d(2, 2, 1), nn.MaxPool2d(
        3, stride=2, padding=1)), (1, 5, 5, 2), ("conv2d",)),
    ("upsample", lambda nn: nn.Sequential(nn.Linear(2, 2), nn.Upsample(2, mode="linear")),
     (1, 3, 3, 2), ()),
    ("rnn", lambda nn: nn.RNN(3, 4), (2, 5, 3), ()),
    ("gru", lambda nn: nn.GRU(3, 4), (2, 5, 3), ()),
    ("lstm", lambda nn: nn.LSTM(3, 4), (2, 5, 3), (), lambda m, x: m(x)[1]),
    ("attention", lambda nn: nn.MultiHeadAttention(8, 2, bias=True), (2, 3, 8),
     ("fast.scaled_dot_product_attention",), lambda m, x: m(x, x, x)),
]
CASES = [c if len(c) == 5 else (*c, lambda m, x: m(x)) for c in CASES]


def _grads(lib, model, call, x, weights):
    def loss_fn(x):
        y = call(model, x)
        return (y * weights).sum() + (y * y).mean()

    return lib.value_and_grad(model, loss_fn)(x)


@pytest.mark.parametrize("name,build,shape,needs,call", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_mlx(name, build, shape, needs, call):
    skip_unless("value_and_grad", *needs)
    rng = np.random.default_rng(len(name))
    if isinstance(shape, int):
        x = rng.integers(0, shape, size=(3, 4)).astype(np.int32)
    else:
        x = rng.normal(size=shape).astype(F)
    a, b = twins(build)
    weights = rng.normal(size=call(b, theirs(x)).shape).astype(F)
    loss_a, grads_a = _grads(nn, a, call, ours(x), ours(weights))
    loss_b, grads_b = _grads(mlx_nn, b, call, theirs(x), theirs(weights))
    close(loss_a, loss_b, rtol=1e-5, atol=1e-5, what=name + " loss")
    close(grads_a, grads_b, rtol=1e-4, atol=1e-5, what=name + " grads")


def test_checkpointed_transformer_gradients_match_mlx():
    skip_unless("value_and_grad", "checkpoint", "fast.scaled_dot_product_attention",
                "fast.layer_norm")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, 8)).astype(F)
    results = []
    for checkpoint in (False, True):
        a, b = twins(lambda nn: nn.TransformerEncoder(2, 8, 2, checkpoint=checkpoint))
        ga = nn.value_and_grad(a, lambda x: a(x, None).sum())(ours(x))
        gb = mlx_nn.value_and_grad(b, lambda x: b(x, None).sum())(theirs(x))
        close(ga, gb, rtol=1e-4, atol=1e-5, what=f"checkpoint={checkpoint}")
        results.append(ga)
    close(results[1], results[0], rtol=1e-5, atol=1e-6)


def test_checkpoint_recomputes_the_same_gradients():
    skip_unless("value_and_grad", "checkpoint")
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    x = mx.array(np.random.default_rng(1).normal(size=(4, 3)).astype(F))
    plain = nn.value_and_grad(model, lambda x: model(x).sum())(x)
    step = nn.utils.checkpoint(model)
    checked = nn.value_and_grad(model, lambda x: step(x).sum())(x)
    close(checked, plain, rtol=1e-6, atol=1e-6)
