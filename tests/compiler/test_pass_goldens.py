"""Golden IR for every pass of the compile pipeline (issue 21: "each pass has golden IR tests").

``GOLDEN`` names, for each pass in ``FRONTEND_PASSES``/``TILE_PASSES``, the test that checks the IR text
before and after it; a pass added to the pipeline without one fails ``test_every_pass_has_a_golden_test``.
The passes whose tests elsewhere checked IR objects, SASS or a whole compile, not the pass's own text, get
theirs here: the kernel's IR just before the pass (the pipeline run up to it) and just after.
"""
import ast
import os

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler import pointer_tile_kernels as PT
from tests.compiler.filecheck import filecheck

V = "{{%\\d+}}"   # any value name


def _around(kernel, sig, cx, name, arch="sm_90a", num_warps=4, div=None, **ctx_kw):
    """(IR text before pass ``name``, after it, the function, the context): the pipeline as compile runs it
    (frontend passes, then tile passes) up to that pass, then the pass alone."""
    cap = (int(arch[3]), int(arch[4]))
    fn, _ = generate_ir(_base_function(kernel), sig, cx, div or {}, (), None, arch=arch, num_warps=num_warps)
    ctx = PassContext(arch, cap, num_warps, **ctx_kw)
    passes = list(C.FRONTEND_PASSES + C.TILE_PASSES)
    i = [p.name for p in passes].index(name)   # the first run of a pass that runs twice (simplify)
    run_passes(fn, passes[:i], ctx, verify_each=False)
    before = print_function(fn, show_loc=False)
    run_passes(fn, passes[i:i + 1], ctx)
    return before, print_function(fn, show_loc=False), fn, ctx


# -- kernels ---------------------------------------------------------------------------------------------

@kernelc.jit
def dropped_hint(x_ptr, y_ptr):
    offs = kl.arange(0, 128)
    p = x_ptr + offs
    kl.multiple_of(p, 16)   # the result is dropped, as Triton programs often write it
    kl.store(y_ptr + offs, kl.load(p))


@kernelc.jit
def acc_plus_dot(a_ptr, b_ptr, c_ptr, K):
    r = kl.arange(0, 64)
    acc = kl.zeros((64, 64), dtype=kl.float32)
    for k in range(0, K, 64):
        a = kl.load(a_ptr + r[:, None] * 64 + r[None, :] + k)
        b = kl.load(b_ptr + r[:, None] * 64 + r[None, :] + k * 64)
        acc += kl.dot(a, b)
    kl.store(c_ptr + r[:, None] * 64 + r[None, :], acc)


@kernelc.jit
def three_atomics(x_ptr, sum_ptr, old_ptr):
    offs = kl.arange(0, 256)
    x = kl.load(x_ptr + offs)
    kl.atomic_add(sum_ptr + offs, x, sem="relaxed")              # unread, relaxed
    kl.atomic_add(sum_ptr + 256 + offs, x)                        # unread, acq_rel
    old = kl.atomic_add(sum_ptr + 512 + offs, x, sem="relaxed")  # read
    kl.store(old_ptr + offs, old)


@kernelc.jit
def float_and_int_math(x_ptr, y_ptr, i_ptr):
    offs = kl.arange(0, 128)
    x = kl.load(x_ptr + offs)
    i = kl.load(i_ptr + offs)
    kl.store(y_ptr + offs, kl.math.exp2(x * 2.0 + 1.0))
    kl.store(i_ptr + offs, i * 3 + 1)


@kernelc.jit
def row_loop(x_ptr, y_ptr, n_rows, n_cols, BLOCK: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    for row in kl.range(kl.program_id(0), n_rows, kl.num_programs(0), num_stages=2):
        x = kl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        kl.store(y_ptr + row * n_cols + cols, x - kl.max(x, 0), mask=cols < n_cols)


@kernelc.jit
def block_ptrs_in_a_loop(a_ptr, out_ptr, M, N, stride_m, n_tiles):
    a = kl.make_block_ptr(a_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(0, 0), block_shape=(64, 64),
                          order=(1, 0))
    o = kl.make_block_ptr(out_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(0, 0), block_shape=(64, 64),
                          order=(1, 0))
    for t in range(kl.program_id(0), n_tiles, kl.num_programs(0)):
        x = kl.load(kl.advance(a, (t * 64, 0)), boundary_check=(0, 1))
        y = kl.load(kl.advance(a, (t * 64, 64)), boundary_check=(0, 1))
        kl.store(kl.advance(o, (t * 64, 0)), x + y, boundary_check=(0, 1))


ATOM_SIG = dict(x_ptr="*fp32", sum_ptr="*fp32", old_ptr="*fp32")
ATOM_DIV = {k: 16 for k in ATOM_SIG}
DOT_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32", K="i32")
BT_SIG = dict(a_ptr="*fp16", bt_ptr="*fp16", c_ptr="*fp32", K="i32", stride_a="i32", stride_b="i32")
BP_SIG = dict(a_ptr="*fp16", out_ptr="*fp16", M="i32", N="i32", stride_m="i32", n_tiles="i32")


# -- the goldens -------------------------------------------------------------------------------------------

def test_anchor_hints_golden():
    before, after, _, _ = _around(dropped_hint, dict(x_ptr="*fp32", y_ptr="*fp32"), {}, "anchor_hints")
    check = """
        CHECK: [[P:%\\d+]] = addptr {V}, {V} : <128x*fp32>
        CHECK-NEXT: [[H:%\\d+]] = hint [[P]] {{multiple_of=[16]}} : <128x*fp32>
        CHECK: = load [[{which}]] : <128xfp32>
    """
    filecheck(before, check.format(V=V, which="P"))   # the load reads the unhinted pointer
    filecheck(after, check.format(V=V, which="H"))    # now the hint's result: its facts hold at the load


def test_pointer_tiles_to_descriptors_golden():
    div = {n: 16 for n in BT_SIG}
    before, after, _, _ = _around(PT.dot_bt, BT_SIG, dict(BM=64, BN=64, BK=32), "pointer_tiles_to_descriptors",
                                  div=div)
    assert "descriptor" not in before
    filecheck(before, """
        CHECK: scf.for
        CHECK: = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : <64x32xfp16>
        CHECK: [[B:%\\d+]] = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : <64x32xfp16>
        CHECK-NEXT: trans [[B]] {perm=[1, 0]} : <32x64xfp16>
    """)
    # both dot operands: one descriptor each, made at the top level; the masked loads become descriptor loads
    filecheck(after, """
        CHECK: [[DA:%\\d+]] = make_tensor_descriptor %a_ptr, {{.*}} {padding='zero'} : tensordesc<fp16[64, 32]>
        CHECK: [[DB:%\\d+]] = make_tensor_descriptor %bt_ptr, {{.*}} {padding='zero'} : tensordesc<fp16[64, 32]>
        CHECK-NEXT: scf.for
        CHECK: = descriptor_load [[DA]], {{.*}} {block_shape=[64, 32], padding='zero'} : <64x32xfp16>
        CHECK: [[B:%\\d+]] = descriptor_load [[DB]], {{.*}} {block_shape=[64, 32], padding='zero'} : <64x32xfp16>
        CHECK-NEXT: trans [[B]] {perm=[1, 0]} : <32x64xfp16>
        CHECK-NOT: = load
    """)


def test_hoist_descriptors_golden():
    div = dict(a_ptr=16, out_ptr=16, N=16, stride_m=16)
    before, after, _, _ = _around(block_ptrs_in_a_loop, BP_SIG, {}, "hoist_descriptors", div=div)
    # the frontend makes a descriptor at each block-pointer access, inside the loop: three, two of them alike
    filecheck(before, """
        CHECK: scf.for
        CHECK: [[D1:%\\d+]] = make_tensor_descriptor %a_ptr, %M, %N, [[S:%\\d+]] {padding='zero'}
        CHECK-NEXT: descriptor_load [[D1]]
        CHECK: [[D2:%\\d+]] = make_tensor_descriptor %a_ptr, %M, %N, [[S]] {padding='zero'}
        CHECK-NEXT: descriptor_load [[D2]]
        CHECK: [[D3:%\\d+]] = make_tensor_descriptor %out_ptr
        CHECK-NEXT: descriptor_store [[D3]]
    """)
    # after: made once each, before the loop; both loads read the one descriptor of a
    filecheck(after, """
        CHECK: [[DA:%\\d+]] = make_tensor_descriptor %a_ptr, %M, %N, {{%\\d+}} {padding='zero'}
        CHECK-NEXT: [[DO:%\\d+]] = make_tensor_descriptor %out_ptr
        CHECK-NEXT: scf.for
        CHECK-NOT: make_tensor_descriptor
        CHECK: descriptor_load [[DA]],
        CHECK-NOT: make_tensor_descriptor
        CHECK: descriptor_load [[DA]],
        CHECK: descriptor_store [[DO]],
    """)
    assert after.count("make_tensor_descriptor") == 2


def test_fold_dot_accumulate_golden():
    before, after, _, _ = _around(acc_plus_dot, DOT_SIG, {}, "fold_dot_accumulate")
    filecheck(before, """
        CHECK: [[Z:%\\d+]] = constant {value=0} : <64x64xfp32>
        CHECK: scf.for {{.*}}, [[Z]] : <64x64xfp32>
        CHECK-NEXT: ^body({{%\\d+}}: i32, [[ACC:%\\d+]]: <64x64xfp32>):
        CHECK: [[D:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, [[Z]] {input_precision='tf32'} : <64x64xfp32>
        CHECK-NEXT: [[S:%\\d+]] = fadd [[ACC]], [[D]] : <64x64xfp32>
        CHECK-NEXT: scf.yield [[S]]
    """)
    # acc + dot(a, b) -> dot(a, b, acc): the carried accumulator is the dot's, no add is left
    filecheck(after, """
        CHECK: scf.for
        CHECK-NEXT: ^body({{%\\d+}}: i32, [[ACC:%\\d+]]: <64x64xfp32>):
        CHECK-NOT: fadd
        CHECK: [[D:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, [[ACC]] {input_precision='tf32'} : <64x64xfp32>
        CHECK-NEXT: scf.yield [[D]]
    """)


def test_pipeline_loads_golden():
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", n_rows="i32", n_cols="i32")
    before, after, _, _ = _around(row_loop, sig, dict(BLOCK=1024), "pipeline_loads", pipeline_loads=True,
                                  num_stages=2)
    filecheck(before, """
        CHECK: scf.for %1, %n_rows, %2 {num_stages=2}
        CHECK: [[X:%\\d+]] = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : <1024xfp32>
        CHECK: reduce [[X]] {axis=0, kind='max'}
    """)
    # the first row is loaded before the loop (guarded by the loop's own test), each trip loads the next row
    # and yields it, and the body reads the carried row
    filecheck(after, """
        CHECK: [[G:%\\d+]] = cmpi %1, %n_rows {pred='slt'} : i1
        CHECK: [[GS:%\\d+]] = splat [[G]] : <1024xi1>
        CHECK-NEXT: [[M0:%\\d+]] = and {{%\\d+}}, [[GS]] : <1024xi1>
        CHECK-NEXT: [[X0:%\\d+]] = load {{%\\d+}}, [[M0]], {{%\\d+}} : <1024xfp32>
        CHECK-NEXT: scf.for %1, %n_rows, %2, [[X0]] {num_stages=2, prefetched=1} : <1024xfp32>
        CHECK-NEXT: ^body([[I:%\\d+]]: i32, [[X:%\\d+]]: <1024xfp32>):
        CHECK-NEXT: [[NEXT:%\\d+]] = add [[I]], %2 : i32
        CHECK-NEXT: cmpi [[NEXT]], %n_rows {pred='slt'} : i1
        CHECK: [[XN:%\\d+]] = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : <1024xfp32>
        CHECK: reduce [[X]] {axis=0, kind='max'}
        CHECK: scf.yield [[XN]]
    """)


def test_mark_unused_atomic_results_golden():
    before, after, _, _ = _around(three_atomics, ATOM_SIG, {}, "mark_unused_atomic_results", div=ATOM_DIV)
    assert "result_unused" not in before
    filecheck(after, """
        CHECK: = atomic_rmw {{%\\d+}}, {{%\\d+}} {kind='fadd', sem='relaxed', scope='gpu', result_unused=True}
        CHECK: = atomic_rmw {{%\\d+}}, {{%\\d+}} {kind='fadd', sem='acq_rel', scope='gpu', result_unused=True}
        CHECK: [[OLD:%\\d+]] = atomic_rmw {{%\\d+}}, {{%\\d+}} {kind='fadd', sem='relaxed', scope='gpu'} :
        CHECK: store {{%\\d+}}, [[OLD]]
    """)


def test_vectorize_atomics_golden():
    before, after, _, _ = _around(three_atomics, ATOM_SIG, {}, "vectorize_atomics", div=ATOM_DIV)
    assert "vec=" not in before
    # only the unread relaxed add over 16-byte aligned contiguous addresses: 4 elements per red
    filecheck(after, """
        CHECK: = atomic_rmw {{%\\d+}}, {{%\\d+}} {kind='fadd', sem='relaxed', scope='gpu', result_unused=True, vec=4}
        CHECK: = atomic_rmw {{%\\d+}}, {{%\\d+}} {kind='fadd', sem='acq_rel', scope='gpu', result_unused=True} :
        CHECK: = atomic_rmw {{%\\d+}}, {{%\\d+}} {kind='fadd', sem='relaxed', scope='gpu'} :
    """)
    assert after.count("vec=") == 1
    # sm_80 has no vector reductions: unchanged
    before80, after80, _, _ = _around(three_atomics, ATOM_SIG, {}, "vectorize_atomics", arch="sm_80", div=ATOM_DIV)
    assert after80 == before80


def test_mark_fp_contraction_golden():
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", i_ptr="*i32")
    for fusion in (True, False):
        before, after, _, _ = _around(float_and_int_math, sig, {}, "mark_fp_contraction", fp_fusion=fusion)
        assert "contract" not in before
        if not fusion:
            assert after == before
            continue
        # float mul/add may contract into an fma; integer arithmetic and exp2 are left alone
        filecheck(after, """
            CHECK: [[M:%\\d+]] = fmul {{%\\d+}}, {{%\\d+}} {contract=True} : <128xfp32>
            CHECK: [[A:%\\d+]] = fadd [[M]], {{%\\d+}} {contract=True} : <128xfp32>
            CHECK-NEXT: exp2 [[A]] : <128xfp32>
            CHECK: [[IM:%\\d+]] = mul {{%\\d+}}, {{%\\d+}} : <128xi32>
            CHECK: add [[IM]], {{%\\d+}} : <128xi32>
        """)


def test_mark_exp2_ftz_golden():
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", i_ptr="*i32")
    before, after, _, _ = _around(float_and_int_math, sig, {}, "mark_exp2_ftz")
    filecheck(before, "CHECK: = exp2 {{%\\d+}} : <128xfp32>")
    filecheck(after, "CHECK: = exp2 {{%\\d+}} {ftz=True} : <128xfp32>")
    assert before.replace(" {ftz=True}", "") == after.replace(" {ftz=True}", "")


def test_assign_layouts_is_an_analysis_and_writes_the_dot_engine():
    before, after, fn, ctx = _around(acc_plus_dot, DOT_SIG, {}, "assign_layouts")
    # the IR text is unchanged but for the engine each dot takes, written on the dot
    filecheck(before, "CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32'} :")
    filecheck(after, "CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :")
    assert after.replace(", engine='wgmma'", "") == before
    assert ctx.plan is not None and ctx.axis is not None
    dot = next(o for o in fn.walk() if o.name == "dot")
    assert ctx.plan.get(dot.results[0]) is not None   # the layouts themselves: the plan, per value
    # sm_80: mma.sync
    _, after80, _, _ = _around(acc_plus_dot, DOT_SIG, {}, "assign_layouts", arch="sm_80")
    filecheck(after80, "CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='mma'} :")


# -- the registry ------------------------------------------------------------------------------------------

GOLDEN = {
    "anchor_hints": "test_pass_goldens::test_anchor_hints_golden",
    "pointer_tiles_to_descriptors": "test_pass_goldens::test_pointer_tiles_to_descriptors_golden",
    "hoist_descriptors": "test_pass_goldens::test_hoist_descriptors_golden",
    "split_ws_consumers": "test_ws_consumers::test_the_split_is_a_function_attribute_and_the_k_loop_is_specialised",
    "lower_descriptors": "test_schedule_passes::test_lower_descriptors_tags_what_tma_takes_and_codegen_trusts_the_tag",
    "guard_tma_writes": "test_tma_write_guards::test_a_reduction_at_an_unproven_row_is_guarded",
    "simplify": "test_pass_pipeline::test_simplify_golden",
    "fold_dot_accumulate": "test_pass_goldens::test_fold_dot_accumulate_golden",
    "flatten_loops": "test_flatten_loops::test_a_tile_loop_and_its_k_loop_become_one_loop",
    "narrow_loop_carries": "test_fa3_forward::test_a_value_read_only_through_one_cast_is_carried_cast_golden",
    "upcast_fp8_dots": "test_pass_pipeline::test_upcast_fp8_dots_golden",
    "pipeline_loads": "test_pass_goldens::test_pipeline_loads_golden",
    "mark_unused_atomic_results": "test_pass_goldens::test_mark_unused_atomic_results_golden",
    "mark_fp_contraction": "test_pass_goldens::test_mark_fp_contraction_golden",
    "mark_exp2_ftz": "test_pass_goldens::test_mark_exp2_ftz_golden",
    "mark_log_approx": "test_log_f32::test_approx_marks_the_fp32_log_only_golden",
    "mark_positive_nan_casts": "test_fp8_attention::test_fp8_casts_of_exp2_results_are_marked_golden",
    "mark_fp8_overflow_bounds": "test_fp8_bounds::test_e5m2_cast_of_a_summed_exp2_gets_the_sum_as_its_bound_golden",
    "mark_exp2_poly": "test_exp2_poly::test_softmax_exp2_feeding_fp8_and_a_sum_is_marked_golden",
    "mark_fp8_carry_words": "test_fp8_attention::test_fp8_carry_words_mark_golden",
    "mark_reduce_trees": "test_reduce_trees::test_exactly_associative_reductions_are_marked_golden",
    "mark_reduce_xwarp": "test_reduce_xwarp::test_block_reductions_of_32_bit_values_take_the_broadcast_form_golden",
    "mark_reduce_scratch": "test_reduce_xwarp::test_apart_gives_each_block_reduction_its_own_scratch_golden",
    "mark_l2_reuse": "test_l2_reuse::test_the_load_at_a_remainder_of_the_program_id_is_kept_in_l2_golden",
    "mark_register_budget": "test_fill_occupancy_step::test_a_kernel_without_dots_is_marked_to_fill_its_occupancy_step",
    "mark_dot_loops_step": "test_dot_loops_step::test_golden_two_dot_loops_one_after_the_other_are_marked",
    "vectorize_atomics": "test_pass_goldens::test_vectorize_atomics_golden",
    "coalesce": "test_coalesce::test_permute_021_fp16_golden_ir",
    "mark_loads_first": "test_fill_occupancy_step::test_golden_a_one_pass_copy_through_a_conversion_is_marked_loads_first",
    "hoist_conversions": "test_hoist_conversions::test_invariant_conversion_moves_before_the_loop_golden",
    "loads_in_use_layout": "test_load_layouts::test_the_load_takes_the_layout_its_conversion_asked_for",
    "mark_instruction_order": "test_consumer_order::test_the_tile_pass_marks_elementwise_chains",
    "assign_layouts": "test_pass_goldens::test_assign_layouts_is_an_analysis_and_writes_the_dot_engine",
    "schedule_pipelines": "test_schedule_passes::test_schedule_pipelines_rings_pointer_loads_with_cp_async",
    "warp_specialize": "test_schedule_passes::test_warp_specialize_tags_the_loop_a_producer_warp_fills",
    "schedule_wgmma": "test_schedule_passes::test_schedule_wgmma_defers_waits_and_takes_turns",
    "mark_uniform_masks": "test_mask_blocks::test_golden_the_k_masks_of_a_gemms_rings_are_uniform_over_16_offsets",
    "expand_cp_async_rings": "test_cp_async_rings::test_a_cp_async_ring_becomes_explicit_ops",
    "expand_tma_rings": "test_tma_rings::test_a_tma_ring_becomes_explicit_ops",
    "expand_warp_specialize": "test_ws_regions::test_a_warp_specialised_loop_becomes_a_producer_region_and_barrier_ops",
    "stage_invariant_operands":
        "test_stage_invariant_operands::test_an_invariant_operand_of_a_loop_without_a_ring_is_staged_before_it",
    "share_staged_operands": "test_staged_operands::test_the_second_loop_reads_the_first_loops_staged_copy",
    "place_wgmma_waits": "test_wgmma_waits::test_a_dot_left_in_flight_waits_for_the_one_before_and_the_loop_for_all",
    "expand_bulk_reductions": "test_bulk_reductions::test_atomic_add_in_a_loop_becomes_a_staged_bulk_reduction",
    "claim_bulk_adds": "test_bulk_adds::test_the_bulk_add_in_a_loop_becomes_a_staged_1d_bulk_reduction",
    "defer_tma_store_waits": "test_tma_stores::test_a_store_in_a_loop_waits_for_its_buffer_before_writing_it_again",
    "issue_tma_loads_early": "test_tma_prefetch::test_two_tiles_are_copied_together_and_waited_for_at_the_dot",
    "assign_smem_offsets": "test_smem_offsets::test_the_rings_of_two_cp_async_loops_share_bytes",
    "mark_zero_acc_dots": "test_zero_acc::test_golden_a_zero_started_wgmma_dot_takes_a_constant_false_use_acc",
    "mark_uniform_warpgroups": "test_uniform_warpgroups::test_golden_two_warpgroups_read_one_uniform_warpgroup_index",
    "mark_copy_mad_wide": "test_copy_addresses::test_golden_each_copy_address_is_tagged_and_nothing_else_changes",
    "mark_elect_form": "test_tma_rings::test_tid_elects_thread_0_for_every_copy_golden",
}


def _golden_source(ref):
    """The test function's source, read (not imported: importing every test module costs seconds)."""
    mod, name = ref.split("::")
    path = os.path.join(os.path.dirname(__file__), mod + ".py")
    text = open(path, encoding="utf-8").read()
    fn = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert fn is not None, f"{ref}: no such test"
    return ast.get_source_segment(text, fn)


def test_every_pass_has_a_golden_test():
    names = {p.name for p in C.FRONTEND_PASSES + C.TILE_PASSES}
    assert names == set(GOLDEN), (sorted(names - set(GOLDEN)), sorted(set(GOLDEN) - names))
    for pass_name, ref in GOLDEN.items():
        src = _golden_source(ref)
        # each checks IR text: FileCheck lines, or the printed IR compared before/after
        assert "filecheck(" in src or "print_function(" in src or "_around(" in src, (pass_name, ref)


def test_the_verifier_checks_the_dot_engine():
    import pytest
    from kernelc.compiler.ir.verifier import VerificationError, verify
    _, _, fn, _ = _around(acc_plus_dot, DOT_SIG, {}, "assign_layouts")
    dot = next(o for o in fn.walk() if o.name == "dot")
    verify(fn)
    dot.attrs["engine"] = "tensor"
    with pytest.raises(VerificationError, match="engine must be 'wgmma', 'mma' or 'fma'"):
        verify(fn)
    dot.attrs["engine"] = "mma"
    dot.attrs["wgmma"] = "async"
    with pytest.raises(VerificationError, match="must run on wgmma, not 'mma'"):
        verify(fn)
