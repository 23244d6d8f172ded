"""How the GPU's matmul hands strided operands to cuBLAS (`backend.gemm_layout`), checked on
NumPy arrays: wherever a layout is accepted, the matrices cuBLAS would read from memory
(operation, leading dimension, batch stride) are exactly the operand's; where it is
refused, no such reading exists with these rules' constraints."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from streamlet.backend.gemm_layout import OP_N, OP_T, batch_stride, layout

as_strided = np.lib.stride_tricks.as_strided


def _read_as_cublas(a, op, ld, step, count):
    """The `count` matrices cuBLAS reads at `a`'s first element (a row-major r x c each)."""
    r, c = a.shape[-2], a.shape[-1]
    item = a.itemsize
    inner = (ld * item, item) if op == OP_N else (item, ld * item)
    first = a[(0,) * (a.ndim - 2)] if a.ndim > 2 else a
    return as_strided(first, (count, r, c), (step * item,) + inner)


@st.composite
def operands(draw):
    """Arrays of matrices as programs make them: contiguous, transposed views, strided or
    column slices, reversed batches, broadcast batch axes."""
    r, c = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    base = np.arange(int(np.prod(lead + (r * 2 + 1, c * 2 + 1))), dtype=np.float32)
    base = base.reshape(lead + (r * 2 + 1, c * 2 + 1))
    kind = draw(st.sampled_from(["rows", "columns", "row step", "column slice",
                                 "reversed batch"]))
    if kind == "rows":
        a = np.ascontiguousarray(base[..., :r, :c])
    elif kind == "columns":
        a = np.swapaxes(np.ascontiguousarray(np.swapaxes(base[..., :r, :c], -1, -2)), -1, -2)
    elif kind == "row step":
        a = base[..., : 2 * r : 2, :c]
    elif kind == "column slice":
        a = base[..., :r, 1 : c + 1]
    else:
        a = np.ascontiguousarray(base[..., :r, :c])[::-1] if lead else base[:r, :c]
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=1))) + a.shape[:-2]
    if draw(st.booleans()) and a.ndim > 2 and a.shape[0] == 1:
        batch = (3,) + batch[1:]  # a size-1 axis broadcast
    return a, batch


@settings(max_examples=300, deadline=None)
@given(operands())
def test_an_accepted_layout_reads_exactly_the_operands_matrices(case):
    a, batch = case
    lay, step = layout(a), batch_stride(a, batch)
    if lay is None or step is None:
        return
    op, ld = lay
    r, c = a.shape[-2:]
    assert ld >= (c if op == OP_N else r) >= 1  # cuBLAS's bound on a leading dimension
    count = int(np.prod(batch)) if batch else 1
    want = np.broadcast_to(a, batch + (r, c)).reshape(count, r, c)
    np.testing.assert_array_equal(_read_as_cublas(a, op, ld, step, count), want)


def test_common_operands_are_accepted():
    w = np.zeros((6, 4), np.float32)
    assert layout(w) == (OP_N, 4) and layout(w.T) == (OP_T, 4)
    assert layout(w[::2]) == (OP_N, 8) and layout(w[:, 1:3]) == (OP_N, 4)
    stack = np.zeros((3, 6, 4), np.float32)
    assert batch_stride(stack, (3,)) == 24
    assert batch_stride(np.swapaxes(stack, 1, 2), (3,)) == 24
    assert batch_stride(w, (2, 3)) == 0  # one matrix for a whole stack


@pytest.mark.parametrize("a,batch", [
    (np.zeros((4, 6), np.float32)[:, ::2], ()),  # neither rows nor columns contiguous
    (np.broadcast_to(np.zeros((1, 4), np.float32), (3, 4)), ()),  # a broadcast row
    (np.zeros((2, 3, 4, 4), np.float32)[:, :2], (2, 2)),  # uneven batch spacing
    (np.zeros((3, 4, 4), np.float32)[::-1], (3,)),  # a reversed stack
    (np.zeros((1, 3, 4, 4), np.float32), (2, 3)),  # broadcast outside, not inside
])
def test_layouts_cublas_cannot_read_go_elsewhere(a, batch):
    assert layout(a) is None or batch_stride(a, batch) is None
