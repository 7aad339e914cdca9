"""Triton's grouped GEMM tutorial (08) patterns, checked on CPU:

- a hint whose result is dropped still holds for its operand (passes/hints.py): the tutorial's
  ``tl.multiple_of(a_ptrs, [16, 16])`` on pointers loaded from memory gives 16-byte accesses;
- ``acc += tl.dot(a, b)`` accumulates in the dot itself (passes/dot_acc.py).
"""
import re

import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.passes.axis_info import analyze
from kernelc.compiler.passes.dot_acc import fold_dot_accumulate
from kernelc.compiler.passes.hints import anchor_hints
from kernelc.compiler.passes.simplify import simplify
from kernelc.language.dtypes import shape_of


@kernelc.jit
def copy_rows(src_ptrs, dst_ptrs, ld, n_steps, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr, HINT: kl.constexpr):
    # the row pointers come from memory, as the tutorial's matrices: nothing is known of their alignment
    src = kl.load(src_ptrs).to(kl.pointer_type(kl.float16))
    dst = kl.load(dst_ptrs).to(kl.pointer_type(kl.float16))
    rows = kl.arange(0, BLOCK_M)
    cols = kl.arange(0, BLOCK_N)
    s_ptrs = src + rows[:, None] * ld + cols[None, :]
    d_ptrs = dst + rows[:, None] * ld + cols[None, :]
    for _ in range(n_steps):
        if HINT:
            kl.multiple_of(s_ptrs, [16, 16])  # result dropped, as in the tutorial
            kl.multiple_of(d_ptrs, [16, 16])
        kl.store(d_ptrs, kl.load(s_ptrs))
        s_ptrs += BLOCK_N
        d_ptrs += BLOCK_N


COPY_SIG = dict(src_ptrs="*i64", dst_ptrs="*i64", ld="i32", n_steps="i32")


def _ir(kernel, sig, constexprs):
    fn, _ = generate_ir(_base_function(kernel), sig, constexprs, {}, (), None, arch="sm_90a", num_warps=4)
    return fn


def test_dropped_hint_is_anchored_on_its_operand():
    fn = anchor_hints(_ir(copy_rows, COPY_SIG, dict(BLOCK_M=32, BLOCK_N=64, HINT=True)))
    loop = next(op for op in fn.walk() if op.name == "scf.for")
    body = loop.regions[0]
    hints = [op for op in body.ops if op.name == "hint"]
    assert sorted(h.operands[0].id for h in hints) == sorted(a.id for a in body.args[1:])  # both carried tiles
    hinted = {h.result.id for h in hints}
    # every load/store address and the pointer increments read the hinted value, not the raw carried one
    for op in body.ops:
        if op.name in ("load", "store", "addptr"):
            assert op.operands[0].id in hinted, op
    axis = analyze(simplify(fn))
    for op in loop.regions[0].ops:
        if op.name == "load":
            info = axis.get(op.operands[0])
            assert info.divisibility[1] >= 16 and info.contiguity[1] == 64, info


def test_two_hints_on_one_value_chain():
    @kernelc.jit
    def k(p_ptr, out):
        p = kl.load(p_ptr).to(kl.pointer_type(kl.float32))
        offs = kl.arange(0, 64)
        ptrs = p + offs
        kl.multiple_of(ptrs, 16)
        kl.max_contiguous(ptrs, 64)
        kl.store(out + offs, kl.load(ptrs))

    fn = simplify(anchor_hints(_ir(k, dict(p_ptr="*i64", out="*fp32"), {})))
    load = next(op for op in fn.walk() if op.name == "load" and shape_of(op.results[0].type))
    h2 = load.operands[0].op
    assert h2.name == "hint" and h2.operands[0].op.name == "hint"
    info = analyze(fn).get(load.operands[0])
    assert info.divisibility[0] >= 16 and info.contiguity[0] == 64


def _ptx_accesses(ck):
    return re.findall(r"\b(ld\.global[.\w]*|st\.global[.\w]*|cp\.async\.c[ag]\.shared\.global[^;]*)", ck.asm["ptx"])


def test_dropped_hint_gives_vector_accesses():
    ce = dict(BLOCK_M=32, BLOCK_N=64)
    hinted = kernelc.compile(copy_rows, COPY_SIG, dict(ce, HINT=True), target="sm_90a", num_warps=4, num_stages=1)
    plain = kernelc.compile(copy_rows, COPY_SIG, dict(ce, HINT=False), target="sm_90a", num_warps=4, num_stages=1)
    h, p = _ptx_accesses(hinted), _ptx_accesses(plain)
    assert any(".v4" in a for a in h if a.startswith("ld.global")), h
    assert any(".v4" in a for a in h if a.startswith("st.global")), h
    # without the promise the pointers' alignment is unknown: 2-byte accesses
    assert not any(".v" in a for a in p if a.startswith(("ld.global", "st.global")) and "b64" not in a), p
    assert len(p) > 4 * len(h), (len(p), len(h))


@kernelc.jit
def k_loop(a_ptr, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr, SWAP: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * BN + rn[None, :]
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for _ in range(0, K // BK):
        if SWAP:
            acc = kl.dot(kl.load(a_ptrs), kl.load(b_ptrs)) + acc
        else:
            acc += kl.dot(kl.load(a_ptrs), kl.load(b_ptrs))
        a_ptrs += BK
        b_ptrs += BK * BN
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


DOT_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32", K="i32")


def test_acc_plus_dot_folds_into_the_dot():
    for swap in (False, True):
        fn = fold_dot_accumulate(simplify(_ir(k_loop, DOT_SIG, dict(BM=64, BN=64, BK=32, SWAP=swap))))
        fn = simplify(fn)
        loop = next(op for op in fn.walk() if op.name == "scf.for")
        body = loop.regions[0]
        assert not any(op.name == "fadd" for op in body.ops), swap
        dot = next(op for op in body.ops if op.name == "dot")
        assert dot.operands[2] is body.args[1]  # the carried accumulator
        assert body.ops[-1].operands[0] is dot.result


def test_dot_with_second_user_is_not_folded():
    @kernelc.jit
    def k(a_ptr, b_ptr, c_ptr, d_ptr):
        r = kl.arange(0, 16)
        a = kl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = kl.load(b_ptr + r[:, None] * 16 + r[None, :])
        acc = kl.load(c_ptr + r[:, None] * 16 + r[None, :])
        d = kl.dot(a, b)
        kl.store(c_ptr + r[:, None] * 16 + r[None, :], acc + d)
        kl.store(d_ptr + r[:, None] * 16 + r[None, :], d)  # the plain product is read too

    fn = fold_dot_accumulate(simplify(_ir(k, dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32", d_ptr="*fp32"), {})))
    assert any(op.name == "fadd" for op in fn.walk())
    dot = next(op for op in fn.walk() if op.name == "dot")
    assert dot.operands[2].op.name == "constant"


def test_folded_accumulation_has_no_elementwise_add_in_ptx():
    ck = kernelc.compile(k_loop, DOT_SIG, dict(BM=64, BN=64, BK=32, SWAP=False), target="sm_90a", num_warps=4,
                         num_stages=2)
    ptx = ck.asm["ptx"]
    assert "wgmma.mma_async" in ptx
    # the running sum lives in the wgmma accumulator: no fp32 add of a product tile onto it
    assert not re.findall(r"\badd(\.rn)?\.f32\b", ptx), re.findall(r"\badd(?:\.rn)?\.f32[^;]*", ptx)[:4]
