"""The tile-IR pass pipeline as data: a list of named passes run in order, with optional
verification, timing and an IR dump after each (docs/layouts.md, "The pass pipeline")."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .ir import print_function, verify
from .ir.core import Function
from .ir.verifier import VerificationError


@dataclass
class PassContext:
    """What passes may read about the compilation (and the notes they add to the compile log)."""
    arch: str
    capability: Tuple[int, int]
    num_warps: int
    notes: List[str] = field(default_factory=list)
    pipeline_loads: bool = True
    num_stages: int = 3  # the kernel's default for loops without their own ``num_stages``
    # set by the ``assign_layouts`` pass for the scheduling passes after it
    axis: Any = None
    plan: Any = None
    fp_fusion: bool = True
    smem_limit: int = 0  # the target's shared memory per block (0: unknown): passes/smem_offsets.py
    maxnreg: Optional[int] = None  # the launch's register ceiling (maxnreg), if any: passes/pipeline_loads.py
    # the second compile of a kernel whose first build's SASS overwrote a register A fragment held across a loop with
    # a pinned wgmma wait: such operands are staged (KERNELC_WGMMA_A_REGS_PINNED=auto; compiler.py, stage_operands.py)
    stage_pinned_a: bool = False


@dataclass(frozen=True)
class TilePass:
    name: str
    run: Callable[[Function, PassContext], Function]
    enabled: Callable[[PassContext], bool] = lambda ctx: True


DumpTarget = Union[None, bool, Callable[[str, str], None]]


def _stderr_dump(name: str, text: str) -> None:
    print(f"// -----// IR after {name} //----- //\n{text}\n", file=sys.stderr, flush=True)


def run_passes(fn: Function, passes: Sequence[TilePass], ctx: PassContext, verify_each: bool = True,
               dump: DumpTarget = None, timings: Optional[Dict[str, float]] = None) -> Function:
    """Run ``passes`` in order. After each: verify (a failure names the pass), add its time to
    ``timings["pass.<name>"]``, and hand the IR text to ``dump`` (``True``: stderr; a callable gets
    ``(pass name, IR text)``)."""
    sink = _stderr_dump if dump is True else (dump or None)
    for p in passes:
        if not p.enabled(ctx):
            continue
        t0 = time.perf_counter()
        fn = p.run(fn, ctx)
        dt = time.perf_counter() - t0
        if timings is not None:
            timings[f"pass.{p.name}"] = timings.get(f"pass.{p.name}", 0.0) + dt
        if verify_each:
            try:
                verify(fn)
            except VerificationError as e:
                raise VerificationError(f"after pass {p.name}: {e}") from None
        if sink is not None:
            sink(p.name, print_function(fn))
    return fn


def pass_names(passes: Sequence[TilePass], ctx: PassContext) -> List[str]:
    return [p.name for p in passes if p.enabled(ctx)]
