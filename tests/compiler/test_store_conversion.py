"""A 16-bit MMA accumulator stored through pointers (the epilogue of tutorials 03/09's ``matmul_kernel``):
``passes/coalesce.py`` converts it through shared memory to 16-byte stores (``KERNELC_STORE_SMEM_DISCOUNT``),
``passes/smem_offsets.py`` puts the conversion's buffer in the finished ring's bytes (golden IR), or takes
the conversion out where its buffer would not fit beside a ring that is still live (a persistent tile
loop); the SASS of the epilogue; and the shared memory it takes (docs/triton-tutorials.md, "09/08
pointer-load GEMMs")."""
import re

import pytest

import kernelc
import kernelc.language as kl

from examples.kernels.matmul import matmul_kernel
from kernelc.compiler import compiler as C
from kernelc.compiler.backend import parse_target
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir import verify
from kernelc.compiler.pass_manager import PassContext, run_passes
from kernelc.compiler.passes.smem_offsets import assign_smem_offsets
from tests.compiler.filecheck import filecheck
from tests.compiler.test_codegen_sass import MM_SIG, UNIT_STRIDES

DIV = {n: 16 for n in MM_SIG}
PSIG = dict(MM_SIG)
PDIV = DIV


@kernelc.jit
def ptr_persistent(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr, PROGRAMS: kl.constexpr,
                   FLAT: kl.constexpr = False):
    """One program per SM walks the C tiles (column of tiles after column); the K loop reads A and B through
    pointers masked on K only (rows and columns past the edge wrap, their results are not stored)."""
    n_m = kl.cdiv(M, BM)
    n_tiles = n_m * kl.cdiv(N, BN)
    kk = kl.arange(0, BK)
    for t in kl.range(kl.program_id(0), n_tiles, PROGRAMS, flatten=FLAT):
        rows = (t % n_m) * BM + kl.arange(0, BM)
        cols = (t // n_m) * BN + kl.arange(0, BN)
        ra = rows % M
        cb = cols % N
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(kl.cdiv(K, BK)):
            ks = k * BK + kk
            a = kl.load(a_ptr + ra[:, None] * stride_am + ks[None, :] * stride_ak, mask=ks[None, :] < K, other=0.0)
            b = kl.load(b_ptr + ks[:, None] * stride_bk + cb[None, :] * stride_bn, mask=ks[:, None] < K, other=0.0)
            acc = kl.dot(a, b, acc)
        c = acc.to(kl.float16)
        kl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
                 mask=(rows[:, None] < M) & (cols[None, :] < N))
H100_SMEM = 232448


def _cx(bm, bn, bk):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8)


def _passes(kernel, sig, cx, num_warps, num_stages, div, equal_to_1=(), upto=None):
    """{pass name: IR text after it} through the tile pipeline for sm_90a (as ``kernelc.compile`` runs it, with
    unit strides as constants), the function and the pass context (no shared-memory limit: tests set one)."""
    tgt = parse_target("sm_90a")
    fn, _ = generate_ir(C._base_function(kernel), sig, cx, div, equal_to_1, arch=tgt.arch, num_warps=num_warps)
    ctx = PassContext(tgt.arch, tuple(tgt.capability), num_warps, num_stages=num_stages)
    out = {}
    sink = lambda name, text: out.__setitem__(name, text)  # noqa: E731
    fn = run_passes(fn, C.FRONTEND_PASSES, ctx, verify_each=False, dump=sink)
    passes = C.TILE_PASSES
    if upto is not None:
        passes = passes[:[p.name for p in passes].index(upto) + 1]
    fn = run_passes(fn, passes, ctx, dump=sink)
    return out, fn, ctx


def _sass_ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0]
            for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]


@pytest.fixture
def discount4(monkeypatch):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")


def test_golden_the_epilogue_conversion_takes_the_rings_bytes(discount4, monkeypatch):
    """128x128x64, 4 warps, 3 stages on sm_90a: the A and B rings (3 x 16 KB each) end with the K loop; the
    store's conversion (32 KB) is placed at offset 0, after the copies are waited for (again: the pass writes
    its own wait, as before any reuse of a cp.async ring's bytes), a fence and a barrier."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "all")   # the full form (the default, needed: test_reuse_sync.py)
    ir, fn, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES)
    before, after = ir["issue_tma_loads_early"], ir["assign_smem_offsets"]
    filecheck(before, """
        CHECK: = ring_alloc {stages=3, operand='a'} : <128x64xfp16>
        CHECK: = scf.for
        CHECK: async_wait_all
        CHECK: = convert_layout {{%\\d+}} {layout=#blocked<spt=[1, 8], tpw=[2, 16], wpc=[4, 1], order=[1, 0]>, smem=#shared<{{.*}}write=stmatrix>} : <128x128xfp16>
        CHECK-NEXT: store
    """)
    filecheck(after, """
        CHECK: = ring_alloc {stages=3, operand='a', smem_buffer={offset=0, bytes=49152}} : <128x64xfp16>
        CHECK-NEXT: = ring_alloc {stages=3, operand='b', smem_buffer={offset=49152, bytes=49152}} : <64x128xfp16>
        CHECK: = scf.for
        CHECK: async_wait_all
        CHECK: async_wait_all
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = convert_layout {{%\\d+}} {layout={{.*}}smem_buffer={offset=0, bytes=32768}} : <128x128xfp16>
        CHECK-NEXT: store
    """)
    # the pass adds the attributes and the three sync ops, nothing else
    stripped = re.sub(r", smem_buffer=\{[^}]*\}", "", after).splitlines()
    assert len(stripped) == len(before.splitlines()) + 3
    verify(fn)


def test_the_discount_decides_the_conversion(monkeypatch):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "1")
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES, upto="coalesce")
    assert "convert_layout" not in ir["coalesce"]
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
    ir, _, ctx = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES, upto="coalesce")
    assert ir["coalesce"].count("convert_layout") == 1
    assert any("store converted to its coalesced layout" in n for n in ctx.notes)


@pytest.mark.parametrize("bm,bn,warps,stages", [(128, 128, 4, 3), (128, 256, 8, 4), (128, 256, 8, 3)])
def test_the_epilogue_stores_16_bytes_in_no_more_shared_memory(discount4, monkeypatch, bm, bn, warps, stages):
    """The tuners' configs of tutorial 09's ``matmul_kernel``: stmatrix into the ring's bytes, 16-byte loads
    back and 16-byte global stores (Triton's epilogue), no spills, and the shared memory of the rings alone --
    128x256x64 with 4 stages (192 KB of ring plus 64 KB of conversion) still fits an H100."""
    ck = kcompile(matmul_kernel, MM_SIG, _cx(bm, bn, 64), "sm_90a", warps, stages, divisibility=DIV,
                  equal_to_1=UNIT_STRIDES)
    ops = _sass_ops(ck)
    stg = [o for o in ops if o.startswith("STG")]
    assert stg and set(stg) == {"STG.E.128"}, sorted(set(stg))
    assert ops.count("STSM.16.M88.4") == bm * bn // (32 * warps) // 8
    assert ck.n_spills == 0
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "1")
    old = kcompile(matmul_kernel, MM_SIG, _cx(bm, bn, 64), "sm_90a", warps, stages, divisibility=DIV,
                   equal_to_1=UNIT_STRIDES)
    assert ck.shared == old.shared <= H100_SMEM
    assert "STG.E.128" not in _sass_ops(old)


def _persistent(monkeypatch, bm, bn, warps, stages, limit, flat=False):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
    cx = dict(BM=bm, BN=bn, BK=64, PROGRAMS=132, FLAT=flat)
    _, fn, ctx = _passes(ptr_persistent, PSIG, cx, warps, stages, PDIV, UNIT_STRIDES, upto="issue_tma_loads_early")
    ctx.smem_limit = limit
    assign_smem_offsets(fn, ctx, enabled=True)
    verify(fn)
    return fn, ctx


def test_golden_a_persistent_tile_loop_converts_in_its_drained_ring(discount4, monkeypatch):
    """Not flattened, the tile loop allocates its ring, fills and drains it per tile: after the K loop the
    conversion (64 KB at 128x256) takes the ring's bytes, counted in the loop body, between the ring's copies
    waited for + fence + barrier and a barrier after it (the next tile's copies write the same bytes)."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "all")   # the full form (the default, needed: test_reuse_sync.py)
    ir, fn, _ = _passes(ptr_persistent, PSIG, dict(BM=128, BN=256, BK=64, PROGRAMS=132), 8, 4, PDIV, UNIT_STRIDES)
    filecheck(ir["assign_smem_offsets"], """
        CHECK: scf.for
        CHECK-NEXT: ^body
        CHECK: = ring_alloc {stages=4, operand='a', smem_buffer={offset=0, bytes=65536}} : <128x64xfp16>
        CHECK-NEXT: = ring_alloc {stages=4, operand='b', smem_buffer={offset=65536, bytes=131072}} : <64x256xfp16>
        CHECK: = scf.for
        CHECK: = wgmma_wait
        CHECK-NEXT: async_wait_all
        CHECK: async_wait_all
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = convert_layout {{%\\d+}} {layout={{.*}}smem_buffer={offset=0, bytes=65536}} : <128x256xfp16>
        CHECK-NEXT: barrier
        CHECK-NEXT: store
        CHECK-NEXT: scf.yield
    """)
    verify(fn)


def test_a_conversion_beside_a_live_ring_that_would_not_fit_is_taken_out(discount4, monkeypatch):
    """Flattened, the ring is live across the epilogue (the next tile's copies are in flight): 128x256x64 with
    4 stages has 192 KB of ring, and the conversion's 64 KB would take it past an H100's 227 KB. The pass takes
    the conversion out (the store keeps the accumulator's layout) and says why; with room to spare it stays,
    in the per-op scratch. (With one piece, ``KERNELC_CVT_PIECES=off``: by default it goes in pieces,
    tests/compiler/test_cvt_pieces.py.)"""
    monkeypatch.setenv("KERNELC_CVT_PIECES", "off")
    fn, ctx = _persistent(monkeypatch, 128, 256, 8, 4, H100_SMEM, flat=True)
    assert not any(op.name == "convert_layout" for op in fn.walk())
    notes = [n for n in ctx.notes if "not converted" in n]
    assert notes and all("65536 bytes" in n and "196608" in n and str(H100_SMEM) in n for n in notes)
    fn, ctx = _persistent(monkeypatch, 128, 256, 8, 4, 1 << 20, flat=True)
    cvts = [op for op in fn.walk() if op.name == "convert_layout"]
    assert cvts and all("smem_buffer" not in c.attrs for c in cvts)   # beside the live ring: the scratch
    assert not [n for n in ctx.notes if "not converted" in n]


def test_persistent_configs_store_16_bytes_in_no_more_shared_memory(discount4, monkeypatch):
    """Through the whole compile, not flattened: both tuners' configs of 09's persistent kernel convert in the
    drained ring's bytes, store 16 bytes at a time and take the shared memory of main's epilogue."""
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "0")
    for bm, bn, warps, stages in ((128, 256, 8, 4), (128, 128, 4, 3)):
        cx = dict(BM=bm, BN=bn, BK=64, PROGRAMS=132)
        ck = kcompile(ptr_persistent, PSIG, cx, "sm_90a", warps, stages, divisibility=PDIV, equal_to_1=UNIT_STRIDES)
        assert ck.n_spills == 0
        assert set(o for o in _sass_ops(ck) if o.startswith("STG")) == {"STG.E.128"}
        monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "1")
        old = kcompile(ptr_persistent, PSIG, cx, "sm_90a", warps, stages, divisibility=PDIV, equal_to_1=UNIT_STRIDES)
        monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
        assert ck.shared == old.shared <= H100_SMEM
