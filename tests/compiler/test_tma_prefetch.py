"""``issue_tma_loads_early`` (passes/tma_prefetch.py): a TMA tile loaded outside loops and read in place by
dots is copied as early as its offsets allow and waited for at its first read. Golden IR before -> after,
the cases it leaves alone, and the FA3-order attention forward's consumer prologue in sm_90a SASS."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@kernelc.jit
def two_tiles(a_desc, b_desc, c_desc, BM: kl.constexpr):
    a = a_desc.load([0, 0])
    b = b_desc.load([kl.program_id(0) * BM, 0])
    c = kl.dot(a, b.T)
    c_desc.store([0, 0], c.to(kl.float16))


@kernelc.jit
def store_between(a_desc, b_desc, c_desc, flag_ptr, BM: kl.constexpr):
    a = a_desc.load([0, 0])
    kl.store(flag_ptr, 1)  # a write: no copy moves past it, no wait is left after it
    b = b_desc.load([0, 0])
    c = kl.dot(a, b.T)
    c_desc.store([0, 0], c.to(kl.float16))


@kernelc.jit
def read_in_loop(a_desc, b_desc, c_desc, K, BM: kl.constexpr):
    a = a_desc.load([0, 0])
    acc = kl.zeros([BM, BM], dtype=kl.float32)
    for k in range(0, K, BM):
        acc = kl.dot(a, b_desc.load([k, 0]).T, acc)
    c_desc.store([0, 0], acc.to(kl.float16))


SIG = {"a_desc": "tensordesc<fp16[64, 64]>", "b_desc": "tensordesc<fp16[64, 64]>",
       "c_desc": "tensordesc<fp16[64, 64]>"}
DIV = {k: 16 for k in SIG}


def _ir(kernel, sig=SIG, **extra):
    ir, fn, _ = _passes(kernel, dict(sig, **extra), dict(BM=64), div=DIV)
    verify(fn)
    return ir["place_wgmma_waits"], ir["issue_tma_loads_early"]


def test_two_tiles_are_copied_together_and_waited_for_at_the_dot():
    before, after = _ir(two_tiles)
    filecheck(before, """
        CHECK: [[A:%\\d+]] = descriptor_load [[DA:%\\d+]], {{.*}}in_place=True} : <64x64xfp16>
        CHECK: [[B:%\\d+]] = descriptor_load [[DB:%\\d+]], {{.*}}in_place=True} : <64x64xfp16>
        CHECK-NEXT: [[BT:%\\d+]] = trans [[B]] {perm=[1, 0], in_place=True}
        CHECK-NEXT: {{%\\d+}} = constant
        CHECK-NEXT: = dot [[A]], [[BT]],
    """)
    filecheck(after, """
        CHECK: [[RA:%\\d+]] = tma_ring_alloc [[DA:%\\d+]] {stages=1, operand='a'} : <64x64xfp16>
        CHECK-NEXT: [[GA:%\\d+]] = mbarrier_alloc {count=1} : i64
        CHECK-NEXT: [[ZA:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[BA:%\\d+]] = mbarrier_at [[GA]], [[ZA]] : i32
        CHECK-NEXT: [[EA:%\\d+]] = elect_one : i1
        CHECK-NEXT: barrier
        CHECK-NEXT: mbarrier_init [[BA]], [[EA]] {count=1}
        CHECK-NEXT: fence_mbarrier_init
        CHECK-NEXT: barrier
        CHECK-NEXT: mbarrier_expect_tx [[BA]], [[EA]] {bytes=8192}
        CHECK-NEXT: tma_copy_to_ring [[RA]], [[ZA]], [[BA]], [[EA]], {{%\\d+}}, {{%\\d+}} {source='{{.*}}test_tma_prefetch.py:17:{{\\d+}}'}
        CHECK-NEXT: {{%\\d+}} = program_id {axis=0}
        CHECK: [[OFF:%\\d+]] = mul {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: [[RB:%\\d+]] = tma_ring_alloc [[DB:%\\d+]] {stages=1, operand='b', transposed=True} : <64x64xfp16>
        CHECK: mbarrier_expect_tx [[BB:%\\d+]], [[EB:%\\d+]] {bytes=8192}
        CHECK-NEXT: tma_copy_to_ring [[RB]], [[ZB:%\\d+]], [[BB]], [[EB]], [[OFF]], {{%\\d+}}
        CHECK-NEXT: {{%\\d+}} = constant
        CHECK-NEXT: mbarrier_wait [[BA]], [[ZA]]
        CHECK-NEXT: [[TA:%\\d+]] = ring_read [[RA]], [[ZA]] {{.*}}: <64x64xfp16>
        CHECK-NEXT: mbarrier_wait [[BB]], [[ZB]]
        CHECK-NEXT: [[TB:%\\d+]] = ring_read [[RB]], [[ZB]] {{.*}}: <64x64xfp16>
        CHECK-NEXT: = dot [[TA]], [[TB]],
    """)
    assert "descriptor_load" not in after and "trans" not in after.replace("transposed", "")


def test_a_write_between_keeps_each_load_where_it_was():
    before, after = _ir(store_between, flag_ptr="*i32")
    assert after == before


def test_a_load_waited_for_where_it_is_issued_is_left_alone(monkeypatch):
    """Without KERNELC_TMA_EARLY_RINGS the loop's ring prologue is not work under ``a``'s copy: the loop is the first
    reader of ``a``, its wait would come right after its copy, and the IR stays as it was."""
    monkeypatch.setenv("KERNELC_TMA_EARLY_RINGS", "0")
    before, after = _ir(read_in_loop, K="i32")
    assert after == before
    assert "stages=1" not in after


def test_with_rings_a_tile_first_read_in_a_loop_waits_after_the_rings_prologue(monkeypatch):
    """KERNELC_TMA_EARLY_RINGS (the default): the loop's ring prologue copies (its first K blocks) are work under
    ``a``'s copy, so ``a`` (attention's Q) is issued before them and waited for after them, just before the loop."""
    monkeypatch.setenv("KERNELC_TMA_EARLY_RINGS", "1")
    before, after = _ir(read_in_loop, K="i32")
    filecheck(before, """
        CHECK: [[A:%\\d+]] = descriptor_load [[DA:%\\d+]], {{.*}}in_place=True} : <64x64xfp16>
        CHECK: tma_copy_to_ring
        CHECK: scf.for
    """)
    filecheck(after, """
        CHECK: [[RA:%\\d+]] = tma_ring_alloc [[DA:%\\d+]] {stages=1, operand='a'} : <64x64xfp16>
        CHECK: mbarrier_expect_tx [[BA:%\\d+]], {{%\\d+}} {bytes=8192}
        CHECK-NEXT: tma_copy_to_ring [[RA]], [[ZA:%\\d+]], [[BA]], {{.*}} {source={{.*}}}
        CHECK: tma_ring_alloc {{%\\d+}} {stages=3, operand='b', transposed=True}
        CHECK: tma_copy_to_ring
        CHECK: tma_copy_to_ring
        CHECK: mbarrier_wait [[BA]], [[ZA]]
        CHECK-NEXT: {{%\\d+}} = ring_read [[RA]], [[ZA]] {{.*}}: <64x64xfp16>
        CHECK: scf.for
    """)
    assert "descriptor_load" not in after.split("scf.for")[0]


def test_the_knob_turns_it_off(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_EARLY_ISSUE", "0")
    before, after = _ir(two_tiles)
    assert after == before


def _consumer_prologue(sass):
    """SASS lines of the consumer warps from their setmaxnreg up to the first fp8 wgmma."""
    lines = sass.splitlines()
    start = next(i for i, ln in enumerate(lines) if "USETMAXREG.TRY_ALLOC" in ln)
    end = next(i for i, ln in enumerate(lines) if i > start and "QGMMA" in ln)
    return lines[start:end]


@pytest.mark.parametrize("causal", [False, True])
def test_fa3_forward_issues_q_first_k_and_last_v_before_waiting(causal):
    """attention_fa3 in fp8 at head dim 128 (8 consumer warps): before, Q's copy was waited for before the
    first K block's was issued, and the last V block was loaded after the loop; now the consumers issue all
    three copies, then wait for Q and K."""
    from tests.compiler.test_fp8_attention import _fa3_fp8
    pro = _consumer_prologue(_fa3_fp8(128, causal).asm["sass"])
    ops = [m.group(1) for ln in pro if (m := re.search(r"\*/\s+(?:@!?U?P\w+\s+)?(UTMALDG|SYNCS\.PHASECHK)", ln))]
    assert ops[:4] == ["UTMALDG", "UTMALDG", "UTMALDG", "SYNCS.PHASECHK"], ops


def test_pointer_forward_with_rings_issues_q_and_the_first_key_block_before_waiting(monkeypatch):
    """The pointer attention forward (fp8, D=128, causal, 64x128 at 4 warps, no producer warp): Q's copy was issued and
    waited for on the spot, then the key loop's first K and V copies; with KERNELC_TMA_EARLY_RINGS (the default) the
    three copies are issued, then Q is waited for."""
    from tests.compiler.test_attention_kernels import compile_fwd
    monkeypatch.setenv("KERNELC_TMA_EARLY_RINGS", "1")
    ck = compile_fwd(128, True, fp8=True, BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2, KEY_ORDER=True,
                     FOLD_SCALE=True)
    ops = [m.group(1) for ln in ck.asm["sass"].splitlines()
           if (m := re.search(r"\*/\s+(?:@!?U?P\w+\s+)?(UTMALDG|SYNCS\.PHASECHK)", ln))]
    assert ops[:4] == ["UTMALDG", "UTMALDG", "UTMALDG", "SYNCS.PHASECHK"], ops[:6]
