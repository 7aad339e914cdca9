"""A store's conversion through shared memory in pieces (``kernelc/compiler/conversion_pieces.py``): the
coordinate bits both layouts split on, the piece layouts (checked by simulating every thread's shared-memory
writes and reads), the pass's decision (``passes/smem_offsets.py``, ``KERNELC_CVT_PIECES``; golden IR), the
verifier's rule, and the SASS of tutorial 09's flattened pointer persistent kernel at the tuners' configs:
16-byte stores in the shared memory of Triton's (docs/triton-tutorials.md, "09 persistent pointer GEMM: the
epilogue in pieces")."""
import re

import numpy as np
import pytest

from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.conversion_pieces import piece_bases, piece_shape, split_layout
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.core import Op
from kernelc.compiler.layouts import blocked, mma_v2
from kernelc.compiler.passes.smem_offsets import assign_smem_offsets
from kernelc.compiler.shared_layouts import plan_shared_layout
from tests.compiler.filecheck import filecheck
from tests.compiler.test_store_conversion import (H100_SMEM, PDIV, PSIG, UNIT_STRIDES, _passes, _sass_ops,
                                                  ptr_persistent)

# the tuners' picks for 09's matmul_kernel_persistent and the shared memory Triton 3.6 asks for at them
# (flattened loop; docs/triton-tutorials.md, "09/08 pointer-load GEMMs")
TRITON_SHARED = {(128, 256, 8, 4): 229376, (128, 128, 4, 3): 106496}


def _epilogue(bm, bn, warps):
    """The wgmma accumulator of a bm x bn tile (warps along M) and the 16-byte store layout coalesce picks."""
    src = mma_v2((bm, bn), (warps, 1))
    lanes_n = min(32, bn // 8)
    dst = blocked((bm, bn), (1, 8), (32 // lanes_n, lanes_n), (warps, 1), (1, 0))
    return src, dst


@pytest.mark.parametrize("bm,bn,warps,want", [
    (128, 256, 8, ((8, 0),)),            # row bit 3: a register of both (Triton's 2 pieces, 32 KB)
    (128, 128, 4, ((8, 0), (64, 0))),    # and row bit 6 (4 pieces, 8 KB)
    (64, 128, 4, ((8, 0),)),
])
def test_piece_bases_are_the_register_bits_both_layouts_hold(bm, bn, warps, want):
    src, dst = _epilogue(bm, bn, warps)
    assert piece_bases(src, dst, 2) == want
    # never a bit inside a side's vectors: column bits 0-2 are registers of both, but 16-byte runs of the store
    assert (0, 1) in src.reg and (0, 1) in dst.reg and (0, 1) not in piece_bases(src, dst, 2)
    # a bit a lane or warp touches in either layout is no piece bit
    assert piece_bases(src, src.transposed((0, 1)), 2) == piece_bases(src, src, 2)
    assert (16, 0) not in piece_bases(src, dst, 2)           # a warp bit of the accumulator
    assert piece_bases(src, blocked((bm, bn), (1, 8), (32 // min(32, bn // 8), min(32, bn // 8)),
                                    (warps, 1), (1, 0)), 2) == want


def _simulate(src, dst, bases, ebytes=2):
    """Every thread writes its registers of each piece at the piece layout's coordinates in a plan for one
    piece and reads back the destination's: returns dst's registers [warp][lane][reg] as the tile's linear
    element index that lands in them."""
    rows, cols = src.shape
    src_p, src_regs = split_layout(src, bases)
    dst_p, dst_regs = split_layout(dst, bases)
    assert src_p.shape == dst_p.shape == piece_shape(src.shape, bases)
    sl = plan_shared_layout(src_p, dst_p, ebytes, 16, stmatrix=True)
    out = np.full((dst.num_warps, 32, dst.num_regs), -1, dtype=np.int64)
    for p in range(1 << len(bases)):
        smem = {}
        for w in range(src.num_warps):
            for lane in range(32):
                for s, r in enumerate(src_regs[p]):
                    full = np.bitwise_xor(src.thread_coord(lane, w), src.reg_coord(r))
                    piece = np.bitwise_xor(src_p.thread_coord(lane, w), src_p.reg_coord(s))
                    off = int(sl.offsets(np.array(piece))) 
                    assert smem.setdefault(off, full[0] * cols + full[1]) == full[0] * cols + full[1]
        assert len(smem) == src_p.shape[0] * src_p.shape[1]   # one piece, every element once
        for w in range(dst.num_warps):
            for lane in range(32):
                for s, r in enumerate(dst_regs[p]):
                    piece = np.bitwise_xor(dst_p.thread_coord(lane, w), dst_p.reg_coord(s))
                    out[w, lane, r] = smem[int(sl.offsets(np.array(piece)))]
    return out


@pytest.mark.parametrize("bm,bn,warps", [(128, 256, 8), (128, 128, 4), (64, 128, 4)])
def test_every_destination_register_receives_its_element_piece_by_piece(bm, bn, warps):
    src, dst = _epilogue(bm, bn, warps)
    bases = piece_bases(src, dst, 2)
    got = _simulate(src, dst, bases)
    for w in range(dst.num_warps):
        for lane in range(32):
            for r in range(dst.num_regs):
                c = np.bitwise_xor(dst.thread_coord(lane, w), dst.reg_coord(r))
                assert got[w, lane, r] == c[0] * bn + c[1]
    # fewer bases: the same (1 and 2 pieces at 128x128)
    if len(bases) > 1:
        got = _simulate(src, dst, bases[:1])
        assert (got >= 0).all()


def test_split_layout_orders_registers_by_piece():
    src, _ = _epilogue(128, 128, 4)
    sub, regs = split_layout(src, ((8, 0), (64, 0)))
    assert sub.shape == (32, 128) and sub.num_regs == src.num_regs // 4
    assert sorted(r for rs in regs for r in rs) == list(range(src.num_regs))
    for p, rs in enumerate(regs):
        for r in rs:
            c = src.reg_coord(r)
            assert (c[0] >> 3 & 1) == (p & 1) and (c[0] >> 6 & 1) == (p >> 1 & 1)
    # the piece layout still writes 16-bit fragments with stmatrix: the plan says so
    _, dst = _epilogue(128, 128, 4)
    dsub, _ = split_layout(dst, ((8, 0), (64, 0)))
    assert plan_shared_layout(sub, dsub, 2, 16, stmatrix=True).write_op == "stmatrix"


def _flat(monkeypatch, bm, bn, warps, stages, limit=H100_SMEM, pieces=None):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    cx = dict(BM=bm, BN=bn, BK=64, PROGRAMS=132, FLAT=True)
    ir, fn, ctx = _passes(ptr_persistent, PSIG, cx, warps, stages, PDIV, UNIT_STRIDES, upto="issue_tma_loads_early")
    before = ir["issue_tma_loads_early"]
    ctx.smem_limit = limit
    assign_smem_offsets(fn, ctx, enabled=True, pieces=pieces)
    verify(fn)
    from kernelc.compiler.ir import print_function
    return before, print_function(fn), fn, ctx


def test_golden_a_flattened_loops_epilogue_converts_in_two_pieces(monkeypatch):
    """128x256x64, 8 warps, 4 stages, flattened: the 192 KB ring is live across the epilogue. The conversion
    goes in 2 pieces on row bit 3 (pieces=[[8, 0]]) through 32 KB of scratch (the plan of a 64x256 piece);
    the pass adds the attribute and nothing else (no sync ops: the scratch's own barriers order the pieces)."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "all")   # the ring's drain as cp.async.wait_all (default: wait_group 0)
    before, after, fn, ctx = _flat(monkeypatch, 128, 256, 8, 4)
    filecheck(before, """
        CHECK: scf.if
        CHECK: = wgmma_wait {{%\\d+}} {pending=0} : <128x256xfp32>
        CHECK: = convert_layout {{%\\d+}} {layout=#blocked<spt=[1, 8], tpw=[1, 32], wpc=[8, 1], order=[1, 0]>, smem=#shared<inner=1, swizzle=[8, 1, 8], vec=[8, 8], write=stmatrix>} : <128x256xfp16>
        CHECK-NEXT: store
    """)
    filecheck(after, """
        CHECK: = ring_alloc {stages=4, operand='a', smem_buffer={offset=0, bytes=65536}} : <128x64xfp16>
        CHECK-NEXT: = ring_alloc {stages=4, operand='b', smem_buffer={offset=65536, bytes=131072}} : <64x256xfp16>
        CHECK: scf.if
        CHECK: = wgmma_wait {{%\\d+}} {pending=0} : <128x256xfp32>
        CHECK: = convert_layout {{%\\d+}} {layout=#blocked<spt=[1, 8], tpw=[1, 32], wpc=[8, 1], order=[1, 0]>, smem=#shared<inner=1, swizzle=[8, 1, 8], vec=[8, 8], write=stmatrix>, pieces=[[8, 0]]} : <128x256xfp16>
        CHECK-NEXT: store
    """)
    def norm(text):  # attributes the pass writes out, the location column's padding
        text = re.sub(r", (smem_buffer=\{[^}]*\}|pieces=\[[^\]]*\]\])", "", text)
        return [re.sub(r"\s+#", " #", ln) for ln in text.splitlines()[1:]]
    assert norm(after) == norm(before)
    cvt = next(op for op in fn.walk() if op.name == "convert_layout")
    assert cvt.attrs["smem"].shape == (64, 256) and "smem_buffer" not in cvt.attrs
    assert any("in 2 pieces through 32768 bytes" in n and "196608" in n for n in ctx.notes)


def test_golden_four_pieces_at_128x128(monkeypatch):
    """128x128x64, 4 warps, 3 stages: row bits 3 and 6 are registers of both layouts, so 4 pieces of 8 KB,
    Triton's scratch (its 106496 B = 96 KB of ring + 8 KB)."""
    _, after, fn, ctx = _flat(monkeypatch, 128, 128, 4, 3)
    filecheck(after, """
        CHECK: = convert_layout {{%\\d+}} {layout=#blocked<spt=[1, 8], tpw=[2, 16], wpc=[4, 1], order=[1, 0]>, smem=#shared<{{.*}}write=stmatrix>, pieces=[[8, 0], [64, 0]]} : <128x128xfp16>
        CHECK-NEXT: store
    """)
    assert any("in 4 pieces through 8192 bytes" in n for n in ctx.notes)


def test_the_knob_decides_the_pieces(monkeypatch):
    """fit: the fewest pieces that fit (128x128 fits whole beside its 96 KB ring; 128x256 needs 2); off: one
    piece, and a conversion that does not fit is taken out as before; a tighter limit takes more pieces."""
    _, after, _, _ = _flat(monkeypatch, 128, 128, 4, 3, pieces="fit")
    assert "pieces=" not in after and "convert_layout" in after
    _, after, _, _ = _flat(monkeypatch, 128, 256, 8, 4, pieces="fit")
    assert "pieces=[[8, 0]]}" in after
    _, after, _, ctx = _flat(monkeypatch, 128, 256, 8, 4, pieces="off")
    assert "convert_layout" not in after and any("not converted" in n for n in ctx.notes)
    _, after, _, _ = _flat(monkeypatch, 128, 128, 4, 3, limit=98304 + 16384, pieces="fit")
    assert "pieces=[[8, 0]]}" in after
    _, after, _, ctx = _flat(monkeypatch, 128, 128, 4, 3, limit=98304 + 4096, pieces="max")
    assert "convert_layout" not in after    # not even 8 KB fits: taken out, with its note
    assert any("store not converted" in n and "8192 bytes" in n for n in ctx.notes)


def test_the_verifier_checks_the_pieces(monkeypatch):
    _, _, fn, _ = _flat(monkeypatch, 128, 256, 8, 4)
    cvt = next(op for op in fn.walk() if op.name == "convert_layout")
    verify(fn)
    for bad in (((3, 0),), ((8, 8),), ((8, 0), (8, 0))):
        cvt.attrs["pieces"] = bad
        with pytest.raises(Exception, match="pieces must be distinct coordinate bits"):
            verify(fn)
    cvt.attrs["pieces"] = ((16, 0),)
    verify(fn)   # a well-formed bit; the smem plan's shape still fits one piece (64 rows)
    cvt.attrs["pieces"] = ((8, 0), (16, 0))
    with pytest.raises(Exception, match="smem plan of one piece's shape"):
        verify(fn)


def test_codegen_refuses_pieces_the_layouts_do_not_split_on(monkeypatch):
    """A warp bit of the accumulator is no piece: code generation says so instead of mixing threads' data."""
    from kernelc.compiler.codegen import lower_to_llvm
    from kernelc.compiler.backend import parse_target
    from kernelc.errors import CompilationError
    _, _, fn, ctx = _flat(monkeypatch, 128, 256, 8, 4)
    cvt = next(op for op in fn.walk() if op.name == "convert_layout")
    cvt.attrs["pieces"] = ((16, 0),)
    with pytest.raises(CompilationError, match="do not both hold those coordinate bits"):
        lower_to_llvm(fn, ctx.plan, ctx.axis, 8, parse_target("sm_90a"), {})


def _compile(bm, bn, warps, stages, flat=True):
    cx = dict(BM=bm, BN=bn, BK=64, PROGRAMS=132, FLAT=flat)
    return kcompile(ptr_persistent, PSIG, cx, "sm_90a", warps, stages, divisibility=PDIV, equal_to_1=UNIT_STRIDES)


@pytest.mark.parametrize("bm,bn,warps,stages", sorted(TRITON_SHARED))
def test_flattened_epilogue_stores_16_bytes_in_tritons_shared_memory(monkeypatch, bm, bn, warps, stages):
    """Through the whole compile, flattened: 16-byte stores only, one stmatrix.x4 per 8 registers of the
    tile as unsplit, no spills, the shared memory of Triton's flattened kernel; a barrier per piece between
    its writes and its reads and one between pieces."""
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    for v in ("KERNELC_STORE_SMEM_DISCOUNT", "KERNELC_SMEM_REUSE", "KERNELC_CVT_PIECES"):
        monkeypatch.delenv(v, raising=False)
    ck = _compile(bm, bn, warps, stages)
    ops = _sass_ops(ck)
    stg = [o for o in ops if o.startswith("STG")]
    assert stg and set(stg) == {"STG.E.128"}, sorted(set(stg))
    assert ops.count("STSM.16.M88.4") == bm * bn // (32 * warps) // 8
    assert ck.n_spills == 0
    assert ck.shared == TRITON_SHARED[(bm, bn, warps, stages)]
    pieces = 2 if bn == 256 else 4
    assert any(f"in {pieces} pieces" in n for n in ck.compile_log)
    conv = ck.reports["conversions"]
    assert [c.get("pieces") for c in conv] == [pieces]
    monkeypatch.setenv("KERNELC_CVT_PIECES", "off")
    whole = _compile(bm, bn, warps, stages)
    w_ops = _sass_ops(whole)
    bars = ops.count("BAR.SYNC.DEFER_BLOCKING") - w_ops.count("BAR.SYNC.DEFER_BLOCKING")
    if bn == 128:   # one piece fits beside the ring (32 KB more): one barrier, against 4 pieces' 7
        assert whole.shared == 98304 + 32768 and bars == 2 * (pieces - 1)
    else:           # one piece does not fit: taken out, 4-byte stores and no barrier of its own
        assert "STSM.16.M88.4" not in w_ops and "STG.E" in w_ops and bars == 2 * pieces - 1
