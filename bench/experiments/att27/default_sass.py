"""(att27) ds's dK/dV kernel compiled on CPU for sm_90a exactly as ``attention_bwd``'s defaults launch it (the launch's
keyword arguments caught by a spy on meta tensors, [1, 8, N, D] fp16; N_CTX specialised as the launcher does: 16-divisible
or not) for D=128 causal -- the default (``DS_ONE_LOOP``: one loop, ``WS=1``, ``ROWS_TMA``) against ``ONE_LOOP=False``
(the two-loop default before) at N 4096 (every N divisible by 64 compiles the same), 1008 and 1000 -- and, for the D=64
question, ds's D=64 causal kernel with ``ONE_LOOP`` (+ ``WS``) beside its own defaults (D=64's default mode is fused:
ds is not what it runs). Registers, spills, shared memory, per MMA loop (att26's ``loops_of``) loads, copies, masking.

    PYTHONPATH=$PWD python3 bench/experiments/att27/default_sass.py [--json OUT]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
_spec = importlib.util.spec_from_file_location("att26_causal_sass", os.path.join(HERE, "..", "att26", "causal_sass.py"))
CS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CS)

P = lambda t: "*" + t  # noqa: E731
SIG = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
           LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
           stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
# name, head dim, N, dkdv_config
CASES = [("def", 128, 4096, None), ("old", 128, 4096, dict(ONE_LOOP=False)),
         ("def", 128, 1008, None), ("old", 128, 1008, dict(ONE_LOOP=False)),
         ("def", 128, 1000, None), ("old", 128, 1000, dict(ONE_LOOP=False)),
         ("d64_ds", 64, 4096, None), ("d64_one", 64, 4096, dict(ONE_LOOP=True)),
         ("d64_onews", 64, 4096, dict(ONE_LOOP=True, WS=1)), ("d64_onewsrows", 64, 4096,
                                                                dict(ONE_LOOP=True, WS=1, ROWS_TMA=True))]


def launch_kwargs(D, N, dkdv_config):
    import torch
    from examples.kernels import attention_bwd as B
    seen = {}

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.update(kw)

    q = torch.empty(1, 8, N, D, device="meta", dtype=torch.float16)
    lse = torch.empty(1, 8, N, device="meta", dtype=torch.float32)
    _, steps = B.attention_bwd_steps(q, q, q, q, q, lse, True, D ** -0.5, dq_mode="ds", dkdv_config=dkdv_config,
                                     kernels=dict(dkdv=Spy()), ds_workspace_bytes=1 << 40)
    dict(steps)["dkdv"]()
    return seen


def main():
    import kernelc
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for name, D, N, extra in CASES:
        kw = launch_kwargs(D, N, extra)
        cfg = {k: v for k, v in kw.items() if v is not None}
        w, s = cfg.pop("num_warps"), cfg.pop("num_stages")
        div = {n: 16 for n in SIG if not (n == "N_CTX" and N % 16)}
        try:
            ck = kernelc.compile(B.attn_bwd_dkdv_kernel, SIG, cfg, target="sm_90a", num_warps=w, num_stages=s,
                                 divisibility=div, equal_to_1=("stride_k",))
        except Exception as e:
            rows.append(dict(case=name, D=D, N=N, launch=kw, error=f"{type(e).__name__}: {e}"))
            print(f"{name:14s} D={D} N={N} does not compile: {e}", flush=True)
            continue
        sass = ck.asm["sass"]
        r = dict(case=name, D=D, N=N, launch=kw, regs=ck.n_regs, spills=ck.n_spills, shared=ck.shared,
                 consumer_regs_240="consumer_regs=240" in ck.asm["tir"], sass_total=sass.count("\n"),
                 loops=CS.loops_of(sass))
        rows.append(r)
        knobs = {k: kw.get(k) for k in ("ONE_LOOP", "WS", "ROWS_TMA", "EVEN_M")}
        print(f"{name:14s} D={D} N={N:5d} {knobs} regs {ck.n_regs} spills {ck.n_spills} smem {ck.shared}", flush=True)
        for i, lp in enumerate(r["loops"]):
            print("   loop %d: " % i + " ".join(f"{k} {lp[k]}" for k in ("total", "LDG", "LDS", "UTMALDG", "LDL",
                                                                          "STL", "ISETP", "FSEL")), flush=True)
    if args.json:
        json.dump(dict(target="sm_90a", kernel="attn_bwd_dkdv_kernel as attention_bwd's defaults launch it (ds, causal)",
                       rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
