"""cr29 on CPU: the fp8 forward's default build (attn_fwd_lse_kernel, D=128 non-causal, 64x128, 4 warps, 2 stages,
host descriptors, key order, folded scale) with and without RESCALE_SLACK, under the guard pass on and off: registers,
spills, the key loop's FMULs and branches. ``python3 bench/experiments/cr29/sass_cpu.py [--ir] [--out F.json]``
(Needs branch cr29's tree at ffe8badb: the slack and the pass were deleted after R5/R6.)"""
from __future__ import annotations

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

import kernelc  # noqa: E402
from examples.kernels import attention as A  # noqa: E402


def compile_default(slack=0, causal=False, D=128, **knobs):
    cfg = A.fwd_config(D, fp8=True)
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    io = "fp8e4nv"
    sig = dict(Q=f"tensordesc<{io}[{bm}, {D}]>", K=f"tensordesc<{io}[{bn}, {D}]>", V=f"tensordesc<{io}[{D}, {bn}]>",
               Out="*fp16", LSE="*fp32", QScale="*fp32", KScale="*fp32", VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    const = dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=False, FP8=True, BLOCK_M=bm, BLOCK_N=bn, FOLD_SCALE=True,
                 KEY_ORDER=True, EVEN_N=True, DESC=1)
    if causal:
        const["ONE_LOOP"] = True
    if slack:
        const["RESCALE_SLACK"] = slack
    old = {k: os.environ.get(k) for k in knobs}
    os.environ.update(knobs)
    try:
        return kernelc.compile(A.attn_fwd_lse_kernel, sig, const, target="sm_90a", num_warps=cfg["num_warps"],
                               num_stages=cfg["num_stages"], divisibility={n: 16 for n in sig},
                               equal_to_1=("stride_qk", "stride_kk", "stride_ok", "stride_vn"))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def key_loop(sass):
    """The SASS lines of the loop (a backward branch) that issues QGMMAs."""
    lines = sass.splitlines()
    labels = {}
    for i, l in enumerate(lines):
        m = re.match(r"\s*\.?(L\w+):", l)
        if m:
            labels[m.group(1)] = i
    for i, l in enumerate(lines):
        m = re.search(r"\bBRA\b[^;]*\b(\.?L\w+)", l)
        if m and m.group(1).lstrip(".") in labels and labels[m.group(1).lstrip(".")] < i:
            body = lines[labels[m.group(1).lstrip(".")]:i + 1]
            if any("QGMMA" in b for b in body):
                return body
    return []


def row(ck):
    body = key_loop(ck.asm["sass"])
    txt = "\n".join(body)
    return dict(registers=ck.n_regs, spills=ck.n_spills, loop_lines=len(body),
                loop_fmul=len(re.findall(r"\bFMUL\b", txt)), loop_bra=len(re.findall(r"\bBRA\b", txt)),
                loop_mufu=len(re.findall(r"MUFU\.EX2", txt)), loop_fsetp=len(re.findall(r"\bFSETP\b", txt)))


if __name__ == "__main__":
    out = {}
    for name, slack, knobs in (("default", 0, {}), ("slack8", 8, {}),
                               ("slack8_noguard", 8, {"KERNELC_GUARD_RESCALE": "0"})):
        ck = compile_default(slack, **knobs)
        out[name] = row(ck)
        print(name, out[name], flush=True)
        if "--ir" in sys.argv:
            print(ck.asm.get("tir", "")[:100])
    if "--out" in sys.argv:
        json.dump(out, open(sys.argv[sys.argv.index("--out") + 1], "w"), indent=1)
