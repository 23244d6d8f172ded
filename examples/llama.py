"""A small Llama-style language model, and greedy generation on a stream of its own.

    python examples/llama.py [--lib mlx] [--prompt 16] [--tokens 32] [--device gpu]

The model: token embeddings, blocks of RMSNorm, rotary-embedded grouped-query attention
through `mx.fast.scaled_dot_product_attention` (causal over the prompt) and a SwiGLU MLP,
then a final norm and the output projection.  `generate` feeds the prompt once, then
one token at a time through the blocks' key/value caches, with all of its work on a
generation stream (`with mx.stream(...)`), the way MLX's language-model programs keep
generation apart from other work: one stream per device and thread, made once (a stream
lives until `clear_streams`, with what the library keeps for it).  The library is an
argument (`streamlet` or `mlx`), so the same weights give the same tokens on both.
"""
from __future__ import annotations

import argparse
import importlib
import threading
import time

CONFIG = {"vocab": 64, "dims": 32, "heads": 4, "kv_heads": 2, "hidden": 64, "layers": 2}


def llama(nn, mx):
    """The model class over `nn` and `mx` (streamlet's or MLX's)."""
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


_STREAMS = {}  # (library, device, thread) -> its generation stream


def generation_stream(mx, device):
    """The generation stream of `device` for the calling thread, made on first use (and
    again after `clear_streams` destroyed it)."""
    key = (mx.__name__, str(device), threading.get_ident())
    stream = _STREAMS.get(key)
    live = getattr(mx, "get_streams", None)  # streamlet's (MLX 0.32.4 lists none)
    if stream is None or (live is not None and stream not in live()):
        stream = _STREAMS[key] = mx.new_stream(device)
    return stream


def generate(mx, model, prompt, steps, device=None):
    """`steps` greedy tokens after `prompt`, one at a time through the caches, all of it
    on the generation stream of `device` (the CPU unless given)."""
    stream = generation_stream(mx, mx.cpu if device is None else device)
    tokens = []
    with mx.stream(stream):
        logits, cache = model(mx.array([prompt]))
        for _ in range(steps):
            token = mx.argmax(logits[:, -1, :], axis=-1)
            mx.async_eval(token)  # the next step is built while this one runs
            tokens.append(token.item())
            logits, cache = model(token[:, None], cache)
    return tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", choices=["streamlet", "mlx"], default="streamlet")
    parser.add_argument("--prompt", type=int, default=16, help="prompt length")
    parser.add_argument("--tokens", type=int, default=32, help="tokens to generate")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args()
    mx = importlib.import_module(f"{args.lib}.core")
    nn = importlib.import_module(f"{args.lib}.nn")
    mx.random.seed(0)
    model = llama(nn, mx)(CONFIG)
    prompt = [int(t) for t in mx.random.randint(0, CONFIG["vocab"], (args.prompt,)).tolist()]
    start = time.perf_counter()
    tokens = generate(mx, model, prompt, args.tokens, getattr(mx, args.device))
    elapsed = time.perf_counter() - start
    print(f"prompt {prompt}\ngenerated {tokens}\n"
          f"{args.tokens / elapsed:.1f} tokens/s ({args.lib}, {args.device})")


if __name__ == "__main__":
    main()
