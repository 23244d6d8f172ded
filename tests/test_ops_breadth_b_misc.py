"""Dtype machinery, printing, memory queries, DLPack and the metal/cuda namespaces."""
import gc
import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from conftest import cpu_if_float64
from streamlet.core import memory

DTYPES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64", "complex64"]
CATEGORIES = ["generic", "number", "integer", "signedinteger", "unsignedinteger", "floating",
              "inexact", "complexfloating"]
KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
         "complex floating", "numeric"]


# -- dtypes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("a", DTYPES + CATEGORIES)
def test_issubdtype_matches_mlx_on_every_pair(a, mlx):
    for b in DTYPES + CATEGORIES:
        assert mx.issubdtype(getattr(mx, a), getattr(mx, b)) == \
            mlx.issubdtype(getattr(mlx, a), getattr(mlx, b)), (a, b)


@pytest.mark.parametrize("name", DTYPES)
def test_isdtype_matches_mlx(name, mlx):
    for kind in KINDS:
        assert mx.isdtype(getattr(mx, name), kind) == mlx.isdtype(getattr(mlx, name), kind)
    for other in DTYPES:
        assert mx.isdtype(getattr(mx, name), (getattr(mx, other), "bool")) == \
            mlx.isdtype(getattr(mlx, name), (getattr(mlx, other), "bool"))


def test_dtype_errors_like_mlx(mlx):
    for M in (mx, mlx):
        with pytest.raises(ValueError):
            M.isdtype(M.float32, "foo")
        with pytest.raises(ValueError):
            M.isdtype(M.float32, M.floating)
        with pytest.raises(ValueError):
            M.issubdtype(M.float32, "float32")
        with pytest.raises(ValueError):
            M.iinfo(M.bool_)
        with pytest.raises(ValueError):
            M.finfo(M.int32)


@pytest.mark.parametrize("name", DTYPES)
def test_dtype_and_limits_match_mlx(name, mlx):
    ours, theirs = getattr(mx, name), getattr(mlx, name)
    assert (repr(ours), str(ours), ours.size) == (repr(theirs), str(theirs), theirs.size)
    assert repr(ours.category if hasattr(ours, "category") else None) is not None
    if name in ("float16", "bfloat16", "float32", "float64", "complex64"):
        a, b = mx.finfo(ours), mlx.finfo(theirs)
        fields = ("min", "max", "eps", "bits", "smallest_normal")
    elif name != "bool_":
        a, b = mx.iinfo(ours), mlx.iinfo(theirs)
        fields = ("min", "max")
    else:
        return
    assert repr(a) == repr(b)
    assert repr(a.dtype) == repr(b.dtype)
    for f in fields:
        assert getattr(a, f) == getattr(b, f), f


def test_category_reprs_match_mlx(mlx):
    for c in CATEGORIES:
        assert repr(getattr(mx, c)) == repr(getattr(mlx, c))
        assert getattr(mx.DtypeCategory, c) is getattr(mx, c)


# -- printing ----------------------------------------------------------------------------------
R = np.random.default_rng(3)
PRINT_CASES = [np.array(1.5), np.zeros((0,)), np.zeros((0, 3)), np.zeros((2, 0)),
               np.zeros((3, 0, 2)), np.array([1.0, 2.5, -3.25e-5, 1e10]),
               np.array([np.nan, np.inf, -np.inf, -0.0]), np.arange(12).reshape(3, 4),
               np.arange(1001), np.arange(2000).reshape(40, 50), np.ones((2, 2, 2)),
               np.zeros((7, 3)), np.zeros((2, 2, 300)), np.arange(512).reshape(8, 8, 8),
               R.standard_normal((9, 2, 8)) * 1e-6, R.standard_normal(5) * 1e7]
PRINT_TYPES = ["float32", "float16", "bfloat16", "int32", "uint8", "bool_", "float64", "int64"]


def _both(M, data, name):
    return M.array(data.astype(np.float32) if data.dtype.kind == "f" else data).astype(
        getattr(M, name))


def _ours(data, name):
    """_both(mx, ...); in a GPU run the float64 cast goes on a CPU stream, as in MLX."""
    return cpu_if_float64(lambda: _both(mx, data, name))


@pytest.mark.parametrize("index", range(len(PRINT_CASES)))
@pytest.mark.parametrize("precision", [-1, 3])
def test_repr_matches_mlx(index, precision, mlx):
    data = PRINT_CASES[index]
    try:
        for name in PRINT_TYPES:
            mx.set_printoptions(precision=precision)
            mlx.set_printoptions(precision=precision)
            assert repr(_ours(data, name)) == repr(_both(mlx, data, name)), name
        z = (data + 0.5j * data[::-1] if data.ndim else data * (1 - 2j)).astype(np.complex64)
        assert repr(mx.array(z)) == repr(mlx.array(z))
        assert str(mx.array(z)) == str(mlx.array(z))
    finally:
        mx.set_printoptions()
        mlx.set_printoptions()


def test_printoptions_context_restores():
    x = mx.array([3.14159])
    with mx.printoptions(precision=2) as opts:
        assert opts.precision == 2
        assert repr(x) == "array([3.14], dtype=float32)"
        mx.set_printoptions(precision=4)
    assert repr(x) == "array([3.14159], dtype=float32)"
    assert mx.get_printoptions().precision == -1
    with pytest.raises(KeyError):
        with mx.printoptions(precision=1):
            raise KeyError("x")
    assert mx.get_printoptions().precision == -1


def test_repr_of_a_failed_array_raises():
    bad = mx.linalg.inv(mx.zeros((2, 2)), stream=mx.cpu)
    with pytest.raises(RuntimeError):
        repr(bad)


# -- memory ------------------------------------------------------------------------------------
def test_memory_accounting_counts_buffers_until_freed():
    account = memory.Account()  # a private account: other tests' buffers do not show
    big = np.ones(1 << 17)  # 1 MiB
    account.track(big)
    account.track(big[::2])  # a view: charged to its buffer once
    account.track(np.ones(8))  # below TRACK_BYTES: not counted
    assert (account.active, account.peak) == (big.nbytes, big.nbytes)
    other = np.ones(1 << 16)
    account.track(other[1:])
    assert account.active == big.nbytes + other.nbytes == account.peak
    del big
    gc.collect()
    assert account.active == other.nbytes
    assert account.peak == (1 << 20) + other.nbytes
    account.reset_peak()
    assert account.peak == 0
    del other
    gc.collect()
    assert account.active == 0


def test_global_queries_read_the_library_account():
    assert mx.get_active_memory() == memory.ACCOUNT.active
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == 0
    keep = np.ones(1 << 17)
    memory.track(keep)
    assert mx.get_peak_memory() >= keep.nbytes


def test_evaluated_arrays_are_counted_when_the_scheduler_reports_them():
    gc.collect()
    before = mx.get_active_memory()
    x = mx.ones((512, 512)) + 1  # 1 MiB of float32
    mx.eval(x)
    if mx.get_active_memory() == before:
        pytest.skip("the scheduler does not call memory.track yet")
    during = mx.get_active_memory()
    assert during >= before + x.nbytes
    del x
    gc.collect()
    assert mx.get_active_memory() <= during - 512 * 512 * 4


def test_small_arrays_are_counted_as_mlx_counts_them(mlx):
    """A 16 KiB array, computed or made from NumPy, shows in the active memory (MLX
    counts every buffer), and freeing one gives its bytes back."""
    for M in (mx, mlx):
        gc.collect()
        a = M.zeros((4096,))
        M.eval(a)
        M.synchronize()
        active = M.get_active_memory()
        assert active >= 4096 * 4
        b = M.zeros((4096,))
        M.eval(b)
        assert M.get_active_memory() >= active + 4096 * 4
        del b
        gc.collect()
        M.synchronize()
        assert M.get_active_memory() == active
        c = M.array(np.ones(4096, np.float32))  # made from NumPy: counted too
        M.eval(c)
        assert M.get_active_memory() >= active + 4096 * 4
        del a, c


def test_limits_return_the_previous_value(mlx):
    start = mx.get_memory_limit()
    assert start > 0
    assert mx.set_memory_limit(1 << 30) == start
    assert mx.get_memory_limit() == 1 << 30
    mx.set_memory_limit(start)
    prev = mx.set_cache_limit(123)
    assert mx.set_cache_limit(prev) == 123
    assert mx.set_wired_limit(0) == 0
    for M in (mx, mlx):
        with pytest.raises(TypeError):
            M.set_memory_limit(-1)
    if mx.is_available(mx.gpu):  # CuPy's pool keeps what GPU arrays free (earlier tests' too)
        x = mx.zeros((1 << 20,), stream=mx.gpu)
        mx.eval(x)
        mx.synchronize()
        del x
        gc.collect()
        assert mx.get_cache_memory() >= 4 << 20
        mx.clear_cache()  # free blocks of chunks that earlier tests' live arrays share stay
        assert mx.get_cache_memory() < 4 << 20
    else:  # NumPy frees straight to the allocator: the CPU keeps no cache
        assert mx.get_cache_memory() == 0
        mx.clear_cache()
        assert mx.get_cache_memory() == 0


# -- namespaces and DLPack --------------------------------------------------------------------
def test_namespaces(mlx):
    assert mx.metal.is_available() is False
    assert mx.cuda.is_available() is (mx.device_count(mx.gpu) > 0)
    assert callable(mx.metal.get_active_memory)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["bool", "uint8", "int16", "int32", "int64", "uint64", "float16",
                        "float32", "complex64"]),
       st.lists(st.integers(0, 4), min_size=0, max_size=3))
def test_from_dlpack_copies_numpy_memory(dtype, shape):
    """A NumPy source is copied (as MLX's CPU build does), so changing it later cannot
    change the array; the array's own export shares its buffer."""
    src = np.zeros(shape, dtype=dtype)
    x = mx.from_dlpack(src)
    assert x.shape == src.shape and x.dtype.np == src.dtype
    back = np.from_dlpack(x)
    assert not np.shares_memory(back, src)
    assert np.shares_memory(back, np.asarray(x)) or src.size == 0
    if src.size:
        src.reshape(-1)[0] = 1
        assert x.reshape(-1)[0].item() == 0


@pytest.mark.usefixtures("on_cpu")
def test_from_dlpack_copies_and_converts(mlx):
    src = np.arange(4, dtype=np.float32)
    x = mx.from_dlpack(src, copy=True)
    src[0] = 9
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    strided = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert (mx.from_dlpack(strided) + 1).tolist() == (strided + 1).tolist()
    d = mx.from_dlpack(np.arange(3.0))
    assert repr(d.dtype) == repr(mlx.from_dlpack(np.arange(3.0)).dtype)
    with pytest.raises(ValueError):
        mx.from_dlpack(np.arange(3.0), copy=False)
    with pytest.raises(TypeError):
        mx.from_dlpack([1, 2])
    lazy = mx.ones((2, 3)) * 2
    assert np.from_dlpack(lazy).tolist() == [[2.0] * 3] * 2
    assert lazy.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("lib", ["torch", "cupy", "jax"])
def test_from_dlpack_other_libraries(lib):
    if importlib.util.find_spec(lib) is None:
        pytest.skip(f"{lib} is not installed")
    mod = importlib.import_module(lib if lib != "jax" else "jax.numpy")
    src = mod.arange(6) if lib != "torch" else mod.arange(6, dtype=mod.float32)
    x = mx.from_dlpack(src)
    assert x.tolist() == [float(v) if lib == "torch" else int(v) for v in range(6)] or \
        x.tolist() == list(range(6))


# -- signatures --------------------------------------------------------------------------------
def _mlx_params(fn):
    """Parameter names (with '/' and '*' markers) from the first line of an mlx docstring."""
    line = fn.__doc__.strip().splitlines()[0]
    inner, depth, parts, cur = line[line.index("(") + 1:], 0, [], ""
    for ch in inner:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.split(":")[0].split("=")[0].strip() for p in parts if p.strip()]


def _our_params(fn):
    import inspect
    out, star = [], False
    params = list(inspect.signature(fn).parameters.values())
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            out.append("*" + p.name)
            star = True
        elif p.kind is p.VAR_KEYWORD:
            out.append("**" + p.name)
        else:
            out.append(p.name)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or
                                            params[i + 1].kind is not p.POSITIONAL_ONLY):
            out.append("/")
    return out


SIGNED = [("linalg", n) for n in ("norm", "qr", "svd", "inv", "tri_inv", "cholesky",
                                  "cholesky_inv", "det", "slogdet", "eig", "eigh", "eigvals",
                                  "eigvalsh", "lu", "lu_factor", "pinv", "solve",
                                  "solve_triangular", "cross")] + \
    [("fft", n) for n in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft",
                          "rfft2", "irfft2", "rfftn", "irfftn", "fftfreq", "rfftfreq",
                          "fftshift", "ifftshift", "stft", "istft")] + \
    [("", n) for n in ("save", "load", "savez", "savez_compressed", "save_safetensors",
                       "isdtype", "issubdtype", "from_dlpack", "set_printoptions",
                       "printoptions", "set_memory_limit", "set_cache_limit",
                       "set_wired_limit")]


@pytest.mark.parametrize("where, name", SIGNED)
def test_signatures_match_mlx(where, name, mlx):
    ours = getattr(getattr(mx, where) if where else mx, name)
    theirs = getattr(getattr(mlx, where) if where else mlx, name)
    assert _our_params(ours) == _mlx_params(theirs)
