"""The core transforms layers call (``mx.compile``, ``mx.stop_gradient``), looked up at call time.

MLX compiles its activations and stops gradients through the max of a softmax
shift; both are the core's.  They are looked up when first called, so the layers also run on a
core that does not have them yet: uncompiled, and with the shift left differentiable (the
shift cancels in the result, so its gradient is zero either way).
"""
import functools

import streamlet.core as mx

# NOTE: MLX compiles its activations shapeless (one trace for every shape); the core's compile
# refuses shapeless=True so far, so they are traced once per input shape until it accepts it.
SHAPELESS = False


def compiled(fn):
    """``fn`` compiled by ``mx.compile(fn, shapeless=SHAPELESS)`` on its first call.

    >>> double = compiled(lambda x: x * 2)
    >>> double(mx.array([1, 2])).tolist()
    [2, 4]
    """
    compiled_fn = None

    @functools.wraps(fn)
    def call(*args, **kwargs):
        nonlocal compiled_fn
        if compiled_fn is None:
            compile_ = getattr(mx, "compile", None)
            compiled_fn = fn if compile_ is None else compile_(fn, shapeless=SHAPELESS)
        return compiled_fn(*args, **kwargs)

    return call


def stop_gradient(x):
    """``mx.stop_gradient(x)`` where the core has it, else ``x``.

    >>> stop_gradient(mx.array(1.0)).item()
    1.0
    """
    stop = getattr(mx, "stop_gradient", None)
    return x if stop is None else stop(x)
