"""(The persistent forward's variants need the tree at commit 4ad3dea: the kernel was deleted after it measured
-2% to +1% against the FA3 order; docs/attention.md "The forward at N 4096".)
CPU (sm_90a): the key loop of the FA3-order forward against the persistent one's (docs/attention.md, "The forward
at N 4096"): instructions a thread and key block, and what the tile loop adds around it. Nothing here is a test.

    python3 bench/experiments/fwd15/sass_loops.py
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT]

import kernelc  # noqa: E402
from examples.kernels import attention_fa3 as AF  # noqa: E402


def sig(D, fp8, bm, bn, persistent):
    io = "fp8e4nv" if fp8 else "fp16"
    s = {"sm_scale": "fp32", "desc_q": f"tensordesc<{io}[{bm}, {D}]>", "desc_k": f"tensordesc<{io}[{bn}, {D}]>",
         "desc_v": f"tensordesc<{io}[{D}, {bn}]>" if fp8 else f"tensordesc<{io}[{bn}, {D}]>",
         "desc_o": f"tensordesc<fp16[{bm}, {D}]>", "N_CTX": "i32"}
    if persistent:
        s["Z_H"] = "i32"
    s.update(QScale="*fp32", KScale="*fp32", VScale="*fp32")
    return s


def compile_one(D, causal, fp8, persistent, bm=128, bn=128, stages=2, **cx):
    s = sig(D, fp8, bm, bn, persistent)
    k = AF.attn_fwd_fa3_persistent_kernel if persistent else AF.attn_fwd_fa3_kernel
    c = dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=D, CAUSAL=causal, FP8=fp8)
    c.update(dict(PROGRAMS=132, GROUP=8) if persistent else {})
    c.update(cx)
    return kernelc.compile(k, s, c, target="sm_90a", num_warps=8, num_stages=stages,
                           divisibility={n: 16 for n in s if n != "sm_scale"})


def loops(sass):
    """(length, opcode counts) of every backward-branch loop, innermost first."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    out = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", b).split(" ")[0]
                    for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            out.append(body)
    return out


def main():
    for D, causal, fp8, pers, kw in [(64, False, False, False, {}), (64, False, False, True, {}),
                                    (64, False, False, True, dict(RING_FIRST=True)),
                                    (64, True, False, False, {}), (64, True, False, True, {}),
                                    (128, False, True, False, {}), (128, False, True, True, dict(RING_FIRST=True))]:
        ck = compile_one(D, causal, fp8, pers, **kw)
        sass = ck.asm["sass"]
        total = sum(1 for ln in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))
        ls = [b for b in loops(sass) if b.count("WARPGROUP.ARRIVE") >= 2]
        key = min(ls, key=len) if ls else []
        c = collections.Counter(key)
        print(f"D{D} {'causal' if causal else 'full'} {'fp8' if fp8 else 'fp16'} {'persistent' if pers else 'fa3'} {kw}: "
              f"{total} SASS, regs {ck.n_regs}, smem {ck.shared // 1024} KB; key loop {len(key)} "
              f"(MUFU {c['MUFU.EX2']}, GMMA {sum(v for k, v in c.items() if 'GMMA' in k)}, "
              f"BAR {sum(v for k, v in c.items() if k.startswith('BAR'))}, SYNCS {sum(v for k, v in c.items() if 'SYNCS' in k)}); "
              f"loops with two dots: {[len(b) for b in ls]}", flush=True)


if __name__ == "__main__":
    main()
