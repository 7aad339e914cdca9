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
load in its body; ``KERNELC_FILL_KEEP_BLOCKS=onepass``): the ``loads`` policy then weighs no build with fewer
blocks per SM than the build without a register ceiling. A one-pass thread issues its loads once; more registers
only move that one burst earlier, while the latency is covered by the other resident warps. In a loop the
registers keep the next trips' loads in flight, which the loads estimate sees. Measured (docs/performance.md):
one-pass, blocks won: the fp32 64x64 transpose 40 registers / 12 blocks against the launch bound's 56 / 9 (+0.6%,
H100), geglu fwd 3 blocks against 1 (+17%, H200); loops, registers won: a layer-norm row 80 / 3 against 64 / 4
(1.21x against 0.98x Triton, H100), tutorial 05's dW/dB sum 122 / 4 against 96 / 5 (7.9 against 10.2 us, H100).
Triton's builds never trade blocks for registers (whole-program ptxas, the launch bound a limit).
"""
from __future__ import annotations

from ..ir.core import Function


def loads_in_a_loop(fn: Function) -> bool:
    """Whether some ``scf.for``/``scf.while`` of ``fn`` has a global load (``load``, or a TMA ``descriptor_load``)
    in its body, at any depth."""
    return any(op.name in ("scf.for", "scf.while") and any(o.name in ("load", "descriptor_load") for o in op.walk())
               for op in fn.walk())


def mark_register_budget(fn: Function, enabled: bool = True, policy: str = "loads",
                         keep_blocks: str = "onepass") -> Function:
    """Set ``registers="fill_step"`` and ``fill_policy=policy`` (KERNELC_FILL_POLICY: loads or step) on ``fn``
    when ``enabled`` (KERNELC_FILL_OCCUPANCY_STEP) and no op of it is a ``dot``, and ``fill_keep_blocks=True``
    when also the policy is loads, ``keep_blocks`` is onepass (KERNELC_FILL_KEEP_BLOCKS) and no loop of it loads;
    else remove them.
    Mutates ``fn``."""
    for k in ("registers", "fill_policy", "fill_keep_blocks"):
        fn.attrs.pop(k, None)
    if enabled and not any(op.name == "dot" for op in fn.walk()):
        fn.attrs["registers"] = "fill_step"
        fn.attrs["fill_policy"] = policy
        if policy == "loads" and keep_blocks == "onepass" and not loads_in_a_loop(fn):
            fn.attrs["fill_keep_blocks"] = True
    return fn
