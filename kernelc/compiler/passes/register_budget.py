"""Say how many registers the assembler may give the kernel: ``fn.attrs["registers"] = "fill_step"``.

nvJitLink runs ptxas relocatable, and without the ``.maxntid`` launch bound (the default,
``KERNELC_NVJITLINK_LAUNCH_BOUND``) that ptxas allocates as few registers as it can. For a streaming kernel
the registers between that count and the next occupancy step buy no block per SM, and ptxas pays for the
saving in its schedule: GeGLU's backward row (16384 bf16, 16 warps) takes 70 registers, one 16-warp block per
SM, and ran 11% slower than the same PTX at 104 registers, still one block per SM (H200, 2026-11-27,
docs/performance.md). A kernel marked ``fill_step`` is assembled again with the most registers that keep its
blocks per SM (``backend/ptxas.py: _fill_step``).

Kernels with dots are left alone: their register budget (accumulators, warp specialisation's ``setmaxnreg``)
was measured with other settings (docs/performance.md).

Beside it, ``fn.attrs["fill_policy"]`` says which builds the assembler weighs for the kernel
(``KERNELC_FILL_POLICY``): ``loads`` (also the launch bound's build, by global loads in flight per SM) or
``step`` (the filled build only); the assembler takes it from the IR, not from the environment.

And ``fn.attrs["fill_keep_blocks"] = True`` on a one-pass kernel (no ``scf.for``/``scf.while`` with a global
load in its body) under ``KERNELC_FILL_KEEP_BLOCKS=onepass`` (the default): the ``loads`` policy then weighs no
build with fewer blocks per SM than the build without a register ceiling. Of the 37 kernels without dots it changes
rope (48 registers / 10 blocks with op order, Triton's schedule: 1.006x Triton on an H200 against 0.980) and the
fp32 64x64 transpose (40 / 12, the build before 2026-11-28, instead of the launch bound's 56 / 9: 0.6% faster on an
H100, 0.65-1.7% slower on an H200; docs/performance.md, "The merged defaults").

A one-pass kernel that reduces a row to one value (a cross-warp step with its barrier: softmax's and log_softmax's
rows) is marked ``registers="free"`` instead (``KERNELC_FILL_KEEP_BLOCKS=reductions``, the default since session
20): the assembler's build without a register ceiling, neither filled, nor stepped
to another block count, nor weighed by loads in flight. For those rows the loads measure points the wrong way: on
an H200 (session 20, call R1) log_softmax's backward (8192^2 fp16, 16 warps, one reduction) ran 1.003 of Triton at
39 registers without a ceiling and 0.997 at the launch bound's 40, which issues its four loads before their first
use instead of two; softmax's backward 0.9985 at 40 without a ceiling (allreduce) and 0.9970 at the occupancy
step's 40 with 3 blocks per SM instead of 2 (broadcast, 47 registers free: 0.9991). The same PTX, the same
instructions in another order (bench/experiments/mem20/asm_matrix.py).
"""
from __future__ import annotations

from ...language.dtypes import shape_of
from ..ir.core import Function


def loads_in_a_loop(fn: Function) -> bool:
    """Whether some ``scf.for``/``scf.while`` of ``fn`` has a global load (``load``, or a TMA ``descriptor_load``)
    in its body, at any depth."""
    return any(op.name in ("scf.for", "scf.while") and any(o.name in ("load", "descriptor_load") for o in op.walk())
               for op in fn.walk())


def one_value(op) -> bool:
    """Whether ``op``'s first result is a single value (a reduction of a whole tile)."""
    n = 1
    for d in shape_of(op.results[0].type):
        n *= d
    return n == 1


def block_reduction(fn: Function) -> bool:
    """Whether ``fn`` reduces a tile to one value per program (``tl.sum(row, axis=0)``: a cross-warp step, a barrier)."""
    return any(op.name == "reduce" and one_value(op) for op in fn.walk())


def mark_register_budget(fn: Function, enabled: bool = True, policy: str = "loads",
                         keep_blocks: str = "off") -> Function:
    """Set ``registers="fill_step"`` and ``fill_policy=policy`` (KERNELC_FILL_POLICY: loads or step) on ``fn``
    when ``enabled`` (KERNELC_FILL_OCCUPANCY_STEP) and no op of it is a ``dot``, and ``fill_keep_blocks=True``
    when also the policy is loads, ``keep_blocks`` is onepass or reductions (KERNELC_FILL_KEEP_BLOCKS) and no loop of
    it loads; ``registers="free"`` instead (no policy) when no loop of it loads, ``keep_blocks`` is reductions and it
    has a block reduction to one value (:func:`block_reduction`); else remove them.
    Mutates ``fn``."""
    for k in ("registers", "fill_policy", "fill_keep_blocks"):
        fn.attrs.pop(k, None)
    if enabled and not any(op.name == "dot" for op in fn.walk()):
        onepass = not loads_in_a_loop(fn)
        if onepass and keep_blocks == "reductions" and block_reduction(fn):
            fn.attrs["registers"] = "free"
            return fn
        fn.attrs["registers"] = "fill_step"
        fn.attrs["fill_policy"] = policy
        if policy == "loads" and keep_blocks in ("onepass", "reductions") and onepass:
            fn.attrs["fill_keep_blocks"] = True
    return fn


def copies_a_loaded_tile(fn: Function) -> bool:
    """Whether some ``convert_layout`` of ``fn`` converts a loaded tile (a transpose's or permute's shared-memory
    step, which passes/coalesce.py writes)."""
    return any(op.name == "convert_layout" and op.operands[0].op is not None and op.operands[0].op.name == "load"
               for op in fn.walk())


def mark_loads_first(fn: Function, enabled: bool = True) -> Function:
    """``registers="loads_first"`` in place of a one-pass kernel's fill (``registers="fill_step"`` with
    ``fill_keep_blocks``) when it converts a loaded tile's layout (:func:`copies_a_loaded_tile`) and ``enabled``
    (KERNELC_LOADS_FIRST): the assembler keeps its build without a ceiling where every load of a thread issues before
    the first use of one, else gives up at most two blocks per SM for a build that does (backend/ptxas.py
    ``_loads_first``: the fp32 64x64 transpose, 40 -> 48 registers, 12 -> 10 blocks, 0.994 -> 1.009 of Triton on an
    H200). Runs after passes/coalesce.py, which writes the conversion. Mutates ``fn``."""
    if enabled and fn.attrs.get("registers") == "fill_step" and fn.attrs.get("fill_keep_blocks") and \
            copies_a_loaded_tile(fn):
        for k in ("fill_policy", "fill_keep_blocks"):
            fn.attrs.pop(k, None)
        fn.attrs["registers"] = "loads_first"
    return fn


def _dot_loops(ops) -> int:
    """Loops among ``ops`` (and below them) that hold a dot, counting a loop nest once: the outermost loop
    with a dot anywhere in its body."""
    n = 0
    for op in ops:
        if op.name in ("scf.for", "scf.while") and any(o.name == "dot" for o in op.walk()):
            n += 1
        elif op.name not in ("scf.for", "scf.while"):
            n += sum(_dot_loops(r.ops) for r in op.regions)
    return n


def mark_dot_loops_step(fn: Function, enabled: bool = True) -> Function:
    """Set ``registers="occupancy_step"`` on ``fn`` when ``enabled`` (KERNELC_STEP_DOT_LOOPS) and its dots sit in
    two or more loops one after the other (neither inside the other): ptxas gives the kernel the registers of
    its hungrier loop, which may be the one that runs least (tutorial 06's causal forward: its diagonal block,
    one trip a program, 110 registers against 94 for the loop below the diagonal), and the assembler then tries
    the ceiling that fits one more block per SM, kept where nothing spills (backend/ptxas.py: _occupancy_step).
    A kernel the pass before marked for the fill keeps that mark. Mutates ``fn``."""
    if enabled and fn.attrs.get("registers") is None and _dot_loops(fn.body.ops) >= 2:
        fn.attrs["registers"] = "occupancy_step"
    return fn
