"""``kernelc.compile``: source -> tile IR -> passes -> LLVM IR -> PTX -> cubin -> SASS, on any machine.

Example (no GPU needed)::

    ck = kernelc.compile(add_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                                "n": "i32"}, constexprs={"BLOCK": 1024}, target="sm_90a")
    print(ck.asm["sass"])          # LDG.E.128 ...
    ck.source_map.pc_to_line(0x80)  # ("/home/me/add.py", 12)
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import CompilationError
from ..language.core import DeviceFunction
from ..language.dtypes import parse_type, pointer_type
from .frontend import generate_ir
from .ir import print_function, verify
from .passes.atomic_results import mark_unused_atomic_results, vectorize_atomics
from .passes.axis_info import analyze
from .passes.coalesce import coalesce
from .passes.flatten_loops import flatten_loops
from .passes.tma_stores import defer_tma_store_waits
from .passes.dot_acc import fold_dot_accumulate
from .passes.fp8_dot import upcast_fp8_dots
from .passes.hints import anchor_hints
from .passes.exp2_poly import mark_exp2_poly
from .passes.fp_contract import mark_exp2_ftz, mark_fp_contraction, mark_log_approx, mark_positive_nan_casts
from .passes.layout_assign import assign_layouts
from .passes.hoist_conversions import hoist_conversions
from .passes.load_layouts import loads_in_use_layout
from .passes.tma_prefetch import issue_tma_loads_early
from .passes.reduce_trees import mark_reduce_trees
from .passes.reduce_xwarp import mark_reduce_scratch, mark_reduce_xwarp
from .passes.l2_reuse import mark_l2_reuse
from .passes.register_budget import mark_dot_loops_step, mark_loads_first, mark_register_budget
from .passes.instruction_order import mark_instruction_order
from .passes.staged_operands import share_staged_operands
from .passes.hoist_descriptors import hoist_descriptors
from .passes.lower_descriptors import lower_descriptors
from .passes.fp8_bounds import mark_fp8_overflow_bounds
from .passes.narrow_carries import mark_fp8_carry_words, narrow_loop_carries
from .abi import flat_divisibility
from .passes.cp_async_rings import expand_cp_async_rings
from .passes.mask_blocks import mark_uniform_masks
from .passes.tma_rings import expand_tma_rings
from .passes.warp_regions import expand_warp_specialize
from .passes.ws_consumers import split_ws_consumers
from .passes.pipeline_loads import pipeline_loads
from .passes.pointer_tiles import pointer_tiles_to_descriptors
from .passes.schedule import schedule_pipelines, schedule_wgmma, warp_specialize
from .passes.stage_operands import stage_invariant_operands
from .passes.wgmma_waits import place_wgmma_waits
from .passes.uniform_warpgroups import mark_uniform_warpgroups
from .passes.zero_acc import mark_zero_acc_dots
from .passes.copy_addresses import mark_copy_mad_wide
from .passes.elect_form import mark_elect_form
from .passes.bulk_adds import claim_bulk_adds
from .passes.bulk_reductions import expand_bulk_reductions
from .passes.tma_write_guards import guard_tma_writes
from ..options import get as get_option
from .passes.smem_offsets import assign_smem_offsets
from .passes.simplify import simplify
from .pass_manager import PassContext, TilePass, run_passes
from .artifact import COMPILER_VERSION, CompiledKernel, _LazyAsm  # noqa: F401


# Compilation listeners (like Triton's): called with (kernel name, stage, seconds) for every stage.
_listeners: List[Callable[[str, str, float], None]] = []


def add_compile_listener(fn: Callable[[str, str, float], None]) -> None:
    _listeners.append(fn)


def remove_compile_listener(fn) -> None:
    if fn in _listeners:
        _listeners.remove(fn)


def _base_function(kernel) -> DeviceFunction:
    f = kernel
    while not isinstance(f, DeviceFunction):
        f = getattr(f, "fn", None)
        if f is None:
            raise TypeError(f"kernelc.compile expects a @kernelc.jit function, got {kernel!r}")
    return f


def to_tile_ir(kernel, signature, constexprs=None, divisibility=None, equal_to_1=()):
    """Frontend + verification + simplification: the optimised tile IR and the globals it read."""
    fn = _base_function(kernel)
    func, used = generate_ir(fn, signature, constexprs or {}, divisibility, tuple(equal_to_1))
    verify(func)
    func = simplify(lower_descriptors(anchor_hints(func)))
    verify(func)
    return func, used


def _out_of_resources(required: int, limit: int, name: str, used):
    """The error, with what the frontend read (``dependencies``): the disk cache remembers the failure
    under the same validity rule as a kernel (runtime/cache.py)."""
    from ..errors import OutOfResources
    e = OutOfResources(required, limit, "shared memory", name)
    e.dependencies = used.to_list()
    return e


def compile(kernel, signature: Dict[str, str], constexprs: Optional[Dict[str, Any]] = None, target=None,
            num_warps: int = 4, num_stages: int = 3, divisibility: Optional[Dict[str, int]] = None,
            equal_to_1: Tuple[str, ...] = (), name: Optional[str] = None, dump_ir=None,
            enable_fp_fusion: Optional[bool] = None, maxnreg: Optional[int] = None) -> CompiledKernel:
    """Compile ``kernel`` for ``target`` ("sm_80", "sm_90a", ...; default sm_90a; ``kernelc.compile`` defaults
    to the current GPU's target instead).

    ``signature`` gives each runtime argument's type ("*fp32", "i32", "tensordesc<fp16[64, 64]>", ...);
    ``constexprs`` the values of constexpr arguments; ``divisibility`` the known alignment (bytes for
    pointers) of arguments, as the runtime's 16-byte specialisation supplies; a tensor descriptor
    argument ``d`` takes entries per machine field (``"d.base"``, ``"d.shape1"``, ``"d.stride0"``, see
    ``kernelc/compiler/abi.py``) or one entry ``"d"`` for all of them. ``dump_ir``: the tile IR after
    every pass, to stderr (``True``) or to a callable ``(pass name, IR text)``; default: KERNELC_DUMP_IR.
    ``enable_fp_fusion``: let float ``a * b + c`` contract into fma, as Triton's option of that name;
    default: KERNELC_DEFAULT_FP_FUSION (on).
    ``maxnreg``: the registers a thread may use at most (Triton's launch option of that name): the kernel's
    ``maxnreg`` attribute, given to the assembler as ``-maxrregcount`` (no occupancy-step or fill rebuilds then).
    """
    from .backend.llvm_pool import in_flight
    with in_flight():
        return _compile(kernel, signature, constexprs, target, num_warps, num_stages, divisibility, equal_to_1, name,
                        dump_ir, enable_fp_fusion, maxnreg)


def _compile(kernel, signature, constexprs, target, num_warps, num_stages, divisibility, equal_to_1, name, dump_ir,
             enable_fp_fusion, maxnreg=None) -> CompiledKernel:
    from .backend import parse_target
    fn = _base_function(kernel)
    if num_warps < 1 or num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(f"num_warps must be a power of two between 1 and 32, got {num_warps}")
    maxnreg = check_maxnreg(maxnreg)
    tgt = parse_target(target if target is not None else "sm_90a")
    from .backend.ptxas import fit_target_to_assembler
    tgt = fit_target_to_assembler(tgt)   # PTX an older standalone ptxas reads (KERNELC_ASSEMBLER=auto)
    # Pointers default to 16-byte alignment: every torch/CUDA allocation has it, and the runtime
    # specialises on it (pass divisibility={name: 1} to compile for unaligned pointers).
    divisibility = dict(divisibility or {})
    for pname, pty in signature.items():
        if str(pty).startswith("*"):
            divisibility.setdefault(pname, 16)
    # tensor descriptor parameters: per field ("a_desc.stride0"), or one entry for all their fields
    divisibility = flat_divisibility({k: parse_type(v) for k, v in signature.items()}, divisibility, base_default=16)
    timings: Dict[str, float] = {}

    def build(stage_pinned_a=False):
        turns = _take_turns()
        if turns:
            _python_phase.acquire()
        try:
            front = _front(fn, signature, constexprs, tgt, num_warps, divisibility, equal_to_1, name, dump_ir,
                           enable_fp_fusion, num_stages, timings, maxnreg, stage_pinned_a)
        finally:
            if turns:
                _python_phase.release()
        if maxnreg is not None:  # the launch's ceiling, on the kernel (the backend reads it from there)
            front[0].attrs["maxnreg"] = maxnreg
        return _backend(fn, signature, constexprs, tgt, num_warps, num_stages, *front, timings), front[0]

    ck, func = build()
    bad = _overwritten_pinned_fragments(func, ck)
    if bad:
        # (KERNELC_WGMMA_A_REGS_PINNED=auto) the assembler gave a register A fragment held across a loop with a pinned
        # wait to the loop's own values: compiled again with such operands staged (backend/sass_fragments.py)
        ck, _ = build(stage_pinned_a=True)
        ck.compile_log.insert(0, f"kernelc: the SASS overwrites {len(bad)} register A fragment(s) inside a loop with a "
                                 f"pinned wgmma wait ({bad[0]}); compiled again with those operands staged in shared "
                                 f"memory (KERNELC_WGMMA_A_REGS_PINNED=auto)")
    return ck


def _overwritten_pinned_fragments(func, ck) -> List[str]:
    """Under KERNELC_WGMMA_A_REGS_PINNED=auto, for a kernel whose loop with a pinned wgmma wait reads an A operand from
    registers: the loop's HGMMAs whose register A fragment the SASS overwrites (a kernel whose SASS cannot be read
    counts as overwritten); else none."""
    from ..options import get
    from .passes.stage_operands import _pinned_loop
    if get("KERNELC_WGMMA_A_REGS_PINNED") != "auto":
        return []

    def loop_of(op):
        while op is not None and op.name != "scf.for":
            op = op.block.parent if op.block is not None else None
        return op

    if not any(o.name == "dot" and o.attrs.get("a_regs") and _pinned_loop(loop_of(o) or o) for o in func.walk()):
        return []
    from .backend.sass_fragments import overwritten_a_fragments
    try:
        sass = ck.asm["sass"]
    except Exception as e:  # noqa: BLE001 (no disassembler: the fragment cannot be shown kept)
        return [f"no SASS: {type(e).__name__}"]
    return overwritten_a_fragments(sass)[0]


def _take_turns() -> bool:
    """KERNELC_COMPILE_TURNS: whether this compile's Python half waits for its turn (``auto``: 4+ usable cores)."""
    from ..options import get
    mode = get("KERNELC_COMPILE_TURNS")
    if mode == "auto":
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        return cores >= 4
    return mode == "on"


# Held by a compile from its frontend to its LLVM IR: those phases are Python and take turns on the GIL anyway, and
# compiles on threads (an autotuner's candidates) interleaved there all reach LLVM at about the same time, at the
# end; one at a time, each hands its LLVM and assembler stages (worker processes, or C code without the GIL) on as
# soon as its own Python is done, and they overlap the next compile's passes.
_python_phase = threading.RLock()   # (a dump_ir callback or a helper the frontend runs may compile too)


def _fresh_python_phase() -> None:   # a forked child: a parent thread may have held it at the fork
    global _python_phase
    _python_phase = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_python_phase)


def _front(fn, signature, constexprs, tgt, num_warps, divisibility, equal_to_1, name, dump_ir, enable_fp_fusion,
           num_stages, timings, maxnreg=None, stage_pinned_a=False):
    """Frontend, tile passes and lowering: the LLVM IR and what the backend half needs with it."""
    from .codegen import lower_to_llvm
    t0 = time.perf_counter()
    func, used = generate_ir(fn, signature, constexprs or {}, divisibility, tuple(equal_to_1), name, arch=tgt.arch,
                             num_warps=num_warps)
    verify(func)
    if enable_fp_fusion is None:
        enable_fp_fusion = fp_fusion_default()
    ctx = PassContext(tgt.arch, tuple(tgt.capability), num_warps, pipeline_loads=pipeline_loads_enabled(),
                      num_stages=num_stages, fp_fusion=bool(enable_fp_fusion),
                      smem_limit=tgt.limits.max_shared_per_block_optin or 0, maxnreg=maxnreg,
                      stage_pinned_a=stage_pinned_a)
    dump = dump_ir if dump_ir is not None else dump_ir_requested()
    func = run_passes(func, FRONTEND_PASSES, ctx, verify_each=False, dump=dump, timings=timings)
    timings["frontend"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tir_text_initial = print_function(func)
    func = run_passes(func, TILE_PASSES, ctx, verify_each=True, dump=dump, timings=timings)
    axis, plan = ctx.axis, ctx.plan
    plan.notes[:0] = ctx.notes
    timings["tile_passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    reports: Dict[str, Any] = {}
    # the warps the tiles are laid over: num_warps, or the consumer warpgroups split_ws_consumers chose
    body_warps = func.attrs.get("consumer_warps", num_warps)
    llir, smem_bytes = lower_to_llvm(func, plan, axis, body_warps, tgt, reports)
    timings["lower_to_llvm"] = time.perf_counter() - t0
    limit = tgt.limits.max_shared_per_block_optin
    if limit and smem_bytes > limit:
        # known before LLVM and ptxas, which are most of a compile: an autotuner's oversized configs
        # (60 of tutorial 09's 192) fail here in a fraction of the time
        raise _out_of_resources(smem_bytes, limit, func.name, used)
    return func, used, plan, llir, smem_bytes, limit, reports, body_warps, tir_text_initial


def _backend(fn, signature, constexprs, tgt, num_warps, num_stages, func, used, plan, llir, smem_bytes, limit,
             reports, body_warps, tir_text_initial, timings):
    """LLVM, the assembler (worker processes, or C code that releases the GIL) and the kernel object."""
    from .backend import compile_llir
    cap = func.attrs.get("maxnreg")
    # a kernel with maxnreg is assembled at that ceiling only: the register budget's rebuilds would pick another
    budget = func.attrs.get("registers") if cap is None else None
    art = compile_llir(llir, tgt, func.name, fill_step=budget == "fill_step",
                       fill_policy=func.attrs.get("fill_policy"),
                       keep_blocks=bool(func.attrs.get("fill_keep_blocks")),
                       occupancy_step=budget == "occupancy_step", loads_first=budget == "loads_first",
                       ptxas_options=() if cap is None else (f"-maxrregcount={cap}",))
    for k, v in art.timings.items():
        timings[k] = v
    if limit and smem_bytes + art.shared > limit:
        raise _out_of_resources(smem_bytes + art.shared, limit, func.name, used)
    asm = _LazyAsm(art, tir=print_function(func), tir_initial=tir_text_initial, llir=llir, llir_opt=art.llir_opt,
                   ptx=art.ptx, cubin=art.cubin)
    ck = CompiledKernel(
        name=func.name, signature=_kernel_signature(fn, signature), constexprs=dict(constexprs or {}),
        num_warps=num_warps, num_stages=num_stages, target=tgt, asm=asm, n_regs=art.n_regs, n_spills=art.n_spills,
        shared=smem_bytes + art.shared, dynamic_shared=smem_bytes, local_bytes=art.local_bytes, source_map=art.source_map,
        compile_log=list(plan.notes), timings=timings, arg_names=[a.name for a in func.arguments],
        arg_types=[a.type for a in func.arguments], artifacts=art,
        used_globals={f"{m}.{n}": s for (k, m, n), s in used.items.items() if k == "global"},
        dependencies=used.to_list(),
        reports=reports, extra_warps=body_warps - num_warps + reports.get("warp_specialization", {}).get("producer_warps", 0),
        global_scratch_bytes=reports.get("global_scratch_bytes", 0))
    for stage, secs in timings.items():
        for cb in list(_listeners):
            cb(func.name, stage, secs)
    return ck


def _kernel_signature(fn, signature) -> Dict[str, str]:
    """``{parameter: type}`` in parameter order, as the user gives it (a tensor descriptor stays one
    entry; ``arg_names``/``arg_types`` list the machine parameters, see ``kernelc/compiler/abi.py``)."""
    return {p: str(parse_type(signature[p])) for p in fn.arg_names if p in signature}


def _assign_layouts(fn, ctx: PassContext):
    ctx.axis = analyze(fn)
    ctx.plan = assign_layouts(fn, ctx.axis, ctx.num_warps, ctx.capability[0], ctx.arch)
    ctx.plan.stage_pinned_a = ctx.stage_pinned_a  # read by passes/stage_operands.py (KERNELC_WGMMA_A_REGS_PINNED=auto)
    return fn


# The tile-IR pipeline (kernelc/compiler/pass_manager.py): frontend passes run before the initial IR
# text (asm["tir_initial"]), tile passes after it; each tile pass is verified.
FRONTEND_PASSES = (
    # a hint holds for its operand everywhere, also when the call's result is dropped (as in Triton)
    TilePass("anchor_hints", lambda f, c: anchor_hints(f)),
    # TMA targets: plain pointer loads of provable tiles feeding dots become descriptor loads
    # (KERNELC_AUTO_TMA=all: every tile load and store; 0: none)
    TilePass("pointer_tiles_to_descriptors", lambda f, c: pointer_tiles_to_descriptors(f, c.arch, c.notes)),
    TilePass("hoist_descriptors", lambda f, c: hoist_descriptors(f)),
    # a loop the program asks to warp-specialise with a 128-row descriptor-load dot at 4 warps: two consumer
    # warpgroups (Triton's split); every pass after it lays tiles over ctx.num_warps = the kernel's
    # consumer_warps. Before lower_descriptors: the same split whether its loads take TMA or the masked path
    # (passes/ws_consumers.py)
    TilePass("split_ws_consumers", split_ws_consumers),
    TilePass("lower_descriptors", lambda f, c: lower_descriptors(f, c.arch)),
    # kl.bulk_add: tma=True where a 1-D bulk reduction may add it, else its element atomics (passes/bulk_adds.py)
    TilePass("claim_bulk_adds", lambda f, c: claim_bulk_adds(f, c.arch)),
    # a TMA bulk reduction (KERNELC_TMA_WRITE_GUARD=all: a store too) at coordinates not proven >= 0 runs only
    # where they are, the masked path elsewhere: the copy engine faults on negative ones (passes/tma_write_guards.py)
    TilePass("guard_tma_writes", lambda f, c: guard_tma_writes(f, get_option("KERNELC_TMA_WRITE_GUARD"))),
)
TILE_PASSES = (
    TilePass("simplify", lambda f, c: simplify(f)),
    # acc + dot(a, b) -> dot(a, b, acc), as Triton's combine pass: one accumulator tile, not two
    TilePass("fold_dot_accumulate", lambda f, c: fold_dot_accumulate(f)),
    # tl.range(..., flatten=True): the tile loop and its K loop as one loop, so the ring runs across tiles;
    # after the fold: an `acc += dot(a, b)` K loop's accumulator is the dot's by then
    # (KERNELC_FLATTEN_LOOPS; passes/flatten_loops.py)
    TilePass("flatten_loops", lambda f, c: flatten_loops(f, c.notes, num_warps=c.num_warps)),
    # a loop value read only through one cast (FA3-order attention's P.to(fp16)) is carried cast
    TilePass("narrow_loop_carries", lambda f, c: narrow_loop_carries(f)),
    # before the load prefetch: the casts it inserts decide which loads feed dots directly
    TilePass("upcast_fp8_dots", lambda f, c: upcast_fp8_dots(f, c.capability, c.notes, c.num_warps, c.arch)),
    TilePass("pipeline_loads", lambda f, c: pipeline_loads(f, c.num_warps, c.notes, kernel_stages=c.num_stages,
                                                           maxnreg=c.maxnreg),
             lambda c: c.pipeline_loads),
    TilePass("simplify", lambda f, c: simplify(f), lambda c: c.pipeline_loads),
    # atomics whose old value nobody reads skip its broadcast (passes/atomic_results.py)
    TilePass("mark_unused_atomic_results", lambda f, c: mark_unused_atomic_results(f)),
    # enable_fp_fusion: float mul/add/sub may contract into fma (passes/fp_contract.py)
    TilePass("mark_fp_contraction", lambda f, c: mark_fp_contraction(f, c.fp_fusion)),
    # exp2 as ex2.approx.ftz (Triton's): KERNELC_EXP2_FTZ
    TilePass("mark_exp2_ftz", lambda f, c: mark_exp2_ftz(f, exp2_ftz_enabled())),
    # fp32 log as lg2.approx * ln 2 (approx, the default), or libdevice's __nv_logf (Triton's) under KERNELC_LOG_F32=libdevice
    TilePass("mark_log_approx", lambda f, c: mark_log_approx(f, get_option("KERNELC_LOG_F32") == "approx")),
    # fp8 casts of exp2 results skip the NaN-sign fix-up (a canonical NaN is positive)
    TilePass("mark_positive_nan_casts", lambda f, c: mark_positive_nan_casts(f)),
    # an e5m2 cast of an exp2 result that the block also sums: the sum bounds it, and codegen skips the
    # overflow fix-up where every sum a warp holds is below the threshold (passes/fp8_bounds.py)
    TilePass("mark_fp8_overflow_bounds", lambda f, c: mark_fp8_overflow_bounds(f, fp8_self_bound_enabled())),
    # a softmax exp2 that only feeds fp8 and sums: a fraction of it on the FMA pipe (KERNELC_EXP2_POLY; auto:
    # only where a thread computes enough of them for MUFU to bound the loop)
    TilePass("mark_exp2_poly", lambda f, c: mark_exp2_poly(f, *exp2_poly_setting(), num_warps=c.num_warps)),
    # a loop-carried fp8 tile crosses the back edge in the words the fp8 wgmma A operand takes (KERNELC_FP8_CARRY_WORDS)
    TilePass("mark_fp8_carry_words", lambda f, c: mark_fp8_carry_words(f, fp8_carry_words_enabled())),
    # max/min (and integer add/xor) reductions combine a thread's registers as a tree, not a chain (KERNELC_REDUCE_TREE)
    TilePass("mark_reduce_trees", lambda f, c: mark_reduce_trees(f, reduce_tree_enabled())),
    # how a block reduction crosses warps and in which order its butterflies run (KERNELC_REDUCE_XWARP, _BFLY)
    TilePass("mark_reduce_xwarp", lambda f, c: mark_reduce_xwarp(f, get_option("KERNELC_REDUCE_XWARP"),
                                                                 get_option("KERNELC_REDUCE_BFLY"))),
    # where each block reduction's cross-warp partials live: one reused area or one each (KERNELC_REDUCE_SCRATCH)
    TilePass("mark_reduce_scratch", lambda f, c: mark_reduce_scratch(f, get_option("KERNELC_REDUCE_SCRATCH"),
                                                                     c.num_warps)),
    # loads whose addresses recur pid % n programs later keep their lines in L2 (KERNELC_L2_REUSE)
    TilePass("mark_l2_reuse", lambda f, c: mark_l2_reuse(f, get_option("KERNELC_L2_REUSE"))),
    # a kernel without dots gets the registers of its occupancy step from the assembler (passes/register_budget.py;
    # KERNELC_FILL_KEEP_BLOCKS=reductions, the default: a one-pass one keeps its blocks per SM, and one with a block
    # reduction gets the build without a register ceiling)
    TilePass("mark_register_budget", lambda f, c: mark_register_budget(f, fill_occupancy_step_enabled(),
                                                                       fill_policy(),
                                                                       get_option("KERNELC_FILL_KEEP_BLOCKS"))),
    # dots in two loops one after the other: the occupancy step where nothing spills (passes/register_budget.py)
    TilePass("mark_dot_loops_step", lambda f, c: mark_dot_loops_step(f, get_option("KERNELC_STEP_DOT_LOOPS"))),
    # fp32 adds nobody reads the result of, over contiguous addresses: sm_90 vector red (vec=N)
    TilePass("vectorize_atomics", lambda f, c: vectorize_atomics(f, c.capability[0])),
    TilePass("coalesce", lambda f, c: coalesce(f, c.num_warps, c.capability[0], c.arch, c.notes)),
    # a one-pass kernel that converts a loaded tile (a transpose): every load in flight before the first use
    # (passes/register_budget.py; KERNELC_LOADS_FIRST)
    TilePass("mark_loads_first", lambda f, c: mark_loads_first(f, get_option("KERNELC_LOADS_FIRST"))),
    # a conversion of a value computed before a loop is done once, before it, not on every trip
    TilePass("hoist_conversions", lambda f, c: hoist_conversions(f, c.notes)),
    # a small vector converted right after its load is loaded in the converted layout (passes/load_layouts.py)
    TilePass("loads_in_use_layout", lambda f, c: loads_in_use_layout(f)),
    # after the passes that add layout conversions: an elementwise chain reaches the assembler element by
    # element, each pure instruction just before its first user (passes/instruction_order.py)
    TilePass("mark_instruction_order", lambda f, c: mark_instruction_order(f, consumer_order_mode())),
    # layouts (and axis info) for the scheduling passes and codegen: an analysis, the IR is unchanged
    TilePass("assign_layouts", _assign_layouts),
    # the schedule, written into the IR (passes/schedule.py, docs/schedule-ir.md): rings, warp
    # specialisation, wgmma issue/wait points; codegen reads these attributes and decides nothing
    TilePass("schedule_pipelines", schedule_pipelines),
    TilePass("warp_specialize", warp_specialize),
    TilePass("schedule_wgmma", schedule_wgmma),
    # the cp.async rings as explicit ops (ring_alloc, async_copy, commit/wait, ring_read): codegen
    # lowers them one at a time (passes/cp_async_rings.py)
    # a tile compare that is the same over aligned blocks says so (uniform=[..]): one compare per block a thread
    # holds (passes/mask_blocks.py; KERNELC_UNIFORM_MASKS: onepass, every such compare in a kernel without dots
    # and without a loop that loads, and a ringed copy's mask compares elsewhere; nodots; all; rings)
    TilePass("mark_uniform_masks", lambda f, c: mark_uniform_masks(f, c, get_option("KERNELC_UNIFORM_MASKS")),
             lambda c: get_option("KERNELC_UNIFORM_MASKS") != "off"),
    TilePass("expand_cp_async_rings", expand_cp_async_rings),
    # the TMA rings as explicit ops (tma_ring_alloc, mbarrier init/expect_tx/wait, tma_copy_to_ring,
    # ring_read; the phase parity as arithmetic): a loop no producer warp fills (passes/tma_rings.py)
    TilePass("expand_tma_rings", expand_tma_rings),
    # the warp-specialised loop as explicit ops: the producer warp's program (ws_producer), the full/empty
    # barriers, the consumers' waits and releases (passes/warp_regions.py)
    TilePass("expand_warp_specialize", expand_warp_specialize),
    # dot operands a loop without a ring does not change are stored to shared memory once, before it
    # (stage_operand; the ring passes stage those of their loops): passes/stage_operands.py
    TilePass("stage_invariant_operands", stage_invariant_operands),
    # a loop-invariant dot operand staged for two loops of one block is stored once (passes/staged_operands.py)
    TilePass("share_staged_operands", lambda f, c: share_staged_operands(f)),
    # every wgmma.wait_group as a wgmma_wait op: after each dot, after a loop whose dots stay in flight, at a
    # deferred dot's first read (passes/wgmma_waits.py)
    TilePass("place_wgmma_waits", place_wgmma_waits),
    # desc.atomic_add on TMA: the staging buffer and its stages, the elected thread's bulk reduction, the
    # bulk-group waits (passes/bulk_reductions.py); after the wgmma waits, so a staged dot result is complete
    TilePass("expand_bulk_reductions", expand_bulk_reductions),
    # a TMA store in a loop: its own staging buffer, waited for just before the buffer is written again and
    # after the loop, not right after the copy is issued (passes/tma_stores.py; KERNELC_TMA_STORE_WAIT)
    TilePass("defer_tma_store_waits", defer_tma_store_waits),
    # a TMA tile loaded outside loops for dots to read in place: its copy issued as early as its offsets
    # allow, waited for at its first read (passes/tma_prefetch.py)
    TilePass("issue_tma_loads_early", issue_tma_loads_early),
    # shared-memory offsets by live range: buffers of loops that run one after the other share bytes, with a
    # barrier before the reuse (passes/smem_offsets.py; KERNELC_SMEM_REUSE)
    TilePass("assign_smem_offsets", assign_smem_offsets),
    # several consumer warpgroups: the wgmma dots read a warpgroup index taken once through a shuffle from lane 0,
    # so ptxas keeps their descriptors on the uniform datapath (passes/uniform_warpgroups.py;
    # KERNELC_UNIFORM_WARPGROUP)
    # a wgmma dot with a zero constant accumulator takes use_acc = false: scale-d false on its first K step and no
    # accumulator registers (passes/zero_acc.py; KERNELC_WGMMA_ZERO_ACC); before the warpgroup index is appended
    TilePass("mark_zero_acc_dots", lambda f, c: mark_zero_acc_dots(f, c, get_option("KERNELC_WGMMA_ZERO_ACC"))),
    TilePass("mark_uniform_warpgroups",
             lambda f, c: mark_uniform_warpgroups(f, c, get_option("KERNELC_UNIFORM_WARPGROUP"))),
    # a cp.async copy's address (scalar pointer + i32 offset) as one mad.wide.s32, which ptxas forms with LEA pairs
    # on the ALU pipe and the base in uniform registers (passes/copy_addresses.py; KERNELC_COPY_MAD_WIDE)
    TilePass("mark_copy_mad_wide", mark_copy_mad_wide, lambda c: get_option("KERNELC_COPY_MAD_WIDE")),
    # which thread issues the TMA copies: warp 0's elect.sync lane or tid 0 (passes/elect_form.py; KERNELC_TMA_ELECT)
    TilePass("mark_elect_form", lambda f, c: mark_elect_form(f, get_option("KERNELC_TMA_ELECT"))),
)


def dump_ir_requested() -> bool:
    """KERNELC_DUMP_IR=1: print the tile IR after every pass to stderr."""
    from ..options import get
    return get("KERNELC_DUMP_IR")


def check_maxnreg(maxnreg) -> Optional[int]:
    """A launch's ``maxnreg`` as an int (None: no ceiling); ValueError unless an integer from 16 to 255."""
    if maxnreg is None:
        return None
    if isinstance(maxnreg, bool) or not hasattr(maxnreg, "__index__") or not 16 <= maxnreg.__index__() <= 255:
        raise ValueError(f"maxnreg must be an integer from 16 to 255 (registers a thread), got {maxnreg!r}")
    return maxnreg.__index__()


def fp_fusion_default() -> bool:
    """Triton's ``enable_fp_fusion`` default; KERNELC_DEFAULT_FP_FUSION=0 turns it off for every launch
    that does not pass the option."""
    from ..options import get
    return get("KERNELC_DEFAULT_FP_FUSION")


def consumer_order_mode() -> str:
    """KERNELC_CONSUMER_ORDER: which kernels reach the assembler in consumer order (elementwise, off)."""
    from ..options import get
    return get("KERNELC_CONSUMER_ORDER")


def fill_policy() -> str:
    """KERNELC_FILL_POLICY: which builds the assembler weighs for a kernel without dots (loads, step, loops)."""
    from ..options import get
    return get("KERNELC_FILL_POLICY")


def fill_occupancy_step_enabled() -> bool:
    """KERNELC_FILL_OCCUPANCY_STEP: kernels without dots are assembled with their occupancy step's registers."""
    from ..options import get
    return get("KERNELC_FILL_OCCUPANCY_STEP")


def exp2_ftz_enabled() -> bool:
    """fp32 exp2 as ex2.approx.ftz (Triton's); KERNELC_EXP2_FTZ=0 keeps subnormal results."""
    from ..options import get
    return get("KERNELC_EXP2_FTZ")


def reduce_tree_enabled() -> bool:
    """KERNELC_REDUCE_TREE: exactly associative reductions combine a thread's registers as a balanced tree."""
    from ..options import get
    return get("KERNELC_REDUCE_TREE")


def fp8_self_bound_enabled() -> bool:
    """KERNELC_FP8_SELF_BOUND: an unbounded fp32 -> e5m2 tile cast fixes up only where a value needs it."""
    from ..options import get
    return get("KERNELC_FP8_SELF_BOUND")


def fp8_carry_words_enabled() -> bool:
    """KERNELC_FP8_CARRY_WORDS: loop-carried 8-bit tiles grouped into the fp8 wgmma A fragment's words."""
    from ..options import get
    return get("KERNELC_FP8_CARRY_WORDS")


def exp2_poly_setting():
    """(fraction, degree) of KERNELC_EXP2_POLY / KERNELC_EXP2_POLY_DEGREE: how much of a softmax exp2 feeding
    fp8 runs as a polynomial on the FMA pipe (passes/exp2_poly.py)."""
    from ..options import get
    return get("KERNELC_EXP2_POLY"), int(get("KERNELC_EXP2_POLY_DEGREE"))


def pipeline_loads_enabled() -> bool:
    """Register prefetch of plain loads in ``num_stages >= 2`` loops; KERNELC_PIPELINE_LOADS=0 turns it off."""
    from ..options import get
    return get("KERNELC_PIPELINE_LOADS")
