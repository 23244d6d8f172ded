"""What `mx.array`, `mx.asarray` and `mx.from_dlpack` make of Python values, buffers and
NumPy arrays, and what NumPy gets back from an array: differential against MLX 0.32.4."""
import array as pyarray
import gc
import weakref

import hypothesis.strategies as st
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import streamlet.core as mx


def _outcome(make, M, strides=False):
    """(dtype, shape, values[, strides of its NumPy view]) or (exception type, message)."""
    try:
        x = make(M)
    except Exception as exc:  # noqa: BLE001 - the error is what is compared
        return type(exc).__name__, str(exc)
    got = repr(x.dtype), tuple(x.shape), x.tolist()
    if strides and x.dtype != M.bfloat16 and x.size:
        got += (np.asarray(x).strides,)
    return got


def _same(make, mlx, strides=False):
    assert _outcome(make, mx, strides) == _outcome(make, mlx, strides)


LISTS = [
    lambda m: m.array([]), lambda m: m.array([[], [], []]), lambda m: m.array([[[], []]] * 3),
    lambda m: m.array([True, False, 3]), lambda m: m.array([True, False, 3, 4.0]),
    lambda m: m.array([[True, False], [1, 3], [2, 4.0]]), lambda m: m.array([1 + 0j, 2j, True]),
    lambda m: m.array([[1.0, 2.0], [0.0, 3.9]], m.bool_),
    lambda m: m.array([[1.0, 2.5], [0.0, -3.9]], m.int32),
    lambda m: m.array([0, 4294967295], m.uint32), lambda m: m.array([2 ** 40, 1]),
    lambda m: m.array([[2 ** 31]]), lambda m: m.array((-(2 ** 31), 2 ** 31 - 1)),
    lambda m: m.array([0.1, 1 / 3], m.float16), lambda m: m.array([0.1], m.float64),
    lambda m: m.array([1j, 2], m.float32), lambda m: m.array([(1, 2), [3, 4]]),
    lambda m: m.array(((1, 2), (3, 4))), lambda m: m.array([np.float64(1.5), 2]),
    # errors, with MLX's messages
    lambda m: m.array([[[], []], [[]], [[], []]]),
    lambda m: m.array([[[], []], [[1.0, 2.0], []], [[], []]]),
    lambda m: m.array([[0, 1], [[0, 1], 1]]), lambda m: m.array([[0, 1], ["hello", 1]]),
    lambda m: m.array(["a"]), lambda m: m.array("a"), lambda m: m.array([None]),
    lambda m: m.array([1, [2]]), lambda m: m.array([[1], 2]), lambda m: m.array([[], 1]),
    lambda m: m.array([[1, 2], (3, 4)]), lambda m: m.array([np.float32(1)]),
    lambda m: m.array([np.int64(3)]), lambda m: m.array([np.ones(2)]),
    lambda m: m.array(range(3)), lambda m: m.array({}), lambda m: m.array(object()),
]


@pytest.mark.parametrize("make", LISTS)
def test_lists_and_scalars_as_mlx(mlx, make):
    _same(make, mlx)


DTYPES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "float32", "bfloat16", "complex64"]


@pytest.mark.parametrize("x_t", DTYPES)
@pytest.mark.parametrize("y_t", DTYPES)
def test_lists_of_arrays_promote_as_stack(mlx, x_t, y_t):
    """A list holding arrays is their stack (uint8 with int8 is int16), with Python
    scalars and lists beside them made as `array` makes them."""
    def pair(m):
        return m.array([m.array([1.0], getattr(m, x_t)), m.array([2.0], getattr(m, y_t))])

    def mixed(m):
        x, y = m.array([True], getattr(m, x_t)), m.array([False], getattr(m, y_t))
        return m.array([[x, [2.0]], [[3], y]])
    _same(pair, mlx)
    _same(mixed, mlx)


MIXED = [lambda m: m.array([m.array(1, m.float16), 1]),
         lambda m: m.array([m.array(1, m.float16), 1.5]),
         lambda m: m.array([m.array(1, m.int8), 300]),
         lambda m: m.array([m.array([1], m.uint8), [True]]),
         lambda m: m.array([m.array(1), 2 ** 40]),
         lambda m: m.array([m.array([1], m.int8), [2]], m.float16),
         lambda m: m.array([m.array(1, m.int8), 1.5], m.int32),
         pytest.param(lambda m: m.array([m.array([1], m.float32), m.array([2], m.float64)]),
                      id="float64_joins"),
         lambda m: m.array([[1.5], [m.array(1, m.int8)]]),
         lambda m: m.array([m.array([1.0]), 1.0]), lambda m: m.array([1.0, m.array([1.0])]),
         lambda m: m.array([m.array([1, 2]), [3]])]


@pytest.mark.parametrize("make", MIXED)
def test_lists_mixing_arrays_and_scalars(mlx, make):
    _same(make, mlx)


def test_list_of_arrays_stays_in_the_graph():
    """`mx.array([x, ...])` is a stack of `x`, so gradients reach `x` (as in MLX)."""
    x = mx.array([1.0])
    grad = mx.grad(lambda x: (2 * mx.array([x, mx.array([2.0])])).sum())(x)
    assert grad.tolist() == [2.0]


_scalar = st.one_of(st.booleans(), st.integers(-2 ** 40, 2 ** 40),
                    st.floats(allow_nan=False, width=32), st.complex_numbers(max_magnitude=1e6,
                                                                             allow_nan=False))


@st.composite
def _nested(draw):
    shape = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    kinds = draw(st.sampled_from([st.booleans(), st.integers(-2 ** 40, 2 ** 40),
                                  st.integers(-100, 100), _scalar]))

    def build(dims):
        if len(dims) == 1:
            return [draw(kinds) for _ in range(dims[0])]
        return [build(dims[1:]) for _ in range(dims[0])]
    return build(shape)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_nested(),
       dtype=st.sampled_from([None, "float32", "int64", "float16", "bool_", "complex64"]))
def test_random_nested_lists_as_mlx(mlx, value, dtype):
    make = (lambda m: m.array(value) if dtype is None else
            m.array(value, getattr(m, dtype)))
    ours, theirs = _outcome(make, mx), _outcome(make, mlx)
    if theirs[0] == "RuntimeError":  # MLX's std::bad_cast for ints it cannot narrow
        assert ours[0] == "OverflowError"
    else:
        assert ours == theirs


BUFFERS = [lambda m: m.array(b"Hello"), lambda m: m.array(bytearray([1, 2, 3])),
           lambda m: m.array(b""), lambda m: m.array(b"abcd", m.float32),
           lambda m: m.array(memoryview(np.arange(3, dtype=np.int16))),
           lambda m: m.array(memoryview(np.arange(3.0))),
           lambda m: m.array(memoryview(np.ones((2, 2), np.int8))),
           lambda m: m.array(pyarray.array("f", [1, 2])),
           lambda m: m.array(np.float64(1.5)), lambda m: m.array(np.int64(2 ** 40)),
           lambda m: m.array(np.bool_(True)), lambda m: m.array(np.float16(2)),
           lambda m: m.array(np.arange(12, dtype=np.float32).reshape(3, 4).T),
           lambda m: m.array(np.arange(20, dtype=np.int32)[2:10:2]),
           lambda m: m.array(np.broadcast_to(np.array([7], np.int32), (3,))),
           lambda m: m.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4).T),
           lambda m: m.array(np.arange(6.0).reshape(2, 3).T, m.int32),
           lambda m: m.array(np.arange(5.0)[::-1]), lambda m: m.from_dlpack(np.arange(5)[::-1]),
           lambda m: m.array(np.array([1 + 2j], np.complex128)),
           lambda m: m.array(np.ones(2, ml_dtypes.bfloat16)),
           lambda m: m.array(type("A", (), {"__mlx_array__": lambda s: m.array([1.0, 2])})()),
           lambda m: m.array(type("B", (), {"__array__": lambda s, *a, **k: np.ones(2)})())]


@pytest.mark.parametrize("make", BUFFERS)
def test_buffers_and_dlpack_as_mlx(mlx, make):
    """Values, dtypes and strides (MLX copies the memory the strides span)."""
    _same(make, mlx, strides=True)


def test_dimensions_beyond_32_bits_raise_overflow(mlx):
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), (2 ** 31,), (0,))
    for M in (mx, mlx):
        with pytest.raises(OverflowError) as err:
            M.array(big)
        assert str(err.value) == ("Shape dimension 2147483648 is outside the supported range "
                                  "[-2147483648, 2147483647]. MLX currently uses 32-bit "
                                  "integers for shape dimensions.")


@pytest.mark.parametrize("convert", [
    lambda M, a: M.array(a), lambda M, a: M.asarray(a), lambda M, a: M.from_dlpack(a),
    lambda M, a: M.asarray(a, copy=True), lambda M, a: M.from_dlpack(a, copy=True),
    lambda M, a: M.array(a.T), lambda M, a: M.asarray(a[::2])])
def test_later_changes_to_the_source_never_show(mlx, convert):
    """A CPU source is copied (MLX's CPU build copies too): mutating it later changes
    neither the array nor an array computed from it before."""
    for M in (mx, mlx):
        src = np.arange(8, dtype=np.float32)
        x = convert(M, src)
        before = np.array(x).tolist()
        y = x + 1
        src[:] = -1
        assert np.array(x).tolist() == before
        assert np.array(y).tolist() == [v + 1 for v in before]


@pytest.mark.parametrize("call", [
    lambda M: M.asarray(M.array([1, 2]), copy=False),
    lambda M: M.asarray(M.array([1, 2]), dtype=M.float32, copy=False),
    lambda M: M.asarray([1, 2], copy=False), lambda M: M.asarray(1.5, copy=False),
    lambda M: M.asarray(np.arange(3), copy=False),
    lambda M: M.asarray(np.arange(3.0), dtype=M.float32, copy=False),
    lambda M: M.asarray(np.arange(3), dtype=M.float32, copy=False),
    lambda M: M.from_dlpack(np.arange(3), copy=False),
    lambda M: M.from_dlpack(np.arange(3.0), copy=False)])
def test_copy_false_raises_as_mlx(mlx, call):
    errors = []
    for M in (mx, mlx):
        with pytest.raises(ValueError) as err:
            call(M)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_asarray_as_mlx(mlx):
    for M in (mx, mlx):
        x = M.array([1, 2, 3])
        y = M.asarray(x, copy=True)
        z = M.asarray(x, dtype=M.float32)
        assert y.tolist() == [1, 2, 3] and repr(z.dtype) == repr(M.float32)
        assert M.asarray(((1, 2), (3, 4))).tolist() == [[1, 2], [3, 4]]
        assert M.asarray(3.14).item() == pytest.approx(3.140000104904175, abs=0)
        assert repr(M.asarray(42, dtype=M.float16).dtype) == repr(M.float16)


def test_array_of_an_array_is_a_copy(mlx, on_cpu):
    """`mx.array(x)` copies (lazily): writing to x's buffer afterwards leaves it alone,
    while `asarray(x)` shares x's buffer; both as in MLX."""
    for M in (mx, mlx):
        x = M.arange(3)
        copied, shared = M.array(x), M.asarray(x)
        M.eval(copied, shared)
        np.asarray(x)[0] = 7
        assert copied.tolist() == [0, 1, 2] and shared.tolist() == [7, 1, 2]


# ---- what NumPy gets -------------------------------------------------------------------

def test_numpy_views_are_the_arrays_buffer(mlx, on_cpu):
    """`np.array(a, copy=False)` and `np.asarray(a)` are writable views of the array (a
    write shows in it and in the views made of it, as MLX), `np.array(a)` a copy."""
    for M in (mx, mlx):
        a = M.ones((2, 2))
        b = M.reshape(a, (4,))
        view = np.array(a, copy=False)
        assert view.flags.writeable and not view.flags.owndata
        view[0, 0] = 5
        assert a.tolist() == [[5, 1], [1, 1]] and b.tolist() == [5, 1, 1, 1]
        copy = np.array(a)
        assert copy.flags.owndata
        copy[0, 0] = 9
        assert a[0, 0].item() == 5
        assert np.asarray(M.broadcast_to(a[0], (3, 2))).strides == (0, 4)


def test_numpy_view_keeps_the_array_alive(mlx):
    for M in (mx, mlx):
        a = M.arange(3)
        ref = weakref.ref(a)
        view = np.array(a, copy=False)
        del a
        gc.collect()
        assert ref() is not None and view.tolist() == [0, 1, 2]
        del view
        gc.collect()
        assert ref() is None


def test_numpy_conversion_with_dtype_and_copy():
    a = mx.arange(3)
    assert np.array(a, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError):
        a.__array__(np.float64, copy=False)
    bf16 = mx.array([1.5], mx.bfloat16)
    assert bf16.__array__().dtype == ml_dtypes.bfloat16  # ours; MLX's raises TypeError
    with pytest.raises(ValueError, match="bfloat16"):  # NumPy reads the buffer, as in MLX
        np.asarray(bf16)


FORMATS = [(lambda m: m.arange(3)[0], ".2f"), (lambda m: m.array(0.35487), ".1f"),
           (lambda m: m.array(3), ">10"), (lambda m: m.array(3), "d"),
           (lambda m: m.array(3), ""), (lambda m: m.array(True), ".2f"),
           (lambda m: m.array(1 + 2j), ".2f"), (lambda m: m.array(1.25, m.float16), ".3f"),
           (lambda m: m.array(1.25, m.bfloat16), ".3f"), (lambda m: m.arange(3), ""),
           (lambda m: m.arange(3), ".2f")]


@pytest.mark.parametrize("make,spec", FORMATS)
def test_format_as_mlx(mlx, make, spec):
    def outcome(M):
        try:
            return format(make(M), spec)
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
    assert outcome(mx) == outcome(mlx)


INT_EDGES = [2 ** 31 - 1, 2 ** 31, -2 ** 31 - 1, 300, -1, 2 ** 63 - 1, 2 ** 63, -2 ** 63,
             -2 ** 63 - 1, 2 ** 64]
INT_TARGETS = ["bool_", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
               "uint64", "float32", "float16", "complex64", None]


@pytest.mark.parametrize("form", ["scalar", "list"])
@pytest.mark.parametrize("value", INT_EDGES, ids=str)
def test_python_ints_at_the_edges_of_their_dtype(mlx, value, form):
    """Where MLX refuses a Python int (beyond int64; in a list for a narrow type, beyond
    int32), streamlet raises OverflowError too; where MLX casts as C does and the value
    changes (300 as int8 is 44 there), streamlet raises instead of changing it; otherwise
    both give the same array."""
    for name in INT_TARGETS:
        def make(m):
            args = [getattr(m, name)] if name else []
            return m.array(value if form == "scalar" else [value], *args)
        ours, theirs = _outcome(make, mx), _outcome(make, mlx)
        if ours == theirs:
            continue
        assert ours[0] == "OverflowError", (name, ours, theirs)
        if theirs[0] != "RuntimeError":  # MLX gave a value: one that is not `value`
            got = theirs[2][0] if form == "list" else theirs[2]
            assert got != value, (name, theirs)
