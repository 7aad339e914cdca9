"""``assign_smem_offsets`` (passes/smem_offsets.py): shared-memory offsets by live range (golden IR before ->
after), the synchronisation before a reuse, the verifier's checks, the lowering (offsets and barrier in
PTX and SASS), and tutorial 06's backward shape fitting an H100 (docs/triton-tutorials.md)."""
import re

import pytest

import kernelc
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.ir import verify
from kernelc.errors import CompilationError, OutOfResources
from tests.compiler import fused_bwd_kernels as FB
from tests.compiler.filecheck import filecheck
from tests.compiler.smem_kernels import SHARED_SIG, TWO_SIG, shared_operand, two_loops
from tests.compiler.test_schedule_passes import MM_DESC_DIV, MM_DESC_SIG, _passes
from tests.compiler.test_tma_rings import mm_tiles
from tests.compiler.test_warp_specialize import mm_loop
from tests.compiler.verifier_cases import first_ops, rejects_bad_attrs

PASS, BEFORE = "assign_smem_offsets", "issue_tma_loads_early"
CX = dict(BM=64, BN=64, BK=32)
DIV = {"K": 16}


@pytest.fixture
def reuse(monkeypatch):
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")


def _buffers(text):
    """[(op, offset, bytes)] of the placed buffers, in program order."""
    return [(m.group(1), int(m.group(2)), int(m.group(3))) for m in
            re.finditer(r"= (\w+) [^\n]*smem_buffer=\{offset=(\d+), bytes=(\d+)\}", text)]


def test_the_pass_is_the_last_tile_pass():
    # but for mark_zero_acc_dots and mark_uniform_warpgroups, which only add scalar ops (no shared memory), and
    # mark_copy_mad_wide (an attribute on copy addresses) and mark_elect_form (attributes on elect_one)
    from kernelc.compiler.compiler import TILE_PASSES
    assert [p.name for p in TILE_PASSES][-6:] == [BEFORE, PASS, "mark_zero_acc_dots", "mark_uniform_warpgroups",
                                                  "mark_copy_mad_wide", "mark_elect_form"]


def test_the_rings_of_two_cp_async_loops_share_bytes(reuse, monkeypatch):
    """sm_80, cp.async: loop 2's rings (2 x 24 KB) start where loop 1's (2 x 12 KB) did; before them every
    cp.async copy is waited for (zero-filled ones write too) and a barrier orders loop 1's readers first.
    No async-proxy fence on sm_80."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "all")   # the full form's waits (the default's: test_reuse_sync.py)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ir, fn, _ = _passes(two_loops, TWO_SIG, CX, target="sm_80", div=DIV)
    before, after = ir[BEFORE], ir[PASS]
    filecheck(before, """
        CHECK: = ring_alloc {stages=3, operand='a'} : <64x32xfp16>
        CHECK-NEXT: = ring_alloc {stages=3, operand='b'} : <32x64xfp16>
        CHECK: = scf.for
        CHECK: async_wait_all
        CHECK-NEXT: [[STEP:%\\d+]] = constant {value=64} : i32
        CHECK-NEXT: = ring_alloc {stages=3, operand='a'} : <64x64xfp16>
    """)
    filecheck(after, """
        CHECK: = ring_alloc {stages=3, operand='a', smem_buffer={offset=0, bytes=12288}} : <64x32xfp16>
        CHECK-NEXT: = ring_alloc {stages=3, operand='b', smem_buffer={offset=12288, bytes=12288}} : <32x64xfp16>
        CHECK: = scf.for
        CHECK: async_wait_all
        CHECK-NEXT: [[STEP:%\\d+]] = constant {value=64} : i32
        CHECK-NEXT: async_wait_all
        CHECK-NEXT: barrier
        CHECK-NEXT: = ring_alloc {stages=3, operand='a', smem_buffer={offset=0, bytes=24576}} : <64x64xfp16>
        CHECK-NEXT: = ring_alloc {stages=3, operand='b', smem_buffer={offset=24576, bytes=24576}} : <64x64xfp16>
        CHECK: = scf.for
    """)
    assert "fence_async_shared" not in after
    # the pass adds the attributes and the three ops, nothing else
    stripped = re.sub(r", smem_buffer=\{[^}]*\}", "", after).splitlines()
    assert len(stripped) == len(before.splitlines()) + 2
    verify(fn)


def test_tma_rings_of_two_loops_share_bytes_after_a_fence_and_a_barrier(reuse):
    """sm_90a, TMA (the pointer loads become descriptors): the async-proxy fence and the barrier come before
    loop 2's rings, after loop 1's teardown (its wgmma waited for, its barriers invalidated, its rings freed)."""
    ir, fn, _ = _passes(two_loops, TWO_SIG, CX, target="sm_90a", div=DIV)
    filecheck(ir[PASS], """
        CHECK: [[A1:%\\d+]] = tma_ring_alloc {{%\\d+}} {stages=3, operand='a', smem_buffer={offset=0, bytes=12288}}
        CHECK-NEXT: [[B1:%\\d+]] = tma_ring_alloc {{%\\d+}} {stages=3, operand='b', smem_buffer={offset=12288, bytes=12288}}
        CHECK: = scf.for
        CHECK: = wgmma_wait
        CHECK: mbarrier_inval
        CHECK: ring_free [[A1]]
        CHECK-NEXT: ring_free [[B1]]
        CHECK-NOT: async_wait_all
        CHECK: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = tma_ring_alloc {{%\\d+}} {stages=3, operand='a', smem_buffer={offset=0, bytes=24576}}
        CHECK-NEXT: = tma_ring_alloc {{%\\d+}} {stages=3, operand='b', smem_buffer={offset=24576, bytes=24576}}
    """)
    verify(fn)


def test_a_buffer_read_by_both_loops_keeps_its_bytes(reuse, monkeypatch):
    """q's staged copy is read by the dots of both loops: it lives across both, so loop 2's ring goes where
    loop 1's was, never over q."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "all")   # the full form's waits (the default's: test_reuse_sync.py)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ir, fn, _ = _passes(shared_operand, SHARED_SIG, dict(BM=64, BN=64, D=64), target="sm_90a", div={"N": 16})
    assert _buffers(ir[PASS]) == [("stage_operand", 0, 8192), ("ring_alloc", 8192, 24576),
                                  ("ring_alloc", 8192, 24576)]
    # loop 1's own wait for its copies, right before loop 2's ring, joins the pass's sequence: one of each
    filecheck(ir[PASS], """
        CHECK: = stage_operand
        CHECK: = ring_alloc
        CHECK: = scf.for
        CHECK-NEXT: ^body
        CHECK: async_wait_all
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = ring_alloc
        CHECK: = scf.for
    """)
    assert ir[PASS].count("async_wait_all") == ir[BEFORE].count("async_wait_all") == 2


def test_buffers_inside_one_loop_never_share(reuse):
    """A ring set up inside a persistent loop lives for the whole outer loop: no two buffers there share."""
    ir, _, _ = _passes(mm_tiles, dict(MM_DESC_SIG, T="i32"), dict(BM=128, BN=128, BK=64), div=MM_DESC_DIV)
    bufs = _buffers(ir[PASS])
    assert [(op, off) for op, off, _ in bufs] == [("tma_ring_alloc", 0), ("tma_ring_alloc", 49152)]
    assert ir[PASS].count("barrier") == ir[BEFORE].count("barrier")


def test_on_by_default_off_with_the_knob_and_warp_specialised_kernels_are_left_alone(monkeypatch):
    monkeypatch.delenv("KERNELC_SMEM_REUSE", raising=False)
    ir, _, _ = _passes(two_loops, TWO_SIG, CX, div=DIV)
    assert "smem_buffer" in ir[PASS]
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "0")
    ir, _, _ = _passes(two_loops, TWO_SIG, CX, div=DIV)
    assert ir[PASS] == ir[BEFORE] and "smem_buffer" not in ir[PASS]
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=True), div=MM_DESC_DIV)
    assert "ws_producer" in ir[PASS] and ir[PASS] == ir[BEFORE]


def test_the_verifier_checks_the_offsets(reuse):
    _, fn, _ = _passes(two_loops, TWO_SIG, CX, div=DIV)
    (ring,) = first_ops(fn, "tma_ring_alloc")
    rejects_bad_attrs(fn, [
        (ring, "smem_buffer", {"offset": 100, "bytes": 12288}, "offset=a multiple of 1024"),
        (ring, "smem_buffer", {"offset": 0, "bytes": 0}, "bytes >= 1"),
        (ring, "smem_buffer", 7, "smem_buffer must be"),
    ])
    (init,) = first_ops(fn, "mbarrier_init")
    init.attrs["smem_buffer"] = {"offset": 0, "bytes": 8}
    with pytest.raises(Exception, match="smem_buffer is on the ops that hold a shared-memory buffer"):
        verify(fn)


def _ptx(kernel, sig, cx, target, div):
    return kcompile(kernel, sig, cx, target, 4, 3, divisibility=div)


def test_codegen_places_each_buffer_at_its_offset(reuse, monkeypatch):
    """sm_80 cp.async: the kernel's shared memory is the larger loop's rings (48 KB, not 72 KB), and the PTX
    has the pass's wait for every copy and its barrier between loop 1's wait and loop 2's first copy."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "all")   # the full form's waits (the default's: test_reuse_sync.py)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ck = _ptx(two_loops, TWO_SIG, CX, "sm_80", DIV)
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "0")
    old = _ptx(two_loops, TWO_SIG, CX, "sm_80", DIV)
    assert (old.shared, ck.shared) == (73728, 49152)
    ptx = "\n".join(ln.strip() for ln in ck.asm["ptx"].splitlines()
                    if ln.strip() and not ln.strip().startswith(("//", ".loc")))
    waits = [m.start() for m in re.finditer(r"cp\.async\.wait_all;", ptx)]
    assert len(waits) == 3 and old.asm["ptx"].count("cp.async.wait_all;") == 2  # after loop 1, the pass's, after loop 2
    gap = ptx[waits[0]:ptx.index("cp.async.cg.shared.global", waits[0])]
    assert re.search(r"cp\.async\.wait_all;\s+cp\.async\.wait_all;\s+bar\.sync\s+0;", gap), gap


def test_codegen_rejects_a_buffer_larger_than_placed(reuse):
    from kernelc.compiler.codegen import lower_to_llvm
    from kernelc.compiler.backend import parse_target
    _, fn, ctx = _passes(two_loops, TWO_SIG, CX, div=DIV)
    (ring,) = first_ops(fn, "tma_ring_alloc")
    ring.attrs["smem_buffer"] = {"offset": 0, "bytes": 1024}
    with pytest.raises(CompilationError, match="needs 12288 bytes of shared memory, the pass placed 1024"):
        lower_to_llvm(fn, ctx.plan, ctx.axis, 4, parse_target("sm_90a"))


def test_a_tma_store_after_the_loops_stages_in_a_freed_ring(reuse):
    """The epilogue's TMA store stages its tile in the finished ring's bytes (codegen's free list), as
    without the pass: the shared memory stays that of the ring."""
    cx = dict(BM=128, BN=128, BK=64, WS=False)
    ck = kcompile(mm_loop, MM_DESC_SIG, cx, "sm_90a", 4, 3, divisibility=MM_DESC_DIV)
    assert "smem_buffer={offset=0, bytes=49152}" in ck.asm["tir"]
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ck.asm["ptx"]


def test_the_barrier_before_the_reuse_in_ptx_and_sass(reuse):
    """sm_90a TMA: between loop 1's last wgmma and loop 2's first TMA copy, the PTX has the
    ``fence.proxy.async.shared::cta`` and ``bar.sync 0`` the pass wrote, in that order, and ptxas keeps
    them: SASS ``FENCE.VIEW.ASYNC.S`` then ``BAR.SYNC`` before the second loop's ``UTMALDG``s, whose
    destination is the first loop's."""
    ck = kcompile(two_loops, TWO_SIG, CX, "sm_90a", 4, 3, divisibility=DIV)
    ptx = ck.asm["ptx"]
    inval = ptx.rindex("mbarrier.inval", 0, ptx.index("mbarrier.init", ptx.index("mbarrier.inval")))
    second_init = ptx.index("mbarrier.init", inval)
    between = ptx[inval:second_init]
    fence = between.find("fence.proxy.async.shared::cta;")
    assert fence >= 0 and re.search(r"bar\.sync\s+0;", between[fence:])
    ops = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", ln).rstrip(" ;")
           for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]
    tma = [i for i, o in enumerate(ops) if "UTMALDG" in o]
    hgmma = [i for i, o in enumerate(ops) if o.startswith("HGMMA")]
    # the second loop's prologue copies come after the first loop's last HGMMA
    last_first_loop = max(i for i in hgmma if i < tma[len(tma) // 2])
    gap = ops[last_first_loop:tma[len(tma) // 2]]
    fence_at = next(i for i, o in enumerate(gap) if o.startswith("FENCE.VIEW.ASYNC.S"))
    assert any(o.startswith("BAR.SYNC") for o in gap[fence_at:])


def test_tutorial_06_backward_fits_an_h100(reuse, monkeypatch):
    """Our kernel in the shape of tutorial 06's ``_attn_bwd`` at its configuration (HEAD_DIM 128, causal,
    4 warps, 5 stages): 263168 bytes of shared memory without the pass (over the H100's 232448), 115712 with
    it -- K and V (in place, 64 KB) and the largest ring (40 KB) of the dK/dV loops, then Q and dO (staged,
    64 KB) and the largest ring of the dQ loops in the same bytes (Triton 3.6: 148480); the dK, dV and dQ
    stores' conversions to 16-byte stores (passes/coalesce.py) take bytes those buffers no longer hold. With
    KERNELC_RING_VIEWS off: Q^T and K^T are not ringed (tests/compiler/test_ring_views.py has them ringed)."""
    monkeypatch.setenv("KERNELC_RING_VIEWS", "0")
    div = dict(stride_bh=16, stride_tok=16, N_CTX=16)
    cx = dict(FB.CONFIG, D=128, CAUSAL=True)
    ck = kcompile(FB.fused_attn_bwd, FB.SIG, cx, "sm_90a", 4, 5, divisibility=div)
    assert ck.shared == 115712 <= 232448
    assert [(op, off) for op, off, _ in _buffers(ck.asm["tir"])] == [
        ("tma_ring_alloc", 0), ("tma_ring_alloc", 32768),              # K, V (one-stage rings: issue_tma_loads_early)
        ("tma_ring_alloc", 65536), ("tma_ring_alloc", 65536),          # dO of the masked, then the full dK/dV loop
        ("convert_layout", 0), ("convert_layout", 0),                  # the dK, dV stores' conversions (over K, V)
        ("stage_operand", 0), ("stage_operand", 32768),                # Q, dO of the dQ loops (over K, V)
        ("ring_alloc", 65536), ("ring_alloc", 65536),                  # K^T of the masked, then the full dQ loop
        ("convert_layout", 0)]                                         # the dQ store's conversion
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "0")
    with pytest.raises(OutOfResources, match="263168"):
        kcompile(FB.fused_attn_bwd, FB.SIG, cx, "sm_90a", 4, 5, divisibility=div)


@pytest.mark.gpu
@pytest.mark.parametrize("causal,D", [(True, 128), (False, 128), (True, 64)])
def test_gpu_fused_attention_backward_with_shared_rings(reuse, causal, D):
    """On a Hopper GPU, with the pass: the tutorial-shaped backward (its four loops' buffers sharing
    bytes) against torch autograd."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    from kernelc.runtime.launcher import get_state
    get_state(FB.fused_attn_bwd)["cache"].clear()  # the knob is read at compile time
    torch.manual_seed(0)
    B, H, N = 2, 3, 512
    q, k, v, do = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) * 0.5 for _ in range(4))
    sm_scale = D ** -0.5
    dq, dk, dv = FB.run(q, k, v, do, causal, sm_scale)
    torch.cuda.synchronize()
    rq, rk, rv = FB.reference(q, k, v, do, causal, sm_scale)
    get_state(FB.fused_attn_bwd)["cache"].clear()
    for got, want in ((dq, rq), (dk, rk), (dv, rv)):
        torch.testing.assert_close(got.float(), want, atol=2e-2, rtol=2e-2)


def test_the_tutorial_shaped_backward_is_right_in_the_interpreter(monkeypatch):
    """The kernel the GPU test runs computes the gradients (CPU interpreter, torch autograd as reference)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    torch.manual_seed(0)
    for causal in (True, False):
        q, k, v, do = (torch.randn(1, 2, 256, 64, dtype=torch.float16) * 0.5 for _ in range(4))
        got = FB.run(q, k, v, do, causal, 64 ** -0.5)
        for g, want in zip(got, FB.reference(q, k, v, do, causal, 64 ** -0.5)):
            torch.testing.assert_close(g.float(), want, atol=2e-3, rtol=1e-2)
