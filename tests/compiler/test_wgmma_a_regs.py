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
