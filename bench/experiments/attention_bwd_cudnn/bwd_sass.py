"""The attention backward's dK/dV and dQ kernels (``examples/kernels/attention_bwd.py``) compiled on CPU for
sm_90a at the default configs and at the candidates the bench's ``--sweep`` times, with what bounds each: registers,
local memory, shared memory, programs an SM (H100/H200: 64K registers, 228 KB of shared memory), whether the loop
has a producer warp (``warps`` launched vs ``num_warps``), and per MMA loop (the body between a label and its
backward branch): HGMMA shapes, wgmma waits, MUFU.EX2, TMA copies, mbarrier ops, barriers, shared/global accesses.

    PYTHONPATH=$PWD python3 bench/experiments/attention_bwd_cudnn/bwd_sass.py [--json OUT] [--table]
        [--only dkdv|dq] [--configs D:CAUSAL:KERNEL:BM,BN,W,S ...] [--group 0 8 ...]

Nothing here is a test (docs/attention.md, "Backward against cuDNN").
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
sys.path.insert(0, ROOT)

from bwd06_sass import blocks_per_sm, mma_loops  # noqa: E402

P = lambda t: "*" + t  # noqa: E731

# (head dim, causal, kernel, (BLOCK_M, BLOCK_N, num_warps, num_stages)); the first of each kernel and head dim is
# the default (DKDV_CONFIGS / DQ_CONFIGS)
CONFIGS = [
    (128, False, "dkdv", (64, 128, 8, 3)), (128, False, "dkdv", (64, 64, 4, 2)), (128, False, "dkdv", (32, 64, 4, 3)),
    (128, False, "dq", (128, 64, 8, 2)), (128, False, "dq", (64, 64, 4, 2)), (128, False, "dq", (64, 32, 4, 2)),
    (64, False, "dkdv", (32, 64, 4, 3)), (64, False, "dq", (64, 64, 4, 3)), (64, False, "dq", (64, 64, 4, 2)),
    # dq_mode="ds": the dK/dV kernel storing dS^T (dkdv_ds), the dQ GEMM (dq_ds); ds2 (removed after call H9b: the
    # dK/dV kernel without dS^T Q and a dK GEMM, slower everywhere) measured at 2f5f285
    (128, False, "dkdv_ds", (64, 128, 8, 3)), (128, False, "dkdv_ds", (32, 64, 4, 3)),
    (128, False, "dq_ds", (128, 64, 8, 3)), (128, False, "dq_ds", (64, 64, 4, 3)),
    (64, False, "dkdv_ds", (32, 64, 4, 3)), (64, False, "dq_ds", (64, 64, 4, 4)),
    # tenth session: the dQ GEMM with 128-key steps (dS^T stored from registers, measured slower and removed, at
    # 0c0ca07)
    (128, False, "dq_ds", (128, 128, 8, 3)),
]


def compile_kernel(D, causal, kernel, cfg, dt="fp16", group=0, extra=None):
    """``extra``: more constexprs of the kernel (e.g. EVEN_M, L1_PF)."""
    import kernelc
    from examples.kernels import attention_bwd as B
    bm, bn, w, s = cfg
    if kernel.startswith("dkdv"):
        sig = dict(Q=P(dt), K=P(dt), V=P(dt), DO=P(dt), DK=P(dt), DV=P(dt), DQ=P(dt), LSE=P("fp32"),
                   Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32",
                   dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
        fn, cx = B.attn_bwd_dkdv_kernel, dict(ATOMIC_DQ=False, STORE_DS=kernel == "dkdv_ds",
                                              PREFETCH_LD=kernel == "dkdv_ds" and B.DS_PREFETCH_LD.get(D, False))
    elif kernel == "dq_ds":
        sig = dict(DST=P(dt), K=P(dt), DQ=P(dt), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
                   stride_k="i32", H="i32", N_CTX="i32")
        fn, cx = B.attn_bwd_dq_from_ds_kernel, {}
    else:
        sig = dict(Q=P(dt), K=P(dt), V=P(dt), DO=P(dt), DQ=P(dt), LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32",
                   stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
        fn, cx = B.attn_bwd_dq_kernel, {}
    # what the launcher specialises at the bench's sizes: 16-divisible integers and pointers, unit inner stride
    if group:  # GROUP: the causal grid longest first across head groups (twelfth session)
        cx = dict(cx, GROUP=group)
    cx = dict(cx, **(extra or {}))
    return kernelc.compile(fn, sig, dict(cx, HEAD_DIM=D, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn), target="sm_90a",
                           num_warps=w, num_stages=s, divisibility={n: 16 for n in sig}, equal_to_1=("stride_k",))


def survey(D, causal, kernel, cfg, group=0):
    ck = compile_kernel(D, causal, kernel, cfg, group=group)
    threads = 32 * ck.launch_warps  # num_warps plus a producer warp(group) where the loop is warp-specialised
    occ = blocks_per_sm(ck.n_regs, ck.shared, warps=ck.launch_warps)
    loops = mma_loops(ck.asm["sass"])
    keep = ("HGMMA", "HGMMA_shapes", "DEPBAR_args", "MUFU.EX2", "UTMALDG", "SYNCS", "BAR.SYNC", "LDS", "STS", "LDG",
            "STG", "STSM", "FENCE", "LDL", "STL", "FFMA", "FMUL", "FADD", "F2FP", "total")
    return dict(head_dim=D, causal=causal, kernel=kernel, config=list(cfg), group=group, regs=ck.n_regs, spills=ck.n_spills,
                shared=ck.shared, threads=threads, per_sm=occ, loops=[{k: lp[k] for k in keep} for lp in loops])


def table(rows) -> str:
    out = ["| D | causal | kernel | config | GROUP | regs | spills | smem KB | threads | programs/SM | loop: HGMMA (shapes) | "
           "waits | MUFU.EX2 | BAR.SYNC | STSM | STG | SASS a trip |", "|" + "---|" * 17]
    for r in rows:
        lp = r["loops"][-1] if r["loops"] else {}
        shapes = ", ".join(f"{n}x{k.split('.')[1]}" for k, n in sorted(lp.get("HGMMA_shapes", {}).items()))
        out.append(f"| {r['head_dim']} | {int(r['causal'])} | {r['kernel']} | {tuple(r['config'])} | "
                   f"{r.get('group', 0)} | {r['regs']} | "
                   f"{r['spills']} | {r['shared'] / 1024:.0f} | {r['threads']} | {r['per_sm']['blocks']} | "
                   f"{lp.get('HGMMA')} ({shapes}) | {len(lp.get('DEPBAR_args', []))} | {lp.get('MUFU.EX2')} | "
                   f"{lp.get('BAR.SYNC')} | {lp.get('STSM')} | {lp.get('STG')} | {lp.get('total')} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default=None)
    p.add_argument("--table", action="store_true")
    p.add_argument("--only", choices=["dkdv", "dq", "dkdv_ds", "dq_ds"], default=None)
    p.add_argument("--configs", nargs="+", default=None, metavar="D:CAUSAL:KERNEL:BM,BN,W,S")
    p.add_argument("--group", type=int, nargs="+", default=[0],
                   help="the kernels' GROUP (causal grids longest first across this many heads; 0: off)")
    args = p.parse_args(argv)
    configs = CONFIGS
    if args.configs:
        configs = []
        for c in args.configs:
            d, causal, kernel, cfg = c.split(":")
            configs.append((int(d), bool(int(causal)), kernel, tuple(int(x) for x in cfg.split(","))))
    rows = []
    for D, causal, kernel, cfg in configs:
        if args.only and kernel != args.only:
            continue
        for g in args.group:
            if g and not causal:
                continue
            rows.append(survey(D, causal, kernel, cfg, g))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.table:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
