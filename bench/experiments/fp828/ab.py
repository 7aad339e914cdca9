"""fp828's in-process A/B (issue 27, fp8 forward >= 1.3x our fp16 forward): the fp8 default (the pointer forward,
64x128 at 4 warps, 3 programs an SM at D=128, host descriptors, key order) against launch shapes and compile knobs
that change how many programs share an SM or what a key block waits for -- 64x64 blocks (4 programs an SM at D=128,
5 at D=64: 127 / 92 registers on sm_90a), P V left in flight across the back edge (``KERNELC_WGMMA_ASYNC_TAIL=
rescaled``: 170 registers non-causal, 3 an SM; causal it needs 197 and is not timed), 1/8 of P's exponentials on the
FMA pipe (``KERNELC_EXP2_POLY=1/8``), causal programs in one key loop (``one_loop``: one ring, the mask by a uniform
branch, against three loops and three rings), the rings' copies issued a whole iteration ahead
(``KERNELC_TMA_REFILL_TOP``: at the top of the iteration, not after its dots) -- with our fp16 best and cuDNN. fp827's harness (fwd15's timing: GPU time behind
a sleep and the bench's per call, variants interleaved call by call, every output checked; fp8 V^T in key order).

    FP828_ROUND=2 python3 bench/experiments/fp828/ab.py --out OUT.jsonl --seq 16384 [--reps 8] [--points 128,1 ...]

Nothing here is a test.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

import importlib.util  # noqa: E402

# fp827's ab.py under its own name (it imports fwd18's, also named ab, which wraps fwd15's harness and gives the fp8
# calls V^T in key order for key_order=True)
_spec = importlib.util.spec_from_file_location("fp827_ab", os.path.join(ROOT, "bench", "experiments", "fp827", "ab.py"))
F27 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F27)

AB, BA = F27.AB, F27.BA
KO = dict(key_order=True)
TAIL = {"KERNELC_WGMMA_ASYNC_TAIL": "rescaled"}
POLY = {"KERNELC_EXP2_POLY": "1/8"}
# the ring's copies a whole iteration ahead (KERNELC_TMA_REFILL_TOP), with the logit dot's zero accumulator as
# wgmma's scale-d (without it ptxas moves 64 zeros into the accumulator every trip in that order)
TOP = {"KERNELC_TMA_REFILL_TOP": "1", "KERNELC_WGMMA_ZERO_ACC": "on"}
B64_CFG = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)
BA.FWD_VARIANTS.update({  # name -> (module, kernel, env, launch kwargs, entry): their own JIT, compiled under env
    "fp8_ptr_tail": ("attention", "attn_fwd_lse_kernel", TAIL, dict(KO), "attention_fp8"),
    "fp8_ptr_poly18": ("attention", "attn_fwd_lse_kernel", POLY, dict(KO), "attention_fp8"),
    "fp8_ptr_top": ("attention", "attn_fwd_lse_kernel", TOP, dict(KO), "attention_fp8"),
    "fp8_ptr_one_top": ("attention", "attn_fwd_lse_kernel", TOP, dict(KO, one_loop=True), "attention_fp8"),
    "fp8_ptr_64x64_one_top": ("attention", "attn_fwd_lse_kernel", TOP, dict(KO, one_loop=True, **B64_CFG),
                              "attention_fp8"),
    # the knob is global: what it does to our fp16 pointer forward (the best fp16 at D=64), the ratio's denominator
    "fp16_ptr_top": ("attention", "attn_fwd_lse_kernel", TOP, {}, "attention_fwd"),
})
DEF8, FA3_16, CUDNN, P16 = F27.DEF8, F27.FA3_16, F27.CUDNN, F27.P16
B64 = ("fp8_ptr_64x64", "ptr8", dict(KO, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2))
B64_S3 = ("fp8_ptr_64x64_s3", "ptr8", dict(KO, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3))
TAIL8 = ("fp8_ptr_tail", "bench:fp8_ptr_tail", {})
POLY8 = ("fp8_ptr_poly18", "bench:fp8_ptr_poly18", {})
DEF8_LATE = ("fp8_ptr_again", "ptr8", dict(KO, desc=1))  # the default again (its own plan key): drift check
ONE = ("fp8_ptr_one", "ptr8", dict(KO, one_loop=True))  # causal: every key block in one loop (ONE_LOOP)
B64_ONE = ("fp8_ptr_64x64_one", "ptr8", dict(B64[2], one_loop=True))
TOP8 = ("fp8_ptr_top", "bench:fp8_ptr_top", {})
ONE_TOP = ("fp8_ptr_one_top", "bench:fp8_ptr_one_top", {})
B64_ONE_TOP = ("fp8_ptr_64x64_one_top", "bench:fp8_ptr_64x64_one_top", {})
CANDIDATES_R2 = {  # in the order they compile (a point's compiles past its share of the budget are skipped)
    (128, True): [DEF8, FA3_16, CUDNN, TOP8, ONE, ONE_TOP, B64, B64_ONE_TOP, DEF8_LATE],
    (128, False): [DEF8, FA3_16, CUDNN, TOP8, B64, TAIL8, POLY8],
    (64, True): [DEF8, P16, CUDNN, TOP8, ONE, ONE_TOP, B64, B64_ONE, ("fp16_ptr_top", "bench:fp16_ptr_top", {})],
}
# round 3 (FP828_ROUND=3): the defaults after R2 (fp8 D=128: the key loops' copies at the top of a trip, REFILL_TOP,
# causal at any N and non-causal up to N 8192; causal programs in one loop, ONE_LOOP) against the defaults before
# (``was``: SASS identical to main's), the parts alone, our fp16 best and cuDNN; the new default a second time
WAS = ("fp8_ptr_was", "ptr8", dict(KO, one_loop=False, refill_top=False))
AGAIN = ("fp8_ptr_again", "ptr8", dict(KO, desc=1))
TOP3 = ("fp8_ptr_top3", "ptr8", dict(KO, one_loop=False, refill_top=True))  # causal: three loops, copies at the top
ONE_LATE = ("fp8_ptr_one_late", "ptr8", dict(KO, one_loop=True, refill_top=False))  # causal: one loop, copies late
TOPF = ("fp8_ptr_topf", "ptr8", dict(KO, refill_top=True))  # non-causal: copies at the top at any N
LATE = ("fp8_ptr_late", "ptr8", dict(KO, refill_top=False))  # non-causal: copies after the dots at any N
# 128-row programs of two warpgroups sharing each K/V block (half the L2 -> SM bytes a FLOP of the 64-row default, which
# att20 found near ~7 TB/s at N 16384), with the copies at the top: 128x64 at 8 warps (125 registers, 2 programs an
# SM: 16 warps, against the default's 12), 3 or 2 stages; 128x128 at 8 warps (161 registers, 1 an SM)
P128_64_S3 = ("fp8_ptr_128x64_s3", "ptr8", dict(KO, refill_top=True, BLOCK_M=128, BLOCK_N=64, num_warps=8,
                                                  num_stages=3))
P128_64_S2 = ("fp8_ptr_128x64_s2", "ptr8", dict(KO, refill_top=True, BLOCK_M=128, BLOCK_N=64, num_warps=8,
                                                  num_stages=2))
P128_128 = ("fp8_ptr_128x128", "ptr8", dict(KO, refill_top=True, BLOCK_M=128, BLOCK_N=128, num_warps=8,
                                              num_stages=2))
CANDIDATES_R3 = {
    (128, True): [DEF8, WAS, FA3_16, CUDNN, TOP3, ONE_LATE, P128_64_S3, AGAIN, P128_64_S2, P128_128],
    (128, False): [DEF8, WAS, FA3_16, CUDNN, TOPF, LATE, P128_64_S3, AGAIN, P128_64_S2, P128_128],
    (64, True): [DEF8, P16, CUDNN, ("fp8_ptr_topf", "ptr8", dict(KO, refill_top=True))],
}
# next session (FP828_ROUND=s29, request_s29_fp8.sh): the fp8 defaults on another host against `was`; what the global
# knob (KERNELC_TMA_REFILL_TOP=1) would do to the other forwards it changes -- our fp16 pointer forward (the fp16 best
# at D=64, 2 stages: the ratio's denominator there) and the FA2-order descriptor forward -- and fp8 D=64 at 2 stages
# with the copies at the top; non-causal D=128 at N 8192, REFILL_TOP's bound
BA.FWD_VARIANTS.update({
    "fp828_tma": ("attention_tma", "attn_fwd_tma_kernel", {}, {}),
    "fp828_tma_top": ("attention_tma", "attn_fwd_tma_kernel", TOP, {}),
})
P16_TOP = ("fp16_ptr_top", "bench:fp16_ptr_top", {})
TMA16, TMA16_TOP = ("fp16_tma", "bench:fp828_tma", {}), ("fp16_tma_top", "bench:fp828_tma_top", {})
D64_S2_TOP = ("fp8_ptr_s2_top", "ptr8", dict(KO, refill_top=True, num_stages=2))
CANDIDATES_S29 = {
    (128, True): [DEF8, WAS, FA3_16, CUDNN],
    (128, False): [DEF8, WAS, FA3_16, CUDNN, TOPF, LATE],
    (64, True): [DEF8, P16, CUDNN, P16_TOP, D64_S2_TOP, ("fp8_ptr_topf", "ptr8", dict(KO, refill_top=True))],
    (64, False): [DEF8, P16, CUDNN, P16_TOP, TMA16, TMA16_TOP, D64_S2_TOP],
}
AB.CANDIDATES = {"2": CANDIDATES_R2, "3": CANDIDATES_R3, "s29": CANDIDATES_S29}.get(os.environ.get("FP828_ROUND"),
                                                                                    CANDIDATES_R2)

if __name__ == "__main__":
    sys.exit(AB.main())
