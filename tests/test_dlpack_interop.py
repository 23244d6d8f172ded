"""DLPack with PyTorch and JAX as MLX 0.32.4 does it: bfloat16 both ways (NumPy's DLPack
has no bfloat16), and a PyTorch tensor that requires grad converts to its values.

PyTorch and JAX are not in the dev extra (see pyproject.toml); their tests skip without
them.  The capsule tests need neither.
"""
import ml_dtypes
import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core import capsule

VALUES = [1.5, -2.0, 3.140625, 0.0, -0.0, float("inf"), 1e-40, 65280.0]


def bits(x) -> list:
    """The bfloat16 bit patterns of a NumPy, PyTorch, JAX or streamlet array."""
    if isinstance(x, mx.array):  # its host copy: what the DLPack tests check, not mx.view
        x = x.__array__().view(np.uint16)  # (np.asarray raises for bfloat16, as in MLX)
    elif type(x).__module__.startswith("torch"):
        import torch
        x = x.cpu().contiguous().view(torch.int16).numpy()  # a CUDA tensor too
    else:
        x = np.asarray(x).view(np.uint16)
    return np.asarray(x).astype(np.uint16).ravel().tolist()


def bf16_numpy():
    return np.array(VALUES, dtype=ml_dtypes.bfloat16)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def gpu():
    if not mx.is_available(mx.gpu):
        pytest.skip("no GPU")
    return mx.gpu


@pytest.fixture
def cuda(torch):
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch.device("cuda")


@pytest.fixture
def jnp():
    pytest.importorskip("jax")
    import jax.numpy as jnp
    return jnp


# -- without PyTorch or JAX --------------------------------------------------------------------
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_bfloat16_capsules_of_both_kinds_round_trip(max_version):
    a = mx.array(bf16_numpy())
    kwargs = {} if max_version is None else {"max_version": max_version}
    cap = a.__dlpack__(**kwargs)
    assert capsule.is_bfloat16(cap)
    assert bits(capsule.import_bfloat16(cap)) == bits(bf16_numpy())


def test_bfloat16_from_dlpack_of_a_streamlet_array():
    a = mx.array(bf16_numpy()).reshape(2, 4).T      # strided: the layout survives
    b = mx.from_dlpack(a)
    assert b.dtype == mx.bfloat16 and b.shape == (4, 2)
    assert bits(b) == bits(np.asarray(bf16_numpy()).reshape(2, 4).T.copy())


def test_a_gpu_bfloat16_array_round_trips_through_from_dlpack(gpu):
    a = mx.reshape(mx.array(bf16_numpy()), (2, 4), stream=gpu)  # a GPU result (BF16 bits)
    assert a.__dlpack_device__()[0] == 2                                     # kDLCUDA
    cap = a.__dlpack__()
    assert capsule.is_bfloat16(cap)                  # DLPack's bfloat16, not CuPy's uint16
    for b in (mx.from_dlpack(a), mx.array(a.T), mx.from_dlpack(mx.transpose(a, stream=gpu))):
        assert b.dtype == mx.bfloat16
    b = mx.from_dlpack(mx.transpose(a, stream=gpu))
    assert b.shape == (4, 2) and bits(b) == bits(bf16_numpy().reshape(2, 4).T.copy())
    assert bits(mx.from_dlpack(a, copy=False)) == bits(bf16_numpy())


def test_other_capsules_are_not_bfloat16():
    assert not capsule.is_bfloat16(np.arange(3, dtype=np.uint16).__dlpack__())
    with pytest.raises(BufferError):
        capsule.import_bfloat16(np.arange(3, dtype=np.float16).__dlpack__())


def test_an_unsupported_dlpack_dtype_raises_mlxs_error():
    class Opaque:  # a producer of DLPack's opaque-handle type: neither NumPy's nor bfloat16
        def __dlpack__(self, **kwargs):
            cap = np.arange(3, dtype=np.uint16).__dlpack__()
            capsule._dtype_field(cap)[0] = 3  # kDLOpaqueHandle
            return cap

        def __dlpack_device__(self):
            return (1, 0)
    with pytest.raises(ValueError, match="Cannot convert array to mlx"):  # MLX's words
        mx.from_dlpack(Opaque())


# -- PyTorch ---------------------------------------------------------------------------------
MAKERS = pytest.mark.parametrize(
    "make", [lambda a: mx.array(a), lambda a: mx.asarray(a), lambda a: mx.from_dlpack(a)],
    ids=["array", "asarray", "from_dlpack"])


@MAKERS
def test_bfloat16_from_torch(torch, make):
    t = torch.tensor(VALUES, dtype=torch.bfloat16)
    a = make(t)
    assert a.dtype == mx.bfloat16 and bits(a) == bits(t)
    t2 = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4).T  # a transposed view
    assert bits(make(t2)) == bits(t2) and make(t2).shape == (4, 3)


def test_bfloat16_to_torch(torch):
    a = mx.array(bf16_numpy())
    t = torch.from_dlpack(a)
    assert t.dtype == torch.bfloat16 and bits(t) == bits(a)
    strided = a.reshape(2, 4)[:, ::2]
    assert bits(torch.from_dlpack(strided)) == bits(strided)
    # and back: the same bits
    assert bits(mx.array(torch.from_dlpack(a))) == bits(a)


def test_a_tensor_that_requires_grad_converts_to_its_values(torch, mlx):
    w = torch.tensor([[1.5, -2.0], [0.25, 4.0]], requires_grad=True)
    for src in (w, w * 2, w.T):                    # a leaf, a result with grad_fn, a view
        ours, theirs = mx.array(src), mlx.array(src)
        assert ours.tolist() == theirs.tolist() == src.detach().tolist()
        assert ours.dtype == mx.float32
        assert mx.asarray(src).tolist() == mx.from_dlpack(src).tolist() == theirs.tolist()
    assert w.requires_grad and w.grad is None       # the tensor is left as it was


def test_bfloat16_torch_matches_mlx(torch, mlx):
    t = torch.tensor(VALUES, dtype=torch.bfloat16)
    assert bits(mx.array(t)) == bits(np.array(mlx.array(t).view(mlx.uint16)))
    assert bits(torch.from_dlpack(mlx.array(t))) == bits(torch.from_dlpack(mx.array(t)))


# -- JAX ---------------------------------------------------------------------------------------
def test_bfloat16_from_jax(jnp):
    j = jnp.array(VALUES, dtype=jnp.bfloat16)
    for a in (mx.array(j), mx.asarray(j), mx.from_dlpack(j)):
        assert a.dtype == mx.bfloat16 and bits(a) == bits(j)


def test_bfloat16_to_jax(jnp):
    a = mx.array(bf16_numpy())
    j = jnp.from_dlpack(a)
    assert j.dtype == jnp.bfloat16 and bits(j) == bits(a)
    assert bits(jnp.from_dlpack(a.reshape(2, 4).T)) == bits(np.asarray(
        bf16_numpy()).reshape(2, 4).T.copy())


def test_torch_complex32_raises_mlxs_error(torch):
    with pytest.raises(ValueError, match="Cannot convert array to mlx"):
        mx.array(torch.zeros(3, dtype=torch.complex32))


# -- PyTorch on the GPU --------------------------------------------------------------------------
@MAKERS
def test_bfloat16_from_torch_cuda(torch, cuda, gpu, make):
    t = torch.tensor(VALUES, dtype=torch.bfloat16, device=cuda)
    a = make(t)
    assert a.dtype == mx.bfloat16 and bits(a) == bits(t.cpu())
    t[0] = 7.0                                           # a copy: it does not follow
    assert bits(a)[0] == bits(bf16_numpy())[0]
    t2 = torch.arange(12, dtype=torch.bfloat16, device=cuda).reshape(3, 4).T
    b = make(t2)
    assert b.shape == (4, 3) and bits(b) == bits(t2.cpu())
    assert bits(mx.add(b, b, stream=gpu)) == bits((t2 + t2).cpu())   # usable in GPU ops


def test_torch_cuda_imports_convert_to_the_dtype_asked(torch, cuda, gpu):
    t = torch.tensor(VALUES, dtype=torch.bfloat16, device=cuda)
    f = mx.array(t, dtype=mx.float32)
    assert f.dtype == mx.float32 and f.tolist() == t.float().cpu().tolist()
    g = mx.array(t.float(), dtype=mx.bfloat16)
    assert g.dtype == mx.bfloat16 and bits(g) == bits(t.cpu())
    shared = mx.from_dlpack(t, copy=False)               # shares the tensor's memory
    assert shared.dtype == mx.bfloat16 and bits(shared) == bits(t.cpu())
    with pytest.raises(ValueError, match="Cannot convert array to mlx"):
        mx.array(torch.zeros(3, dtype=torch.complex32, device=cuda))
    w = torch.ones(2, device=cuda, requires_grad=True)
    assert mx.array(w).tolist() == [1.0, 1.0]


def test_bfloat16_gpu_array_to_torch(torch, cuda, gpu):
    a = mx.reshape(mx.array(bf16_numpy()), (2, 4), stream=gpu)      # on the GPU: BF16 bits
    t = torch.from_dlpack(a)
    assert t.dtype == torch.bfloat16 and t.is_cuda and bits(t.cpu()) == bits(bf16_numpy())
    s = torch.from_dlpack(mx.transpose(a, stream=gpu))
    assert s.shape == (4, 2) and bits(s.cpu()) == bits(bf16_numpy().reshape(2, 4).T.copy())
    assert bits(mx.array(torch.from_dlpack(a))) == bits(bf16_numpy())  # and back
