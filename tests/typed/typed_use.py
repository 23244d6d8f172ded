"""A program as a user writes it against streamlet.core, type-checked by tests/test_typing.py
(mypy must find nothing here; `assert_type` pins what the stubs say each call returns)."""
from typing import Any, Callable

from typing_extensions import assert_type

import streamlet.core as mx


def loss(w: mx.array, x: mx.array, y: mx.array) -> mx.array:
    return mx.mean(mx.square(x @ w - y))


s1: mx.Stream = mx.new_stream(mx.cpu)
tls: mx.ThreadLocalStream = mx.new_thread_local_stream(mx.cpu)
assert_type(mx.stream_from_thread_local_stream(tls), mx.Stream)
assert_type(mx.default_device(), mx.Device)
key = mx.random.key(0)
x = mx.random.normal((8, 3), key=key, stream=s1)
w = mx.zeros((3, 1), dtype=mx.float32)
y = mx.ones((8, 1))
with mx.stream(s1):
    z = mx.exp(x) * 2 + 1.5
assert_type(z, mx.array)
assert_type(z.shape, tuple[int, ...])
assert_type(z.dtype, mx.Dtype)
assert_type(z.sum(axis=0, keepdims=True), mx.array)
assert_type(z.reshape(3, 8).T, mx.array)
assert_type(z[0, 1:], mx.array)
assert_type(mx.split(z, 2), list[mx.array])
assert_type(mx.linalg.qr(mx.eye(3), stream=mx.cpu), tuple[mx.array, mx.array])
assert_type(mx.fft.rfft(x[:, 0]), mx.array)
assert_type(mx.trace(mx.eye(3)), mx.array)
assert_type(mx.arange(0, 1, 0.25), mx.array)
assert_type(mx.broadcast_shapes((2, 1), (3,)), tuple[int, ...])
assert_type(mx.issubdtype(mx.float16, mx.floating), bool)
assert_type(mx.finfo(mx.float32).eps, float)
g = mx.grad(loss)
assert_type(g, Callable[..., Any])
value, grads = mx.value_and_grad(loss)(w, x, y)
fast_loss = mx.compile(loss)
assert_type(fast_loss(w, x, y), mx.array)  # compile keeps the signature
mx.eval(z, g(w, x, y), fast_loss(w, x, y))
mx.synchronize(s1)
n: int = mx.get_active_memory()
items: float = mx.sum(z).item()
a = mx.array([1.0, 2.0], dtype=mx.bfloat16)
a[0] = 3.0
a += 1
mask = (a > 2) & (a < 10)
assert_type(mask, mx.array)
assert_type(mx.where(mask, a, 0.0), mx.array)
assert_type(mx.distributed.init().rank(), int)
assert_type(mx.fast.rms_norm(x, None, 1e-5), mx.array)
with mx.trace() as t:
    mx.eval(mx.ones((2, 2)) * 3)
assert_type(t, mx.Trace)
