"""(d64c28) Every kernel the backward's defaults launch (``dq_mode=None``, the launch recorder of ``launch_keys.py``:
each distinct kernel and launch keywords at head dims 16-128, both masks, N 1024 / 4096 / 16384), compiled on CPU for
sm_90a as the launcher specialises them at these sizes (16-divisible integers and pointers, unit inner stride): PTX and
SASS hashes (the tree's path left out), registers, spills, shared memory. Run on two trees (``--json``) and ``--diff`` them.

    PYTHONPATH=$PWD python3 bench/experiments/d64c28/sass_defaults.py --json A.json
    python3 bench/experiments/d64c28/sass_defaults.py --diff A.json B.json
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import sys

P = lambda t: "*" + t  # noqa: E731
_PTRS = {"Q", "K", "V", "DO", "DK", "DV", "DQ", "O", "DST"}
SIGS = {
    "attn_bwd_preprocess_kernel": "O DO Delta* stride_oz stride_oh stride_om stride_ok stride_dz stride_dh stride_dm "
                                  "stride_dk H N_CTX",
    "attn_bwd_dkdv_kernel": "Q K V DO DK DV DQ LSE* Delta* sm_scale stride_z stride_h stride_m stride_k dq_stride_z "
                            "dq_stride_h dq_stride_m H N_CTX",
    "attn_bwd_dq_kernel": "Q K V DO DQ LSE* Delta* sm_scale stride_z stride_h stride_m stride_k H N_CTX",
    "attn_bwd_fused_kernel": "Q K V DO DK DV DQ LSE* Delta* sm_scale stride_z stride_h stride_m stride_k H N_CTX",
    "attn_bwd_dq_from_ds_kernel": "DST K DQ sm_scale stride_z stride_h stride_m stride_k H N_CTX",
}


def _sig(name):
    sig = {}
    for a in SIGS[name].split():
        if a.endswith("*"):
            sig[a[:-1]] = P("fp32")
        elif a in _PTRS:
            sig[a] = P("fp16")
        else:
            sig[a] = "fp32" if a == "sm_scale" else "i32"
    return sig


def _hash(text, root):
    return hashlib.sha256(text.replace(root, "<root>").encode()).hexdigest()[:16]


def default_launches():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import launch_keys
    launch_keys.LENGTHS, launch_keys.MODES = (1024, 4096, 16384), (None,)
    rec = launch_keys.record()
    seen = {}
    for case, launches in rec.items():
        for name, _, kw in launches:
            key = name + " " + json.dumps(kw, sort_keys=True)
            seen.setdefault(key, (name, kw, case))
    return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--diff", nargs=2)
    a = ap.parse_args()
    if a.diff:
        x, y = (json.load(open(p))["kernels"] for p in a.diff)
        keys = sorted(set(x) | set(y))
        same = [k for k in keys if k in x and k in y and x[k] == y[k]]
        print(f"{len(same)} kernels the same (PTX, SASS, registers, spills, shared memory), "
              f"{len(keys) - len(same)} differ or are in one tree only")
        for k in keys:
            if k not in same:
                print("DIFFERS" if k in x and k in y else ("ONLY IN " + (a.diff[0] if k in x else a.diff[1])), k)
        return
    sys.path.insert(0, os.getcwd())
    launches = default_launches()
    import kernelc
    from examples.kernels import attention_bwd as B
    # the tree's path (in the line info's file names) left out of the hashes: two checkouts compare
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(B.__file__))))
    out = {}
    for key, (name, kw, case) in sorted(launches.items()):
        kw = {k: ast.literal_eval(v) for k, v in kw.items()}
        kw = {k: v for k, v in kw.items() if v is not None}
        w, s = kw.pop("num_warps", 4), kw.pop("num_stages", 2)
        opts = {k: kw.pop(k) for k in ("maxnreg",) if k in kw}
        sig = _sig(name)
        try:
            ck = kernelc.compile(getattr(B, name), sig, kw, target="sm_90a", num_warps=w, num_stages=s,
                                 divisibility={n: 16 for n in sig}, equal_to_1=tuple(n for n in sig if n in
                                                                                    ("stride_k", "stride_ok", "stride_dk")),
                                 **opts)
            r = dict(ptx=_hash(ck.asm["ptx"], root), sass=_hash(ck.asm["sass"], root), regs=ck.n_regs,
                     spills=ck.n_spills, shared=ck.shared)
        except Exception as e:
            r = dict(error=f"{type(e).__name__}: {e}"[:300])
        out[key] = r
        print(f"{case:34s} {name:28s} {r}", flush=True)
    json.dump(dict(target="sm_90a", kernels=out), open(a.json, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
