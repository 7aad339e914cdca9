"""The epilogue's layout conversion of a 16-bit MMA accumulator: written to shared memory with
``stmatrix`` (``shared_layouts.stmatrix_fit`` / ``_stmatrix_ok``, chosen by ``coalesce`` on sm_90 and
written into the ``convert_layout``'s ``smem`` attribute; ``codegen/convert.py`` lowers it).

The numpy model below runs ``stmatrix``'s documented semantics (PTX ISA, "stmatrix": lane 8i + j
addresses row j of block i; thread t holds row t / 4, columns 2 (t % 4) + {0, 1} of every block, and
``.trans`` stores the block transposed) with the addresses codegen computes
(``stmatrix_address_layout``) and checks that every element lands where the shared layout puts it."""
import collections
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.layouts import default_blocked, mma_v2
from kernelc.compiler.shared_layouts import (SharedLayout, _stmatrix_ok, conversion_cost, plan_shared_layout,
                                             stmatrix_address_layout, stmatrix_fit, vector_elems)


def _stmatrix_destinations(src, sl, ebytes=2):
    """(coords[n, rank], byte offset[n]) of every element as every warp's ``stmatrix`` writes store it."""
    trans = sl.write_op.endswith(".trans")
    rows = stmatrix_address_layout(src, trans)
    W, G = src.num_warps, src.num_regs // 8
    th = lambda L: np.array([[L.thread_coord(t, w) for t in range(32)] for w in range(W)])  # noqa: E731
    row_coord = np.array(rows.reg_coords())[None, :, None, :] ^ th(rows)[:, None, :, :]  # [w, g, lane, d]
    starts = sl.offsets(row_coord) * ebytes
    w, g, t, i, k = np.meshgrid(range(W), range(G), range(32), range(4), range(2), indexing="ij")
    reg = 8 * g + 2 * i + k
    coord = np.array(src.reg_coords())[reg] ^ th(src)[w, t]
    r, c = t >> 2, 2 * (t & 3) + k  # the element's place in block i
    at = starts[w, g, 8 * i + c] + 2 * r if trans else starts[w, g, 8 * i + r] + 2 * c
    return coord.reshape(-1, src.rank), at.reshape(-1)


# the accumulators of the tutorial-08 shapes and of our matmul examples (mma_v2's bases are wgmma's too)
CASES = [((128, 128), (4, 1)), ((64, 64), (4, 1)), ((64, 128), (4, 1)), ((128, 256), (8, 1)), ((128, 128), (2, 2)),
         ((256, 128), (8, 1))]


@pytest.mark.parametrize("shape,warps", CASES)
@pytest.mark.parametrize("inner,swz", [(0, dict(vec=8, max_phase=8)), (1, dict(vec=8, max_phase=8)),
                                       (0, dict(pad=8)), (1, dict(vec=8, per_phase=2, max_phase=4))])
def test_stmatrix_writes_every_element_where_the_shared_layout_puts_it(shape, warps, inner, swz):
    src = mma_v2(shape, warps)
    assert stmatrix_fit(src, 2) == (0, 1)
    sl = SharedLayout(shape, inner, write_vec=8, **swz)
    op = _stmatrix_ok(src, sl, 2)
    # the buffer runs along the rows (inner=0, column-major): the blocks are stored transposed
    assert op == ("stmatrix.trans" if inner == 0 else "stmatrix")
    sl = SharedLayout(shape, inner, write_vec=8, write_op=op, **swz)
    coords, at = _stmatrix_destinations(src, sl)
    # every element exactly once, at the offset the shared layout gives it
    assert len({tuple(c) for c in coords.tolist()}) == len(coords) == shape[0] * shape[1]
    assert (at == sl.offsets(coords) * 2).all()


@pytest.mark.parametrize("shape,warps", CASES)
def test_the_plan_takes_stmatrix_for_a_column_major_store_layout(shape, warps):
    # tutorial 08's C store (alignment unknown: one element a thread per access, order (1, 0)): a
    # thread's registers run down the columns, so the buffer is column-major and written by
    # stmatrix.trans (Triton 3.6: STSM.16.MT88.4), read with 16-byte loads
    src = mma_v2(shape, warps)
    dst = default_blocked(shape, warps[0] * warps[1], (1, 0), vec=1)
    sl = plan_shared_layout(src, dst, 2, 16, stmatrix=True)
    w, r = conversion_cost(src, dst, sl, 2)
    plain = plan_shared_layout(src, dst, 2, 16, stmatrix=False)
    assert not plain.write_op and plain.write_vec <= 2
    pw, pr = conversion_cost(src, dst, plain, 2)
    # where a thread holds whole 8-row runs of a column the buffer is column-major (reads of 16 bytes);
    # otherwise (64x64 on 4 warps, 256x128 on 8) row-major, read 2 bytes at a time
    if vector_elems(dst, 0, 8) == 8:
        assert sl.write_op == "stmatrix.trans" and sl.inner == 0 and sl.read_vec == 8, sl
    else:
        assert sl.write_op == "stmatrix" and sl.inner == 1, sl
    assert (vector_elems(dst, 0, 8) == 8) == (shape in ((128, 128), (64, 128), (128, 256)))
    # conflict-free writes (one wavefront per 128 bytes), and never dearer than shared stores
    assert w == src.num_regs * 32 * 2 // 128 and w + r <= pw + pr, (sl, w, r, plain, pw, pr)


def test_layouts_stmatrix_cannot_write_keep_shared_stores():
    # 32-bit elements, a blocked layout, and a layout without 8 registers a thread
    assert stmatrix_fit(mma_v2((128, 128), (4, 1)), 4) is None
    assert stmatrix_fit(default_blocked((64, 64), 4, (1, 0), vec=8), 2) is None
    src = mma_v2((16, 8), (1, 1))  # 4 registers: no x4 instruction
    assert stmatrix_fit(src, 2) is None
    dst = default_blocked((16, 8), 1, (0, 1), vec=1)
    assert not plan_shared_layout(src, dst, 2, 16, stmatrix=True).write_op
    # a swizzle or padding that splits a 16-byte row is never paired with stmatrix
    src = mma_v2((64, 64), (4, 1))
    assert _stmatrix_ok(src, SharedLayout((64, 64), 0, vec=4, max_phase=8), 2) == ""
    assert _stmatrix_ok(src, SharedLayout((64, 64), 0, pad=4), 2) == ""
    assert _stmatrix_ok(src, SharedLayout((64, 64), 0, vec=8, max_phase=8), 2) == "stmatrix.trans"
    assert _stmatrix_ok(src, SharedLayout((64, 64), 1, pad=8), 2) == "stmatrix"


# -- a grouped GEMM with tutorial 08's structure (pointer loads, C's address and ldc loaded) ---------


@kernelc.jit
def grouped_ptr_gemm(a_table, b_table, c_table, dims, lds, n_problems, NUM_PROGRAMS: kl.constexpr,
                     BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    """C_p = A_p @ B_p for problems p (fp16, row-major, sizes dims[p, 0..2], leading dims lds[p, 0..2],
    addresses in the int64 tables); program ``pid`` takes tiles pid, pid + NUM_PROGRAMS, ... laid end to
    end over the problems. Full tiles only (M, N multiples of BM, BN and K of BK)."""
    tile = kl.program_id(0)
    first = 0
    for p in range(n_problems):
        n_tiles = kl.cdiv(kl.load(dims + 3 * p + 1), BN)
        count = kl.cdiv(kl.load(dims + 3 * p), BM) * n_tiles
        while tile >= first and tile < first + count:
            ldb = kl.load(lds + 3 * p + 1)
            ldc = kl.load(lds + 3 * p + 2)
            a = kl.load(a_table + p).to(kl.pointer_type(kl.float16))
            b = kl.load(b_table + p).to(kl.pointer_type(kl.float16))
            c = kl.load(c_table + p).to(kl.pointer_type(kl.float16))
            rm = (tile - first) // n_tiles * BM + kl.arange(0, BM)
            rn = (tile - first) % n_tiles * BN + kl.arange(0, BN)
            pa = a + rm[:, None] * kl.load(lds + 3 * p) + kl.arange(0, BK)[None, :]
            pb = b + kl.arange(0, BK)[:, None] * ldb + rn[None, :]
            acc = kl.zeros((BM, BN), dtype=kl.float32)
            for _ in range(0, kl.cdiv(kl.load(dims + 3 * p + 2), BK)):
                kl.multiple_of(pa, [16, 16])
                kl.multiple_of(pb, [16, 16])
                acc += kl.dot(kl.load(pa), kl.load(pb))
                pa += BK
                pb += BK * ldb
            kl.store(c + ldc * rm[:, None] + rn[None, :], acc.to(kl.float16))
            tile += NUM_PROGRAMS
        first = first + count


GSIG = {"a_table": "*i64", "b_table": "*i64", "c_table": "*i64", "dims": "*i32", "lds": "*i32", "n_problems": "i32"}


def _sass_mem(ck):
    return collections.Counter(re.findall(r"\b((?:STSM|STS|LDS|STL|LDL)[A-Z0-9._]*)", ck.asm["sass"]))


@pytest.mark.parametrize("bm,bn,bk,write,stsm,lds", [(128, 128, 64, "stmatrix.trans", "STSM.16.MT88.4", "LDS.128"),
                                                     (64, 64, 32, "stmatrix", "STSM.16.M88.4", "LDS.U16")])
def test_grouped_gemm_epilogue_writes_with_stmatrix(bm, bn, bk, write, stsm, lds):
    ck = kernelc.compile(grouped_ptr_gemm, signature=GSIG, constexprs=dict(NUM_PROGRAMS=132, BM=bm, BN=bn, BK=bk),
                         target="sm_90a", num_warps=4, num_stages=3)
    cvts = re.findall(r"convert_layout .*", ck.asm["tir"])
    assert len(cvts) == 1 and f"write={write}>" in cvts[0] and "#mma" not in cvts[0], cvts
    ops = _sass_mem(ck)
    # one x4 stmatrix per 8 accumulator halves a thread (bm * bn / 128 threads / 8), no 2-byte shared stores
    assert ops[stsm] == bm * bn // 128 // 8 and not any(o.startswith("STS.") or o == "STS" for o in ops), ops
    assert ops[lds] == bm * bn // 128 // (8 if lds == "LDS.128" else 1), ops
    assert ck.n_spills == 0 and ck.local_bytes == 0 and not ops["STL"] and not ops["LDL"]
    assert "stmatrix.sync.aligned.m8n8.x4" in ck.asm["ptx"]


def test_before_sm90_the_epilogue_keeps_shared_stores():
    ck = kernelc.compile(grouped_ptr_gemm, signature=GSIG, constexprs=dict(NUM_PROGRAMS=132, BM=64, BN=64, BK=32),
                         target="sm_80", num_warps=4, num_stages=3)
    assert "convert_layout" in ck.asm["tir"] and "write=stmatrix" not in ck.asm["tir"]
    assert "stmatrix.sync" not in ck.asm["ptx"]


# -- golden IR: the decisions the coalesce pass writes ----------------------------------------------


def _coalesced(kernel, sig, cx, arch_major, num_warps=4):
    from kernelc.compiler.compiler import to_tile_ir
    from kernelc.compiler.ir.printer import print_function
    from kernelc.compiler.ir.verifier import verify
    from kernelc.compiler.passes.coalesce import coalesce
    fn, _ = to_tile_ir(kernel, sig, cx, divisibility={k: 16 for k in sig})
    before = print_function(fn, show_loc=False)
    fn = coalesce(fn, num_warps, arch_major, f"sm_{arch_major}0{'a' if arch_major == 9 else ''}")
    verify(fn)
    return before, print_function(fn, show_loc=False)


@pytest.mark.parametrize("arch_major", [9, 8])
def test_golden_ir_the_epilogue_conversion_records_stmatrix(arch_major):
    from tests.compiler.filecheck import filecheck
    before, after = _coalesced(grouped_ptr_gemm, GSIG, dict(NUM_PROGRAMS=132, BM=128, BN=128, BK=64), arch_major)
    filecheck(before, """
        CHECK: [[C:%\\d+]] = cast {{%\\d+}} {rounding='rtne'} : <128x128xfp16>
        CHECK-NOT: convert_layout
        CHECK: store {{%\\d+}}, [[C]]
    """)
    # the C store's addresses are of unknown alignment: one element a thread per access, a thread's 128
    # elements down a column; the buffer is column-major, written with stmatrix.trans on sm_90 (before:
    # one 2-byte shared store per element, as on sm_80)
    write = "[8, 8], write=stmatrix.trans" if arch_major == 9 else "[1, 8]"
    filecheck(after, """
        CHECK: [[C:%\\d+]] = cast {{%\\d+}} {rounding='rtne'} : <128x128xfp16>
        CHECK-NEXT: [[Y:%\\d+]] = convert_layout [[C]] {layout=#blocked<spt=[1, 1], tpw=[1, 32], wpc=[1, 4], order=[1, 0]>, smem=#shared<inner=0, swizzle=[8, 1, 8], vec=%s>} : <128x128xfp16>
        CHECK-NEXT: store {{%%\\d+}}, [[Y]]
    """.replace("%s", write).replace("%%", "%"))
