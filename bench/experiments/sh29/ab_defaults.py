"""sh29 (session 29, issue 27): fp828's fp8 defaults against `was` (the build before fp828) in shuffled rounds.

mc29's R3 found that fwd15's A/B harness, which fp828 decided its defaults with, walks the variants in one cyclic
order, and that at N 16384 a variant then beat its own repeat in 27 of 30 rounds (by up to 12%). This runs mc29's
``main_shuffled`` (a fresh seeded order of the variants every round) over fp828's decision points: the default
(copies at the top of a trip; causal in one loop), `was`, the default again (its control), our fp16 best.

    python3 bench/experiments/sh29/ab_defaults.py --shuffle --out OUT.jsonl --seq 4096 --reps 30 --points 128,1 128,0

Nothing here is a test.
"""
from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
_spec = importlib.util.spec_from_file_location("mc29_ab", os.path.join(ROOT, "bench", "experiments", "mc29", "ab.py"))
MC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MC)
F28 = MC.F28

CANDS = [F28.DEF8, F28.WAS, F28.AGAIN, F28.FA3_16]
# SH29_ROUND=2: after REFILL_TOP's non-causal N bound was dropped (s29), the new default against the copies after the
# dots (`late`, the default before at N > 8192), the default again, our fp16 best and cuDNN
CANDS_2 = [F28.DEF8, F28.LATE, F28.AGAIN, F28.FA3_16, F28.CUDNN]
MC.AB.CANDIDATES = {(128, True): CANDS, (128, False): CANDS_2 if os.environ.get("SH29_ROUND") == "2" else CANDS}
# SH29_ROUND=3: issue 27's forward cells in shuffled rounds -- the fp8 default, our best fp16 (the FA3 order at D=128,
# the pointer forward at D=64), cuDNN, the fp8 default again
if os.environ.get("SH29_ROUND") == "3":
    P16 = getattr(F28, "P16", ("fp16_ptr", "ptr16", {}))
    MC.AB.CANDIDATES = {(D, c): [F28.DEF8, F28.FA3_16 if D == 128 else P16, F28.CUDNN, F28.AGAIN]
                        for D in (128, 64) for c in (True, False)}

if __name__ == "__main__":
    sys.exit(MC.main_shuffled())
