"""CPU (sm_90a): the fp8 / fp16 pointer forward with the compiler's per-program device tensor maps (the default)
against host tensor descriptors (``DESC``): registers, spills, SASS size, and what a program does before its
first copy (tensormap instructions in PTX, global atomics and UTMACCTL in SASS).

    python3 bench/experiments/att20/sass_cpu.py [--json OUT]

Nothing here is a test.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813")]

import sass_d64 as S  # noqa: E402


def desc_build(D, causal, fp8, bm, bn, warps, stages, DESC=1, **cx):
    import kernelc
    from examples.kernels import attention as A
    io = "fp8e4nv" if fp8 else "fp16"
    sig = dict(Q=f"tensordesc<{io}[{bm}, {D}]>", K=f"tensordesc<{io}[{bn}, {D}]>",
               V=f"tensordesc<{io}[{D}, {bn}]>" if fp8 else f"tensordesc<{io}[{bn}, {D}]>",
               Out=f"tensordesc<fp16[{bm}, {D}]>" if DESC == 2 else "*fp16", LSE="*fp32", QScale="*fp32",
               KScale="*fp32", VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    if cx.get("DIAG_SPLIT"):
        sig.update(K2=f"tensordesc<{io}[{bm}, {D}]>",
                   V2=f"tensordesc<{io}[{D}, {bm}]>" if fp8 else f"tensordesc<{io}[{bm}, {D}]>")
    ones = ("stride_qk", "stride_kk", "stride_ok") + (("stride_vn",) if fp8 else ("stride_vk",))
    cx.setdefault("FOLD_SCALE", A._fold(None, D, causal, fp8))
    return kernelc.compile(A.attn_fwd_lse_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=not fp8, FP8=fp8,
                                                            BLOCK_M=bm, BLOCK_N=bn, DESC=DESC, **cx),
                           target="sm_90a", num_warps=warps, num_stages=stages,
                           divisibility={n: 16 for n in sig if n != "sm_scale"}, equal_to_1=ones)


DEF8 = dict(KEY_ORDER=True, DIAG_SPLIT=True, MASK_FOLD=True, EVEN_N=True, LPT=16)
BUILDS = [  # name, build, D, causal, fp8, bm, bn, warps, stages, constexprs
    ("fp8 D128 causal (default)", S.pointer, 128, True, True, 64, 128, 4, 2, DEF8),
    ("  DESC", desc_build, 128, True, True, 64, 128, 4, 2, DEF8),
    ("fp8 D128 (default)", S.pointer, 128, False, True, 64, 128, 4, 2, dict(KEY_ORDER=True, EVEN_N=True)),
    ("  DESC", desc_build, 128, False, True, 64, 128, 4, 2, dict(KEY_ORDER=True, EVEN_N=True)),
    ("fp8 D128 causal DESC 2", desc_build, 128, True, True, 64, 128, 4, 2, dict(DEF8, DESC=2)),
    ("fp8 D64 causal (default)", S.pointer, 64, True, True, 64, 128, 4, 3, dict(KEY_ORDER=True)),
    ("  DESC", desc_build, 64, True, True, 64, 128, 4, 3, dict(KEY_ORDER=True, EVEN_N=True)),
    ("fp16 D64 causal (default)", S.pointer, 64, True, False, 64, 64, 4, 2, dict(LPT=16)),
    ("  DESC", desc_build, 64, True, False, 64, 64, 4, 2, dict(LPT=16, EVEN_N=True)),
]


def summary(ck):
    sass, ptx = ck.asm["sass"], ck.asm["ptx"]
    ins = [x for x in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x)]
    first = next((i for i, x in enumerate(ins) if "UTMALDG" in x), None)
    return dict(regs=ck.n_regs, spills=ck.n_spills, smem=getattr(ck, "shared", None), sass=len(ins),
                before_first_copy=first,
                tensormap_ptx=ptx.count("tensormap.replace"), maps_built=ptx.count("tensormap.cp_fenceproxy"),
                atomg=sum("ATOMG" in x for x in ins), utmacctl_iv=sum("UTMACCTL.IV" in x for x in ins),
                tma_stores=sum("UTMASTG" in x for x in ins), stg=sum(" STG" in x for x in ins),
                bar_sync=sum("BAR.SYNC" in x for x in ins[:first or 0]))


def main():
    rows = []
    for name, build, D, causal, fp8, bm, bn, w, s, cx in BUILDS:
        ck = build(D, causal, fp8, bm, bn, w, s, **dict(cx))
        row = dict(build=name, D=D, causal=causal, fp8=fp8, **summary(ck))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
