"""Views of arrays already computed on the host (transpose, reshape of a contiguous
buffer, expand_dims, squeeze, broadcast_to) are taken when built on a CPU stream: no node
to evaluate.  Anything else stays a node: an input not computed yet, a transform's
tracer, a stream this thread may not evaluate on, a GPU stream."""
import threading

import numpy as np
import pytest

import streamlet.core as mx

VIEWS = {
    "T": lambda a: a.T,
    "transpose": lambda a: mx.transpose(a, (1, 0, 2)),
    "swapaxes": lambda a: mx.swapaxes(a, -1, -2),
    "reshape": lambda a: mx.reshape(a, (6, 4)),
    "expand_dims": lambda a: mx.expand_dims(a, (0, 2)),
    "squeeze": lambda a: mx.squeeze(mx.expand_dims(a, 1), 1),
    "broadcast_to": lambda a: mx.broadcast_to(a, (5, 2, 3, 4)),
}


def _computed(a):
    return a._node.prim is None and a._node.data is not None


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_view_of_a_computed_array_is_computed_when_built(name, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    a = mx.array(x)
    with mx.stream(mx.cpu):
        v = VIEWS[name](a)
        assert _computed(v)
        lazy = VIEWS[name](a + 0)  # its input not computed yet: a node
        assert lazy._node.prim is not None
        want = VIEWS[name](mx.array(x) + 0)
        np.testing.assert_array_equal(np.array(v), np.array(want))
        np.testing.assert_array_equal(np.array(lazy), np.array(want))


def test_views_of_computed_results_chain_without_nodes(rng):
    a = mx.array(rng.standard_normal((4, 6)).astype(np.float32))
    with mx.stream(mx.cpu):
        b = a * 2
        mx.eval(b)
        w = mx.expand_dims(mx.reshape(b, (3, 8)).T, 0)
        assert _computed(w)
        np.testing.assert_array_equal(np.array(w)[0], (np.array(a) * 2).reshape(3, 8).T)


def test_a_reshape_that_would_copy_stays_a_node(rng):
    a = mx.array(rng.standard_normal((4, 6)).astype(np.float32))
    with mx.stream(mx.cpu):
        t = a.T  # a strided view: NumPy's reshape of it copies
        r = mx.reshape(t, (24,))
        assert r._node.prim is not None
        np.testing.assert_array_equal(np.array(r), np.array(a).T.reshape(24))


def test_tracers_of_a_transform_stay_nodes(rng):
    x = mx.array(rng.standard_normal((3, 4)).astype(np.float32))
    w = mx.array(rng.standard_normal((4, 4)).astype(np.float32))

    def f(x):
        mx.eval(x)  # evaluated inside the transform: still a tracer, its views nodes
        return mx.sum((x.T @ x) * w.T)
    g = mx.grad(f)(x)
    xn, wn = np.array(x), np.array(w)
    np.testing.assert_allclose(np.array(g), xn @ (wn.T + wn), rtol=1e-5, atol=1e-5)


def test_another_threads_stream_still_refuses_the_view(rng):
    a = mx.array(rng.standard_normal((2, 3)).astype(np.float32))
    mx.eval(a)
    made = {}
    t = threading.Thread(target=lambda: made.setdefault("s", mx.new_stream(mx.cpu)))
    t.start()
    t.join()
    v = mx.transpose(a, stream=made["s"])  # a stream of the other thread
    assert v._node.prim is not None
    with pytest.raises(RuntimeError, match="in current thread"):
        mx.eval(v)
