"""fp827's in-process A/B (issue 27, fp8 / our fp16 >= 1.3 at N 16384 D=128): the fp8 default (64-row programs, 4
warps, 3 an SM, each reading every K/V block for its 64 queries) against the fp8 forms whose 128-row programs share one
K/V ring between two consumer warpgroups (the FA3-order forward with and without ping-pong, the pointer forward at 8
warps), our fp16 best and cuDNN. fwd18's ``ab.py`` harness (fwd15's timing: GPU time behind a sleep and the bench's
per call, variants interleaved call by call, every output checked; fp8 V^T in key order, made once per input).

    FP827_ROUND=2 python3 bench/experiments/fp827/ab.py --out OUT.jsonl --seq 16384 [--reps 8] [--points 128,1 ...]

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
BA = F18.BA
KO = dict(key_order=True)
PP = {"KERNELC_WS_PINGPONG": "1"}
R240 = {"KERNELC_WS_CONSUMER_REGS": "240"}
BA.FWD_VARIANTS.update({  # name -> (module, kernel, env, launch kwargs, entry): their own JIT, compiled under env
    "fp8_fa3_ko_pp": ("attention_fa3", "attn_fwd_fa3_kernel", PP, dict(KO), "attention_fp8"),
    "fp8_fa3_ko_r240": ("attention_fa3", "attn_fwd_fa3_kernel", R240, dict(KO), "attention_fp8"),
})
DEF8 = ("fp8_ptr", "ptr8", KO)  # the default (summary's "defaults" row)
FA3_16, CUDNN, P16 = ("fp16_fa3", "fa3_16", {}), ("cudnn", "cudnn", {}), ("fp16_ptr", "ptr16", {})
FA3_8 = ("fp8_fa3_ko", "fa3_8", KO)  # 128x128, 8 consumer warps + a producer warpgroup, 4 stages (FP8_CONFIGS)
FA3_8_PP = ("fp8_fa3_ko_pp", "bench:fp8_fa3_ko_pp", {})
FA3_8_R240 = ("fp8_fa3_ko_r240", "bench:fp8_fa3_ko_r240", {})
FA3_8_S2 = ("fp8_fa3_ko_s2", "fa3_8", dict(KO, num_stages=2))
PTR128 = ("fp8_ptr128", "ptr8", dict(KO, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2))
PTR128_S3 = ("fp8_ptr128_s3", "ptr8", dict(KO, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3))
CANDIDATES_R2 = {  # in the order they compile (a point's compiles past its share of the budget are skipped)
    (128, True): [DEF8, FA3_16, CUDNN, FA3_8, FA3_8_PP, PTR128, FA3_8_R240, FA3_8_S2],
    (128, False): [DEF8, FA3_16, CUDNN, FA3_8, FA3_8_PP, PTR128, PTR128_S3, FA3_8_R240],
    (64, True): [DEF8, P16, FA3_16, CUDNN, FA3_8, FA3_8_PP],
}
# round 3 (FP827_ROUND=3): the default a second time at N 16384 with more rounds, and the FA3-order fp8's 128-row
# program at the configs that read fastest in round 2 (2 stages; 240 consumer registers; both; 3 stages)
BA.FWD_VARIANTS["fp8_fa3_ko_s2_r240"] = ("attention_fa3", "attn_fwd_fa3_kernel", R240, dict(KO, num_stages=2),
                                         "attention_fp8")
FA3_8_S2_R240 = ("fp8_fa3_ko_s2_r240", "bench:fp8_fa3_ko_s2_r240", {})
FA3_8_S3 = ("fp8_fa3_ko_s3", "fa3_8", dict(KO, num_stages=3))
FA3_8_S4 = ("fp8_fa3_ko_s4", "fa3_8", dict(KO, num_stages=4))  # FP8_CONFIGS' stages before fp827, named for good
CANDIDATES_R3 = {
    (128, True): [DEF8, FA3_16, CUDNN, FA3_8_S4, FA3_8_S3, FA3_8_S2, FA3_8_R240, FA3_8_S2_R240, PTR128],
    (128, False): [DEF8, FA3_16, CUDNN, FA3_8_S4, FA3_8_S3, FA3_8_S2, FA3_8_R240, FA3_8_S2_R240, PTR128],
    (64, True): [DEF8, P16, FA3_16, CUDNN],
}
# next session (FP827_ROUND=s27, request_s27_fp8.sh): the default against our fp16 on another machine, and the FA3-order
# fp8's table (4 stages) against 2 stages a second time
CANDIDATES_S27 = {
    (128, True): [DEF8, FA3_16, CUDNN, FA3_8_S4, FA3_8_S2],
    (128, False): [DEF8, FA3_16, CUDNN, FA3_8_S4, FA3_8_S2],
    (64, True): [DEF8, P16, CUDNN],
}
AB.CANDIDATES = {"2": CANDIDATES_R2, "3": CANDIDATES_R3, "s27": CANDIDATES_S27}.get(os.environ.get("FP827_ROUND"),
                                                                                    CANDIDATES_R2)

if __name__ == "__main__":
    sys.exit(AB.main())
