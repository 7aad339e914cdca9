"""axis_info's expand_dims rule: along the new dimension every element starts a run, so its divisibility is what
all elements share (a contiguous run's first element does not count). A triangular mask must not read as constant
over blocks: kernelc stored cols[None, :] < rows[:, None] with 128-bit stores under one predicate each (found
2026-11-28 by KERNELC_UNIFORM_MASKS=all changing causal attention's output, docs/performance.md); Triton stores
it element by element."""
import re

import kernelc
import kernelc.language as tl
from kernelc.compiler.compiler import compile as kcompile


@kernelc.jit
def _tril_store(X, Y, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + rows[:, None] * BLOCK + cols[None, :])
    tl.store(Y + rows[:, None] * BLOCK + cols[None, :], x, mask=cols[None, :] < rows[:, None])


@kernelc.jit
def _rect_store(X, Y, N, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + rows[:, None] * BLOCK + cols[None, :])
    tl.store(Y + rows[:, None] * BLOCK + cols[None, :], x, mask=cols[None, :] < N)


def _stores(kernel, sig, div):
    ck = kcompile(kernel, sig, {"BLOCK": 64}, "sm_90a", 4, 3, divisibility=div)
    return re.findall(r"st\.global(\.v\d)?\.b32", ck.asm["ptx"]), re.findall(r"ld\.global(\.v\d)?\.b32", ck.asm["ptx"])


def test_a_triangular_masked_store_is_not_vectorised():
    st, ld = _stores(_tril_store, {"X": "*fp32", "Y": "*fp32"}, {"X": 16, "Y": 16})
    assert st and all(v == "" for v in st), st          # one predicate per element
    assert ld and all(v == ".v4" for v in ld), ld       # the unmasked load keeps its 128-bit accesses


def test_a_mask_against_a_bound_divisible_by_16_still_vectorises():
    st, _ = _stores(_rect_store, {"X": "*fp32", "Y": "*fp32", "N": "i32"}, {"X": 16, "Y": 16, "N": 16})
    assert st and all(v == ".v4" for v in st), st
