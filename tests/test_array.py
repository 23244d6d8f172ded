"""The lazy array's Python surface: construction, properties, reads, repr, operators, indexing."""
import operator

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import streamlet.core as mx
from conftest import requires_gpu

CONSTRUCT = [1, -3, 2 ** 40, 1.5, True, 2 + 1j, [1, 2], [1, 2.5], [True, 2], [[1, 2], [3, 4]],
             [True, False], [1, 2 ** 40], [], [[]], [1 + 1j, 2], np.float64(1.0), np.int64(2),
             np.arange(6, dtype=np.float64).reshape(2, 3), np.ones(3, np.int16),
             np.ones(3, np.float16), np.zeros((2, 2), np.complex128), np.array(True),
             np.ones(2, ml_dtypes.bfloat16)]


@pytest.mark.parametrize("value", CONSTRUCT, ids=[repr(v)[:30] for v in CONSTRUCT])
def test_array_constructor_matches_mlx(mlx, value):
    ours, theirs = mx.array(value), mlx.array(value)
    assert repr(ours.dtype) == repr(theirs.dtype)
    assert ours.shape == tuple(theirs.shape)
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float16", "bfloat16", "float64",
                                   "complex64", "bool_"])
def test_array_constructor_with_dtype(mlx, dtype):
    ours = mx.array([0, 1, 2], dtype=getattr(mx, dtype))
    theirs = mlx.array([0, 1, 2], dtype=getattr(mlx, dtype))
    assert repr(ours.dtype) == repr(theirs.dtype) and ours.tolist() == theirs.tolist()


def test_array_from_array_and_copy_semantics():
    src = np.arange(4, dtype=np.float32)
    a = mx.array(src)
    src[0] = 100  # the array took a copy
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    b = mx.array(a + 1, dtype=mx.int32)
    assert b.dtype is mx.int32 and b.tolist() == [1, 2, 3, 4]
    assert mx.array([mx.array(1.0), mx.array(2.0)]).tolist() == [1.0, 2.0]


def test_array_constructor_rejects(mlx):
    for M in (mx, mlx):
        for bad in ("abc", [[1, 2], [3]], object(), ["a", 1]):
            with pytest.raises(ValueError):
                M.array(bad)
        with pytest.raises(TypeError):
            M.array(None)


def test_properties():
    a = mx.zeros((2, 3, 4), dtype=mx.int16)
    assert (a.shape, a.ndim, a.size, a.itemsize, a.nbytes) == ((2, 3, 4), 3, 24, 2, 48)
    assert a.dtype is mx.int16 and isinstance(a.shape, tuple)
    s = mx.array(3.0)
    assert (s.shape, s.ndim, s.size) == ((), 0, 1)
    assert (a + 1).shape == (2, 3, 4)  # known before eval


@pytest.mark.parametrize("dtype,value,kind", [
    ("bool_", True, bool), ("int32", 7, int), ("uint8", 255, int), ("int64", -2 ** 40, int),
    ("float32", 1.5, float), ("float16", 0.5, float), ("bfloat16", 2.0, float),
    ("float64", 0.1, float), ("complex64", 1 - 2j, complex)])
def test_item_and_tolist_types(dtype, value, kind):
    a = mx.array(value, dtype=getattr(mx, dtype))
    assert type(a.item()) is kind and a.item() == pytest.approx(value, rel=1e-2)
    lst = mx.array([value, value], dtype=getattr(mx, dtype)).tolist()
    assert all(type(v) is kind for v in lst)


def test_item_needs_one_element():
    with pytest.raises(ValueError):
        mx.array([1, 2]).item()
    assert mx.array([[5]]).item() == 5


def test_tolist_nested():
    assert mx.arange(6).reshape(2, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert mx.array(2).tolist() == 2


@pytest.mark.usefixtures("on_cpu")
def test_numpy_conversion():
    a = mx.arange(6, dtype=mx.int16).reshape(2, 3) * 2
    out = np.array(a)
    assert out.dtype == np.int16 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3) * 2)
    assert np.array(a, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="bfloat16"):  # MLX's buffer format: NumPy refuses it
        np.asarray(mx.array([1.5], dtype=mx.bfloat16))
    c = np.array(a, copy=True)
    c[0, 0] = 99
    assert a[0, 0].item() == 0
    assert np.from_dlpack(a).tolist() == out.tolist()


def test_buffer_protocol(on_cpu):
    """MLX's buffer on every CPython (3.10 and 3.11 through the `_buffer` extension):
    writable, the array's strides, 'q'/'Q' for 8-byte ints, and the memoryview keeps
    the array alive."""
    import weakref
    a = mx.arange(4, dtype=mx.int32) + 1
    mv = memoryview(a)
    assert mv.format in ("i", "<i", "=i") and mv.shape == (4,) and mv.tolist() == [1, 2, 3, 4]
    assert not mv.readonly and mv.obj is a
    t = memoryview(mx.arange(6).reshape(2, 3).T)
    assert (t.shape, t.strides, t.c_contiguous) == ((3, 2), (4, 12), False)
    assert memoryview(mx.zeros(2, mx.int64)).format == "q"
    assert memoryview(mx.zeros(2, mx.uint64)).format == "Q"
    ref = weakref.ref(a)
    del a
    assert ref() is not None
    del mv
    assert ref() is None


BUFFER_DTYPES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
                 "int64", "float16", "float32", "bfloat16", "complex64"]


@pytest.mark.parametrize("dtype", BUFFER_DTYPES)
def test_buffer_matches_mlx(mlx, on_cpu, dtype):
    """memoryview of every dtype, plain and transposed, as MLX's: format (bfloat16's is
    MLX's own "bfloat16"), shape, strides, itemsize, writability and the bytes."""
    values = np.random.default_rng(7).uniform(-50, 50, (3, 4))
    for f in (lambda x: x, lambda x: x.T):
        ours = memoryview(f(mx.array(values).astype(getattr(mx, dtype))))
        theirs = memoryview(f(mlx.array(values).astype(getattr(mlx, dtype))))
        assert ours.format.rstrip("\0") == theirs.format.rstrip("\0")
        assert (ours.shape, ours.strides, ours.itemsize, ours.readonly) == \
            (theirs.shape, theirs.strides, theirs.itemsize, theirs.readonly)
        assert ours.tobytes() == theirs.tobytes()


def test_buffer_writes_reach_the_array_and_errors_propagate(on_cpu):
    """A write through the buffer is a write to the array (as in MLX); a failed
    computation raises its RuntimeError from memoryview() instead of lending data."""
    a = mx.zeros((2, 2), mx.float32)
    np.asarray(memoryview(a))[1, 0] = 5.0
    assert a.tolist() == [[0.0, 0.0], [5.0, 0.0]]
    assert bytes(mx.array([1, 2], mx.uint8)) == b"\x01\x02"
    failed = mx.linalg.inv(mx.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="singular"):
        memoryview(failed)
    with pytest.raises(RuntimeError, match="singular"):
        bytes(failed + 1)


@requires_gpu
def test_numpy_of_a_gpu_array_is_a_read_only_copy_in_its_layout():
    """GPU memory is not the host's: np.asarray gives a copy, read-only so that a write
    meant for the array fails instead of going nowhere; np.array(a) is a writable copy."""
    a = mx.arange(6, dtype=mx.int32, stream=mx.gpu).reshape(2, 3)
    view = np.asarray(a)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = 5
    copy = np.array(a)
    copy[0, 0] = 5
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    t = np.asarray(mx.transpose(a, stream=mx.gpu) + 0)
    assert t.tolist() == [[0, 3], [1, 4], [2, 5]]


REPRS = [lambda m: m.array([1.5, 2, 3]), lambda m: m.array([[1, 2], [3, 4]]),
         lambda m: m.array([True, False]), lambda m: m.array(3.25), lambda m: m.arange(20),
         lambda m: m.array([1.5, 2], m.bfloat16), lambda m: m.array([1 + 2j, 3 - 1j]),
         lambda m: m.array([0.1, 1e-5, 12345678.0]), lambda m: m.array([], m.int32),
         lambda m: m.zeros((12, 12)), lambda m: m.ones((2, 1, 3), m.uint8),
         lambda m: m.array(-7, m.int64), lambda m: m.array(True),
         lambda m: m.array([float("nan"), float("inf"), -float("inf"), -0.0]),
         lambda m: m.array([1e20, 1e-20, 3.0]), lambda m: m.array([2 ** 62, -5], m.int64),
         lambda m: m.array(np.array([2 ** 64 - 1], np.uint64)),
         lambda m: m.array([1 / 3, 2 / 3], m.float16), lambda m: m.array([1 / 3], m.float64),
         lambda m: m.arange(24).reshape(2, 3, 4), lambda m: m.arange(1000).reshape(10, 100),
         lambda m: m.zeros((0, 2, 3), m.int8), lambda m: m.array([1e7, 1e8])]


@pytest.mark.parametrize("make", REPRS)
def test_repr_matches_mlx(mlx, make):
    assert repr(make(mx)) == repr(make(mlx))


def test_reprlib_shows_arrays_of_any_size():
    """reprlib (pytest's failure messages) looks arrays up by their type name, `array`."""
    import array as std_array
    import reprlib
    big = mx.arange(64).reshape(8, 8)
    text = reprlib.repr(big)  # shortened by reprlib, not refused
    assert text.startswith("array([[0, 1") and text.endswith("dtype=int32)")
    assert reprlib.repr(std_array.array("i", [1, 2])) == "array('i', [1, 2])"


def test_len_iter_bool():
    a = mx.arange(6).reshape(3, 2)
    assert len(a) == 3
    rows = list(a)
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    assert all(isinstance(r, mx.array) for r in rows)
    with pytest.raises(TypeError):
        len(mx.array(1))
    with pytest.raises(TypeError):
        iter(mx.array(1))
    assert bool(mx.array(2)) is True and bool(mx.array([0])) is False
    with pytest.raises(ValueError):
        bool(mx.array([1, 2]))
    assert int(mx.array(3.7)) == 3 and float(mx.array(2)) == 2.0
    assert [10, 20, 30][mx.array(1)] == 20


def test_astype():
    a = mx.array([1.7, -1.7, 0.0])
    assert a.astype(mx.int32).tolist() == [1, -1, 0]
    assert a.astype(mx.bool_).tolist() == [True, True, False]
    assert mx.astype(a, mx.float16).dtype is mx.float16


# ---- operators against NumPy ---------------------------------------------------------

ARITH = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
         operator.mod, operator.pow]
COMPARE = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]
BITWISE = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


def _close(got, want, dtype):
    got = np.array(got)
    assert got.dtype == np.dtype(dtype)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want.astype(got.dtype), rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


@pytest.mark.parametrize("op", ARITH + COMPARE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int8, np.uint16])
def test_binary_operators_vs_numpy(op, dtype, rng):
    x = rng.integers(1, 5, (3, 4)).astype(dtype)
    y = rng.integers(1, 4, (4,)).astype(dtype)

    def check(got, want):  # MLX divides integers into float32, NumPy into float64
        _close(got, want, np.float32 if want.dtype == np.float64 else want.dtype)
    check(op(mx.array(x), mx.array(y)), op(x, y))
    for s in (2, 3):  # reflected forms; a Python scalar takes the array's dtype
        check(op(mx.array(x), s), op(x, np.asarray(s, dtype)))
        check(op(s, mx.array(x)), op(np.asarray(s, dtype), x))


@pytest.mark.parametrize("op", BITWISE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64])
def test_bitwise_operators_vs_numpy(op, dtype, rng):
    x = rng.integers(0, 16, (5,)).astype(dtype)
    y = rng.integers(0, 4, (5,)).astype(dtype)
    _close(op(mx.array(x), mx.array(y)), op(x, y), dtype)
    _close(op(mx.array(x), 1), op(x, dtype(1)), dtype)


def test_bool_operators(mlx):
    a, b = [True, False, True], [True, True, False]
    for op in (operator.and_, operator.or_, operator.xor):
        got = op(mx.array(a), mx.array(b))
        assert got.dtype is mx.bool_ and got.tolist() == op(np.array(a), np.array(b)).tolist()
    mixed = mx.array(a) & mx.array([3, 1, 2])
    want = mlx.array(a) & mlx.array([3, 1, 2])
    assert repr(mixed.dtype) == repr(want.dtype) and mixed.tolist() == want.tolist()
    assert (~mx.array(a)).tolist() == [False, True, False]


def test_unary_operators(rng):
    x = rng.standard_normal((3, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.array(-mx.array(x)), -x)
    np.testing.assert_array_equal(np.array(abs(mx.array(x))), abs(x))
    np.testing.assert_array_equal(np.array(+mx.array(x)), x)
    assert (~mx.array([1, 2])).tolist() == [-2, -3]
    with pytest.raises(ValueError):
        ~mx.array([1.0])
    with pytest.raises(ValueError):
        -mx.array([True])


def test_matmul_operator_and_numpy_operand(mlx, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.array(x) @ mx.array(y)), x @ y, rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.array(x) + x), x + x)
    for M in (mx, mlx):  # `@` takes only arrays, as in MLX
        for other in (y, 2, [[1.0]] * 4):
            with pytest.raises(TypeError):
                M.array(x) @ other


def test_inplace_operators_rebind_the_handle(mlx):
    """`a += 1` updates the array every reference to `a` sees (id unchanged), as in MLX;
    arrays computed from `a` before keep its old value."""
    for M in (mx, mlx):
        a = M.array([1, 2])
        b, before, ident = a, a * 10, id(a)
        a += 1
        a *= 3
        a -= mx.array([1, 1]) if M is mx else M.array([1, 1])
        assert id(a) == ident and b.tolist() == [5, 8] and before.tolist() == [10, 20]
    params = {"w": mx.ones((2,)), "b": mx.zeros((2,))}
    for p in params.values():
        p -= 0.5
    assert params["w"].tolist() == [0.5, 0.5] and params["b"].tolist() == [-0.5, -0.5]


OPERATORS = {"addition": operator.add, "subtraction": operator.sub,
             "multiplication": operator.mul, "division": operator.truediv,
             "floor division": operator.floordiv, "modulus": operator.mod,
             "power": operator.pow, "bitwise and": operator.and_,
             "bitwise or": operator.or_, "bitwise xor": operator.xor,
             "left shift": operator.lshift, "right shift": operator.rshift,
             "less than": operator.lt, "less than or equal": operator.le,
             "greater than": operator.gt, "greater than or equal": operator.ge}
INPLACE = {"addition": operator.iadd, "subtraction": operator.isub,
           "multiplication": operator.imul, "division": operator.itruediv,
           "floor division": operator.ifloordiv, "modulus": operator.imod,
           "power": operator.ipow, "bitwise and": operator.iand, "bitwise or": operator.ior,
           "bitwise xor": operator.ixor, "left shift": operator.ilshift,
           "right shift": operator.irshift}
ALIENS = [lambda: "hello", lambda: [1, 2, 3], lambda: (1, 2, 3), lambda: object(), lambda: {},
          lambda: np.array(["a", "b", "c"]), lambda: np.array([1, 2, 3], dtype=object),
          lambda: None]


def _error(f):
    """The exception `f()` raises (its type, and its message for a ValueError), or the
    type of what it returns."""
    try:
        out = f()
    except Exception as exc:  # noqa: BLE001 - the error is what is compared
        return type(exc).__name__, str(exc) if isinstance(exc, ValueError) else ""
    return "returned", type(out).__name__


@pytest.mark.parametrize("alien", ALIENS, ids=lambda f: type(f()).__name__)
def test_operators_reject_other_types(mlx, alien):
    """An operand an array cannot meet raises MLX's ValueError naming the operation (a
    TypeError for None), reflected and in place alike; `==`/`!=` give False/True."""
    for name, op in OPERATORS.items():
        errors = [_error(lambda: op(M.array([1, 2, 3]), alien())) for M in (mx, mlx)]
        assert errors[0] == errors[1] and errors[0][0] != "returned", name
        reflected = [_error(lambda: op(alien(), M.array([1, 2, 3])))[0] for M in (mx, mlx)]
        assert reflected[0] == reflected[1], name
    for name, op in INPLACE.items():
        errors = [_error(lambda: op(M.array([1, 2, 3]), alien())) for M in (mx, mlx)]
        assert errors[0] == errors[1] and errors[0][0] != "returned", name
    if alien() is not None:
        for M in (mx, mlx):
            assert (M.array([1, 2, 3]) == alien()) is False
            assert (M.array([1, 2, 3]) != alien()) is True
    else:
        assert _error(lambda: mx.array([1]) == None)[0] == "TypeError"  # noqa: E711
        assert _error(lambda: mlx.array([1]) == None)[0] == "TypeError"  # noqa: E711


def test_inplace_operators_keep_the_handle(mlx):
    """Every in-place operator rebinds the handle (`id` kept, every reference sees the
    result) with MLX's result; `/=` on integers raises as MLX does."""
    cases = [(INPLACE[k], [1, 2, 3], 3) for k in INPLACE] + [
        (operator.itruediv, [2.0, 4.0], 2), (operator.iand, [True, False], False),
        (operator.ior, [False], True), (operator.ixor, [False], True),
        (operator.iadd, [1, 2], 1.5), (operator.imatmul, [[1.0, 2.0], [3.0, 4.0]], None)]
    for op, value, other in cases:
        got = []
        for M in (mx, mlx):
            a = M.array(value)
            b, ident = a, id(a)
            try:
                out = op(a, a if other is None else other)
            except ValueError as exc:
                got.append(str(exc))
                continue
            assert out is a and id(a) == ident and b is a
            got.append((repr(a.dtype), a.tolist()))
        assert got[0] == got[1], op
    for M in (mx, mlx):
        with pytest.raises(ValueError):
            a = M.array([1])
            a /= 1


MISSING = [lambda M: True & M.array([1, 2]), lambda M: 1 | M.array([1, 2]),
           lambda M: 3 ^ M.array([1, 2]), lambda M: 1 << M.array([1, 2]),
           lambda M: 8 >> M.array([1, 2]), lambda M: divmod(M.array([5, 7]), 2),
           lambda M: divmod(7, M.array([5, 2])), lambda M: [[1.0]] @ M.array([[1.0]]),
           lambda M: M.array([1]).expand_dims(0), lambda M: M.array([1.5]).__index__(),
           lambda M: [1, 2][M.array([1])], lambda M: [1, 2][M.array(True)]]


@pytest.mark.parametrize("call", MISSING)
def test_operators_mlx_does_not_have(mlx, call):
    """What MLX's array lacks raises here too, so code tested on streamlet runs on MLX."""
    assert _error(lambda: call(mx))[0] == _error(lambda: call(mlx))[0] != "returned"


NUMPY_LEFT = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
              operator.pow, operator.eq, operator.ne, operator.lt, operator.ge]


@pytest.mark.parametrize("op", NUMPY_LEFT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("left", [np.array([1.5, 2.0, 3.0]), np.array([1, 2, 3], np.int32),
                                  np.array(2.0), np.float64(2.0), np.float32(2.0),
                                  np.int64(2)], ids=repr)
def test_numpy_on_the_left_is_numpys_operation(mlx, op, left):
    """`numpy_value OP array` is NumPy's operation on the array's values, with NumPy's
    result type and dtype, as MLX (which sets no `__array_priority__`)."""
    def outcome(M):
        r = op(left, M.array([1, 2, 4]))
        return type(r).__name__, r.dtype, np.asarray(r).tolist()
    assert outcome(mx) == outcome(mlx)


def test_numpy_reductions_of_comparisons(mlx):
    for M in (mx, mlx):
        a = M.array([1.0, 2.0, 3.0])
        assert bool(np.all(np.array([1.0, 2.0, 3.0]) == a))
        assert not np.all(np.array([1.0, 2.0, 4.0]) == a)
        inplace = np.ones(3)
        inplace += a
        assert inplace.tolist() == [2.0, 3.0, 4.0]
        assert isinstance(np.ones((2, 3)) @ M.ones((3,)), np.ndarray)


# ---- __getitem__ against NumPy ---------------------------------------------------------

BASE = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.int32)
INDICES = [0, -1, 1, (1, 2), (-1, -2, 3), slice(None), slice(1, None), slice(None, None, -1),
           (slice(None), 2), (Ellipsis, 1), (1, Ellipsis, slice(0, 3, 2)), None, (None, 1),
           (slice(None), None, 0), (Ellipsis, None), (0, 0, 0, 0), (slice(5, 10),),
           (slice(-3, -1), slice(None, None, 2)), (1, slice(None, None, -2), None, Ellipsis),
           np.array([1, 0, 1]), (slice(None), np.array([2, 0])),
           (np.array([0, 1]), np.array([1, 2])),
           (np.array([[0], [1]]), slice(None), np.array([1, 3])),
           (Ellipsis, np.array([4, 0, -1])), (0, np.array([2, 1]), slice(None), 3),
           (np.array([1, 0]), slice(None), np.array([1, 3])), [1, 0]]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i)[:40] for i in INDICES])
def test_getitem_vs_numpy(index):
    a = mx.array(BASE)
    mx_index = tuple(mx.array(i) if isinstance(i, np.ndarray) else i for i in index) \
        if isinstance(index, tuple) else (mx.array(index) if isinstance(index, np.ndarray)
                                          else index)
    want = BASE[index]
    got = a[mx_index]
    assert got.shape == want.shape  # known when built
    np.testing.assert_array_equal(np.array(got), want)
    if isinstance(index, (np.ndarray, tuple)):  # NumPy arrays work as indices too
        np.testing.assert_array_equal(np.array(a[index]), want)


_BASIC = st.one_of(st.integers(-7, 7), st.none(), st.just(Ellipsis),
                   st.builds(slice, st.none() | st.integers(-8, 8),
                             st.none() | st.integers(-8, 8), st.none() | st.integers(-3, 3)))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=4), st.lists(_BASIC, max_size=5))
def test_basic_indexes_have_numpys_shape_values_and_refusals(shape, index):
    """Ints, slices, None and Ellipsis in any mix, fitting or not: the shape known when the
    op is built, the values and the refusals are NumPy's."""
    base = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    index = tuple(index)
    try:
        want = base[index]
    except (IndexError, ValueError):
        with pytest.raises((IndexError, ValueError)):
            mx.array(base)[index]
        return
    got = mx.array(base)[index]
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.array(got), want)


def test_getitem_vs_mlx(mlx):
    for index in INDICES:
        conv = (lambda m: tuple(m.array(i) if isinstance(i, np.ndarray) else i for i in index)
                if isinstance(index, tuple) else
                (m.array(index) if isinstance(index, np.ndarray) else index))
        got, want = mx.array(BASE)[conv(mx)], mlx.array(BASE)[conv(mlx)]
        assert got.shape == tuple(want.shape) and got.tolist() == want.tolist()


def test_getitem_errors():
    a = mx.arange(5)
    with pytest.raises(IndexError):
        a[5]
    with pytest.raises(IndexError):
        a[1, 2]
    with pytest.raises(IndexError):
        a[..., ...]
    with pytest.raises((TypeError, ValueError)):
        a[1.0]
    with pytest.raises((TypeError, ValueError)):
        a["x"]
    bad = mx.take(a, mx.array([7]))  # checked when it runs, on any device
    with pytest.raises(RuntimeError, match="out of bounds"):
        bad.tolist()


def test_getitem_on_stream_and_lazy():
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        x = (mx.arange(10) * 2)[2:5]
    assert x._node.stream.stream == s and x.tolist() == [4, 6, 8]


# ---- .at[] ----------------------------------------------------------------------------

def _at_outcome(make, M):
    try:
        x = make(M)
    except Exception as exc:  # noqa: BLE001 - the error's type is what is compared
        return type(exc).__name__
    return repr(x.dtype), np.asarray(x).tolist()


AT = [lambda m: m.array(1).at.add(1), lambda m: m.array(1).at[None].add(1),
      lambda m: m.array([0, 1, 2]).at[1].add(2),
      lambda m: m.array([4, 3, 2]).at[m.array([0, 0, 0, 0])].add(1),
      lambda m: m.zeros((4, 4)).at[0].add(m.arange(4)),
      lambda m: m.zeros((4, 4)).at[m.array([0, 2, 2]), m.array([3, 3, 1])].add(m.ones(3)),
      lambda m: m.array([[1.0, 2.0]]).at[0:1].add(m.array([1.0, 2.0])[None, None, None]),
      lambda m: m.array([1, 2]).at[0].add(value=3),
      lambda m: m.array([1, 2]).at[0].add("x"), lambda m: m.array([1, 2]).at[0].add([1]),
      lambda m: m.array([1, 2]).at[0].subtract((1,)), lambda m: m.array([1, 2]).at[0].add(None),
      lambda m: m.array([1, 2]).at[0].add(np.array(5)),
      lambda m: m.array([1, 2]).at[m.array([0.0])].add(1),
      lambda m: m.array([1, 2]).at[:].multiply(3),
      lambda m: m.array([1, 2]).at[...].maximum(m.array([5, 0])),
      lambda m: m.array([1, 2]).at[[0, 0]].add(1), lambda m: m.array([1, 2]).at[0].divide(2),
      lambda m: m.array([1.0, 2.0]).at[m.array([1, 1])].divide(2.0),
      lambda m: m.array([1, 2]).at[0].subtract(2.5),
      lambda m: m.array([1, 2]).at[0].add(m.array([1, 2]))]
for _mode in ("add", "subtract", "multiply", "divide", "maximum", "minimum"):
    AT += [lambda m, o=_mode: getattr(m.arange(20.0).reshape(5, 2, 2).at[1:3, :, 0], o)(
               m.arange(1.0, 5.0).reshape(2, 2)),
           lambda m, o=_mode: getattr(m.arange(20.0).reshape(5, 2, 2).at[m.array([0, 4]), :, 0],
                                      o)(m.arange(1.0, 5.0).reshape(2, 2))]


@pytest.mark.parametrize("make", AT)
def test_at_as_mlx(mlx, make):
    assert _at_outcome(make, mx) == _at_outcome(make, mlx)


def test_at_is_one_indexer_object(mlx):
    """As MLX's ArrayAt: `a.at[i]` is `a.at` with its indices set; its methods take the
    value only."""
    for M in (mx, mlx):
        at = M.array([1, 2, 3]).at
        assert type(at[0]) is type(at) and type(at).__name__ == "ArrayAt"
        assert at[2].add(5).tolist() == [1, 2, 8]
        with pytest.raises(TypeError):
            at[0].add(1, stream=M.cpu)
        with pytest.raises(ValueError, match="Must give indices to array.at"):
            M.array([1, 2, 3]).at.maximum(1)
        with pytest.raises(ValueError, match="Invalid type list received"):
            M.array([1, 2, 3]).at[0].minimum([1])


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int8", "int32", "int64", "bool_"])
def test_nan_and_inf_set_into_integer_arrays_as_mlx(mlx, dtype):
    """A float NaN or infinity set into an integer array takes C's conversion, as MLX."""
    got = []
    for M in (mx, mlx):
        x = M.ones((4,), getattr(M, dtype))
        x[0], x[1], x[2] = float("nan"), float("inf"), -float("inf")
        got.append(x.tolist())
    assert got[0] == got[1]


def test_numpy_scalar_operands(mlx):
    """A NumPy scalar keeps a float array's dtype, as in MLX; with an integer array a
    NumPy float promotes (MLX casts it to the integer type: 0.5 is 0 below) and a NumPy
    integer the dtype cannot hold raises, as a Python int does in both libraries."""
    h = mx.array([1.0, 2.0], mx.float16) * np.float32(0.5)
    assert h.dtype == mx.float16 and h.tolist() == [0.5, 1.0]
    assert (mlx.array([1.0, 2.0], mlx.float16) * np.float32(0.5)).dtype == mlx.float16
    i = mx.array([1, 2], mx.int8) * np.float32(0.5)
    assert i.dtype == mx.float32 and i.tolist() == [0.5, 1.0]
    assert (mlx.array([1, 2], mlx.int8) * np.float32(0.5)).tolist() == [0, 0]
    with pytest.raises(ValueError, match="200 to int8"):
        mx.array([1, 2], mx.int8) + np.uint8(200)


def test_numpy_array_operands_promote(mlx):
    """A NumPy array operand is the array mx.array makes of it, promoted with the other
    (MLX casts it to the other's dtype: the products below are 0 there)."""
    i = mx.array([1, 2], mx.int8) * np.array([0.5, 0.5], np.float32)
    assert i.dtype == mx.float32 and i.tolist() == [0.5, 1.0]
    assert (mlx.array([1, 2], mlx.int8) * np.array([0.5, 0.5], np.float32)).tolist() == [0, 0]
    assert (mx.array([1, 2, 3], mx.int32) + np.arange(3)).dtype == mx.int64
    assert (mx.array([1.0], mx.float16) + np.array([1.5])).dtype == mx.float32
