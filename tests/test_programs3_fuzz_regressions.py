"""Realistic MLX programs (from the mlx-examples / mlx-lm kind: LoRA fine-tuning, samplers,
KV caches, quantized generation, compiled training steps, conv nets with BatchNorm, RNNs,
checkpoints, weight files written by one library and read by the other) run on streamlet
and on MLX 0.32.4 with the same seeds: results (values, dtypes, shapes, or the error's
type) are MLX's."""
from __future__ import annotations

import types
from functools import partial

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
import streamlet.utils as utils
from nn_oracle import close, mlx_nn, mlx_optim
from parity import assert_same

OURS = types.SimpleNamespace(mx=mx, nn=nn, optim=optim, utils=utils)


def _theirs(mlx):
    import mlx.utils as mlx_utils
    return types.SimpleNamespace(mx=mlx, nn=mlx_nn, optim=mlx_optim, utils=mlx_utils)


def assert_program(mlx, program, rtol=1e-4, atol=1e-5):
    """`program(L)` (L: core, nn, optim, utils of one library, seeded alike) gives the same
    tree of arrays (and other leaves) with each library."""
    got, want = [], []
    for lib, out in ((OURS, got), (_theirs(mlx), want)):
        lib.mx.random.seed(0)
        out.append(program(lib))
    close(_tree(got[0]), _tree(want[0]), rtol=rtol, atol=atol)


def _tree(x):
    """Lists and tuples as dicts by position (close compares dict trees)."""
    if isinstance(x, (list, tuple)):
        return {str(i): _tree(v) for i, v in enumerate(x)}
    if isinstance(x, dict):
        return {k: _tree(v) for k, v in x.items()}
    return x


# ---------------------------------------------------------------- put_along_axis broadcasting

@pytest.mark.parametrize("a, idx, vals, axis", [
    ((2, 3), (1, 1), (2, 2), 1), ((2, 3), (2, 1), (2, 4), 1), ((2, 3), (1, 1), (1, 5), -1),
    ((2, 3), (1, 1), (3, 1), 0), ((3, 4, 2), (1, 1, 1), (3, 2, 2), 1),
    ((2, 3), (2, 1), (1, 2, 1), 1), ((2, 3), (2, 1), (2, 2, 1), 1), ((2, 3), (1, 2), (3, 2), 1),
    ((6,), (2,), (1, 2), None), ((2, 3), (1, 2), (2, 2), 1)])
@pytest.mark.parametrize("case", ["eager", "grad", "compiled"])
def test_put_along_axis_broadcasts_indices_and_values_together(mlx, a, idx, vals, axis, case):
    """MLX broadcasts the indices and the values together: values wider than the indices
    repeat an index (the last write wins), values with extra leading 1s fit (both raised
    "Cannot broadcast", or a RuntimeError from the kernel)."""
    def program(M):
        i = M.zeros(idx, M.int32) + (M.arange(idx[-1]) % 3).astype(M.int32)
        v = M.arange(int(np.prod(vals))).reshape(vals).astype(M.float32) + 1
        w = M.arange(int(np.prod(a))).reshape(a).astype(M.float32)
        f = lambda x, y: M.put_along_axis(x, i, y, axis=axis)  # noqa: E731
        if case == "grad":
            return M.grad(lambda x, y: (f(x, y) * w).sum(), argnums=(0, 1))(M.zeros(a), v)
        return (M.compile(f) if case == "compiled" else f)(M.zeros(a), v)
    assert_same(mlx, program)


@pytest.mark.parametrize("values", ["rows", "leading_one"])
def test_put_along_axis_shapeless_follows_new_rows(mlx, values):
    """Compiled shapeless, the broadcast of the indices and the values is the op's shape
    rule's, so other row counts replay (no node of the traced shape in between)."""
    def program(M):
        f = M.compile(lambda a, i, v: M.put_along_axis(a, i, v, axis=1), shapeless=True)
        out = []
        for n in (3, 4, 2):
            a = M.arange(n * 5).reshape(n, 5).astype(M.float32)
            if values == "rows":
                i, v = M.array([[0, 2]]), M.arange(2 * n).reshape(n, 2).astype(M.float32)
            else:
                i, v = M.zeros((n, 1), M.int32) + 3, M.ones((1, n, 1)) * 7
            out.append(f(a, i, v))
        return out
    assert_same(mlx, program)


def test_top_k_filter_puts_a_scalar_along_the_last_axis(mlx):
    """mlx-lm's top-k filter: -inf put at argpartition's tail, then a categorical draw."""
    def program(M):
        logits = M.random.normal((3, 50), key=M.random.key(1)) * 3
        idx = M.argpartition(-logits, kth=4, axis=-1)[..., 5:]
        masked = M.put_along_axis(logits, idx, M.array(-float("inf"), logits.dtype), axis=-1)
        return masked, M.random.categorical(masked * (1 / 0.7), key=M.random.key(3))
    assert_same(mlx, program)


# ------------------------------------------------------------------------------ programs

def _lora_program(L):
    mx_, nn_ = L.mx, L.nn

    class LoRALinear(nn_.Module):
        def __init__(self, base, r=4, scale=2.0):
            super().__init__()
            out_d, in_d = base.weight.shape
            self.base, self.scale = base, scale
            self.lora_a = mx_.random.uniform(-in_d ** -0.5, in_d ** -0.5, (in_d, r))
            self.lora_b = mx_.zeros((r, out_d))

        def __call__(self, x):
            return self.base(x) + self.scale * ((x @ self.lora_a) @ self.lora_b)

    model = nn_.Sequential(nn_.Embedding(20, 16), nn_.Linear(16, 16), nn_.GELU(),
                           nn_.Linear(16, 16), nn_.RMSNorm(16), nn_.Linear(16, 20, bias=False))
    model.freeze()
    for i in (1, 3):
        model.layers[i] = LoRALinear(model.layers[i])
    shapes = L.utils.tree_map(lambda p: p.shape, model.trainable_parameters())
    opt = L.optim.Adam(learning_rate=1e-2)
    x, y = mx_.random.randint(0, 20, (4, 7)), mx_.random.randint(0, 20, (4, 7))
    step = nn_.value_and_grad(
        model, lambda m: nn_.losses.cross_entropy(m(x), y, reduction="mean"))
    losses = []
    for _ in range(4):
        loss, grads = step(model)
        opt.update(model, grads)
        losses.append(loss)
    return losses, dict(L.utils.tree_flatten(shapes)), \
        model.trainable_parameters()


def _sampler_program(L):
    """mlx-lm's compiled samplers (random state as compile state), top-p and min-p."""
    mx_ = L.mx

    @partial(mx_.compile, inputs=mx_.random.state, outputs=mx_.random.state)
    def categorical(logits, temp):
        return mx_.random.categorical(logits * (1 / temp))

    def top_p(logits, p):
        probs = mx_.softmax(logits, axis=-1)
        order = mx_.argsort(logits, axis=-1)
        cum = mx_.cumsum(mx_.take_along_axis(probs, order, axis=-1), axis=-1)
        inverse = mx_.put_along_axis(mx_.zeros_like(order), order,
                                     mx_.arange(order.shape[-1], dtype=order.dtype), axis=-1)
        cum = mx_.take_along_axis(cum, inverse, axis=-1)
        return mx_.where(cum > 1 - p, logits, -float("inf"))

    def min_p(logits, p):
        top = mx_.max(logits, axis=-1, keepdims=True)
        return mx_.where(logits < top + mx_.log(mx_.array(p, logits.dtype)), -float("inf"),
                         logits)

    logits = mx_.random.normal((2, 40)) * 2
    draws = [categorical(f(logits, p), t) for _ in range(3)
             for f, p, t in ((top_p, 0.9, 1.0), (min_p, 0.05, 0.5))]
    penalized = logits[0:1]
    tokens = mx_.array([3, 7, 3, 11])
    chosen = penalized[:, tokens]
    penalized[:, tokens] = mx_.where(chosen < 0, chosen * 1.3, chosen / 1.3)
    return draws, top_p(logits, 0.5), penalized


def _kv_cache_program(L):
    """A rotating KV cache written with slice assignment, read by SDPA."""
    mx_ = L.mx
    B, H, D, size = 2, 3, 4, 8
    keys, values = mx_.zeros((B, H, size, D)), mx_.zeros((B, H, size, D))
    outs, at = [], 0
    for step in range(12):
        n = 3 if step == 0 else 1
        at = 0 if at + n > size else at
        keys[..., at:at + n, :] = mx_.random.normal((B, H, n, D))
        values[..., at:at + n, :] = mx_.random.normal((B, H, n, D))
        at += n
        q = mx_.random.normal((B, H, 1, D))
        outs.append(mx_.fast.scaled_dot_product_attention(q, keys, values, scale=D ** -0.5))
    return keys, values, outs


def _compiled_training_program(L):
    """A compiled step with the model's, the optimizer's and the random state; a joined
    schedule; clipped gradients; dropout."""
    mx_, nn_, opt_ = L.mx, L.nn, L.optim
    model = nn_.Sequential(nn_.Linear(8, 16), nn_.SiLU(), nn_.Dropout(0.2), nn_.Linear(16, 4))
    schedule = opt_.join_schedules([opt_.linear_schedule(0, 1e-2, 3),
                                    opt_.cosine_decay(1e-2, 10, 1e-4)], [3])
    opt = opt_.AdamW(learning_rate=schedule, weight_decay=0.05)
    state = [model.state, opt.state, mx_.random.state]
    x, y = mx_.random.normal((16, 8)), mx_.random.randint(0, 4, (16,))

    @partial(mx_.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = nn_.value_and_grad(
            model, lambda m: nn_.losses.cross_entropy(m(x), y).mean())(model)
        grads, norm = opt_.clip_grad_norm(grads, 0.5)
        opt.update(model, grads)
        return loss, norm

    out = []
    for _ in range(6):
        out.append(step(x, y) + (opt.learning_rate,))
        mx_.eval(state)
    return out, model.parameters(), opt.state


def _conv_batchnorm_program(L):
    mx_, nn_ = L.mx, L.nn
    net = nn_.Sequential(nn_.Conv2d(3, 8, 3, padding=1, bias=False), nn_.BatchNorm(8),
                         nn_.ReLU(), nn_.Conv2d(8, 8, 3, stride=2, bias=False),
                         nn_.BatchNorm(8, momentum=0.2), nn_.ReLU(), nn_.MaxPool2d(2))
    head = nn_.Linear(8, 5)
    model = nn_.Sequential(net, lambda h: h.mean(axis=(1, 2)), head)
    opt = L.optim.SGD(1e-1, momentum=0.9)
    x, y = mx_.random.normal((4, 9, 9, 3)), mx_.random.randint(0, 5, (4,))
    step = nn_.value_and_grad(
        model, lambda m: nn_.losses.cross_entropy(m(x), y, reduction="mean"))
    losses = []
    for _ in range(3):
        loss, grads = step(model)
        opt.update(model, grads)
        losses.append(loss)
    model.eval()
    return losses, model(x), net.state


def _rnn_program(L):
    mx_, nn_ = L.mx, L.nn
    x = mx_.random.normal((2, 7, 5))
    gru, lstm = nn_.GRU(5, 6), nn_.LSTM(5, 6)
    outs = [nn_.RNN(5, 3, bias=False, nonlinearity=nn_.relu)(x), gru(x[0], hidden=mx_.ones((6,))),
            lstm(x, hidden=mx_.ones((2, 6)), cell=mx_.zeros((2, 6)))]
    grads = [mx_.grad(lambda p, m=m: (m.update(p) or m)(x)[0].sum())(m.trainable_parameters())
             for m in (gru, lstm)]
    return outs, grads


def _quantized_generation_program(L):
    """Greedy decoding with a KV cache through a 4-bit quantized decoder (RoPE, GQA)."""
    mx_, nn_ = L.mx, L.nn

    class Attention(nn_.Module):
        def __init__(self, d=64, heads=4, kv=2):
            super().__init__()
            self.heads, self.kv = heads, kv
            self.q = nn_.Linear(d, d, bias=False)
            self.k = nn_.Linear(d, d // heads * kv, bias=False)
            self.v = nn_.Linear(d, d // heads * kv, bias=False)
            self.o = nn_.Linear(d, d, bias=False)
            self.rope = nn_.RoPE(d // heads)

        def __call__(self, x, cache):
            B, n, _ = x.shape
            q, k, v = (p(x).reshape(B, n, h, -1).transpose(0, 2, 1, 3)
                       for p, h in ((self.q, self.heads), (self.k, self.kv), (self.v, self.kv)))
            at = 0 if cache is None else cache[0].shape[2]
            q, k = self.rope(q, offset=at), self.rope(k, offset=at)
            if cache is not None:
                k, v = mx_.concatenate([cache[0], k], 2), mx_.concatenate([cache[1], v], 2)
            o = mx_.fast.scaled_dot_product_attention(q, k, v, scale=0.25,
                                                      mask="causal" if n > 1 else None)
            return self.o(o.transpose(0, 2, 1, 3).reshape(B, n, -1)), (k, v)

    class Decoder(nn_.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn_.Embedding(64, 64)
            self.attn = Attention()
            self.norm = nn_.RMSNorm(64)
            self.mlp = nn_.Sequential(nn_.Linear(64, 128), nn_.SiLU(), nn_.Linear(128, 64))

        def __call__(self, x, cache=None):
            h = self.emb(x)
            r, cache = self.attn(self.norm(h), cache)
            h = h + r
            return self.emb.as_linear(h + self.mlp(self.norm(h))), cache

    model = Decoder()
    nn_.quantize(model, group_size=32, bits=4)
    logits, cache = model(mx_.random.randint(0, 64, (1, 5)))
    tokens = []
    for _ in range(5):
        y = mx_.argmax(logits[:, -1, :], axis=-1)
        tokens.append(y)
        logits, cache = model(y[:, None], cache)
    return mx_.stack(tokens), logits, cache[0]


@pytest.mark.parametrize("program", [
    _lora_program, _sampler_program, _kv_cache_program, _compiled_training_program,
    _conv_batchnorm_program, _rnn_program, _quantized_generation_program])
def test_program_runs_as_with_mlx(mlx, program):
    assert_program(mlx, program, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("writer", ["ours", "mlx"])
def test_quantized_weights_cross_between_the_libraries(mlx, tmp_path, writer):
    """A quantized model's safetensors / npz files written by one library load into the
    other's model and give the writer's outputs."""
    libs = {"ours": OURS, "mlx": _theirs(mlx)}
    src, dst = libs[writer], libs["mlx" if writer == "ours" else "ours"]

    def build(L, seed):
        L.mx.random.seed(seed)
        m = L.nn.Sequential(L.nn.Embedding(32, 64), L.nn.Linear(64, 64), L.nn.Linear(64, 8))
        L.nn.quantize(m, group_size=32, bits=4,
                      class_predicate=lambda p, mod: not (isinstance(mod, L.nn.Linear)
                                                          and mod.weight.shape[0] == 8))
        return m

    tokens = [[1, 5, 31]]
    written = build(src, 0)
    for ext in ("safetensors", "npz"):
        written.save_weights(str(tmp_path / f"w.{ext}"))
        read = build(dst, 1)
        read.load_weights(str(tmp_path / f"w.{ext}"))
        got = read(dst.mx.array(tokens))
        want = written(src.mx.array(tokens))
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-6)
        assert [k for k, _ in src.utils.tree_flatten(written.parameters())] == \
            [k for k, _ in dst.utils.tree_flatten(read.parameters())]
