"""Blocks per SM from registers / shared memory / warps (cuda_occupancy.h rules) on sm_90."""
import pytest

from analyzer.occupancy import occupancy
from cubintools.target import parse_target

H = parse_target("sm_90a").limits


@pytest.mark.parametrize("warps,regs,smem,blocks,limiter,active", [
    (8, 168, 49152, 1, "registers", 8),      # 5376 regs/warp: 3 warps per sub-partition
    (4, 32, 0, 16, "warps", 64),             # full occupancy: the warp cap binds, not registers
    (1, 255, 0, 8, "registers", 8),          # 8192 regs/warp: 2 per sub-partition
    (4, 32, 200_000, 1, "shared", 4),        # 201 KB per block
    (1, 16, 0, 32, "blocks", 32),            # 1-warp blocks: 32 blocks per SM
    (4, 0, 1024, 16, "warps", 64),           # unknown registers: not a limit
])
def test_occupancy_table(warps, regs, smem, blocks, limiter, active):
    occ = occupancy(warps, regs, smem, H)
    assert (occ.blocks_per_sm, occ.limiter, occ.active_warps) == (blocks, limiter, active)
    assert occ.max_warps == 64
    assert occ.fraction == pytest.approx(active / 64)
    assert occ.to_json()["limiter"] == limiter
    assert "bound by" in occ.describe()


def test_allocation_granularity():
    occ = occupancy(8, 168, 49152, H)
    assert occ.regs_per_warp_allocated == 5376
    assert occ.shared_per_block_allocated == 50176     # + 1 KiB reserved, 128-byte units
    assert occ.by_shared == 233472 // 50176
