"""Every layer of streamlet.nn against mlx.nn: the same parameters (MLX's, copied through NumPy)
and the same inputs give the same outputs (and the same side effects: BatchNorm's statistics,
Dropout's masks for the same seed)."""
import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
from nn_oracle import close, mlx_core, mlx_nn, needs_oracle, ours, skip_unless, theirs, twins

pytestmark = needs_oracle

F = np.float32


def normal(*shape):
    return lambda rng: rng.normal(size=shape).astype(F)


def tokens(n, *shape):
    return lambda rng: rng.integers(0, n, size=shape).astype(np.int32)


# id, build(lib), inputs (functions of a NumPy generator), core ops needed, tolerance
CASES = [
    ("identity", lambda nn: nn.Identity(3), [normal(2, 3)], (), 0),
    ("linear", lambda nn: nn.Linear(4, 3), [normal(2, 5, 4)], (), 1e-6),
    ("linear_nobias", lambda nn: nn.Linear(4, 3, bias=False), [normal(5, 4)], (), 1e-6),
    ("bilinear", lambda nn: nn.Bilinear(3, 4, 2), [normal(2, 5, 3), normal(2, 5, 4)], (), 1e-5),
    ("bilinear_nobias", lambda nn: nn.Bilinear(3, 4, 2, bias=False),
     [normal(5, 3), normal(5, 4)], (), 1e-5),
    ("embedding", lambda nn: nn.Embedding(10, 4), [tokens(10, 2, 3)], (), 0),
    ("sequential", lambda nn: nn.Sequential(nn.Linear(3, 8), nn.relu, nn.Linear(8, 2),
                                            nn.Softmax()), [normal(4, 3)], (), 1e-6),
    ("conv1d", lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1), [normal(2, 9, 3)],
     ("conv1d",), 1e-5),
    ("conv1d_groups", lambda nn: nn.Conv1d(4, 6, 3, dilation=2, groups=2, bias=False),
     [normal(2, 9, 4)], ("conv1d",), 1e-5),
    ("conv2d", lambda nn: nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=1, dilation=2),
     [normal(2, 8, 7, 3)], ("conv2d",), 1e-5),
    ("conv2d_groups", lambda nn: nn.Conv2d(4, 4, 3, groups=4), [normal(1, 5, 5, 4)],
     ("conv2d",), 1e-5),
    ("conv3d", lambda nn: nn.Conv3d(2, 3, 2, padding=1, stride=(1, 2, 1)),
     [normal(1, 4, 5, 4, 2)], ("conv3d",), 1e-5),
    ("conv_transpose1d", lambda nn: nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1,
                                                       output_padding=1), [normal(2, 5, 3)],
     ("conv_transpose1d",), 1e-5),
    ("conv_transpose2d", lambda nn: nn.ConvTranspose2d(3, 2, (2, 3), stride=2, dilation=1),
     [normal(1, 4, 3, 3)], ("conv_transpose2d",), 1e-5),
    ("conv_transpose3d", lambda nn: nn.ConvTranspose3d(2, 2, 2, stride=2, padding=1,
                                                       bias=False), [normal(1, 3, 3, 3, 2)],
     ("conv_transpose3d",), 1e-5),
    ("layer_norm", lambda nn: nn.LayerNorm(6), [normal(2, 3, 6)], ("fast.layer_norm",), 1e-5),
    ("layer_norm_plain", lambda nn: nn.LayerNorm(6, affine=False, eps=1e-3),
     [normal(2, 6)], ("fast.layer_norm",), 1e-5),
    ("layer_norm_nobias", lambda nn: nn.LayerNorm(6, bias=False), [normal(3, 6)],
     ("fast.layer_norm",), 1e-5),
    ("rms_norm", lambda nn: nn.RMSNorm(6, eps=1e-4), [normal(2, 3, 6)], ("fast.rms_norm",),
     1e-5),
    ("group_norm", lambda nn: nn.GroupNorm(2, 6), [normal(2, 4, 3, 6)], (), 1e-5),
    ("group_norm_plain", lambda nn: nn.GroupNorm(3, 6, affine=False), [normal(2, 5, 6)], (),
     1e-5),
    ("group_norm_torch", lambda nn: nn.GroupNorm(2, 6, pytorch_compatible=True),
     [normal(2, 4, 3, 6)], ("fast.layer_norm",), 1e-5),
    ("instance_norm", lambda nn: nn.InstanceNorm(4, affine=True), [normal(2, 3, 5, 4)],
     ("fast.layer_norm",), 1e-5),
    ("batch_norm_2d", lambda nn: nn.BatchNorm(4), [normal(8, 4)], (), 1e-5),
    ("batch_norm_4d", lambda nn: nn.BatchNorm(3, momentum=0.3, affine=False),
     [normal(2, 4, 4, 3)], (), 1e-5),
    ("batch_norm_untracked", lambda nn: nn.BatchNorm(3, track_running_stats=False),
     [normal(5, 2, 3)], (), 1e-5),
    ("max_pool1d", lambda nn: nn.MaxPool1d(3, stride=2, padding=1), [normal(2, 9, 3)], (), 0),
    ("avg_pool1d", lambda nn: nn.AvgPool1d(2), [normal(2, 8, 3)], (), 1e-6),
    ("max_pool2d", lambda nn: nn.MaxPool2d(2, stride=2), [normal(2, 8, 6, 3)], (), 0),
    ("max_pool2d_overlap", lambda nn: nn.MaxPool2d((3, 2), stride=(1, 2), padding=(1, 0)),
     [normal(1, 5, 6, 2)], (), 0),
    ("avg_pool2d", lambda nn: nn.AvgPool2d(3, stride=2, padding=1), [normal(2, 7, 7, 3)], (),
     1e-6),
    ("max_pool3d", lambda nn: nn.MaxPool3d(2), [normal(1, 4, 4, 4, 2)], (), 0),
    ("avg_pool3d", lambda nn: nn.AvgPool3d((2, 1, 3), stride=1), [normal(1, 3, 4, 5, 2)], (),
     1e-6),
    ("upsample_nearest", lambda nn: nn.Upsample(2), [normal(2, 3, 4, 2)], (), 0),
    ("upsample_nearest_fraction", lambda nn: nn.Upsample((1.5, 0.5)), [normal(1, 4, 6, 2)],
     (), 0),
    ("upsample_linear", lambda nn: nn.Upsample(2, mode="linear"), [normal(1, 3, 4, 2)], (),
     1e-6),
    ("upsample_linear_corners", lambda nn: nn.Upsample((2, 3), mode="linear",
                                                       align_corners=True),
     [normal(1, 3, 4, 2)], (), 1e-6),
    ("upsample_linear_1d", lambda nn: nn.Upsample(2.5, mode="linear"), [normal(2, 5, 3)], (),
     1e-6),
    ("upsample_cubic", lambda nn: nn.Upsample(2, mode="cubic"), [normal(1, 4, 3, 2)], (),
     1e-5),
    ("upsample_cubic_corners", lambda nn: nn.Upsample(2, mode="cubic", align_corners=True),
     [normal(1, 3, 3, 1)], (), 1e-5),
    ("upsample_linear_antialias", lambda nn: nn.Upsample(0.5, mode="linear", antialias=True),
     [normal(1, 8, 6, 2)], (), 1e-5),
    ("upsample_cubic_antialias", lambda nn: nn.Upsample((0.25, 0.5), mode="cubic",
                                                        antialias=True),
     [normal(1, 8, 8, 1)], (), 1e-5),
    ("rnn", lambda nn: nn.RNN(3, 5), [normal(2, 6, 3)], (), 1e-5),
    ("rnn_relu_nobias", lambda nn: nn.RNN(3, 5, bias=False, nonlinearity=nn.relu),
     [normal(6, 3)], (), 1e-5),
    ("gru", lambda nn: nn.GRU(3, 4), [normal(2, 5, 3)], (), 1e-5),
    ("gru_nobias", lambda nn: nn.GRU(3, 4, bias=False), [normal(5, 3)], (), 1e-5),
    ("lstm", lambda nn: nn.LSTM(3, 4), [normal(2, 5, 3)], (), 1e-5),
    ("lstm_nobias", lambda nn: nn.LSTM(3, 4, bias=False), [normal(5, 3)], (), 1e-5),
    ("alibi", lambda nn: nn.ALiBi(), [normal(2, 3, 4, 5)], (), 1e-6),
    ("sinusoidal", lambda nn: nn.SinusoidalPositionalEncoding(8), [normal(3, 5)], (), 1e-5),
    ("sinusoidal_options", lambda nn: nn.SinusoidalPositionalEncoding(
        6, min_freq=0.01, max_freq=2, scale=1, cos_first=True, full_turns=True),
     [normal(4)], (), 1e-5),
    ("sinusoidal_two", lambda nn: nn.SinusoidalPositionalEncoding(2), [normal(3)], (), 1e-6),
    ("rope", lambda nn: nn.RoPE(8), [normal(2, 3, 5, 8)], ("fast.rope",), 1e-5),
    ("rope_traditional", lambda nn: nn.RoPE(6, traditional=True, base=500, scale=0.5),
     [normal(1, 2, 4, 8)], ("fast.rope",), 1e-5),
    ("attention", lambda nn: nn.MultiHeadAttention(8, 2), [normal(2, 5, 8)] * 3,
     ("fast.scaled_dot_product_attention",), 1e-5),
    ("attention_dims", lambda nn: nn.MultiHeadAttention(
        8, 4, query_input_dims=3, key_input_dims=5, value_input_dims=6, value_dims=12,
        value_output_dims=7, bias=True), [normal(2, 4, 3), normal(2, 6, 5), normal(2, 6, 6)],
     ("fast.scaled_dot_product_attention",), 1e-5),
    ("encoder_layer", lambda nn: nn.TransformerEncoderLayer(8, 2, mlp_dims=16),
     [normal(2, 5, 8), lambda rng: None], ("fast.scaled_dot_product_attention",
                                           "fast.layer_norm"), 1e-4),
    ("encoder_layer_post", lambda nn: nn.TransformerEncoderLayer(
        8, 2, activation=nn.gelu, norm_first=False), [normal(2, 5, 8), lambda rng: None],
     ("fast.scaled_dot_product_attention", "fast.layer_norm"), 1e-4),
    ("decoder", lambda nn: nn.TransformerDecoder(2, 8, 2, norm_first=False),
     [normal(2, 4, 8), normal(2, 5, 8), lambda rng: None, lambda rng: None],
     ("fast.scaled_dot_product_attention", "fast.layer_norm"), 1e-4),
    ("transformer", lambda nn: nn.Transformer(8, 2, 1, 2, mlp_dims=12),
     [normal(2, 5, 8), normal(2, 4, 8)] + [lambda rng: None] * 3,
     ("fast.scaled_dot_product_attention", "fast.layer_norm"), 1e-4),
]


def _convert(value, to):
    return None if value is None else to(value)


@pytest.mark.parametrize("name,build,inputs,needs,tol", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_mlx(name, build, inputs, needs, tol):
    skip_unless(*needs)
    rng = np.random.default_rng(len(name))
    args = [make(rng) for make in inputs]
    a, b = twins(build)
    mx.random.seed(1)
    got = a(*[_convert(x, ours) for x in args])
    mlx_core.random.seed(1)
    want = b(*[_convert(x, theirs) for x in args])
    close(got, want, rtol=tol, atol=tol, what=name)
    close(a.parameters(), b.parameters(), rtol=1e-6, atol=1e-6, what=name + " afterwards")
    a.eval()
    b.eval()
    close(a(*[_convert(x, ours) for x in args]), b(*[_convert(x, theirs) for x in args]),
          rtol=tol, atol=tol, what=name + " in eval mode")


def test_attention_masks_match_mlx():
    skip_unless("fast.scaled_dot_product_attention")
    rng = np.random.default_rng(0)
    a, b = twins(lambda nn: nn.MultiHeadAttention(8, 2))
    q, k = rng.normal(size=(2, 4, 8)).astype(F), rng.normal(size=(2, 6, 8)).astype(F)
    additive = nn.MultiHeadAttention.create_additive_causal_mask(6)[-4:]
    boolean = rng.random(size=(1, 1, 4, 6)) > 0.3
    for mask in (additive, mx.array(boolean)):
        close(a(ours(q), ours(k), ours(k), mask), b(theirs(q), theirs(k), theirs(k),
                                                    theirs(mask)), rtol=1e-5, atol=1e-5)


def test_causal_mask_matches_mlx():
    for dtype in ("float32", "float16", "bfloat16"):
        close(nn.MultiHeadAttention.create_additive_causal_mask(5, getattr(mx, dtype)),
              mlx_nn.MultiHeadAttention.create_additive_causal_mask(5, getattr(mlx_core, dtype)),
              rtol=0, atol=0)


def test_alibi_matrix_and_slopes_match_mlx():
    for heads in (1, 3, 8, 12):
        close(nn.ALiBi.create_alibi_slope(heads), mlx_nn.ALiBi.create_alibi_slope(heads))
        close(nn.ALiBi.create_alibi_matrix(4, 6, heads, offset=2, dtype=mx.float16),
              mlx_nn.ALiBi.create_alibi_matrix(4, 6, heads, offset=2,
                                                dtype=mlx_core.float16))
    scores, mask = np.zeros((1, 2, 3, 3), F), np.triu(np.full((3, 3), -1e9, F), 1)
    close(nn.ALiBi()(ours(scores), offset=1, mask=ours(mask)),
          mlx_nn.ALiBi()(theirs(scores), offset=1, mask=theirs(mask)))


def test_recurrent_layers_continue_from_a_state():
    rng = np.random.default_rng(2)
    x, h, c = (rng.normal(size=s).astype(F) for s in ((2, 4, 3), (2, 5), (2, 5)))
    for build in (lambda nn: nn.RNN(3, 5), lambda nn: nn.GRU(3, 5)):
        a, b = twins(build)
        close(a(ours(x), ours(h)), b(theirs(x), theirs(h)), rtol=1e-5, atol=1e-5)
    a, b = twins(lambda nn: nn.LSTM(3, 5))
    close(a(ours(x), ours(h), ours(c)), b(theirs(x), theirs(h), theirs(c)), rtol=1e-5,
          atol=1e-5)


def test_batch_norm_running_statistics_follow_mlx():
    rng = np.random.default_rng(3)
    a, b = twins(lambda nn: nn.BatchNorm(4, momentum=0.2))
    for _ in range(3):
        x = rng.normal(loc=2.0, size=(6, 4)).astype(F)
        a(ours(x))
        b(theirs(x))
    close(a.parameters(), b.parameters(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="more than one value"):
        a(mx.zeros((1, 4)))
    with pytest.raises(ValueError, match="2, 3 or 4 dimensions"):
        a(mx.zeros((4,)))


@pytest.mark.parametrize("build,shape,spatial", [(lambda nn: nn.Dropout(0.3), (4, 5), 0),
                                                 (lambda nn: nn.Dropout2d(0.5), (2, 3, 3, 4), 2),
                                                 (lambda nn: nn.Dropout2d(0.5), (3, 3, 4), 2),
                                                 (lambda nn: nn.Dropout3d(0.25), (2, 2, 3, 3, 4),
                                                  3)])
def test_dropout_draws_mlx_masks(build, shape, spatial):
    a, b = twins(build)
    x = np.random.default_rng(4).normal(size=shape).astype(F)
    mx.random.seed(9)
    mlx_core.random.seed(9)
    got, want = a(ours(x)), b(theirs(x))
    close(got, want, rtol=1e-6, atol=1e-6)
    zeroed = np.array(got) == 0
    assert zeroed.any() and not zeroed.all()
    if spatial:  # channel dropout: one draw for all the spatial positions
        axes = tuple(range(-2, -2 - spatial, -1))
        assert (zeroed.min(axis=axes) == zeroed.max(axis=axes)).all()
    assert np.array(a.eval()(ours(x))).tolist() == x.tolist()


def test_layer_errors_match_mlx():
    bad = [lambda nn: nn.Dropout(1.0), lambda nn: nn.Dropout2d(-0.1),
           lambda nn: nn.Conv1d(3, 4, 3, groups=2), lambda nn: nn.GroupNorm(4, 6),
           lambda nn: nn.GroupNorm(0, 6), lambda nn: nn.LayerNorm(3, eps=0.0),
           lambda nn: nn.RMSNorm(3, eps=-1), lambda nn: nn.BatchNorm(3, eps=0),
           lambda nn: nn.InstanceNorm(3, eps=0), lambda nn: nn.MaxPool2d((2, 2, 2)),
           lambda nn: nn.AvgPool1d(0), lambda nn: nn.MaxPool1d(2, padding=-1),
           lambda nn: nn.AvgPool2d(2.5), lambda nn: nn.Upsample(2, mode="area"),
           lambda nn: nn.Upsample(2, antialias=True),
           lambda nn: nn.Upsample(2, mode="linear", align_corners=True, antialias=True),
           lambda nn: nn.SinusoidalPositionalEncoding(3), lambda nn: nn.GELU("exact"),
           lambda nn: nn.MultiHeadAttention(6, 4), lambda nn: nn.RNN(2, 2, nonlinearity=3)]
    for build in bad:
        with pytest.raises(ValueError):
            build(mlx_nn)
        with pytest.raises(ValueError):
            build(nn)
    calls = [(nn.Dropout2d(), (2, 3)), (nn.Dropout3d(), (2, 3, 4)),
             (nn.InstanceNorm(3), (2, 3)), (nn.Upsample(2), (2, 3)),
             (nn.Upsample((2, 2)), (1, 2, 3)), (nn.MaxPool2d(2), (2, 2))]
    for layer, shape in calls:
        with pytest.raises(ValueError):
            layer(mx.zeros(shape))


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_a_linear_layer_without_bias_is_one_product_node(shape):
    """`nn.Linear(bias=False)` builds `x @ W.T` as the one product node that `matmul` makes
    of it (reading W transposed by a flag), without a transpose node first: the same
    node, the same bits, and MLX's error for a wrong width."""
    from streamlet.core import graph
    layer = nn.Linear(4, 3, bias=False)
    x = mx.array(np.random.default_rng(3).normal(size=shape).astype(F))
    mx.eval(layer.parameters(), x)
    first = next(graph._births)
    y = layer(x)
    assert next(graph._births) - first - 1 == 1
    want = x @ layer.weight.T
    n, m = y._node, want._node
    assert (n.prim, n.params, n.shape, n.dtype) == (m.prim, m.params, m.shape, m.dtype)
    assert n.inputs == (x._node, layer.weight._node) and n.params.get("tb")
    np.testing.assert_array_equal(np.array(y), np.array(want))
    wide = nn.Linear(5, 3, bias=False)
    with pytest.raises(ValueError) as ours_error:
        wide(x)
    with pytest.raises(ValueError) as plain_error:
        x @ wide.weight.T
    assert str(ours_error.value) == str(plain_error.value)
    if len(shape) > 1:  # (MLX names a vector's shape as the row it makes: (1, 4))
        with pytest.raises(ValueError) as mlx_error:
            mlx_nn.Linear(5, 3, bias=False)(mlx_core.array(np.array(x)))
        assert str(ours_error.value) == str(mlx_error.value).replace(",", ", ")


@pytest.mark.parametrize("mode,kwargs", [
    ("affine", {}), ("affine", {"bits": 8, "group_size": 32}), ("affine", {"bits": 3}),
    ("mxfp4", {}), ("nvfp4", {}),
    ("mxfp8", {})])
def test_quantized_linear_matches_mlx(mode, kwargs):
    skip_unless("quantize", "quantized_matmul", "dequantize")
    x = np.random.default_rng(5).normal(size=(3, 128)).astype(F)
    a, b = twins(lambda nn: nn.Linear(128, 64))
    qa = a.to_quantized(mode=mode, **kwargs)
    qb = b.to_quantized(mode=mode, **kwargs)
    assert repr(qa) == repr(qb)
    close(qa.parameters(), qb.parameters(), rtol=0, atol=0, what=mode)
    close(qa(ours(x)), qb(theirs(x)), rtol=1e-4, atol=1e-4, what=mode)
    assert list(qa.trainable_parameters()) == list(qb.trainable_parameters()) == ["bias"]
    mx.random.seed(3)
    mlx_core.random.seed(3)
    close(nn.QuantizedLinear(128, 32, mode=mode, **kwargs).parameters(),
          mlx_nn.QuantizedLinear(128, 32, mode=mode, **kwargs).parameters(), rtol=0, atol=0)


def test_quantized_embedding_matches_mlx():
    skip_unless("quantize", "quantized_matmul", "dequantize")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 64)).astype(F)
    a, b = twins(lambda nn: nn.Embedding(10, 64))
    qa, qb = a.to_quantized(bits=8), b.to_quantized(bits=8)
    ids = rng.integers(0, 10, size=(2, 3)).astype(np.int32)
    close(qa(ours(ids)), qb(theirs(ids)), rtol=1e-5, atol=1e-5)
    close(qa.as_linear(ours(x)), qb.as_linear(theirs(x)), rtol=1e-4, atol=1e-4)
    assert repr(qa) == repr(qb) and qa.trainable_parameters() == {}


def test_quantize_swaps_layers_like_mlx():
    skip_unless("quantize", "quantized_matmul", "dequantize")
    for predicate in (None, lambda path, m: isinstance(m, nn.Linear) or
                      isinstance(m, mlx_nn.Linear),
                      lambda path, m: {"bits": 8} if path.endswith("2") else False):
        a, b = twins(lambda nn: nn.Sequential(nn.Embedding(5, 64), nn.ReLU(),
                                              nn.Linear(64, 64)))
        nn.quantize(a, class_predicate=predicate)
        mlx_nn.quantize(b, class_predicate=predicate)
        assert [type(m).__name__ for m in a.layers] == [type(m).__name__ for m in b.layers]
        close(a.parameters(), b.parameters(), rtol=0, atol=0)
    with pytest.raises(ValueError):
        nn.quantize(nn.Sequential(nn.Embedding(5, 64)), mode="mxfp8", quantize_input=True)


def _fake_quantized(x, mode):
    """``x`` through MLX's quantize and dequantize (what qqmm multiplies)."""
    q = mlx_core.dequantize(*mlx_core.quantize(theirs(x), mode=mode), mode=mode)
    return q.astype(mlx_core.float32)


@pytest.mark.parametrize("mode", ["nvfp4", "mxfp8"])
def test_qq_linear_matches_mlx_in_both_modes(mode):
    skip_unless("qqmm", "quantize", "dequantize")
    x = np.random.default_rng(6).normal(size=(2, 64)).astype(F)
    a, b = twins(lambda nn: nn.Linear(64, 32, bias=False))
    qa = a.to_quantized(mode=mode, quantize_input=True)
    qb = b.to_quantized(mode=mode, quantize_input=True)
    assert repr(qa) == repr(qb) and qa.training
    # MLX's CPU qqmm computes no general case: the reference is its fake-quantized product
    want = _fake_quantized(x, mode) @ _fake_quantized(np.array(b.weight), mode).T
    close(qa(ours(x)), want, rtol=1e-3, atol=1e-3, what=mode + " training")
    qa.eval()
    qb.eval()
    assert sorted(qa) == sorted(qb) == ["scales", "weight"]
    close(qa.parameters(), qb.parameters(), rtol=0, atol=0)
    close(qa(ours(x)), want, rtol=1e-3, atol=1e-3, what=mode + " eval")
    qa.train()
    qb.train()
    assert sorted(qa) == ["weight"]
    close(qa.parameters(), qb.parameters(), rtol=0, atol=0)  # dequantized as MLX does


def test_qq_linear_refuses_what_mlx_refuses():
    with pytest.raises(ValueError, match="nvfp4"):
        nn.Linear(64, 32).to_quantized(mode="affine", quantize_input=True)
    with pytest.raises(NotImplementedError):
        nn.QQLinear.from_linear(nn.Linear(64, 32))
    with pytest.raises(ValueError, match="Invalid quantization mode"):
        nn.QQLinear(64, 32, mode="int4")
    assert repr(nn.QQLinear(64, 32)) == repr(mlx_nn.QQLinear(64, 32))
