"""Resident blocks per SM from a kernel's registers, shared memory and warps, and which limit binds.

The rules are those of NVIDIA's ``cuda_occupancy.h`` for compute capability 7.0 and newer:

* warps: ``max_warps_per_sm // warps_per_block``;
* blocks: ``max_blocks_per_sm``;
* registers: a warp is allocated ``ceil(n_regs * 32 / 256) * 256`` registers; each of the SM's 4
  sub-partitions holds ``registers_per_sm / 4`` of them, so ``4 * floor(16384 / regs_per_warp)``
  warps fit, i.e. ``that // warps_per_block`` blocks;
* shared memory: ``ceil((shared + reserved 1 KiB) / 128) * 128`` bytes per block out of the largest
  carveout (228 KiB on sm_90).

Example::

    occ = occupancy(num_warps=8, n_regs=168, shared=49152, limits=parse_target("sm_90a").limits)
    occ.blocks_per_sm, occ.limiter, occ.fraction   # (1, 'registers', 0.125)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, Optional

SUB_PARTITIONS = 4

#: Human names of the limits, as the report prints them.
LIMIT_NAMES = {"warps": "warps per SM", "blocks": "blocks per SM", "registers": "registers",
               "shared": "shared memory"}


@dataclass
class Occupancy:
    warps_per_block: int
    regs_per_thread: int
    shared_per_block: int
    regs_per_warp_allocated: int
    shared_per_block_allocated: int
    by_warps: int
    by_blocks: int
    by_registers: Optional[int]     # None when the register count is unknown
    by_shared: int
    blocks_per_sm: int
    limiter: str                    # "warps" | "blocks" | "registers" | "shared"
    active_warps: int
    max_warps: int

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps if self.max_warps else 0.0

    def limits(self) -> Dict[str, Optional[int]]:
        return {"warps": self.by_warps, "blocks": self.by_blocks, "registers": self.by_registers,
                "shared": self.by_shared}

    def to_json(self) -> dict:
        d = asdict(self)
        d["fraction"] = round(self.fraction, 4)
        return d

    def describe(self) -> str:
        return (f"{self.blocks_per_sm} block(s) x {self.warps_per_block} warps = {self.active_warps}/"
                f"{self.max_warps} warps per SM ({self.fraction:.0%}), bound by {LIMIT_NAMES[self.limiter]}")


def _ceil(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(num_warps: int, n_regs: int, shared: int, limits) -> Occupancy:
    """Blocks per SM for a kernel of ``num_warps`` warps, ``n_regs`` registers per thread (0: unknown)
    and ``shared`` bytes of shared memory per block, on a device with ``limits``
    (:class:`cubintools.target.ArchLimits`)."""
    wpb = max(1, int(num_warps))
    max_warps = limits.max_threads_per_sm // limits.warp_size
    by_warps = max_warps // wpb
    by_blocks = limits.max_blocks_per_sm
    regs_alloc = 0
    by_regs: Optional[int] = None
    if n_regs and n_regs > 0:
        regs_alloc = _ceil(int(n_regs) * limits.warp_size, limits.reg_alloc_unit)
        warps_fit = SUB_PARTITIONS * ((limits.registers_per_sm // SUB_PARTITIONS) // regs_alloc)
        by_regs = warps_fit // wpb
    smem_alloc = _ceil(int(shared or 0) + limits.reserved_shared_per_block, limits.shared_alloc_unit)
    by_shared = limits.max_shared_per_sm // smem_alloc if smem_alloc else by_blocks
    candidates = [("warps", by_warps), ("blocks", by_blocks), ("shared", by_shared)]
    if by_regs is not None:
        candidates.append(("registers", by_regs))
    # ties: the hardware caps first (a kernel at the warp cap is not "bound by registers")
    order = {"warps": 0, "blocks": 1, "registers": 2, "shared": 3}
    limiter, blocks = min(candidates, key=lambda kv: (kv[1], order[kv[0]]))
    return Occupancy(wpb, int(n_regs or 0), int(shared or 0), regs_alloc, smem_alloc, by_warps, by_blocks,
                     by_regs, by_shared, blocks, limiter, blocks * wpb, max_warps)
