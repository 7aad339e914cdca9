"""Ground truth for instruction sampling: kprof's top source lines vs Nsight Compute's, same kernels.

    python bench/pcsampling_vs_ncu.py [--period 10] [--top 10] [--kernels matmul,softmax] [--ncu PATH]

For the kernelc matmul (fp16 2048^3, compute bound) and the fused softmax (fp32 4096x4096, memory
bound):

1. kprof: ``PCSampler(period=N)`` over 3 launches, samples ranked per source line (one family:
   "all samples", which is what Nsight Compute's "Warp Stall Sampling (All Samples)" counts).
2. Nsight Compute on the same kernel in a child process (one launch after a warm-up)::

       ncu --target-processes all -k regex:^<kernel>$ -s 1 -c 1 --section SourceCounters
           --section WarpStateStats --warp-sampling-interval <N-5> --import-source yes -f -o <rep> python <this> --child <k>
       ncu -i <rep>.ncu-rep --page source --csv --print-source sass    (per SASS instruction)
       ncu -i <rep>.ncu-rep --page source --csv --print-source cuda    (per source line, ncu's own mapping)

   ncu's sampling interval v means 2^(5+v) cycles, so v = N - 5 samples at kprof's rate (the flag's
   spelling is read from ``ncu --help``: older releases call it ``--sampling-interval``).  The SASS
   view's "Warp Stall Sampling (All Samples)" per address is put on lines with the kernel's source
   map ("ncu sass"); the CUDA view gives ncu's own per-line numbers ("ncu lines") when it parses.
3. The rankings side by side, with agreement measures: top-1 equal, overlap of the top 5, Spearman
   rank correlation over the union of both top-N lists, and the histogram intersection of the two
   sample distributions (1.0 = identical shares).

Raw ncu outputs go to $OUT/ncu/ (or a temp dir) for inspection.  Results:
bench/results/pcsampling_vs_ncu.json.
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

KERNELS = {"matmul": ("kernelc_matmul", "matmul_kernel"), "softmax": ("kernelc_softmax", "softmax_kernel")}
SAMPLE_COLUMN = re.compile(r"warp stall sampling \(all", re.I)


# ------------------------------------------------------------------------------------------ parsing
def _num(text: str) -> float | None:
    t = (text or "").strip().replace(",", "").replace("%", "")
    if not t:
        return None
    try:
        return float(t)
    except ValueError:
        return None


def _address(text: str) -> int | None:
    t = (text or "").strip()
    try:
        return int(t, 16) if t.lower().startswith("0x") or re.fullmatch(r"[0-9a-fA-F]{8,}", t) else int(t)
    except ValueError:
        return None


def parse_ncu_source_csv(text: str) -> dict:
    """Rows of ``ncu --page source --csv``: ``{"sass": [(address, samples, source)], "lines": {(file, line):
    samples}}`` (whichever the view gave).  Tolerant: the header is any row with a "Warp Stall
    Sampling (All Samples)" column; a one-cell row naming a file starts that file's block."""
    out: dict = {"sass": [], "lines": {}}
    header = None
    current_file = ""
    ordinal = 0
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        if any(SAMPLE_COLUMN.search(c) for c in cells):
            header = {name: i for i, name in enumerate(cells)}
            ordinal = 0
            continue
        nonempty = [c for c in cells if c]
        if len(nonempty) == 1 and ("/" in nonempty[0] or nonempty[0].endswith((".py", ".cu", ".h"))):
            current_file = re.sub(r"^(File|Source File)\s*:\s*", "", nonempty[0])
            ordinal = 0
            continue
        if header is None:
            continue
        samp_col = next(i for name, i in header.items() if SAMPLE_COLUMN.search(name))
        if samp_col >= len(cells):
            continue
        samples = _num(cells[samp_col]) or 0.0
        addr_col = next((i for name, i in header.items() if name.lower().lstrip("# ").startswith("address")), None)
        line_col = next((i for name, i in header.items() if name.lower() in ("#", "line", "# line", "line number")), None)
        src_col = header.get("Source")
        ordinal += 1
        if addr_col is not None and addr_col < len(cells) and _address(cells[addr_col]) is not None:
            out["sass"].append((_address(cells[addr_col]), samples,
                                cells[src_col] if src_col is not None and src_col < len(cells) else ""))
        else:
            line = int(_num(cells[line_col]) or 0) if line_col is not None and line_col < len(cells) else ordinal
            key = (os.path.basename(current_file) if current_file else "?", line)
            out["lines"][key] = out["lines"].get(key, 0.0) + samples
    return out


def sass_to_lines(rows, code) -> tuple[dict, float]:
    """ncu's per-address samples put on lines with ``code`` (a KernelCode); also the fraction of
    sampled rows whose opcode agrees with ours (a check that both looked at the same SASS)."""
    if not rows:
        return {}, 0.0
    base = min(a for a, _, _ in rows)
    relative = all(a < (1 << 24) for a, _, _ in rows)
    lines: dict = {}
    agree = checked = 0
    for addr, samples, text in rows:
        pc = addr if relative else addr - base
        where = code.locate(pc)
        if samples and text:
            op = code.opcode(pc)
            if op:
                checked += 1
                token = text.split()
                token = token[1] if token and token[0].startswith("@") and len(token) > 1 else (token[0] if token else "")
                agree += token.rstrip(";") == op
        if where and samples:
            key = (os.path.basename(where[0]), where[1])
            lines[key] = lines.get(key, 0.0) + samples
    return lines, (agree / checked if checked else 0.0)


# ---------------------------------------------------------------------------------------- comparing
def ranking(lines: dict) -> list[tuple[str, int, float]]:
    return sorted(((f, ln, n) for (f, ln), n in lines.items() if n), key=lambda t: (-t[2], t[0], t[1]))


def agreement(a: dict, b: dict, top: int) -> dict:
    ra, rb = ranking(a), ranking(b)
    if not ra or not rb:
        return {}
    ka, kb = [(f, ln) for f, ln, _ in ra[:top]], [(f, ln) for f, ln, _ in rb[:top]]
    union = list(dict.fromkeys(ka + kb))

    def ranks(lines):
        order = sorted(union, key=lambda k: -lines.get(k, 0.0))
        return {k: i for i, k in enumerate(order)}
    pa, pb = ranks(a), ranks(b)
    n = len(union)
    spearman = 1.0 - 6.0 * sum((pa[k] - pb[k]) ** 2 for k in union) / (n * (n * n - 1)) if n > 1 else 1.0
    ta, tb = sum(a.values()), sum(b.values())
    inter = sum(min(a.get(k, 0.0) / ta, b.get(k, 0.0) / tb) for k in set(a) | set(b))
    return {"top1_equal": ka[0] == kb[0], "top5_overlap": len(set(ka[:5]) & set(kb[:5])),
            "spearman_topN": round(spearman, 3), "histogram_intersection": round(inter, 3)}


def side_by_side(name: str, cols: dict, top: int) -> str:
    ranked = {k: ranking(v)[:top] for k, v in cols.items() if v}
    totals = {k: sum(v.values()) for k, v in cols.items() if v}
    heads = list(ranked)
    out = [f"== {name}: top {top} source lines by samples (share of the kernel's samples) =="]
    out.append(f"{'#':>2}  " + "  ".join(f"{h:<30}" for h in heads))
    for i in range(top):
        cells = []
        for h in heads:
            r = ranked[h]
            cells.append(f"{r[i][0]}:{r[i][1]} {100 * r[i][2] / totals[h]:5.1f}%" if i < len(r) else "")
        out.append(f"{i + 1:>2}  " + "  ".join(f"{c:<30}" for c in cells))
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- running
def find_ncu(given: str | None) -> str | None:
    if given:
        return given
    for cand in [shutil.which("ncu")] + sorted(glob.glob("/usr/local/cuda*/bin/ncu"), reverse=True) + \
            sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True):
        if cand and os.path.exists(cand):
            return cand
    return None


def child(kind: str) -> None:
    import torch
    from examples import workloads
    run = getattr(workloads, KERNELS[kind][0])()
    run()
    torch.cuda.synchronize()
    run()
    torch.cuda.synchronize()


def ours(kind: str, period: int):
    import torch
    from profiler.pcsampling import PCSampler
    from examples import workloads
    from profiler.pcsampling.attribution import KernelCode
    run = getattr(workloads, KERNELS[kind][0])()
    run()
    torch.cuda.synchronize()
    # keep_enabled=False: a context left enabled holds the GPU's sampling unit, and the ncu child
    # then fails with "a driver resource was unavailable" (H200, 2026-11-22)
    with PCSampler(period=period, keep_enabled=False) as s:
        for _ in range(3):
            run()
        torch.cuda.synchronize()
    kernel = KERNELS[kind][1]
    lines: dict = {}
    for f, ln, n in s.top_lines(kernel, None):
        key = (os.path.basename(f), ln)
        lines[key] = lines.get(key, 0) + n
    code = next((KernelCode.from_compiled(c, j) for c, j, _ in s.kernels_seen() if c.name == kernel), None)
    return lines, code, s.error


def sampling_interval_flag(ncu: str) -> str | None:
    """The option this ncu spells the warp-sampling interval with (``--warp-sampling-interval`` in current
    releases, ``--sampling-interval`` in old ones), read from ``ncu --help``; None when it has neither."""
    try:
        text = subprocess.run([ncu, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for flag in ("--warp-sampling-interval", "--sampling-interval"):
        if re.search(re.escape(flag) + r"\b", text):
            return flag
    return None


def run_ncu(ncu: str, kind: str, period: int, outdir: str) -> dict:
    kernel = KERNELS[kind][1]
    flag = sampling_interval_flag(ncu)
    interval = [flag, str(max(0, min(31, period - 5)))] if flag else []
    rep = os.path.join(outdir, f"{kind}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    prof = [ncu, "--target-processes", "all", "-k", f"regex:^{kernel}$", "-s", "1", "-c", "1",
            "--section", "SourceCounters", "--section", "WarpStateStats",
            *interval, "--import-source", "yes", "-f", "-o", rep,
            sys.executable, os.path.abspath(__file__), "--child", kind]
    res: dict = {"command": " ".join(prof)}
    r = subprocess.run(prof, capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    with open(rep + ".profile.log", "w") as f:
        f.write(r.stdout + "\n--- stderr ---\n" + r.stderr)
    if r.returncode != 0 or not os.path.exists(rep + ".ncu-rep"):
        res["error"] = f"ncu exit {r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}"
        return res
    for view in ("sass", "cuda"):
        cmd = [ncu, "-i", rep + ".ncu-rep", "--page", "source", "--csv", "--print-source", view]
        v = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
        with open(f"{rep}.source_{view}.csv", "w") as f:
            f.write(v.stdout)
        if v.returncode != 0:
            res[f"{view}_error"] = (v.stderr or v.stdout).strip()[-300:]
            continue
        parsed = parse_ncu_source_csv(v.stdout)
        res[view] = parsed
        if not parsed["sass"] and not parsed["lines"]:
            res[f"{view}_error"] = "no rows parsed; first lines: " + " | ".join(v.stdout.splitlines()[:6])[:600]
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--period", type=int, default=10)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--kernels", default="matmul,softmax")
    ap.add_argument("--ncu")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    from bench.common import write_results
    os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="kc_ncu_"))  # parent and child share cubins
    out = os.environ.get("OUT")
    outdir = os.path.join(out, "ncu") if out else tempfile.mkdtemp(prefix="ncu_")
    os.makedirs(outdir, exist_ok=True)
    ncu = find_ncu(args.ncu)
    rows, rankings = [], {}
    for kind in args.kernels.split(","):
        mine, code, err = ours(kind, args.period)
        cols = {"kprof": mine}
        row = {"kernel": KERNELS[kind][1], "kprof_samples": int(sum(mine.values())), "kprof_error": err}
        if ncu is None:
            row["ncu_error"] = "ncu not found (pass --ncu PATH)"
        else:
            from profiler.pcsampling.sampler import release_contexts
            release_contexts()  # ncu needs the sampling unit this process may hold
            res = run_ncu(ncu, kind, args.period, outdir)
            row["ncu_command"] = res.get("command")
            if "error" in res:
                row["ncu_error"] = res["error"]
            if res.get("sass") and res["sass"]["sass"] and code is not None:
                lines, agree = sass_to_lines(res["sass"]["sass"], code)
                cols["ncu sass->lines"] = lines
                row["ncu_sass_opcode_agreement"] = round(agree, 3)
                row["vs_ncu_sass"] = agreement(mine, lines, args.top)
            if res.get("cuda") and res["cuda"]["lines"]:
                cols["ncu lines"] = res["cuda"]["lines"]
                row["vs_ncu_lines"] = agreement(mine, res["cuda"]["lines"], args.top)
            for k in ("sass_error", "cuda_error"):
                if k in res:
                    row[f"ncu_{k}"] = res[k]
        print(side_by_side(f"{KERNELS[kind][1]} ({kind})", cols, args.top), flush=True)
        print(json.dumps({k: v for k, v in row.items() if k != "ncu_command"}, indent=1), flush=True)
        rankings[KERNELS[kind][1]] = {k: [[f, ln, n] for f, ln, n in ranking(v)[:args.top]] for k, v in cols.items()}
        rows.append(row)
    write_results("pcsampling_vs_ncu", rows, extra={"period": args.period, "rankings": rankings,
                                                    "raw_ncu_outputs": outdir})
    return 0


if __name__ == "__main__":
    sys.exit(main())
