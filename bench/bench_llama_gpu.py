"""The Llama of examples/llama.py on one device: streamlet, MLX 0.32.4 and PyTorch eager,
side by side in one run (issue 12's H200 figures; `--device cpu` runs it here too).

    python bench/bench_llama_gpu.py [--device gpu] [--config small|medium] [--reps 3]

1. Generation, bfloat16: prompt 128, then 64 greedy tokens through the KV cache on a
   generation stream (`examples/llama.generate`); tokens/s of each library.  PyTorch's
   model is the same architecture written for torch (below), loading the same weights;
   the greedy tokens of the three are compared.
2. A training step, float32: next-token cross-entropy of a batch of 8 sequences of 128
   tokens, `nn.value_and_grad` and AdamW, evaluated (streamlet and MLX).  Two steps run
   before the timed ones (five on a GPU, where streamlet captures a repeated step's graph
   by its fourth): the first makes the optimizer's state, the second is the first full
   update, which compiles the kernels that a later step only launches (with `--reps 1`
   the one timed step was that compiling one whenever CuPy's kernel cache was cold).

MLX's model is built from the seed and saved as safetensors; the others load it.  Each
library that cannot be imported is left out of the table.
"""
from __future__ import annotations

import argparse
import importlib
import pathlib
import tempfile
import time

import numpy as np
from timing import example_module, median_time

CONFIGS = {
    "small": {"vocab": 4096, "dims": 512, "heads": 8, "kv_heads": 4, "hidden": 1376,
              "layers": 4},
    "medium": {"vocab": 32000, "dims": 2048, "heads": 16, "kv_heads": 8, "hidden": 5632,
               "layers": 8},
}
PROMPT, TOKENS, BATCH, SEQ = 128, 64, 8, 128


def _libs():
    libs = {}
    for name in ("streamlet", "mlx"):
        try:
            libs[name] = (importlib.import_module(f"{name}.core"),
                          importlib.import_module(f"{name}.nn"),
                          importlib.import_module(f"{name}.optimizers"))
        except ImportError:
            print(f"({name} is not importable here)")
    return libs


def mx_model(libs, name, device, config, weights, dtype):
    """The Llama of library `name` on `device` with the saved weights, in `dtype`."""
    M, N, _ = libs[name]
    M.set_default_device(getattr(M, device))
    model = example_module("llama").llama(N, M)(config).load_weights(weights)
    model.set_dtype(getattr(M, dtype))
    M.eval(model.parameters())
    return model


def mx_generation(libs, name, device, config, weights, prompt, example):
    """A function generating the tokens with library `name` in bfloat16, and its output."""
    M = libs[name][0]
    model = mx_model(libs, name, device, config, weights, "bfloat16")
    out = {}

    def run():
        out["tokens"] = example.generate(M, model, prompt, TOKENS, getattr(M, device))
    return run, out


def mx_training(libs, name, device, config, weights, data):
    """One evaluated training step of library `name` (float32), as a function."""
    M, N, O = libs[name]
    model = mx_model(libs, name, device, config, weights, "float32")
    opt = O.AdamW(learning_rate=1e-4)
    x, y = M.array(data[:, :-1]), M.array(data[:, 1:])

    def loss(model, x, y):
        logits, _ = model(x)
        return N.losses.cross_entropy(logits, y, reduction="mean")
    loss_and_grad = N.value_and_grad(model, loss)

    def step():
        value, grads = loss_and_grad(model, x, y)
        opt.update(model, grads)
        M.eval(value, model.parameters(), opt.state)
    # the first step makes the optimizer's state (the timer's warm-up call is then a full
    # update); on a GPU three more let a repeated eval's graph be captured (`auto_graph`:
    # its ops and shapes seen, its structure seen, its programs run, then captured)
    for _ in range(4 if device == "gpu" else 1):
        step()
    return step


def torch_generation(device, config, weights, prompt):
    """The same model in PyTorch eager (bfloat16), greedy generation with a KV cache."""
    import torch
    import torch.nn.functional as F
    from safetensors.numpy import load_file

    dev = "cuda" if device == "gpu" else "cpu"
    w = {k: torch.from_numpy(np.ascontiguousarray(v)).to(dev, torch.bfloat16)
         for k, v in load_file(weights).items()}
    heads, kv, dims = config["heads"], config["kv_heads"], config["dims"]
    hd = dims // heads
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))

    def rope(x, offset):  # MLX's RoPE, not traditional: the two halves of each head rotate
        pos = torch.arange(offset, offset + x.shape[2], device=dev, dtype=torch.float32)
        ang = pos[:, None] * inv[None, :]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        a, b = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def norm(x, weight, eps=1e-5):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight

    def forward(tokens, cache):
        x = w["embed_tokens.weight"][tokens]
        B, L, _ = x.shape
        for i in range(config["layers"]):
            p = f"layers.{i}."
            h = norm(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).view(B, L, heads, hd).transpose(1, 2)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).view(B, L, kv, hd).transpose(1, 2)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).view(B, L, kv, hd).transpose(1, 2)
            offset = 0 if cache[i] is None else cache[i][0].shape[2]
            q, k = rope(q, offset), rope(k, offset)
            if cache[i] is not None:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i] = (k, v)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=L > 1, enable_gqa=True,
                                               scale=hd ** -0.5)
            x = x + a.transpose(1, 2).reshape(B, L, dims) @ w[p + "self_attn.o_proj.weight"].T
            h = norm(x, w[p + "post_attention_layernorm.weight"])
            g = F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
            x = x + g @ w[p + "mlp.down_proj.weight"].T
        return norm(x, w["norm.weight"]) @ w["lm_head.weight"].T

    out = {}

    @torch.no_grad()
    def run():
        cache = [None] * config["layers"]
        logits = forward(torch.tensor([prompt], device=dev), cache)
        tokens = []
        for _ in range(TOKENS):
            token = logits[:, -1, :].argmax(-1)
            tokens.append(int(token.item()))
            logits = forward(token[:, None], cache)
        out["tokens"] = tokens
    return run, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    parser.add_argument("--config", choices=list(CONFIGS), default="small")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    config, libs, example = CONFIGS[args.config], _libs(), example_module("llama")
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(0, config["vocab"], PROMPT)]
    data = rng.integers(0, config["vocab"], (BATCH, SEQ + 1)).astype(np.int32)
    gen, tokens, train = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        weights = str(pathlib.Path(tmp) / "llama.safetensors")
        maker = libs.get("mlx") or libs["streamlet"]
        maker[0].random.seed(0)
        example.llama(maker[1], maker[0])(config).save_weights(weights)
        for name in libs:
            run, out = mx_generation(libs, name, args.device, config, weights, prompt, example)
            gen[name] = median_time(run, args.reps)
            tokens[name] = out["tokens"]
            print(f"  ({name} generation: {gen[name]:.3f} s)", flush=True)
        try:
            run, out = torch_generation(args.device, config, weights, prompt)
            gen["torch"] = median_time(run, args.reps)
            tokens["torch"] = out["tokens"]
            print(f"  (torch generation: {gen['torch']:.3f} s)", flush=True)
        except ImportError:
            print("(torch is not importable here)")
        for name in libs:
            train[name] = median_time(mx_training(libs, name, args.device, config, weights,
                                                  data), args.reps)
            print(f"  ({name} training step: {train[name]:.3f} s)", flush=True)
    print(f"Llama {args.config} ({config}), {args.device}, {time.strftime('%Y-%m-%d')}")
    print(f"generation, bfloat16, prompt {PROMPT} + {TOKENS} tokens: tokens/s")
    for name, t in gen.items():
        same = sum(a == b for a, b in zip(tokens[name], tokens["streamlet"]))
        print(f"  {name:10} {TOKENS / t:9.1f}   ({same}/{TOKENS} tokens as streamlet's)")
    for ref in ("mlx", "torch"):
        if ref in gen and "streamlet" in gen:
            print(f"  streamlet tokens/s / {ref}: {gen[ref] / gen['streamlet']:.2f}")
    print(f"training step, float32, batch {BATCH} x {SEQ}: ms")
    for name, t in train.items():
        print(f"  {name:10} {t * 1e3:9.2f}")
    if "mlx" in train and "streamlet" in train:
        print(f"  streamlet / mlx: {train['streamlet'] / train['mlx']:.2f}")


if __name__ == "__main__":
    main()
