"""Cases a differential fuzz of `mx.fast` and `mx.vmap` against MLX 0.32.4 found: the result
(value, dtype, shape or the error raised) is MLX's."""
from __future__ import annotations

import numpy as np
import pytest

import streamlet.core as mx


def _host(a):
    return np.array(a.astype(a.dtype if a.dtype not in (mx.bfloat16,) else mx.float32)) \
        if isinstance(a, mx.array) else np.array(a)


def _outcome(M, fn):
    """(dtype name, shape, values) of each result, or the name of the error raised (or of
    one of its bases that MLX raises: streamlet's AxisError is a ValueError and an
    IndexError)."""
    try:
        r = fn(M)
    except Exception as e:  # noqa: BLE001 (the error's type is the outcome)
        return {c.__name__ for c in type(e).__mro__}
    rs = r if isinstance(r, (list, tuple)) else [r]
    return [(str(x.dtype).split(".")[-1], tuple(x.shape),
             np.array(x.astype(M.float32) if x.dtype == M.bfloat16 else x)) for x in rs]


def _same(mlx, fn, tol=1e-5):
    ours, theirs = _outcome(mx, fn), _outcome(mlx, fn)
    assert not (isinstance(theirs, set) and "NameError" in theirs), "the case is broken"
    if isinstance(theirs, set):
        expected = {n for n in theirs} - {"Exception", "BaseException", "object"}
        assert isinstance(ours, set), f"MLX raised {expected}, streamlet returned"
        assert expected <= ours, f"MLX raised {expected}, streamlet {ours}"
        return
    assert not isinstance(ours, set), f"MLX returned, streamlet raised {ours}"
    assert len(ours) == len(theirs)
    for (od, osh, ov), (td, tsh, tv) in zip(ours, theirs):
        assert (od, osh) == (td, tsh)
        np.testing.assert_allclose(ov.astype(np.float64), tv.astype(np.float64), rtol=tol,
                                   atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("bias_dtype", ["float32", "int32"])
def test_layer_norm_without_weight_keeps_the_inputs_dtype(mlx, dtype, bias_dtype):
    """With no weight, layer_norm's dtype is x's (the bias is cast to it), as in MLX:
    `layer_norm(float16 x, None, float32 bias)` was float32."""
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)

    def fn(M):
        b = M.array([0.5, -1.0, 2.0]).astype(getattr(M, bias_dtype))
        return M.fast.layer_norm(M.array(x).astype(getattr(M, dtype)), None, b, 1e-5)
    _same(mlx, fn, 1e-2)


def test_layer_norm_of_an_integer_input_without_weight_is_refused(mlx):
    """An integer x with no weight is refused whatever the bias (MLX's output dtype is x's),
    where a float bias made it float32."""
    _same(mlx, lambda M: M.fast.layer_norm(M.array([[1, 2, 3]]), None, M.ones(3), 1e-5))


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("offset,tangent", [("3", "2"), ("3", "2.5"), ("[3, 5]", "[1, 2]")])
@pytest.mark.parametrize("use_freqs", [False, True])
def test_rope_jvp_in_the_offset(mlx, traditional, offset, tangent, use_freqs):
    """MLX's CPU RoPE is a composite, so a tangent of the offset moves the angles; it raised
    "[rope] jvp for offset not supported"."""
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 8)).astype(np.float32)

    def fn(M):
        freqs = M.array([2.0, 7.0, 30.0]) if use_freqs else None
        f = lambda o: M.fast.rope(M.array(x), 6, traditional=traditional,  # noqa: E731
                                  base=None if use_freqs else 1e4, scale=2.0, offset=o,
                                  freqs=freqs)
        out, tan = M.jvp(f, [M.array(eval(offset, {}))], [M.array(eval(tangent, {}))])
        return [out[0], tan[0]]
    _same(mlx, fn, 2e-5)


@pytest.mark.parametrize("offset_dtype", ["int32", "int64"])
@pytest.mark.parametrize("offset", ["3", "[3, 5]"])
def test_rope_vjp_in_the_offset(mlx, offset_dtype, offset):
    """The offset's cotangent is the angles' gradient in the offset's integer dtype
    (truncated), as MLX's CPU composite gives it; it was 0."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 1, 4, 4)).astype(np.float32)
    c = rng.standard_normal((2, 1, 4, 4)).astype(np.float32) * 10

    def fn(M):
        f = lambda o: M.fast.rope(M.array(x), 4, traditional=False, base=1e4,  # noqa: E731
                                  scale=1.5, offset=o)
        o = M.array(eval(offset, {})).astype(getattr(M, offset_dtype))
        return M.vjp(f, [o], [M.array(c)])[1][0]
    ours = _outcome(mx, fn)
    assert np.abs(ours[0][2]).max() > 0  # the case has a gradient to lose
    _same(mlx, fn, 0)


@pytest.mark.parametrize("in_axes,shape", [(1, (3,)), (-2, (3,)), ((1,), (3,)),
                                           (True, (3,)), (2, (2, 3))])
def test_vmap_axis_out_of_range_is_an_index_error(mlx, in_axes, shape):
    """An input axis out of range is MLX's IndexError (it was a ValueError alone), and a
    bool is an int axis (it was refused as not an int)."""
    _same(mlx, lambda M: M.vmap(lambda a: a * 2, in_axes=in_axes)(M.ones(shape)))


@pytest.mark.parametrize("out_axes", [1, -2, 2])
def test_vmap_output_axis_out_of_range_is_an_index_error(mlx, out_axes):
    _same(mlx, lambda M: M.vmap(lambda a: a.sum(), out_axes=out_axes)(M.ones((3, 2))))


@pytest.mark.parametrize("case", [
    "M.vmap(lambda a: a * 2, in_axes=((0,),))((M.ones(3),))",
    "M.vmap(lambda a, b: a * b, in_axes=((0,), None))(M.ones(3), M.ones((3, 2)))",
    "M.vmap(lambda a: (a * 2,), out_axes=((0,),))(M.ones(3))",
    "M.vmap(lambda a: [a * 2, a], out_axes=[(0,), 0])(M.ones(3))",
    "M.vmap(lambda a: a * 2, in_axes=(0,))(M.ones(3))",
    "M.vmap(lambda a: a * 2, in_axes=((None,),))(M.ones(3))",
])
def test_vmap_one_tuple_axes_only_for_a_lone_array(mlx, case):
    """An axis written `(0,)` is taken only where the whole argument (or output) tree is
    that one array; anywhere in a tree MLX refuses it ("axis must be int or None"), where
    streamlet took it."""
    _same(mlx, lambda M: eval(case, {"M": M}))


@pytest.mark.parametrize("kw", ["in_axes", "out_axes"])
def test_vmap_of_none_axes_is_a_type_error(mlx, kw):
    """`vmap(f, in_axes=None)` (or out_axes) is refused when made, MLX's binding taking no
    None there (a tree of None is written `(None,)`); it raised a ValueError when called."""
    _same(mlx, lambda M: M.vmap(lambda a: a * 2, **{kw: None}))


@pytest.mark.parametrize("case", [
    "M.vmap(lambda a: M.vjp(lambda t: M.slice_update(t, t[:1] * 3, M.array([0]), axes=[0]),"
    " [a], [c])[1][0])(x)",
    "M.vmap(lambda a: M.vjp(lambda t: t * 3.0, [a], [c])[1][0])(x)",
    "M.vmap(lambda a: M.vjp(lambda t: M.sin(t[:1]) * 3.0, [a], [c[:1]])[1][0])(x)",
    "M.vmap(lambda a: M.jvp(lambda t: t * s, [a], [c])[1][0])(x)",
])
def test_vmap_of_a_derivative_product_with_an_unbatched_cotangent(mlx, case):
    """A fused derivative product (`d(x, y) * cotangent`) batched only through an input
    its derivative does not read (`c * 3` for `t * 3`, t batched) lost the batch axis: its
    result was c's shape, and the nodes after it failed or broadcast it."""
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((3, 4, 2)).astype(np.float32)
    cv = rng.standard_normal((4, 2)).astype(np.float32)

    def fn(M):
        return eval(case, {"M": M, "x": M.array(xv), "c": M.array(cv),
                           "s": M.array(np.float32(1.5))})
    _same(mlx, fn)
