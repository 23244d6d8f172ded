"""The GPU half of an op is its primitive's `gpu` column (a GpuKernel), never a table of
names in the backend.  Checked without a GPU: each named kernel exists in its module."""
from __future__ import annotations

import ast
import gc
import importlib.util

import numpy as np

import streamlet.core as mx  # noqa: F401 (makes the primitives)
from streamlet.core.graph import GpuKernel, Primitive
from streamlet.core.ops import build


def _gpu_kernels():
    return {p.name: p.gpu for p in gc.get_objects()
            if type(p) is Primitive and p.gpu is not None}


def test_every_gpu_column_is_a_gpu_kernel_whose_function_exists():
    kernels = _gpu_kernels()
    assert {"matmul", "astype", "view", "normal", "gumbel", "random_bits",
            "arange"} <= set(kernels)
    for name, k in kernels.items():
        assert isinstance(k, GpuKernel), name
        assert k.bfloat16 in ("float32", "own", "bits", "native"), (name, k.bfloat16)
        if k.path is None:
            continue
        module, fn = k.path.split(":")
        spec = importlib.util.find_spec(module)  # the module itself needs CuPy: parse it
        tree = ast.parse(open(spec.origin).read())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert fn in defined, f"{name}: {k.path} is not defined"


def test_a_gpu_kernel_given_by_name_is_imported_when_first_run():
    k = GpuKernel("streamlet.core.ops.elementwise:kernels")
    assert k.path.endswith(":kernels")
    np.testing.assert_array_equal(k(np).add(np.array([1, 2]), np.array([3, 4])), [4, 6])


def test_make_turns_a_plain_function_into_a_gpu_kernel():
    prim = build.make("test_op", lambda xp, a: a, gpu=lambda xp, a: a + 1)
    assert isinstance(prim.gpu, GpuKernel) and prim.gpu.bfloat16 == "float32"
    assert prim.gpu(np, np.array([1]))[0] == 2


def test_the_cuda_backend_has_no_table_of_op_names():
    spec = importlib.util.find_spec("streamlet.backend.cuda")
    source = open(spec.origin).read()
    for banned in ("OVERRIDES", "_ON_BITS", "bf16_params", "NotImplementedError, TypeError"):
        assert banned not in source, banned
