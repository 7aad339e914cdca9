"""``mark_register_budget`` (passes/register_budget.py) and the assembler's occupancy-step fill
(backend/ptxas.py ``_fill_step``): golden IR before -> after, the ceiling arithmetic, and the registers and
SASS of the memory-bound kernels it changes, on CPU (nvJitLink)."""
import pytest

import kernelc
import kernelc.language as kl
from cubintools.target import ARCH_LIMITS
from examples.kernels import memory_bound as K
from kernelc.compiler.backend import ptxas as P
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.passes.register_budget import mark_register_budget
from tests.compiler.filecheck import filecheck

L = ARCH_LIMITS[90]
GEGLU_BWD_SIG = {k: "*bf16" for k in ("dc_ptr", "a_ptr", "b_ptr", "da_ptr", "db_ptr")} | dict(stride="i32",
                                                                                              n_cols="i32")


@pytest.fixture(autouse=True)
def _nvjitlink(monkeypatch):
    # the fill is a rule of the nvJitLink assembly without the launch bound (the defaults)
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    monkeypatch.delenv("KERNELC_NVJITLINK_LAUNCH_BOUND", raising=False)
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "off")   # the fill alone (the step down a block: its own tests)
    monkeypatch.delenv("KERNELC_FILL_OCCUPANCY_STEP", raising=False)
    # the tests below check the step fill alone; the loads policy (which may also take the bound build) has its own
    monkeypatch.setenv("KERNELC_FILL_POLICY", "step")
    # the builds below were measured on code generation's op order (consumer order: test_consumer_order.py)
    monkeypatch.setenv("KERNELC_CONSUMER_ORDER", "off")


@kernelc.jit
def scale_rows(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


@kernelc.jit
def tile_dot(a_ptr, b_ptr, c_ptr, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    m, n, k = kl.arange(0, BM), kl.arange(0, BN), kl.arange(0, BK)
    a = kl.load(a_ptr + m[:, None] * BK + k[None, :])
    b = kl.load(b_ptr + k[:, None] * BN + n[None, :])
    kl.store(c_ptr + m[:, None] * BN + n[None, :], kl.dot(a, b))


SCALE_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", n="i32")
DOT_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32")


def test_a_kernel_without_dots_is_marked_to_fill_its_occupancy_step():
    fn, _ = to_tile_ir(scale_rows, SCALE_SIG, dict(BLOCK=1024), divisibility={k: 16 for k in SCALE_SIG})
    before = print_function(fn)
    filecheck(before, """
        CHECK-NOT: attributes
        CHECK: kernel scale_rows(%x_ptr: *fp32 {div=16}, %y_ptr: *fp32 {div=16}, %n: i32 {div=16}) {  // constexprs: BLOCK=1024
    """)
    after = print_function(mark_register_budget(fn))
    filecheck(after, """
        CHECK: kernel scale_rows(%x_ptr: *fp32 {div=16}, %y_ptr: *fp32 {div=16}, %n: i32 {div=16}) attributes {registers='fill_step', fill_policy='loads'} {  // constexprs: BLOCK=1024
        CHECK-NEXT: = program_id {axis=0} : i32
    """)
    assert after.split("\n", 1)[1] == before.split("\n", 1)[1]   # the body is unchanged
    # off (KERNELC_FILL_OCCUPANCY_STEP=0): the mark goes
    assert print_function(mark_register_budget(fn, enabled=False)) == before


def test_a_kernel_with_a_dot_is_not_marked():
    fn, _ = to_tile_ir(tile_dot, DOT_SIG, dict(BM=64, BN=64, BK=32))
    before = print_function(fn)
    assert "= dot " in before
    assert print_function(mark_register_budget(fn)) == before
    assert "registers" not in fn.attrs


def test_the_compile_pipeline_marks_and_the_knob_unmarks(monkeypatch):
    ck = kernelc.compile(scale_rows, SCALE_SIG, dict(BLOCK=1024), target="sm_90a")
    assert ck.asm["tir"].splitlines()[0].count("registers='fill_step'") == 1
    monkeypatch.setenv("KERNELC_FILL_OCCUPANCY_STEP", "0")
    ck = kernelc.compile(scale_rows, SCALE_SIG, dict(BLOCK=1024), target="sm_90a")
    assert "registers=" not in ck.asm["tir"].splitlines()[0]


@pytest.mark.parametrize("regs,threads,shared,ceiling", [
    (70, 512, 0, 128),     # 16 warps: one block from 65 to 128 registers
    (64, 512, 0, 64),      # two blocks end at 64
    (106, 256, 0, 128),    # 8 warps: two blocks up to 128
    (36, 512, 0, 40),      # three blocks up to 40
    (32, 512, 0, 32),      # four blocks (the thread limit) only up to 32
    (42, 128, 0, 48),      # 10 blocks of 4 warps up to 48
    (48, 1024, 0, 64),     # the launch bound's 65536 / 1024 caps it
    (168, 256, 0, 255),    # at most 255 a thread
    (40, 128, 100 * 1024, 255),   # shared memory holds it at two blocks, registers never decide
    (255, 1024, 0, None)])        # one block does not fit
def test_step_ceiling(regs, threads, shared, ceiling):
    assert P.step_ceiling(regs, threads, shared, L) == ceiling
    if ceiling is not None:
        assert P.blocks_per_sm(ceiling, threads, shared, L) == P.blocks_per_sm(regs, threads, shared, L)


def _geglu_bwd():
    return kernelc.compile(K.geglu_bwd_kernel, GEGLU_BWD_SIG, dict(BLOCK_SIZE=16384), target="sm_90a",
                           num_warps=16, divisibility={k: 16 for k in GEGLU_BWD_SIG})


def test_geglu_bwd_gets_the_registers_of_its_step_and_keeps_its_block(monkeypatch):
    monkeypatch.setenv("KERNELC_FILL_OCCUPANCY_STEP", "0")
    free = _geglu_bwd()
    monkeypatch.delenv("KERNELC_FILL_OCCUPANCY_STEP")
    filled = _geglu_bwd()
    assert "registers='fill_step'" in filled.asm["tir"].splitlines()[0]
    assert "registers=" not in free.asm["tir"].splitlines()[0]
    assert filled.asm["ptx"] == free.asm["ptx"]          # the same PTX, assembled with another register ceiling
    # ptxas 13.x without a ceiling: 69-70 registers; with the step's 128: 104 (the launch bound's code)
    assert 64 < free.n_regs < filled.n_regs <= 128, (free.n_regs, filled.n_regs)
    assert filled.n_spills == 0 and filled.local_bytes == 0
    assert P.blocks_per_sm(filled.n_regs, 512, filled.shared, L) == P.blocks_per_sm(free.n_regs, 512, free.shared, L) == 1
    assert "kernelc: geglu_bwd_kernel at up to 128 registers" in filled.artifacts.ptxas_log
    sass = filled.asm["sass"]
    assert sass.count("LDG.E.128") == 12 and sass.count("STG.E.128") == 8   # the same accesses, all 16 bytes
    assert "STL" not in sass and "LDL" not in sass


def test_no_fill_with_the_launch_bound_or_at_a_step(monkeypatch):
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "1")
    bound = _geglu_bwd()
    assert "kernelc:" not in bound.artifacts.ptxas_log      # assembled once, with .maxntid
    monkeypatch.delenv("KERNELC_NVJITLINK_LAUNCH_BOUND")
    # swiglu fwd sits at 32 registers, four 16-warp blocks (the thread limit): nothing to fill
    sig = dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32")
    ck = kernelc.compile(K.swiglu_fwd_kernel, sig, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in sig})
    assert ck.n_regs == 32 and "kernelc:" not in ck.artifacts.ptxas_log


@pytest.mark.parametrize("kernel,sig,block,warps", [
    # 16 blocks of 4 warps a SM whatever its few registers: the thread limit decides, not registers
    (scale_rows, SCALE_SIG, dict(BLOCK=1024), 4),
    # 36 registers, three 16-warp blocks up to 40: 4 registers of headroom are not worth a second ptxas run
    (K.geglu_fwd_kernel, dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32"),
     dict(BLOCK_SIZE=16384), 16)])
def test_no_second_assembly_where_registers_do_not_decide_or_gain_little(kernel, sig, block, warps):
    ck = kernelc.compile(kernel, sig, block, target="sm_90a", num_warps=warps, divisibility={k: 16 for k in sig})
    assert "registers='fill_step'" in ck.asm["tir"].splitlines()[0]     # marked: the assembler decides
    assert "kernelc:" not in ck.artifacts.ptxas_log, ck.artifacts.ptxas_log[:200]
    ceiling = P.step_ceiling(ck.n_regs, 32 * warps, ck.shared, L)
    limited = P.blocks_per_sm(ck.n_regs, 32 * warps, ck.shared, L) < P.blocks_per_sm(8, 32 * warps, ck.shared, L)
    assert not limited or ceiling - ck.n_regs < P.FILL_STEP_MIN_HEADROOM


def test_the_occupancy_step_wins_over_the_fill(monkeypatch):
    # KERNELC_OCCUPANCY_STEP (opt-in) takes geglu bwd down to two blocks; the fill would take it up within one
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "1")
    ck = _geglu_bwd()
    if "runs 2 blocks an SM" in ck.artifacts.ptxas_log:
        assert ck.n_regs <= 64
    else:   # the step spilled with this ptxas: the fill applies
        assert "at up to 128 registers" in ck.artifacts.ptxas_log


def test_the_analyzer_reads_a_header_with_function_attributes():
    from analyzer.tir import parse
    ck = kernelc.compile(scale_rows, SCALE_SIG, dict(BLOCK=1024), target="sm_90a",
                         divisibility={k: 16 for k in SCALE_SIG})
    assert " attributes {registers='fill_step', fill_policy='step'} {" in ck.asm["tir"].splitlines()[0]
    facts = parse(ck.asm["tir"])
    assert facts.name == "scale_rows"
    assert facts.arg_types == {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    assert facts.divisibility == {"x_ptr": 16, "y_ptr": 16, "n": 16}
    assert "kernel" not in [op.op for op in facts.ops]


def test_without_ptxas_report_the_registers_come_from_the_cubin(monkeypatch):
    """nvJitLink's info log without the ``-v`` report for the kernel (as the variant columns' compiles on the
    H200 seem to have had): the decisions read the cubin's registers, so the launch bound is not put back on a
    kernel that fits and the fill still applies."""
    sig = dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32")
    monkeypatch.setattr(P, "parse_ptxas_report", lambda log: {})

    def build(kernel, s):
        return kernelc.compile(kernel, s, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                               divisibility={k: 16 for k in s})
    fwd = build(K.geglu_fwd_kernel, sig)
    assert fwd.n_regs <= 40, fwd.n_regs        # unbounded (36); with the bound put back: 93
    assert "kernelc: no ptxas report for geglu_fwd_kernel" in fwd.artifacts.ptxas_log
    assert "assembled again with it" not in fwd.artifacts.ptxas_log
    bwd = build(K.geglu_bwd_kernel, GEGLU_BWD_SIG)
    assert "at up to 128 registers" in bwd.artifacts.ptxas_log and 64 < bwd.n_regs <= 128


LN_SIG = dict(X="*fp16", Y="*fp16", W="*fp16", B="*fp16", Mean="*fp32", Rstd="*fp32", stride="i32", N="i32", eps="fp32")


def _ln_fwd():
    from examples.kernels import layernorm as LN
    return kernelc.compile(LN.layer_norm_fwd_kernel, LN_SIG, dict(BLOCK_SIZE=8192), target="sm_90a", num_warps=8,
                           divisibility={k: 16 for k in LN_SIG if k != "eps"})


def _per_sm(ck, threads):
    from cubintools.sass import instructions, mean_loads_in_flight
    warps = threads // 32
    return P.blocks_per_sm(ck.n_regs, threads, ck.shared, L) * warps * mean_loads_in_flight(instructions(ck.asm["cubin"]))


def test_the_loads_policy_takes_the_launch_bound_where_it_keeps_more_loads_in_flight(monkeypatch):
    # layer-norm forward row (8192 fp16, 8 warps): without the bound ptxas uses 64 registers (4 blocks) and issues
    # each load next to its use; with it, 80 (3 blocks) and the loads early (bench_kernels, H100 2026-11-27)
    step = _ln_fwd()
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    loads = _ln_fwd()
    assert loads.asm["ptx"] == step.asm["ptx"]
    assert loads.n_regs > step.n_regs and loads.n_spills == 0
    assert "with its launch bound" in loads.artifacts.ptxas_log and "kernelc:" not in step.artifacts.ptxas_log
    assert _per_sm(loads, 256) > _per_sm(step, 256)
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "1")
    assert _ln_fwd().asm["sass"] == loads.asm["sass"]   # the launch bound's build itself


def test_the_loads_policy_keeps_the_blocks_where_they_hold_more_loads(monkeypatch):
    # geglu forward row (16384 bf16, 16 warps): 36 registers and three blocks against the bound's one block
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    sig = dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32")
    ck = kernelc.compile(K.geglu_fwd_kernel, sig, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in sig})
    assert ck.n_regs <= 40 and "with its launch bound" not in ck.artifacts.ptxas_log


def test_mean_loads_in_flight_counts_from_issue_to_first_read():
    from cubintools.sass import Instr, mean_loads_in_flight
    prog = [Instr(0, "LDG.E.128", "R4, desc[UR4][R2.64]", ""), Instr(16, "LDG.E.128", "R8, desc[UR4][R2.64+0x10]", ""),
            Instr(32, "FADD", "R12, R4, R5", ""), Instr(48, "FADD", "R13, R8, R9", ""),
            Instr(64, "STG.E", "desc[UR4][R2.64], R13", "")]
    # in flight after each instruction: 1, 2, 1 (R4 read), 0 (R8 read), 0
    assert mean_loads_in_flight(prog) == round(4 / 5, 2)


@pytest.mark.parametrize("regs,threads,shared,down", [
    (40, 512, 0, 32),      # 16 warps: three blocks at 40, four at 32
    (36, 512, 0, 32),
    (70, 512, 0, 64),      # one block at 70, two at 64
    (104, 512, 0, 64),
    (42, 128, 0, 40),      # 10 blocks of 4 warps at 48 (42 rounds up), 12 at 40
    (32, 512, 0, None),    # four 16-warp blocks: the thread limit, no more blocks at fewer registers
    (26, 128, 0, None),    # 16 blocks of 4 warps: the thread limit
    (40, 128, 100 * 1024, None)])   # shared memory holds it at two blocks
def test_step_down_ceiling(regs, threads, shared, down):
    assert P.step_down_ceiling(regs, threads, shared, L) == down
    if down is not None:
        assert P.blocks_per_sm(down, threads, shared, L) > P.blocks_per_sm(regs, threads, shared, L)
        assert P.blocks_per_sm(down + 8, threads, shared, L) == P.blocks_per_sm(regs, threads, shared, L)


SOFTMAX_SIG = dict(output_ptr="*fp32", input_ptr="*fp32", input_row_stride="i32", output_row_stride="i32",
                   n_rows="i32", n_cols="i32")


def _softmax_4096():
    # bench_kernels' softmax 4096x4096 fp32: a grid-stride row loop (num_stages=2: the next row's loads prefetched)
    from examples.kernels import softmax as SM
    return kernelc.compile(SM.softmax_kernel, SOFTMAX_SIG, dict(BLOCK_SIZE=4096, num_stages=2), target="sm_90a",
                           num_warps=16, num_stages=2, divisibility={k: 16 for k in SOFTMAX_SIG})


def test_the_loads_policy_takes_one_step_down_where_it_keeps_more_loads(monkeypatch):
    # unbounded 40 registers (3 blocks of 16 warps); at a ceiling of 32 ptxas keeps the same loads in flight a
    # thread without spilling, and 4 blocks fit (Triton's count): 528 programs all resident at once
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    monkeypatch.setenv("KERNELC_FILL_STEP_DOWN", "0")
    before = _softmax_4096()
    monkeypatch.delenv("KERNELC_FILL_STEP_DOWN")
    down = _softmax_4096()
    assert down.asm["ptx"] == before.asm["ptx"]
    assert before.n_regs > 32 and P.blocks_per_sm(before.n_regs, 512, before.shared, L) == 3
    assert down.n_regs <= 32 and P.blocks_per_sm(down.n_regs, 512, down.shared, L) == 4
    assert down.n_spills == 0 and down.local_bytes == 0
    assert "softmax_kernel one occupancy step down (at most 32 registers)" in down.artifacts.ptxas_log
    assert "kernelc:" not in before.artifacts.ptxas_log
    assert _per_sm(down, 512) > _per_sm(before, 512)


def test_no_step_down_where_it_spills(monkeypatch):
    # log-softmax backward row (8192 fp16, 16 warps): 39 registers; at 32 ptxas spills, so the build stays
    # (with its reduction's cross-warp step as allreduce: the broadcast form, the default, needs 32 alone)
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", "allreduce")
    sig = dict(dx_ptr="*fp16", dy_ptr="*fp16", y_ptr="*fp16", stride="i32", n_cols="i32")
    ck = kernelc.compile(K.log_softmax_bwd_kernel, sig, dict(BLOCK_SIZE=8192), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in sig})
    assert ck.n_regs > 32 and ck.local_bytes == 0 and "step down" not in ck.artifacts.ptxas_log



@pytest.mark.parametrize("policy", ["loads", "step"])
def test_the_pass_writes_the_fill_policy(policy):
    """Golden: the knob's policy in the header beside registers='fill_step'; the body is unchanged."""
    fn, _ = to_tile_ir(scale_rows, SCALE_SIG, dict(BLOCK=1024))
    before = print_function(fn)
    after = print_function(mark_register_budget(fn, policy=policy, keep_blocks="off"))
    assert after.split("\n", 1)[1] == before.split("\n", 1)[1]
    assert after.splitlines()[0] == before.splitlines()[0].replace(
        ") {", f") attributes {{registers='fill_step', fill_policy='{policy}'}} {{", 1)


@kernelc.jit
def sum_rows(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    # a loop that loads: each trip's loads can be in flight during the previous trip's adds
    acc = kl.zeros([BLOCK], dtype=kl.float32)
    for off in range(0, n, BLOCK):
        cols = off + kl.arange(0, BLOCK)
        acc += kl.load(x_ptr + kl.program_id(0) * n + cols, mask=cols < n, other=0.0)
    kl.store(y_ptr + kl.program_id(0), kl.sum(acc, axis=0))


@kernelc.jit
def spin_then_copy(x_ptr, y_ptr, lock_ptr, BLOCK: kl.constexpr):
    # a loop without a load (a lock's spin, as tutorial 05's dx kernel): still one pass over the data
    offs = kl.arange(0, BLOCK)
    while kl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    kl.store(y_ptr + offs, kl.load(x_ptr + offs))
    kl.atomic_xchg(lock_ptr, 0)


def test_golden_a_one_pass_kernel_keeps_its_blocks_and_a_loop_that_loads_does_not():
    """fill_keep_blocks=True (KERNELC_FILL_KEEP_BLOCKS=onepass, not the default) on a kernel whose loads are outside
    any loop, also with a loop that does not load; not on one with a loop that loads, nor with the knob off. Header
    only."""
    one, _ = to_tile_ir(scale_rows, SCALE_SIG, dict(BLOCK=1024))
    loop, _ = to_tile_ir(sum_rows, SCALE_SIG, dict(BLOCK=1024))
    spin, _ = to_tile_ir(spin_then_copy, dict(x_ptr="*fp32", y_ptr="*fp32", lock_ptr="*i32"), dict(BLOCK=1024))
    assert "scf.for" in print_function(loop) and "scf.while" in print_function(spin)
    for fn, keep in ((one, True), (loop, False), (spin, True)):
        before = print_function(fn)
        after = print_function(mark_register_budget(fn, keep_blocks="onepass"))
        assert after.split("\n", 1)[1] == before.split("\n", 1)[1]
        tail = ", fill_keep_blocks=True" if keep else ""
        assert after.splitlines()[0] == before.splitlines()[0].replace(
            ") {", f") attributes {{registers='fill_step', fill_policy='loads'{tail}}} {{", 1), after.splitlines()[0]
        assert "fill_keep_blocks" not in print_function(mark_register_budget(fn)).splitlines()[0]
        assert "attributes" not in print_function(mark_register_budget(fn, enabled=False)).splitlines()[0]


@kernelc.jit
def scale_by_sum(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    # a one-pass row with a block reduction to one value (softmax's backward rows)
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + kl.program_id(0) * n + offs, mask=offs < n, other=0.0)
    kl.store(y_ptr + kl.program_id(0) * n + offs, x * kl.sum(x, axis=0), mask=offs < n)


def test_golden_reductions_free_a_one_pass_kernel_with_a_block_reduction_only():
    """KERNELC_FILL_KEEP_BLOCKS=reductions (the default): registers='free' on a one-pass kernel with a reduction to one
    value; a one-pass kernel without one keeps its blocks (as onepass); a loop kernel with one keeps the fill. Header
    only."""
    red, _ = to_tile_ir(scale_by_sum, SCALE_SIG, dict(BLOCK=1024))
    one, _ = to_tile_ir(scale_rows, SCALE_SIG, dict(BLOCK=1024))
    loop, _ = to_tile_ir(sum_rows, SCALE_SIG, dict(BLOCK=1024))
    assert "reduce" in print_function(red) and "reduce" in print_function(loop)
    for fn, attrs in ((red, "registers='free'"), (one, "registers='fill_step', fill_policy='loads', fill_keep_blocks=True"),
                      (loop, "registers='fill_step', fill_policy='loads'")):
        before = print_function(fn)
        after = print_function(mark_register_budget(fn, keep_blocks="reductions"))
        assert after.split("\n", 1)[1] == before.split("\n", 1)[1]
        assert after.splitlines()[0] == before.splitlines()[0].replace(") {", f") attributes {{{attrs}}} {{", 1)
    assert "registers='fill_step'" in print_function(mark_register_budget(red, keep_blocks="onepass")).splitlines()[0]


T_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", stride_ym="i32")


def _ir_around(kernel, sig, cx, name, num_warps=4):
    """(IR before the pass ``name``, IR after it) of ``kernel`` on the compile pipeline."""
    from kernelc.compiler import compiler as C
    from kernelc.compiler.compiler import _base_function
    from kernelc.compiler.frontend import generate_ir
    from kernelc.compiler.pass_manager import PassContext, run_passes
    i = [p.name for p in C.TILE_PASSES].index(name)
    fn, _ = generate_ir(_base_function(kernel), sig, cx, {k: 16 for k in sig}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), num_warps))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), num_warps))
    return before, print_function(fn, show_loc=False)


def test_golden_a_one_pass_copy_through_a_conversion_is_marked_loads_first(monkeypatch):
    """mark_loads_first (after coalesce): the transpose, whose loaded tile coalesce converted, trades its fill marks for
    registers='loads_first'; a one-pass kernel without such a conversion keeps them; KERNELC_LOADS_FIRST=0 leaves
    the IR. Header only."""
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    before, after = _ir_around(K.transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), "mark_loads_first")
    assert "convert_layout" in before
    assert after.split("\n", 1)[1] == before.split("\n", 1)[1]
    assert after.splitlines()[0] == before.splitlines()[0].replace(
        "attributes {registers='fill_step', fill_policy='loads', fill_keep_blocks=True}",
        "attributes {registers='loads_first'}", 1), after.splitlines()[0]
    b2, a2 = _ir_around(scale_rows, SCALE_SIG, dict(BLOCK=1024), "mark_loads_first")
    assert a2 == b2 and "fill_keep_blocks=True" in a2.splitlines()[0]
    monkeypatch.setenv("KERNELC_LOADS_FIRST", "0")
    b3, a3 = _ir_around(K.transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), "mark_loads_first")
    assert a3 == b3


def test_loads_first_gives_up_two_blocks_for_the_transposes_whole_tile(monkeypatch):
    """The fp32 64x64 transpose (4 warps): without a ceiling some of its 8 loads issue after the first shared store;
    registers='loads_first' takes the ceiling of 10 blocks per SM (48), where all 8 issue first, without spills. The
    permute (fp16), whose free build already issues its 4 loads first, keeps that build."""
    from cubintools.sass import cubin_loads_before_first_use
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "nodots")
    ck = kernelc.compile(K.transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a", num_warps=4,
                         divisibility={k: 16 for k in T_SIG})
    free = P.ptx_to_cubin(P._MAXNTID_RE.sub(b"", ck.asm["ptx"].encode()).decode(), "sm_90a")
    issued, total = cubin_loads_before_first_use(free.cubin)
    assert total == 8 and issued < total
    assert cubin_loads_before_first_use(ck.asm["cubin"]) == (8, 8)
    assert ck.n_regs == 48 and ck.n_spills == 0 and P.blocks_per_sm(ck.n_regs, 128, 0, L) == 10
    assert "issues its 8 global loads before their first use" in ck.artifacts.ptxas_log
    psig = dict(x_ptr="*fp16", y_ptr="*fp16", M="i32", N="i32", stride_xb="i32", stride_xm="i32", stride_yb="i32",
                stride_yn="i32")
    pk = kernelc.compile(K.permute021_kernel, psig, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a", num_warps=4,
                         divisibility={k: 16 for k in psig})
    assert "registers='loads_first'" in pk.asm["tir"].splitlines()[0] and "kernelc:" not in pk.artifacts.ptxas_log
    assert cubin_loads_before_first_use(pk.asm["cubin"]) == (4, 4)


def test_the_free_mark_assembles_without_a_ceiling(monkeypatch):
    """registers='free' (KERNELC_FILL_KEEP_BLOCKS=reductions): the build without .maxntid or a ceiling, where onepass
    takes the occupancy step (softmax's backward row, 8192 fp16, 16 warps, broadcast form: 47 -> 40 registers, 2 -> 3
    blocks per SM)."""
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "nodots")
    sig = dict(dx_ptr="*fp16", dy_ptr="*fp16", y_ptr="*fp16", stride="i32", n_cols="i32")

    def build():
        return kernelc.compile(K.softmax_bwd_kernel, sig, dict(BLOCK_SIZE=8192), target="sm_90a", num_warps=16,
                               divisibility={k: 16 for k in sig})
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", "broadcast")
    monkeypatch.setenv("KERNELC_FILL_KEEP_BLOCKS", "onepass")
    stepped = build()
    monkeypatch.setenv("KERNELC_FILL_KEEP_BLOCKS", "reductions")
    free = build()
    assert free.asm["ptx"] == stepped.asm["ptx"] and "registers='free'" in free.asm["tir"].splitlines()[0]
    plain = P.ptx_to_cubin(P._MAXNTID_RE.sub(b"", free.asm["ptx"].encode()).decode(), "sm_90a")
    assert free.n_regs == plain.resources["softmax_bwd_kernel"].registers > stepped.n_regs
    assert "kernelc:" not in free.artifacts.ptxas_log


def test_the_assembler_takes_the_policy_from_the_ir(monkeypatch):
    """geglu bwd in consumer order: the loads policy keeps its build without a ceiling (77 registers on CPU), the
    step policy the filled one (120); ptx_to_cubin follows the policy it is given, whatever the environment says."""
    monkeypatch.setenv("KERNELC_CONSUMER_ORDER", "elementwise")
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    ck = kernelc.compile(K.geglu_bwd_kernel, GEGLU_BWD_SIG, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in GEGLU_BWD_SIG})
    assert "fill_policy='loads'" in ck.asm["tir"].splitlines()[0]
    monkeypatch.setenv("KERNELC_FILL_POLICY", "step")   # the environment at assembly: not what decides
    regs = {p: P.ptx_to_cubin(ck.asm["ptx"], "sm_90a", fill_step=True, fill_policy=p).resources[
        "geglu_bwd_kernel"].registers for p in ("loads", "step")}
    assert regs["loads"] == ck.n_regs and regs["step"] > regs["loads"], regs


def test_a_step_no_instruction_fits_under_keeps_the_free_build(monkeypatch):
    # KERNELC_OCCUPANCY_STEP=all: matmul_tma at 128x128x64 w8 (90 registers) would step down to 80, where ptxas
    # cannot place the wgmma's accumulator (C7602) and raises; the unbounded build stays, the compile succeeds
    from examples.kernels import matmul_tma
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "all")
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
           "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)
    ck = kernelc.compile(matmul_tma.matmul_tma_kernel, sig, cx, target="sm_90a", num_warps=8, num_stages=3,
                         divisibility={k: 16 for k in sig})
    assert ck.n_regs >= 90 and "runs" not in ck.artifacts.ptxas_log


def test_the_loads_policy_assembles_its_two_candidates_side_by_side(monkeypatch):
    # the launch bound's build and the one a step down both depend only on the build chosen before them: a first
    # call (tutorial 05's dx kernel) waits for one ptxas run there, not two
    import threading
    import time
    monkeypatch.setenv("KERNELC_FILL_POLICY", "loads")
    monkeypatch.setenv("KERNELC_FILL_STEP_DOWN", "1")
    monkeypatch.setenv("KERNELC_CACHE_DIR", "")
    spans, orig = [], P._nvjitlink_cubin

    def slow(data, target, opt_level, extra, name):
        t0 = time.perf_counter()
        time.sleep(0.3)   # longer than a build, so that only overlapping calls can end within one of them
        res = orig(data, target, opt_level, extra, name)
        spans.append((t0, time.perf_counter(), threading.get_ident(), tuple(extra)))
        return res
    monkeypatch.setattr(P, "_nvjitlink_cubin", slow)
    ck = _ln_fwd()
    assert ck.n_spills == 0 and len(spans) == 3, spans   # unbounded, then the bound's and the step down's
    first, a, b = sorted(spans)
    assert any("-maxrregcount" in e for e in a[3] + b[3])
    assert a[0] >= first[1] and b[0] >= first[1]      # after the build they are weighed against
    assert a[0] < b[1] and b[0] < a[1] and a[2] != b[2]   # overlapping, on two threads
