"""Failures at run time (DESIGN §5): the op's message, on every read, on every stream."""
import numpy as np
import pytest

import streamlet.core as mx

from test_streams import in_thread

MSG = r"\[linalg\.inv\]"


def singular():
    return mx.array([[1.0, 2.0], [2.0, 4.0]])


@pytest.mark.usefixtures("on_cpu")
def test_failing_op_raises_only_at_eval():
    bad = mx.linalg.inv(singular())  # building it never fails
    derived = bad + 1
    assert bad.shape == (2, 2) and derived.dtype == mx.float32
    with pytest.raises(RuntimeError, match=MSG):
        mx.eval(derived)


READS = {
    "item": lambda a: mx.sum(a).item(),
    "item_direct": lambda a: a[0, 0].item(),
    "tolist": lambda a: a.tolist(),
    "np.array": lambda a: np.array(a),
    "np.asarray": lambda a: np.asarray(a),
    "repr": lambda a: repr(a),
    "eval": lambda a: mx.eval(a),
    "eval_tree": lambda a: mx.eval({"k": [a]}),
    "bool": lambda a: bool(a[0, 0]),
    "float": lambda a: float(a[0, 0]),
    "dlpack": lambda a: np.from_dlpack(a),
}


@pytest.mark.parametrize("read", list(READS))
def test_every_read_of_failed_and_derived_arrays_raises(read):
    s1, s2 = mx.new_stream(mx.cpu), mx.new_thread_unsafe_stream(mx.cpu)
    bad = mx.linalg.inv(singular(), stream=s1)
    with pytest.raises(RuntimeError, match=MSG):
        mx.eval(bad)
    on_s2 = mx.multiply(bad, 2, stream=s2)
    later = [bad, bad + 1, mx.matmul(bad, bad, stream=s1), on_s2, mx.exp(on_s2)]
    for arr in later:
        for _ in range(2):  # every read, not only the first
            with pytest.raises(RuntimeError, match=MSG):
                READS[read](arr)


def test_derived_built_before_the_failure_is_reported():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    bad = mx.linalg.inv(singular(), stream=s1)
    chain = mx.sum(mx.multiply(bad, 3, stream=s2), stream=s1)
    mx.async_eval(chain)
    for _ in range(3):
        with pytest.raises(RuntimeError, match=MSG):
            chain.item()
    with pytest.raises(RuntimeError, match=MSG):
        np.array(bad)


def test_failed_array_read_from_another_thread():
    u = mx.new_thread_unsafe_stream(mx.cpu)
    bad = mx.linalg.inv(singular(), stream=u)
    mx.async_eval(bad)
    with pytest.raises(RuntimeError, match=MSG):
        in_thread(lambda: (bad * 2).tolist())
    with pytest.raises(RuntimeError, match=MSG):
        bad.tolist()


def test_synchronize_reports_an_error_eval_did_not():
    s = mx.new_stream(mx.cpu)
    bad = mx.linalg.inv(singular(), stream=s)
    mx.async_eval(bad)
    with pytest.raises(RuntimeError, match=MSG):
        mx.synchronize(s)
    mx.synchronize(s)  # reported once; the stream carries on
    with pytest.raises(RuntimeError, match=MSG):
        bad.item() if bad.size == 1 else bad.tolist()


def test_synchronize_after_eval_reported_it_is_quiet():
    s = mx.new_stream(mx.cpu)
    bad = mx.linalg.inv(singular(), stream=s)
    with pytest.raises(RuntimeError, match=MSG):
        mx.eval(bad)
    mx.synchronize(s)


def test_synchronize_default_stream_reports_error():
    with mx.stream(mx.new_stream(mx.cpu)):
        bad = mx.linalg.inv(singular())
        mx.async_eval(bad)
        with pytest.raises(RuntimeError, match=MSG):
            mx.synchronize()


def test_unrelated_work_and_streams_unaffected():
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    good_before = mx.arange(4, stream=s1) * 2
    bad = mx.linalg.inv(singular(), stream=s1)
    good_same_stream = mx.ones((3,), stream=s1) + 1
    good_other = mx.ones((2,), stream=s2) * 5
    mx.async_eval(good_before, bad, good_same_stream, good_other)
    with pytest.raises(RuntimeError, match=MSG):
        mx.eval(good_before, bad, good_same_stream, good_other)
    assert good_before.tolist() == [0, 2, 4, 6]
    assert good_same_stream.tolist() == [2.0] * 3
    assert good_other.tolist() == [5.0, 5.0]
    mx.synchronize(s2)


@pytest.mark.parametrize("kind", ["new_stream", "thread_unsafe", "default"])
def test_stream_usable_after_error(kind):
    s = {"new_stream": lambda: mx.new_stream(mx.cpu),
         "thread_unsafe": lambda: mx.new_thread_unsafe_stream(mx.cpu),
         "default": lambda: mx.default_stream(mx.cpu)}[kind]()
    bad = mx.linalg.inv(singular(), stream=s)
    with pytest.raises(RuntimeError, match=MSG):
        mx.eval(bad)
    with pytest.raises(RuntimeError, match=MSG):
        np.array(bad)
    ok = mx.linalg.inv(mx.array([[2.0, 0.0], [0.0, 4.0]]), stream=s)
    np.testing.assert_allclose(np.array(ok), [[0.5, 0.0], [0.0, 0.25]])
    big = mx.sum(mx.ones((300, 300), stream=s), stream=s)
    mx.async_eval(big)
    mx.synchronize(s)
    assert big.item() == 90000.0


@pytest.mark.usefixtures("on_cpu")
def test_error_message_is_the_ops():
    bad = mx.linalg.inv(singular())
    with pytest.raises(RuntimeError) as info:
        mx.eval(bad)
    text = str(info.value)
    assert text.startswith("[linalg.inv]") and "singular" in text.lower()


def test_solve_singular_fails_at_run_time():
    x = mx.linalg.solve(singular(), mx.array([1.0, 2.0]), stream=mx.cpu)
    with pytest.raises(RuntimeError, match=r"\[linalg\.solve\]"):
        x.tolist()


def test_user_kernel_exception_is_runtime_error_with_message():
    from streamlet.core.ops import build as b

    def boom(xp, a):
        raise MemoryError("out of memory in test")
    prim = b.make("boom", boom)
    a = mx.ones((3,))
    out = b.node(prim, (a,), a.shape, a.dtype, b.NO_PARAMS, b.resolve(None))
    with pytest.raises(RuntimeError, match=r"\[boom\].*out of memory in test"):
        mx.eval(out + 1)
    with pytest.raises(RuntimeError, match="out of memory"):
        out.tolist()


def test_partial_batch_in_one_eval_keeps_good_outputs():
    s = mx.new_stream(mx.cpu)
    xs = [mx.linalg.inv(mx.array([[float(i), 0.0], [0.0, 1.0]]), stream=s) for i in range(4)]
    with pytest.raises(RuntimeError, match=MSG):
        mx.eval(xs)
    with pytest.raises(RuntimeError, match=MSG):
        xs[0].tolist()
    for i in (1, 2, 3):
        np.testing.assert_allclose(np.array(xs[i]), [[1.0 / i, 0.0], [0.0, 1.0]], rtol=1e-6)


# -- indices out of bounds: raised on every device (on a GPU, read from a device flag) -------
def _put(x, i):
    y = mx.array(x)
    y[i] = 5.0
    return y


OUT_OF_BOUNDS = {
    "getitem": lambda x, i: x[i],
    "getitem_axis_1": lambda x, i: x[:, i],
    "getitem_after_ellipsis": lambda x, i: x[..., i],
    "take": lambda x, i: mx.take(x, i, axis=0),
    "take_flat": lambda x, i: mx.take(x, i * 4),
    "take_along_axis": lambda x, i: mx.take_along_axis(x, i.reshape(-1, 1), axis=0),
    "at_add": lambda x, i: x.at[i].add(1.0),
    "setitem": _put,
    "put_along_axis": lambda x, i: mx.put_along_axis(x, i.reshape(-1, 1), mx.ones((1, 1)),
                                                     axis=0),
}
X = np.arange(16, dtype=np.float32).reshape(4, 4)


@pytest.mark.parametrize("op", list(OUT_OF_BOUNDS))
@pytest.mark.parametrize("index", [[0, 4], [1, -5], [7]], ids=str)
def test_index_out_of_bounds_fails_the_op_and_what_is_built_on_it(op, index):
    x = mx.array(X)
    bad = OUT_OF_BOUNDS[op](x, mx.array(index))
    derived = mx.sum(bad * 2)
    with pytest.raises(RuntimeError, match="(?i)out of bounds"):
        mx.eval(derived)
    for read in (lambda: bad.tolist(), lambda: derived.item(), lambda: np.array(bad)):
        with pytest.raises(RuntimeError, match="(?i)out of bounds"):
            read()
    mx.synchronize()  # reported by the eval already; the stream goes on
    assert (x + 1).tolist() == (X + 1).tolist()


@pytest.mark.parametrize("op", list(OUT_OF_BOUNDS))
@pytest.mark.parametrize("dtype", [mx.int32, mx.uint32, mx.int64], ids=str)
def test_indices_in_bounds_negative_ones_included_give_numpys_values(op, dtype):
    index = [3, 0, 1] if dtype == mx.uint32 else [3, -4, -1]
    got = OUT_OF_BOUNDS[op](mx.array(X), mx.array(index, dtype=dtype))
    mx.eval(got)  # no error: every index is in [-n, n)
    i = np.array(index)
    want = {"getitem": lambda: X[i], "getitem_axis_1": lambda: X[:, i],
            "getitem_after_ellipsis": lambda: X[..., i], "take": lambda: X[i],
            "take_flat": lambda: X.reshape(-1)[i * 4],
            "take_along_axis": lambda: np.take_along_axis(X, i[:, None], axis=0)}
    if op in want:
        np.testing.assert_array_equal(np.array(got), want[op]())


def test_an_index_out_of_bounds_reaches_consumers_on_other_streams_and_devices():
    s1, s2 = mx.new_stream(mx.default_device()), mx.new_stream(mx.default_device())
    bad = mx.take(mx.array(X), mx.array([9]), axis=0, stream=s1)
    other = mx.multiply(bad, 2, stream=s2)
    on_cpu = mx.add(bad, 1, stream=mx.cpu)
    for a in (other, on_cpu):
        with pytest.raises(RuntimeError, match="(?i)out of bounds"):
            mx.eval(a)


def test_an_index_out_of_bounds_after_async_eval_raises_at_the_read_or_synchronize():
    bad = mx.take(mx.array(X), mx.array([0, 9]), axis=0) + 1
    mx.async_eval(bad)
    with pytest.raises(RuntimeError, match="(?i)out of bounds"):
        bad.tolist()
    mx.synchronize()  # the read reported it
    s = mx.new_stream(mx.default_device())
    mx.async_eval(mx.take(mx.array(X), mx.array([9]), axis=1, stream=s))
    with pytest.raises(RuntimeError, match="(?i)out of bounds"):
        mx.synchronize(s)  # nothing read it: the stream's synchronize reports it, once
    mx.synchronize(s)
