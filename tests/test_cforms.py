"""The C forms the GPU fuses elementwise ops with (`ops.cforms`), checked on the CPU: each
form, rendered for a compute type as the GPU's generated kernels render it, is compiled by
the host's C compiler and its results compared with the op's own (NumPy) kernel on random
inputs with NaN, infinities, zeros and negative values among them."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import zlib

import numpy as np
import pytest

import streamlet.core as mx
from streamlet.core.ops import cforms, elementwise

C_TYPES = {"float": np.float32, "double": np.float64, "int": np.int32,
           "long long": np.int64, "unsigned char": np.uint8, "bool": np.bool_}
C_NAME = {np.dtype(v): k for k, v in C_TYPES.items()}
EXACT = {"add", "subtract", "multiply", "divide", "minimum", "maximum", "equal",
         "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
         "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "negative",
         "positive", "square", "sqrt", "reciprocal", "logical_not", "abs", "sign", "floor",
         "ceil", "trunc", "isnan", "isinf", "isfinite", "bitwise_invert"}
N = 512


def _inputs(t, rng):
    d = np.dtype(C_TYPES[t])
    if d.kind == "f":
        x = rng.standard_normal(N) * rng.choice([1e-3, 1, 50], N)
        x[rng.integers(0, N, 24)] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], 24)
        return x.astype(d)
    if d.kind == "b":
        return rng.integers(0, 2, N).astype(bool)
    lo = 0 if d.kind == "u" else -100
    return rng.integers(lo, 100, N).astype(d)


def _cases():
    for table, arity in ((cforms.UNARY, 1), (cforms.BINARY, 2)):
        for name, form in table.items():
            for t in C_TYPES:
                if form.takes(t):
                    yield pytest.param(name, form, arity, t, id=f"{name}-{t}")


@pytest.fixture(scope="module")
def compiler(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("the C forms test needs a C compiler (cc or gcc) on PATH")
    return cc, tmp_path_factory.mktemp("cforms")


@pytest.mark.parametrize("name,form,arity,t", list(_cases()))
def test_c_form_computes_the_ops_kernel(compiler, name, form, arity, t):
    rng = np.random.default_rng(zlib.crc32(f"{name} {t}".encode()))  # the same every run
    xs = [_inputs(t, rng) for _ in range(arity)]
    op = getattr(elementwise, name)
    d = getattr(mx, "bool_" if t == "bool" else np.dtype(C_TYPES[t]).name)
    want = np.asarray(op(*[mx.array(x, dtype=d) for x in xs], stream=mx.cpu))
    out_t = C_NAME[want.dtype]
    operands = [f"(({t})x{i}[i])" for i in range(arity)]
    params = ", ".join(f"const {t}* x{i}" for i in range(arity))
    source = ("#include <math.h>\n#include <stdbool.h>\n"
              f"void f({params}, {out_t}* o, long n) {{\n"
              f"  for (long i = 0; i < n; ++i) o[i] = ({out_t})({form.render(t, operands)});\n"
              "}\n")
    cc, tmp = compiler
    src, lib = tmp / f"{name}_{t.replace(' ', '_')}.c", tmp / f"{name}_{t.replace(' ', '_')}.so"
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-ffp-contract=off", "-o", str(lib),
                    str(src), "-lm"], check=True, capture_output=True)
    got = np.empty(N, want.dtype)
    fn = ctypes.CDLL(str(lib)).f
    ptrs = [ctypes.c_void_p(x.ctypes.data) for x in xs]
    fn(*ptrs, ctypes.c_void_p(got.ctypes.data), ctypes.c_long(N))
    if name in EXACT or want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=f"{name} in {t}: {source}")
    else:
        # (4 ulps, or one step among the subnormals, where libm and NumPy may round apart)
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps,
                                   atol=np.finfo(want.dtype).smallest_subnormal,
                                   equal_nan=True, err_msg=f"{name} in {t}: {source}")


def test_every_fusable_primitive_carries_its_form():
    for table in (cforms.UNARY, cforms.BINARY):
        for name, form in table.items():
            x = mx.array([1, 2], mx.int32 if form.text("int") else mx.float32)
            args = (x,) if table is cforms.UNARY else (x, x)
            assert getattr(elementwise, name)(*args)._node.prim.cform is form
    assert mx.where(mx.array([True]), 1.0, 2.0)._node.prim.cform is cforms.WHERE
    assert mx.array([1.5]).astype(mx.int32)._node.prim.cform is cforms.ASTYPE
    assert mx.erf(mx.array([0.5]))._node.prim.cform is None  # no C form: the GPU runs it alone


def test_forms_refuse_what_the_gpu_must_not_fuse():
    assert not cforms.UNARY["sin"].takes("int")  # integer sin converts to float32 first
    assert not cforms.UNARY["negative"].takes("bool")  # NumPy refuses -bool
    assert not cforms.UNARY["bitwise_invert"].takes("float")
    assert cforms.BINARY["add"].takes("unsigned char")
