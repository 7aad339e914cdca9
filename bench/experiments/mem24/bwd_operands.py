"""Why knob_ab's ``bwd128_ds`` raised "base#1's output is NaN" in call P24 (session 24), on CPU.

1. ``--scale``: fp32 torch at the call's shape (1 x 32 heads x N x 128, seq 4096; ``--heads`` of them): the largest
   |dS|, |dq|, |dk|, |dv| under knob_ab's old operands (do, q, k, v, o and lse all random) and under a forward's o and
   lse. The kernel writes dS^T and dq in fp16 (at most 65504): a value above it is inf, and the harness's
   ``out - base#1`` is then inf - inf = NaN.
2. ``--interp``: the kernels themselves in the CPU interpreter (seq 256, 2 heads, D 128, the GPU's ds configs), on
   knob_ab's new operands (its ``operands``: o and lse from attention_fwd) and on the old random ones, against the
   same math in fp32 torch: the kernel computes what the formula gives in both, so the NaN is the operands'.

    python3 bench/experiments/mem24/bwd_operands.py --scale --heads 32 --interp
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem23"))
FP16_MAX = 65504.0


def grads_fp32(torch, do, q, k, v, o, lse, causal, s):
    """(dS, dq, dk, dv) of the backward's formulas in fp32 (lse base 2, as attention_fwd returns it)."""
    do, q, k, v, o = (t.float() for t in (do, q, k, v, o))
    qk = q @ k.transpose(-1, -2) * s
    if causal:
        n = q.shape[-2]
        qk = qk.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp2(qk / math.log(2) - lse.float()[..., None])
    ds = p * (do @ v.transpose(-1, -2) - (do * o).sum(-1)[..., None])
    return ds, ds @ k * s, ds.transpose(-1, -2) @ q * s, p.transpose(-1, -2) @ do


def scale(torch, seq, heads):
    torch.manual_seed(0)
    s = 128 ** -0.5
    worst = {}
    for _ in range(heads):
        do, q, k, v, o = [torch.randn(seq, 128).half() for _ in range(5)]
        lse_rand = torch.randn(seq)
        for causal in (False, True):
            qk = q.float() @ k.float().T * s
            if causal:
                qk = qk.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
            lse_fwd = torch.logsumexp(qk, -1) / math.log(2)
            o_fwd = (torch.softmax(qk, -1) @ v.float()).half()
            for tag, oo, lse in (("random o, lse", o, lse_rand), ("forward's o, lse", o_fwd, lse_fwd)):
                g = grads_fp32(torch, do, q, k, v, oo, lse, causal, s)
                key = f"{'causal' if causal else 'non-causal'}, {tag}"
                w = worst.setdefault(key, {n: 0.0 for n in ("dS", "dq", "dk", "dv")})
                for n, t in zip(w, g):
                    w[n] = max(w[n], t.abs().max().item())
    out = {}
    for key, w in worst.items():
        over = [n for n, x in w.items() if x > FP16_MAX]
        print(f"seq {seq}, {heads} heads, {key}: " + ", ".join(f"max|{n}| {x:.4g}" for n, x in w.items())
              + f"; above fp16's max: {over or 'none'}")
        out[key] = dict(w, above_fp16=over)
    return out


def interp(torch, seq):
    os.environ["KERNELC_INTERPRET"] = "1"
    from examples.kernels import attention_bwd as B
    import knob_ab
    s = 128 ** -0.5
    out = {}
    for causal in (False, True):
        new = knob_ab.operands("bwd_causal" if causal else "bwd", torch, seq, device="cpu")
        new = [t[:, :2].contiguous() for t in new]   # two heads: the interpreter is slow
        torch.manual_seed(0)
        old = [torch.randn(1, 2, seq, 128, dtype=torch.float16) for _ in range(5)] + [torch.randn(1, 2, seq)]
        for tag, args in (("forward's o, lse (knob_ab now)", new), ("random o, lse (knob_ab in P24)", old)):
            got = B.attention_bwd(*args, causal, s, dq_mode="ds")
            ref = grads_fp32(torch, *args, causal, s)[1:]
            errs = {}
            for n, g, r in zip(("dq", "dk", "dv"), got, ref):
                ok = bool(torch.isfinite(g).all())
                errs[n] = {"finite": ok, "max_ref": round(r.abs().max().item(), 4),
                           "max_rel_err": round(((g.float() - r).abs().max() / r.abs().max()).item(), 5)}
            key = f"{'causal' if causal else 'non-causal'}, {tag}"
            print(f"interpreter seq {seq}, 2 heads, {key}: " + "; ".join(
                f"{n} finite={e['finite']} max|ref| {e['max_ref']:.4g} rel err {e['max_rel_err']:.2e}"
                for n, e in errs.items()), flush=True)
            out[key] = errs
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--interp", action="store_true")
    ap.add_argument("--interp-seq", type=int, default=256)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    import torch
    res = {"torch": torch.__version__}
    if a.scale:
        res["scale"] = scale(torch, a.seq, a.heads)
    if a.interp:
        res["interp"] = interp(torch, a.interp_seq)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
