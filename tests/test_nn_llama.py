"""The small Llama-style model of examples/llama.py (embeddings, RMSNorm, RoPE, grouped-query
attention through mx.fast.scaled_dot_product_attention, a SwiGLU MLP), over either library: weights
saved by MLX load into ours and give MLX's logits; greedy generation with a KV cache on a
generation stream gives MLX's tokens; 4-bit quantized, MLX's quantized logits."""
import importlib.util
import pathlib

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import close, mlx_core, mlx_nn, needs_oracle, skip_unless

pytestmark = needs_oracle


def _example():
    spec = importlib.util.spec_from_file_location(
        "llama", pathlib.Path(__file__).parent.parent / "examples" / "llama.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_llama = _example()
CONFIG, llama, generate = _llama.CONFIG, _llama.llama, _llama.generate


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


def test_generation_reuses_its_stream_until_clear_streams_destroys_it(saved):
    skip_unless("fast.scaled_dot_product_attention", "fast.rope", "fast.rms_norm")
    theirs, path = saved
    ours = llama(nn, mx)(CONFIG).load_weights(path)
    prompt = [3, 17, 5, 42, 9, 1]
    want = generate(mlx_core, theirs, prompt, 6)
    assert generate(mlx_core, theirs, prompt, 6) == want  # MLX's stream, made once too
    first = _llama.generation_stream(mx, mx.cpu)
    made = len(mx.get_streams())
    assert generate(mx, ours, prompt, 6) == generate(mx, ours, prompt, 6) == want
    assert _llama.generation_stream(mx, mx.cpu) is first and len(mx.get_streams()) == made
    mx.clear_streams()
    assert generate(mx, ours, prompt, 6) == want
    assert _llama.generation_stream(mx, mx.cpu) is not first


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
