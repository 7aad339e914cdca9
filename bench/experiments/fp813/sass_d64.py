"""fp8 attention forward at head dim 64, taken apart on CPU (sm_90a SASS; issue 27, docs/attention.md "fp8 at head
dim 64, thirteenth session"). Per launch config of the pointer forward (``attention.attn_fwd_lse_kernel``) and the
FA3-order forward (``attention_fa3.attn_fwd_fa3_kernel``): registers, spills, launch warps, shared memory, programs an
SM (registers and shared memory), and in the unmasked key loop the instruction count and the wgmma (with shapes),
MUFU.EX2, FFMA, FMUL, FADD, FMNMX, F2FP, PRMT, SEL, SHFL.IDX, barrier waits.

    python3 bench/experiments/fp813/sass_d64.py [--json OUT] [--only SUBSTRING]

Nothing here is a test.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "fp8x"))

import key_loops as KL  # noqa: E402


def fa3(D, causal, fp8, bm, bn, warps, stages, **cx):
    import kernelc
    from examples.kernels import attention_fa3
    dt = "fp8e4nv" if fp8 else "fp16"
    sig = {"sm_scale": "fp32", "desc_q": f"tensordesc<{dt}[{bm}, {D}]>", "desc_k": f"tensordesc<{dt}[{bn}, {D}]>",
           "desc_v": f"tensordesc<{dt}[{D}, {bn}]>" if fp8 else f"tensordesc<{dt}[{bn}, {D}]>",
           "desc_o": f"tensordesc<fp16[{bm}, {D}]>", "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    cx.setdefault("EARLY_V", warps >= 8)
    return kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                           dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=D, CAUSAL=causal, FP8=fp8, **cx), target="sm_90a",
                           num_warps=warps, num_stages=stages, divisibility={k: 16 for k in sig if k != "sm_scale"})


def pointer(D, causal, fp8, bm, bn, warps, stages, **cx):
    import kernelc
    from examples.kernels import attention as A
    io = "fp8e4nv" if fp8 else "fp16"
    sig = dict(Q="*" + io, K="*" + io, V="*" + io, Out="*fp16", LSE="*fp32", QScale="*fp32",
               KScale="*fp32", VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    ones = ("stride_qk", "stride_kk", "stride_ok") + (("stride_vn",) if fp8 else ("stride_vk",))
    cx.setdefault("FOLD_SCALE", A._fold(None, D, causal, fp8))
    return kernelc.compile(A.attn_fwd_lse_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=not fp8, FP8=fp8,
                                                            BLOCK_M=bm, BLOCK_N=bn, **cx),
                           target="sm_90a", num_warps=warps, num_stages=stages, divisibility={n: 16 for n in sig},
                           equal_to_1=ones)


def loop_body(sass):
    """The key loop: the shortest backward branch whose body issues a wgmma (KL.key_loop wants two
    WARPGROUP.ARRIVE, which a loop whose two dots are not both async may not have)."""
    body, lines = KL.key_loop(sass)
    if body:
        return body
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    best = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            b = [x for x in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x)]
            if sum("GMMA" in x for x in b) >= 2 and (not best or len(b) < len(best)):
                best = b
    return best


def profile(ck):
    body = loop_body(ck.asm["sass"])
    ops = [KL._op(b) for b in body]
    c = collections.Counter(ops)
    gmma = collections.Counter(re.search(r"[QH]GMMA\.\S+", b).group(0).split(".")[1] for b in body
                               if re.search(r"[QH]GMMA\.", b))
    smem = ck.metadata.get("shared", 0) if hasattr(ck, "metadata") and isinstance(ck.metadata, dict) else None
    if smem is None:
        smem = getattr(ck, "shared", None)
    return dict(regs=ck.n_regs, spills=ck.n_spills, warps=ck.launch_warps, smem=smem, loop=len(ops),
                gmma=dict(gmma), MUFU=sum(v for k, v in c.items() if k.startswith("MUFU.EX2")),
                FFMA=c["FFMA"], FMUL=c["FMUL"], FADD=c["FADD"], FMNMX=c["FMNMX"],
                F2FP=sum(v for k, v in c.items() if k.startswith("F2FP")), PRMT=c["PRMT"], SEL=c["SEL"],
                SHFL=sum(v for k, v in c.items() if k.startswith("SHFL")),
                waits=sum(v for k, v in c.items() if k.startswith(("SYNCS.PHASECHK", "WARPGROUP.DEPBAR",
                                                                     "BAR.SYNC", "LDGDEPBAR", "DEPBAR"))),
                LDG=sum(v for k, v in c.items() if k.startswith(("LDGSTS", "LDG", "UTMALDG"))),
                uniform=sum(v for k, v in c.items() if k.startswith("U")))


BUILDS = [
    # name, kind, D, causal, BLOCK_M, BLOCK_N, warps, stages
    ("ptr fp16 128x64 w4 s3", "ptr", 64, False, False, 128, 64, 4, 3),
    ("ptr fp8 128x64 w4 s3", "ptr", 64, False, True, 128, 64, 4, 3),
    ("ptr fp8 128x64 w4 s3 causal", "ptr", 64, True, True, 128, 64, 4, 3),
    ("fa3 fp16 128x128 w8 s2", "fa3", 64, False, False, 128, 128, 8, 2),
    ("fa3 fp16 128x128 w8 s2 causal", "fa3", 64, True, False, 128, 128, 8, 2),
    ("fa3 fp8 64x128 w4 s2", "fa3", 64, False, True, 64, 128, 4, 2),
    ("fa3 fp8 128x128 w8 s2", "fa3", 64, False, True, 128, 128, 8, 2),
    ("fa3 fp8 128x128 w8 s2 causal", "fa3", 64, True, True, 128, 128, 8, 2),
    # candidates
    ("ptr fp8 128x128 w4 s2", "ptr", 64, False, True, 128, 128, 4, 2),
    ("ptr fp8 128x128 w4 s3", "ptr", 64, False, True, 128, 128, 4, 3),
    ("ptr fp8 128x128 w8 s3", "ptr", 64, False, True, 128, 128, 8, 3),
    ("ptr fp8 64x128 w4 s3", "ptr", 64, False, True, 64, 128, 4, 3),
    ("ptr fp8 128x256 w8 s2", "ptr", 64, False, True, 128, 256, 8, 2),
    ("ptr fp8 256x128 w8 s2", "ptr", 64, False, True, 256, 128, 8, 2),
    ("ptr fp8 128x128 w4 s3 causal", "ptr", 64, True, True, 128, 128, 4, 3),
    ("ptr fp8 128x128 w8 s3 causal", "ptr", 64, True, True, 128, 128, 8, 3),
    ("ptr fp8 128x64 w4 s3 causal fold", "ptr", 64, True, True, 128, 64, 4, 3, dict(FOLD_SCALE=True)),
    ("ptr fp8 64x128 w4 s2", "ptr", 64, False, True, 64, 128, 4, 2),
    ("ptr fp8 64x256 w4 s2", "ptr", 64, False, True, 64, 256, 4, 2),
    ("ptr fp8 64x64 w4 s3", "ptr", 64, False, True, 64, 64, 4, 3),
    ("ptr fp8 128x128 w8 s3 causal fold", "ptr", 64, True, True, 128, 128, 8, 3, dict(FOLD_SCALE=True)),
    ("ptr fp8 128x128 w4 s2 causal fold", "ptr", 64, True, True, 128, 128, 4, 2, dict(FOLD_SCALE=True)),
    ("ptr fp8 64x64 w4 s3 causal fold", "ptr", 64, True, True, 64, 64, 4, 3, dict(FOLD_SCALE=True)),
    ("ptr fp8 64x64 w4 s3 causal", "ptr", 64, True, True, 64, 64, 4, 3),
    ("ptr fp8 64x128 w4 s3 causal fold", "ptr", 64, True, True, 64, 128, 4, 3, dict(FOLD_SCALE=True)),
    ("ptr fp8 64x128 w4 s3 causal", "ptr", 64, True, True, 64, 128, 4, 3),
    ("ptr fp8 64x256 w4 s2 causal fold", "ptr", 64, True, True, 64, 256, 4, 2, dict(FOLD_SCALE=True)),
    ("ptr fp16 64x128 w4 s3", "ptr", 64, False, False, 64, 128, 4, 3),
    ("ptr fp16 64x128 w4 s2", "ptr", 64, False, False, 64, 128, 4, 2),
    ("fa3 fp8 64x256 w4 s2", "fa3", 64, False, True, 64, 256, 4, 2),
    ("fa3 fp8 128x256 w8 s2", "fa3", 64, False, True, 128, 256, 8, 2),
    ("fa3 fp8 128x256 w8 s3", "fa3", 64, False, True, 128, 256, 8, 3),
    ("fa3 fp8 64x64 w4 s3 causal", "fa3", 64, True, True, 64, 64, 4, 3),
    ("fa3 fp8 128x128 w8 s3 causal", "fa3", 64, True, True, 128, 128, 8, 3),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--only")
    a = ap.parse_args(argv)
    rows = []
    for name, kind, D, causal, fp8, bm, bn, w, s, *cx in BUILDS:
        if a.only and a.only not in name:
            continue
        try:
            ck = (fa3 if kind == "fa3" else pointer)(D, causal, fp8, bm, bn, w, s, **(cx[0] if cx else {}))
            row = dict(build=name, **profile(ck))
            # elements of S a consumer thread handles per key block, and what each costs
            consumers = 4 * (w if kind == "ptr" or w < 8 else w) * 32 // 4
            elems = bm * bn // (w * 32)
            row["elems"] = elems
            row["instr_per_elem"] = round(row["loop"] / elems, 2)
            row["progs_per_sm"] = min(65536 // (row["regs"] * row["warps"] * 32) if row["regs"] else 99,
                                      (228 * 1024) // max(row["smem"] + 1024, 1))
        except Exception as e:  # noqa: BLE001
            row = dict(build=name, error=f"{type(e).__name__}: {e}"[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
