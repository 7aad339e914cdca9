"""A reduction of a whole tile to one value across warps (codegen/reduce.py): each lane reads one
warp's partial from shared memory and a butterfly over log2(warps) lanes combines them, as Triton
does, instead of every thread reading and combining all the partials (one live register per value,
not one per warp). Under ``KERNELC_REDUCE_XWARP=allreduce`` every warp does so; under ``broadcast`` (the
default, passes/reduce_xwarp.py) the first lanes of warp 0 do and everyone reads the result back (a second
LDS). Checked on CPU in SASS; tests/gpu/test_gpu_fp_fusion.py checks the values."""
import re

import pytest

import kernelc
import kernelc.language as kl


@kernelc.jit
def block_sum(X, Out, N, BLOCK: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    x = kl.load(X + cols, mask=cols < N, other=0.0)
    kl.store(Out, kl.sum(x, axis=0))


def _ops(ck):
    return re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", ck.asm["sass"])


@pytest.mark.parametrize("num_warps,xwarp", [(4, "broadcast"), (8, "allreduce")])
def test_cross_warp_step_reads_one_partial_per_lane(num_warps, xwarp, monkeypatch):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    ck = kernelc.compile(block_sum, dict(X="*fp32", Out="*fp32", N="i32"), dict(BLOCK=4096), target="sm_90a",
                         num_warps=num_warps)
    ops = _ops(ck)
    lds = [o for o in ops if o.startswith("LDS")]
    # one 4-byte read per lane, not num_warps values (broadcast: and the result's)
    assert lds == ["LDS"] * (1 if xwarp == "allreduce" else 2), lds
    log2w = num_warps.bit_length() - 1
    assert sum(o.startswith("SHFL.BFLY") for o in ops) == 5 + log2w   # 32 lanes, then the warps
