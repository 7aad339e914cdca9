"""(d64b27) Which part of R2's wrong ``sepwskv`` is at fault: the separate pass at D=64 non-causal with its dK/dV
kernel at 64 x 128, 8 warps, K (KV_REGS=1) or K and V (2) re-laid out as register A operands, with and without a
producer warpgroup (WS) and the rows by TMA (ROWS_TMA); every variant's max relative error against the separate pass
at its default configs (correct in every GPU test). Session 26's R2 had KV_REGS=2 + WS=1 + ROWS_TMA wrong (1.0).
Since kvr26 a kernel with a producer warpgroup stages K (V) to shared memory instead of holding it as a register A
fragment (ptxas overwrote that fragment in the specialised loop; docs/attention.md, kvr26). The lead's call A27 then had
the WS=0 KV_REGS rows wrong (1.06 / 0.92): the GPU hosts' nvJitLink 13.0.88 overwrote the fragment after the loop's
pinned wait; since kvr27 such a loop stages it too (KERNELC_WGMMA_A_REGS_PINNED): every row right on an H200 (kvr27's R2).

    python3 bench/experiments/d64b27/kvregs_ws_check.py [--seq 1024] [--device cpu] [--out OUT.json]
"""
import argparse
import itertools
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

import torch  # noqa: E402


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    args = ap.parse_args()
    dev, N, D = args.device, args.seq, 64
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v, do = (torch.randn(1, args.heads, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
    o, lse = A.attention_fwd(q, k, v, False, D ** -0.5, return_lse=True)
    ref = B.attention_bwd(do, q, k, v, o, lse, False, D ** -0.5, dq_mode="separate")
    rows = []
    for kv, ws, tma in itertools.product((0, 1, 2), (0, 1), (False, True)):
        cfg = dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3, KV_REGS=kv, WS=ws, ROWS_TMA=tma)
        try:
            got = B.attention_bwd(do, q, k, v, o, lse, False, D ** -0.5, dq_mode="separate", dkdv_config=cfg)
            err = [float((a.float() - b.float()).abs().max() / b.float().abs().max()) for a, b in zip(got, ref)]
        except Exception as e:  # a compile error is a result too
            err = f"{type(e).__name__}: {e}"[:200]
        rows.append(dict(KV_REGS=kv, WS=ws, ROWS_TMA=tma, rel_err_dq_dk_dv=err))
        print(f"KV_REGS={kv} WS={ws} ROWS_TMA={int(tma)}  rel err dq dk dv {err}", flush=True)
    if args.out:
        json.dump(dict(seq=N, device=torch.cuda.get_device_name() if dev == "cuda" else dev, rows=rows),
                  open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
