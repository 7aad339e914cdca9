"""Every ``KERNELC_*`` environment knob in one typed table, and the one parser for them.

Each :class:`Knob` has a name, a type, a default and a doc line; :func:`get` reads the environment
and returns the typed value, or raises :class:`OptionError` naming the variable and the values it
accepts.  Knobs marked ``compile=True`` change the code the compiler emits: :func:`compile_options`
collects them into a frozen :class:`CompileOptions` that the disk cache hashes whole into its key,
so a new compile knob cannot be forgotten there.

``python3 -m kernelc.options --markdown`` prints the table for ``docs/options.md``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, fields
from typing import Any, Dict, Optional, Tuple

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class OptionError(ValueError):
    """A malformed ``KERNELC_*`` value (the message names the variable and the accepted values)."""


@dataclass(frozen=True)
class Knob:
    name: str
    type: str                 # "bool" | "choice" | "str" | "path"
    default: Any
    doc: str
    choices: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()   # choice: (value, spellings accepted for it)
    compile: bool = False     # changes the emitted code: part of CompileOptions and the cache key
    field: str = ""           # CompileOptions attribute (compile knobs)

    def accepted(self) -> str:
        if self.type == "bool":
            return ", ".join(_TRUE + _FALSE)
        if self.type == "choice":
            return ", ".join(s for _, spell in self.choices for s in spell)
        return "any text" if self.type == "str" else "a path"

    def parse(self, raw: Optional[str]) -> Any:
        if raw is None or raw.strip() == "":
            return self.default
        v = raw.strip()
        if self.type == "bool":
            low = v.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
        elif self.type == "choice":
            low = v.lower()
            for value, spell in self.choices:
                if low in spell:
                    return value
        elif self.type == "path":
            if "\x00" not in v:
                return v
        else:
            return v
        raise OptionError(f"{self.name}={raw!r} is not a valid value: use one of {self.accepted()}")


def _choice(*pairs):
    return tuple((v, tuple(s)) for v, s in pairs)


#: KERNELC_EXP2_POLY's values: the share of elements whose exp2 runs on the FMA pipe
EXP2_POLY_FRACTIONS = ("auto", "0", "1/8", "1/4", "3/8", "1/2", "3/4", "1")


KNOBS: Tuple[Knob, ...] = (
    # -- runtime ------------------------------------------------------------------------------
    Knob("KERNELC_INTERPRET", "bool", False, "run every kernel in the CPU interpreter"),
    Knob("KERNELC_LAUNCH_BLOCKING", "bool", False,
         "synchronise after every launch and take the checked (slow) launch path, so errors point at their launch"),
    Knob("KERNELC_LOG_RECOMPILES", "bool", False, "say on stderr which argument changed a kernel's specialisation"),
    Knob("KERNELC_LAUNCH_IMPL", "choice", "cuda-python", "how the launch fast path calls cuLaunchKernel",
         _choice(("cuda-python", ("cuda-python",)), ("ctypes", ("ctypes",)))),
    Knob("KERNELC_CACHE_DIR", "path", None, "kernel disk cache directory (default ~/.cache/kernelc)"),
    Knob("KERNELC_LAUNCH_SMEM_MIN", "str", "",
         "bytes: launch every kernel loaded from now on with at least this much dynamic shared memory (an occupancy "
         "experiment: fewer programs an SM with the same code; empty: what the kernel needs)"),
    Knob("KERNELC_TMA_L2_PROMOTION", "choice", "128",
         "L2 promotion of the CUtensorMaps encoded for host TensorDescriptors (bytes, as Triton 3.6; 256 was the "
         "default before 2026-11-28): read when a map is first encoded, so maps already cached keep theirs",
         _choice(("256", ("256",)), ("128", ("128",)), ("64", ("64",)), ("none", ("none", "0")))),
    Knob("KERNELC_AUTOTUNE_DISK_CACHE", "bool", True, "keep autotuning results on disk (next to the kernel cache)"),
    Knob("KERNELC_PRINT_AUTOTUNING", "bool", False, "print each autotuning result on stderr"),
    Knob("KERNELC_DUMP_IR", "bool", False, "print the tile IR after every compiler pass on stderr"),
    Knob("KERNELC_OVERRIDE", "str", "",
         "force constexprs / launch options per kernel: 'kernel:KEY=VALUE,...;kernel2:...' "
         "(parsed by kernelc.runtime.override)"),
    # -- toolchain ----------------------------------------------------------------------------
    Knob("KERNELC_TARGET", "str", None, "compile for this target instead of the device's, e.g. sm_80, sm_90a+ptx86"),
    Knob("KERNELC_LIBDEVICE", "path", None, "libdevice.10.bc to link (default: the nvidia-nvvm wheel, CUDA_HOME)"),
    Knob("KERNELC_NVDISASM", "path", None, "nvdisasm binary (default: cuda.pathfinder, the nvidia wheels)"),
    Knob("KERNELC_NVDISASM_DATAFLOW", "bool", True,
         "let nvdisasm run its dataflow analysis, which marks spill stores and loads (SpillRefill) in the SASS "
         "text; off: the same text without those marks, about a quarter faster (the test suite turns it off)"),
    Knob("KERNELC_SASS_CACHE_DIR", "path", None,
         "where disassemblies are kept by content (default <KERNELC_CACHE_DIR>/sass; 'off': none kept on disk)"),
    Knob("KERNELC_CUBIN_CACHE_DIR", "path", None,
         "where nvJitLink's cubins are kept by content (the PTX, the options, nvJitLink's version), so the same PTX "
         "assembles once whatever kernel-cache key asked for it (test suites, register-policy candidates, sharded "
         "dry runs); unset or 'off': none kept"),
    Knob("KERNELC_PTXAS", "path", None, "standalone ptxas binary (default: cuda.pathfinder, Triton's)"),
    Knob("KERNELC_LLVM_PROCESSES", "bool", True,
         "run LLVM for compiles that overlap (autotune candidates) in worker processes, since llvmlite lets one "
         "thread of a process into LLVM at a time (and assemble there while another compile assembles)"),
    Knob("KERNELC_COMPILE_TURNS", "choice", "auto",
         "compiles on threads run their Python half (frontend to LLVM IR) one at a time: on, off, or auto (on with "
         "4 or more usable cores). 16 threads interleaved there took 6.3 s for 1.1 s of work on an 8-core H100 host "
         "(GIL handoffs), and all reached LLVM together at the end; on a CPU-starved machine the one-at-a-time chain "
         "is the longer path (docs/performance.md, \"First calls\")",
         _choice(("auto", ("auto",)), ("on", ("on", "1", "true", "yes")), ("off", ("off", "0", "false", "no")))),
    # -- code generation (hashed into the cache key) ------------------------------------------
    Knob("KERNELC_TMA", "bool", True, "use TMA for descriptor loads/stores on sm_90a", compile=True, field="tma"),
    Knob("KERNELC_AUTO_TMA", "choice", "dots",
         "which pointer-tile loads/stores become TMA: dots (tiles feeding only dot operands), all, or off",
         _choice(("off", _FALSE), ("dots", _TRUE + ("dots",)), ("all", ("all",))), compile=True, field="auto_tma"),
    Knob("KERNELC_WARP_SPECIALIZE", "choice", "auto",
         "warp specialisation of pipelined loops: auto (two or more dots, 8+ warps), all, or none",
         _choice(("none", _FALSE + ("none",)), ("all", _TRUE + ("all",)), ("auto", ("auto",))),
         compile=True, field="warp_specialize"),
    Knob("KERNELC_WS_SETMAXNREG", "choice", "auto",
         "warp-specialised producer as a warpgroup that gives registers to the consumers (setmaxnreg): auto (when a "
         "wgmma stays in flight across other work of the loop, FlashAttention-3's order), 1 (always, 8 warps), 0",
         _choice(("auto", ("auto",)), ("on", _TRUE), ("off", _FALSE)), compile=True, field="ws_setmaxnreg"),
    Knob("KERNELC_WS_CONSUMER_REGS", "choice", "auto",
         "registers a consumer thread gets by setmaxnreg where a warp-specialised loop's producer is a warpgroup that "
         "gives its registers away (two consumer warpgroups): 232 (the producer keeps 40), 240 (the producer keeps "
         "24, FlashAttention-3's split), or auto: 240 where the loop's carried fp32 dot accumulators take 128 "
         "registers a consumer thread or more, else 232",
         _choice(("auto", ("auto",)), ("232", ("232",)), ("240", ("240",))), compile=True,
         field="ws_consumer_regs"),
    Knob("KERNELC_WS_SPLIT_M", "bool", True,
         "a loop the program asks to warp-specialise whose one wgmma dot has 128+ rows at 4 warps runs it on two "
         "consumer warpgroups of 64 rows each, besides the producer (Triton's rule; passes/ws_consumers.py)",
         compile=True, field="ws_split_m"),
    Knob("KERNELC_WS_PINGPONG", "bool", False, "ping-pong ordering of the consumer warpgroups",
         compile=True, field="ws_pingpong"),
    Knob("KERNELC_DEVICE_MAPS_ANYWHERE", "bool", True,
         "tensor maps for descriptors made inside loops/branches or from loaded pointers, built where they are made "
         "(off: those use the generic masked lowering)",
         compile=True, field="device_maps_anywhere"),
    Knob("KERNELC_WGMMA_ASYNC", "choice", "default",
         "keep one wgmma group in flight across iterations: default (on with TMA and cp.async rings), 1, 0",
         _choice(("default", ("default",)), ("on", _TRUE), ("off", _FALSE)), compile=True, field="wgmma_async"),
    Knob("KERNELC_WGMMA_DESC_STEPPED", "bool", True,
         "in a kernel with one dot (a GEMM), each wgmma operand's shared-memory descriptor is built once per dot and "
         "stepped along K by a 64-bit add (Triton's way), not rebuilt per k step; kernels with several dots (attention) "
         "keep the per-step build, which spilled less there (docs/triton-tutorials.md, \"09/08 pointer-load GEMMs\")",
         compile=True, field="wgmma_desc_stepped"),
    Knob("KERNELC_UNIFORM_WARPGROUP", "bool", True,
         "kernels with several consumer warpgroups read their warpgroup index once, at entry, through a shuffle from "
         "lane 0 (Triton's way), so ptxas keeps the wgmma descriptors built from it on the uniform datapath; off: "
         "from tid.x at each dot, which ptxas cannot prove warp-uniform (R2UR moves per step; "
         "passes/uniform_warpgroups.py)",
         compile=True, field="uniform_warpgroup"),
    Knob("KERNELC_WGMMA_DEFER", "bool", True, "defer the waits of two or more wgmmas per iteration",
         compile=True, field="wgmma_defer"),
    Knob("KERNELC_WGMMA_DEFER_RING", "bool", True,
         "defer wgmma waits to the first read in a pipelined loop without a producer warp too, when its body issues "
         "a dot before reading an earlier dot's result (attention backward: dP's wgmma under the softmax recompute)",
         compile=True, field="wgmma_defer_ring"),
    Knob("KERNELC_WGMMA_DEFER_ACC", "bool", False,
         "in a pipelined loop without a producer warp, also defer the wait of a dot whose result only its own "
         "accumulator reads when another dot follows it in the body, so both run back to back (attention "
         "backward: dV += P^T dO with dP^T = V dO^T; passes/schedule.py); opt-in until measured on a GPU",
         compile=True, field="wgmma_defer_acc"),
    Knob("KERNELC_WGMMA_ZERO_ACC", "choice", "auto",
         "a wgmma dot whose accumulator is a zero constant (tl.dot(a, b) without one: attention's logit dots) ignores it "
         "through wgmma's scale-d predicate on its first K step and is given no accumulator registers, as Triton's "
         "lowering does, instead of 32-64 registers set to 0 (passes/zero_acc.py): ws, the dots of warp-specialised "
         "consumer loops (where ptxas wrote those zeros between the D=128 backward's two logit dots and waited for the "
         "first before issuing the second, docs/attention.md, att24); auto (default), the dots of loops whose TMA ring "
         "refills at the top of the iteration (KERNELC_TMA_REFILL_TOP: ptxas moved 64 zeros into the attention "
         "forward's logit accumulator every trip there); on (1), every such dot; off (0)",
         _choice(("off", _FALSE), ("auto", ("auto",)), ("ws", ("ws",)), ("on", _TRUE)),
         compile=True, field="wgmma_zero_acc"),
    Knob("KERNELC_WGMMA_ASYNC_TAIL", "choice", "auto",
         "in a pipelined loop whose dots do not all accumulate into themselves, leave the last dot in flight across "
         "the back edge: on (1) when only its own accumulator reads it (attention backward: dK += dS^T Q, dQ += dS K, "
         "as Triton's tutorial 06) or when its accumulator is only rescaled after the next trip's first dot "
         "(attention forward: acc * alpha before acc += P V, as Triton's tutorial 06; the first dot's wait takes it "
         "through); rescaled: the forward's case only; auto (default): the forward's case where its loop reads only TMA "
         "rings, no loop of the kernel gets a producer warp, and a thread holds at least 64 of S, at least 128 of the "
         "accumulator and at most 192 of both together (tutorial 06's fp8 forward at d128 128x64 s4 w4, both "
         "autotuners' pick: 0.95-0.96 of Triton off, 1.00-1.05 auto, H200 2026-11-28; passes/schedule.py: "
         "_rescaled_tail_fits); off (0)",
         _choice(("off", _FALSE), ("rescaled", ("rescaled",)), ("auto", ("auto",)), ("on", _TRUE)),
         compile=True, field="wgmma_async_tail"),
    Knob("KERNELC_WGMMA_EXIT_WAIT", "bool", True,
         "a pipelined loop that leaves its last dot in flight across the back edge while waiting for its other dots in "
         "the trip (KERNELC_WGMMA_ASYNC_TAIL) waits for it on the loop's exit edge, before the path that skips the "
         "loop joins (scf.for's exit_wait; off: a wgmma_wait after the loop, where ptxas took that path's copies of the "
         "initial values as writes into the group's pipeline stage and serialised every wgmma, C7515; "
         "passes/wgmma_waits.py, codegen/control.py)",
         compile=True, field="wgmma_exit_wait"),
    Knob("KERNELC_WGMMA_A_REGS", "bool", True,
         "a loop-invariant 16-bit A operand of a loop's wgmma that is already in registers in the accumulator layout "
         "of a dot with the same warps along M (the layout a register A fragment has) is read from registers every "
         "trip instead of being staged to shared memory once before the loop: the wgmma reads only B from shared "
         "memory (attention backward's K Q^T at 32 queries a trip, its KV_REGS; passes/stage_operands.py); the kernel "
         "is then assembled at its next occupancy step's register ceiling where nothing spills. Not in a kernel with "
         "a producer warp: ptxas overwrote such a fragment inside the specialised loop (docs/attention.md, kvr26); nor "
         "across a loop with a pinned wait unless KERNELC_WGMMA_A_REGS_PINNED says so (kvr27). "
         "D=64 causal on an H200: "
         "1.6-5% faster at N=16384 (docs/attention.md, bwd14); no kernel of the PTX corpus has such an operand",
         compile=True, field="wgmma_a_regs"),
    Knob("KERNELC_WGMMA_A_REGS_PINNED", "choice", "auto",
         "a loop-invariant A operand that a loop with a pinned wgmma wait (KERNELC_WGMMA_PIN_WAITS) would read from "
         "registers (KERNELC_WGMMA_A_REGS): auto (default) keeps the register fragment unless the assembled SASS "
         "overwrites a register A fragment inside a loop, and then compiles the kernel again as stage; stage stages it "
         "to shared memory before the loop; unpin keeps it and makes that loop's waits plain; keep holds both (before "
         "kvr27). ptxas 13.0 (nvJitLink 13.0.88, the GPU hosts') gave such a fragment's registers to the loop's own "
         "values after the pinned wait: the D=64 dK/dV kernel at 64 x 128, 8 warps, with KV_REGS read the last trip's "
         "P^T as K, wrong dK and dV on an H200. The fused D=64 causal default (its SASS keeps K's fragment) on an H200: "
         "stage 2-16% and unpin 2-16% slower than keep at N=4096, ties at 16384 (backend/sass_fragments.py, "
         "passes/stage_operands.py; docs/attention.md, kvr27)",
         _choice(("auto", ("auto",)), ("stage", ("stage",)), ("unpin", ("unpin",)), ("keep", ("keep",))),
         compile=True, field="wgmma_a_regs_pinned"),
    Knob("KERNELC_WS_BULK_ISSUE", "choice", "producer",
         "who issues a kl.bulk_add's 1-D bulk reduction in a warp-specialised loop: producer (the producer warp, "
         "handed each staged tile on mbarriers, FlashAttention-3's dQ; passes/warp_regions.py) or consumer (an "
         "elected consumer thread behind the consumers' barrier, as outside such loops)",
         _choice(("producer", ("producer",)), ("consumer", ("consumer",))), compile=True, field="ws_bulk_issue"),
    Knob("KERNELC_BULK_REDUCE_STAGES", "choice", "2",
         "shared-memory stages of a desc.atomic_add (bulk tensor reduction) in a loop: 2 lets one reduction read its "
         "stage while the next trip writes the other; 1 waits for each before the next is staged",
         _choice(("1", ("1",)), ("2", ("2",)), ("3", ("3",))), compile=True, field="bulk_reduce_stages"),
    Knob("KERNELC_TMA_WRITE_GUARD", "choice", "reduce",
         "TMA copies into global memory at coordinates not proven >= 0 (Hopper's copy engine faults on a negative "
         "one) run only where they are, else the masked element-wise path: reduce (desc.atomic_add's bulk "
         "reductions), all (desc.store too: costs the TMA-store epilogues of matmul/attention their warp "
         "specialisation or registers, docs/attention.md), off (TMA at any coordinate: the diagnostic in "
         "bench/experiments/bulk_reduce/)",
         _choice(("reduce", ("reduce",) + _TRUE), ("all", ("all",)), ("off", _FALSE)),
         compile=True, field="tma_write_guard"),
    Knob("KERNELC_EXP2_FTZ", "bool", True,
         "fp32 exp2 flushes subnormal results to zero (ex2.approx.ftz, as Triton's tl.math.exp2): one MUFU.EX2 "
         "instead of MUFU plus a range test and two multiplies", compile=True, field="exp2_ftz"),
    Knob("KERNELC_EXP2_POLY", "choice", "auto",
         "the fraction of a softmax exp2's elements computed on the FMA pipe (Cody-Waite range reduction, a polynomial, "
         "the exponent added as an integer) instead of MUFU.EX2, where the result only feeds fp8 casts and fp32 sums and "
         "the argument is a difference against a row maximum (fp8 attention's P; passes/exp2_poly.py): auto "
         "(default: 1/8 where no dot reads the fp8 P in the same trip, FlashAttention-3's order, and a thread "
         "computes at least 64 of the exp2's elements a trip; else 0: in tutorial 06's order 1/8 measured 1.5-6% "
         "slower or equal, H100 2026-11-28), 0 (all on MUFU), 1/8 (H100, 2026-11-27, the FA3-order fp8 forward "
         "2.9-4.0% faster at D=128 and D=64 non-causal, 1.3% slower at D=64 causal; 1/4 and 1/2 slower), 1/4, 3/8, "
         "1/2, 3/4, 1",
         _choice(*((v, (v,)) for v in EXP2_POLY_FRACTIONS)), compile=True, field="exp2_poly"),
    Knob("KERNELC_EXP2_POLY_DEGREE", "choice", "3",
         "degree of KERNELC_EXP2_POLY's polynomial: 3 (relative error < 2^-13, 3 FFMA) or 2 (< 2^-8.9, 2 FFMA)",
         _choice(("2", ("2",)), ("3", ("3",))), compile=True, field="exp2_poly_degree"),
    Knob("KERNELC_FP8_SELF_BOUND", "bool", True,
         "an fp32 -> e5m2 cast of a tile without a bound from a sum (passes/fp8_bounds.py) tests its own values "
         "(|x| against the overflow threshold, one vote a warp) and runs torch's overflow and NaN-sign fix-ups only "
         "on the branch where a value needs them (tutorial 06's fp8 output tile: 128 values a thread at 128x64); "
         "off: the fix-ups on every value", compile=True, field="fp8_self_bound"),
    Knob("KERNELC_FP8_CARRY_WORDS", "bool", True,
         "a loop-carried 8-bit tile in an MMA accumulator layout crosses the back edge in the words the fp8 wgmma A "
         "fragment shuffle reads (FA3-order fp8 attention's P: 16 fewer byte permutes a key block), and an fp8 "
         "cast's result read as a wgmma A operand is put in those words too (tutorial 06's and the pointer "
         "forward's P: 32 fewer); off: in register order", compile=True, field="fp8_carry_words"),
    Knob("KERNELC_REDUCE_TREE", "bool", False,
         "a max/min reduction (and an integer add/xor) combines a thread's registers as a balanced tree instead of a "
         "chain of dependent instructions (same bits: the combine is exactly associative; fp8 attention's row max was a "
         "32-deep FMNMX chain, 21% of its key loop's stall samples)", compile=True, field="reduce_tree"),
    Knob("KERNELC_LOG_F32", "choice", "approx",
         "fp32 log as lg2.approx times ln 2 (approx: two instructions, about 2^-22 absolute error) or as libdevice's "
         "__nv_logf (libdevice: Triton's tl.log, a polynomial of about 1 ulp; log_softmax fwd then bit-identical to "
         "Triton's, but on an H200 cross_entropy 2048x128256 bf16 0.2% and log_softmax fwd 0.06% slower than "
         "approx; passes/fp_contract.py)",
         _choice(("approx", ("approx",)), ("libdevice", ("libdevice",))), compile=True, field="log_f32"),
    Knob("KERNELC_REDUCE_XWARP", "choice", "multi_lds",
         "a reduction to one value per block crosses warps as broadcast (Triton's: lane 0 of each warp stores, warp "
         "0 combines the partials, a second barrier, every thread reads the result; f32/i32, one-pass "
         "kernels only; log_softmax fwd 8192^2 fp16 0.78% faster on an H200), allreduce (kernelc's before session 19: "
         "every warp combines all warps' partials after one barrier) or lds (every thread reads all warps' partials "
         "with 16-byte shared loads and adds them as a tree: one barrier, no shuffles); multi: broadcast in a one-pass "
         "kernel with two or more such reductions, allreduce where it has one (log_softmax bwd 8192^2 fp16: 1.003 of "
         "Triton against 0.998 on an H200, session 20); multi_lds (default): as multi, but lds where multi leaves "
         "allreduce and the kernel loads or computes no tile that neither feeds the reduction nor reads its result "
         "(softmax bwd 8192^2 fp16: 1.0078 of Triton against 1.0013 on an H200, session 22; log_softmax bwd, whose "
         "exp(y) is such work, measured 0.7% slower under lds and keeps allreduce); passes/reduce_xwarp.py",
         _choice(("allreduce", ("allreduce",)), ("broadcast", ("broadcast",)), ("multi", ("multi",)), ("lds", ("lds",)),
                 ("multi_lds", ("multi_lds",))),
         compile=True, field="reduce_xwarp"),
    Knob("KERNELC_REDUCE_SCRATCH", "choice", "shared",
         "where the cross-warp step of a reduction to one value per block keeps its partials: shared (all such "
         "reductions reuse one scratch area, so a barrier separates one's last read from the next one's stores; "
         "Triton's form), apart (each gets its own 16-byte aligned area: softmax's forward loses the barrier "
         "between its max and its sum; measured no faster, H200 session 23) or loops (apart for the reductions "
         "inside a loop only: cross_entropy 2048x128256 bf16 +0.2% in 3 processes, layer_norm bwd +0.4% in 1; not "
         "the default: it also changes bench_kernels' grid-stride softmax, untimed); passes/reduce_xwarp.py",
         _choice(("shared", ("shared",)), ("apart", ("apart",)), ("loops", ("loops",))), compile=True,
         field="reduce_scratch"),
    Knob("KERNELC_REDUCE_BFLY", "choice", "up",
         "a reduction's butterfly shuffles run from the nearest lane (up: 1, 2, .., 16) or the farthest (down: 16, .., "
         "1, Triton's order; a float sum rounds differently; passes/reduce_xwarp.py)",
         _choice(("up", ("up",)), ("down", ("down",))), compile=True, field="reduce_bfly"),
    Knob("KERNELC_L2_REUSE", "choice", "evict_last",
         "loads whose address depends on the program id only through a remainder (pid % n: rope's cos/sin row, "
         "read again by the next batch's program of the same position) under an L2 cache policy: evict_last "
         "(default: .L2::cache_hint with the policy as a constant; docs/performance.md, mem26 and mem27) or off (as "
         "written); passes/l2_reuse.py",
         _choice(("off", ("off",)), ("evict_last", ("evict_last",))), compile=True, field="l2_reuse"),
    Knob("KERNELC_WGMMA_PIN_WAITS", "bool", True,
         "keep a deferred wgmma wait where the IR puts it, past the work before it (ptxas would move it up)",
         compile=True, field="wgmma_pin_waits"),
    Knob("KERNELC_TMA_ELECT", "choice", "auto",
         "the thread that issues TMA copies and barrier inits: elect (warp 0's elect.sync lane: ptxas issues them "
         "under a uniform predicate, no ELECT loop per copy), tid (thread 0, kernelc's form before 2026-11-27) or "
         "auto (default): tid where every loop that issues TMA copies holds one dot (GEMMs), unless the copies read "
         "descriptors made in the kernel outside a nested persistent tile loop; elect elsewhere (attention). H200, one "
         "process, tid over elect: matmul_tma bf16 4096^3 1.016-1.018, matmul_persistent 1.046-1.047, the attention "
         "forwards 0.983-0.992 (session 23); the persistent GEMM on kernel-made descriptors 1.008, the fp8 "
         "descriptor GEMM 0.979, attention_bwd D=128 ds 0.998 (session 24); tutorial 09's flattened persistent GEMM on "
         "kernel-made descriptors 1.002-1.013 (session 26: elect there); passes/elect_form.py",
         _choice(("auto", ("auto",)), ("elect", ("elect",)), ("tid", ("tid",))), compile=True, field="tma_elect"),
    Knob("KERNELC_TMA_EARLY_ISSUE", "bool", True,
         "a TMA tile loaded outside loops and read in place by dots is copied as early as its offsets allow and "
         "waited for at its first read (attention's Q and first K block arrive together, not one after the other)",
         compile=True, field="tma_early_issue"),
    Knob("KERNELC_TMA_EARLY_RINGS", "bool", True,
         "with KERNELC_TMA_EARLY_ISSUE: a pipelined loop's ring prologue (its first copies, issued before the loop) "
         "counts as work under an early copy, so a tile the loop reads (the pointer attention forward's Q) is "
         "issued before the prologue and waited for after it, not issued and waited for on the spot",
         compile=True, field="tma_early_rings"),
    Knob("KERNELC_TMA_REFILL_TOP", "bool", False,
         "a TMA ring of a pipelined loop without a producer warp whose wgmmas are all waited for within their "
         "iteration (none in flight across the back edge) issues iteration i+S-1's copies at the top of iteration "
         "i, after a barrier, instead of after its dots: the stage they overwrite was read by iteration i-1, which "
         "every warp has finished, so the copies get a whole iteration of lead instead of none (the pointer "
         "attention forwards, whose P V reads P from registers; passes/rings.py)",
         compile=True, field="tma_refill_top"),
    Knob("KERNELC_SMEM_REUSE", "bool", True,
         "shared-memory buffers (rings, staged dot operands, in-place TMA tiles) of loops that run one after the "
         "other share bytes: offsets by live range, a barrier before a loop whose buffers reuse bytes "
         "(passes/smem_offsets.py; on since the H200 run of 2026-11-27: tutorial 06's d128 causal backward fits)",
         compile=True, field="smem_reuse"),
    Knob("KERNELC_REUSE_SYNC", "choice", "all",
         "what passes/smem_offsets.py writes where a buffer takes bytes an earlier one used: all (default: "
         "cp.async.wait_all, fence.proxy.async on sm_90, barrier at every such point) or needed (opt-in: no second "
         "wait_all where one already drained every copy, and no fence where only generic-proxy accesses follow (a "
         "store's conversion) on bytes a cp.async ring or staged operand held, whose wgmma reads were waited for; and "
         "an async_wait_all with every copy already committed becomes async_wait_group 0, as Triton writes it; H200, "
         "2026-11-29: tutorial 03's fp8 GEMM at 256^3 0.9-1.3% less GPU time, the GPU tests of the conversions pass; "
         "session 26, one process per knob value pair: needed faster on 03 fp16 4096^3, 06's backward D 64/128 and 09's "
         "pointer GEMMs (0.1-1.0%), level on 03 fp16 512^3 and 08, 0.6% slower on 03's fp8 GEMM at 1024^3, so the "
         "default stays all; issue 20, docs/triton-tutorials.md)",
         _choice(("all", ("all",)), ("needed", ("needed",))), compile=True, field="reuse_sync"),
    Knob("KERNELC_RING_VIEWS", "bool", True,
         "a tile that several dots of a pipelined loop read, directly and through a transpose, joins the loop's ring "
         "once: trans(trans(x)) folds to x (passes/simplify.py) and a cp.async ring stage serves every view, as a TMA "
         "ring's does (passes/schedule.py; tutorial 06's backward: q^T and k^T; docs/triton-tutorials.md)",
         compile=True, field="ring_views"),
    Knob("KERNELC_PREFETCH_DOT_LOOPS", "choice", "auto",
         "register prefetch (passes/pipeline_loads.py) also in loops the kernel's num_stages pipelines (a dot, no "
         "num_stages of their own), of loads that reach a dot only through arithmetic (tutorial 06's backward: the "
         "log-sum-exp and Delta rows of its dK/dV loops): auto (default: where the kernel's register estimate says an "
         "SM holds at most 8 of its warps, so that more registers cost no program, and the loop's estimate with the "
         "prefetch stays 8 under 255; docs/triton-tutorials.md, \"dot-loop prefetch rule\"), on (every such load), "
         "off (main's code before 2026-11-29)",
         _choice(("off", _FALSE), ("auto", ("auto",)), ("on", _TRUE)), compile=True, field="prefetch_dot_loops"),
    Knob("KERNELC_FLATTEN_LOOPS", "choice", "auto",
         "flatten a tile loop and its K loop into one loop where the kernel asks (tl.range(..., flatten=True)), so a "
         "ring runs across tiles: auto (default: where the K loop loads only through TMA descriptors, or only "
         "through pointers whose tile values are carried (KERNELC_FLATTEN_CARRY_TILES), and the tile loop asks for no "
         "warp specialisation; both measured faster flattened on an H100), tma (the TMA kind only), on (every such "
         "loop), off", _choice(("off", _FALSE), ("auto", ("auto",)), ("tma", ("tma",)), ("on", _TRUE)),
         compile=True, field="flatten_loops"),
    Knob("KERNELC_FLATTEN_CARRY_TILES", "bool", True,
         "a flattened loop carries the tile values its K loop reads (09's wrapped row and column offsets) from step "
         "to step and computes the next tile's in the branch taken on a tile's last step, as Triton does; off: they "
         "are recomputed from the tile's coordinates on every step (passes/flatten_loops.py)",
         compile=True, field="flatten_carry_tiles"),
    Knob("KERNELC_TMA_STORE_WAIT", "choice", "deferred",
         "a TMA store inside a loop: deferred (its staging buffer is its own and the elected thread waits for the "
         "copy to have read it just before the buffer is written again, and once after the loop: the store's read "
         "overlaps the next tile's K loop, as Triton's; passes/tma_stores.py) or eager (waited for right after it "
         "is issued)", _choice(("deferred", ("deferred",) + _TRUE), ("eager", ("eager",) + _FALSE)),
         compile=True, field="tma_store_wait"),
    Knob("KERNELC_STORE_SMEM_DISCOUNT", "choice", "4",
         "how much cheaper a byte of shared-memory traffic is than a byte of global sectors when passes/coalesce.py "
         "prices a store's conversion to its coalesced layout: 4 (an MMA accumulator stored as fp16/bf16 goes through "
         "shared memory to 16-byte stores, as Triton's epilogue; tutorial 09), 1 (priced byte for byte: such stores "
         "stay 4-byte stores from the accumulator's layout)",
         _choice(("1", ("1",)), ("2", ("2",)), ("4", ("4",))), compile=True, field="store_smem_discount"),
    Knob("KERNELC_STORE_DISCOUNT_SCOPE", "choice", "all",
         "which stores KERNELC_STORE_SMEM_DISCOUNT prices (passes/coalesce.py): all (default: the RMS/layer-norm "
         "backward rows' final fp32 dW/dB stores then go through shared memory to 16-byte stores, as Triton's: 0.8% "
         "and 2.2% faster on an H200, session 20) or mma (an MMA accumulator's only, before session 20)",
         _choice(("mma", ("mma",)), ("all", ("all",))), compile=True, field="store_discount_scope"),
    Knob("KERNELC_USE_LAYOUT_LOADS", "choice", "all",
         "where a small vector converted right after its load (a per-column cos/sin, scale or bias row broadcast "
         "against a tile) is loaded in the converted layout instead (passes/load_layouts.py): all (default: also "
         "outside loops, as Triton does; rope 4x4096x32x128 bf16 measured 3.5% slower with the round trip through "
         "shared memory on an H200), loops (only in loop bodies, where the round trip runs on every trip)",
         _choice(("all", ("all",) + _TRUE), ("loops", ("loops",) + _FALSE)), compile=True, field="use_layout_loads"),
    Knob("KERNELC_UNIFORM_MASKS", "choice", "invariant",
         "a tile compare that is the same over aligned blocks is computed once per block a thread holds, not once "
         "per register (passes/mask_blocks.py): invariant (as onepass, and in a loop kernel without dots also the "
         "compares a loop reads from outside it, whose per-element predicates would live across every trip: "
         "layer_norm bwd's row loop, 12 P2R -> 0, 480 -> 440 SASS; passes/loop_masks.py), onepass (every such "
         "compare in a kernel without dots and without "
         "a loop that loads, a cp.async ring's mask compares elsewhere: tutorial 05's dx kernel at 16384 columns, "
         "78 ISETP -> 25, Triton 22, 1.03x Triton on an H200), nodots (also in loop kernels without dots: tutorial "
         "05's forward then took the launch bound's build, 3-11% slower at 1024-4096 columns on an H200), all "
         "(every such compare everywhere: changes the PTX of 40 GEMM and attention kernels of "
         "scripts/ptx_corpus.py; on an H200 the pointer matmul the same, the pointer attention 0.7% faster, "
         "layernorm fwd at 8192 columns 2.2% faster; its causal attention was wrong until axis_info's expand_dims "
         "fix of 2026-11-28; since then identical outputs, on an H200 causal attention and layernorm fwd 2-5% faster, "
         "the pointer matmul fp16 8192 0-3% slower: docs/layouts.md), rings (only a ring's mask compares, the rule until 2026-11-28: "
         "tutorial 03's K loop), off",
         _choice(("invariant", ("invariant",) + _TRUE), ("onepass", ("onepass",)), ("nodots", ("nodots",)),
                 ("all", ("all",)), ("rings", ("rings",)),
                 ("off", _FALSE)),
         compile=True, field="uniform_masks"),
    Knob("KERNELC_COPY_MAD_WIDE", "bool", True,
         "a cp.async copy's address that is a scalar pointer plus a signed 32-bit offset is formed by one "
         "mad.wide.s32 (Triton's PTX; ptxas then uses LEA pairs with the base in uniform registers), not LLVM's "
         "mul.wide + add.s64 (IMAD.WIDE with the base reloaded into registers; passes/copy_addresses.py)",
         compile=True, field="copy_mad_wide"),
    Knob("KERNELC_CVT_LDMATRIX", "bool", True,
         "a layout conversion of a 16-bit tile reads shared memory with ldmatrix.x4 (.trans where the destination's "
         "registers run across the buffer's rows) where the destination layout fits, and a store's coalesced layout "
         "trades lane bases so that it fits (passes/coalesce.py, shared_layouts.ldmatrix_ok): permute(0,2,1) fp16 "
         "reads 4 ldmatrix per thread instead of 32 ld.shared.u16, as Triton does",
         compile=True, field="cvt_ldmatrix"),
    Knob("KERNELC_CVT_PIECES", "choice", "max",
         "a store's conversion through shared memory beside buffers that stay live (a flattened persistent loop's "
         "ring) goes in pieces through a buffer of one piece (passes/smem_offsets.py, kernelc/compiler/"
         "conversion_pieces.py): max (as many pieces as both register layouts split on, Triton's scratch: 32 KB for a "
         "128x256 fp16 tile at 8 warps, 8 KB for 128x128 at 4), fit (the fewest that fit the target's shared memory), "
         "off (one piece; a conversion that does not fit is taken out and the store keeps 4-byte pieces)",
         _choice(("max", ("max",)), ("fit", ("fit",)), ("off", _FALSE)), compile=True, field="cvt_pieces"),
    Knob("KERNELC_PIPELINE_LOADS", "bool", True, "register prefetch of plain loads in num_stages >= 2 loops",
         compile=True, field="pipeline_loads"),
    Knob("KERNELC_ASSEMBLER", "choice", "nvjitlink",
         "PTX -> cubin: auto (a standalone ptxas, whole-program as Triton, when one is found that reads the PTX's "
         "version; else nvJitLink), ptxas (always the standalone one), nvjitlink (relocatable, link-time ptxas)",
         _choice(("auto", ("auto",)), ("ptxas", ("ptxas",)), ("nvjitlink", ("nvjitlink",))),
         compile=True, field="assembler"),
    Knob("KERNELC_NVJITLINK_LAUNCH_BOUND", "bool", False,
         "keep the PTX's .maxntid when nvJitLink assembles (its relocatable ptxas then spends registers up to "
         "65536/threads); off (default since the H200 A/B of 2026-11-27): assembled without it, and again with it "
         "only if the registers do not fit the block",
         compile=True, field="nvjitlink_launch_bound"),
    Knob("KERNELC_OCCUPANCY_STEP", "choice", "nodots",
         "without the launch bound: a kernel whose registers are just above an occupancy step (within 15%) is "
         "assembled again with a register ceiling that fits one more block per SM, kept if nothing spills: nodots "
         "(kernels without dots, the tile IR's registers='fill_step': the fp32 64x64 transpose at 40 registers "
         "runs 12 blocks per SM, not 9, and measured 0.6% faster, at Triton's speed; H100, docs/performance.md), "
         "all (every kernel; unmeasured), off",
         _choice(("nodots", ("nodots",)), ("all", ("all",) + _TRUE), ("off", _FALSE)),
         compile=True, field="occupancy_step"),
    Knob("KERNELC_FILL_OCCUPANCY_STEP", "bool", True,
         "without the launch bound: a kernel without dots (the tile IR's registers='fill_step') whose registers "
         "decide its blocks per SM is assembled again with the most registers that keep them, kept if nothing "
         "spills (geglu bwd 70 -> 104 registers, one block either way: the launch bound's code, measured 11% faster "
         "on an H200)",
         compile=True, field="fill_occupancy_step"),
    Knob("KERNELC_FILL_POLICY", "choice", "loads",
         "which builds the fill weighs for a kernel without dots: step (the occupancy step's ceiling only) or loads "
         "(also the launch bound's build, kept where its resident warps x global loads in flight per thread, from "
         "the SASS, are more and it keeps two blocks per SM where there were: a layer-norm row at 80 registers and "
         "3 blocks keeps 1.8 loads in flight against 0.9 at 64 registers and 4 blocks, and the bound's build measured "
         "1.21x Triton against 0.98x: docs/performance.md); passes/register_budget.py writes it into the tile IR "
         "(fill_policy), which the assembler follows",
         _choice(("step", ("step",)), ("loads", ("loads",))),
         compile=True, field="fill_policy"),
    Knob("KERNELC_FILL_KEEP_BLOCKS", "choice", "reductions",
         "under KERNELC_FILL_POLICY=loads: onepass (default) = in a one-pass kernel (no loop that loads from global "
         "memory; passes/register_budget.py writes fill_keep_blocks into the tile IR) the fill weighs no build with "
         "fewer blocks per SM than the build without a register ceiling; off = every kernel as before. Of the 37 "
         "kernels without dots it changes two: rope (48 registers / 10 blocks, not 56 / 9: 1.006x Triton against "
         "0.980 on an H200, C2) and the fp32 64x64 transpose (40 / 12, main's build until 2026-11-28, not the "
         "launch bound's 56 / 9: 0.6% faster on an H100, H11b, 0.65-1.7% slower on an H200, C2/C2b); reductions "
         "(default) = onepass, and a one-pass kernel with a block reduction to one value (softmax's, log_softmax's "
         "rows) gets the build without a register ceiling, neither filled nor stepped (registers='free' in the tile "
         "IR: log_softmax bwd 8192^2 fp16 1.003 of Triton at 39 registers, 0.997 at the launch bound's 40; softmax "
         "bwd 0.9985 free, 0.9970 at the occupancy step; H200, session 20)",
         _choice(("reductions", ("reductions",)), ("onepass", ("onepass",) + _TRUE), ("off", _FALSE)),
         compile=True, field="fill_keep_blocks"),
    Knob("KERNELC_LOADS_FIRST", "bool", True,
         "a one-pass kernel without dots that converts a loaded tile through shared memory (a transpose, a permute) "
         "is assembled without a register ceiling where that issues every global load of a thread before the first "
         "use of one, else at the most blocks per SM (at most two fewer) at which ptxas does so without spilling "
         "(registers='loads_first' in the tile IR, passes/register_budget.py: the fp32 64x64 transpose 40 -> 48 "
         "registers, 12 -> 10 blocks, all 8 loads first instead of 3-4: 0.994 -> 1.009 of Triton on an H200, "
         "session 20); off: the fill as for other one-pass kernels",
         compile=True, field="loads_first"),
    Knob("KERNELC_FILL_STEP_DOWN", "bool", True,
         "under KERNELC_FILL_POLICY=loads, also weigh the build one occupancy step down (a register ceiling that fits "
         "one more block per SM; kept only without spills): a grid-stride softmax row (4096 fp32, 16 warps) at 32 "
         "registers runs 4 blocks per SM with the loads in flight of 40 registers and 3 blocks, as Triton's, and "
         "measured 4.0% faster at bench_kernels' 528 programs (no tail of programs alone on their SMs; H100, "
         "docs/performance.md)",
         compile=True, field="fill_step_down"),
    Knob("KERNELC_STEP_DOT_LOOPS", "bool", True,
         "a kernel whose dots sit in two or more loops one after the other (tutorial 06's causal forward: the "
         "blocks below the diagonal, then the diagonal block) asks the assembler for the occupancy step "
         "(registers='occupancy_step': one more block per SM where nothing spills), since ptxas sizes the "
         "registers for the hungrier loop, which may be the short one (passes/register_budget.py; 06's fp8 d64 "
         "causal at 64x64: 110 -> 96 registers, 4 -> 5 programs an SM; docs/triton-tutorials.md)",
         compile=True, field="step_dot_loops"),
    Knob("KERNELC_CONSUMER_ORDER", "choice", "elementwise",
         "the order in which a kernel's pure instructions reach ptxas: elementwise puts each just before its first "
         "user, depth first from the stores, as Triton's PTX has them, in kernels made of elementwise chains between "
         "loads and stores (geglu bwd: 4.3 global loads in flight a thread at 77 registers against 2.7 at 104, "
         "0.985 -> 1.015x Triton on an H100) that broadcast no loaded row over the tile; off keeps code generation's "
         "op order everywhere (kernels with reductions or layout conversions keep it: a layer-norm row measured 5.5% "
         "slower in consumer order; so do broadcast rows: rope 0.968 -> 1.006x Triton on an H200)",
         _choice(("elementwise", ("elementwise", "auto", "on", "1", "true", "yes")), ("off", ("off", "0", "false", "no"))),
         compile=True, field="consumer_order"),
    Knob("KERNELC_DEFAULT_FP_FUSION", "bool", True,
         "let float a*b+c contract into fma (Triton's enable_fp_fusion); a launch's enable_fp_fusion= overrides it",
         compile=True, field="enable_fp_fusion"),
)
BY_NAME: Dict[str, Knob] = {k.name: k for k in KNOBS}


def get(name: str, environ=None) -> Any:
    """The typed value of knob ``name`` from the environment (raises :class:`OptionError` if malformed)."""
    raw = _raw(name) if environ is None else environ.get(name)
    try:
        return _PARSED[name, raw]
    except KeyError:
        pass
    value = BY_NAME[name].parse(raw)
    if len(_PARSED) < 4096:
        _PARSED[name, raw] = value  # every parsed value is immutable (bool, str, None)
    return value


_PARSED: Dict[Tuple[str, Optional[str]], Any] = {}
_ENVIRON = os.environ
_ENV_KEYS: Dict[str, Any] = {}


def raw_reader(*names: str):
    """A function of no arguments returning these knobs' raw environment values as a tuple (``None`` where unset),
    for a cache key that must change whenever one of them does; about a tenth of a microsecond a knob (the values
    stay encoded: only equality matters)."""
    env = os.environ
    data = getattr(env, "_data", None)
    if data is None:
        return lambda: tuple(map(env.get, names))
    keys = tuple(env.encodekey(n) for n in names)
    get = data.get

    if len(keys) == 2:  # the launch path's case, spelled out (a third of map's time)
        k0, k1 = keys

        def read():
            if os.environ is env:
                return (get(k0), get(k1))
            return tuple(map(_raw, names))  # os.environ replaced
        return read

    def read():
        if os.environ is env:
            return tuple(map(get, keys))
        return tuple(map(_raw, names))  # os.environ replaced
    return read


def _raw(name: str) -> Optional[str]:
    # Launches read a few knobs each (KERNELC_OVERRIDE, KERNELC_INTERPRET): os.environ.get costs about a microsecond
    # (it encodes the key and raises KeyError inside for an unset variable); its dict of encoded entries, which
    # os.environ keeps in step with every assignment, answers in a twentieth of that
    env = os.environ
    data = getattr(env, "_data", None)
    if env is not _ENVIRON or data is None:  # os.environ replaced, or not CPython's mapping
        return env.get(name)
    key = _ENV_KEYS.get(name)
    if key is None:
        key = _ENV_KEYS[name] = env.encodekey(name)
    v = data.get(key)
    return None if v is None else env.decodevalue(v)


@dataclass(frozen=True)
class CompileOptions:
    """The compile-affecting knobs, read together (hashed whole into the cache key)."""
    tma: bool = True
    auto_tma: str = "dots"
    warp_specialize: str = "auto"
    ws_setmaxnreg: str = "auto"
    ws_consumer_regs: str = "auto"
    ws_split_m: bool = True
    ws_pingpong: bool = False
    device_maps_anywhere: bool = False
    wgmma_async: str = "default"
    wgmma_desc_stepped: bool = True
    uniform_warpgroup: bool = True
    wgmma_defer: bool = True
    wgmma_defer_ring: bool = True
    wgmma_defer_acc: bool = False
    wgmma_async_tail: str = "auto"
    wgmma_zero_acc: str = "auto"
    wgmma_exit_wait: bool = True
    wgmma_a_regs: bool = True
    wgmma_a_regs_pinned: str = "auto"
    tma_elect: str = "auto"
    tma_early_issue: bool = True
    tma_early_rings: bool = True
    tma_refill_top: bool = False
    wgmma_pin_waits: bool = True
    ws_bulk_issue: str = "producer"
    bulk_reduce_stages: str = "2"
    tma_write_guard: str = "reduce"
    exp2_ftz: bool = True
    exp2_poly: str = "auto"
    exp2_poly_degree: str = "3"
    fp8_self_bound: bool = True
    fp8_carry_words: bool = True
    reduce_tree: bool = True
    log_f32: str = "approx"
    reduce_xwarp: str = "multi_lds"
    reduce_scratch: str = "shared"
    reduce_bfly: str = "up"
    l2_reuse: str = "evict_last"
    smem_reuse: bool = True
    reuse_sync: str = "all"
    ring_views: bool = True
    prefetch_dot_loops: str = "auto"
    flatten_loops: str = "auto"
    flatten_carry_tiles: bool = True
    tma_store_wait: str = "deferred"
    store_smem_discount: str = "4"
    store_discount_scope: str = "all"
    uniform_masks: str = "invariant"
    copy_mad_wide: bool = True
    use_layout_loads: str = "all"
    cvt_pieces: str = "max"
    cvt_ldmatrix: bool = True
    pipeline_loads: bool = True
    assembler: str = "nvjitlink"
    nvjitlink_launch_bound: bool = False
    occupancy_step: str = "nodots"
    fill_occupancy_step: bool = True
    fill_policy: str = "loads"
    fill_keep_blocks: str = "reductions"
    fill_step_down: bool = True
    loads_first: bool = True
    step_dot_loops: bool = True
    consumer_order: str = "elementwise"
    enable_fp_fusion: bool = True

    def key(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def compile_options(environ=None, **overrides) -> CompileOptions:
    """Every compile knob of the environment, validated; ``overrides`` (field=value, ``None`` = keep the
    environment's) are the per-launch options, e.g. ``enable_fp_fusion=False``."""
    opts = {k.field: get(k.name, environ) for k in KNOBS if k.compile}
    for name, value in overrides.items():
        if name not in opts:
            raise TypeError(f"compile_options() got an unknown option {name!r}")
        if value is not None:
            opts[name] = value
    return CompileOptions(**opts)


def check_environment(environ=None) -> None:
    """Parse every ``KERNELC_*`` knob that is set (raises on the first malformed one)."""
    env = os.environ if environ is None else environ
    for k in KNOBS:
        k.parse(env.get(k.name))


def markdown() -> str:
    """The table of knobs as Markdown (``docs/options.md``)."""
    out = ["# kernelc environment options", "",
           "Generated by `python3 -m kernelc.options --markdown > docs/options.md` from `kernelc/options.py`;",
           "do not edit by hand. A malformed value is an error naming the variable and the accepted values.",
           "Options marked *compile* change the generated code and are part of the kernel cache key.", "",
           "| Variable | Type | Default | Accepted values | Compile | Meaning |",
           "|---|---|---|---|---|---|"]
    for k in KNOBS:
        default = "unset" if k.default is None else (str(k.default).lower() if k.type == "bool" else str(k.default))
        out.append(f"| `{k.name}` | {k.type} | `{default}` | {k.accepted()} | {'yes' if k.compile else ''} | "
                   f"{k.doc.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["--markdown"]:
        print("usage: python3 -m kernelc.options --markdown", file=sys.stderr)
        return 2
    sys.stdout.write(markdown())
    return 0
