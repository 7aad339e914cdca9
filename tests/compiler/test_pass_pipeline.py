"""The tile-IR pipeline as data (kernelc/compiler/pass_manager.py): named passes in order, IR dumps
after each (compile option and KERNELC_DUMP_IR), per-pass timings, verification naming the pass."""
import pytest

import kernelc
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.verifier import VerificationError
from kernelc.compiler.pass_manager import PassContext, TilePass, pass_names, run_passes
from tests.compiler.filecheck import filecheck
from tests.compiler.transpose_kernels import transpose_kernel

T_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", stride_ym="i32")
T_DIV = {k: 16 for k in T_SIG}
CX = dict(BLOCK_M=64, BLOCK_N=64)


def test_the_pipeline_is_a_list_of_named_passes():
    ctx = PassContext("sm_90a", (9, 0), 4)
    assert pass_names(C.FRONTEND_PASSES, ctx) == ["anchor_hints", "pointer_tiles_to_descriptors",
                                                  "hoist_descriptors", "split_ws_consumers", "lower_descriptors",
                                                  "claim_bulk_adds", "guard_tma_writes"]
    schedule = ["assign_layouts", "schedule_pipelines", "warp_specialize", "schedule_wgmma", "mark_uniform_masks",
                "expand_cp_async_rings", "expand_tma_rings", "expand_warp_specialize", "stage_invariant_operands", "share_staged_operands", "place_wgmma_waits",
                "expand_bulk_reductions", "defer_tma_store_waits", "issue_tma_loads_early", "assign_smem_offsets",
                "mark_zero_acc_dots", "mark_uniform_warpgroups", "mark_copy_mad_wide", "mark_elect_form"]
    assert pass_names(C.TILE_PASSES, ctx) == ["simplify", "fold_dot_accumulate", "flatten_loops", "narrow_loop_carries", "upcast_fp8_dots", "pipeline_loads",
                                              "simplify", "mark_unused_atomic_results", "mark_fp_contraction", "mark_exp2_ftz", "mark_log_approx", "mark_positive_nan_casts", "mark_fp8_overflow_bounds", "mark_exp2_poly", "mark_fp8_carry_words", "mark_reduce_trees", "mark_reduce_xwarp", "mark_reduce_scratch", "mark_l2_reuse", "mark_register_budget", "mark_dot_loops_step", "vectorize_atomics", "coalesce", "mark_loads_first", "hoist_conversions", "loads_in_use_layout", "mark_instruction_order"] + schedule
    ctx.pipeline_loads = False
    assert pass_names(C.TILE_PASSES, ctx) == ["simplify", "fold_dot_accumulate", "flatten_loops", "narrow_loop_carries", "upcast_fp8_dots",
                                              "mark_unused_atomic_results", "mark_fp_contraction", "mark_exp2_ftz", "mark_log_approx", "mark_positive_nan_casts", "mark_fp8_overflow_bounds", "mark_exp2_poly", "mark_fp8_carry_words", "mark_reduce_trees", "mark_reduce_xwarp", "mark_reduce_scratch", "mark_l2_reuse", "mark_register_budget", "mark_dot_loops_step", "vectorize_atomics", "coalesce", "mark_loads_first", "hoist_conversions", "loads_in_use_layout", "mark_instruction_order"] + schedule


def test_compile_dumps_the_ir_after_every_pass_and_times_each():
    dumps = []
    ck = kernelc.compile(transpose_kernel, T_SIG, CX, target="sm_90a", divisibility=T_DIV,
                         dump_ir=lambda name, text: dumps.append((name, text)))
    assert [n for n, _ in dumps] == ["anchor_hints", "pointer_tiles_to_descriptors", "hoist_descriptors",
                                     "split_ws_consumers", "lower_descriptors", "claim_bulk_adds", "guard_tma_writes", "simplify", "fold_dot_accumulate", "flatten_loops", "narrow_loop_carries", "upcast_fp8_dots",
                                     "pipeline_loads", "simplify", "mark_unused_atomic_results", "mark_fp_contraction", "mark_exp2_ftz", "mark_log_approx", "mark_positive_nan_casts", "mark_fp8_overflow_bounds", "mark_exp2_poly", "mark_fp8_carry_words", "mark_reduce_trees", "mark_reduce_xwarp", "mark_reduce_scratch", "mark_l2_reuse", "mark_register_budget", "mark_dot_loops_step", "vectorize_atomics", "coalesce",
                                     "mark_loads_first", "hoist_conversions", "loads_in_use_layout", "mark_instruction_order", "assign_layouts", "schedule_pipelines", "warp_specialize", "schedule_wgmma",
                                     "mark_uniform_masks", "expand_cp_async_rings", "expand_tma_rings", "expand_warp_specialize",
                                     "stage_invariant_operands", "share_staged_operands", "place_wgmma_waits",
                                     "expand_bulk_reductions", "defer_tma_store_waits", "issue_tma_loads_early", "assign_smem_offsets",
                "mark_zero_acc_dots", "mark_uniform_warpgroups", "mark_copy_mad_wide", "mark_elect_form"]
    coalesced = [n for n, _ in dumps].index("coalesce")
    assert all("convert_layout" not in t for _, t in dumps[:coalesced])
    filecheck(dumps[-1][1], """
        CHECK: kernel transpose_kernel(
        CHECK: = convert_layout
        CHECK-NEXT: store
    """)
    assert dumps[-1][1].split("\n", 1)[1] == ck.asm["tir"].split("\n", 1)[1]
    assert {"pass.simplify", "pass.coalesce", "pass.lower_descriptors"} <= set(ck.timings)


def test_kernelc_dump_ir_env_prints_to_stderr(monkeypatch, capfd):
    monkeypatch.setenv("KERNELC_DUMP_IR", "1")
    fn, _ = to_tile_ir(transpose_kernel, T_SIG, CX, divisibility=T_DIV)
    run_passes(fn, C.TILE_PASSES, PassContext("sm_90a", (9, 0), 4), dump=C.dump_ir_requested())
    err = capfd.readouterr().err
    assert err.count("// -----// IR after ") == len(C.TILE_PASSES) and "// -----// IR after coalesce //----- //" in err


def test_a_pass_that_breaks_the_ir_is_named():
    def corrupt(fn, ctx):
        ld = next(o for o in fn.walk() if o.name == "load")
        ld.attrs.pop("cache")  # a required attribute
        return fn
    fn, _ = to_tile_ir(transpose_kernel, T_SIG, CX, divisibility=T_DIV)
    with pytest.raises(VerificationError, match=r"^after pass corrupt_loads: "):
        run_passes(fn, [TilePass("simplify", lambda f, c: f), TilePass("corrupt_loads", corrupt)],
                   PassContext("sm_90a", (9, 0), 4))


# -- golden IR per pass (frontend IR before -> after one pass) ------------------------------------------

import kernelc.language as kl  # noqa: E402
from kernelc.compiler.compiler import _base_function  # noqa: E402
from kernelc.compiler.frontend import generate_ir  # noqa: E402
from kernelc.compiler.ir.printer import print_function  # noqa: E402


@kernelc.jit
def fold_kernel(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + offs, mask=offs < n)
    unused = x * 7.0  # noqa: F841
    kl.store(y_ptr + offs, x + (2 + 3), mask=offs < n)


@kernelc.jit
def fp8_dot_kernel(a_ptr, b_ptr, c_ptr):
    r = kl.arange(0, 32)
    a = kl.load(a_ptr + r[:, None] * 32 + r[None, :])
    b = kl.load(b_ptr + r[:, None] * 32 + r[None, :])
    kl.store(c_ptr + r[:, None] * 32 + r[None, :], kl.dot(a, b))


def _frontend(kernel, sig, cx=None):
    fn, _ = generate_ir(_base_function(kernel), sig, cx or {}, {}, ())
    return fn


def _one_pass(name, fn, ctx):
    passes = [p for p in C.FRONTEND_PASSES + C.TILE_PASSES if p.name == name][:1]
    return print_function(run_passes(fn, passes, ctx), show_loc=False)


def test_simplify_golden():
    fn = _frontend(fold_kernel, dict(x_ptr="*fp32", y_ptr="*fp32", n="i32"), dict(BLOCK=128))
    filecheck(print_function(fn, show_loc=False), """
        CHECK: [[M:%\\d+]] = cmpi %0, {{%\\d+}} {pred='slt'} : <128xi1>
        CHECK: fmul {{.*}} : <128xfp32>
        CHECK: constant {value=5} : i32
        CHECK-NEXT: cast {{%\\d+}} {rounding='rtne'} : fp32
        CHECK: [[M2:%\\d+]] = cmpi %0, {{%\\d+}} {pred='slt'} : <128xi1>
        CHECK: store {{%\\d+}}, {{%\\d+}}, [[M2]]
    """)
    after = _one_pass("simplify", fn, PassContext("sm_90a", (9, 0), 4))
    filecheck(after, """
        CHECK: [[M:%\\d+]] = cmpi %0, {{%\\d+}} {pred='slt'} : <128xi1>
        CHECK-NEXT: [[X:%\\d+]] = load {{%\\d+}}, [[M]] : <128xfp32>
        CHECK-NOT: fmul
        CHECK-NOT: cmpi
        CHECK: [[C:%\\d+]] = constant {value=5.0} : <128xfp32>
        CHECK-NEXT: [[S:%\\d+]] = fadd [[X]], [[C]] : <128xfp32>
        CHECK-NEXT: store {{%\\d+}}, [[S]], [[M]]
    """)


def test_upcast_fp8_dots_golden():
    sig = dict(a_ptr="*fp8e4nv", b_ptr="*fp8e4nv", c_ptr="*fp32")
    before = print_function(_frontend(fp8_dot_kernel, sig), show_loc=False)
    assert " = cast " not in before
    for cap, upcast in (((8, 0), True), ((8, 9), False), ((9, 0), False)):
        ctx = PassContext(f"sm_{cap[0]}{cap[1]}", cap, 4)
        after = _one_pass("upcast_fp8_dots", _frontend(fp8_dot_kernel, sig), ctx)
        if upcast:
            filecheck(after, """
                CHECK: [[A:%\\d+]] = load {{%\\d+}} : <32x32xfp8e4nv>
                CHECK: [[B:%\\d+]] = load {{%\\d+}} : <32x32xfp8e4nv>
                CHECK: [[A16:%\\d+]] = cast [[A]] {rounding='rtne'} : <32x32xfp16>
                CHECK-NEXT: [[B16:%\\d+]] = cast [[B]] {rounding='rtne'} : <32x32xfp16>
                CHECK-NEXT: dot [[A16]], [[B16]], {{%\\d+}} {input_precision='tf32', fp8_upcast='fp8e4nv x fp8e4nv -> fp16{{.*}}'} : <32x32xfp32>
            """)
            assert any("upcast to fp16" in n for n in ctx.notes)
        elif cap == (9, 0):
            # a 32-row dot on 4 warps is no wgmma: sm_90's mma.sync has no fp8 unit, so the dot is marked to run as
            # fp16 MMAs on fragments converted in registers; its operands stay fp8
            assert " = cast " not in after and after == before.replace(
                "{input_precision='tf32'}", "{input_precision='tf32', fp8_mma='f16'}")
            assert any("sm_90 has no fp8 mma.sync" in n for n in ctx.notes)
        else:
            assert after == before and not ctx.notes  # sm_89 has fp8 mma.sync: unchanged
