"""Deliberate misuses of streamlet.core: tests/test_typing.py checks that mypy reports an
error of the code marked `# E:` on each marked line, and none elsewhere."""
import streamlet.core as mx

a = mx.ones((2, 3))
s = mx.new_stream(mx.cpu)
mx.exp("2.0")  # E: arg-type
mx.exp([1.0, 2.0])  # E: arg-type
mx.zeros((2, 3), dtype="float32")  # E: arg-type
mx.new_stream("cpu")  # E: arg-type
mx.sum(a, axis="0")  # E: arg-type
mx.random.normal((2,), key=3)  # E: arg-type
mx.reshape(a, (3, 2), strem=s)  # E: call-arg
mx.linalg.qr(a, mode="r")  # E: call-arg
mx.grad(3)  # E: arg-type
n: int = mx.ones(3)  # E: assignment
d: mx.Stream = mx.default_device()  # E: assignment
a.shape + 1  # E: operator
q, r, extra = mx.linalg.qr(a)  # E: misc
a @ 2.0  # E: operator
