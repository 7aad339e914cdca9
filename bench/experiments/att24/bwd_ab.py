"""(att24) att23's A/B script (``bench/experiments/att23/bwd_ab.py``: entries interleaved round by round, order reversed
each round, ``attention_bwd`` called directly, cuDNN through autograd, every entry's gradients checked against the
default's and cuDNN's) with this session's entries added to its ``ENTRIES``:

- ``dss4``: ds with its dK/dV loop at 4 stages of the Q/dO ring and no producer warpgroup (215 KB of shared memory,
  241 registers, no spills on sm_90a; the default is 3 stages, with a producer warpgroup non-causal);
- ``dsg4`` / ``dsg16``: ds causal with its grids ordered longest first across groups of 4 / 16 heads (default 8);
- ``za``: the default with its dK/dV kernel compiled under ``KERNELC_WGMMA_ZERO_ACC=ws`` (the logit dots' zero
  accumulators as wgmma's scale-d false, passes/zero_acc.py: under the producer warpgroup ptxas no longer waits for
  ``K Q^T`` before issuing ``V dO^T``); ``dswsc`` / ``zawsc``: ds causal with a producer warpgroup (``WS=1``), without
  / with that knob.

    python3 bench/experiments/att24/bwd_ab.py --seq 4096 --head-dim 128 --causal 0 --entries cudnn def dss4 ...
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("att23_bwd_ab", os.path.join(HERE, "..", "att23", "bwd_ab.py"))
AB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AB)

AB.ENTRIES.update({
    "dss4": dict(dq_mode="ds", ws_x=4, dkdv_config=dict(num_stages=4, WS=0)),
    "dsg4": dict(dq_mode="ds", ws_x=4, dkdv_config=dict(GROUP=4), dq_config=dict(GROUP=4)),
    "dsg16": dict(dq_mode="ds", ws_x=4, dkdv_config=dict(GROUP=16), dq_config=dict(GROUP=16)),
    "za": {},
    "dswsc": dict(dq_mode="ds", ws_x=4, dkdv_config=dict(WS=1)),
    "zawsc": dict(dq_mode="ds", ws_x=4, dkdv_config=dict(WS=1)),
})
AB.ENV_ENTRIES.update({"za": {"KERNELC_WGMMA_ZERO_ACC": "ws"}, "zawsc": {"KERNELC_WGMMA_ZERO_ACC": "ws"}})

if __name__ == "__main__":
    AB.main()
