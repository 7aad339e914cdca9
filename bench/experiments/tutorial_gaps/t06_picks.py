"""What tutorial 06's two autotuners picked, per tuning key, and which forward points of a ``bench/triton_tutorials.py``
result are below a ratio (issue #20; CPU only, reads the JSON).

    python3 bench/experiments/tutorial_gaps/t06_picks.py triton_tutorials_t06.json [--below 0.95]

The tutorial's ``_attn_fwd`` is tuned on ``(N_CTX, HEAD_DIM, FP8_OUTPUT, warp_specialize)`` (plus the tensors'
dtypes where they are pointers: the warp-specialised path on Hopper). STAGE is not in the key, so the causal table,
which runs first, picks the config the non-causal table then uses. Per forward point: both sides' milliseconds a call
(from the table's TFLOP/s) and the GPU work at 400 TFLOP/s, to flag the points where a call takes several times its
kernel (the host's time, not the kernel's). ``autotune_timings`` holds each candidate's time of the LAST tuning only.
"""
from __future__ import annotations

import argparse
import json
import re


def short(cfg: str) -> str:
    m = dict(re.findall(r"(\w+)[:=] ?(\w+)", cfg))
    return f"{m['BLOCK_M']}x{m['BLOCK_N']} s{m['num_stages']} w{m['num_warps']}"


def key_name(k: str) -> str:
    t = [x.strip(" '") for x in k.strip("()").split(",")]
    n, d, fp8, ws = t[:4]
    return f"N={n} d{d} {'fp8' if fp8 == 'True' else 'fp16'} ws={ws}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--below", type=float, default=0.95)
    a = ap.parse_args(argv)
    t = json.load(open(a.json))["tutorials"]["06-fused-attention"]
    picks = {s: t[s]["autotune"][0]["_attn_fwd"] for s in ("triton", "kernelc")}
    print("tuning key                      triton           kernelc")
    for k, v in picks["triton"].items():
        kc = picks["kernelc"].get(k)
        same = kc is not None and short(v) == short(kc)
        print(f"{key_name(k):30s}  {short(v):15s}  {short(kc) if kc else '-':15s} {'' if same else '<- differs'}")
    print("\nlast tuning's candidates, ms (triton / kernelc):")
    tt = {short(c): (v[0] if isinstance(v, list) else v) for c, v in t["triton"]["autotune_timings"][0]["_attn_fwd"].items()}
    kt = {short(c): (v[0] if isinstance(v, list) else v) for c, v in t["kernelc"]["autotune_timings"][0]["_attn_fwd"].items()}
    for c in tt:
        print(f"  {c:15s} {tt[c]:8.3f} {kt.get(c, float('nan')):8.3f}")
    print(f"\nforward points below {a.below}: (ms a call triton / kernelc; GPU work at 400 TFLOP/s)")
    for tb in t["tables"]:
        name = tb["plot_name"]
        if "-fwd-" not in name:
            continue
        D = int(re.search(r"-d(\d+)-", name).group(1))
        causal = "causal=True" in name
        for col, c in tb["columns"].items():
            for x, r, vt, vk in zip(c["x"], c["ratio"], c["triton"], c["kernelc"]):
                n = int(x[0])
                flop = 4.0 * 4 * 32 * n * n * D * (0.5 if causal else 1.0)
                if r < a.below:
                    print(f"  {name[27:]:40s} {col[8:12]:5s} N={n:5d} ratio {r:5.3f}  "
                          f"{flop / vt / 1e9:7.3f} / {flop / vk / 1e9:7.3f} ms (work {flop / 400e12 * 1e3:6.3f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
