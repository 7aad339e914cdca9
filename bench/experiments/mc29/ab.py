"""mc29's in-process A/B (issue 27, fp8 forward >= 1.3x our fp16 forward): the fp8 default (64-row programs, 3 an SM,
each reading every K/V block of its head from L2) against the same kernel launched in clusters of two programs
(``num_ctas=2``: adjacent row blocks of a head) whose K/V copies kernelc multicasts into both (passes/multicast.py),
with the cluster barrier before each refill (``cluster``, the default) or per-stage 'empty' barriers
(``KERNELC_MULTICAST_SYNC=empty``), with the copies after the dots or at the top of a trip -- and our fp16 best and
cuDNN. fp828's harness (fp827's / fwd15's timing: GPU time behind a sleep and the bench's per call, variants
interleaved call by call, every output checked; fp8 V^T in key order).

    python3 bench/experiments/mc29/ab.py --out OUT.jsonl --seq 16384 [--reps 12] [--points 128,0 ...] [--dry]

Nothing here is a test.
"""
from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

_spec = importlib.util.spec_from_file_location("fp828_ab", os.path.join(ROOT, "bench", "experiments", "fp828", "ab.py"))
F28 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F28)

AB, BA, KO = F28.AB, F28.BA, F28.KO
EMPTY = {"KERNELC_MULTICAST_SYNC": "empty"}
BA.FWD_VARIANTS.update({  # name -> (module, kernel, env, launch kwargs, entry): their own JIT, compiled under env
    "fp8_mc_empty": ("attention", "attn_fwd_lse_kernel", EMPTY, dict(KO, num_ctas=2), "attention_fp8"),
    "fp8_mc_empty_top": ("attention", "attn_fwd_lse_kernel", EMPTY, dict(KO, num_ctas=2, refill_top=True),
                         "attention_fp8"),
})
DEF8, FA3_16, CUDNN, P16 = F28.DEF8, F28.FA3_16, F28.CUDNN, F28.P16
ONE = ("fp8_ptr_1cta", "ptr8", dict(KO, num_ctas=1))  # the single-program build whatever the table says
MC = ("fp8_mc", "ptr8", dict(KO, num_ctas=2))  # clusters of two, K/V multicast, cluster barrier
MC_TOP = ("fp8_mc_top", "ptr8", dict(KO, num_ctas=2, refill_top=True))
MC_E = ("fp8_mc_empty", "bench:fp8_mc_empty", {})
MC_E_TOP = ("fp8_mc_empty_top", "bench:fp8_mc_empty_top", {})
TOP1 = ("fp8_ptr_top", "ptr8", dict(KO, num_ctas=1, refill_top=True))
AGAIN = ("fp8_ptr_again", "ptr8", dict(KO, desc=1, num_ctas=1))  # the single-program build again: drift check
CANDIDATES_R2 = {  # in the order they compile (a point's compiles past its share of the budget are skipped)
    (128, False): [DEF8, ONE, FA3_16, CUDNN, MC, MC_E, MC_TOP, MC_E_TOP, TOP1, AGAIN],
    # causal: the compiler refuses to multicast (a row block's key loops run its own trips): the cluster launch alone
    (128, True): [DEF8, ONE, FA3_16, CUDNN, MC],
}
AB.CANDIDATES = CANDIDATES_R2

if __name__ == "__main__":
    sys.exit(AB.main())
