"""CPU (sm_90a): registers, shared memory, spills and programs an SM of forward configs considered for N 4096
(issue 27; docs/attention.md, "The forward at N 4096"). Nothing here is a test.

    python3 bench/experiments/fwd15/survey_cpu.py
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "compiler")]

import kernelc  # noqa: E402
from analyzer.occupancy import occupancy  # noqa: E402
from cubintools.target import parse_target  # noqa: E402
from examples.kernels import attention_fa3  # noqa: E402
from test_attention_kernels import compile_fwd  # noqa: E402


def fa3(D, causal, fp8, bm, bn, w, s):
    io = "fp8e4nv" if fp8 else "fp16"
    sig = {"sm_scale": "fp32", "desc_q": f"tensordesc<{io}[{bm}, {D}]>", "desc_k": f"tensordesc<{io}[{bn}, {D}]>",
           "desc_v": f"tensordesc<{io}[{D}, {bn}]>" if fp8 else f"tensordesc<{io}[{bn}, {D}]>",
           "desc_o": f"tensordesc<fp16[{bm}, {D}]>", "N_CTX": "i32", "QScale": "*fp32", "KScale": "*fp32",
           "VScale": "*fp32"}
    return kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                           dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=D, CAUSAL=causal, FP8=fp8, EARLY_V=w >= 8),
                           target="sm_90a", num_warps=w, num_stages=s,
                           divisibility={k: 16 for k in sig if k != "sm_scale"})


def row(name, ck):
    b = occupancy(ck.launch_warps, ck.n_regs, ck.shared, parse_target("sm_90a").limits).blocks_per_sm
    print(f"{name:42s} regs {ck.n_regs:3d} smem {ck.shared // 1024:4d} KB spills {ck.n_spills:4d} "
          f"warps {ck.launch_warps:2d} programs/SM {b}", flush=True)


C = [  # (kind, D, causal, fp8, bm, bn, w, s)
    ("ptr", 64, False, False, 64, 128, 4, 2), ("ptr", 64, False, False, 64, 128, 4, 3),
    ("ptr", 64, False, False, 64, 64, 4, 3), ("ptr", 64, False, False, 64, 64, 4, 4),
    ("ptr", 64, True, False, 64, 64, 4, 3),
    ("fa3", 64, True, False, 64, 64, 4, 2), ("fa3", 64, True, False, 64, 64, 4, 3),
    ("fa3", 64, False, False, 64, 128, 4, 2),
    ("ptr", 128, False, False, 64, 64, 4, 2), ("ptr", 128, False, False, 64, 128, 4, 2),
    ("ptr", 128, False, False, 128, 64, 8, 2), ("ptr", 128, False, False, 128, 64, 4, 2),
    ("fa3", 128, False, False, 64, 64, 4, 2), ("fa3", 128, False, False, 64, 128, 4, 2),
    ("fa3", 128, False, False, 128, 64, 8, 3),
    ("ptr", 128, False, True, 64, 128, 4, 3), ("ptr", 128, False, True, 64, 128, 4, 2),
    ("ptr", 128, False, True, 64, 64, 4, 3), ("ptr", 128, True, True, 64, 128, 4, 3),
    ("fa3", 128, False, True, 64, 128, 4, 2), ("fa3", 128, False, True, 64, 128, 4, 3),
    ("fa3", 128, True, True, 64, 64, 4, 3),
]
if __name__ == "__main__":
    for kind, D, causal, fp8, bm, bn, w, s in C:
        name = f"{kind} D{D} {'causal' if causal else 'full'} {'fp8' if fp8 else 'fp16'} {bm}x{bn} w{w} s{s}"
        try:
            ck = (compile_fwd(D, causal, fp8=fp8, BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s) if kind == "ptr"
                  else fa3(D, causal, fp8, bm, bn, w, s))
            row(name, ck)
        except Exception as e:
            print(f"{name:42s} ERROR {type(e).__name__}: {str(e)[:150]}", flush=True)
