"""att20's in-process A/B (issue 27): the pointer forwards with their per-program device tensor maps (the default)
against the same kernel reading Q, K, V through host tensor descriptors (``desc=1``: the kernel's DESC; ``desc=2``: O
stored through one too), our fp16 best and cuDNN, at one sequence length. fwd18's ``ab.py`` harness (fwd15's
timing: GPU time behind a sleep and the bench's per call, variants interleaved call by call, every output checked).

    python3 bench/experiments/att20/ab.py --out OUT.jsonl --seq 4096 [--reps 10] [--budget-s 60] [--points 128,1 ...]

Nothing here is a test.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "fwd18"))

import ab as F18  # noqa: E402  (fp8 V^T in key order for key_order=True calls; fwd15's harness as F18.AB)

AB = F18.AB
KO = dict(key_order=True)
D1, D2 = dict(desc=1), dict(desc=2)
P8, DESC8 = ("fp8_ptr", "ptr8", KO), ("fp8_desc", "ptr8", dict(KO, **D1))
DESC8_2 = ("fp8_desc2", "ptr8", dict(KO, **D2))
FA3, CUDNN = ("fp16_fa3", "fa3_16", {}), ("cudnn", "cudnn", {})
P16, DESC16_2 = ("fp16_ptr", "ptr16", {}), ("fp16_ptr_desc2", "ptr16", D2)
CANDIDATES = {  # in the order they compile (a point's compiles past its share of the budget are skipped)
    (128, True): [P8, DESC8, FA3, CUDNN, DESC8_2, ("fp8_desc2_nosplit", "ptr8", dict(KO, **D2, diag_split=False)),
                  P16, DESC16_2],
    (128, False): [P8, DESC8, FA3, CUDNN, DESC8_2],
    (64, True): [P8, DESC8, P16, DESC16_2, FA3, CUDNN, DESC8_2],
    (64, False): [P8, DESC8, P16, DESC16_2, FA3, CUDNN, DESC8_2],
}
# round 2 (ATT20_ROUND=2): the shipped defaults (no arguments: attention.DESC = 1 for fp8 at D 64 and 128) against the
# pointer loads (desc=0, main's forwards), and fp16's pointer forward through descriptors at D=64 (its best fp16 there)
P8_0 = ("fp8_was", "ptr8", dict(KO, desc=0))
DEF8 = ("fp8_ptr", "ptr8", KO)  # the summary's "defaults" row
DESC16 = ("fp16_ptr_desc", "ptr16", D1)
LPT1 = ("fp8_lpt1", "ptr8", dict(KO, lpt=1))  # a head's row blocks heaviest first (N 16384's default: launch order)
CANDIDATES_R2 = {
    (128, True): [DEF8, P8_0, FA3, CUDNN, LPT1],
    (128, False): [DEF8, P8_0, FA3, CUDNN],
    (64, True): [DEF8, P8_0, P16, DESC16, FA3, CUDNN, LPT1],
    (64, False): [DEF8, P8_0, P16, DESC16, FA3, CUDNN],
}
# round 3 (ATT20_ROUND=3, N 16384, more rounds than R1's 3 and R2's 5): issue 27's D=128 cells, where fp8 / fp16 read
# 1.277-1.300 in GPU time; the default (launch order at N 16384, LPT_MAX_ROW_BLOCKS) against groups of 4 heads (what
# "l2" means there) and against the pointer loads
G4 = ("fp8_g4", "ptr8", dict(KO, lpt=4))
CANDIDATES_R3 = {
    (128, True): [DEF8, FA3, CUDNN, G4, P8_0],
    (128, False): [DEF8, FA3, CUDNN, P8_0],
}
AB.CANDIDATES = {"2": CANDIDATES_R2, "3": CANDIDATES_R3}.get(os.environ.get("ATT20_ROUND"), CANDIDATES)

if __name__ == "__main__":
    sys.exit(AB.main())
