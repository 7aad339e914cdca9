"""The attention forwards' key loops on CPU (sm_90a SASS): the pointer forwards (``examples/kernels/attention.py``)
with and without FOLD_SCALE, and the FA3-order forward for reference. (At commit c5ca1d2 this script also built
LATE_RESCALE, LAZY_RESCALE and KERNELC_RESCALE_SKIP, since removed: ``results/key_loops_cpu_c5ca1d2.json``.)

    python3 bench/experiments/fp8x/key_loops.py [--json OUT]

Per build: registers, spills, launch warps, ptxas's serialisation warning (C7512), and in the key loop (the backward
branch whose body issues two wgmma groups) the instruction count, FMUL, MUFU.EX2 (and VOTE.ANY with the instructions
its branch skips, for the removed skip builds). Nothing here is a test (docs/attention.md, "fp8 against our fp16").
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def _fa3(D, causal, fp8, stages, **cx):
    import kernelc
    from examples.kernels import attention_fa3
    dt = "fp8e4nv" if fp8 else "fp16"
    sig = {"sm_scale": "fp32", "desc_q": f"tensordesc<{dt}[128, {D}]>", "desc_k": f"tensordesc<{dt}[128, {D}]>",
           "desc_v": f"tensordesc<{dt}[{D}, 128]>" if fp8 else f"tensordesc<{dt}[128, {D}]>",
           "desc_o": f"tensordesc<fp16[128, {D}]>", "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    return kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                           dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=causal, FP8=fp8, **cx), target="sm_90a",
                           num_warps=8, num_stages=stages, divisibility={k: 16 for k in sig if k != "sm_scale"})


def _pointer(D, causal, fp8, **cx):
    import kernelc
    from examples.kernels import attention as A
    io = "fp8e4nv" if fp8 else "fp16"
    sig = dict(Q="*" + io, K="*" + io, V="*" + io, Out="*fp16", LSE="*fp32", QScale="*fp32",
               KScale="*fp32", VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    cfg = dict(A.fwd_config(D, fp8=fp8))
    w, s = cfg.pop("num_warps"), cfg.pop("num_stages")
    ones = ("stride_qk", "stride_kk", "stride_ok") + (("stride_vn",) if fp8 else ("stride_vk",))
    return kernelc.compile(A.attn_fwd_lse_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=not fp8, FP8=fp8,
                                                            **cfg, **cx),
                           target="sm_90a", num_warps=w, num_stages=s, divisibility={n: 16 for n in sig},
                           equal_to_1=ones)


def key_loop(sass: str):
    """(instruction lines of the key loop, the whole SASS's lines): the shortest backward branch whose body has two
    WARPGROUP.ARRIVE and a wgmma."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    best = None
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [b for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            if sum("WARPGROUP.ARRIVE" in b for b in body) == 2 and any("GMMA" in b for b in body):
                if best is None or len(body) < len(best):
                    best = body
    return best or [], lines


def _op(line):
    return re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", line).split(" ")[0]


def profile(ck) -> dict:
    body, lines = key_loop(ck.asm["sass"])
    ops = [_op(b) for b in body]
    out = dict(regs=ck.n_regs, spills=ck.n_spills, warps=ck.launch_warps,
               c7512="C7512" in ck.artifacts.ptxas_log, loop=len(ops), FMUL=ops.count("FMUL"),
               MUFU=sum(o.startswith("MUFU.EX2") for o in ops), VOTE=ops.count("VOTE.ANY"))
    if "VOTE.ANY" in ops:  # the instructions the vote's branch skips (up to its target label)
        v = ops.index("VOTE.ANY")
        br = next(b for b in body[v:] if re.search(r"@!P\d+\s+BRA", b))
        target = re.search(r"\.L_x_\d+", br).group(0)
        s = next(k for k, ln in enumerate(lines) if br.strip() in ln)
        e = next(k for k, ln in enumerate(lines) if ln.strip().startswith(target + ":"))
        out["skipped"] = sum(1 for ln in lines[s + 1:e] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))
    return out


BUILDS = [
    # (name, kernel, D, causal, fp8, stages (fa3), constexprs)
    *[(f"fa3 {'fp8' if fp8 else 'fp16'} D{D}{' causal' if c else ''}", "fa3", D, c, fp8, st, {})
      for D, c, fp8, st in ((128, False, True, 4), (64, False, True, 2), (128, False, False, 2))],
    *[(f"pointer {'fp8' if fp8 else 'fp16'} D{D}{' causal' if c else ''} {tag}", "pointer", D, c, fp8, None, cx)
      for D, c, fp8 in ((64, False, True), (64, True, True), (128, False, True), (64, False, False), (128, True, False))
      for tag, cx in (("default", {}), ("fold", dict(FOLD_SCALE=True)))],
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--only", help="substring of the build names to run")
    a = ap.parse_args(argv)
    rows = []
    for name, kind, D, causal, fp8, stages, cx in BUILDS:
        if a.only and a.only not in name:
            continue
        ck = _fa3(D, causal, fp8, stages, **cx) if kind == "fa3" else _pointer(D, causal, fp8, **cx)
        row = dict(build=name, **profile(ck))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
