"""Recall and precision of the analyzer's static diagnoses on a corpus of kernels (CPU, no GPU needed).

    python bench/bench_analyzer_corpus.py [--json-name analyzer_corpus_cpu]

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

The GPU run of this corpus (PC samples, ``python -m kprof -m pcsampling``) is not implemented here:
``bench/bench_analyzer.py`` profiles the planted kernels on the GPU.
"""
from __future__ import annotations

import argparse
import os
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
    ap.add_argument("--json-name", default="analyzer_corpus_cpu")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = _rows()
    s = summary(rows)
    s["wall_s"] = round(time.perf_counter() - t0, 1)
    s["mode"] = "cpu static (no samples)"
    print(s)
    write_results(args.json_name, rows, {"summary": s})
    return 0


if __name__ == "__main__":
    sys.exit(main())
