"""Recall and precision of the analyzer on a corpus of kernels: static on the CPU, measured on the GPU.

    python bench/bench_analyzer_corpus.py [--json-name analyzer_corpus_cpu]      # CPU, static
    python bench/bench_analyzer_corpus.py --gpu [--only NAME,...] [--groups G,...]  # GPU, PC samples
    python bench/bench_analyzer_corpus.py --gpu --dry-run   # the GPU bench's pipeline on the CPU interpreter

The ``--gpu`` mode (section "GPU" below, and docs/analyzer-gpu.md) launches every case at a hot size in
one child process per mode (``python -m kprof -m pcsampling``, then plain ``python -m kprof`` timing),
each case in its own ``profiler.scope``; then analyses each case's kernels and scores them.
Results: bench/results/analyzer_corpus_gpu.json.

Problems (each with the diagnosis id it must get, and the line where the case names one):

* the planted kernels of ``tests/analyzer/planted.py`` (id only: their cases name no line);
* the memory-access corpus of ``tests/analyzer/corpus.py`` (id and line, ``#: expect``);
* issue #22's matmuls: fp16 4096^3 with the 128x64x32 config of a two-config autotune list and with a
  single 32x32x32 config (``small-tiles`` on the dot line);
* ``corpus.compile_only_problems()``: fp8 upcast (K=16), fp8 row-major B, a 64x512 tile on one warp
  (spills), 8 programs of a 2-D copy, a 512-column softmax on 32 warps (id only).

Clean kernels (must raise no warning or error): ``planted.well_tuned()`` (examples/kernels) and the
corpus cases whose ``expected`` is None.

Counts: ``recall`` = problems whose expected id (and line, where named) is among the findings;
``precision_clean`` = 1 - false alarms on clean kernels / all findings on clean kernels and true hits;
``precision_strict`` also counts every other finding on a problem kernel as a false positive (some are
real secondary problems: each is listed in the rows).  Results: bench/results/analyzer_corpus_cpu.json.

The GPU run of the same corpus (with samples) is ``--gpu``; ``bench/bench_analyzer.py`` also times the
planted kernels' suggested configs on the GPU.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import write_results  # noqa: E402

N4K = 4096


def _rows():
    import kernelc
    import analyzer
    from analyzer.facts import facts_from_compiled
    from tests.analyzer.corpus import MM_DIV, MM_SIG, cases, mm
    from tests.analyzer.helpers import grid_of
    from tests.analyzer.planted import PLANTED, well_tuned

    def analyse_ck(ck, grid, function=None, arg_values=None):
        facts = facts_from_compiled(ck, grid=grid, function=function)
        if arg_values:
            facts.arg_values = dict(arg_values)
        return analyzer.analyze_facts(facts, validate=False)

    items = []
    for p in PLANTED:
        items.append(("planted", p.name, p.expected, None, lambda p=p: analyse_ck(p.compile(), grid_of(p))))
    for c in cases():
        items.append(("corpus", c.name, c.expected, c.expected_line if c.expected else None,
                      lambda c=c: analyse_ck(c.compile(), c.grid, arg_values=c.scalar_args())))
    dot_line = next(i for i, t in enumerate(open(mm.fn.__code__.co_filename).read().splitlines(), 1)
                    if "#: expect" in t and "kl.dot" in t)
    for label, cfg in (("mm_autotuned_128x64x32", (128, 64, 32)), ("mm_single_32x32x32", (32, 32, 32))):
        def run(cfg=cfg):
            bm, bn, bk = cfg
            ck = kernelc.compile(mm, signature=MM_SIG, constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
                                 target="sm_90a", num_warps=4, num_stages=3, divisibility=MM_DIV)
            return analyse_ck(ck, (N4K // bm) * (N4K // bn), mm, {"M": N4K, "N": N4K, "K": N4K})
        items.append(("issue22", label, "small-tiles", dot_line, run))
    from tests.analyzer.corpus import compile_only_problems
    for name, expected, comp, grid, av, fn in compile_only_problems():
        items.append(("more", name, expected, None,
                      lambda comp=comp, grid=grid, av=av, fn=fn: analyse_ck(comp(), grid, fn, av)))
    for w in well_tuned():
        items.append(("well_tuned", w.name, None, None, lambda w=w: analyse_ck(w.compile(), w.grid)))

    rows = []
    for group, name, expected, line, fn in items:
        t0 = time.perf_counter()
        try:
            k = fn()
            findings = [(d.id, d.line) for d in k.findings]
            reported = [(d.id, d.line) for d in k.diagnostics]   # infos too (layout-conversion is one)
            err = None
        except Exception as e:  # a case that fails to analyse counts as a miss, with its error
            findings, reported, err = [], [], f"{type(e).__name__}: {e}"
        hit = bool(expected) and any(i == expected and (line is None or ln == line) for i, ln in reported)
        other = [f for f in findings if not (f[0] == expected and (line is None or f[1] == line))]
        rows.append({"group": group, "case": name, "expected": expected, "expected_line": line,
                     "found": hit if expected else None, "findings": [f"{i}@{ln}" for i, ln in findings],
                     "other_findings": len(other), "error": err, "seconds": round(time.perf_counter() - t0, 2)})
        print(f"{group:10s} {name:28s} expected={expected or '-':20s} hit={hit if expected else '-'} "
              f"findings={rows[-1]['findings']}", flush=True)
    return rows


def summary(rows):
    problems = [r for r in rows if r["expected"]]
    clean = [r for r in rows if not r["expected"]]
    tp = sum(1 for r in problems if r["found"])
    fp_clean = sum(len(r["findings"]) for r in clean)
    fp_strict = fp_clean + sum(r["other_findings"] for r in problems)
    return {"problems": len(problems), "clean_kernels": len(clean), "true_positives": tp,
            "recall": round(tp / len(problems), 4) if problems else None,
            "false_alarms_on_clean": fp_clean,
            "precision_clean": round(tp / (tp + fp_clean), 4) if tp + fp_clean else None,
            "precision_strict": round(tp / (tp + fp_strict), 4) if tp + fp_strict else None,
            "missed": [r["case"] for r in problems if not r["found"]],
            "false_alarm_kernels": [r["case"] for r in clean if r["findings"]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json-name", default=None, help="results name (default analyzer_corpus_cpu, with --gpu "
                    "analyzer_corpus_gpu, with --dry-run analyzer_corpus_gpu_dryrun)")
    ap.add_argument("--gpu", action="store_true", help="profile the corpus on the GPU (PC samples and timing)")
    ap.add_argument("--dry-run", action="store_true", help="with --gpu: small sizes in the CPU interpreter "
                    "(kprof's cpu backend, no samples; analysed for sm_90a)")
    ap.add_argument("--only", default="", help="comma-separated case names (--gpu)")
    ap.add_argument("--groups", default="", help="comma-separated groups: planted, corpus, issue22, more, "
                    "well_tuned, unseen (--gpu; default all)")
    ap.add_argument("--modes", default="pcsampling,timing", help="--gpu profiling modes (default both)")
    ap.add_argument("--launches", type=int, default=3, help="launches of each case per mode (--gpu)")
    ap.add_argument("--jobs", type=int, default=0, help="analysis processes (--gpu; default min(8, cores))")
    ap.add_argument("--child-timeout", type=float, default=200.0, help="seconds for each profiled child (--gpu)")
    ap.add_argument("--keep", metavar="DIR", help="--gpu: write the profiles to DIR (default a temporary folder)")
    ap.add_argument("--workload", metavar="STATUS_JSON", help=argparse.SUPPRESS)   # the child under kprof
    args = ap.parse_args(argv)
    if args.workload:
        return workload(args)
    if args.gpu:
        return gpu_main(args)
    args.json_name = args.json_name or "analyzer_corpus_cpu"
    t0 = time.perf_counter()
    rows = _rows()
    s = summary(rows)
    s["wall_s"] = round(time.perf_counter() - t0, 1)
    s["mode"] = "cpu static (no samples)"
    print(s)
    write_results(args.json_name, rows, {"summary": s})
    return 0


# ------------------------------------------------------------------------------------------------
# GPU: the corpus with PC samples (``--gpu``)

NEAR_PEAK = 0.70        # an unseen kernel at >= 70% of its roofline bound's peak must raise nothing
SCOPE = "case:"


def split_names(text: str):
    """Comma-separated case names; a comma inside parentheses belongs to the name (``ex_permute(0,2,1)_...``:
    splitting it there made the H100 run of 2026-11-25 profile nothing)."""
    return [n.strip() for n in re.split(r",(?![^()]*\))", text) if n.strip()]


def _selected(args):
    from tests.analyzer.corpus_gpu import gpu_cases
    groups = [g for g in args.groups.split(",") if g]
    only = split_names(args.only)
    cs = gpu_cases(groups or None)
    if only:
        unknown = sorted(set(only) - {c.name for c in cs})
        if unknown:
            raise SystemExit(f"bench_analyzer_corpus: unknown case(s) {', '.join(unknown)}")
        cs = [c for c in cs if c.name in only]
    if args.dry_run:
        cs = [c for c in cs if c.small_ok]
    return cs


def workload(args) -> int:
    """The child process kprof profiles: each case in its own scope, ``--launches`` launches each; a
    case that fails is recorded in the status file (and the others still run)."""
    import json
    import torch
    import profiler
    device = "cpu" if args.dry_run else "cuda"
    status = {}
    for c in _selected(args):
        t0 = time.perf_counter()
        launch = None
        try:
            launch = c.build(device, small=args.dry_run)
            with profiler.scope(SCOPE + c.name):
                for _ in range(args.launches):
                    launch()
                if device == "cuda":
                    torch.cuda.synchronize()
            status[c.name] = {"ok": True, "seconds": round(time.perf_counter() - t0, 2)}
        except Exception as e:
            status[c.name] = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        del launch
        print(f"workload {c.name:34s} {status[c.name]}", flush=True)
    with open(args.workload, "w") as f:
        json.dump(status, f)
    return 0


def split_profile(path, out_dir):
    """{case: path of a profile holding only that case's scope} (``kprof-analyze`` groups kernels by
    name and cache key, so one kernel config launched by two cases would otherwise merge)."""
    from profiler.format import ProfileNode, read_profile, write_profile
    root, dinfo = read_profile(path)
    out = {}
    for ch in root.children:
        if not ch.name.startswith(SCOPE):
            continue
        case = ch.name[len(SCOPE):]
        r = ProfileNode("ROOT")
        r.children.append(ch)
        p = os.path.join(out_dir, f"{case}.hatchet")
        write_profile(p, r, dinfo)
        out[case] = p
    return out


def analyse_case(job):
    """One case's profile through the analyzer (what ``kprof-analyze PROFILE --top 0 --json`` prints),
    with the per-access evidence: sectors per request, the line's sample share, the kernel's % of peak."""
    path, arch = job
    import analyzer
    from analyzer.diagnostics.sectors import models
    from analyzer.load import SourcePolicy
    try:
        rep = analyzer.analyze(path, arch=arch, top=0, validate=False,
                               source_policy=SourcePolicy(recompile_from_source=True, allow_import_outside=True))
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    kernels = []
    for k in rep.kernels:
        j = k.to_json()
        if not j["cache_key"] and j["artifacts"]["origin"] == "none":
            continue    # a sampled library kernel (torch's), not a kernelc one
        f = k.facts
        rl = j.get("roofline") or {}
        accesses = []
        try:
            for a, m in models(f):
                st = f.line_stat(a.get("file"), a.get("line")) if a.get("line") else None
                accesses.append({"line": a.get("line"), "access": a.get("kind") or a.get("op"),
                                 "sectors_per_request": round(m.sectors_per_request, 2),
                                 "min_sectors_per_request": round(m.min_sectors_per_request, 2),
                                 "sector_efficiency": round(m.efficiency, 4),
                                 "line_sample_share": round(st.samples / f.total_samples, 4)
                                 if st is not None and f.total_samples else None})
        except Exception as e:
            accesses.append({"error": f"{type(e).__name__}: {e}"})
        kernels.append({
            "name": j["name"], "config": dict(j["constexprs"], num_warps=j["num_warps"], num_stages=j["num_stages"]),
            "time_ns": j["time_ns"], "count": j["count"], "grid": j["grid"], "samples": j["samples"]["total"],
            "artifacts": j["artifacts"]["origin"], "bound": rl.get("bound"),
            "bytes_pct_of_peak": rl.get("bytes_pct_of_peak"), "flops_pct_of_peak": rl.get("flops_pct_of_peak"),
            "headroom_pct": rl.get("headroom_pct"),
            "diagnostics": [{"id": d["id"], "line": d["line"], "severity": d["severity"], "basis": d["basis"],
                             "evidence": d["evidence"]} for d in j["diagnostics"]],
            "accesses": accesses})
    return {"kernels": kernels}


def score_case(case, result):
    """Per case: hit (expected id, on the expected line where one is named, infos included: the
    layout-conversion report is an info), true positives, and the false positives, per emitted finding:
    every warning/error on a clean case; on a problem case the expected id on another line
    (``fp_wrong_line``) and, counted separately (``other_findings``, for ``precision_strict``), every
    other finding."""
    kernels = (result or {}).get("kernels") or []
    diags = [d for k in kernels for d in k["diagnostics"]]
    finds = [d for d in diags if d["severity"] in ("error", "warning")]
    exp, line = case.expected, case.line
    row = {"group": case.group, "case": case.name, "expected": exp, "expected_line": line,
           "kernels": len(kernels),
           "error": (result or {}).get("error") or (None if kernels else "no kernelc kernel in the case's scope"),
           "findings": [f"{d['id']}@{d['line']}" for d in finds]}
    if exp:
        on = [d for d in diags if d["id"] == exp and (line is None or d["line"] == line)]
        row["found"] = bool(on)
        row["fp_wrong_line"] = sum(1 for d in finds if d["id"] == exp and line is not None and d["line"] != line)
        row["other_findings"] = sum(1 for d in finds if d["id"] != exp)
        ev = on[0]["evidence"] if on else {}
        row["evidence"] = {k: v for k, v in ev.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    else:
        row["found"] = None
        row["fp_clean"] = len(finds)
    if kernels:
        hot = max(kernels, key=lambda k: k["time_ns"] or 0)
        row.update({"time_us": round((hot["time_ns"] or 0) / max(1, hot["count"] or 1) / 1e3, 1),
                    "samples": hot["samples"], "bound": hot["bound"], "bytes_pct_of_peak": hot["bytes_pct_of_peak"],
                    "flops_pct_of_peak": hot["flops_pct_of_peak"]})
        if exp and line is not None:
            row["accesses_on_line"] = [a for a in hot["accesses"] if a.get("line") == line]
    return row


def gpu_summary(rows):
    scored = [r for r in rows if r["group"] != "unseen"]
    problems = [r for r in scored if r["expected"]]
    clean = [r for r in scored if not r["expected"]]
    tp = sum(1 for r in problems if r["found"])
    fp = sum(r.get("fp_clean", 0) for r in clean) + sum(r.get("fp_wrong_line", 0) for r in problems)
    fp_strict = fp + sum(r.get("other_findings", 0) for r in problems)
    unseen = [r for r in rows if r["group"] == "unseen"]
    near = [r for r in unseen if r.get("near_peak")]
    return {"problems": len(problems), "clean_kernels": len(clean), "true_positives": tp,
            "recall": round(tp / len(problems), 4) if problems else None,
            "false_positives": fp, "precision": round(tp / (tp + fp), 4) if tp + fp else None,
            "precision_strict": round(tp / (tp + fp_strict), 4) if tp + fp_strict else None,
            "missed": [r["case"] for r in problems if not r["found"]],
            "false_alarm_cases": [r["case"] for r in clean if r.get("fp_clean")]
            + [r["case"] for r in problems if r.get("fp_wrong_line")],
            "errors": [r["case"] for r in rows if r.get("error")],
            "unseen_kernels": len(unseen), "unseen_near_peak": len(near),
            "unseen_near_peak_flagged": [r["case"] for r in near if r["findings"]],
            "unseen_flagged": {r["case"]: r["findings"] for r in unseen if r["findings"]}}


def unseen_rows(case, result):
    """One row per kernel config of an unseen case (an autotuned example runs several)."""
    out = []
    for k in (result or {}).get("kernels") or []:
        finds = [d for d in k["diagnostics"] if d["severity"] in ("error", "warning")]
        pk = max([x for x in (k["bytes_pct_of_peak"], k["flops_pct_of_peak"]) if x is not None], default=None)
        out.append({"group": "unseen", "case": f"{case.name}:{k['name']}", "expected": None, "found": None,
                    "config": k["config"], "time_us": round((k["time_ns"] or 0) / max(1, k["count"] or 1) / 1e3, 1),
                    "samples": k["samples"], "bound": k["bound"], "pct_of_peak": pk,
                    "near_peak": pk is not None and pk >= 100 * NEAR_PEAK,
                    "findings": [f"{d['id']}@{d['line']}" for d in finds],
                    "evidence": {f"{d['id']}@{d['line']}": {n: v for n, v in d["evidence"].items()
                                                             if isinstance(v, (int, float)) and not isinstance(v, bool)}
                                 for d in finds}})
    if not out:
        out.append({"group": "unseen", "case": case.name, "expected": None, "found": None, "findings": [],
                    "error": (result or {}).get("error") or "no kernelc kernel in the case's scope"})
    return out


def gpu_main(args) -> int:
    import json
    import shutil
    import subprocess
    import tempfile
    from bench.common import write_results
    t_start = time.perf_counter()
    name = args.json_name or ("analyzer_corpus_gpu_dryrun" if args.dry_run else "analyzer_corpus_gpu")
    out = args.keep or tempfile.mkdtemp(prefix="analyzer-corpus-")
    os.makedirs(out, exist_ok=True)
    cases = _selected(args)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    fwd = ["--launches", str(args.launches)] + (["--dry-run"] if args.dry_run else [])
    fwd += ["--only", ",".join(c.name for c in cases)]
    modes = [m for m in args.modes.split(",") if m]
    all_rows, summaries, timings = [], {}, {}
    extra_base = {"near_peak_fraction": NEAR_PEAK, "launches_per_case": args.launches,
                  "mode": "dry run: CPU interpreter, small sizes, no samples" if args.dry_run else "gpu"}
    jobs = args.jobs or min(8, os.cpu_count() or 1)
    for mode in modes:
        t0 = time.perf_counter()
        status_path = os.path.join(out, f"status_{mode}.json")
        cmd = [sys.executable, "-m", "kprof"] + (["-m", "pcsampling"] if mode == "pcsampling" else []) + \
            ["-n", f"corpus_{mode}", "-o", out, os.path.abspath(__file__), "--workload", status_path] + fwd
        print(f"[{time.perf_counter() - t_start:6.1f}s] {mode}: {' '.join(cmd[1:])}", flush=True)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            tail = proc.communicate(timeout=args.child_timeout)[0][-4000:]
        except subprocess.TimeoutExpired:
            # SIGTERM: kprof writes the profile of what ran (the cases finished so far are scored)
            proc.terminate()
            try:
                tail = proc.communicate(timeout=60)[0][-4000:]
            except subprocess.TimeoutExpired:
                proc.kill()
                tail = proc.communicate()[0][-4000:]
            tail += f"\n(stopped after {args.child_timeout:g} s)"
            timings[f"{mode}_stopped"] = True
        timings[f"{mode}_profile_s"] = round(time.perf_counter() - t0, 1)
        prof = os.path.join(out, f"corpus_{mode}.hatchet")
        if not os.path.isfile(prof):
            print(tail, flush=True)
            summaries[mode] = {"error": f"no profile at {prof}", "log_tail": tail[-1500:]}
            continue
        status = json.load(open(status_path)) if os.path.isfile(status_path) else {}
        if not status:
            # the child stopped before writing its status (an H100 run, 2026-11-25: both modes ended after
            # ~6 s with an empty profile): keep what it printed, in the log and in the results
            print(f"{mode}: the profiled child wrote no status (exit {proc.returncode}); its output:\n{tail}", flush=True)
            timings[f"{mode}_child_exit"] = proc.returncode
            timings[f"{mode}_child_log_tail"] = tail[-3000:]
        split_dir = os.path.join(out, f"cases_{mode}")
        os.makedirs(split_dir, exist_ok=True)
        paths = split_profile(prof, split_dir)
        t1 = time.perf_counter()
        arch = "sm_90a" if args.dry_run else None
        todo = [c for c in cases if c.name in paths]
        if jobs > 1 and len(todo) > 1:
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(max_workers=jobs) as ex:
                results = list(ex.map(analyse_case, [(paths[c.name], arch) for c in todo]))
        else:
            results = [analyse_case((paths[c.name], arch)) for c in todo]
        res = dict(zip([c.name for c in todo], results))
        timings[f"{mode}_analyse_s"] = round(time.perf_counter() - t1, 1)
        rows = []
        for c in cases:
            r = res.get(c.name) or {"error": (status.get(c.name) or {}).get("error") or "not in the profile"}
            if c.group == "unseen":
                rows.extend(unseen_rows(c, r))
            else:
                rows.append(score_case(c, r))
        for r in rows:
            r["mode"] = mode
            print(f"{mode:10s} {r['group']:10s} {r['case'][:44]:44s} expected={r['expected'] or '-':22s} "
                  f"found={r['found'] if r['expected'] else '-'} findings={r['findings']}"
                  f"{' ERROR ' + str(r['error']) if r.get('error') else ''}", flush=True)
        summaries[mode] = gpu_summary(rows)
        summaries[mode]["workload_failures"] = {k: v["error"] for k, v in status.items() if not v.get("ok")}
        all_rows.extend(rows)
        print(json.dumps({mode: summaries[mode]}, indent=1), flush=True)
        timings["wall_s"] = round(time.perf_counter() - t_start, 1)
        # written after each mode: a run cut short by its caller's timeout keeps the modes it finished
        write_results(name, all_rows, dict(extra_base, summary=summaries, timings=timings))
    print(json.dumps(timings), flush=True)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
