"""Issue 20's status, computed from the result files of the calls that measured it (nothing typed in by hand but
which file answers which question): per tutorial, its checks under both runtimes; per benchmark table and kernel
column, kernelc/Triton (above 1: kernelc faster) per point, with the table's noise floor (its control columns'
ratio, the same torch code in both processes); the first call of each kernel (compile and autotune); and the focused
re-measurements (processes alternated, repeats, controls) that replace a table's one-repeat reading at the points
they cover.

    python3 bench/experiments/tutorial_gaps/status_table.py [--json bench/results/triton_tutorials_status_s20.json]
        [--md OUT.md]
    python3 bench/experiments/tutorial_gaps/status_table.py --run bench/results/RUN.json [--run LABEL=RUN2.json ...]
        [--earlier S20.json] [--json OUT.json] [--md OUT.md]

``--run``: the table from one whole-suite run (``bench/triton_tutorials.py --suite``) alone: its checks, every table
point with its verdict, and its first calls (from empty caches where the run has them: every tutorial it ran cold,
and 06's runs that stop after their first call; the others say ``warm``); ``--earlier`` (default: session 20's
status JSON) adds the earlier reading of the same point or kernel beside it, for reference only. With several
``--run`` (oldest first), each tutorial's row comes whole from the latest run that measured it, and says which.

Every row names the call it comes from (``call``) and its file (``source``). With ``--run``, each point also gets
``median_verdict`` (the criterion on the median of its run's repeats, issue 20's reading since session 25) and the
status an ``on_medians`` block (overall, the lowest medians, every point with a single pairing below 0.95).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
RES = os.path.join(ROOT, "bench", "results")
GAPS = os.path.join(HERE, "results")

# whole-tutorial runs (bench/triton_tutorials.py): call label, file
RUNS = {
    "T18A": ("s18 T18A (2026-11-29 02:14 UTC, H200, cold caches, 1 repeat)",
             "triton_tutorials_01-05_07_08_cold_s18_h200.json"),
    "T18B": ("s18 T18B (2026-11-29 02:22 UTC, H200, warm caches, 1 repeat)", "triton_tutorials_06_warm_s18_h200.json"),
    "T18B-02": ("s18 T18B (2026-11-29 02:28 UTC, H200, warm caches, 2 repeats)",
                "triton_tutorials_02_08_warm_s18_h200.json"),
    "T19-05": ("s19 T19 (2026-11-29 05:41 UTC, H200, cold caches, 3 repeats)", "triton_tutorials_05_cold_x3_s19_h200.json"),
    "T19-08": ("s19 T19 (2026-11-29 05:42 UTC, H200, warm caches, 1 repeat of 2)", "triton_tutorials_08_warm_s19_h200.json"),
    "R1t": ("s17 R1t (2026-11-28 23:59 UTC, H200, cold caches, 1 repeat)", "triton_tutorials_09_cold_s17_h200.json"),
}
# which run answers what, per tutorial: checks, tables, first calls (the newest run that has it; first calls from
# cold caches where a cold run exists)
PLAN = {
    "01-vector-add": ("T18A", "T18A", "T18A"),
    "02-fused-softmax": ("T18B-02", "T18B-02", "T18B-02"),
    "03-matrix-multiplication": ("T18A", "T18A", "T18A"),
    "04-low-memory-dropout": ("T18A", "T18A", "T18A"),
    "05-layer-norm": ("T19-05", "T19-05", "T19-05"),
    "06-fused-attention": ("T18B", "T18B", "T18B"),
    "07-extern-functions": ("T18A", "T18A", "T18A"),
    "08-grouped-gemm": ("T19-08", "T19-08", "T18A"),
    "09-persistent-matmul": ("R1t", "R1t", "R1t"),
}
WITHIN = 0.95  # the criterion: kernelc within 5% of Triton or better


def _load(name):
    label, fn = RUNS[name]
    with open(os.path.join(RES, fn)) as f:
        return label, fn, json.load(f)


def _gmean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def tutorial_rows():
    checks, tables, firsts = [], [], []
    for tut, (c_run, t_run, f_run) in PLAN.items():
        label, fn, d = _load(c_run)
        t = d["tutorials"][tut]
        checks.append({"tutorial": tut, "passed": t.get("passed"), "call": label, "source": f"bench/results/{fn}"})
        label, fn, d = _load(t_run)
        t = d["tutorials"][tut]
        for tb in t.get("tables", []):
            floor = tb.get("noise_floor", {}) or {}
            controls = floor.get("control_columns") or []
            for col, v in tb["columns"].items():
                if col in controls or not col.lower().startswith("triton") and "matmul" not in col:
                    continue
                tables.append({"tutorial": tut, "table": tb["plot_name"], "column": col,
                               "x": [x[0] if isinstance(x, list) else x for x in v["x"]],
                               "ratio": v["ratio"], "geomean": v["geomean_ratio"], "min": v["min_ratio"],
                               "noise_floor": floor.get("table"), "noise_per_point": floor.get("per_point"),
                               "controls": controls, "call": label, "source": f"bench/results/{fn}"})
        label, fn, d = _load(f_run)
        t = d["tutorials"][tut]
        for fc in t.get("first_calls", []):
            firsts.append({"tutorial": tut, "kernel": fc["kernel"], "triton_s": fc.get("triton_s"),
                           "kernelc_s": fc.get("kernelc_s"), "kernelc_over_triton": fc.get("kernelc_over_triton"),
                           "call": label, "source": f"bench/results/{fn}"})
    return checks, tables, firsts


def focused_rows():
    """Re-measurements of single points: processes alternated, repeats; ratio = Triton's time / kernelc's."""
    rows = []
    # 06 d64 backward at N_CTX 2048 and 8192 (s19, call R1): one process per row, auto (the default) twice
    d = os.path.join(GAPS, "bwd06_prefetch_rule_s19_R1_h200")
    if os.path.isdir(d):
        k = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, "auto.64.*.json")))]
        t = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, "triton.64.*.json")))]
        for n in (2048, 8192):
            km = [r["ms"] for rows_ in k for r in rows_ if r.get("n_ctx") == n and "ms" in r]
            tm = [r["ms"] for rows_ in t for r in rows_ if r.get("n_ctx") == n and "ms" in r]
            if km and tm:
                rows.append({"tutorial": "06-fused-attention", "point": f"d64 bwd (fp16, causal kernel), N_CTX {n}",
                             "ratio": statistics.median(tm) / statistics.median(km),
                             "kernelc_ms": km, "triton_ms": tm, "metric": "do_bench ms (the tutorial's timing)",
                             "call": "s19 R1 (2026-11-29 05:35 UTC, H200; processes auto, off, off, auto, Triton)",
                             "source": os.path.relpath(d, ROOT)})
    # 06 fp8 d128 forward at N_CTX 2048, both picks, both masks (s19, call R3): one process per runtime and mask
    d = os.path.join(GAPS, "fwd06_fp8_d128_picks_s19_R3_h200")
    if os.path.isdir(d):
        for c in (0, 1):
            k = {r["config"]: r for r in json.load(open(os.path.join(d, f"kernelc.c{c}.json")))}
            t = {r["config"]: r for r in json.load(open(os.path.join(d, f"triton.c{c}.json")))}
            for cfg in sorted(set(k) & set(t)):
                rows.append({"tutorial": "06-fused-attention",
                             "point": f"d128 fwd fp8 {'causal' if c else 'non-causal'}, N_CTX 2048, config {cfg}",
                             "case": f"a06:128:{c}:1:2048:{cfg}", "ratio": t[cfg]["ms"] / k[cfg]["ms"],
                             "ratio_gpu": t[cfg]["ms_graph"] / k[cfg]["ms_graph"], "kernelc_ms": k[cfg]["ms"],
                             "triton_ms": t[cfg]["ms"], "metric": "do_bench ms (ratio), CUDA graph ms (ratio_gpu)",
                             "call": "s19 R3 (2026-11-29 06:22 UTC, H200; one process per runtime and mask)",
                             "source": os.path.relpath(d, ROOT)})
    # 09's warp-specialised descriptor kernel at both runtimes' pick (s17, call R2a): processes k, t, t, k
    p = os.path.join(GAPS, "ws09_gpu_rounds_h200_s17_R2a.json")
    if os.path.exists(p):
        res = json.load(open(p))["results"]
        km = [r["ms"] for n, v in res.items() if n.startswith("kernelc") for r in v]
        tm = [r["ms"] for n, v in res.items() if n.startswith("triton") for r in v]
        rows.append({"tutorial": "09-persistent-matmul", "point": "matmul_kernel_descriptor_persistent_ws, "
                     "M=N=8192 K=512, 128x256x64 s3 w4 (both runtimes' pick)", "case": "ws09",
                     "ratio": statistics.median(tm) / statistics.median(km), "kernelc_ms": km, "triton_ms": tm,
                     "metric": "best of three do_bench per process",
                     "call": "s17 R2a (2026-11-29 00:20 UTC, H200; processes kernelc, Triton, Triton, kernelc)",
                     "source": os.path.relpath(p, ROOT)})
    # this session's host/GPU split (host_gpu_split.py): every case, Triton's median over kernelc's
    for tag, label in (("s20_R1", "s20 R1 (2026-11-29 ~08:05 UTC, H200; processes kernelc, Triton, Triton, kernelc, 1 repeat each)"),
                       ("s20_R3", "s20 R3 (2026-11-29 ~08:51 UTC, H200; processes kernelc, Triton, Triton, kernelc, 3 repeats each)"),
                       ("s22_R2", "s22 R2 (2026-11-29 13:39 UTC, H200 of a 2-GPU host shared with another request; "
                                  "processes kernelc, Triton, Triton, kernelc, 2 repeats each)"),
                       ("s22_R3", "s22 R3 (2026-11-29 ~14:35 UTC, H200 of a 2-GPU host; processes kernelc, Triton, "
                                  "Triton, kernelc, up to 3 repeats each)"),
                       ("s23_R1", "s23 R1b (2026-11-29 15:04 UTC, one H200 alone; processes kernelc, Triton, Triton, "
                                  "kernelc, 2 repeats each; 06 through its own autotuner)"),
                       ("s23_R2", "s23 R2 (2026-11-29, one H200 alone; processes kernelc, Triton, Triton, kernelc, "
                                  "up to 3 repeats each; kernelc's launch path cut)"),
                       ("s24_R1", "s24 R1 (2026-11-29 ~18:05 UTC, one H200 alone; processes kernelc, Triton, Triton, "
                                  "kernelc, up to 3 repeats each; 03 through its own autotuner in every process)")):
        p = os.path.join(GAPS, f"host_gpu_split_{tag}_h200", "summary.json")
        if not os.path.exists(p):
            continue
        for r in json.load(open(p)):
            if "triton_over_kernelc" not in r:
                continue
            rows.append({"tutorial": _case_tutorial(r["case"]), "point": _case_name(r["case"]), "case": r["case"],
                         "ratio": r["triton_over_kernelc"]["ms"], "ratio_gpu": r["triton_over_kernelc"]["busy_ms"],
                         "ratio_host": r["triton_over_kernelc"]["host_us"],
                         "spread": max(r["kernelc"]["ms"]["spread"], r["triton"]["ms"]["spread"]),
                         # (summaries since session 24) the ratio over every pairing of one process per runtime, and
                         # its verdict against 0.95
                         **({"range": r["range"], "spread_verdict": r["verdict"]} if "range" in r else {}),
                         "metric": "do_bench ms (ratio), GPU-only ms behind a sleep (ratio_gpu), host us a call "
                                   "(ratio_host)", "call": label, "source": os.path.relpath(p, ROOT)})
    # 09's TMA and descriptor kernels back to back as its benchmark runs them, and L2-flushed (s23 R2, t09_b2b.py):
    # each runtime at its own R1b pick (the two picks differ for tma and descriptor_persistent)
    d = os.path.join(GAPS, "t09_b2b_s23_R2_h200")
    if os.path.isdir(d):
        best = {}
        for p in sorted(glob.glob(os.path.join(d, "p*.json"))):
            run = json.load(open(p))
            per = {}
            for r in run.get("rows", []):
                if "error" not in r:
                    per.setdefault(r["case"], []).append(r)
            for case, rs in per.items():
                slot = best.setdefault((case, run["impl"]), {"b2b": [], "flush": []})
                slot["b2b"].append(min(r["b2b_us"] for r in rs))
                slot["flush"].append(min(r["flush_us"] for r in rs))
        med = lambda case, impl, m: statistics.median(best[(case, impl)][m]) if (case, impl) in best else None  # noqa
        for kernel, (kc_case, tr_case) in T09_OWN_PICKS.items():
            kb, tb = med(kc_case, "kernelc", "b2b"), med(tr_case, "triton", "b2b")
            kf, tf = med(kc_case, "kernelc", "flush"), med(tr_case, "triton", "flush")
            if kb and tb:
                rows.append({"tutorial": "09-persistent-matmul", "point": f"{kernel}, M=N=8192 K=512, each runtime's "
                             f"R1b pick (kernelc {kc_case}, Triton {tr_case})", "case": f"b2b09:{kernel}",
                             "ratio": tb / kb, "ratio_gpu": tf / kf if kf and tf else None,
                             "labels": ["back to back", "flushed"],
                             "metric": "back-to-back launches behind a GPU sleep, us a launch (ratio: the tutorial's "
                                       "loop); L2-flushed do_bench (ratio_gpu)",
                             "call": "s23 R2 (2026-11-29 15:22 UTC, one H200 alone; processes kernelc, Triton, Triton, "
                                     "kernelc, 2 repeats each)", "source": os.path.relpath(d, ROOT)})
    return rows


# 09 kernel -> (kernelc's R1b pick, Triton's R1b pick) as t09_b2b.py cases (KERNEL:BN:STAGES:WARPS:SUBTILE)
T09_OWN_PICKS = {
    "matmul_kernel_tma_persistent": ("tma_persistent:256:4:8:1", "tma_persistent:256:4:8:1"),
    "matmul_kernel_descriptor_persistent": ("descriptor_persistent:256:4:8:1", "descriptor_persistent:256:3:8:0"),
    "matmul_kernel_descriptor_persistent_ws": ("descriptor_persistent_ws:256:3:4:0", "descriptor_persistent_ws:256:3:4:0"),
    "matmul_kernel_tma": ("tma:128:3:4:0", "tma:128:2:4:0"),
    "matmul_kernel_persistent": ("persistent:256:3:8:0", "persistent:256:3:8:0"),
}


def printed_tables(path):
    """The tables a tutorial printed (``Mark.run(print_data=True)``: a ``name:`` line, a header, one row a point) in
    one process's log: {name: {"columns": [...], "rows": [[x, v1, ...], ...]}}."""
    tables, name, lines = {}, None, open(path, errors="replace").read().splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.endswith(":") and " " not in ln.strip() and i + 1 < len(lines) and "(" in lines[i + 1]:
            name = ln[:-1].strip()
            header = lines[i + 1].strip()
            x_name = header.split()[0]
            # "cuBLAS (runtime(ms))": a name and its unit in parentheses, which may hold one more pair
            cols = [x_name] + [c.strip() for c in re.findall(r"[^()]+\((?:[^()]|\([^()]*\))*\)", header[len(x_name):])]
            rows = []
            j = i + 2
            while j < len(lines):
                parts = lines[j].split()
                try:
                    vals = [float(x) for x in parts[1:]]
                except ValueError:
                    break
                if len(vals) != len(cols):  # (after the index) x, then one value a column
                    break
                rows.append(vals)
                j += 1
            tables[name] = {"columns": cols[1:], "x_name": cols[0], "rows": rows}
            i = j
            continue
        i += 1
    return tables


def alternated_tables(folder, label, tutorial):
    """A tutorial's own printed tables from processes alternated between the runtimes (p1.kernelc.log,
    p2.triton.log, ...): per point and column, kernelc/Triton of the medians over each runtime's processes (for time
    columns Triton's time over kernelc's), with each runtime's spread (max/min over its processes)."""
    runs = {"kernelc": [], "triton": []}
    for p in sorted(glob.glob(os.path.join(folder, "p*.*.log"))):
        impl = p.rsplit(".", 2)[-2]
        if impl in runs:
            runs[impl].append(printed_tables(p))
    rows = []
    names = set.intersection(*(set(t) for r in runs.values() for t in r)) if all(runs.values()) else set()
    for name in sorted(names):
        ref = runs["kernelc"][0][name]
        is_time = any("ms)" in c or "(ms" in c for c in ref["columns"])
        for ci, col in enumerate(ref["columns"]):
            pts = []
            for ri, row in enumerate(ref["rows"]):
                vals = {impl: [t[name]["rows"][ri][1 + ci] for t in ts] for impl, ts in runs.items()}
                k, t = statistics.median(vals["kernelc"]), statistics.median(vals["triton"])
                pts.append({"x": row[0], "ratio": (t / k) if is_time else (k / t), "kernelc": vals["kernelc"],
                            "triton": vals["triton"],
                            "spread": max(max(v) / min(v) for v in vals.values())})
            control = not col.lower().startswith("triton")
            rows.append({"tutorial": tutorial, "table": name, "column": col, "control": control,
                         "x": [q["x"] for q in pts], "ratio": [q["ratio"] for q in pts],
                         "spread": [q["spread"] for q in pts], "points": pts,
                         "processes": {k_: len(v) for k_, v in runs.items()}, "call": label,
                         "source": os.path.relpath(folder, ROOT)})
    return rows


def _case_tutorial(case):
    return {"g08": "08-grouped-gemm", "v01": "01-vector-add", "m03": "03-matrix-multiplication",
            "l05": "05-layer-norm"}.get(case[:3], "06-fused-attention")


def _case_name(case):
    kind, *a = case.split(":")
    if kind == "a06":
        return (f"d{a[0]} fwd {'fp8' if a[2] == '1' else 'fp16'} {'causal' if a[1] == '1' else 'non-causal'}, "
                f"N_CTX {a[3]}, config {a[4]}")
    if kind == "b06":
        return f"d{a[0]} bwd (fp16, causal kernel; forward {'causal' if a[1] == '1' else 'non-causal'}), N_CTX {a[2]}"
    if kind == "sdpa":
        return f"control: torch SDPA fp16 d{a[0]} {'causal' if a[1] == '1' else 'non-causal'}, N_CTX {a[2]}"
    if kind == "v01":
        return f"N={a[0]} elements, {a[1]}{' (control)' if a[1] == 'torch' else ''}"
    if kind == "g08":
        held = f", held to {a[2]}" if len(a) > 2 else ""
        return f"small table N={a[0]}, {a[1]}{' (control)' if a[1] == 'cublas' else ''}{held}"
    if kind == "m03":
        how = {"tuned": "its autotuner tuning in each process", "cublas": "cuBLAS (control)"}.get(a[2], f"held to {a[2]}")
        return f"{a[1]} M=N=K={a[0]}, {how}"
    if kind == "l05":
        return f"backward 4096 x {a[0]} fp16, {a[1]}{' (control)' if a[1] == 'torch' else ''}"
    return case


# table point (tutorial, plot_name fragment, column fragment, x) -> the focused measurement that re-measured it
# (its "case", or its "point" for rows without one); a table point they cover takes the focused ratio
COVERS = [
    (("06", "d128-fwd-causal=False-warp_specialize=False", "[FP16]", 1024), "a06:128:0:0:1024:64x64x3x4"),
    (("06", "d128-fwd-causal=False-warp_specialize=False", "[FP8]", 1024), "a06:128:0:1:1024:64x64x3x4"),
    # 3.6's backward is the causal kernel whatever the table says, and the fp8 provider's backward is fp16
    (("06", "d64-bwd-causal=True", "[FP16]", 1024), "b06:64:1:1024:64x64x3x4"),
    (("06", "d64-bwd-causal=True", "[FP8]", 1024), "b06:64:1:1024:64x64x3x4"),
    (("06", "d64-bwd-causal=False", "[FP16]", 1024), "b06:64:1:1024:64x64x3x4"),
    (("06", "d64-bwd-causal=False", "[FP8]", 1024), "b06:64:1:1024:64x64x3x4"),
    (("06", "d64-bwd-causal=True", "[FP16]", 2048), "d64 bwd (fp16, causal kernel), N_CTX 2048"),
    (("06", "d64-bwd-causal=True", "[FP8]", 2048), "d64 bwd (fp16, causal kernel), N_CTX 2048"),
    (("06", "d64-bwd-causal=False", "[FP16]", 2048), "d64 bwd (fp16, causal kernel), N_CTX 2048"),
    (("06", "d64-bwd-causal=False", "[FP8]", 2048), "d64 bwd (fp16, causal kernel), N_CTX 2048"),
    # the non-causal fp8 d128 point at 2048 reuses the causal table's pick (the autotune key leaves out the mask):
    # at a fixed config, kernelc's kernel is the faster one at both picks (R3); which pick Triton takes is a near-tie
    # kept as read, with the fixed-config readings beside it (PICK_DEPENDENT)
    (("06", "d128-fwd-causal=True-warp_specialize=False", "[FP8]", 2048), "a06:128:1:1:2048:128x64x3x4"),
    (("09", "matmul", "descriptor_persistent_ws", None), ("b2b09:matmul_kernel_descriptor_persistent_ws", "ws09")),
    # session 23 R2: back to back (the tutorial's loop) and flushed, each runtime at its own pick (the "[" keeps
    # matmul_kernel_tma from matching matmul_kernel_tma_persistent)
    (("09", "matmul", "matmul_kernel_tma_persistent [", None), "b2b09:matmul_kernel_tma_persistent"),
    (("09", "matmul", "matmul_kernel_tma [", None), "b2b09:matmul_kernel_tma"),
    (("09", "matmul", "matmul_kernel_descriptor_persistent [", None), "b2b09:matmul_kernel_descriptor_persistent"),
    (("01", "vector-add", "Triton", 4096), "v01:4096:triton"),
    # session 22: the S21 suite's launch-bound points ("=": the whole table name, 08's other table has an x of 1024 too)
    (("02", "softmax-performance", "Triton", 256), "s02:256:triton"),
    # (a tuple: any of these cases; session 23 timed the d64 causal forward through the tutorial's own autotuner in R1,
    # at the config both autotuners took in R2)
    (("06", "d64-fwd-causal=True-warp_specialize=False", "[FP8]", 2048),
     ("a06:64:1:1:2048:64x64x3x4", "a06:64:1:1:2048:tuned")),
    (("06", "d64-fwd-causal=True-warp_specialize=False", "[FP16]", 2048),
     ("a06:64:1:0:2048:64x64x3x4", "a06:64:1:0:2048:tuned")),
    (("08", "=group-gemm-performance", "Triton + TMA", 1024), "g08:1024:triton-tma"),
    (("08", "=group-gemm-performance", "Triton + TMA", 512), "g08:512:triton-tma"),
    # session 24 (R1): the S24 suite's low points; 08 at the config both autotuners took in S24 ("Triton (" leaves out
    # the TMA column)
    (("03", "matmul-performance-fp8", "Triton", "[256.0, 256.0, 256.0]"), "m03:256:fp8:tuned"),
    (("05", "layer-norm-backward", "Triton", 15872.0), "l05:15872:triton"),
    (("05", "layer-norm-backward", "Triton", 6144.0), "l05:6144:triton"),
    (("08", "=group-gemm-performance", "Triton (", 128.0),
     "g08:128:triton:BLOCK_SIZE_M=128/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/NUM_SM=132/w=4/s=3"),
]


def _plot_match(frag, table):
    """A COVERS table fragment: a part of the table's name, or with a leading "=" the whole name."""
    return table == frag[1:] if frag.startswith("=") else frag in table


# points whose reading compares different autotune picks of a near-tie: the table's ratio stays, and the verdict says
# what each runtime's kernel does at one config (the focused rows named here)
PICK_DEPENDENT = {
    ("06", "d128-fwd-causal=False-warp_specialize=False", "[FP8]", 2048):
        ("a06:128:0:1:2048:128x64x3x4", "a06:128:0:1:2048:64x64x3x4", "a06:128:1:1:2048:128x64x3x4",
         "a06:128:1:1:2048:64x64x3x4"),
}


def _pick_note(t, x, focused):
    for (ctut, plot, col, cx), cases in PICK_DEPENDENT.items():
        if ctut == t["tutorial"][:2] and plot in t["table"] and col in t["column"] and cx == x:
            parts = []
            for c in cases:
                hits = [r for r in focused if r.get("case") == c]
                if hits:
                    parts.append(f"{c}: " + ", ".join(f"{h['ratio']:.3f} ({h['call'].split(' (')[0]})" for h in hits))
            return "pick-dependent (the table's key leaves out the mask; the causal table picks): " + "; ".join(parts)
    return None


def _covering(t, x, focused, alternated):
    tut = t["tutorial"][:2]
    for (ctut, plot, col, cx), key in COVERS:
        if ctut == tut and _plot_match(plot, t["table"]) and col in t["column"] and (cx is None or cx == x):
            keys = key if isinstance(key, tuple) else (key,)
            hits = [r for r in focused if r.get("case") in keys or r.get("point") in keys]
            if hits:
                return hits[-1]  # the newest source (rows are appended oldest call first)
    for a in alternated:  # a tutorial's own table re-run in alternated processes covers the same table and column
        if a["tutorial"] == t["tutorial"] and a["table"] == t["table"] and a["column"].split(" (")[0] == \
                t["column"].split(" (")[0] and x in a["x"]:
            i = a["x"].index(x)
            return {"point": f"{a['table']}, {a['column']}, x={x}", "ratio": a["ratio"][i], "spread": a["spread"][i],
                    "call": a["call"], "source": a["source"]}
    return None


ALTERNATED = [  # (folder under tutorial_gaps/results, call label, tutorial whose printed tables its logs hold)
    ("host_gpu_split_s20_R1_h200", "s20 R1 (2026-11-29 ~08:07 UTC, H200; processes kernelc, Triton, Triton, kernelc)",
     "08-grouped-gemm"),
]


# first calls from empty caches measured on their own (host_gpu_split.py --warm-only, one process per runtime with
# fresh cache directories): folder, call label, case -> the kernels its first call compiles
COLD_FIRST_CALLS = [
    ("host_gpu_split_s20_R2_h200", "s20 R2 (H200, empty caches, one process per runtime)",
     {"a06:64:1:0:1024:tuned": "_attn_fwd (tuned: 21 configs; the tutorial's first key)",
      "b06:64:1:1024:tuned": "_attn_bwd_preprocess + _attn_bwd"}),
]


def cold_first_calls():
    rows = []
    for folder, label, names in COLD_FIRST_CALLS:
        got = {}
        for impl in ("kernelc", "triton"):
            p = os.path.join(GAPS, folder, f"cold.{impl}.json")
            if os.path.exists(p):
                got[impl] = json.load(open(p)).get("first_call", {})
        for case, kernel in names.items():
            k, t = got.get("kernelc", {}).get(case), got.get("triton", {}).get(case)
            rows.append({"tutorial": "06-fused-attention", "kernel": kernel, "triton_s": t, "kernelc_s": k,
                         "kernelc_over_triton": (k / t) if (k and t) else None, "call": label,
                         "source": os.path.relpath(os.path.join(GAPS, folder), ROOT)} if (k or t) else None)
    return [r for r in rows if r]


def compat_summary():
    """The summary lines of the computed compatibility table (scripts/triton_compat.py writes docs/triton-compat.md from
    the Triton 3.6 wheel; ``--check`` says whether it is current)."""
    p = os.path.join(ROOT, "docs", "triton-compat.md")
    lines = open(p).read().split("## Summary", 1)[-1].strip().splitlines()
    out = {"source": "docs/triton-compat.md (scripts/triton_compat.py)", "lines": []}
    for ln in lines:
        if not ln.startswith("- "):
            if out["lines"]:
                break
            continue
        out["lines"].append(ln[2:])
    m = re.search(r"`triton.language`: (\d+) of (\d+)", "\n".join(out["lines"]))
    if m:
        out["language_supported"], out["language_total"] = int(m.group(1)), int(m.group(2))
    return out


def build():
    checks, tables, firsts = tutorial_rows()
    firsts += cold_first_calls()
    focused = focused_rows()
    alternated = []
    for folder, label, tut in ALTERNATED:
        d = os.path.join(GAPS, folder)
        if os.path.isdir(d):
            alternated += alternated_tables(d, label, tut)
    points = []
    for t in tables:
        for i, (x, r) in enumerate(zip(t["x"], t["ratio"])):
            cov = _covering(t, x, focused, alternated)
            final = cov["ratio"] if cov else r
            floor = (t.get("noise_per_point") or [None] * len(t["x"]))[i] if t.get("noise_per_point") else None
            pick = _pick_note(t, x, focused)
            if final is None:
                verdict = "no reading"
            elif pick and final < WITHIN:
                verdict = f"below 0.95 with different picks; {pick}"
            elif final >= WITHIN:
                verdict = "within 5% or better"
            elif cov is None and floor and final * floor >= WITHIN:
                verdict = f"below 0.95, inside its control's spread (x{floor:.3f}) in a one-repeat run"
            else:
                verdict = "below 0.95"
            points.append({"tutorial": t["tutorial"], "table": t["table"], "column": t["column"], "x": x,
                           "table_ratio": r, "table_call": t["call"], "ratio": final, "verdict": verdict,
                           "from": (cov["call"] if cov else t["call"]), "re_measured": cov is not None,
                           "re_measured_as": cov.get("case", cov.get("point")) if cov else None})
    below = [q for q in points if q["verdict"] != "within 5% or better"]
    slow_first = [f for f in firsts if f["kernelc_over_triton"] is not None and f["kernelc_over_triton"] > 1.0]
    return {"criterion": f"kernelc/Triton >= {WITHIN} at every point; first call no slower than Triton's; "
                         "the computed compatibility table lists >= 95% of triton.language",
            "compat": compat_summary(),
            "checks": checks, "tables": tables, "first_calls": firsts, "focused": focused,
            "alternated_tables": alternated, "points": points,
            "table_points_below_criterion": below, "first_calls_slower": slow_first}


def markdown(s):
    out = ["| tutorial | checks (Triton / kernelc) | call |", "|---|---|---|"]
    for c in s["checks"]:
        p = c["passed"] or {}
        out.append(f"| {c['tutorial']} | {p.get('triton')} / {p.get('kernelc')} | {c['call']} |")
    out += ["", "| tutorial | table, column | kernelc/Triton per point | geomean | noise floor | call |",
            "|---|---|---|---:|---:|---|"]
    for t in s["tables"]:
        pts = ", ".join(f"{r:.3f}" if r is not None else "-" for r in t["ratio"])
        nf = f"x{t['noise_floor']:.3f}" if t["noise_floor"] else "none"
        out.append(f"| {t['tutorial'][:2]} | {t['table']}, {t['column']} | {pts} | {t['geomean']:.3f} | {nf} | "
                   f"{t['call'].split(' (')[0]} |")
    out += ["", "| tutorial | kernel | first call Triton / kernelc (s) | call |", "|---|---|---|---|"]
    for f in s["first_calls"]:
        tr = f"{f['triton_s']:.2f}" if f["triton_s"] is not None else "-"
        kc = f"{f['kernelc_s']:.2f}" if f["kernelc_s"] is not None else "-"
        out.append(f"| {f['tutorial'][:2]} | {f['kernel']} | {tr} / {kc} | {f['call'].split(' (')[0]} |")
    if s["focused"]:
        out += ["", "| tutorial | point | kernelc/Triton (do_bench) | GPU only | host | spread | call |",
                "|---|---|---:|---:|---:|---:|---|"]
        for r in s["focused"]:
            g = f"{r['ratio_gpu']:.3f}" if "ratio_gpu" in r else "-"
            h = f"{r['ratio_host']:.3f}" if "ratio_host" in r else "-"
            sp = f"x{r['spread']:.3f}" if "spread" in r else "-"
            out.append(f"| {r['tutorial'][:2]} | {r['point']} | {r['ratio']:.3f} | {g} | {h} | {sp} | "
                       f"{r['call'].split(' (')[0]} |")
    if s.get("alternated_tables"):
        out += ["", "| tutorial | table, column | kernelc/Triton per point (medians) | spread (worst runtime) | call |",
                "|---|---|---|---|---|"]
        for t in s["alternated_tables"]:
            pts = ", ".join(f"{r:.3f}" for r in t["ratio"])
            sp = ", ".join(f"x{r:.3f}" for r in t["spread"])
            out.append(f"| {t['tutorial'][:2]} | {t['table']}, {t['column']}{' (control)' if t['control'] else ''} | "
                       f"{pts} | {sp} | {t['call'].split(' (')[0]} |")
    return "\n".join(out) + "\n"


def compact_markdown(s):
    """One row per tutorial and benchmark table: its points after re-measurement (lowest first named), first calls."""
    out = ["| tutorial | checks (Triton / kernelc) | table: kernelc/Triton, lowest point (all points) | readings from | "
           "first calls Triton / kernelc (s) |", "|---|---|---|---|---|"]
    checks = {c["tutorial"]: c for c in s["checks"]}
    for tut in PLAN:
        p = checks[tut]["passed"] or {}
        pts = [q for q in s["points"] if q["tutorial"] == tut]
        by_table = {}
        for q in pts:
            by_table.setdefault((q["table"], q["column"]), []).append(q)
        cells = []
        calls = set()
        for (table, col), qs in by_table.items():
            low = min(qs, key=lambda q: q["ratio"] if q["ratio"] is not None else 9)
            short = (table.replace("fused-attention-batch4-head32-", "").replace("-warp_specialize=", " ws=")
                     .replace("profile matmul.hatchet", "") + " " + col.split(" (")[0].split(" [M=")[0]).strip()
            mark = "" if low["verdict"] == "within 5% or better" else " **(below)**"
            cells.append(f"{short}: {low['ratio']:.3f} at {low['x']:g}{mark} ({len(qs)})" if isinstance(low["x"], float)
                         else f"{short}: {low['ratio']:.3f}{mark} ({len(qs)})")
            calls |= {q["from"].split(" (")[0] for q in qs}
        fc = [f for f in s["first_calls"] if f["tutorial"] == tut]
        fcs = "; ".join(f"{f['kernel'].split(' (')[0]} {f['triton_s']:.2f} / {f['kernelc_s']:.2f} ({f['call'].split(' (')[0]})"
                        for f in fc if f["triton_s"] is not None and f["kernelc_s"] is not None)
        out.append(f"| {tut} | {p.get('triton')} / {p.get('kernelc')} ({checks[tut]['call'].split(' (')[0]}) | "
                   f"{'<br>'.join(cells) or 'no table'} | {', '.join(sorted(calls)) or '-'} | {fcs} |")
    c = s["compat"]
    out += ["", "Compatibility table (computed): " + "; ".join(c["lines"]) + "."]
    return "\n".join(out) + "\n"


# -- the table from one whole-suite run --------------------------------------------------------------------------

EARLIER = os.path.join(RES, "triton_tutorials_status_s20.json")


def _verdict(r, floor):
    if r is None:
        return "no reading"
    if r >= WITHIN:
        return "within 5% or better"
    if floor and r * floor >= WITHIN:
        return f"below 0.95, inside its control's spread (x{floor:.3f})"
    return "below 0.95"


def _xkey(x):
    x = x[0] if isinstance(x, list) and len(x) == 1 else x
    return float(x) if isinstance(x, (int, float)) else str(x)


def _read_run(path):
    if path.endswith(".gz"):  # (scripts/compact_results.py gzips big results)
        import gzip
        with gzip.open(path, "rt") as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


def _run_spec(spec):
    """``LABEL=PATH`` or ``PATH`` (labelled by its file name) -> (label, path)."""
    label, sep, path = spec.partition("=")
    if sep and not os.path.exists(spec):
        return label, path
    return os.path.basename(spec), spec


def one_run(run_path, earlier_path=EARLIER):
    """The status from runs of ``bench/triton_tutorials.py``; ``earlier``: the same point's or kernel's reading in an
    earlier status JSON (``build``'s), beside it for reference.

    ``run_path``: one run's file, or a list of them (``LABEL=PATH`` or ``PATH``), oldest first. Each tutorial's row
    then comes whole (checks, tables, first calls) from the latest run that measured it, and names that run
    (``run`` in every row): a tutorial re-run alone, or skipped by a suite's deadline and run in a call of its own,
    replaces its row without mixing readings of two runs in one row."""
    specs = [run_path] if isinstance(run_path, str) else list(run_path)
    runs = [(lab, p, _read_run(p)) for lab, p in map(_run_spec, specs)]
    label = runs[-1][0]
    early = json.load(open(earlier_path)) if earlier_path and os.path.exists(earlier_path) else {}
    e_pts = {(q["tutorial"], q["table"], q["column"], _xkey(q["x"])): q for q in early.get("points", [])}
    # an earlier status made by ``build`` names each reading's call; one made from a single run (``one_run``) names
    # the run
    e_run = os.path.basename(early.get("run") or "") or "earlier run"
    e_fc = {}
    for f in early.get("first_calls", []):
        e_fc.setdefault((f["tutorial"], f["kernel"].split(" (")[0]), f)
    checks, points, firsts, missing = [], [], [], []
    focused = focused_rows()
    for tut in PLAN:
        # the latest run that measured it (checks passed or not); else why the latest run that names it did not
        src = next(((lab, r) for lab, _, r in reversed(runs) if "passed" in r.get("tutorials", {}).get(tut, {})),
                   None)
        if src is None:
            t = next((r["tutorials"][tut] for _, _, r in reversed(runs) if r.get("tutorials", {}).get(tut)), None)
            missing.append({"tutorial": tut, "why": (t or {}).get("skipped") or (t or {}).get("error")
                            or ("partial" if t and "partial" in t else "not in the run")})
            continue
        rlab, run = src
        t = run["tutorials"][tut]
        checks.append({"tutorial": tut, "passed": t["passed"], "caches": t.get("caches"), "points": t.get("points"),
                       "run": rlab})
        for tb in t.get("tables", []):
            if "error" in tb:
                points.append({"tutorial": tut, "table": tb["plot_name"], "column": None, "x": None, "ratio": None,
                               "verdict": "no reading: " + tb["error"], "run": rlab})
                continue
            floor = tb.get("noise_floor", {}) or {}
            controls = floor.get("control_columns") or []
            per = floor.get("per_point") or []
            for col, v in tb["columns"].items():
                if col in controls or not col.lower().startswith("triton") and "matmul" not in col:
                    continue
                for i, (x, r) in enumerate(zip(v["x"], v["ratio"])):
                    fl = per[i] if i < len(per) else None
                    e = e_pts.get((tut, tb["plot_name"], col, _xkey(x)))
                    q = {"tutorial": tut, "table": tb["plot_name"], "column": col, "x": _xkey(x),
                         "ratio": r, "noise_floor": fl, "verdict": _verdict(r, fl),
                         "earlier": e["ratio"] if e else None,
                         "earlier_from": (e.get("from") or e_run).split(" (")[0] if e else None, "run": rlab}
                    if (v.get("repeats") or [0] * (i + 1))[i] > 1:  # a run with repeats: medians, every pairing
                        q.update(median_ratio=v["median_ratio"][i], pair_range=v["pair_range"][i],
                                 pair_verdict=v["pair_verdict"][i], repeats=v["repeats"][i])
                        q["control_pair_spread"] = _control_pair_spread(tb, controls, i)
                    # a focused re-measurement of the same call (processes alternated, repeats, GPU time apart), for
                    # reference beside this run's reading; it does not replace it
                    cov = _covering(q, _xkey(x), [f for f in focused if f.get("case")], [])
                    if cov:
                        q["re_measured"] = {k: cov[k] for k in ("case", "ratio", "ratio_gpu", "ratio_host", "spread",
                                                                  "call", "source", "labels", "range", "spread_verdict")
                                            if k in cov}
                    points.append(q)
        cold = {f["kernel"]: f for f in t.get("first_calls_cold") or []}
        # (runs before session 21 did not say; a tutorial with a dry run was measured from warm caches)
        run_caches = t.get("caches") or ("warm" if tut in (run.get("warm") or {}) else "cold")
        for f in t.get("first_calls", []):
            src = cold.pop(f["kernel"], None)
            caches = run_caches
            if src is not None:
                f, caches = src, "cold (a run stopped after it)"
            e = e_fc.get((tut, f["kernel"]))
            firsts.append({"tutorial": tut, "kernel": f["kernel"], "triton_s": f.get("triton_s"),
                           "kernelc_s": f.get("kernelc_s"), "kernelc_over_triton": f.get("kernelc_over_triton"),
                           "caches": caches, "earlier": (e["triton_s"], e["kernelc_s"]) if e else None,
                           "earlier_from": (e.get("call") or e_run).split(" (")[0] if e else None, "run": rlab})
        for f in cold.values():
            firsts.append(dict(f, tutorial=tut, caches="cold (a run stopped after it)", earlier=None, earlier_from=None,
                               run=rlab))
    below = [q for q in points if q["verdict"] != "within 5% or better"]
    on_medians = medians_summary(points)
    slow = [f for f in firsts if f.get("kernelc_over_triton") and f["kernelc_over_triton"] > 1.0
            and f["caches"].startswith("cold")]
    rel = lambda p: os.path.relpath(os.path.abspath(p), ROOT) if os.path.abspath(p).startswith(ROOT) else p  # noqa
    last = runs[-1][2]
    return {"criterion": f"kernelc/Triton >= {WITHIN} at every point; first call no slower than Triton's",
            "run": rel(runs[-1][1]) if len(runs) == 1 else label,
            "runs": [{"label": lab, "path": rel(p), "environment": r.get("environment"), "seconds": r.get("seconds"),
                      "suite": r.get("suite")} for lab, p, r in runs],
            "environment": last.get("environment"), "seconds": last.get("seconds"), "suite": last.get("suite"),
            "earlier": os.path.relpath(earlier_path, ROOT) if early else None,
            "checks": checks, "points": points, "first_calls": firsts, "missing": missing,
            "table_points_below_criterion": below, "on_medians": on_medians, "first_calls_slower": slow}


def _control_pair_spread(tb, controls, i):
    """The largest factor from 1 over the table's control columns' pairings at point ``i`` (the same torch or
    cuBLAS code in the kernelc and the Triton processes, every repeat paired with every other), or None."""
    out = None
    for c in controls:
        pr = (tb["columns"].get(c, {}).get("pair_range") or [])
        if i < len(pr) and pr[i] and all(pr[i]):
            f = max(pr[i][1], 1 / pr[i][0], pr[i][0], 1 / pr[i][1])
            out = f if out is None else max(out, f)
    return out


def medians_summary(points):
    """Issue 20's criterion read on the median of each point's repeats in its call (a point read once: that one
    reading), per point (``median_verdict`` is written into each point) and overall; and every point where a single
    pairing of one Triton repeat with one kernelc repeat reads below 0.95, with its control's spreads."""
    rows, singles = [], []
    for q in points:
        m = q.get("median_ratio") if q.get("median_ratio") is not None else q.get("ratio")
        q["median_verdict"] = ("no reading" if m is None else "within 5% or better" if m >= WITHIN else "below 0.95")
        if m is None:
            continue
        rows.append((m, q))
        low = q["pair_range"][0] if q.get("pair_range") else m
        if low < WITHIN:
            rm = q.get("re_measured") or {}
            singles.append({"tutorial": q["tutorial"], "table": q["table"], "column": q["column"], "x": q["x"],
                            "median": m, "repeats": q.get("repeats", 1), "pairings": q.get("pair_range"),
                            "control_table_spread_point": q.get("noise_floor"),
                            "control_pair_spread": q.get("control_pair_spread"),
                            "re_measured_gpu_only": rm.get("ratio_gpu"), "re_measured_call": rm.get("call"),
                            "run": q["run"]})
    rows.sort(key=lambda t: t[0])
    pick = lambda m, q: {"tutorial": q["tutorial"], "table": q["table"], "column": q["column"], "x": q["x"],  # noqa
                         "median": m, "repeats": q.get("repeats", 1), "pairings": q.get("pair_range"), "run": q["run"]}
    return {"criterion": f"per point, the median of the call's repeats (one repeat: its reading) >= {WITHIN}",
            "points": len(rows), "met": all(m >= WITHIN for m, _ in rows),
            "below": [pick(m, q) for m, q in rows if m < WITHIN], "lowest": [pick(m, q) for m, q in rows[:5]],
            "single_readings_below": singles}


def medians_markdown(s):
    """The per-point table of medians and the overall line (``one_run``'s ``on_medians``)."""
    om = s.get("on_medians")
    if not om:
        return ""
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    out = ["", f"Criterion on medians ({om['criterion']}): **{'met' if om['met'] else 'not met'}** at "
           f"{om['points']} points; lowest: " + "; ".join(
               f"{q['tutorial'][:2]} {_short(q['table'], q['column'])}{_at(q['x'])} {q['median']:.3f} "
               f"({q['repeats']} repeat{'s' if q['repeats'] > 1 else ''}, {q['run']})" for q in om["lowest"]) + ".",
           "", "Single pairings below 0.95 (one Triton repeat against one kernelc repeat), with the controls' spreads "
           "(the table's control column: its reading at that point, and its own pairings):", "",
           "| tutorial | table, column | x | median (repeats) | pairings | control at the point | control pairings | "
           "GPU-only re-measurement |", "|---|---|---|---|---|---|---|---|"]
    for q in om["single_readings_below"]:
        pr = q["pairings"]
        rm = (f"{q['re_measured_gpu_only']:.3f} ({q['re_measured_call'].split(' (')[0]})"
              if q.get("re_measured_gpu_only") is not None else "-")
        out.append(f"| {q['tutorial'][:2]} | {_short(q['table'], q['column'])} | {_at(q['x']).strip(' at') or '-'} | "
                   f"{q['median']:.3f} ({q['repeats']}) | {f'[{pr[0]:.3f}, {pr[1]:.3f}]' if pr else '-'} | "
                   f"x{fmt(q['control_table_spread_point'])} | x{fmt(q['control_pair_spread'])} | {rm} |")
    out += ["", "| tutorial | table, column | x | table reading | median (repeats) | pairings | verdict on the median |",
            "|---|---|---|---|---|---|---|"]
    for q in s["points"]:
        if q.get("ratio") is None:
            continue
        pr = q.get("pair_range")
        out.append(f"| {q['tutorial'][:2]} [{q['run']}] | {_short(q['table'], q['column'])} | "
                   f"{_at(q['x']).strip(' at') or '-'} | {q['ratio']:.3f} | "
                   f"{fmt(q.get('median_ratio'))} ({q.get('repeats', 1)}) | "
                   f"{f'[{pr[0]:.3f}, {pr[1]:.3f}]' if pr else '-'} | {q['median_verdict']} |")
    return "\n".join(out) + "\n"


def _short(table, col):
    return (table.replace("fused-attention-batch4-head32-", "").replace("-warp_specialize=", " ws=")
            .replace("profile matmul.hatchet", "") + " " + (col or "").split(" (")[0].split(" [M=")[0]).strip()


def _at(x):
    if isinstance(x, str) and x.startswith("["):   # _xkey's key for a point of several values
        try:
            x = json.loads(x)
        except ValueError:
            return ""
    if isinstance(x, list) and x and len(set(x)) == 1:   # 03's points: M = N = K
        x = x[0]
    if isinstance(x, (int, float)):
        return f" at {int(x)}" if float(x).is_integer() else f" at {x:g}"
    return ""


def one_run_markdown(s):
    """One row per tutorial: checks, per table the lowest point of this run (and the earlier reading of that
    point), first calls."""
    out = ["| tutorial | checks (Triton / kernelc) | table: kernelc/Triton, lowest point (points) [earlier reading] | "
           "first calls Triton / kernelc (s) |", "|---|---|---|---|"]
    checks = {c["tutorial"]: c for c in s["checks"]}
    for tut in PLAN:
        if tut not in checks:
            why = next((m["why"] for m in s["missing"] if m["tutorial"] == tut), "?")
            out.append(f"| {tut} | not run ({why}) | | |")
            continue
        p = checks[tut]["passed"] or {}
        by_table = {}
        for q in s["points"]:
            if q["tutorial"] == tut:
                by_table.setdefault((q["table"], q["column"]), []).append(q)
        cells = []
        for (table, col), qs in by_table.items():
            rated = [q for q in qs if q["ratio"] is not None]
            if not rated:
                cells.append(f"{table}: {qs[0]['verdict']}")
                continue
            low = min(rated, key=lambda q: q["ratio"])
            short = (table.replace("fused-attention-batch4-head32-", "").replace("-warp_specialize=", " ws=")
                     .replace("profile matmul.hatchet", "") + " " + (col or "").split(" (")[0].split(" [M=")[0]).strip()
            mark = "" if low["verdict"] == "within 5% or better" else f" **({low['verdict']})**"
            at = f" at {low['x']:g}" if isinstance(low["x"], float) else ""
            ear = f" [{low['earlier']:.3f}, {low['earlier_from']}]" if low.get("earlier") else ""
            rm = low.get("re_measured")
            if rm and low["verdict"] != "within 5% or better":
                lab = rm.get("labels") or ["do_bench", "GPU only"]
                gpu = f", {lab[1]} {rm['ratio_gpu']:.3f}" if rm.get("ratio_gpu") is not None else ""
                sv = rm.get("spread_verdict")
                rng = (f" [{rm['range']['ms'][0]:.3f}, {rm['range']['ms'][1]:.3f}]: {sv['ms']}; GPU only "
                       f"[{rm['range']['busy_ms'][0]:.3f}, {rm['range']['busy_ms'][1]:.3f}]: {sv['busy_ms']}"
                       if sv else "")
                ear += f" {{re-measured: {lab[0]} {rm['ratio']:.3f}{gpu}, {rm['call'].split(' (')[0]}{rng}}}"
            if low.get("pair_verdict"):
                ear += (f" {{median of {low['repeats']} repeats {low['median_ratio']:.3f}, pairings "
                        f"[{low['pair_range'][0]:.3f}, {low['pair_range'][1]:.3f}]: {low['pair_verdict']}}}")
            cells.append(f"{short}: {low['ratio']:.3f}{at}{mark} ({len(qs)}){ear}")
        sec = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
        fcs = "; ".join(f"{f['kernel']} {sec(f['triton_s'])} / {sec(f['kernelc_s'])}"
                        + ("" if f["caches"].startswith("cold") else " (warm caches)")
                        for f in s["first_calls"] if f["tutorial"] == tut)
        name = tut + (f" [{checks[tut]['run']}]" if len(s.get("runs") or []) > 1 else "")
        out.append(f"| {name} | {p.get('triton')} / {p.get('kernelc')} | {'<br>'.join(cells) or 'no table'} | {fcs} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--compact", action="store_true", help="one row per tutorial (the docs' status table)")
    ap.add_argument("--run", action="append",
                    help="the table from this whole-suite run (bench/triton_tutorials.py --suite); repeatable, oldest "
                         "first, as LABEL=PATH or PATH: each tutorial's row from the latest run that measured it")
    ap.add_argument("--earlier", default=EARLIER, help="with --run: an earlier status JSON, for the reference column")
    args = ap.parse_args(argv)
    if args.run:
        s = one_run(args.run, args.earlier)
        md = one_run_markdown(s) + medians_markdown(s)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(s, f, indent=1)
        if args.md:
            with open(args.md, "w") as f:
                f.write(md)
        print(md)
        print(f"{len(s['table_points_below_criterion'])} table points below {WITHIN}; "
              f"{len(s['first_calls_slower'])} first calls from empty caches slower than Triton's; "
              f"not run: {', '.join(m['tutorial'][:2] for m in s['missing']) or 'none'}")
        om = s["on_medians"]
        print(f"on medians of repeats: {'met' if om['met'] else 'not met'} at {om['points']} points "
              f"({len(om['below'])} below {WITHIN}); {len(om['single_readings_below'])} points with a single pairing "
              f"below {WITHIN}")
        return 0
    s = build()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=1)
    md = compact_markdown(s) if args.compact else markdown(s)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    print(md)
    print(f"{len(s['table_points_below_criterion'])} table points below {WITHIN}; "
          f"{len(s['first_calls_slower'])} first calls slower than Triton's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
