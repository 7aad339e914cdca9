"""Tutorial 06's ``_attn_fwd`` with ``FP8_OUTPUT=True`` (q, k, v float8_e5m2; V^T through a [HEAD_DIM, N]
descriptor) at the fp8 configs its autotuner may pick on Hopper, compiled on CPU by kernelc and by Triton 3.6
(sm_90a), and the SASS of the attention loop side by side (issue #20).

    python3 bench/experiments/tutorial_gaps/fwd06_fp8_sass.py TUTORIAL_06.py --head-dim 64 [--stage 1]
        [--ws 0 1] [--configs BMxBNxSxW ...] [--json OUT] [--triton-site /work/ext/triton_site]

Derived from fwd06_sass.py (the fp16 study). ``--dump DIR`` writes each loop's SASS text there.
``TUTORIAL_06.py`` is Triton's tutorial (its ``@jit`` functions are taken, its autotune decorator dropped).
The descriptors are host ``TensorDescriptor``s (``tensordesc<fp8e5[...]>``, V^T as ``[HEAD_DIM, BLOCK_N]``), as the tutorial passes them on
a Hopper GPU without ``warp_specialize``; ``--device-desc``: pointers, the descriptors made in the kernel (its
path with ``warp_specialize`` on Hopper). Per
config and compiler: registers, spills, shared memory, and in the loop that holds the most HGMMAs (the
body between a label and the backward branch to it): HGMMA count and shapes, WARPGROUP.DEPBAR waits,
MUFU.EX2, TMA copies (UTMALDG), mbarrier waits (SYNCS), BAR.SYNC, global loads, local memory, and the
instruction total. Nothing here is a test (docs/triton-tutorials.md, "06's fp8 forward under kernelc").
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import cpu_compare  # noqa: E402
from fwd06_sass import _kernelc, _triton, sass_of  # noqa: E402  (the same compiles as the fp16 study)

LOOP_KEYS = ("QGMMA", "HGMMA", "F2FP", "F2F.", "I2F", "HADD2.F32", "PRMT", "MOVM", "STSM", "LDSM.16.MT88", "WARPGROUP.DEPBAR", "WARPGROUP.ARRIVE", "MUFU.EX2", "UTMALDG", "SYNCS", "BAR.SYNC",
             "LDG", "LDL", "STL", "LDS", "LDSM", "STS", "FMUL", "FADD", "FFMA", "FMNMX", "SHFL")


def loop_profile(sass_text: str) -> dict:
    """The loop with the most HGMMAs: per-key instruction counts, HGMMA shapes, total."""
    instrs, raws, labels = [], [], {}
    pending = []
    for raw in sass_text.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", raw)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*)?$", raw)
        if m:
            pc = int(m.group(1), 16)
            for lb in pending:
                labels[lb] = len(instrs)
            pending = []
            body = re.sub(r"^@!?U?P\w+\s+", "", m.group(2).rstrip(" ;"))
            instrs.append(body)
            raws.append(m.group(2).rstrip(" ;"))
    best = None
    start = 0
    for i, ins in enumerate(instrs):
        m = re.match(r"BRA\s+.*`\((\.L_x_\d+)\)", ins)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            body = instrs[labels[m.group(1)]:i + 1]
            n = sum(1 for x in body if x.startswith(("HGMMA", "QGMMA")))
            if n and (best is None or n > best[0] or (n == best[0] and len(body) < len(best[1]))):
                best = (n, body)
                start = labels[m.group(1)]
    if best is None:
        return {}
    body = best[1]
    out = {k: sum(1 for x in body if x.startswith(k)) for k in LOOP_KEYS}
    # the path taken when no row needs e5m2's overflow fix-up: each VOTE.ANY's branch skips its fix-up block
    # (codegen/fp8.py: cast_many_bounded)
    skipped = set()
    for v in (k for k in range(start, start + len(body)) if instrs[k].startswith("VOTE.ANY")):
        k = next((k for k in range(v + 1, start + len(body)) if instrs[k].startswith("BRA")), None)
        m = re.search(r"`\((\.L_x_\d+)\)", instrs[k]) if k is not None else None
        if m and k < labels.get(m.group(1), -1) <= start + len(body):
            skipped |= set(range(k + 1, labels[m.group(1)]))
    out["taken"] = len(body) - len(skipped)
    out["GMMA_shapes"] = dict(collections.Counter(x.split()[0] for x in body if x.startswith(("HGMMA", "QGMMA"))))
    out["GMMA_instrs"] = [re.sub(r"\s+", " ", x) for x in body if x.startswith(("HGMMA", "QGMMA"))]
    out["DEPBAR_args"] = [x.split(None, 1)[1] for x in body if x.startswith("WARPGROUP.DEPBAR")]
    out["total"] = len(body)
    out["_body"] = raws[start:start + len(body)]  # with predicates, for --dump
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--stage", type=int, default=1, help="1: non-causal, 3: causal")
    ap.add_argument("--ws", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--configs", nargs="*", help="BMxBNxSTAGESxWARPS (default: the autotuner's Hopper list)")
    ap.add_argument("--device-desc", action="store_true",
                    help="pointers for the descriptors, built in the kernel (the tutorial's path with warp_specialize on Hopper)")
    ap.add_argument("--only", choices=("kernelc", "triton"))
    ap.add_argument("--json")
    ap.add_argument("--dump", help="folder for each loop's SASS text")
    ap.add_argument("--probe-saturate", action="store_true",
                    help="experiment, kernelc only: patch codegen/fp8.py's fix-ups (torch_fixup_pair's parts) out in this process, so "
                         "fp32 -> fp8 is cvt.rn.satfinite alone (saturating, as Triton's cast); measures the fix-up's share")
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    args = ap.parse_args(argv)
    D = args.head_dim
    if args.configs:
        configs = [tuple(int(x) for x in c.split("x")) for c in args.configs]
    else:  # tutorial 06's list on Hopper (same for fp8): 8 warps only for 128x128 blocks (keep), BLOCK_N <= HEAD_DIM
        configs = [(bm, bn, s, w) for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)
                   if not (bm * bn < 128 * 128 and w == 8) and bn <= D]
    if args.probe_saturate:
        from kernelc.compiler.codegen import fp8 as _fp8
        _fp8._overflow_to_inf = lambda e, name, x0, x1, r: r
        _fp8._overflow_to_inf_word = lambda e, name, xs, w: w
        _fp8._nan_signs = lambda e, x0, x1, r, signs=(None, None): r
    text = cpu_compare.kernel_module(args.tutorial)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
    mod = os.path.join(tempfile.mkdtemp(prefix="fwd06_"), "tut06_kernels.py")
    with open(mod, "w") as f:
        f.write(text + "\n")
    rows = []
    for (bm, bn, s, w) in configs:
        for ws in args.ws:
            sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
                   "desc_q": f"tensordesc<fp8e5[{bm}, {D}]>", "desc_k": f"tensordesc<fp8e5[{bn}, {D}]>",
                   "desc_v": f"tensordesc<fp8e5[{D}, {bn}]>", "desc_o": f"tensordesc<fp8e5[{bm}, {D}]>",
                   "N_CTX": "i32"}
            if args.device_desc:
                sig.update({d: "*fp8e5" for d in ("desc_q", "desc_k", "desc_v", "desc_o")})
            cx = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, FP8_OUTPUT=True, STAGE=args.stage,
                      warp_specialize=bool(ws), IS_HOPPER=True)
            div = {"M": 16, "N_CTX": 16, "desc_q": 16, "desc_k": 16, "desc_v": 16, "desc_o": 16}
            row = {"config": f"{bm}x{bn}x{s}x{w}", "ws": ws, "device_desc": args.device_desc, "head_dim": D,
                   "stage": args.stage, "probe_saturate": args.probe_saturate}
            for impl in ("kernelc", "triton"):
                if args.only and impl != args.only:
                    continue
                try:
                    if impl == "kernelc":
                        r, cubin = _kernelc(mod, sig, cx, div, w, s)
                    else:
                        r, cubin = _triton(args.triton_site, mod, sig, cx, w, s, elem="*fp8e5")
                    full = sass_of(cubin)
                    r["loop"] = loop_profile(full)
                    body = r["loop"].pop("_body", [])
                    if args.dump:
                        os.makedirs(args.dump, exist_ok=True)
                        name = f"d{D}_s{args.stage}_{bm}x{bn}x{s}x{w}_ws{ws}_{impl}{'_sat' if args.probe_saturate else ''}.sass"
                        with open(os.path.join(args.dump, name), "w") as f:
                            f.write("\n".join(body) + "\n")
                        with open(os.path.join(args.dump, name[:-5] + "_full.sass"), "w") as f:   # the whole kernel
                            f.write(full)
                except (Exception, SystemExit) as e:  # a config one compiler refuses
                    r = {"error": str(e)[-300:]}
                row[impl] = r
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
