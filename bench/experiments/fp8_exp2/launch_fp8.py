"""Launch ``attention_fa3.attention_fp8`` a few times (batch 4, 32 heads) for Nsight Compute, under whatever
KERNELC_EXP2_POLY the environment says (docs/attention.md, "fp8: exponentials on two pipes"):

    KERNELC_EXP2_POLY=1/4 ncu --clock-control none --section ComputeWorkloadAnalysis -k regex:attn_fwd_fa3 \\
        --launch-skip 2 --launch-count 1 -o x python3 bench/experiments/fp8_exp2/launch_fp8.py --head-dim 128

Prints the median per-launch time from CUDA events, so a run without ncu is a plain timing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import torch
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(4, 32, a.seq, a.head_dim, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    times = []
    for _ in range(a.reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        AF.attention_fp8(q8, k8, v8t, qs, ks, vs, causal=bool(a.causal))
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    ms = sorted(times)[len(times) // 2]
    flops = 4 * 4 * 32 * a.seq * a.seq * a.head_dim * (0.5 if a.causal else 1)
    print(f"fp8 fa3 D={a.head_dim} causal={a.causal} KERNELC_EXP2_POLY={os.environ.get('KERNELC_EXP2_POLY', '0')}: "
          f"{ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s (median of {a.reps}, first includes the compile)")


if __name__ == "__main__":
    main()
