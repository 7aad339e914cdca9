"""(d64b27) att23's A/B script (``bench/experiments/att23/bwd_ab.py``: entries interleaved round by round, order
reversed each round, ``attention_bwd`` called directly, cuDNN through autograd, every entry's gradients checked against
the default's and cuDNN's) with D=64 entries: the separate pass's dK/dV kernel in D=128's non-causal form (64-query
steps of a 128-key block, 8 warps, a producer warpgroup, the LSE/delta rows ringed by TMA with Q and dO), against the
fused default (7 matmuls either way; ds's dS^T traffic at D=64 is a whole dQ pass's worth
per head and direction: docs/attention.md "The dS^T store").

    python3 bench/experiments/d64b27/bwd_ab.py --seq 4096 --head-dim 64 --causal 0 --entries cudnn def sepws ...
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("att23_bwd_ab", os.path.join(HERE, "..", "att23", "bwd_ab.py"))
AB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AB)

_K128 = dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3)
_WS = dict(_K128, WS=1, ROWS_TMA=True)
AB.ENTRIES.update({
    "fused": dict(dq_mode="fused"),  # the D=64 default before d64b27 (both masks)
    # the separate pass's dK/dV kernel at 64 x 128, 8 warps, a producer warpgroup (setmaxnreg: consumers at 232) and
    # the LSE/delta rows ringed by TMA with Q and dO (the compiler's auto-TMA copies the pointer loads); its dQ kernel
    # at the default (64, 64, 4, 2)
    "sepws": dict(dq_mode="separate", dkdv_config=dict(_WS)),
    # ... the rows loaded from global in the loop (ROWS_TMA off)
    "sepwsnr": dict(dq_mode="separate", dkdv_config=dict(_K128, WS=1)),
    # (R2 also ran "sepwskv", sepws with KV_REGS=2: its dK was wrong, relative error 1.0; removed)
    # sepws with the dQ kernel at 128 x 128 / 128 x 64, 8 warps (the compiler's auto rule gives its loop a producer
    # warpgroup)
    "sepwsq": dict(dq_mode="separate", dkdv_config=dict(_WS),
                   dq_config=dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)),
    "sepwsq64": dict(dq_mode="separate", dkdv_config=dict(_WS),
                     dq_config=dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2)),
})

if __name__ == "__main__":
    AB.main()
