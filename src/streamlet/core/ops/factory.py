"""Builders of elementwise ops from table rows; the hot path of every small-op program.

Each op gets two primitives: one for inputs that already have the dtype the op
computes in (the common case: the kernel is the table's function, called as is)
and one that casts its inputs first.
"""
from __future__ import annotations

from . import build as b
from . import rules
from .build import dt


INTEGRAL = "fc"  # a `refused` column: the op takes integer and bool types only (bitwise)


def _refuse(name, d, refused):
    if d.kind in refused:
        raise ValueError(f"[{name}] Not supported for {d.name}.")


def _refuse_pair(name, x, y, d, refused):
    """A binary op's refusal of the dtype `d` its inputs promote to; MLX's bitwise family
    raises RuntimeError there, naming both inputs' dtypes."""
    if d.kind in refused:
        if refused == INTEGRAL:
            raise RuntimeError(f"[{name}] Only allowed on integer or boolean types but got "
                               f"types {x._dtype.name} and {y._dtype.name}.")
        _refuse(name, d, refused)


def _cast_unary(fn):
    def kernel(xp, a, dtype):
        return fn(xp, a.astype(dtype))
    return kernel


def _cast_binary(fn):
    def kernel(xp, x, y, dtype):
        return fn(xp, x.astype(dtype, copy=False), y.astype(dtype, copy=False))
    return kernel


def unary(name, fn, rule, refused, deriv, ufunc=None, gpu=None, cform=None):
    """`op(a, stream=None)` computing `fn(xp, a)`; `rule` maps the input dtype to the output's.

    Only `dt.to_inexact` changes the dtype the op computes in (integers become
    float32); other rules describe the output alone (abs of complex, predicates).
    `deriv` is the derivative column the transform rules use (`rules.from_derivative`).
    `ufunc`, if given, computes what `fn` does (`Primitive.donate`); `gpu`, if given, is
    the GPU kernel `gpu(xp, a, dtype=None)` (`dtype`: the dtype computed in); `cform` its
    C expression (`Primitive.cform`).
    """
    transforms = dict(rules.from_derivative(deriv, name), vmap=rules.elementwise_vmap,
                      shape=rules.broadcast_shape, cform=cform)
    direct = b.make(name, fn, gpu=gpu, donate=ufunc, **transforms)
    casting = b.make(name, _cast_unary(fn), gpu=gpu, **transforms)
    as_array, node, resolve = b.as_array, b.node, b.resolve

    def op(a, /, *, stream=None):
        a = as_array(a, name)
        if refused:
            _refuse(name, a._dtype, refused)
        d = rule(a._dtype)
        st = resolve(stream)
        if d is a._dtype or rule is not dt.to_inexact:
            return node(direct, (a,), a._shape, d, b.NO_PARAMS, st)
        return node(casting, (a,), a._shape, d, {"dtype": d.np}, st)
    b.rename(op, name)
    op.__doc__ = f"Elementwise {name}: `mx.{name}(x, stream=s)`."
    return op


def binary(name, fn, rule, refused, partials, ufunc=None, cform=None):
    """`op(a, b, stream=None)` computing `fn(xp, x, y)` on inputs of their common dtype;
    `partials` are its two partial derivatives (`rules.from_partials`); `ufunc` and
    `cform` as for `unary`.  `op.same(x, y)` is the op of two arrays of one shape and one
    dtype that it computes in, with nothing to check (the transforms' sums of cotangents)."""
    transforms = dict(rules.from_partials(*partials, name), vmap=rules.elementwise_vmap,
                      shape=rules.broadcast_shape, cform=cform)
    direct = b.make(name, fn, donate=ufunc, **transforms)
    casting = b.make(name, _cast_binary(fn), **transforms)
    promote_pair, broadcast, node, resolve = b.promote_pair, b.broadcast_shapes, b.node, b.resolve
    known = {}  # common dtype -> (output dtype, compute dtype, params)

    def op(a, b_, /, *, stream=None):
        st = resolve(stream)
        x, y, d = promote_pair(a, b_, name)
        if refused:
            _refuse_pair(name, x, y, d, refused)
        xs, ys = x._shape, y._shape
        shape = xs if xs == ys or not ys else ys if not xs else broadcast(xs, ys, op=name)
        out = known.get(d)
        if out is None:
            compute = rule(d) if rule is dt.to_inexact else d
            out = known[d] = (rule(d), compute, {"dtype": compute.np})
        if x._dtype is out[1] and y._dtype is out[1]:
            return node(direct, (x, y), shape, out[0], b.NO_PARAMS, st)
        return node(casting, (x, y), shape, out[0], out[2], st)
    b.rename(op, name)
    op.__doc__ = f"Elementwise {name} with broadcasting: `mx.{name}(a, b, stream=s)`."
    op.same = lambda x, y: node(direct, (x, y), x._shape, x._dtype, b.NO_PARAMS, resolve(None))
    return op
