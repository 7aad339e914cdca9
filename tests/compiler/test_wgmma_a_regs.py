"""KERNELC_WGMMA_A_REGS (passes/stage_operands.py's ``a_in_registers``): a loop-invariant 16-bit A operand that is
already in a dot accumulator's layout (the layout of a wgmma register A fragment) is not staged to shared memory
before the loop; the loop's wgmma reads it from registers (``HGMMA ... R<a>, gdesc[...]``) and only B from shared
memory. Off by default: the operand is staged as before."""
import re

import pytest

import kernelc
import kernelc.language as kl
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes

PASS = "stage_invariant_operands"
SIG = {"x_ptr": "*fp16", "w_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32"}
CX = dict(BM=64, BN=32, D=64)


@kernelc.jit
def a_from_a_dot(x_ptr, w_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    x = kl.load(x_ptr + rm[:, None] * BM + rm[None, :])
    w = kl.load(w_ptr + rm[:, None] * D + rd[None, :])
    a = kl.dot(x, w).to(kl.float16)  # [BM, D] in the accumulator layout
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        k = kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :])
        acc += kl.dot(a, k)
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("on", [False, True])
def test_an_invariant_a_in_the_accumulator_layout_stays_in_registers(on, monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "1" if on else "0")
    ir, _, _ = _passes(a_from_a_dot, SIG, CX, num_stages=3)
    staged = "stage_operand {{%\\d+}} {operand='a'}"
    filecheck(ir[PASS], f"""
        CHECK: = cast {{{{%\\d+}}}} {{{{.*}}}} : <64x64xfp16>
        {'CHECK-NOT' if on else 'CHECK'}: {staged}
        CHECK: = scf.for
    """)


@pytest.mark.parametrize("on", [False, True])
def test_the_loops_wgmma_reads_a_from_registers(on, monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "1" if on else "0")
    ck = kernelc.compile(a_from_a_dot, SIG, CX, target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={n: 16 for n in SIG})
    sass = ck.asm["sass"]
    rs = re.findall(r"HGMMA\.64x32x16\.F32 R\d+, R\d+, gdesc", sass)  # the loop's: A in registers
    ss = re.findall(r"HGMMA\.64x32x16\.F32 R\d+, gdesc\[UR\d+\]", sass)  # A from shared memory
    assert (len(rs), bool(ss)) == ((4, False) if on else (0, True)), (len(rs), len(ss))
    assert ck.n_spills == 0


def test_the_dot_and_the_kernel_are_marked(monkeypatch):
    """The decision is written into the tile IR: the dot reads ``a_regs``, the kernel asks the assembler for its next
    occupancy step (``registers="occupancy_step"``: the A fragments held across the loop cost registers)."""
    from kernelc.compiler.ir.printer import print_function
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "1")
    _, fn, _ = _passes(a_from_a_dot, SIG, CX, num_stages=3, upto=PASS)
    assert fn.attrs.get("registers") == "occupancy_step"
    filecheck(print_function(fn), """
        CHECK: = scf.for
        CHECK: = dot {{.*}}a_regs=True
    """)
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "0")
    _, fn, _ = _passes(a_from_a_dot, SIG, CX, num_stages=3, upto=PASS)
    assert "registers" not in fn.attrs and "a_regs=" not in print_function(fn)


@kernelc.jit
def a_from_a_dot_ws(x_ptr, w_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    x = kl.load(x_ptr + rm[:, None] * BM + rm[None, :])
    w = kl.load(w_ptr + rm[:, None] * D + rd[None, :])
    a = kl.dot(x, w).to(kl.float16)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN, warp_specialize=True):
        k = kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :])
        acc += kl.dot(a, k)
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_not_in_a_kernel_with_a_producer_warp(monkeypatch):
    """(kvr26) The same operand in a warp-specialised loop is staged to shared memory: ptxas (13.0) overwrote such a
    register fragment inside the consumers' loop of the D=64 attention backward (docs/attention.md, "kvr26")."""
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "1")
    ir, _, _ = _passes(a_from_a_dot_ws, SIG, CX, num_stages=3, div={"N": 16})
    filecheck(ir[PASS], """
        CHECK: ws_producer
        CHECK: = stage_operand {{%\\d+}} {operand='a'} : <64x64xfp16>
        CHECK: = scf.for
        CHECK-NOT: a_regs=True
    """)


@kernelc.jit
def a_regs_pinned(x_ptr, w_ptr, k_ptr, v_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    x = kl.load(x_ptr + rm[:, None] * BM + rm[None, :])
    w = kl.load(w_ptr + rm[:, None] * D + rd[None, :])
    a = kl.dot(x, w).to(kl.float16)  # [BM, D] in the accumulator layout
    b = kl.load(x_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        k = kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :])
        v = kl.load(v_ptr + rd[:, None] * N + (n + rn)[None, :])
        s = kl.dot(a, k)
        dp = kl.dot(b, v)  # deferred; its wait pinned past the exp2 of s (the attention backward's order)
        acc += kl.exp2(s) * (dp - 1.0)
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


SIG2 = {"x_ptr": "*fp16", "w_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32"}


@pytest.mark.parametrize("mode", [None, "auto", "stage", "unpin", "keep"])
def test_not_across_a_loop_with_a_pinned_wait(mode, monkeypatch):
    """(kvr27) KERNELC_WGMMA_A_REGS_PINNED: for an invariant A operand of a loop whose wgmma wait is pinned
    (codegen/wgmma.pinned_wait), stage stages the operand; unpin keeps it in registers and makes the loop's wait
    plain; keep holds both (before kvr27); auto (the default) keeps both in the IR, and the driver compiles again as
    stage where the SASS overwrites the fragment (test below). ptxas 13.0 (nvJitLink 13.0.88, the GPU hosts') gave such
    a fragment's registers to the loop's values after the pinned wait (the D=64 dK/dV kernel at 64 x 128, 8 warps,
    KV_REGS: wrong dK / dV on an H200; docs/attention.md, "kvr27")."""
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "1")
    if mode is not None:
        monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", mode)
    ir, _, _ = _passes(a_regs_pinned, SIG2, dict(BM=64, BN=64, D=64), num_stages=3, div={"N": 16})
    staged = mode == "stage"
    filecheck(ir[PASS], f"""
        CHECK: = cast {{{{%\\d+}}}} {{{{.*}}}} : <64x64xfp16>
        {'CHECK' if staged else 'CHECK-NOT'}: = stage_operand {{{{%\\d+}}}} {{operand='a'}} : <64x64xfp16>
        CHECK: = scf.for
        CHECK: = dot {{{{%\\d+}}}}, {{{{%\\d+}}}}, {{{{%\\d+}}}} {{{{.*}}}}wgmma='deferred'{'}' if staged else ', a_regs=True}'}
        CHECK: = dot {{{{%\\d+}}}}, {{{{%\\d+}}}}, {{{{%\\d+}}}} {{{{.*}}}}wgmma='deferred'{', pin_wait=True}' if mode != 'unpin' else '}'}
    """)


@pytest.mark.parametrize("seen", [False, True])
def test_auto_compiles_again_with_the_operand_staged_where_the_sass_overwrites_it(seen, monkeypatch):
    """KERNELC_WGMMA_A_REGS_PINNED=auto (the default): the driver reads the SASS of a kernel whose pinned loop keeps a
    register A fragment (backend/sass_fragments.py); where it finds the fragment overwritten (here: made to), the kernel
    is compiled again with the operand staged and the compile log says so; else the build stays as it is."""
    from kernelc.compiler.backend import sass_fragments
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS", "1")
    found = []
    real = sass_fragments.overwritten_a_fragments

    def check(sass):
        found.append(real(sass))
        return (["HGMMA (made to)"], 1) if seen else found[-1]
    monkeypatch.setattr(sass_fragments, "overwritten_a_fragments", check)
    ck = kernelc.compile(a_regs_pinned, SIG2, dict(BM=64, BN=64, D=64), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={n: 16 for n in SIG2})
    tir = ck.asm["tir"]
    assert len(found) == 1 and found[0][1] == 1 and not found[0][0]  # its real SASS keeps it (this host's assembler)
    assert (tir.count("a_regs=True"), "stage_operand" in tir) == ((0, True) if seen else (1, False))
    assert any("overwrites 1 register A fragment" in n for n in ck.compile_log) == seen


@pytest.mark.parametrize("mode", ["auto", "stage", "unpin"])
def test_the_fused_backwards_default_at_d64_causal(mode, monkeypatch):
    """examples/kernels/attention_bwd.py's fused kernel at D=64 causal (FUSED_KV_REGS: K as the A operand of the dK/dV
    loops' K Q^T). Its loops pin a wgmma wait: with KERNELC_WGMMA_A_REGS_PINNED=auto (the default: its SASS keeps the
    fragment) or unpin both loops' K Q^T wgmmas read A from registers (V dO^T's from shared memory); with stage K is
    staged and every one reads shared memory. Each way the kernel keeps 3 programs an SM (<= 168 registers) without
    spilling."""
    from examples.kernels import attention_bwd as B
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", mode)
    assert B.FUSED_KV_REGS.get((64, True)) == 1
    P = "*fp16"
    sig = dict(Q=P, K=P, V=P, DO=P, DK=P, DV=P, DQ=P, LSE="*fp32", Delta="*fp32", sm_scale="fp32", stride_z="i32",
               stride_h="i32", stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
    (bm1, bn1), (bm2, bn2), w, st = B.FUSED_CONFIGS[64]
    cx = dict(HEAD_DIM=64, CAUSAL=True, BLOCK_M1=bm1, BLOCK_N1=bn1, BLOCK_M2=bm2, BLOCK_N2=bn2, DQ_DESC=True,
              EVEN_M=True, TAIL=True, KV_REGS=1)
    ck = kernelc.compile(B.attn_bwd_fused_kernel, sig, cx, target="sm_90a", num_warps=w, num_stages=st,
                         divisibility={n: 16 for n in sig}, equal_to_1=("stride_k",))
    sass = ck.asm["sass"]
    regs = 0 if mode == "stage" else 8  # K Q^T: 4 k-steps, 2 loops
    assert len(re.findall(r"HGMMA\.64x32x16\.F32 R\d+, R\d+, gdesc", sass)) == regs
    assert len(re.findall(r"HGMMA\.64x32x16\.F32 R\d+, gdesc", sass)) == 16 - regs  # and V dO^T
    assert ck.n_spills == 0 and ck.n_regs <= 168, (ck.n_regs, ck.n_spills)
