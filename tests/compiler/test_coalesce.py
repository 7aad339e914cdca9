"""The coalescing pass (passes/coalesce.py), the convert_layout op and shared-memory layouts
(compiler/shared_layouts.py): golden IR before -> after, SASS vector widths on CPU, the cost model,
and that existing kernels gain no conversion."""
import itertools
import re

import numpy as np
import pytest

import kernelc
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.ir.verifier import VerificationError, verify
from kernelc.compiler.layouts import default_blocked
from kernelc.compiler.passes.coalesce import coalesce, count_conversions, global_sectors
from kernelc.compiler.passes.axis_info import AxisInfo
from kernelc.compiler.shared_layouts import (SharedLayout, conversion_cost, plan_shared_layout, vector_elems,
                                             wavefronts)
from tests.compiler import ir_eval
from tests.compiler.filecheck import filecheck
from tests.compiler.transpose_kernels import (copy_kernel, permute021_3d_kernel, permute021_kernel, row_scale_kernel,
                                              transpose_kernel)

T_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", stride_ym="i32")
T_DIV = {k: 16 for k in T_SIG}
P_SIG = dict(x_ptr="*fp16", y_ptr="*fp16", B="i32", M="i32", N="i32", stride_xb="i32", stride_xm="i32",
             stride_yb="i32", stride_yn="i32")
P3_SIG = dict(x_ptr="*fp16", y_ptr="*fp16", B="i32", M="i32", N="i32")


def _coalesced(kernel, sig, cx, div, num_warps=4):
    fn, _ = to_tile_ir(kernel, sig, cx, divisibility=div)
    before = print_function(fn, show_loc=False)
    notes = []
    fn = coalesce(fn, num_warps, 9, "sm_90a", notes)
    verify(fn)
    return before, fn, notes


def _mem_ops(ck):
    return sorted(set(re.findall(r"\b(?:STG|LDG|STS|LDS)[.\w]*", ck.asm["sass"])))


# -- golden IR -------------------------------------------------------------------------------------

def test_transpose_store_gets_a_conversion_to_its_coalesced_layout():
    before, fn, notes = _coalesced(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), T_DIV)
    filecheck(before, """
        CHECK: [[X:%\\d+]] = load {{%\\d+}}, [[MASK:%\\d+]] : <64x64xfp32>
        CHECK-NOT: convert_layout
        CHECK: store [[PTR:%\\d+]], [[X]], [[MASK]]
    """)
    filecheck(print_function(fn, show_loc=False), """
        CHECK: [[X:%\\d+]] = load {{%\\d+}}, [[MASK:%\\d+]] : <64x64xfp32>
        CHECK-NOT: convert_layout
        CHECK: [[Y:%\\d+]] = convert_layout [[X]] {layout=#blocked<spt=[4, 1], tpw=[16, 2], wpc=[1, 4], order=[0, 1]>, smem=#shared<inner=1, swizzle=[4, 4, 8], vec=[4, 1]>} : <64x64xfp32>
        CHECK-NEXT: store {{%\\d+}}, [[Y]], [[MASK]]
        CHECK-NEXT: return
    """)
    assert count_conversions(fn) == 1 and "fewer sectors per warp" in notes[0]


def test_permute_021_fp16_golden_ir():
    _, fn, _ = _coalesced(permute021_kernel, P_SIG, dict(BLOCK_M=64, BLOCK_N=64), {k: 16 for k in P_SIG})
    filecheck(print_function(fn, show_loc=False), """
        CHECK: [[X:%\\d+]] = load {{.*}} : <64x64xfp16>
        CHECK: [[Y:%\\d+]] = convert_layout [[X]] {layout=#blocked<spt=[8, 1], tpw=[4, 8], wpc=[2, 2], order=[0, 1]>, smem=#shared<inner=1, swizzle=[8, 8, 4], vec=[8, 8], read=ldmatrix.trans>}
        CHECK-NEXT: store {{%\\d+}}, [[Y]]
    """)


def test_same_direction_store_and_unaligned_transpose_stay_unconverted():
    # loads and stores along one dimension: nothing to convert
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride="i32")
    _, fn, _ = _coalesced(copy_kernel, sig, dict(BLOCK_M=32, BLOCK_N=64), {k: 16 for k in sig})
    assert count_conversions(fn) == 0
    # a transposed store whose addresses are not contiguous at all (unknown stride on both dims):
    # no layout makes it coalesced, so no conversion pays
    _, fn, _ = _coalesced(copy_kernel, sig, dict(BLOCK_M=32, BLOCK_N=64), {})
    assert count_conversions(fn) == 0


def test_coalesced_ir_keeps_the_kernels_meaning():
    """Run the converted IR with the numpy IR evaluator on a non-power-of-two matrix (masked edges)."""
    _, fn, _ = _coalesced(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), T_DIV)
    assert count_conversions(fn) == 1
    M, N = 100, 70
    x = np.arange(M * N, dtype=np.float64)
    y = np.full(N * M, -1.0)
    for pid in itertools.product(range(2), range(3)):
        ir_eval.run(fn, dict(x_ptr="x", y_ptr="y", M=M, N=N, stride_xm=N, stride_ym=M), {"x": x, "y": y},
                    pid=pid + (0,), nprog=(2, 3, 1))
    np.testing.assert_array_equal(y.reshape(N, M), x.reshape(M, N).T)


def test_broadcast_row_converts_before_the_broadcast():
    """A row broadcast over a tile: the 64-element row converts (explicitly, in the IR), not the tile."""
    sig = dict(x_ptr="*fp32", s_ptr="*fp32", y_ptr="*fp32", N="i32")
    _, fn, _ = _coalesced(row_scale_kernel, sig, dict(BLOCK_H=32, BLOCK_D=64), {k: 16 for k in sig}, num_warps=8)
    filecheck(print_function(fn, show_loc=False), """
        CHECK: [[ROW:%\\d+]] = load {{%\\d+}} : <64xfp32>
        CHECK: [[TILE:%\\d+]] = load {{%\\d+}} : <32x64xfp32>
        CHECK-NEXT: [[E:%\\d+]] = expand_dims [[ROW]] {axis=0} : <1x64xfp32>
        CHECK-NEXT: [[C:%\\d+]] = convert_layout [[E]] {layout=#derived<shape=[1, 64], {{.*}}} : <1x64xfp32>
        CHECK-NEXT: [[B:%\\d+]] = broadcast [[C]] : <32x64xfp32>
        CHECK-NEXT: {{%\\d+}} = fmul [[TILE]], [[B]] : <32x64xfp32>
    """)
    assert count_conversions(fn) == 1


def test_lowering_makes_no_conversion_the_ir_does_not_show(monkeypatch):
    """After the pass every shared-memory conversion is a convert_layout op: codegen's own fallback
    (Lowering.convert through shared memory) is never reached. The row's load keeps its coalesced layout
    (KERNELC_USE_LAYOUT_LOADS=loops), so the conversion is there to lower; by default the row is loaded in
    the tile's column layout and nothing converts."""
    from kernelc.compiler.codegen import convert as CV
    calls = []
    monkeypatch.setattr(CV, "convert_through_smem", lambda *a, **k: calls.append(1))
    sig = dict(x_ptr="*fp32", s_ptr="*fp32", y_ptr="*fp32", N="i32")
    for mode, conversions in (("loops", 1), ("all", 0)):
        monkeypatch.setenv("KERNELC_USE_LAYOUT_LOADS", mode)
        ck = kernelc.compile(row_scale_kernel, sig, dict(BLOCK_H=32, BLOCK_D=64), target="sm_90a", num_warps=8,
                             divisibility={k: 16 for k in sig})
        assert calls == [] and ck.asm["tir"].count("convert_layout") == conversions and "STG.E.128" in _mem_ops(ck)
        assert ("bar.sync" in ck.asm["ptx"]) == bool(conversions), mode


def test_verifier_rejects_a_bad_convert_layout():
    _, fn, _ = _coalesced(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), T_DIV)
    cvt = next(o for o in fn.walk() if o.name == "convert_layout")
    cvt.attrs["layout"] = default_blocked((32, 64), 4)
    with pytest.raises(VerificationError, match=r"layout shape \[32, 64\] differs from the tile shape \[64, 64\]"):
        verify(fn)


# -- SASS on CPU -----------------------------------------------------------------------------------

def test_transpose_and_permute_sass_use_128_bit_global_accesses():
    ck = kernelc.compile(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a", num_warps=4,
                         divisibility=T_DIV)
    ops = _mem_ops(ck)
    assert "STG.E.128" in ops and "LDG.E.128" in ops and "STG.E" not in ops, ops
    assert ck.asm["tir"].count("convert_layout") == 1
    (cvt,) = ck.reports["conversions"]
    assert cvt["smem"] == "#shared<inner=1, swizzle=[4, 4, 8], vec=[4, 1]>" and cvt["smem_bytes"] == 64 * 64 * 4
    assert (cvt["warp_write_wavefronts"], cvt["warp_read_wavefronts"]) == (32, 64)
    stores = [a for a in ck.reports["memory_accesses"] if a["kind"] == "store"]
    assert [s["vector_bytes"] for s in stores] == [16] and stores[0]["contiguous_dim"] == 0
    ck3 = kernelc.compile(permute021_3d_kernel, P3_SIG, dict(BLOCK_B=2, BLOCK_M=64, BLOCK_N=64), target="sm_90a",
                          num_warps=4, divisibility={k: 16 for k in P3_SIG})
    ops3 = _mem_ops(ck3)
    assert "STG.E.128" in ops3 and "LDG.E.128" in ops3 and not any(o.startswith("STG.E.U16") for o in ops3), ops3
    # the fp16 conversion writes shared memory in 128-bit vectors (the swizzle keeps them whole)
    assert "STS.128" in ops3


# -- existing kernels: no conversion they did not need ------------------------------------------------

def _example_cases():
    from examples.kernels import attention, layernorm, matmul, softmax
    from tests.compiler.test_codegen_sass import MM_CX, MM_SIG, P, UNIT_STRIDES
    sm = dict(output_ptr=P("fp32"), input_ptr=P("fp32"), input_row_stride="i32", output_row_stride="i32",
              n_rows="i32", n_cols="i32")
    at = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), Out=P("fp16"), sm_scale="fp32", H="i32", N_CTX="i32",
              **{f"stride_{a}{b}": "i32" for a in "qkvo" for b in ("z", "h", "m" if a in "qo" else "n", "k")})
    ln = dict(X=P("fp16"), Y=P("fp16"), W=P("fp16"), B=P("fp16"), Mean=P("fp32"), Rstd=P("fp32"), stride="i32",
              N="i32", eps="fp32")
    return {
        "softmax": (softmax.softmax_kernel, sm, dict(BLOCK_SIZE=1024, num_stages=2),
                    dict(target="sm_90a", num_warps=4, divisibility={n: 16 for n in sm})),
        "layernorm": (layernorm.layer_norm_fwd_kernel, ln, dict(BLOCK_SIZE=1024),
                      dict(target="sm_90a", num_warps=4, divisibility={"stride": 16, "N": 16})),
        "matmul_sm80": (matmul.matmul_kernel, MM_SIG, MM_CX, dict(target="sm_80", num_warps=4, num_stages=3,
                        divisibility={n: 16 for n in MM_SIG}, equal_to_1=UNIT_STRIDES)),
        "attention_sm90": (attention.attn_fwd_kernel, at, dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, CAUSAL=False),
                           dict(target="sm_90a", num_warps=4, num_stages=2, divisibility={n: 16 for n in at},
                                equal_to_1=("stride_qk", "stride_kk", "stride_vk", "stride_ok"))),
    }


# golden: convert_layout ops per kernel. An fp16 MMA accumulator stored from its own layout writes 4-byte
# pieces, half a sector a row per instruction; with shared memory priced at a quarter of global sectors
# (KERNELC_STORE_SMEM_DISCOUNT=4) the epilogue converts to 16-byte stores, as Triton's does; priced byte for
# byte (=1) it does not.
GOLDEN_CONVERSIONS = {"softmax": 0, "layernorm": 0, "matmul_sm80": 1, "attention_sm90": 1}


def test_existing_kernels_gain_only_the_epilogue_conversion_and_keep_their_sass(monkeypatch):
    import kernelc.compiler.compiler as C
    cases = _example_cases()
    sass = {}
    for name, (k, sig, cx, kw) in cases.items():
        ck = kernelc.compile(k, sig, cx, **kw)
        assert ck.asm["tir"].count("convert_layout") == GOLDEN_CONVERSIONS[name], name
        assert ck.n_spills == 0, name
        sass[name] = ck.asm["sass"]
        if GOLDEN_CONVERSIONS[name]:
            assert "STG.E.128" in sass[name] and not re.search(r"STG\.E(\.U16)? ", sass[name]), name
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "1")
    for name in ("matmul_sm80", "attention_sm90"):
        k, sig, cx, kw = cases[name]
        assert kernelc.compile(k, sig, cx, **kw).asm["tir"].count("convert_layout") == 0, name
    monkeypatch.setattr(C, "coalesce", lambda fn, *a, **kw: fn)  # the pipeline without the pass
    for name in ("softmax", "layernorm"):
        k, sig, cx, kw = cases[name]
        assert kernelc.compile(k, sig, cx, **kw).asm["sass"] == sass[name], name


def test_a_norm_backward_partial_dw_store_converts_with_every_store_discounted(monkeypatch):
    """RMS norm's backward row (bf16, 8 warps): the loop-carried fp32 dW keeps the bf16 loads' layout, 8 registers a
    thread, two 16-byte stores half a sector apart; KERNELC_STORE_DISCOUNT_SCOPE=all (the default) prices the
    conversion at a quarter and converts the final store to 16 bytes a lane, =mma leaves it. The row's own bf16
    dx store is already coalesced either way."""
    from examples.kernels import memory_bound as K
    sig = dict(dy_ptr="*bf16", x_ptr="*bf16", w_ptr="*bf16", rstd_ptr="*fp32", dx_ptr="*bf16", dw_ptr="*fp32",
               stride="i32", n_rows="i32", n_cols="i32", rows_per_program="i32")
    div = {k: 16 for k in sig}
    monkeypatch.setenv("KERNELC_STORE_DISCOUNT_SCOPE", "mma")
    _, fn, notes = _coalesced(K.rms_norm_bwd_kernel, sig, dict(BLOCK_SIZE=4096), div, num_warps=8)
    assert count_conversions(fn) == 0 and not notes
    monkeypatch.setenv("KERNELC_STORE_DISCOUNT_SCOPE", "all")
    _, fn, notes = _coalesced(K.rms_norm_bwd_kernel, sig, dict(BLOCK_SIZE=4096), div, num_warps=8)
    filecheck(print_function(fn, show_loc=False), """
        CHECK: scf.for
        CHECK-NOT: convert_layout
        CHECK: scf.yield
        CHECK: [[DW:%\\d+]] = convert_layout {{%\\d+}} {layout=#blocked<spt=[4], tpw=[32], wpc=[8], order=[0]>, smem=#shared<inner=0, vec=[4, 4]>} : <4096xfp32>
        CHECK-NEXT: store {{%\\d+}}, [[DW]], {{%\\d+}}
        CHECK-NEXT: return
    """)
    assert count_conversions(fn) == 1 and "64 fewer sectors per warp" in notes[0], notes


# -- cost model and shared-memory layouts ----------------------------------------------------------

def test_global_sector_model():
    info = AxisInfo((64, 1), (16, 16), (1, 1))  # addresses contiguous along dim 0 (a transposed store)
    along0 = default_blocked((64, 64), 4, (0, 1), vec=4)
    along1 = default_blocked((64, 64), 4, (1, 0), vec=4)
    # along dim 0: each warp instruction writes 32 lanes x 16 B in 4 runs of 128 B = 16 sectors
    assert global_sectors(along0, info, 4) == 8 * 16
    # along dim 1 (16 lanes along dim 1, 2 along dim 0): each column's pair of rows shares one sector
    assert global_sectors(along1, info, 4) == 32 * 16


def test_shared_layout_plan_for_transposes_is_near_conflict_free():
    for ebytes, shape in ((4, (64, 64)), (2, (64, 64)), (4, (32, 128))):
        src = default_blocked(shape, 4, (1, 0), vec=16 // ebytes)
        dst = default_blocked(shape, 4, (0, 1), vec=16 // ebytes)
        sl = plan_shared_layout(src, dst, ebytes)
        w, r = conversion_cost(src, dst, sl, ebytes)
        plain = SharedLayout(shape, 1, write_vec=vector_elems(src, 1, 16 // ebytes))
        pw, pr = conversion_cost(src, dst, plain, ebytes)
        ideal = src.num_regs * 32 * ebytes // 128  # wavefronts to move warp 0's bytes at 128 B each
        assert w + r <= 3 * ideal and w + r < (pw + pr) / 4, (shape, ebytes, sl, w, r, pw, pr)


@pytest.mark.parametrize("sl", [SharedLayout((16, 32), 1, vec=4, per_phase=2, max_phase=8),
                                SharedLayout((16, 32), 0, pad=4), SharedLayout((4, 8, 16), 1, vec=2, max_phase=4)])
def test_shared_layouts_are_bijective_and_keep_vectors_whole(sl):
    coords = np.array(list(itertools.product(*[range(s) for s in sl.shape])))
    offs = sl.offsets(coords)
    assert len(set(offs.tolist())) == len(offs) and offs.max() < sl.nbytes(1)
    v = max(sl.vec if sl.max_phase > 1 else 1, sl.pad & -sl.pad if sl.pad else 1)
    runs = coords[coords[:, sl.inner] % v == 0]
    for k in range(1, v):
        nxt = runs.copy()
        nxt[:, sl.inner] += k
        assert (sl.offsets(nxt) == sl.offsets(runs) + k).all()


@pytest.mark.parametrize("sl", [SharedLayout((4, 8, 16), 1, vec=2, per_phase=2, max_phase=4),
                                SharedLayout((8, 32), 0, pad=2)])
def test_codegen_offset_instructions_match_the_layout(sl):
    """The LLVM instructions codegen emits for a shared-memory offset, run on the CPU (llvmlite MCJIT)."""
    import ctypes
    from types import SimpleNamespace

    import llvmlite.binding as llvm
    from kernelc.compiler.codegen.convert import _shared_offset
    from kernelc.compiler.codegen.emitter import Emitter
    e = Emitter("k", "k.py", 1)
    names = [f"%c{d}" for d in range(len(sl.shape))]
    res = _shared_offset(SimpleNamespace(e=e), names, sl)
    body = "\n".join(e.body)
    params = ", ".join(f"i32 {n}" for n in names)
    mod = llvm.parse_assembly(f"define i32 @f({params}) {{\n{body}\n  ret i32 {res}\n}}\n")
    mod.verify()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    ee = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
    ee.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_int32] * len(names))(ee.get_function_address("f"))
    coords = list(itertools.product(*[range(s) for s in sl.shape]))
    assert [f(*c) for c in coords] == sl.offsets(np.array(coords)).tolist()
    # constant coordinates fold to the same numbers without emitting anything
    assert [int(_shared_offset(None, [str(x) for x in c], sl)) for c in coords[:50]] == \
        sl.offsets(np.array(coords[:50])).tolist()


def test_wavefront_model():
    lanes = np.arange(32)
    assert wavefronts(lanes * 4, 4) == 1          # 32 consecutive words
    assert wavefronts(lanes * 128, 4) == 32       # one bank for every lane
    assert wavefronts(np.zeros(32), 4) == 1       # broadcast
    assert wavefronts(lanes * 16, 16) == 4        # 512 contiguous bytes: 4 phases of 128 B
