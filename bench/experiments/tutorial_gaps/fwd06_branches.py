"""Tutorial 06's ``_attn_fwd``: where the branches are, kernelc against Triton 3.6, on CPU (sm_90a).

    python3 bench/experiments/tutorial_gaps/fwd06_branches.py TUTORIAL_06.py [--head-dims 64 128]
        [--configs 128x64x2x4 128x64x3x4] [--kernelc-root CHECKOUT] [--json OUT] [--sass-dir DIR]

Compiles the non-causal FP16 forward (host ``TensorDescriptor``s, as fwd06_sass.py) with both compilers and
reads the SASS: every branch-like instruction (``BRA`` plain / predicated on a thread predicate ``P`` /
on a uniform predicate ``UP`` / ``.U.ANY``, ``BSSY``/``BSYNC`` reconvergence regions, ``WARPSYNC``), where
it is (in the key loop -- the body between a label and the backward branch to it that holds the HGMMAs --,
in an out-of-line mbarrier retry block, or elsewhere), ``ELECT`` loops (an ``ELECT`` followed by a backward
``BRA.U.ANY``: ptxas issuing an instruction whose operands must be warp-uniform once per distinct active
thread), the ``SYNCS`` instructions (mbarrier init/arrive/try_wait/inval), and the key loop's instructions
and branches per trip, with the opcode counts that differ between the two loops.

Nsight Compute's counters (docs/triton-tutorials.md, "06 forward kernel: branches") check the static
counts: branch instructions executed per warp = branches outside the loop + ``loop_branches`` x trips.

``--kernelc-root``: import kernelc from another checkout (the baseline: ``/work/main``); Triton compiles
in a subprocess (``--triton-site``). Nothing here is a test.
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

_LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*)?$")
_LABEL = re.compile(r"\s*(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_PRED = re.compile(r"^@(!?)(U?P[T0-9]+)\s+")


def parse(sass: str):
    """[(pc index, predicate or '', opcode text without predicate)], label -> index."""
    instrs, labels, pending = [], {}, []
    for raw in sass.splitlines():
        m = _LABEL.match(raw)
        if m:
            pending.append(m.group(1))
            continue
        m = _LINE.match(raw)
        if not m:
            continue
        for lb in pending:
            labels[lb] = len(instrs)
        pending = []
        text = m.group(2).rstrip(" ;")
        pm = _PRED.match(text)
        pred = (pm.group(1) + pm.group(2)) if pm else ""
        instrs.append((pred, text[pm.end():] if pm else text))
    return instrs, labels


def key_loop(instrs, labels):
    """(start, end) of the loop with the most HGMMAs (end: its backward branch), or None."""
    best = None
    for i, (_, ins) in enumerate(instrs):
        m = _TARGET.search(ins)
        if ins.startswith("BRA") and m and m.group(1) in labels and labels[m.group(1)] <= i:
            s = labels[m.group(1)]
            n = sum(1 for _, x in instrs[s:i + 1] if x.startswith("HGMMA"))
            if n and (best is None or n > best[0]):
                best = (n, s, i)
    return None if best is None else (best[1], best[2])


def _kind(pred: str, ins: str) -> str:
    if ".U.ANY" in ins.split()[0]:
        return "bra_u_any"
    if not pred or pred in ("PT",):
        return "bra"
    return "bra_uniform_pred" if pred.lstrip("!").startswith("UP") else "bra_thread_pred"


def profile(sass: str) -> dict:
    instrs, labels = parse(sass)
    loop = key_loop(instrs, labels)
    # out-of-line mbarrier retry blocks: TRYWAIT; @!P BRA back to it; BRA forward to where the wait was
    retry = set()
    for i, (_, ins) in enumerate(instrs):
        if "TRYWAIT" in ins and i + 2 < len(instrs):
            j = i + 1
            m = _TARGET.search(instrs[j][1])
            if instrs[j][1].startswith("BRA") and m and labels.get(m.group(1)) == i \
                    and instrs[j + 1][1].startswith("BRA") and (loop is None or i > loop[1]):
                retry.update((j, j + 1))
    out = {"instructions": len(instrs), "branches": collections.Counter(), "syncs": collections.Counter()}
    elect_loops = 0
    for i, (pred, ins) in enumerate(instrs):
        op = ins.split()[0]
        where = "loop" if loop and loop[0] <= i <= loop[1] else ("retry" if i in retry else "other")
        if op.startswith("BRA"):
            out["branches"][f"{where}:{_kind(pred, ins)}"] += 1
            m = _TARGET.search(ins)
            if ".U.ANY" in op and m and labels.get(m.group(1), i + 1) <= i and \
                    instrs[labels[m.group(1)]][1].startswith("ELECT"):
                elect_loops += 1
        elif op in ("BSSY", "BSYNC", "WARPSYNC") or op.startswith("WARPSYNC"):
            out["branches"][f"{where}:{op.lower()}"] += 1
        elif op == "EXIT":
            out["branches"][f"{where}:exit{'_pred' if pred else ''}"] += 1
        if op.startswith("SYNCS"):
            out["syncs"][f"{where}:{op}"] += 1
        if op in ("ELECT", "VOTEU.ANY", "VOTEU.ALL"):
            out["branches"][f"{where}:{op.lower()}"] += 1
    out["elect_loops"] = elect_loops
    out["bssy_regions"] = sum(v for k, v in out["branches"].items() if k.endswith(":bssy"))
    if loop:
        body = instrs[loop[0]:loop[1] + 1]
        out["loop_instructions"] = len(body)
        out["loop_branches"] = sum(1 for _, x in body if x.startswith("BRA"))
        out["loop_opcodes"] = dict(collections.Counter(x.split()[0] for _, x in body))
    out["branches"] = dict(sorted(out["branches"].items()))
    out["syncs"] = dict(sorted(out["syncs"].items()))
    out["branches_outside_loop"] = sum(v for k, v in out["branches"].items()
                                       if k.split(":")[1].startswith("bra") and not k.startswith(("loop", "retry")))
    return out


def loop_diff(a: dict, b: dict) -> dict:
    ka, kb = a.get("loop_opcodes", {}), b.get("loop_opcodes", {})
    return {k: [ka.get(k, 0), kb.get(k, 0)] for k in sorted(set(ka) | set(kb)) if ka.get(k, 0) != kb.get(k, 0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--configs", nargs="+", default=["128x64x2x4", "128x64x3x4"])
    ap.add_argument("--kernelc-root", default=ROOT, help="the checkout kernelc is imported from")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--sass-dir", help="write each SASS listing here")
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    import cpu_compare
    import fwd06_sass
    sys.path.insert(0, os.path.abspath(args.kernelc_root))
    for m in [m for m in sys.modules if m == "kernelc" or m.startswith("kernelc.")]:
        del sys.modules[m]
    import kernelc
    kc_from = os.path.dirname(os.path.dirname(os.path.abspath(kernelc.__file__)))
    text = cpu_compare.kernel_module(args.tutorial)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
    mod = os.path.join(tempfile.mkdtemp(prefix="fwd06br_"), "tut06_kernels.py")
    with open(mod, "w") as f:
        f.write(text + "\n")
    rows = []
    for D in args.head_dims:
        for c in args.configs:
            bm, bn, s, w = (int(x) for x in c.split("x"))
            sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
                   "desc_q": f"tensordesc<fp16[{bm}, {D}]>", "desc_k": f"tensordesc<fp16[{bn}, {D}]>",
                   "desc_v": f"tensordesc<fp16[{bn}, {D}]>", "desc_o": f"tensordesc<fp16[{bm}, {D}]>",
                   "N_CTX": "i32"}
            cx = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, FP8_OUTPUT=False, STAGE=1, warp_specialize=False,
                      IS_HOPPER=True)
            div = {"M": 16, "N_CTX": 16, "desc_q": 16, "desc_k": 16, "desc_v": 16, "desc_o": 16}
            row = {"head_dim": D, "config": c, "kernelc_from": kc_from}
            impls = ["kernelc"] + ([] if args.no_triton else ["triton"])
            for impl in impls:
                if impl == "kernelc":
                    r, cubin = fwd06_sass._kernelc(mod, sig, cx, div, w, s)
                else:
                    r, cubin = fwd06_sass._triton(args.triton_site, mod, sig, cx, w, s)
                sass = fwd06_sass.sass_of(cubin)
                if args.sass_dir:
                    os.makedirs(args.sass_dir, exist_ok=True)
                    with open(os.path.join(args.sass_dir, f"{impl}_d{D}_{c}.sass"), "w") as f:
                        f.write(sass)
                r.update(profile(sass))
                row[impl] = r
            if "triton" in row:
                row["loop_opcode_diff_kernelc_triton"] = loop_diff(row["kernelc"], row["triton"])
            rows.append(row)
            brief = {k: {x: row[k][x] for x in ("n_regs", "instructions", "loop_instructions", "loop_branches",
                                                 "branches_outside_loop", "elect_loops", "bssy_regions")}
                     for k in impls}
            print(json.dumps({"head_dim": D, "config": c, **brief}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
