"""``passes/coalesce.py`` in a loop that issues dots: a 16-bit MMA accumulator stored on every trip (the attention
backward's dS^T with ``STORE_DS=2``) keeps its layout -- 4-byte stores, no shared-memory stage and barriers on
every trip -- while the same kind of store after the loop (an epilogue) still goes through shared memory to 16-byte
stores; ``KERNELC_STORE_DOT_LOOP_DISCOUNT=1`` prices both alike, as before (golden IR); and the dK/dV kernel's
loop in sm_90a SASS (docs/attention.md, "dS^T from registers")."""
import pytest

import kernelc
import kernelc.language as kl

from tests.compiler.filecheck import filecheck
from tests.compiler.test_store_conversion import _passes, _sass_ops

SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", out_ptr="*fp16", K="i32")
DIV = {n: 16 for n in SIG}


@kernelc.jit
def dot_loop_store(a_ptr, b_ptr, c_ptr, out_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    """Every trip stores its product in fp16 (as the backward stores dS^T), and the sum after the loop."""
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    a = kl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in range(0, K, BK):
        b = kl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        s = kl.dot(a, b)
        kl.store(c_ptr + k * BM * BN + rm[:, None] * BN + rn[None, :], s.to(kl.float16))
        acc += s
    kl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc.to(kl.float16))


CX = dict(BM=128, BN=64, BK=64)


def test_golden_a_store_in_a_dot_loop_keeps_the_accumulator_layout(monkeypatch):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
    ir, _, ctx = _passes(dot_loop_store, SIG, CX, 4, 2, DIV, upto="coalesce")
    before, after = ir["coalesce"].split("scf.for", 1)[1], ir["coalesce"]
    # in the loop: the cast result stored as it is (no conversion between the cast and the store) ...
    filecheck(after, """
        CHECK: = scf.for
        CHECK: = dot
        CHECK: [[P:%\\d+]] = {{.*}}: <128x64xfp16>
        CHECK-NOT: convert_layout
        CHECK: store {{%\\d+}}, [[P]]
        CHECK: scf.yield
    """)
    # ... and after it, the epilogue's store through shared memory (16-byte stores), as before
    tail = after.split("scf.yield", 1)[1]
    filecheck(tail, """
        CHECK: = convert_layout {{%\\d+}} {layout=#blocked<{{.*}}>, smem=#shared<{{.*}}>} : <128x64xfp16>
        CHECK-NEXT: store
    """)
    assert before.count("convert_layout") == 1
    assert sum("store converted to its coalesced layout" in n for n in ctx.notes) == 1


def test_the_knob_prices_the_loop_store_as_the_epilogue(monkeypatch):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
    monkeypatch.setenv("KERNELC_STORE_DOT_LOOP_DISCOUNT", "1")
    ir, _, ctx = _passes(dot_loop_store, SIG, CX, 4, 2, DIV, upto="coalesce")
    body = ir["coalesce"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
    filecheck(body, """
        CHECK: = dot
        CHECK: = convert_layout {{%\\d+}} {layout=#blocked<{{.*}}>, smem=#shared<{{.*}}>} : <128x64xfp16>
        CHECK-NEXT: store
    """)
    assert sum("store converted to its coalesced layout" in n for n in ctx.notes) == 2


@pytest.mark.parametrize("causal", [False, True])
def test_backward_ds_from_registers_stores_without_a_stage(causal):
    """The dK/dV kernel with STORE_DS=2 at its D=128 default (64, 128, 8, 3): the dS^T tile leaves the loop as 16
    4-byte stores a thread a trip (two row pointers, column offsets as immediates), with no STSM, proxy fence or
    barrier of its own: the loop's one BAR.SYNC is the TMA ring's. The TMA store (STORE_DS=1) stages through
    shared memory (STSM, 3 barriers a trip)."""
    import sys
    sys.path.insert(0, "bench/experiments/attention_bwd_cudnn")
    sys.path.insert(0, "bench/experiments/tutorial_gaps")
    import bwd_sass
    regs = bwd_sass.survey(128, causal, "dkdv_dsp", (64, 128, 8, 3))
    tma = bwd_sass.survey(128, causal, "dkdv_ds", (64, 128, 8, 3))
    lp, lt = regs["loops"][-1], tma["loops"][-1]
    assert lp["HGMMA"] == lt["HGMMA"] == 24
    assert lp["STG"] == 16 and lp["STSM"] == 0 and lp["BAR.SYNC"] == 1 and lp["FENCE"] == 0
    assert lt["STSM"] > 0 and lt["BAR.SYNC"] == 3
    assert regs["spills"] <= 16 and regs["regs"] <= 255
