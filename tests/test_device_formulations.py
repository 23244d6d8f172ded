"""Ops whose host kernel reads index data (dynamic starts, segment bounds) have a device
formulation that keeps that data on the device (issue 13: no host round trip while a GPU
stream runs).  Here NumPy stands in for CuPy, so CI checks it against the host path."""
import numpy as np
from hypothesis import given, settings, strategies as st

from streamlet.core.ops import indexing, products, updates


class Device:
    """NumPy under another name: the kernels take their device branch."""

    def __getattr__(self, name):
        return getattr(np, name)


XP = Device()


@st.composite
def windows(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    axes = tuple(draw(st.permutations(range(len(shape))))[:draw(st.integers(1, len(shape)))])
    sizes = tuple(draw(st.integers(0, n)) if ax in axes else n for ax, n in enumerate(shape))
    # starts outside the array too: both paths clamp them so the window fits
    dtype = draw(st.sampled_from([np.int32, np.int64, np.uint32]))
    low = 0 if dtype == np.uint32 else -3
    starts = np.array([draw(st.integers(low, 9)) for _ in axes], dtype)
    return shape, axes, sizes, starts


@settings(max_examples=60, deadline=None)
@given(windows(), st.integers(0, 2**31))
def test_dynamic_slice_on_the_device_equals_the_host(case, seed):
    shape, axes, sizes, starts = case
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    want = indexing._dynamic_slice(np, a, starts, axes, sizes)
    got = indexing._dynamic_slice(XP, a, starts, axes, sizes)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(windows(), st.integers(0, 2**31))
def test_slice_update_on_the_device_equals_the_host(case, seed):
    shape, axes, sizes, starts = case
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    update = rng.standard_normal(sizes).astype(np.float32)
    want = updates._slice_update(np, a, update, starts, axes)
    got = updates._slice_update(XP, a, update, starts, axes)
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, a)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 9), st.integers(1, 5), st.integers(0, 2**31),
       st.sampled_from([(3,), (2, 2)]))
def test_segmented_mm_on_the_device_equals_the_host(m, k, n, seed, lead):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((k, n)).astype(np.float32)
    bounds = np.sort(rng.integers(0, k + 1, lead + (2,)), axis=-1).astype(np.uint32)
    want = products._segmented_mm(np, x, y, bounds, np.float32)
    got = products._segmented_mm(XP, x, y, bounds, np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@st.composite
def multiply_updates(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    n = draw(st.integers(0, 12))
    rows = np.array([draw(st.integers(0, shape[0] - 1)) for _ in range(n)], np.int64)
    kind = draw(st.sampled_from(["rows", "rows_then_slice", "two_arrays"]))
    if kind == "rows" or len(shape) == 1:
        idx = (rows,)
    elif kind == "rows_then_slice":
        idx = (rows, slice(None, None, draw(st.sampled_from([1, 2]))))
    else:
        cols = np.array([draw(st.integers(0, shape[1] - 1)) for _ in range(n)], np.int64)
        idx = (rows, cols)
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int8, np.int32, np.bool_,
                                  np.complex64]))
    return shape, idx, dtype, draw(st.booleans())


@settings(max_examples=80, deadline=None)
@given(multiply_updates(), st.integers(0, 2**31))
def test_multiply_at_on_the_device_equals_numpy(case, seed):
    """Repeated indices multiply in NumPy's order (float products round in that order;
    int8 wraps), whatever the index and a value broadcast or not."""
    shape, idx, dtype, scalar = case
    rng = np.random.default_rng(seed)

    def draw(s):
        x = rng.standard_normal(s) * 3
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(s)
        return x.astype(dtype) if np.dtype(dtype) != np.bool_ else x > 0
    a = draw(shape)
    value = draw(()) if scalar else draw(a[idx].shape)
    want = a.copy()
    with np.errstate(all="ignore"):
        np.multiply.at(want, idx, value)
        got = updates._multiply_at(XP, a.copy(), idx, value)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
