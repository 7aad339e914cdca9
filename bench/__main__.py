"""``python3 -m bench NAME [args...]``: run a maintained benchmark (``--list`` lists them).

Each writes ``bench/results/<results>.json`` (and ``$OUT/results/`` when ``$OUT`` is set) through
:func:`bench.common.write_results`, which records the device, the date, the versions and the git commit.
One-off experiments live in ``bench/experiments/<topic>/`` and are run as scripts (``bench/README.md``).
"""
from __future__ import annotations

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (module, results file, what it measures)
BENCHMARKS = {
    "kernels": ("bench_kernels", "kernels", "kernels vs Triton (same source), torch, cuBLAS, SDPA (GPU)"),
    "attention": ("bench_attention", "attention", "attention fwd/bwd/fp8 vs SDPA's best backend, tutorial 06 bwd (GPU)"),
    "launch": ("bench_launch", "launch_overhead", "host time per launch of a cached kernel vs Triton, torch (GPU)"),
    "compile": ("bench_compile", "compile_time", "cold/warm first launch and disk-cache load vs Triton (GPU)"),
    "analyzer": ("bench_analyzer", "bench_analyzer", "kprof-analyze finds planted problems; speed-ups (GPU)"),
    "pcsampling": ("bench_pcsampling", "pcsampling_overhead", "PC sampling overhead vs Proton (GPU)"),
    "pcsampling_vs_ncu": ("pcsampling_vs_ncu", "pcsampling_vs_ncu", "sampled top lines vs Nsight Compute (GPU)"),
    "profiler_overhead": ("bench_profiler_overhead", "profiler_overhead",
                          "profiler overhead, one process per variant (GPU)"),
    "profiler_overhead_ab": ("profiler_overhead_ab", "profiler_overhead_ab",
                             "profiler overhead, each process its own baseline: the published table (GPU)"),
    "profiler_vs_torch": ("bench_profiler_vs_torch", "profiler_vs_torch",
                          "per-kernel times of examples/train.py vs torch.profiler (GPU)"),
    "proton_fixture": ("make_proton_fixture", None, "write the Proton fixture of tests/viewer (GPU, Triton)"),
    "reconcile_profilers": ("reconcile_profilers", "reconcile_profilers",
                            "kprof, Proton, torch.profiler and raw CUPTI per kernel; rotated overhead rounds (GPU)"),
    "memory_bound": ("bench_memory_bound", "memory_bound",
                     "transpose, permute and library-style memory-bound kernels vs Triton, torch (GPU)"),
    "triton_tutorials": ("triton_tutorials", "triton_tutorials",
                         "Triton's tutorials, unmodified, under Triton and kernelc (GPU; tutorials not in the repo)"),
    "analyzer_corpus": ("bench_analyzer_corpus", "analyzer_corpus_cpu",
                        "the analyzer's recall and precision on its corpus (CPU static; --gpu: PC samples "
                        "-> analyzer_corpus_gpu.json)"),
    "analyzer_corpus_gpu": ("bench_analyzer_corpus_gpu", "analyzer_corpus_gpu",
                            "the analyzer's recall and precision on its corpus with PC samples, unseen examples (GPU)"),
    "issue22_cases": ("issue22_cases", "issue22_gpu", "the analyzer on a strided store and small-tile matmuls, --tune (GPU)"),
    "ddp_profile": ("ddp_profile", "ddp_profile", "a DDP step under torchrun, per-rank overhead, the slow rank (GPUs)"),
    "html_report_profile": ("html_report_profile", None,
                            "a PC-sampled profile and its HTML reports, for the README screenshot (GPU)"),
}


def usage() -> str:
    lines = ["usage: python3 -m bench NAME [args...]   (python3 -m bench NAME --help for its options)", "",
             "maintained benchmarks:"]
    w = max(map(len, BENCHMARKS))
    for name, (mod, res, what) in BENCHMARKS.items():
        where = f"bench/results/{res}.json" if res else ("tests/viewer/data/" if mod == "make_proton_fixture" else "$OUT")
        lines.append(f"  {name.ljust(w)}  {what}; -> {where}")
    lines.append("")
    lines.append("experiments: bench/experiments/<topic>/ (see bench/README.md)")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"bench: unknown benchmark {name!r}; expected one of {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    path = os.path.join(HERE, BENCHMARKS[name][0] + ".py")
    sys.argv = [path, *rest]
    root = os.path.dirname(HERE)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
