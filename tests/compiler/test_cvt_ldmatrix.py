"""A layout conversion of a 16-bit tile read back with ``ldmatrix`` (``shared_layouts.ldmatrix_ok``; the store
layout ``passes/coalesce.py`` picks so that a transposing conversion fits ``.trans``; ``codegen/convert.py``
lowers it).

The numpy model below runs ``ldmatrix``'s documented semantics (PTX ISA, "ldmatrix": lane 8i + j names the
16-byte row j of block i; thread t gets row t / 4, columns 2 (t % 4) + {0, 1} of every block, and ``.trans``
gives it the block transposed: rows 2 (t % 4) + {0, 1}, column t / 4) with the row addresses codegen computes
(``ldmatrix_address_layout``), and checks that every register of every thread receives the element the
destination layout says it holds."""
import re

import numpy as np
import pytest

import kernelc
from kernelc.compiler.layouts import blocked, mma_v2
from kernelc.compiler.passes.coalesce import ldmatrix_store_layout
from kernelc.compiler.shared_layouts import (SharedLayout, conversion_cost, ldmatrix_address_layout, ldmatrix_ok,
                                             plan_fits, plan_shared_layout)
from tests.compiler.transpose_kernels import permute021_3d_kernel, permute021_kernel, transpose_kernel


def _ldmatrix_reads(dst, sl, ebytes=2):
    """(coords[n, rank] each register should hold, byte offset[n] ldmatrix gives it) for every warp, thread and
    register of ``dst``."""
    trans = sl.read_op.endswith(".trans")
    rows = ldmatrix_address_layout(dst, trans)
    W, G = dst.num_warps, dst.num_regs // 8
    th = lambda L: np.array([[L.thread_coord(t, w) for t in range(32)] for w in range(W)])  # noqa: E731
    row_coord = np.array(rows.reg_coords())[None, :, None, :] ^ th(rows)[:, None, :, :]  # [w, g, lane, d]
    starts = sl.offsets(row_coord) * ebytes
    w, g, t, i, k = np.meshgrid(range(W), range(G), range(32), range(4), range(2), indexing="ij")
    reg = 8 * g + 2 * i + k
    coord = np.array(dst.reg_coords())[reg] ^ th(dst)[w, t]
    if trans:   # block i, row 2 (t % 4) + k (named by lane 8i + that row), column t / 4
        at = starts[w, g, 8 * i + 2 * (t & 3) + k] + 2 * (t >> 2)
    else:       # block i, row t / 4, column 2 (t % 4) + k
        at = starts[w, g, 8 * i + (t >> 2)] + 2 * (2 * (t & 3) + k)
    return coord.reshape(-1, dst.rank), at.reshape(-1)


# store layouts of a transposed 16-bit tile (the permute's, and 3-D / 8-warp ones) and MMA fragments
TRANS_DST = [blocked((64, 64), (8, 1), (4, 8), (2, 2), (0, 1)),
             blocked((128, 64), (8, 1), (4, 8), (1, 8), (0, 1)),
             blocked((64, 32), (8, 1), (4, 8), (4, 1), (0, 1)),
             blocked((2, 64, 64), (1, 8, 1), (1, 4, 8), (2, 2, 1), (1, 2, 0))]


@pytest.mark.parametrize("dst", TRANS_DST, ids=str)
@pytest.mark.parametrize("swz", [dict(), dict(vec=8, max_phase=8), dict(vec=8, per_phase=2, max_phase=4),
                                 dict(pad=8)])
def test_ldmatrix_trans_reads_every_register_from_its_elements_place(dst, swz):
    inner = dst.rank - 1
    sl = SharedLayout(dst.shape, inner, write_vec=8, read_vec=8, **swz)
    assert ldmatrix_ok(dst, sl, 2) == "ldmatrix.trans"
    sl = SharedLayout(dst.shape, inner, write_vec=8, read_vec=8, read_op="ldmatrix.trans", **swz)
    coords, at = _ldmatrix_reads(dst, sl)
    assert (at == sl.offsets(coords) * 2).all()
    # the model is not vacuous: the plain (untransposed) instruction would read other places
    wrong = SharedLayout(dst.shape, inner, write_vec=8, read_vec=8, read_op="ldmatrix", **swz)
    assert not (_ldmatrix_reads(dst, wrong)[1] == sl.offsets(coords) * 2).all()


@pytest.mark.parametrize("shape,warps", [((64, 64), (4, 1)), ((128, 128), (2, 2))])
@pytest.mark.parametrize("inner,op", [(1, "ldmatrix"), (0, "ldmatrix.trans")])
def test_ldmatrix_reads_mma_fragments(shape, warps, inner, op):
    # register bit 0 and lane bits 0-1 step along the columns, lane bits 2-4 along the rows: a row-major buffer
    # reads plain, a column-major one transposed
    dst = mma_v2(shape, warps)
    assert ldmatrix_ok(dst, SharedLayout(shape, inner, vec=8, max_phase=8), 2) == op
    sl = SharedLayout(shape, inner, vec=8, max_phase=8, write_vec=8, read_vec=8, read_op=op)
    coords, at = _ldmatrix_reads(dst, sl)
    assert (at == sl.offsets(coords) * 2).all()


def test_ldmatrix_refuses_what_it_cannot_read():
    dst = TRANS_DST[0]
    # 32-bit elements, a swizzle unit under 16 bytes, a pad that breaks the 16-byte rows
    assert ldmatrix_ok(dst, SharedLayout((64, 64), 1, write_vec=4, read_vec=4), 4) == ""
    assert ldmatrix_ok(dst, SharedLayout((64, 64), 1, vec=4, max_phase=8), 2) == ""
    assert ldmatrix_ok(dst, SharedLayout((64, 64), 1, pad=4), 2) == ""
    # the blocked store layout with 8 lanes down the column (the coalesced default): lane bit 2 runs along dim 0
    default = blocked((64, 64), (8, 1), (8, 4), (1, 4), (0, 1))
    assert ldmatrix_ok(default, SharedLayout((64, 64), 1, vec=8, max_phase=8), 2) == ""


def test_coalesce_trades_lanes_for_ldmatrix_and_the_plan_is_cheaper():
    src = blocked((64, 64), (1, 8), (4, 8), (4, 1), (1, 0))          # the load's layout (8 fp16 along dim 1)
    want = blocked((64, 64), (8, 1), (8, 4), (1, 4), (0, 1))         # the store's coalesced layout
    alt = ldmatrix_store_layout(src, want, 2)
    assert alt == TRANS_DST[0] and str(alt) == "#blocked<spt=[8, 1], tpw=[4, 8], wpc=[2, 2], order=[0, 1]>"
    plain = plan_shared_layout(src, want, 2, 16)
    lm = plan_shared_layout(src, alt, 2, 16, ldmatrix=True)
    assert lm.read_op == "ldmatrix.trans" and not plain.read_op and plan_fits(src, alt, lm, 2)
    assert not plan_fits(src, want, lm, 2)
    # warp 0's wavefronts: 16-byte writes both ways; 4 ldmatrix reads (rows m, m+1, m+8, ... : the swizzle, a
    # function of consecutive row bits, leaves them 2-way conflicts) cost what 32 scalar reads cost
    assert conversion_cost(src, alt, lm, 2) == (16, 32) == conversion_cost(src, want, plain, 2)
    # a store that already runs along the load's dimension, and 32-bit tiles, keep their layout
    assert ldmatrix_store_layout(src, src, 2) is None
    src32 = blocked((64, 64), (1, 4), (2, 16), (4, 1), (1, 0))
    assert ldmatrix_store_layout(src32, blocked((64, 64), (4, 1), (16, 2), (1, 4), (0, 1)), 4) is None


def _sass_mem(ck):
    return re.findall(r"\b(?:LDSM|STS|LDS|STG|LDG|PRMT)[.\w]*", ck.asm["sass"])


def test_permute_fp16_reads_with_ldmatrix_trans_in_sass(monkeypatch):
    sig = dict(x_ptr="*fp16", y_ptr="*fp16", B="i32", M="i32", N="i32", stride_xb="i32", stride_xm="i32",
               stride_yb="i32", stride_yn="i32")
    kw = dict(target="sm_90a", num_warps=4, divisibility={k: 16 for k in sig})
    ck = kernelc.compile(permute021_kernel, sig, dict(BLOCK_M=64, BLOCK_N=64), **kw)
    ops = _sass_mem(ck)
    # as Triton 3.6: 4 LDSM.16.MT88.4 per thread (Triton also spends 16 PRMT building its stores; we none)
    assert ops.count("LDSM.16.MT88.4") == 4 and ops.count("STS.128") == 4 and ops.count("STG.E.128") == 4, ops
    assert not any(o.startswith("LDS.") or o == "LDS" or o.startswith("PRMT") for o in ops), ops
    (cvt,) = ck.reports["conversions"]
    assert "read=ldmatrix.trans" in cvt["smem"] and (cvt["warp_write_wavefronts"], cvt["warp_read_wavefronts"]) == (16, 32)
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ck.asm["ptx"]
    # KERNELC_CVT_LDMATRIX=0: the store's default layout and scalar shared loads, as before
    monkeypatch.setenv("KERNELC_CVT_LDMATRIX", "0")
    ck0 = kernelc.compile(permute021_kernel, sig, dict(BLOCK_M=64, BLOCK_N=64), **kw)
    ops0 = _sass_mem(ck0)
    assert "LDSM.16.MT88.4" not in ops0 and ops0.count("LDS.U16") == 32 and ops0.count("STG.E.128") == 4, ops0
    # the 3-D tile and the fp32 transpose: ldmatrix where 16-bit, unchanged for 32-bit
    monkeypatch.delenv("KERNELC_CVT_LDMATRIX")
    sig3 = dict(x_ptr="*fp16", y_ptr="*fp16", B="i32", M="i32", N="i32")
    ck3 = kernelc.compile(permute021_3d_kernel, sig3, dict(BLOCK_B=2, BLOCK_M=64, BLOCK_N=64), target="sm_90a",
                          num_warps=4, divisibility={k: 16 for k in sig3})
    assert "LDSM.16.MT88.4" in _sass_mem(ck3) and "STG.E.128" in _sass_mem(ck3)
    sigt = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", stride_ym="i32")
    ckt = kernelc.compile(transpose_kernel, sigt, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a", num_warps=4,
                          divisibility={k: 16 for k in sigt})
    assert "LDSM" not in " ".join(_sass_mem(ckt)) and "ldmatrix" not in ckt.asm["tir"]


# -- the shapes of Triton's unit tests that transpose 16-bit tiles (code nobody here wrote; see
#    transpose_kernels.strided_tile_copy_kernel): the conversion reads with ldmatrix.trans, and not with the knob off

def _compile_both(monkeypatch, kernel, sig, cx, eq1, num_warps=4):
    kw = dict(target="sm_90a", num_warps=num_warps, divisibility={k: 16 for k in sig if k not in eq1},
              equal_to_1=eq1)
    on = kernelc.compile(kernel, sig, cx, **kw)
    monkeypatch.setenv("KERNELC_CVT_LDMATRIX", "0")
    off = kernelc.compile(kernel, sig, cx, **kw)
    monkeypatch.delenv("KERNELC_CVT_LDMATRIX")
    return on, off


@pytest.mark.parametrize("dtype,shape,side", [("fp16", (64, 64), "store"), ("fp16", (128, 128), "load"),
                                              ("bf16", (128, 128), "store")])
def test_triton_permute_shapes_read_with_ldmatrix_trans(monkeypatch, dtype, shape, side):
    from tests.compiler.transpose_kernels import strided_tile_copy_kernel
    sig = dict(x_ptr=f"*{dtype}", sxm="i32", sxn="i32", z_ptr=f"*{dtype}", szm="i32", szn="i32")
    eq1 = ("sxn", "szm") if side == "store" else ("sxm", "szn")   # which side runs against the contiguous one
    on, off = _compile_both(monkeypatch, strided_tile_copy_kernel, sig, dict(BLOCK_M=shape[0], BLOCK_N=shape[1]), eq1)
    vecs = shape[0] * shape[1] // (4 * 32 * 8)   # 8-element vectors a thread: one STG.128 and one ldmatrix.x4 each
    (cvt,) = on.reports["conversions"]
    assert "read=ldmatrix.trans" in cvt["smem"] and _sass_mem(on).count("LDSM.16.MT88.4") == vecs
    assert _sass_mem(on).count("STG.E.128") == _sass_mem(off).count("STG.E.128") == vecs
    assert "LDSM" not in " ".join(_sass_mem(off))
    (cvt0,) = off.reports["conversions"]
    assert "ldmatrix" not in cvt0["smem"]


@pytest.mark.parametrize("num_warps", [2, 4])
def test_dot_product_stored_transposed_reads_with_ldmatrix_trans(monkeypatch, num_warps):
    # Triton's test_dot 'trans' epilogue at 32x32x32: the fp16 product leaves its MMA fragments through shared
    # memory; the read of the transposed store layout is ldmatrix.trans (one x4 per 4 warps)
    from tests.compiler.transpose_kernels import dot_strided_store_kernel
    sig = dict(x_ptr="*fp16", y_ptr="*fp16", z_ptr="*fp16", szm="i32", szn="i32")
    on, off = _compile_both(monkeypatch, dot_strided_store_kernel, sig, dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32),
                            ("szm",), num_warps)
    assert [c["smem"].endswith("read=ldmatrix.trans>") for c in on.reports["conversions"]] == [True]
    assert _sass_mem(on).count("LDSM.16.MT88.4") == 4 // num_warps
    assert "LDSM" not in " ".join(_sass_mem(off)) and "ldmatrix" not in off.asm["ptx"]
