"""A small Llama-style model (embeddings, RMSNorm, RoPE, grouped-query attention through
mx.fast.scaled_dot_product_attention, a SwiGLU MLP), written once over either library: weights
saved by MLX load into ours and give MLX's logits; greedy generation with a KV cache on a
generation stream gives MLX's tokens; 4-bit quantized, MLX's quantized logits."""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import close, mlx_core, mlx_nn, needs_oracle, skip_unless

pytestmark = needs_oracle

CONFIG = {"vocab": 64, "dims": 32, "heads": 4, "kv_heads": 2, "hidden": 64, "layers": 2}


def llama(nn, mx):
    """The model class over ``nn`` and ``mx`` (streamlet's or MLX's)."""
    class Attention(nn.Module):
        def __init__(self, dims, heads, kv_heads):
            super().__init__()
            self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dims // heads
            self.q_proj = nn.Linear(dims, heads * self.head_dim, bias=False)
            self.k_proj = nn.Linear(dims, kv_heads * self.head_dim, bias=False)
            self.v_proj = nn.Linear(dims, kv_heads * self.head_dim, bias=False)
            self.o_proj = nn.Linear(heads * self.head_dim, dims, bias=False)
            self.rope = nn.RoPE(self.head_dim, base=10000)

        def __call__(self, x, mask=None, cache=None):
            B, L, _ = x.shape
            q = self.q_proj(x).reshape(B, L, self.heads, -1).transpose(0, 2, 1, 3)
            k = self.k_proj(x).reshape(B, L, self.kv_heads, -1).transpose(0, 2, 1, 3)
            v = self.v_proj(x).reshape(B, L, self.kv_heads, -1).transpose(0, 2, 1, 3)
            offset = 0 if cache is None else cache[0].shape[2]
            q, k = self.rope(q, offset=offset), self.rope(k, offset=offset)
            if cache is not None:
                k = mx.concatenate([cache[0], k], axis=2)
                v = mx.concatenate([cache[1], v], axis=2)
            out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.head_dim**-0.5,
                                                        mask=mask)
            return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1)), (k, v)

    class MLP(nn.Module):
        def __init__(self, dims, hidden):
            super().__init__()
            self.gate_proj = nn.Linear(dims, hidden, bias=False)
            self.up_proj = nn.Linear(dims, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dims, bias=False)

        def __call__(self, x):
            return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.input_layernorm = nn.RMSNorm(c["dims"], eps=1e-5)
            self.self_attn = Attention(c["dims"], c["heads"], c["kv_heads"])
            self.post_attention_layernorm = nn.RMSNorm(c["dims"], eps=1e-5)
            self.mlp = MLP(c["dims"], c["hidden"])

        def __call__(self, x, mask=None, cache=None):
            h, cache = self.self_attn(self.input_layernorm(x), mask, cache)
            x = x + h
            return x + self.mlp(self.post_attention_layernorm(x)), cache

    class Llama(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.embed_tokens = nn.Embedding(c["vocab"], c["dims"])
            self.layers = [Block(c) for _ in range(c["layers"])]
            self.norm = nn.RMSNorm(c["dims"])
            self.lm_head = nn.Linear(c["dims"], c["vocab"], bias=False)

        def __call__(self, tokens, cache=None):
            x = self.embed_tokens(tokens)
            mask = "causal" if x.shape[1] > 1 else None
            cache = cache or [None] * len(self.layers)
            for i, layer in enumerate(self.layers):
                x, cache[i] = layer(x, mask, cache[i])
            return self.lm_head(self.norm(x)), cache

    return Llama


def generate(mx, model, prompt, steps):
    """Greedy tokens after ``prompt``, one at a time through the KV cache, on a new stream."""
    stream = mx.new_stream(mx.cpu)
    tokens = []
    with mx.stream(stream):
        logits, cache = model(mx.array([prompt]))
        for _ in range(steps):
            token = mx.argmax(logits[:, -1, :], axis=-1)
            mx.async_eval(token)
            tokens.append(token.item())
            logits, cache = model(token[:, None], cache)
    return tokens


@pytest.fixture
def saved(tmp_path):
    """An MLX model and the safetensors file it saved."""
    mlx_core.random.seed(0)
    theirs = llama(mlx_nn, mlx_core)(CONFIG)
    path = str(tmp_path / "llama.safetensors")
    theirs.save_weights(path)
    return theirs, path


def test_mlx_weights_give_mlx_logits(saved):
    skip_unless("fast.scaled_dot_product_attention", "fast.rope", "fast.rms_norm")
    theirs, path = saved
    ours = llama(nn, mx)(CONFIG).load_weights(path)
    prompt = np.random.default_rng(0).integers(0, CONFIG["vocab"], size=(2, 12))
    got, _ = ours(mx.array(prompt.astype(np.int32)))
    want, _ = theirs(mlx_core.array(prompt.astype(np.int32)))
    close(got, want, rtol=1e-4, atol=1e-4)


def test_greedy_generation_gives_mlx_tokens(saved):
    skip_unless("fast.scaled_dot_product_attention", "fast.rope", "fast.rms_norm")
    theirs, path = saved
    ours = llama(nn, mx)(CONFIG).load_weights(path)
    prompt = [3, 17, 5, 42, 9, 1]
    assert generate(mx, ours, prompt, 10) == generate(mlx_core, theirs, prompt, 10)


def test_quantized_model_gives_mlx_quantized_logits(saved, tmp_path):
    skip_unless("fast.scaled_dot_product_attention", "fast.rope", "fast.rms_norm", "quantize")
    theirs, path = saved
    ours = llama(nn, mx)(CONFIG).load_weights(path)
    nn.quantize(ours, group_size=32, bits=4)
    mlx_nn.quantize(theirs, group_size=32, bits=4)
    close(ours.parameters(), theirs.parameters(), rtol=0, atol=0)
    prompt = np.array([[3, 17, 5, 42, 9, 1, 33, 8]], np.int32)
    close(ours(mx.array(prompt))[0], theirs(mlx_core.array(prompt))[0], rtol=1e-4, atol=1e-4)
    # a checkpoint MLX saved after quantizing loads into a quantized model of ours
    quantized_file = str(tmp_path / "llama-4bit.safetensors")
    theirs.save_weights(quantized_file)
    fresh = llama(nn, mx)(CONFIG)
    nn.quantize(fresh, group_size=32, bits=4)
    fresh.load_weights(quantized_file)
    close(fresh(mx.array(prompt))[0], theirs(mlx_core.array(prompt))[0], rtol=1e-4, atol=1e-4)
