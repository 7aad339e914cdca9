"""Markdown tables of a ``python3 -m bench attention`` results file's backward rows: through autograd, each of our
modes against cuDNN and tutorial 06 (ms and ratios), and the direct-call sweep entries (ms, against
``sweep_bwd_default``).

    python3 bench/experiments/attention_bwd_cudnn/summarize.py RESULTS.json [RESULTS.json ...]
"""
from __future__ import annotations

import json
import sys


MODES = ("separate", "ds", "fused")  # our autograd rows (ours_bwd_<mode>) where the file has them


def tables(path: str) -> str:
    data = json.load(open(path))
    by = {}
    for t in data["timings"]:
        if "ms" in t:
            by.setdefault((t["seq"], t["head_dim"], t["dtype"], t["causal"]), {})[t["variant"]] = t["ms"]
    out = [f"### {path}", "", "| N | D | dtype | causal | cuDNN | tut06 | " +
           " | ".join(f"{m} (vs cuDNN, vs tut06)" for m in MODES) + " |",
           "|" + "---|" * (6 + len(MODES))]
    for key, ms in sorted(by.items()):
        cud, tut = ms.get("sdpa_cudnn_bwd"), ms.get("tutorial06_bwd")
        cells = []
        for m in MODES:
            x = ms.get(f"ours_bwd_{m}")
            cells.append("--" if x is None else f"{x:.3f} ({cud / x:.3f}, {tut / x:.3f})" if tut else
                         f"{x:.3f} ({cud / x:.3f}, --)" if cud else f"{x:.3f}")
        if not any(f"ours_bwd_{m}" in ms for m in MODES) and cud is None:
            continue
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {int(key[3])} | {cud and round(cud, 3)} | "
                   f"{tut and round(tut, 3)} | " + " | ".join(cells) + " |")
    out += ["", "| N | D | causal | sweep entry (called directly) | ms | vs sweep_bwd_default | "
            "cuDNN (autograd) / this |",
            "|---|---|---|---|---|---|---|"]
    for key, ms in sorted(by.items()):
        base, cud = ms.get("sweep_bwd_default"), ms.get("sdpa_cudnn_bwd")
        for name, x in sorted(ms.items(), key=lambda kv: kv[1]):
            if name.startswith("sweep_bwd"):
                out.append(f"| {key[0]} | {key[1]} | {int(key[3])} | `{name}` | {x:.3f} | "
                           f"{f'{base / x:.3f}' if base else '--'} | {f'{cud / x:.3f}' if cud else '--'} |")
    fails = data.get("check_failures") or []
    out += ["", f"check failures: {fails if fails else 'none'}"]
    return "\n".join(out)


def main(argv=None) -> int:
    for path in (argv if argv is not None else sys.argv[1:]):
        print(tables(path))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
