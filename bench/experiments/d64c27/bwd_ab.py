"""(d64c27) D=64 causal at N 16384 / 8192: the separate pass in D=128's form with causal's one loop against the fused
default and cuDNN, through d64s27's harness (``bwd_ab.py``: ``--part ab`` interleaved rounds, ``kernels``,
``prof``) with ``--causal`` and these entries added:

- ``sepc``: the candidate ("d64c", an opt-in table entry until d64c28 removed it): dK/dV at (64, 128, 8, 3),
  ``ONE_LOOP``, a producer warpgroup (``WS=1``), the rows ringed by TMA, no async tail; dQ at (128, 128, 8, 3) with its tail;
- ``sepc_tk``: and the dK/dV loop's tail (ptxas then waited for every wgmma at 0 on sm_90a: CPU, ``sass_cpu.py``);
- ``sepc_nt``: no tails, the dQ kernel at 2 stages (what the dQ tail adds);
- ``sepc_2l``: the dK/dV kernel's two loops (the producer then fills the diagonal's trips only: what ``ONE_LOOP`` adds);
- ``sepc2`` ("d64c2": D=64 causal's default from N 16384 on since d64c28): two loops with the producer for the
  unmasked one (``WS=2``) and the dK/dV tail (kept there), the dQ kernel as ``sepc``.

GROUP (8, 8) and EVEN_M come from the tables (CAUSAL_GROUP, DKDV_EVEN_M) as for every separate-pass call.

    python3 bench/experiments/d64c27/bwd_ab.py --causal --part ab --seq 16384 --entries cudnn fused sepc sepc_tk ...
"""
from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("d64s27_bwd_ab", os.path.join(HERE, "..", "d64s27", "bwd_ab.py"))
H = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(H)

H.ENTRIES.update({
    "sepc": H._sep(dkdv=dict(ONE_LOOP=True), dq=dict(TAIL=True, num_stages=3)),
    "sepc_tk": H._sep(dkdv=dict(ONE_LOOP=True, TAIL=True), dq=dict(TAIL=True, num_stages=3)),
    "sepc_nt": H._sep(dkdv=dict(ONE_LOOP=True)),
    "sepc_2l": H._sep(dkdv=dict(ONE_LOOP=False), dq=dict(TAIL=True, num_stages=3)),
    "sepc2": H._sep(dkdv=dict(ONE_LOOP=False, WS=2, TAIL=True), dq=dict(TAIL=True, num_stages=3)),
})

if __name__ == "__main__":
    if "--causal" not in sys.argv:
        sys.argv.append("--causal")  # these entries are causal's
    H.main()
