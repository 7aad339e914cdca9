"""cr29's A/B (issue 27, fp8 forward >= 1.3x our fp16 forward, N 16384 D=128 non-causal): the fp8 default against the
conditional rescale (``rescale_slack=8``) with the guarded multiply (``KERNELC_GUARD_RESCALE``, the default) and
without it (the slack alone), the default again as its own control, our fp16 best (FA3 order) and cuDNN. mc29's
shuffled harness (``main_shuffled``: a fresh seeded order of the variants every round; fp828's / fwd15's timing: GPU
time behind a sleep and per call, every output checked). Nothing here is a test.

    python3 bench/experiments/cr29/ab.py --shuffle --out OUT.jsonl --seq 16384 --reps 30 --points 128,0 [--dry]

(Needs branch cr29's tree at ffe8badb: the slack and the pass were deleted after R5/R6.)"""
from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

_spec = importlib.util.spec_from_file_location("mc29_ab", os.path.join(ROOT, "bench", "experiments", "mc29", "ab.py"))
M29 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M29)

AB, BA, KO = M29.AB, M29.BA, M29.KO
DEF8, AGAIN, FA3_16, CUDNN = M29.DEF8, M29.AGAIN, M29.FA3_16, M29.CUDNN
SLACK = ("fp8_slack8", "ptr8", dict(KO, rescale_slack=8))  # the slack, the multiply guarded (the default build)
BA.FWD_VARIANTS["fp8_slack8_noguard"] = ("attention", "attn_fwd_lse_kernel", {"KERNELC_GUARD_RESCALE": "0"},
                                         dict(KO, rescale_slack=8), "attention_fp8")
NOGUARD = ("fp8_slack8_noguard", "bench:fp8_slack8_noguard", {})  # the slack alone: the multiplies every trip
VARIANTS = [DEF8, AGAIN, SLACK, NOGUARD, FA3_16, CUDNN]
AB.CANDIDATES = {(128, False): VARIANTS, (128, True): VARIANTS}

if __name__ == "__main__":
    sys.exit(M29.main_shuffled())
