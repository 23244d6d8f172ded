"""streamlet.core.random against mlx.core.random (the oracle).

The issue allows normal and what derives from it 2 float32 ulps; reproducing MLX's CPU
erfinv, erf, exp, log (glibc) and log1p (glibc) makes every draw but multivariate_normal
(its SVD is LAPACK's) equal bit for bit, so the tests hold it to that.
"""
import doctest
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from streamlet.core import random as srandom
from streamlet.core.ops import threefry as tf
from streamlet.core.ops.special import erf_f32_mlx, erfinv_f32, log1pf_glibc, logf_glibc

SEEDS = (0, 1, 42, 2**31 + 3, 2**32, 2**32 + 5, 2**63 + 2**40 + 17, 2**64 - 1)
SIZES = (1, 2, 3, 7, 64, 1001, 10_000)
FLOATS = ("float32", "float16", "bfloat16")


def host(a):
    """A NumPy copy of an mlx or streamlet array (bfloat16 through float32, losslessly)."""
    if str(a.dtype).endswith("bfloat16"):
        if isinstance(a, mx.array):
            a = a.astype(mx.float32)
        else:
            import mlx.core as mlx_core
            a = a.astype(mlx_core.float32)
    return np.array(a)


def assert_same(ours, theirs):
    """Same shape, dtype and values (a NaN equals a NaN)."""
    a, b = host(ours), host(theirs)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b)


def both(mlx, fn, seed):
    return fn(mx, mx.random.key(seed)), fn(mlx, mlx.random.key(seed))


# -- keys, split, bits ----------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_key_and_split_match_mlx(mlx, seed):
    assert mx.random.key(seed).tolist() == mlx.random.key(seed).tolist()
    assert mx.random.key(seed).dtype == mx.uint32
    for num in (1, 2, 3, 10, 501):
        assert_same(*both(mlx, lambda m, k: m.random.split(k, num), seed))
    assert_same(*both(mlx, lambda m, k: m.random.split(m.random.split(k)[1], 4), seed))


def reference_words(key, n):
    """MLX's layout, one counter pair at a time, from the pure-Python hash."""
    half, h = n // 2, n - n // 2
    out = [0] * n
    for y in range(half):
        out[y], out[y + h] = srandom._hash_py(key, y, y + h)
    if n % 2:
        out[half] = srandom._hash_py(key, half, 0)[0]
    return np.array(out, np.uint32)


@pytest.mark.parametrize("width", (1, 2, 4))
@pytest.mark.parametrize("count", (1, 2, 3, 5, 8, 13))
def test_bits_layout_and_partial_words(width, count):
    key = (0xDEADBEEF, 7)
    ref = reference_words(key, (width * count + 3) // 4).view(np.uint8)[:width * count]
    got = mx.random.bits((count,), width, mx.array(np.array(key, np.uint32)))
    assert got.dtype == {1: mx.uint8, 2: mx.uint16, 4: mx.uint32}[width]
    np.testing.assert_array_equal(np.array(got).view(np.uint8), ref)


def test_bits_of_several_keys_fill_contiguous_blocks():
    keys = np.array([[1, 2], [3, 4], [5, 6]], np.uint32)
    got = tf.key_bytes(np, keys, 6)
    ref = np.concatenate([reference_words(tuple(k), 2).view(np.uint8)[:6] for k in keys.tolist()])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.skipif(tf.compiled() is None, reason="numba is not installed")
@pytest.mark.parametrize("n", (1, 2, 3, 7, 1001, 4 * tf.CHUNK + 6, 2 * tf.PARALLEL_MIN + 3))
@pytest.mark.parametrize("transform", ("WORDS", "UNIT", "ERFINV_UNIT"))
def test_numba_and_numpy_paths_give_identical_bits(monkeypatch, n, transform):
    t = getattr(tf, transform)
    param = tf.BELOW_ONE if t is tf.UNIT else None
    fast = tf.fill(np, (123, 2**32 - 9), n, t, param)
    monkeypatch.setattr(tf, "_numba", None)
    slow = tf.fill(np, (123, 2**32 - 9), n, t, param)
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))
    if t is tf.WORDS:
        np.testing.assert_array_equal(fast[:50], reference_words((123, 2**32 - 9), n)[:50])


NUMBA_LOADING = r"""
import sys
if sys.argv[1] == "blocked":
    sys.modules["numba"] = None  # numba cannot be imported
import numpy as np
import streamlet.core as mx
from streamlet.core.ops import threefry as tf
mx.set_default_device(mx.cpu)  # the CPU's kernels are the ones numba compiles
small = np.array(mx.random.normal((1000,), key=mx.random.key(3)))
loaded_small = sys.modules.get("numba") is not None
big = np.array(mx.random.normal((tf.JIT_MIN,), key=mx.random.key(3)))
print(loaded_small, sys.modules.get("numba") is not None, tf.compiled() is not None,
      small.view(np.uint32).sum(dtype=np.uint64), big.view(np.uint32).sum(dtype=np.uint64))
"""


@pytest.mark.skipif(tf.compiled() is None, reason="numba is not installed")
def test_numba_loads_on_the_first_large_draw_and_the_numpy_fallback_agrees():
    import subprocess
    import sys
    run = lambda mode: subprocess.run([sys.executable, "-c", NUMBA_LOADING, mode], check=True,
                                      capture_output=True, text=True).stdout.split()
    jit, blocked = run("allowed"), run("blocked")
    assert jit[:3] == ["False", "True", "True"]      # small draws do not pay for the JIT
    assert blocked[:3] == ["False", "False", "False"]  # without numba: NumPy, no error
    assert jit[3:] == blocked[3:]                     # the same bits either way


@pytest.mark.skipif(tf.compiled() is None, reason="numba is not installed")
def test_numba_logf_matches_numpy_emulation(rng):
    x = np.concatenate([rng.uniform(0, 3, 3 * tf.PARALLEL_MIN).astype(np.float32),
                        np.float32([0, -1, np.inf, -np.inf, np.nan, 1.2e-38, 1e-40, 3e38])])
    with np.errstate(all="ignore"):
        expected = logf_glibc(np, x)
    np.testing.assert_array_equal(tf.compiled().logf(x).view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("size", (1, 2, 5, 1000, 2 * tf.PARALLEL_MIN + 1))
def test_numpy_path_matches_mlx(mlx, monkeypatch, size):
    """The fallback without numba gives MLX's numbers too (keys, bits, every transform)."""
    monkeypatch.setattr(tf, "_numba", None)
    for seed in (3, 2**33 + 1):
        assert_same(*both(mlx, lambda m, k: m.random.split(k, size), seed))
        assert_same(*both(mlx, lambda m, k: m.random.uniform(shape=(size,), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.normal((size,), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.gumbel((size,), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.permutation(size, key=k), seed))
    mx.random.seed(5)
    mlx.random.seed(5)
    for _ in range(3):
        assert_same(mx.random.uniform(shape=(size,)), mlx.random.uniform(shape=(size,)))


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 9), min_size=0, max_size=3),
       seed=st.integers(0, 2**64 - 1), dtype=st.sampled_from(FLOATS))
def test_random_shapes_match_mlx(shape, seed, dtype):
    mlx_core = pytest.importorskip("mlx.core")
    for op in (lambda m, k: m.random.uniform(shape=shape, dtype=getattr(m, dtype), key=k),
               lambda m, k: m.random.normal(shape, getattr(m, dtype), key=k),
               lambda m, k: m.random.randint(-9, 9, shape, key=k),
               lambda m, k: m.random.bernoulli(0.25, shape, key=k)):
        assert_same(*both(mlx_core, op, seed))


def test_kernels_on_cupy_give_numpys_bits():
    cp = pytest.importorskip("cupy")
    key = (7, 2**32 - 1)
    for n in (1, 6, 1001, 3 * tf.PARALLEL_MIN + 1):
        for t, param in ((tf.WORDS, None), (tf.UNIT, tf.BELOW_ONE), (tf.ERFINV_UNIT, None)):
            np.testing.assert_array_equal(cp.asnumpy(tf.fill(cp, key, n, t, param)),
                                          tf.fill(np, key, n, t, param))
    k = np.array(key, np.uint32)
    for kernel, args in ((srandom._gumbel_kernel, (tf.BELOW_ONE, np.dtype(np.float32), (999,))),
                         (srandom._permutation_kernel, (999,)),
                         (srandom._bits_kernel, (7, np.dtype(np.uint8), (7,)))):
        np.testing.assert_array_equal(cp.asnumpy(kernel(cp, cp.asarray(k), *args)),
                                      kernel(np, k, *args))
    x = np.linspace(-5, 5, 1001, dtype=np.float32)
    np.testing.assert_array_equal(cp.asnumpy(erf_f32_mlx(cp, cp.asarray(x))), erf_f32_mlx(np, x))


@pytest.mark.skipif(not mx.is_available(mx.gpu), reason="no CUDA GPU here")
def test_same_numbers_on_the_gpu():
    k = mx.random.key(2**40 + 3)
    for draw in (lambda s: mx.random.normal((1001,), key=k, stream=s),
                 lambda s: mx.random.uniform(-1, 3, (77, 3), mx.float16, k, stream=s),
                 lambda s: mx.random.randint(-9, 99, (500,), key=k, stream=s),
                 lambda s: mx.random.categorical(mx.zeros((4, 9)), key=k, stream=s),
                 lambda s: mx.random.permutation(300, key=k, stream=s),
                 lambda s: mx.vmap(lambda key: mx.random.normal(  # one kernel, three keys
                     (1001,), key=key, stream=s))(mx.random.split(k, 3))):
        np.testing.assert_array_equal(np.array(draw(mx.gpu)), np.array(draw(mx.cpu)))


# -- distributions ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", SIZES)
def test_uniform_bit_exact(mlx, dtype, size):
    for seed in SEEDS[::2]:
        assert_same(*both(mlx, lambda m, k: m.random.uniform(
            shape=(size,), dtype=getattr(m, dtype), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.uniform(
            -3, 2.5, (size,), getattr(m, dtype), k), seed + 1))


def test_uniform_array_bounds_broadcast(mlx, rng):
    lo = rng.normal(size=(3, 1)).astype(np.float32)
    hi = lo + rng.uniform(0.5, 4, size=(1, 5)).astype(np.float32)
    for seed in SEEDS[:4]:
        assert_same(*both(mlx, lambda m, k: m.random.uniform(
            m.array(lo), m.array(hi), (2, 3, 5), key=k), seed))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", SIZES)
def test_normal_bit_exact(mlx, dtype, size):
    for seed in SEEDS[1::2]:
        assert_same(*both(mlx, lambda m, k: m.random.normal(
            (size,), getattr(m, dtype), key=k), seed))
    assert_same(*both(mlx, lambda m, k: m.random.normal(
        (size,), getattr(m, dtype), loc=1.5, scale=3.0, key=k), 9))


def test_normal_float32_and_complex_bit_exact(mlx):
    for seed in SEEDS:
        assert_same(*both(mlx, lambda m, k: m.random.normal((4097, 3), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.normal(
            (5, 33), m.complex64, key=k), seed))
    assert_same(*both(mlx, lambda m, k: m.random.normal(
        (77,), m.complex64, loc=1.0, scale=2.0, key=k), 3))


@pytest.mark.parametrize("low, high, dtype", [
    (-5, 17, "int32"), (0, 2, "bool_"), (-1000, 3, "int16"), (3, 300, "uint8"),
    (-7, -2, "int64"), (2**30 - 100, 2**30, "int32"), (0, 2**31 - 1, "int32"), (0, 10, "uint32")])
def test_randint_bit_exact(mlx, low, high, dtype):
    for seed in SEEDS[:5]:
        for size in (1, 6, 999):
            assert_same(*both(mlx, lambda m, k: m.random.randint(
                low, high, (size,), getattr(m, dtype), k), seed))


def test_randint_array_bounds(mlx, rng):
    lo = rng.integers(-50, 50, size=(4, 1)).astype(np.int32)
    hi = lo + rng.integers(1, 30, size=(1, 6)).astype(np.int32)
    assert_same(*both(mlx, lambda m, k: m.random.randint(m.array(lo), m.array(hi), (4, 6),
                                                         key=k), 11))


def test_bernoulli_bit_exact(mlx, rng):
    p = rng.uniform(size=(3, 40)).astype(np.float32)
    for seed in SEEDS[:4]:
        for make in (lambda m: 0.3, lambda m: 0.0, lambda m: 1.0, lambda m: m.array(p),
                     lambda m: m.array(p).astype(m.float16)):
            assert_same(*both(mlx, lambda m, k: m.random.bernoulli(make(m), (3, 40), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.bernoulli(m.array(p), key=k), seed))
        assert_same(*both(mlx, lambda m, k: m.random.bernoulli(key=k), seed))


def test_permutation_bit_exact(mlx, rng):
    x = rng.normal(size=(6, 9, 4)).astype(np.float32)
    for seed in SEEDS[:4]:
        for n in (0, 1, 2, 7, 1000):
            assert_same(*both(mlx, lambda m, k: m.random.permutation(n, key=k), seed))
        for axis in (0, 1, -1):
            assert_same(*both(mlx, lambda m, k: m.random.permutation(
                m.array(x), axis, key=k), seed))


@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"num_samples": 17}, {"shape": (3, 5)},
                                    {"axis": 0, "num_samples": 3}])
def test_categorical_bit_exact(mlx, rng, kwargs):
    logits = rng.normal(size=(5, 8)).astype(np.float32)
    logits[1] = 0.0  # ties between categories: argmax must break them as MLX does
    for seed in SEEDS[:5]:
        assert_same(*both(mlx, lambda m, k: m.random.categorical(m.array(logits), key=k,
                                                                 **kwargs), seed))


@pytest.mark.parametrize("logits_shape, kwargs", [
    ((8,), {}), ((8,), {"num_samples": 1}), ((8,), {"num_samples": 33}),
    ((8,), {"shape": (3, 5)}), ((1, 8), {}), ((1, 8), {"num_samples": 6}),
    ((8, 1), {"axis": 0, "shape": (4, 1)}), ((1, 8, 1), {"axis": 1, "num_samples": 5}),
    ((1,), {"num_samples": 4})])
def test_categorical_of_one_distribution_bit_exact(mlx, rng, logits_shape, kwargs):
    """A single distribution drawn into an array: MLX samples it through its CDF, not
    through Gumbel noise, and we give the same indices."""
    for seed in SEEDS[:5]:
        logits = (rng.normal(size=logits_shape) * 2).astype(np.float32)
        assert_same(*both(mlx, lambda m, k: m.random.categorical(m.array(logits), key=k,
                                                                 **kwargs), seed))


@pytest.mark.parametrize("logits", [[0.0, np.nan, 0.0], [0.0, np.inf, 0.0],
                                    [np.inf, np.inf, 0.0], [-np.inf] * 3, [-np.inf, 2.0, -np.inf],
                                    [1e30, 0.0, -1e30]])
def test_categorical_of_one_distribution_with_infinities_and_nan(mlx, logits):
    """Tied infinite logits share the probability, all -inf is uniform, a NaN gives the
    last index: MLX's choices, matched draw for draw."""
    for seed in SEEDS[:3]:
        assert_same(*both(mlx, lambda m, k: m.random.categorical(
            m.array(np.array(logits, np.float32)), num_samples=40, key=k), seed))


def test_categorical_of_one_distribution_follows_its_probabilities():
    p = np.array([0.1, 0.6, 0.3], np.float32)
    draws = np.array(mx.random.categorical(mx.log(mx.array(p)), num_samples=200_000,
                                           key=mx.random.key(3)))
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / draws.size, p, atol=0.005)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gumbel_bit_exact(mlx, dtype):
    for seed in SEEDS[:4]:
        for size in (1001, 3 * tf.PARALLEL_MIN + 1):
            assert_same(*both(mlx, lambda m, k: m.random.gumbel(
                (size,), getattr(m, dtype), k), seed))


@pytest.mark.parametrize("dtype", FLOATS)
def test_laplace_bit_exact(mlx, dtype):
    for seed in SEEDS[:4]:
        assert_same(*both(mlx, lambda m, k: m.random.laplace((1001,), getattr(m, dtype), key=k),
                          seed))
        assert_same(*both(mlx, lambda m, k: m.random.laplace(
            (9,), getattr(m, dtype), 0.5, 2.0, k), seed))


def test_log_as_mlx_computes_it(mlx):
    x = np.arange(0, 0x7F800000, 4999, dtype=np.uint32).view(np.float32)  # subnormals too
    x = np.concatenate([x, np.float32([np.inf, -1, 0, 1])])
    with np.errstate(all="ignore"):
        ours = logf_glibc(np, x)
    np.testing.assert_array_equal(ours, np.array(mlx.log(mlx.array(x))))


def test_log1p_as_mlx_computes_it(mlx):
    x = np.arange(0x80000000, 0xBF800001, 4999, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, np.arange(0, 0x7F800000, 4999, dtype=np.uint32).view(np.float32),
                        np.float32([np.inf, -np.inf, -1, 0, -0.0, 1e-30])])
    np.testing.assert_array_equal(log1pf_glibc(np, x), np.array(mlx.log1p(mlx.array(x))))


@pytest.mark.parametrize("dtype", FLOATS)
def test_truncated_normal_bit_exact_and_in_bounds(mlx, dtype, rng):
    for seed in SEEDS[:4]:
        for lo, hi in ((-1.0, 2.0), (0.5, 3.0), (-4.0, -1.0)):
            ours, theirs = both(mlx, lambda m, k: m.random.truncated_normal(
                lo, hi, (2000,), getattr(m, dtype), k), seed)
            assert_same(ours, theirs)
            assert host(ours).min() >= lo and host(ours).max() <= hi
    lo = rng.uniform(-2, 0, size=(3, 1)).astype(np.float32)
    assert_same(*both(mlx, lambda m, k: m.random.truncated_normal(
        m.array(lo), 1.5, key=k), 3))


def test_erf_as_mlx_computes_it(mlx):
    x = np.arange(0, 0x41000000, 9973, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, -x, np.float32([np.nan, np.inf, -np.inf])])
    np.testing.assert_array_equal(erf_f32_mlx(np, x), np.array(mlx.erf(mlx.array(x))))


def test_erfinv_as_mlx_computes_it(mlx):
    x = np.arange(0, 0x3F800000, 4999, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, -x, np.float32([1, -1, 0, 2, np.nan])])
    with np.errstate(all="ignore"):
        ours = erfinv_f32(np, x)
    np.testing.assert_array_equal(ours, np.array(mlx.erfinv(mlx.array(x))))


def test_multivariate_normal_close(mlx):
    mean = np.array([1.0, -2.0, 0.5], np.float32)
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]], np.float32)
    for seed in SEEDS[:3]:
        ours, theirs = both(mlx, lambda m, k: m.random.multivariate_normal(
            m.array(mean), m.array(cov), (50,), key=k), seed)
        assert ours.shape == (50, 3)
        np.testing.assert_allclose(host(ours), host(theirs), rtol=1e-4, atol=1e-4)


def test_statistics_of_large_draws():
    x = np.array(mx.random.normal((200_000,), key=mx.random.key(5)))
    assert abs(x.mean()) < 0.01 and abs(x.std() - 1) < 0.01
    u = np.array(mx.random.uniform(shape=(200_000,), key=mx.random.key(6)))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005


# -- streams, laziness, the global sequence -----------------------------------------------------
def test_same_numbers_on_every_stream():
    k = mx.random.key(77)
    expected = np.array(mx.random.normal((1001,), key=k))
    tls = mx.new_thread_local_stream(mx.cpu)
    for s in (mx.new_stream(mx.cpu), tls, mx.cpu, mx.default_stream(mx.cpu)):
        np.testing.assert_array_equal(np.array(mx.random.normal((1001,), key=k, stream=s)),
                                      expected)
        np.testing.assert_array_equal(np.array(mx.random.permutation(50, key=k, stream=s)),
                                      np.array(mx.random.permutation(50, key=k)))


def test_key_from_one_stream_used_on_another():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    sub = mx.random.split(mx.random.key(3), 4, stream=s1)[2]
    x = mx.random.uniform(shape=(100_000,), key=sub, stream=s2)
    assert x._node.data is None  # lazy until evaluated
    mx.eval(x)
    ref = mx.random.uniform(shape=(100_000,), key=mx.array(np.array(mx.random.split(
        mx.random.key(3), 4))[2]))
    np.testing.assert_array_equal(np.array(x), np.array(ref))


def test_seed_then_draw_equals_split_key(mlx):
    mx.random.seed(1234)
    first = np.array(mx.random.uniform(shape=(5,)))
    second = np.array(mx.random.normal((5,)))
    k0, k1 = mx.random.split(mx.random.key(1234))
    np.testing.assert_array_equal(first, np.array(mx.random.uniform(shape=(5,), key=k1)))
    nxt = mx.random.split(k0)[1]
    np.testing.assert_array_equal(second, np.array(mx.random.normal((5,), key=nxt)))
    mlx.random.seed(1234)
    np.testing.assert_array_equal(first, np.array(mlx.random.uniform(shape=(5,))))
    np.testing.assert_array_equal(second, np.array(mlx.random.normal((5,))))


def test_global_sequence_is_per_thread_and_reset_by_clear_streams():
    mx.random.seed(7)
    a = np.array(mx.random.uniform(shape=(4,)))
    out = {}

    def other():
        mx.random.seed(8)
        out["b"] = np.array(mx.random.uniform(shape=(4,)))

    mx.random.seed(7)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    np.testing.assert_array_equal(np.array(mx.random.uniform(shape=(4,))), a)
    assert not np.array_equal(out["b"], a)
    mx.random.seed(7)
    mx.clear_streams()
    assert srandom._local.key is None  # unseeded again: the next draw keys from the clock
    assert not np.array_equal(np.array(mx.random.uniform(shape=(4,))), a)


def test_state_holds_this_threads_key(mlx):
    mx.random.seed(21)
    mlx.random.seed(21)
    assert mx.random.state[0].tolist() == mlx.random.state[0].tolist() == [0, 21]
    mx.random.uniform()
    mlx.random.uniform()
    assert mx.random.state[0].tolist() == mlx.random.state[0].tolist()
    mx.random.state[0] = mx.random.key(5)
    np.testing.assert_array_equal(np.array(mx.random.uniform(shape=(3,))), np.array(
        mx.random.uniform(shape=(3,), key=mx.random.split(mx.random.key(5))[1])))
    mx.clear_streams()  # unseeded: keyed from the clock in milliseconds, as MLX does
    first = srandom._unseeded
    srandom._unseeded = iter([0])  # as the first thread to key itself
    try:
        assert abs(mx.random.state[0].tolist()[1] - mlx.random.key(
            __import__("time").time_ns() // 10**6).tolist()[1]) < 10**5
    finally:
        srandom._unseeded = first


def test_unseeded_threads_get_distinct_sequences():
    out = []

    def draw():
        out.append(np.array(mx.random.uniform(shape=(4,))))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({a.tobytes() for a in out}) == 4


def test_unseeded_draws_differ_between_calls():
    assert not np.array_equal(np.array(mx.random.uniform(shape=(8,))),
                              np.array(mx.random.uniform(shape=(8,))))


# -- bad arguments fail when the op is built ----------------------------------------------------
@pytest.mark.parametrize("call, exc, words", [
    (lambda: mx.random.uniform(shape=(-1, 2)), ValueError, ["uniform", "-1"]),
    (lambda: mx.random.normal((3, -2)), ValueError, ["normal", "-2"]),
    (lambda: mx.random.bernoulli(1.5), ValueError, ["bernoulli", "1.5"]),
    (lambda: mx.random.bernoulli(-0.1, (3,)), ValueError, ["bernoulli", "-0.1"]),
    (lambda: mx.random.uniform(key=[0, 1]), TypeError, ["uniform", "list", "[0, 1]"]),
    (lambda: mx.random.gumbel(key=7), TypeError, ["gumbel", "int 7"]),
    (lambda: mx.random.normal(key=mx.array([0, 1])), ValueError, ["normal", "int32"]),
    (lambda: mx.random.split(mx.array(np.zeros(3, np.uint32))), ValueError, ["split", "(3,)"]),
    (lambda: mx.random.uniform(dtype=mx.int32), ValueError, ["uniform", "int32"]),
    (lambda: mx.random.randint(0, 3, dtype=mx.float32), ValueError, ["randint", "float32"]),
    (lambda: mx.random.uniform(mx.zeros((3,)), 1, (2,)), ValueError, ["uniform", "(2,)"]),
    (lambda: mx.random.seed(-1), ValueError, ["seed", "-1"]),
    (lambda: mx.random.key(1.5), TypeError, ["key", "float"]),
    (lambda: mx.random.bits((2,), 3), ValueError, ["bits", "3"]),
    (lambda: mx.random.categorical(mx.zeros((3, 4)), shape=(2,), num_samples=2), ValueError,
     ["categorical"]),
    (lambda: mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(3)), ValueError,
     ["multivariate_normal", "(3, 3)"]),
    (lambda: mx.random.uniform(stream="cpu"), TypeError, ["str"]),
])
def test_bad_arguments_raise_at_build_time(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value)


def test_docstring_examples():
    assert doctest.testmod(srandom, verbose=False).failed == 0


# -- fused multiply-adds, rounded once (MLX's erfinv, erf and exp polynomials use them) ----
def _exact_fma(x, y, c):
    """x * y + c rounded to float32 by exact rational arithmetic, ties to even."""
    from fractions import Fraction
    v = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(c))
    f = np.float32(float(v))
    near = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(near, key=lambda g: (abs(Fraction(float(g)) - v), int(g.view(np.uint32)) & 1))


def _near_ties(rng, n):
    """(x, y, c) whose float64 sum x * y + c lands on a float32 midpoint for many draws:
    c in [1, 2), x * y half of c's ulp, off by a few float32 ulps of x and y."""
    c = rng.uniform(1, 2, n).astype(np.float32)
    half = np.spacing(c).astype(np.float64) / 2
    x = (half * (1 + 2.0 ** -23 * rng.integers(1, 8, n))).astype(np.float32)
    y = np.where(rng.random(n) < 0.5, 1 + 2.0 ** -23, 1 - 2.0 ** -23).astype(np.float32)
    sign = np.where(rng.random(n) < 0.3, -1, 1).astype(np.float32)
    return x * sign, y, c * sign


class _Device:
    """NumPy under another name: fma_f32 takes its device branch (every lane exact)."""

    def __getattr__(self, name):
        return getattr(np, name)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_fma_f32_rounds_once(seed):
    from streamlet.core.ops.special import fma_f32
    from streamlet.core.ops.threefry_numba import _fma
    rng = np.random.default_rng(seed)
    x, y, c = _near_ties(rng, 200)
    # and plain draws over wide exponent ranges, subnormal results among them
    wide = [(rng.standard_normal(100) * 2.0 ** rng.integers(-75, 60, 100)).astype(np.float32)
            for _ in range(3)]
    x, y, c = (np.concatenate([a, b]) for a, b in zip((x, y, c), wide))
    want = np.array([_exact_fma(*t) for t in zip(x, y, c)], np.float32)
    args = [a.astype(np.float64) for a in (x, y, c)]
    for xp in (np, _Device()):
        np.testing.assert_array_equal(fma_f32(xp, *args).view(np.uint32), want.view(np.uint32))
    compiled = np.array([_fma(*map(float, t)) for t in zip(*args)], np.float32)
    np.testing.assert_array_equal(compiled.view(np.uint32), want.view(np.uint32))


def test_fma_f32_where_one_float64_rounding_is_wrong():
    from streamlet.core.ops.special import fma_f32
    x, y, c = (a.astype(np.float64) for a in _near_ties(np.random.default_rng(7), 3000))
    twice = (x * y + c).astype(np.float32)  # a float64 multiply-add, then float32
    once = fma_f32(np, x, y, c)
    differ = np.flatnonzero(once != twice)
    assert differ.size > 10  # the construction meets double roundings
    for i in differ[:50]:
        assert once[i] == _exact_fma(x[i], y[i], c[i]) != twice[i]


@pytest.mark.skipif(not mx.is_available(mx.gpu), reason="no CUDA GPU here")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_erfinv_on_the_gpu_gives_the_cpus_bits(dtype):
    """The GPU's erfinv is one kernel (fmaf, glibc's logf) with the CPU's roundings.  Its
    inputs and results are normal floats: CuPy builds kernels flushing float32 subnormals
    (docs/differences.rst)."""
    x = np.arange(0x01000000, 0x3F800000, 3989, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, -x, np.float32([1, -1, 0, -0.0, 2, -3, np.inf, np.nan])])
    if dtype == "int32":
        x = np.array([-2, -1, 0, 1, 3], np.int32)
    a = mx.array(x).astype(getattr(mx, dtype))
    gpu, cpu = mx.erfinv(a, stream=mx.gpu), mx.erfinv(a, stream=mx.cpu)
    assert gpu.dtype == cpu.dtype
    g, c = (np.array(v.astype(mx.float32)) for v in (gpu, cpu))
    nan = np.isnan(c)  # NaN's bits are the hardware's own
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(g[~nan].view(np.uint32), c[~nan].view(np.uint32))
