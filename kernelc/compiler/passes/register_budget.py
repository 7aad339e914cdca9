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
"""
from __future__ import annotations

from ..ir.core import Function


def mark_register_budget(fn: Function, enabled: bool = True, policy: str = "loads") -> Function:
    """Set ``registers="fill_step"`` and ``fill_policy=policy`` (KERNELC_FILL_POLICY: loads or step) on ``fn``
    when ``enabled`` (KERNELC_FILL_OCCUPANCY_STEP) and no op of it is a ``dot``; else remove both. Mutates ``fn``."""
    if enabled and not any(op.name == "dot" for op in fn.walk()):
        fn.attrs["registers"] = "fill_step"
        fn.attrs["fill_policy"] = policy
    else:
        fn.attrs.pop("registers", None)
        fn.attrs.pop("fill_policy", None)
    return fn
