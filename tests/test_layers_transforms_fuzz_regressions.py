"""A differential fuzz of streamlet.nn's layers, activations and losses under the function
transforms (grad and value_and_grad, vmap over axes 0, 1 and -1, jvp, compile, shapeless
compile), in float16 and bfloat16 and at edge shapes (batch 1, size-1 axes, empty
batch), against MLX with the same weights.  The cases MLX refuses for want of a rule
(jvp of a convolution, vmap of pooling's as_strided) or where MLX crashes (a shapeless
compile over a size-1 normalized axis, the gradient of an empty transposed convolution)
are left out."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import streamlet.core as mx
import streamlet.nn as nn
import streamlet.optimizers as optim
from nn_oracle import close, twins
from streamlet.utils import tree_flatten


def _libs(mlx):
    import mlx.nn as mlx_nn
    import mlx.optimizers as mlx_optim
    return (mx, nn, optim), (mlx, mlx_nn, mlx_optim)


def _weighted_sum(core, y):
    """A loss whose gradient differs per element (a plain sum hides transposed layouts)."""
    w = core.cos(core.arange(y.size).reshape(y.shape).astype(core.float32))
    return (y.astype(core.float32) * w).sum()


# name -> (build(nn), input shapes, call(model, *xs) or None, transforms MLX has for it)
LAYERS = {
    "linear_vector": (lambda nn: nn.Linear(4, 3), [(4,)], None, "gvjcs"),
    "linear_empty": (lambda nn: nn.Linear(4, 3), [(0, 4)], None, "gvjc"),
    "bilinear_batch1": (lambda nn: nn.Bilinear(3, 4, 2), [(1, 3), (1, 4)], None, "gvjcs"),
    "conv1d_groups_dilation": (lambda nn: nn.Conv1d(4, 6, 3, groups=2, dilation=2, padding=2),
                               [(2, 6, 4)], None, "gvcs"),
    "conv2d_size1": (lambda nn: nn.Conv2d(2, 4, (1, 2), padding=(0, 1)), [(1, 1, 1, 2)], None,
                     "gvcs"),
    "conv3d_strided": (lambda nn: nn.Conv3d(2, 3, (1, 2, 1), stride=(1, 2, 1)),
                       [(2, 1, 4, 1, 2)], None, "gvcs"),
    "conv_transpose1d_output_padding": (
        lambda nn: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
        [(1, 1, 3)], None, "gvcs"),
    "conv_transpose2d_dilated": (lambda nn: nn.ConvTranspose2d(2, 3, 2, dilation=2, padding=1),
                                 [(1, 3, 2, 2)], None, "gvc"),
    "conv_transpose3d": (lambda nn: nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1,
                                                       output_padding=1, bias=False),
                         [(1, 2, 2, 2, 2)], None, "gvcs"),
    "group_norm_pytorch": (lambda nn: nn.GroupNorm(2, 4, pytorch_compatible=True),
                           [(2, 3, 2, 4)], None, "gvjcs"),
    "instance_norm_affine": (lambda nn: nn.InstanceNorm(3, affine=True), [(2, 2, 2, 3)], None,
                             "gvjcs"),
    "rms_norm_size1": (lambda nn: nn.RMSNorm(1, eps=1e-2), [(2, 1)], None, "gvjc"),
    "batch_norm_eval": (lambda nn: nn.BatchNorm(3, affine=False), [(2, 4, 3)], None, "gvjcs"),
    "upsample_cubic_align": (lambda nn: nn.Upsample(3, mode="cubic", align_corners=True),
                             [(1, 2, 2, 1)], None, "gvjcs"),
    "upsample_linear_fraction": (lambda nn: nn.Upsample(0.75, mode="linear"), [(1, 4, 4, 1)],
                                 None, "gvjcs"),
    "max_pool_padded": (lambda nn: nn.MaxPool1d(4, stride=1, padding=2), [(1, 2, 1)], None,
                        "gjcs"),
    "avg_pool3d": (lambda nn: nn.AvgPool3d((1, 2, 2), padding=(0, 1, 0)), [(1, 2, 2, 3, 2)],
                   None, "gjcs"),
    "attention_dims": (lambda nn: nn.MultiHeadAttention(6, 3, query_input_dims=4,
                                                        key_input_dims=5, value_input_dims=2,
                                                        value_dims=9, value_output_dims=7),
                       [(2, 3, 4), (2, 2, 5), (2, 2, 2)], lambda m, q, k, v: m(q, k, v),
                       "gvjcs"),
    "attention_empty_queries": (lambda nn: nn.MultiHeadAttention(4, 2), [(2, 0, 4), (2, 3, 4)],
                                lambda m, q, k: m(q, k, k), "gvjc"),
    "encoder_checkpointed": (lambda nn: nn.TransformerEncoder(2, 8, 2, checkpoint=True),
                             [(2, 3, 8)], lambda m, x: m(x, None), "gvjcs"),
    "transformer": (lambda nn: nn.Transformer(8, 2, 1, 1, 16), [(2, 3, 8), (2, 2, 8)],
                    lambda m, x, y: m(x, y, None, None, None), "gvjcs"),
    "rope_traditional_offset": (lambda nn: nn.RoPE(4, traditional=True, base=100.0, scale=0.5),
                                [(2, 2, 3, 6)], lambda m, x: m(x, offset=2), "gvjcs"),
    "alibi_offset": (lambda nn: nn.ALiBi(), [(1, 2, 1, 3)], lambda m, x: m(x, offset=2),
                     "gvjcs"),
    "sinusoidal": (lambda nn: nn.SinusoidalPositionalEncoding(6, cos_first=True,
                                                              full_turns=True), [(2, 3)],
                   None, "gvjcs"),
    "rnn_hidden": (lambda nn: nn.RNN(3, 4, bias=False, nonlinearity=nn.relu), [(5, 3), (4,)],
                   lambda m, x, h: m(x, hidden=h), "gvjc"),
    "gru_unbatched": (lambda nn: nn.GRU(3, 4), [(3, 3)], None, "gvjc"),
    "lstm_cell_state": (lambda nn: nn.LSTM(3, 2), [(1, 4, 3), (1, 2), (1, 2)],
                        lambda m, x, h, c: m(x, hidden=h, cell=c)[1], "gvjc"),
    "quantized_linear_3bit": (lambda nn: nn.QuantizedLinear(128, 5, group_size=64, bits=3),
                              [(3, 128)], None, "gjcs"),
    "quantized_embedding_as_linear": (
        lambda nn: nn.QuantizedEmbedding(7, 128, mode="mxfp4"), [(2, 128)],
        lambda m, x: m.as_linear(x), "gjc"),
    "prelu": (lambda nn: nn.PReLU(3), [(2, 3)], None, "gvjcs"),
}


def _run(lib, model, call, xs, transform, axis):
    core, fn = lib[0], call or (lambda m, *a: m(*a))
    f = partial(fn, model)
    if transform == "forward":
        return f(*xs)
    if transform == "compile":
        return core.compile(f)(*xs)
    if transform == "shapeless":
        g = core.compile(f, shapeless=True)
        g(*xs)
        return g(*xs)
    if transform == "value_and_grad":
        loss = lambda m, *a: _weighted_sum(core, fn(m, *a))
        return lib[1].value_and_grad(model, loss)(model, *xs)
    if transform == "grad":
        return core.grad(lambda *a: _weighted_sum(core, f(*a)), argnums=tuple(range(len(xs))))(*xs)
    if transform == "jvp":
        tangents = [core.cos(core.arange(x.size).reshape(x.shape).astype(x.dtype)) for x in xs]
        return core.jvp(f, xs, tangents)
    assert transform == "vmap"
    stacked = [core.stack([x, 2 * x, -x], axis=axis) for x in xs]
    return core.vmap(f, in_axes=axis, out_axes=0)(*stacked)


TRANSFORMS = [("forward", None), ("compile", None), ("shapeless", None), ("value_and_grad", None),
              ("grad", None), ("jvp", None), ("vmap", 0), ("vmap", 1), ("vmap", -1)]
CODES = {"compile": "c", "shapeless": "s", "value_and_grad": "g", "grad": "g", "jvp": "j",
         "vmap": "v"}


@pytest.mark.parametrize("transform,axis", TRANSFORMS)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_under_a_transform_matches_mlx(mlx, name, transform, axis):
    """Each layer, at an unusual shape, gives MLX's values, dtypes and shapes under each
    transform MLX has for it, or raises MLX's ValueError (a shapeless compile of a pad)."""
    build, shapes, call, codes = LAYERS[name]
    if transform != "forward" and CODES[transform] not in codes:
        pytest.skip("MLX lacks this transform here (or crashes)")
    rng = np.random.default_rng(len(name))
    data = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    mine, theirs = twins(build)
    mine.eval(), theirs.eval()
    if transform == "value_and_grad" and not tree_flatten(mine.trainable_parameters()):
        pytest.skip("no parameters")
    try:
        want = _run(_libs(mlx)[1], theirs, call, [mlx.array(d) for d in data], transform, axis)
    except ValueError:
        with pytest.raises(ValueError):
            _run(_libs(mlx)[0], mine, call, [mx.array(d) for d in data], transform, axis)
        return
    got = _run(_libs(mlx)[0], mine, call, [mx.array(d) for d in data], transform, axis)
    close(got, want, rtol=2e-4, atol=2e-5, what=f"{name} {transform} {axis}")


HALF_LAYERS = ["conv1d_groups_dilation", "conv_transpose3d", "group_norm_pytorch",
               "instance_norm_affine", "upsample_cubic_align", "attention_dims", "transformer",
               "rope_traditional_offset", "lstm_cell_state", "quantized_linear_3bit", "prelu"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", HALF_LAYERS)
def test_half_precision_layer_and_its_gradients_match_mlx(mlx, name, dtype):
    """A layer cast to float16 or bfloat16 gives MLX's outputs and gradients (w.r.t. its
    parameters, or its inputs when it has none) in the same dtypes, within the precision
    of the type."""
    build, shapes, call, _ = LAYERS[name]
    rng = np.random.default_rng(1)
    data = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    mine, theirs = twins(build)
    grad = "value_and_grad" if tree_flatten(mine.trainable_parameters()) else "grad"
    results = []
    for lib, model in zip(_libs(mlx), (mine, theirs)):
        core = lib[0]
        model.eval()
        model.set_dtype(getattr(core, dtype))
        xs = [core.array(d).astype(getattr(core, dtype)) for d in data]
        results.append([_run(lib, model, call, xs, "forward", None),
                        _run(lib, model, call, xs, grad, None)])
    tol = 2e-2 if dtype == "float16" else 1e-1
    close(results[0], results[1], rtol=tol, atol=tol, what=f"{name} {dtype}")


@pytest.mark.parametrize("name", ["conv1d_groups_dilation", "attention_dims", "gru_unbatched",
                                  "group_norm_pytorch", "transformer"])
def test_per_example_gradients_match_mlx(mlx, name):
    """vmap of grad over the parameters (in_axes (None, 0)): per-example gradients."""
    build, shapes, call, _ = LAYERS[name]
    rng = np.random.default_rng(2)
    data = [rng.standard_normal((3,) + s).astype(np.float32) for s in shapes]
    mine, theirs = twins(build)
    results = []
    for lib, model in zip(_libs(mlx), (mine, theirs)):
        core = lib[0]
        model.eval()
        f = call or (lambda m, *a: m(*a))

        def loss(params, *xs, model=model, core=core, f=f):
            model.update(params)
            return _weighted_sum(core, f(model, *xs))

        params = model.trainable_parameters()
        in_axes = (None,) + (0,) * len(data)
        results.append(core.vmap(core.grad(loss), in_axes=in_axes)(
            params, *[core.array(d) for d in data]))
    close(results[0], results[1], rtol=1e-4, atol=1e-5, what=name)


@pytest.mark.parametrize("compiled", [False, True])
def test_compiled_training_step_with_batch_norm_and_dropout_matches_mlx(mlx, compiled):
    """A (compiled) SGD step of a model with BatchNorm and Dropout in training mode, with
    the model, optimizer and random state as the compiled function's state: the losses,
    the parameters and the running statistics follow MLX's."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 2))
    build = lambda nn: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm(4), nn.ReLU(),
                                     nn.Dropout(0.2), nn.Linear(4, 2))
    results = []
    for (core, lnn, lopt), model in zip(_libs(mlx), twins(build)):
        model.train()
        opt = lopt.SGD(learning_rate=0.1, momentum=0.9)
        state = [model.state, opt.state, core.random.state]

        def step(a, b, model=model, opt=opt, lnn=lnn):
            loss, grads = lnn.value_and_grad(
                model, lambda m, a, b: lnn.losses.mse_loss(m(a), b))(model, a, b)
            opt.update(model, grads)
            return loss

        core.random.seed(7)
        if compiled:
            step = core.compile(step, inputs=state, outputs=state)
        losses = [step(core.array(x), core.array(y.astype(np.float32))) for _ in range(3)]
        results.append([losses, model.parameters(), model.layers[1].running_mean,
                        model.layers[1].running_var])
    close(results[0], results[1], rtol=1e-4, atol=1e-5)


ACTIVATIONS = ["celu", "elu", "gelu", "gelu_approx", "gelu_fast_approx", "hard_shrink",
               "hard_tanh", "hardswish", "leaky_relu", "log_sigmoid", "log_softmax", "mish",
               "relu", "relu2", "relu6", "selu", "sigmoid", "silu", "softmax", "softmin",
               "softplus", "softshrink", "softsign", "step", "tanh"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_value_gradient_jvp_and_vmap_at_kinks_match_mlx(mlx, name, dtype):
    """Activations at their kinks and far tails (0, -0, +-1, +-6, +-30) and at random points:
    value, gradient, jvp and vmap over the last axis give MLX's, in the input's dtype."""
    import mlx.nn as mlx_nn

    rng = np.random.default_rng(4)
    data = np.concatenate([rng.standard_normal(10) * 3,
                           [0.0, -0.0, 1.0, -1.0, 6.0, -6.0, 0.5, -0.5, 30.0, -30.0]])
    data = data.astype(np.float32).reshape(2, 10)
    results = []
    for core, fn in ((mx, getattr(nn, name)), (mlx, getattr(mlx_nn, name))):
        a = core.array(data).astype(getattr(core, dtype))
        results.append([fn(a), core.grad(lambda v: _weighted_sum(core, fn(v)))(a),
                        core.jvp(fn, [a], [core.ones_like(a)])[1],
                        core.vmap(fn, in_axes=-1)(a), core.compile(fn, shapeless=True)(a)])
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    close(results[0], results[1], rtol=tol, atol=tol, what=f"{name} {dtype}")


LOSSES = {
    "cross_entropy_smoothed": (lambda L: lambda x, t: L.cross_entropy(
        x, t, label_smoothing=0.2, reduction="sum"), [(3, 5), (3,)]),
    "cross_entropy_axis0": (lambda L: lambda x, t: L.cross_entropy(x, t, axis=0), [(5, 3), (3,)]),
    "cross_entropy_probabilities": (lambda L: lambda x, t: L.cross_entropy(x, t), [(3, 5), (3, 5)]),
    "binary_cross_entropy_weighted": (lambda L: lambda x, t, w: L.binary_cross_entropy(
        x, t, weights=w, reduction="mean"), [(3, 4), (3, 4), (3, 4)]),
    "gaussian_nll_full": (lambda L: lambda x, t, v: L.gaussian_nll_loss(
        x, t, v, full=True, reduction="sum"), [(3, 4), (3, 4), (3, 4)]),
    "smooth_l1": (lambda L: lambda x, t: L.smooth_l1_loss(x, t, beta=0.5), [(3, 4), (3, 4)]),
    "triplet": (lambda L: lambda a, p, n: L.triplet_loss(a, p, n, margin=0.5, reduction="mean"),
                [(3, 4), (3, 4), (3, 4)]),
    "cosine_similarity_axis0": (lambda L: lambda x, t: L.cosine_similarity_loss(x, t, axis=0),
                                [(3, 4), (3, 4)]),
    "margin_ranking": (lambda L: lambda a, b, t: L.margin_ranking_loss(a, b, t, margin=0.1),
                       [(5,), (5,), (5,)]),
    "mse_empty_mean": (lambda L: lambda x, t: L.mse_loss(x, t, reduction="mean"),
                       [(0, 4), (0, 4)]),
}


def _loss_inputs(name, shapes):
    rng = np.random.default_rng(len(name))
    out = [rng.uniform(0.05, 0.95, s).astype(np.float32) for s in shapes]
    out[0] = rng.standard_normal(shapes[0]).astype(np.float32)
    if name in ("cross_entropy_smoothed", "cross_entropy_axis0"):
        out[1] = rng.integers(0, 5, shapes[1]).astype(np.int32)
    if name == "margin_ranking":
        out[2] = np.sign(rng.standard_normal(5)).astype(np.float32)
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_value_gradient_and_vmap_match_mlx(mlx, name, dtype):
    """Losses with unusual options: value, gradients w.r.t. every float input, vmap over
    axis 1 (0 for vectors) and a compiled call give MLX's."""
    import mlx.nn.losses as mlx_losses

    import streamlet.nn.losses as losses
    make, shapes = LOSSES[name]
    data = _loss_inputs(name, shapes)
    floats = tuple(i for i, d in enumerate(data) if d.dtype == np.float32)
    results = []
    for core, fn in ((mx, make(losses)), (mlx, make(mlx_losses))):
        xs = [core.array(d).astype(getattr(core, dtype)) if d.dtype == np.float32
              else core.array(d) for d in data]
        loss = lambda *a: _weighted_sum(core, fn(*a))
        stacked = [core.stack([x, x], axis=min(1, x.ndim)) for x in xs]
        results.append([core.value_and_grad(loss, argnums=floats)(*xs),
                        core.vmap(fn, in_axes=tuple(min(1, x.ndim) for x in xs))(*stacked),
                        core.compile(fn)(*xs)])
    tol = 1e-5 if dtype == "float32" else 5e-2
    close(results[0], results[1], rtol=tol, atol=tol, what=f"{name} {dtype}")


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_strided_conv_of_an_input_shorter_than_its_kernel_raises(mlx, stride):
    """An input shorter than the kernel is refused at every stride with the ValueError MLX
    raises at stride 1 (MLX's strided convolution skips the check and reads past the input:
    its values there are garbage, not a rule to follow)."""
    with pytest.raises(ValueError):
        mlx.conv1d(mlx.ones((1, 1, 3)), mlx.ones((4, 2, 3)))
    x, w = mx.ones((1, 1, 3)), mx.ones((4, 2, 3))
    with pytest.raises(ValueError):
        mx.eval(mx.conv1d(x, w, stride=stride))
    with pytest.raises(ValueError):
        mx.eval(mx.conv2d(mx.ones((1, 1, 1, 3)), mx.ones((4, 2, 2, 3)), stride=stride))


def test_embedding_gradient_accumulates_repeated_indices_under_vmap(mlx):
    """An Embedding's weight gradient sums over repeated indices, and vmap over the index
    batch (axis 1) keeps each row's gradient apart, as in MLX."""
    idx = np.array([[0, 0, 2, 0], [1, 2, 2, 2]], np.int32)
    mine, theirs = twins(lambda nn: nn.Embedding(3, 4))
    results = []
    for (core, lnn, _), model in zip(_libs(mlx), (mine, theirs)):
        def loss(params, i, model=model, core=core):
            model.update(params)
            return _weighted_sum(core, model(i))
        params = model.trainable_parameters()
        results.append([lnn.value_and_grad(model, lambda m, i: _weighted_sum(core, m(i)))(
            model, core.array(idx)), core.vmap(core.grad(loss), in_axes=(None, 1))(
            params, core.array(idx))])
    close(results[0], results[1])


def _conv_configs(seed, count):
    """Random convolution layers (kind, in/out channels, kernel, options) and input shapes,
    inputs at least as long as the kernel."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        d, transposed = int(rng.integers(1, 4)), bool(rng.random() < 0.4)
        groups = int(rng.choice([1, 2, 3])) if not transposed and d < 3 else 1
        k, s, p, dil, spatial = (tuple(int(v) for v in rng.integers(lo, hi, d))
                                 for lo, hi in ((1, 4), (1, 4), (0, 3), (1, 3), (1, 6)))
        one = (lambda t: t) if d > 1 else (lambda t: t[0])
        opts = dict(stride=one(s), padding=one(p), dilation=one(dil), bias=bool(rng.random() < .5))
        if transposed:
            opts["output_padding"] = one(tuple(int(rng.integers(0, min(a, b)))
                                               for a, b in zip(s, dil)))
        elif any(n + 2 * q < e * (m - 1) + 1 for n, q, e, m in zip(spatial, p, dil, k)):
            continue
        else:
            opts.update({"groups": groups} if d < 3 else {})
        kind = ("ConvTranspose" if transposed else "Conv") + f"{d}d"
        cin, cout = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 4))
        out.append((kind, cin, cout, one(k), opts, (int(rng.integers(1, 3)),) + spatial + (cin,)))
    return out


@pytest.mark.parametrize("kind,cin,cout,kernel,opts,shape", _conv_configs(0, 24))
def test_random_convolution_forward_and_gradients_match_mlx(mlx, kind, cin, cout, kernel, opts,
                                                              shape):
    """Random strides, paddings, dilations, groups and output paddings: the forward and the
    gradients w.r.t. the parameters (and the input, where MLX's is right: see below) match,
    or both raise MLX's ValueError."""
    mine, theirs = twins(lambda nn: getattr(nn, kind)(cin, cout, kernel, **opts))
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    with_input = not (opts.get("output_padding") and kind.startswith("ConvTranspose"))
    def run(core, lnn, model):
        loss = lambda m, v: _weighted_sum(core, m(v))
        a = core.array(x)
        res = [model(a), lnn.value_and_grad(model, loss)(model, a)]
        if with_input:
            res.append(core.grad(lambda v: loss(model, v))(a))
        return res

    (core, lnn, _), theirs_lib = _libs(mlx)
    try:
        want = run(*theirs_lib[:2], theirs)
    except ValueError:  # padding that leaves no output
        with pytest.raises(ValueError):
            run(core, lnn, mine)
        return
    close(run(core, lnn, mine), want, rtol=1e-4, atol=1e-5, what=kind)


@pytest.mark.parametrize("shape,opts", [
    ((1, 3, 2), dict(kernel_size=3, stride=3, dilation=2, output_padding=1)),
    ((2, 5, 5, 2, 2), dict(kernel_size=(3, 1, 3), stride=(3, 2, 3), padding=(0, 2, 0),
                           dilation=(1, 2, 2), output_padding=(0, 0, 1))),
    ((2, 5, 4, 2), dict(kernel_size=(2, 1), stride=(3, 2), padding=(1, 0), dilation=(2, 2),
                        output_padding=(1, 1)))])
def test_transposed_convolution_input_gradient_is_the_adjoint_of_mlx_forward(mlx, shape, opts):
    """With output padding, MLX's input gradient of a transposed convolution has the wrong
    shape or values (it fails the adjoint test against its own forward); ours is the adjoint
    of MLX's forward: <grad, t> = <w, f(x + t) - f(x)> for this linear map."""
    kind = f"ConvTranspose{len(shape) - 2}d"
    mine, theirs = twins(lambda nn: getattr(nn, kind)(shape[-1], 3, **opts))
    rng = np.random.default_rng(5)
    x, t = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    y = theirs(mlx.array(x))
    w = rng.standard_normal(y.shape).astype(np.float32)
    change = np.array(theirs(mlx.array(x + t)) - y)
    g = mx.grad(lambda v: (mine(v) * mx.array(w)).sum())(mx.array(x))
    assert g.shape == shape
    np.testing.assert_allclose((np.array(g) * t).sum(), (w * change).sum(), rtol=1e-4, atol=1e-4)
