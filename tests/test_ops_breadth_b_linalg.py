"""mx.linalg against NumPy and mlx: values, dtypes, shapes, errors (build and run time)."""
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamlet.core as mx
from streamlet.core.ops import linalg as impl

L = mx.linalg
RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 4)).astype(np.float32)
SPD = (A @ A.T + 4 * np.eye(4)).astype(np.float32)
RECT = RNG.standard_normal((3, 5)).astype(np.float32)
BATCH = RNG.standard_normal((2, 3, 3)).astype(np.float32)
BIG = RNG.standard_normal((2, 40, 37)).astype(np.float32)  # past the LU panel width


def host(x):
    """NumPy value of an mlx or streamlet array (bfloat16 through float32)."""
    if "bfloat16" in repr(x.dtype):
        x = x.astype(mx.float32 if isinstance(x, mx.array) else _mlx_float32())
    return np.array(x)


def _mlx_float32():
    import mlx.core
    return mlx.core.float32


def dtype_name(d):
    return repr(d).rsplit(".", 1)[-1]


def results(f, M):
    out = f(M)
    return list(out) if isinstance(out, (tuple, list)) else [out]


# name: a function of the module M (streamlet.core or mlx.core); results must agree
CASES = {
    "inv": lambda M: M.linalg.inv(M.array(A), stream=M.cpu),
    "inv_f64_batch": lambda M: M.linalg.inv(M.array(BATCH).astype(M.float64, stream=M.cpu),
                                            stream=M.cpu),
    "tri_inv_lower": lambda M: M.linalg.tri_inv(M.array(A), stream=M.cpu),
    "tri_inv_upper": lambda M: M.linalg.tri_inv(M.array(A), upper=True, stream=M.cpu),
    "cholesky": lambda M: M.linalg.cholesky(M.array(SPD), stream=M.cpu),
    "cholesky_upper": lambda M: M.linalg.cholesky(M.array(SPD), upper=True, stream=M.cpu),
    "cholesky_inv": lambda M: M.linalg.cholesky_inv(
        M.linalg.cholesky(M.array(SPD), stream=M.cpu), stream=M.cpu),
    "cholesky_inv_upper": lambda M: M.linalg.cholesky_inv(
        M.linalg.cholesky(M.array(SPD), upper=True, stream=M.cpu), upper=True, stream=M.cpu),
    "det": lambda M: M.linalg.det(M.array(BATCH), stream=M.cpu),
    "det_int": lambda M: M.linalg.det(M.array([[1, 2], [3, 4]]), stream=M.cpu),
    "det_f16": lambda M: M.linalg.det(M.array(A[:3, :3]).astype(M.float16), stream=M.cpu),
    "slogdet_bf16": lambda M: M.linalg.slogdet(M.array(A[:2, :2]).astype(M.bfloat16),
                                               stream=M.cpu),
    "det_singular": lambda M: M.linalg.det(M.zeros((3, 3)), stream=M.cpu),
    "slogdet": lambda M: M.linalg.slogdet(M.array(-BATCH), stream=M.cpu),
    "slogdet_singular": lambda M: M.linalg.slogdet(M.zeros((2, 2)), stream=M.cpu),
    "eigvalsh": lambda M: M.linalg.eigvalsh(M.array(SPD), stream=M.cpu),
    "eigvalsh_upper": lambda M: M.linalg.eigvalsh(M.array(A), UPLO="U", stream=M.cpu),
    "svd_values": lambda M: M.linalg.svd(M.array(RECT), compute_uv=False, stream=M.cpu),
    "pinv": lambda M: M.linalg.pinv(M.array(RECT), stream=M.cpu),
    "lu": lambda M: M.linalg.lu(M.array(A), stream=M.cpu),
    "lu_rect": lambda M: M.linalg.lu(M.array(RECT), stream=M.cpu),
    "lu_rect_tall": lambda M: M.linalg.lu(M.array(RECT.T), stream=M.cpu),
    "lu_factor_batch": lambda M: M.linalg.lu_factor(M.array(BATCH), stream=M.cpu),
    "lu_blocked": lambda M: M.linalg.lu(M.array(BIG), stream=M.cpu),
    "lu_factor_blocked_wide": lambda M: M.linalg.lu_factor(
        M.array(np.swapaxes(BIG, -1, -2)), stream=M.cpu),
    "solve": lambda M: M.linalg.solve(M.array(A), M.array(RECT.T[:4]), stream=M.cpu),
    "solve_vector": lambda M: M.linalg.solve(M.array(A), M.array(A[0]), stream=M.cpu),
    "solve_triangular": lambda M: M.linalg.solve_triangular(
        M.array(A), M.array(RECT.T[:4]), upper=True, stream=M.cpu),
    "solve_triangular_vec": lambda M: M.linalg.solve_triangular(
        M.array(A), M.array(A[1]), stream=M.cpu),
    "norm": lambda M: M.linalg.norm(M.array(BATCH)),
    "norm_int": lambda M: M.linalg.norm(M.array([[3, 4], [0, 0]])),
    "norm_f16": lambda M: M.linalg.norm(M.array(A).astype(M.float16), axis=1),
    "norm_complex": lambda M: M.linalg.norm(M.array(A) * (1 + 2j), keepdims=True),
    "norm_matrix_orders": lambda M: [M.linalg.norm(M.array(A), ord=o, stream=M.cpu)
                                     for o in (1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc")],
    "norm_vector_orders": lambda M: [M.linalg.norm(M.array(BATCH), ord=o, axis=-1)
                                     for o in (0, 1, 2, 3.5, -1, np.inf, -np.inf)],
    "norm_axes_keepdims": lambda M: M.linalg.norm(M.array(BATCH), ord=1, axis=(2, 0),
                                                  keepdims=True),
    "cross": lambda M: M.linalg.cross(M.array([1, 2, 3]), M.array([4, 5, 6])),
    "cross_2d_vectors": lambda M: M.linalg.cross(M.array([1.0, 2]), M.array([4, 5.0])),
    "cross_axis_broadcast": lambda M: M.linalg.cross(M.array(RECT[:, :3].T),
                                                     M.array(np.ones((3, 1), np.float32)),
                                                     axis=0),
    "cross_ndim_broadcast": lambda M: M.linalg.cross(M.array(BIG[0, :6, :1]).reshape(2, 3, 1),
                                                     M.array(RECT), axis=-2),
    "cross_rank_mix": lambda M: M.linalg.cross(M.array(BATCH), M.array([1.0, 2.0])),
    "cross_bool": lambda M: M.linalg.cross(M.ones(3, dtype=M.bool_), M.ones(3, M.bool_)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mlx(name, mlx):
    f = CASES[name]
    ours, theirs = results(f, mx), results(f, mlx)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape
        assert dtype_name(o.dtype) == dtype_name(t.dtype)
        np.testing.assert_allclose(host(o).astype(np.complex128), host(t), rtol=2e-3, atol=2e-4)


def _reconstructs(name, M, a):
    out = getattr(M.linalg, name)(M.array(a), stream=M.cpu)
    return [host(x) for x in out], [(x.shape, dtype_name(x.dtype)) for x in out]


@pytest.mark.parametrize("a", [A, RECT, RECT.T, BATCH], ids=["square", "wide", "tall", "batch"])
def test_qr_and_svd_reconstruct_and_match_mlx_shapes(a, mlx):
    (q, r), meta = _reconstructs("qr", mx, a)
    assert meta == _reconstructs("qr", mlx, a)[1]
    np.testing.assert_allclose(q @ r, a, atol=1e-5)
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=0)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(
        np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2), atol=1e-5)
    (u, s, vt), meta = _reconstructs("svd", mx, a)
    assert meta == _reconstructs("svd", mlx, a)[1]
    k = s.shape[-1]
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=1e-5)


def test_eig_and_eigh_solve_their_equations(mlx):
    w, v = (host(x) for x in L.eig(mx.array(A), stream=mx.cpu))
    np.testing.assert_allclose(A @ v, v * w, atol=1e-4)
    ours = np.sort_complex(host(L.eigvals(mx.array(A), stream=mx.cpu)))
    np.testing.assert_allclose(ours, np.sort_complex(host(mlx.linalg.eigvals(
        mlx.array(A), stream=mlx.cpu))), atol=1e-4)
    hermitian = (A + 1j * A.T) + (A + 1j * A.T).conj().T
    w, v = L.eigh(mx.array(hermitian.astype(np.complex64)), stream=mx.cpu)
    assert (w.dtype, v.dtype) == (mx.float32, mx.complex64)
    np.testing.assert_allclose(hermitian @ host(v), host(v) * host(w), atol=1e-4)


def test_multi_output_ops_factor_once():
    q, r = L.qr(mx.array(A), stream=mx.cpu)
    assert q._node.inputs[0] is r._node.inputs[0]  # one shared factorization node, two selections
    p, lo, up = L.lu(mx.array(A), stream=mx.cpu)
    np.testing.assert_allclose((host(lo) @ host(up))[host(p)], A, atol=1e-5)


# name: f(M) that must raise the same exception type in streamlet and mlx
BAD = {
    f"{op}_{kind}": (op, arg)
    for op in ("inv", "tri_inv", "cholesky", "cholesky_inv", "qr", "svd", "eig", "eigh",
               "eigvals", "eigvalsh", "lu", "lu_factor", "pinv", "det", "slogdet")
    for kind, arg in (("int", [[1, 2], [3, 4]]), ("vector", [1.0, 2.0]),
                      ("rect", RECT), ("f16", A.astype(np.float16)),
                      ("complex", A.astype(np.complex64)))
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_inputs_raise_like_mlx(name, mlx):
    op, arg = BAD[name]

    def outcome(M):
        try:
            M.eval(getattr(M.linalg, op)(M.array(arg), stream=M.cpu))
        except Exception as exc:  # noqa: BLE001 - the type is what we compare
            return type(exc)
        return None
    ours, theirs = outcome(mx), outcome(mlx)
    assert ours is theirs or (theirs is not None and ours is not None and
                              issubclass(ours, theirs))


@pytest.mark.parametrize("f", [
    lambda M: M.linalg.solve(M.ones((3, 3)), M.ones((4, 3)), stream=M.cpu),
    lambda M: M.linalg.solve(M.ones((3, 3), dtype=M.int32), M.ones(3, M.int32), stream=M.cpu),
    lambda M: M.linalg.solve_triangular(M.ones((3, 3)), M.ones((4,)), stream=M.cpu),
    lambda M: M.linalg.norm(M.ones((3, 3)), ord=3),
    lambda M: M.linalg.norm(M.ones((3, 3)), ord="foo", axis=(0, 1)),
    lambda M: M.linalg.norm(M.ones(3), ord="fro"),
    lambda M: M.linalg.norm(M.ones((2, 2, 2)), ord=2),
    lambda M: M.linalg.norm(M.ones((3, 3)), axis=(0, 1, 1)),
    lambda M: M.linalg.norm(M.ones((3, 3), dtype=M.bfloat16), ord=2),
    lambda M: M.linalg.cross(M.ones(4), M.ones(4)),
])
def test_bad_arguments_raise_value_error_when_built(f, mlx):
    for M in (mx, mlx):
        with pytest.raises(ValueError):
            f(M)


def test_solve_broadcasts_batches_like_numpy():
    x = L.solve(mx.array(BATCH), mx.array(A[:3, :2]), stream=mx.cpu)
    np.testing.assert_allclose(host(x), np.linalg.solve(BATCH, A[:3, :2]), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):  # MLX ignores a bad UPLO; we refuse it
        L.eigh(mx.ones((2, 2)), UPLO="X", stream=mx.cpu)


def test_invalid_axis_is_a_value_error():
    with pytest.raises(ValueError):
        L.norm(mx.ones((3, 3)), axis=5)
    with pytest.raises(IndexError):
        L.cross(mx.ones(3), mx.ones(3), axis=2)


@pytest.mark.parametrize("f, op", [
    (lambda: L.inv(mx.zeros((2, 2)), stream=mx.cpu), "linalg.inv"),
    (lambda: L.tri_inv(mx.zeros((2, 2)), stream=mx.cpu), "linalg.tri_inv"),
    (lambda: L.solve(mx.zeros((2, 2)), mx.ones(2), stream=mx.cpu), "linalg.solve"),
])
def test_run_time_failures_raise_runtime_error_naming_the_op(f, op):
    bad = f()
    for _ in range(2):  # every read of a failed array reports it
        with pytest.raises(RuntimeError, match=op):
            mx.eval(bad)
    with pytest.raises(RuntimeError, match=op):
        (bad + 1).tolist()
    assert L.inv(mx.eye(2), stream=mx.cpu).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_factorizations_refuse_gpu_streams():
    gpu_state = types.SimpleNamespace(stream=types.SimpleNamespace(
        device=types.SimpleNamespace(type=mx.gpu)))
    with pytest.raises(ValueError, match="not yet supported on the GPU"):
        impl._cpu_only(gpu_state, "linalg::qr")
    if not mx.is_available(mx.gpu):
        with pytest.raises(ValueError):
            L.qr(mx.array(A), stream=mx.gpu)


def test_output_lives_on_the_op_stream_and_waits_for_inputs():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    a = mx.array(A) + mx.zeros((4, 4), stream=s1)
    out = L.inv(a, stream=s2)
    assert out._node.stream.stream == s2
    np.testing.assert_allclose(host(out), np.linalg.inv(A), rtol=1e-4, atol=1e-4)


matrices = st.tuples(st.sampled_from([(), (2,), (1, 3)]), st.integers(1, 5),
                     st.sampled_from([np.float32, np.float64]), st.integers(0, 2**31))


@settings(max_examples=25, deadline=None)
@given(matrices)
def test_random_square_ops_against_numpy(spec):
    batch, n, dtype, seed = spec
    a = np.random.default_rng(seed).standard_normal(batch + (n, n)).astype(dtype)
    a = a + n * np.eye(n, dtype=dtype)  # well conditioned
    x = mx.array(a, dtype=mx.float64 if dtype == np.float64 else mx.float32)
    tol = dict(rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(host(L.inv(x, stream=mx.cpu)), np.linalg.inv(a), **tol)
    np.testing.assert_allclose(host(L.det(x, stream=mx.cpu)), np.linalg.det(a), **tol)
    sign, logdet = L.slogdet(x, stream=mx.cpu)
    np.testing.assert_allclose(host(sign) * np.exp(host(logdet)), np.linalg.det(a), **tol)
    p, lo, up = (host(v) for v in L.lu(x, stream=mx.cpu))
    np.testing.assert_allclose(np.take_along_axis(lo @ up, p[..., None].astype(int), -2), a,
                               **tol)
    sym = a + np.swapaxes(a, -1, -2)
    np.testing.assert_allclose(host(L.eigvalsh(mx.array(sym, dtype=x.dtype), stream=mx.cpu)),
                               np.linalg.eigvalsh(sym), **tol)
    assert L.inv(x, stream=mx.cpu).dtype == x.dtype


MATRIX_ORDS = [None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"]
VECTOR_ORDS = [None, 0, 1, -1, 2, -2, 3.5, np.inf, -np.inf]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.booleans(),
       st.integers(0, 8), st.booleans(), st.integers(0, 2**31))
def test_random_norms_against_numpy(ndim, m, n, matrix, which, keepdims, seed):
    a = np.random.default_rng(seed).standard_normal((m, n, 2)[:ndim]).astype(np.float32)
    if matrix and ndim >= 2:
        ord, axis = MATRIX_ORDS[which], (0, 1)
    else:
        ord, axis = VECTOR_ORDS[which], -1
    ours = L.norm(mx.array(a), ord=ord, axis=axis, keepdims=keepdims, stream=mx.cpu)
    want = np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims)
    assert ours.dtype == mx.float32 and ours.shape == want.shape
    np.testing.assert_allclose(host(ours), want, rtol=1e-4, atol=1e-5)
    flat = L.norm(mx.array(a), keepdims=keepdims)
    np.testing.assert_allclose(host(flat), np.linalg.norm(a.ravel()), rtol=1e-5)
    assert flat.shape == ((1,) * ndim if keepdims else ())
