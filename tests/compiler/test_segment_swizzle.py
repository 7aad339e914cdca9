"""KERNELC_SMEM_SEGMENT_SWIZZLE (compiler/shared_layouts.py, codegen/convert.py): a row's 128-byte segment index
XORed into its swizzle phase. Golden IR of the fp32 64x64 transpose's conversion with and without it, the
wavefront model for every warp, the layout's bijectivity and vectors, and codegen's offsets against the model."""
import itertools

import numpy as np
import pytest

from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.ir.verifier import verify
from kernelc.compiler.passes.coalesce import coalesce
from kernelc.compiler.shared_layouts import SharedLayout, _plan_shared_layout, access_cost, wavefronts
from tests.compiler.filecheck import filecheck
from tests.compiler.test_coalesce import T_DIV, T_SIG
from tests.compiler.test_coalesce import test_codegen_offset_instructions_match_the_layout as _codegen_matches
from tests.compiler.transpose_kernels import transpose_kernel

SEG = SharedLayout((64, 64), 1, vec=2, per_phase=4, max_phase=16, seg=32, write_vec=2, read_vec=1)


def _transpose_ir(monkeypatch, on):
    if on:
        monkeypatch.setenv("KERNELC_SMEM_SEGMENT_SWIZZLE", "1")
    else:
        monkeypatch.delenv("KERNELC_SMEM_SEGMENT_SWIZZLE", raising=False)
    fn, _ = to_tile_ir(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), divisibility=T_DIV)
    fn = coalesce(fn, 4, 9, "sm_90a")
    verify(fn)
    return fn, print_function(fn, show_loc=False)


def test_transpose_conversion_golden_ir(monkeypatch):
    _, off = _transpose_ir(monkeypatch, False)
    filecheck(off, """
        CHECK: convert_layout {{%\\d+}} {layout=#blocked<spt=[4, 1], tpw=[16, 2], wpc=[1, 4], order=[0, 1]>, smem=#shared<inner=1, swizzle=[4, 4, 8], vec=[4, 1]>} : <64x64xfp32>
    """)
    _, on = _transpose_ir(monkeypatch, True)
    filecheck(on, """
        CHECK: [[X:%\\d+]] = load {{%\\d+}}, [[MASK:%\\d+]] : <64x64xfp32>
        CHECK-NOT: convert_layout
        CHECK: [[Y:%\\d+]] = convert_layout [[X]] {layout=#blocked<spt=[4, 1], tpw=[16, 2], wpc=[1, 4], order=[0, 1]>, smem=#shared<inner=1, swizzle=[2, 4, 16, seg=32], vec=[2, 1]>} : <64x64xfp32>
        CHECK-NEXT: store {{%\\d+}}, [[Y]], [[MASK]]
    """)


def _all_warps(layout, warps=4):
    regs = np.array(layout.reg_coords(), dtype=np.int64).reshape(layout.num_regs, layout.rank)
    for w in range(warps):
        lanes = np.array([layout.thread_coord(l, w) for l in range(32)], dtype=np.int64).reshape(32, layout.rank)
        yield regs[:, None, :] ^ lanes[None, :, :]


def test_every_warp_moves_the_transpose_without_bank_conflicts(monkeypatch):
    """8-byte writes and 4-byte reads at one wavefront per 128 bytes in every warp (64 a warp), where the best
    layout without segments costs 96 (its 4-byte reads hit each bank twice: 16 rows, 8 bank groups)."""
    fn, _ = _transpose_ir(monkeypatch, True)
    cv = next(op for op in fn.walk() if op.name == "convert_layout")
    from kernelc.compiler.passes.axis_info import analyze
    from kernelc.compiler.passes.layout_assign import LayoutAssigner
    src = LayoutAssigner(fn, analyze(fn), 4, 9, "sm_90a").run().get(cv.operands[0])
    dst, sl = cv.attrs["layout"], cv.attrs["smem"]
    assert sl == SEG
    for coords in _all_warps(src):
        assert wavefronts(sl.offsets(coords[::2]) * 4, 8) == 32
    for coords in _all_warps(dst):
        assert wavefronts(sl.offsets(coords) * 4, 4) == 32
    best_without = _plan_shared_layout(src, dst, 4, 16, False, False)
    assert not best_without.seg
    assert access_cost(src, best_without, 4, best_without.write_vec) + \
        access_cost(dst, best_without, 4, best_without.read_vec) == 96


@pytest.mark.parametrize("sl", [SEG, SharedLayout((8, 128), 1, vec=4, per_phase=1, max_phase=8, seg=32),
                                SharedLayout((2, 4, 256), 2, vec=8, per_phase=2, max_phase=8, seg=64)])
def test_segment_layouts_are_bijective_and_keep_vectors_whole(sl):
    coords = np.array(list(itertools.product(*[range(s) for s in sl.shape])))
    offs = sl.offsets(coords)
    assert len(set(offs.tolist())) == len(offs) and offs.max() < sl.nbytes(1)
    runs = coords[coords[:, sl.inner] % sl.vec == 0]
    for k in range(1, sl.vec):
        nxt = runs.copy()
        nxt[:, sl.inner] += k
        assert (sl.offsets(nxt) == sl.offsets(runs) + k).all()
    # the segment index of a column is kept: the swizzle moves words within their 128 bytes only
    assert ((offs % sl.row_len) // sl.seg == coords[:, sl.inner] // sl.seg).all()


@pytest.mark.parametrize("sl", [SEG, SharedLayout((2, 4, 256), 2, vec=8, per_phase=2, max_phase=8, seg=64)])
def test_codegen_offsets_match_segment_layouts(sl):
    _codegen_matches(sl)


def test_the_option_keys_the_plan(monkeypatch):
    from kernelc import options
    from kernelc.compiler.shared_layouts import plan_shared_layout
    assert options.compile_options().key()["smem_segment_swizzle"] is False
    fn, _ = _transpose_ir(monkeypatch, False)
    cv = next(op for op in fn.walk() if op.name == "convert_layout")
    from kernelc.compiler.passes.axis_info import analyze
    from kernelc.compiler.passes.layout_assign import LayoutAssigner
    src = LayoutAssigner(fn, analyze(fn), 4, 9, "sm_90a").run().get(cv.operands[0])
    assert not plan_shared_layout(src, cv.attrs["layout"], 4).seg
    monkeypatch.setenv("KERNELC_SMEM_SEGMENT_SWIZZLE", "1")
    assert options.compile_options().key()["smem_segment_swizzle"] is True
    assert plan_shared_layout(src, cv.attrs["layout"], 4) == SEG
