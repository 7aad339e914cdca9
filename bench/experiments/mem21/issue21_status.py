"""Issue 21's "Done when", cell by cell: each with its figure, the call and results file it comes from, and a
verdict by the rules below (written before this table was first built, session 21).

Sources are the result files in bench/results (read here, not copied); the CPU cells are checked live: the
transpose's and permute's SASS stores are compiled here, and the import, scheduling and golden-IR tests run here.

Rules:
* memory-bound row, kernelc / Triton on the same source, interleaved (bench/interleaved.py: the mean of
  per-repetition log ratios, a Student t 95% interval over the rounds), one figure per call (per process where a
  call ran several; a round where kernelc's or the A/A's log ratio is more than 2% from its median over the
  call's rounds is left out as disturbed): ``above`` when every call's interval lies at or above 1.0; ``level``
  when none lies wholly below 1.0 and at least one holds 1.0; ``below`` when some call's interval lies wholly
  below 1.0 and none wholly above; ``mixed`` when some lie wholly above and some wholly below. The issue's
  ">= 1.0x" is shown by ``above`` only.
* transpose/permute against torch: kernelc's bandwidth over ``x.t().contiguous()`` / ``x.permute(0, 2, 1)
  .contiguous()`` in the same run, >= 0.9.
* bench_kernels against 766f1cd (kernels_abba.py: processes 766f1cd, B, B, 766f1cd, each autotuning for itself;
  a row's figure is kernelc's speed over Triton's in the same process, B/766f1cd of it; two pairs): ``no
  regression`` when every pair is >= 0.98; ``regression`` when both pairs are < 0.98 and the larger of them is
  further from 1 than either tree's own spread (its second process over its first); ``not resolved`` otherwise
  (also a call with one pair). Over calls: ``regression`` if any call says so, else ``no regression`` if any
  call says so, else ``not resolved``.
  A pinned-config A/B (pinned_ab.py: one config, no autotuning; time ratio per pair, cuBLAS the control) of a row
  overrides a ``not resolved`` when both its pairs are >= 0.98 in speed, and makes any row a ``regression`` when
  both are < 0.98 while cuBLAS moved less than 2% in both.
  A one-process A/B (bench/experiments/mem22/ab_one_process.py, session 22: both trees' kernels in one process,
  launches interleaved, each tree loaded twice so that its own A/A is measured in the same rounds; speed new over
  old, the mean of per-round log ratios and its 95% t interval) decides a row over the two rules above when, in
  every process of the call, both trees' A/A intervals lie within [0.98, 1/0.98]: ``no regression`` when every
  process's interval of new over old lies at or above 0.98, ``regression`` when one lies wholly below 0.98,
  ``not resolved`` otherwise. (Rule written before the first such call's results, session 22.)

    python3 bench/experiments/mem21/issue21_status.py [--out bench/results/issue21_status_s27.json] [--no-live]
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
RES = os.path.join(ROOT, "bench", "results")
sys.path.insert(0, ROOT)

# -- the memory-bound set ---------------------------------------------------------------------------------
# (call, file under bench/results, GPU): bench_memory_bound.py runs with --timing interleaved; the one-run call of
# all 14 rows first, then calls that measured some rows again (each process of a call is its own entry)
MB_CALLS = [
    ("R3 (s20, all 14 rows, one run)", "s20_mem20_R3_h200/memory_bound.json", "H200"),
    ("R2 (s20)", "s20_mem20_R2_h200/memory_bound.json", "H200"),
] + [(f"S (s20), process {i}", f"s20_S_h200/p{i}.json", "H200") for i in range(1, 5)] \
  + [(f"R1 (s21), process {i}", f"s21_mem21_R1_h200/variants_p{i}.json", "H200") for i in range(1, 4)]
MB_EXTRA = []   # (call, file, GPU, benchmark prefix) of session 21's calls: filled in from --mb-extra


DISTURBED = 0.02


def _open(rel: str):
    """A results file under bench/results, plain or as scripts/compact_results.py left it (``.gz``)."""
    import gzip
    path = os.path.join(RES, rel)
    return open(path) if os.path.exists(path) else gzip.open(path + ".gz", "rt")


def _exists(rel: str) -> bool:
    return any(os.path.exists(os.path.join(RES, rel + ext)) for ext in ("", ".gz"))


def _mb_rows(path, column="kernelc"):
    """{benchmark: kernelc/Triton and its interval, the A/A} of one call, disturbed rounds left out. ``column``: the
    column that is this tree's build (variants.py files: a knob's column where the default has changed since)."""
    import statistics
    from bench.bench_memory_bound import log_ratio_ci
    d = json.load(_open(path))
    out = {}
    for r in d["rows"]:
        rds = (r.get("interleaved") or {}).get("rounds") or r.get("rounds") or []   # bench_memory_bound / variants.py
        if not rds or column not in rds[0]["log"]:
            continue
        cols = (column, "triton[control]")
        med = {c: statistics.median(rd["log"][c] for rd in rds) for c in cols}
        keep = [i for i, rd in enumerate(rds) if all(abs(rd["log"][c] - med[c]) <= DISTURBED for c in cols)]
        ci = log_ratio_ci([rds[i]["log"][column] for i in keep])
        aa = log_ratio_ci([rds[i]["log"]["triton[control]"] for i in keep])
        if ci:
            out[r["benchmark"]] = {"x": round(ci[0], 5), "ci": [round(v, 5) for v in ci[1:]], "column": column,
                                   "aa": round(aa[0], 5), "aa_ci": [round(v, 5) for v in aa[1:]],
                                   "rounds": len(keep), "left_out": [i + 1 for i in range(len(rds)) if i not in keep]}
    return out


def mb_verdict(figs):
    if not figs:
        return "not measured"
    below = any(f["ci"][1] < 1.0 for f in figs)
    if below and any(f["ci"][0] >= 1.0 for f in figs):
        return "mixed"
    if below:
        return "below"
    if all(f["ci"][0] >= 1.0 for f in figs):
        return "above"
    return "level"


MB_SAME_CODE = "bench/experiments/mem21/results/mb_sass_s20R3_vs_mem21.json"


def memory_bound_code():
    """Whether the 14 row kernels build the SASS now that they built in the one run of all 14 rows (CPU check)."""
    path = os.path.join(ROOT, MB_SAME_CODE)
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    return {"file": MB_SAME_CODE, "trees": [t["tree"] for t in d["trees"]], "same_sass": d["same_sass"],
            "this_tree": MB_THIS_TREE, "changed_since": _code_changed()}


# session 22: calls whose files hold this tree's build in a knob's column. (call, file, GPU, {default of
# KERNELC_REDUCE_XWARP: {row prefix or "*": column}}): R2 ran before multi_lds became the default; its `ml` column
# (multi_lds as R2's tree had it: lds on every single reduction) is this tree's softmax bwd (the same rule's mark,
# the same SASS: bench/experiments/mem22/results/), its shipped column this tree's log_softmax bwd and softmax fwd
MB_CALLS_S22 = [(f"R2 (s22), process {i}", f"s22_mem22_R2_h200/xw_p{i}.json", "H200",
                 {"multi": {"*": "kernelc"}, "multi_lds": {"softmax bwd": "kernelc[ml]", "*": "kernelc"}})
                for i in range(1, 4)]
# the rows' kernels (bench_memory_bound's names -> examples/kernels/memory_bound.py), to match a call's code to this tree's
MB_KERNEL = {"transpose": "transpose_kernel", "permute(0,2,1)": "permute021_kernel", "swiglu fwd": "swiglu_fwd_kernel",
             "swiglu bwd": "swiglu_bwd_kernel", "geglu fwd": "geglu_fwd_kernel", "geglu bwd": "geglu_bwd_kernel",
             "softmax fwd": "softmax_fwd_kernel", "softmax bwd": "softmax_bwd_kernel",
             "log_softmax fwd": "log_softmax_fwd_kernel", "log_softmax bwd": "log_softmax_bwd_kernel",
             "rms_norm bwd": "rms_norm_bwd_kernel", "layer_norm bwd": "layer_norm_bwd_kernel",
             "cross_entropy": "cross_entropy_kernel", "rope": "rope_kernel"}
# this tree's SASS of the 14 row kernels (mem21/mb_sass.py run on it; CPU), by the default of KERNELC_REDUCE_SCRATCH
# (session 23; shared: mem22's file, the same hashes as mem23's mb_sass_scratch_shared.json)
MB_THIS_TREE_BY_SCRATCH = {"shared": "bench/experiments/mem22/results/mb_sass_mem22.json",
                           "apart": "bench/experiments/mem23/results/mb_sass_scratch_apart.json",
                           "loops": "bench/experiments/mem23/results/mb_sass_scratch_loops.json"}
MB_THIS_TREE = MB_THIS_TREE_BY_SCRATCH["shared"]
# session 23: (call, file, GPU, {default of KERNELC_REDUCE_SCRATCH: {row prefix or "*": the column that is this
# tree's build, None: the row is left out}}); R1's `apart` column is the loops build for cross_entropy (the same SASS:
# bench/experiments/mem23/results/). layer_norm bwd is left out of these files: variants.py timed it with intervals
# 12-25% wide in every column, Triton's A/A included (its lock-based dW reduction; s20's bench_memory_bound runs read
# it within 0.1%), so they measure nothing about it
_NO_LN = {"layer_norm bwd": None}
MB_CALLS_S23 = [(f"R1 (s23), process {i}", f"s23_mem23_R1_h200/apart_p{i}.json", "H200",
                 {"shared": {**_NO_LN, "*": "kernelc"}, "apart": {**_NO_LN, "*": "kernelc[apart]"},
                  "loops": {**_NO_LN, "cross_entropy": "kernelc[apart]", "*": "kernelc"}})
                for i in (1, 2)] \
  + [("R2 (s23), process 3", "s23_mem23_R2_h200/loops_p3.json", "H200",
      {"shared": {**_NO_LN, "*": "kernelc"}, "loops": {**_NO_LN, "*": "kernelc[loops]"}})] \
  + [(f"R2 (s23), process {i}", f"s23_mem23_R2_h200/rope_p{i}.json", "H200",
      {"shared": {"*": "kernelc"}, "apart": {"*": "kernelc"}, "loops": {"*": "kernelc"}}) for i in (1, 2)]

# session 24 (mem24's R1): softmax fwd and rope, variants.py's `kernelc` column (this tree's build under shared and
# loops, which change neither kernel; apart changes softmax fwd's, so that column is not its build there)
MB_CALLS_S24 = [(f"R1 (s24), process {i}", f"s24_mem24_R1_h200/sm_rope_p{i}.json", "H200",
                 {"shared": {"*": "kernelc"}, "loops": {"*": "kernelc"}, "apart": {"softmax fwd": None, "*": "kernelc"}})
                for i in (1, 2)]
# session 25 (mem25's R1, one process): the same two rows, `kernelc` the shipped build beside load-hint columns
MB_CALLS_S25 = [("R1 (s25), process 1", "s25_mem25_R1_h200/loadhints.json", "H200",
                 {"shared": {"*": "kernelc"}, "loops": {"*": "kernelc"}, "apart": {"softmax fwd": None, "*": "kernelc"}})]

# session 26 (mem26's R2, one process): softmax fwd and rope beside streaming copies. KERNELC_L2_REUSE=evict_last
# (the default since session 26) builds rope's SASS of the `el` column instruction for instruction
# (bench/experiments/mem26/results/l2_reuse_sass.json), so under it that column is this tree's rope; every call
# before s26 timed the rope build without the policy (rope's calls from them count only under `off`)
# Since session 27 (mem27) codegen passes the policy to the hinted loads as a constant instead of createpolicy: rope's
# SASS under evict_last is no longer the one s26 timed (its `el` column and F's `kernelc`), so rope is left out of
# them under evict_last
MB_CALLS_S26 = [("R2 (s26), process 1", "s26_mem26_R2_h200/headroom.json", "H200",
                 {"evict_last": {"rope": None, "*": "kernelc"}, "off": {"*": "kernelc"}}),
                # the final call on merged main 5c7ba4c5 (evict_last the default there; `l2off` the build without)
                ("F (s26, merged main 5c7ba4c5), process 1", "s26_mem26_F_h200/headroom_f.json", "H200",
                 {"evict_last": {"rope": None, "*": "kernelc"}, "off": {"rope": "kernelc[l2off]", "*": "kernelc"}})]
# session 27 (mem27, bench/experiments/mem27/ab27.py, one process; mem27/to_status.py keeps the bench row): R2's `k`
# column (the policy as a constant: this tree's rope SASS under evict_last, bench/experiments/mem27/results/
# r3_columns_sass.json), all columns reading one cos/sin (Triton's too); `off` the build without
MB_CALLS_S27 = [("R2 (s27, mem27), process 1", "s27_mem27_R2_h200/rope_row.json", "H200",
                 {"evict_last": {"*": "k"}, "off": {"*": "off"}}),
                # R3 (on mem27 fd4261fa): every kernelc column its own cos/sin (Triton's a copy no kernelc column
                # reads); `on` this tree's build, `off` the build without
                ("R3 (s27, mem27), process 1", "s27_mem27_R3_h200/rope_row.json", "H200",
                 {"evict_last": {"*": "on"}, "off": {"*": "off"}})]
# session 28 (sm28, bench/experiments/sm28/cols.py = mem21/variants.py with PTX-edit columns, one process): the
# `kernelc` column is this tree's build of softmax fwd and log_softmax fwd (mem21/mb_sass.py: the 14 hashes of
# mem27/results/mb_sass_this_tree.json); the edit columns are other builds and do not enter
MB_CALLS_S28 = [("R2 (s28, sm28), process 1", "s28_sm28_R2_h200/variants.json", "H200",
                 {"evict_last": {"*": "kernelc"}})]
# session 29 (sm28's follow-up request in call A29, the same tool and column; main 97bdc620's build, unchanged since)
MB_CALLS_S29 = [("A29 (s29, sm28 follow-up), process 1", "s29_A29_h200/sm28_s29/variants.json", "H200",
                 {"evict_last": {"*": "kernelc"}})]
# the row kernels the L2 policy changes (mem21/mb_sass.py on this tree under each value; CPU)
L2_REUSE_CHANGES = {"off": set(), "evict_last": {"rope_kernel"}}
MB_THIS_TREE_L2 = "bench/experiments/mem27/results/mb_sass_this_tree.json"   # shared scratch, evict_last


def _row_kernel(name: str):
    return next((k for p, k in sorted(MB_KERNEL.items(), key=lambda x: -len(x[0])) if name.startswith(p + " ")
                 or name == p), None)


def _this_tree_sass() -> str:
    from kernelc import options
    if options.get("KERNELC_L2_REUSE") == "evict_last" and options.get("KERNELC_REDUCE_SCRATCH") == "shared":
        return MB_THIS_TREE_L2
    return MB_THIS_TREE_BY_SCRATCH.get(options.get("KERNELC_REDUCE_SCRATCH"), MB_THIS_TREE)


def _code_changed():
    """The row kernels whose SASS on this tree differs from the one the s20/s21 calls ran (86654a8's, which
    MB_SAME_CODE shows s21's tree built too); None when the check's files are missing."""
    a, b = os.path.join(ROOT, MB_SAME_CODE), os.path.join(ROOT, _this_tree_sass())
    if not (os.path.exists(a) and os.path.exists(b)):
        return None
    then = json.load(open(a))["trees"][0]["sass"]
    now = json.load(open(b))
    return sorted(k for k in then if now.get(k) != then[k])


def memory_bound(extra=()):
    from kernelc import options
    rows = {}
    changed = _code_changed() or []
    xwarp = options.get("KERNELC_REDUCE_XWARP")
    for call, path, gpu in MB_CALLS:
        for name, f in _mb_rows(path).items():
            if _row_kernel(name) in changed:   # that call timed code this tree no longer builds
                continue
            rows.setdefault(name, []).append({"call": call, "file": path, "gpu": gpu, **f})
    scratch = options.get("KERNELC_REDUCE_SCRATCH")
    l2 = options.get("KERNELC_L2_REUSE")
    l2_changed = L2_REUSE_CHANGES.get(l2, set())   # kernels the calls before s26 timed in another build
    for call, path, gpu, cols in MB_CALLS_S23 + MB_CALLS_S24 + MB_CALLS_S25:
        if scratch in cols and _exists(path):
            by_row = cols[scratch]
            for column in sorted({c for c in by_row.values() if c}):
                for name, f in _mb_rows(path, column).items():
                    want = next((c for p, c in by_row.items() if p != "*" and name.startswith(p + " ")), by_row["*"])
                    if want == column and _row_kernel(name) not in l2_changed:
                        rows.setdefault(name, []).append({"call": call, "file": path, "gpu": gpu, **f})
    for call, path, gpu, cols in MB_CALLS_S26 + MB_CALLS_S27 + MB_CALLS_S28 + MB_CALLS_S29:
        if l2 in cols and scratch == "shared" and _exists(path):
            by_row = cols[l2]
            for column in sorted({c for c in by_row.values() if c}):
                for name, f in _mb_rows(path, column).items():
                    want = next((c for p, c in by_row.items() if p != "*" and name.startswith(p + " ")), by_row["*"])
                    if want == column:
                        rows.setdefault(name, []).append({"call": call, "file": path, "gpu": gpu, **f})
    for call, path, gpu, cols in MB_CALLS_S22:
        if xwarp in cols and _exists(path):
            by_row = cols[xwarp]
            for column in sorted(set(by_row.values())):
                for name, f in _mb_rows(path, column).items():
                    want = next((c for p, c in by_row.items() if p != "*" and name.startswith(p + " ")), by_row["*"])
                    if want == column and _row_kernel(name) not in l2_changed:
                        rows.setdefault(name, []).append({"call": call, "file": path, "gpu": gpu, **f})
    for call, path, gpu, prefix in extra:
        for name, f in _mb_rows(path).items():
            if _row_kernel(name) in changed:
                continue
            if name.startswith(prefix):
                rows.setdefault(name, []).append({"call": call, "file": path, "gpu": gpu, **f})
    order = list(MB_KERNEL.values())
    names = sorted(rows, key=lambda n: order.index(_row_kernel(n)) if _row_kernel(n) in order else len(order))
    return {name: {"verdict": mb_verdict(rows[name]), "calls": rows[name]} for name in names}


def against_torch():
    """kernelc's bandwidth over torch's copy in the same run, the last H200 runs that timed torch."""
    out = {}
    for path, rows in (("s20_mem20_R2_h200/memory_bound.json", ("transpose",)),
                       ("memory_bound_transpose_permute_torch_s16_h200.json", ("transpose", "permute"))):
        d = json.load(_open(path))
        for r in d["rows"]:
            key = r["benchmark"].split()[0].split("(")[0]
            if key in rows and r.get("torch") and key not in out:
                out[key] = {"benchmark": r["benchmark"], "file": path, "kernelc_GBps": round(r["kernelc"]),
                            "torch_GBps": round(r["torch"]), "kernelc/torch": round(r["kernelc"] / r["torch"], 3),
                            "met": r["kernelc"] / r["torch"] >= 0.9}
    return out


def stores_128():
    """The transpose's and permute's global stores in SASS (CPU, sm_90a, the benchmark's specialisation)."""
    import collections
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem20"))
    from asm_matrix import CASES
    from cubintools import instructions
    from kernelc.compat import install
    install()
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    out = {}
    for kname in ("transpose_kernel", "permute021_kernel"):
        sig_s, cx, nw = CASES[kname]
        sig = dict(p.split("=") for p in sig_s.split(","))
        ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                      divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
        ops = collections.Counter(i.opcode for i in instructions(ck.asm["cubin"]) if i.opcode.startswith(("STG", "LDG")))
        out[kname] = {"sass_global_ops": dict(sorted(ops.items())),
                      "met": set(o for o in ops if o.startswith("STG")) == {"STG.E.128"}}
    return out


# -- bench_kernels against 766f1cd ------------------------------------------------------------------------
ABBA = [   # (call, file, GPU)
    ("C2 (s14)", "s14_C2_h200/abba/abba.json", "H200"),
    ("R1 (s15)", "s15_R1_h200/abba/abba.json", "H200"),
    ("R1 (s16, lay16)", "kernels_ab_pre21_vs_lay16_rowwise_s16_h200.json", "H200"),
    ("R1h (s17)", "s17_R1_h200/abba/abba.json", "H200"),
    ("R2a (s17)", "s17_R2_h200/abba_attn/abba.json", "H200"),
    ("R2b (s17)", "s17_R2b_h200/abba_pers/abba.json", "H200"),
]
PINNED = [   # (call, files A1, B1, B2, A2 under bench/results, GPU): pinned_ab.py, processes A B B A
    ("P (s17, lead)", ["s17_P_h200/pin_A_1.json", "s17_P_h200/pin_B_1.json", "s17_P_h200/pin_B_2.json",
                       "s17_P_h200/pin_A_2.json"], "H200"),
    ("R1a (s18)", ["s18_R1a_h200/fp8_A_1.json", "s18_R1a_h200/fp8_B_1.json", "s18_R1a_h200/fp8_B_2.json",
                   "s18_R1a_h200/fp8_A_2.json"], "H200"),
]


def _group(bench: str) -> str:
    b = bench.split()[0]
    return {"vector": "vector_add", "matmul_descriptor_persistent": "matmul_device_desc", "layernorm": "layernorm",
            "softmax": "softmax"}.get(b, b)


def abba_verdict(r):
    pairs = [p for p in r["pairs"] if p is not None]
    if all(p >= 0.98 for p in pairs):
        return "no regression"
    spreads = [abs(math.log(s)) for s in (r["spread_a2_over_a1"], r["spread_b2_over_b1"]) if s]
    if (len(pairs) == 2 and len(spreads) == 2 and all(p < 0.98 for p in pairs)
            and abs(math.log(max(pairs))) > max(spreads)):
        return "regression"
    return "not resolved"


PINNED.append(("R2 (s21)", [f"s21_mem21_R2_h200/pin_{s}.json" for s in ("A1", "B1", "B2", "A2")], "H200"))


def pinned():
    out = {}
    for call, files, gpu in PINNED:
        if not all(_exists(f) for f in files):   # a call cut short: its pairs incomplete
            continue
        a1, b1, b2, a2 = (json.load(_open(f))["rows"] for f in files)
        for cfg in a1:
            if any("ms" not in x.get(cfg, {}) for x in (a1, b1, b2, a2)):
                continue
            sp = [a1[cfg]["ms"] / b1[cfg]["ms"], a2[cfg]["ms"] / b2[cfg]["ms"]]   # speed B over A per pair
            ctl = [a1[cfg]["ref_ms"] / b1[cfg]["ref_ms"], a2[cfg]["ref_ms"] / b2[cfg]["ref_ms"]]
            out[cfg] = {"call": call, "gpu": gpu, "files": files, "speed_b_over_a_pairs": [round(x, 4) for x in sp],
                        "control_pairs": [round(x, 4) for x in ctl], "no_regression": all(x >= 0.98 for x in sp)}
    return out


# (call, files under bench/results, GPU, the bench_kernels row it stands for): ab_one_process.py, one file a process
# session 23: {default of KERNELC_TMA_ELECT: the tree in the file that builds this tree's code} ("new": the branch
# as it ran, elect.sync; "tid0": its copy with TMA copies issued by thread 0, mem23/tree_elect_variant.py, the same
# SASS as KERNELC_TMA_ELECT=tid, and as auto for matmul_tma: bench/experiments/mem23/results/mm_sass_elect.json); a
# call without this tree's build is left out (s22's R2 timed the elect build)
ONE_PROCESS = [   # R1 (s22) also ran it; its files were lost (its log: bench/results/s22_mem22_R1_h200/)
    ("R2 (s22)", [f"s22_mem22_R2_h200/ab1p_p{i}.json" for i in (1, 2, 3)], "H200", {"elect": "new"}),
    ("R1 (s23)", [f"s23_mem23_R1_h200/ab_p{i}.json" for i in (1, 2)], "H200",
     {"elect": "new", "tid": "tid0", "auto": "tid0"}),   # auto: matmul_tma's k-loop holds one dot, so tid
]


def one_process():
    """{(kernel, dtype, n): {config: [per call: processes' new/old and A/A intervals, verdict]}}."""
    from kernelc import options
    out = {}
    form = options.get("KERNELC_TMA_ELECT")
    for call, files, gpu, trees in ONE_PROCESS:
        tag = trees.get(form)
        if tag is None:
            continue
        procs = [json.load(_open(f)) for f in files if _exists(f)]
        by_cfg = {}
        for f, d in zip([f for f in files if _exists(f)], procs):
            for r in d["results"]:
                vs = r["new_vs_old"] if tag == "new" else r[f"{tag}_vs_old"]
                aa = r["new_aa"] if tag == "new" else r[f"{tag}_aa"]
                by_cfg.setdefault((d.get("kernel", "matmul_tma"), d["dtype"], d["n"], r["config"]), []).append(
                    {"file": f, "set": r["set"], "tree": tag, "new_over_old": vs["geomean"],
                     "ci95": [round(x, 4) for x in vs["ci95"]],
                     "old_aa_ci95": [round(x, 4) for x in r["old_aa"]["ci95"]],
                     "new_aa_ci95": [round(x, 4) for x in aa["ci95"]], "rounds": vs["n"],
                     "ms_median": r["ms_median"], "picked": r.get("picked")})
        for (kern, dt, n, cfg), ps in by_cfg.items():
            aa_ok = all(0.98 <= p[k][0] and p[k][1] <= 1 / 0.98 for p in ps for k in ("old_aa_ci95", "new_aa_ci95"))
            if not aa_ok:
                v = "not resolved"
            elif all(p["ci95"][0] >= 0.98 for p in ps):
                v = "no regression"
            elif any(p["ci95"][1] < 0.98 for p in ps):
                v = "regression"
            else:
                v = "not resolved"
            out.setdefault((kern, dt, str(n)), {}).setdefault(cfg, []).append(
                {"call": call, "gpu": gpu, "processes": ps, "aa_within_2pct": aa_ok, "verdict": v})
    return out


def _pin_key(bench: str):
    """The pinned entry that stands for a bench_kernels row (same kernel, dtype and size), if any."""
    m = re.match(r"(matmul\w*) (fp16|bf16|fp8e4m3) (\d+)\^3", bench)
    if not m:
        return None
    kern, dt, n = m.groups()
    if dt == "fp8e4m3":   # bench_kernels files the fp8 rows under matmul; pinned_ab under matmul_fp8
        kern = "matmul_fp8"
    dt = {"fp16": "float16", "bf16": "bfloat16", "fp8e4m3": "e4m3"}[dt]
    return kern, dt, n


# which tree each group's A/B ran, and whether that tree builds the same code as this one (CPU checks kept in
# bench/experiments/mem21/results/)
SAME_CODE = {
    ("vector_add", "softmax", "layernorm"): "bench/experiments/mem21/results/rowwise_sass_lay16_vs_mem21.json",
}


CORPUS_SINCE = "bench/experiments/mem21/results/corpus_since_ab_trees.json"
CORPUS_GROUPS = {"matmul": ("matmul", "matmul_fp8", "matmul_fp8_tma"), "matmul_tma": ("matmul_tma",),
                 "matmul_persistent": ("persistent",), "matmul_device_desc": ("desc_persistent",),
                 "attention": ("attention",), "attention_tma": ("attention_tma",), "softmax": ("softmax",),
                 "layernorm": ("layernorm",), "vector_add": ("vector_add",)}
CALL_TREE = {"C2 (s14)": "s14_C2_28925eb", "R1 (s15)": "s15_R1_a39fa15", "R1h (s17)": "s17_R1h_045a42e",
             "R2a (s17)": "s17_R2a_258297b", "R2b (s17)": "s17_R1h_045a42e"}   # R2b: b4ab8df, scripts only on 045a42e's compiler


def _same_code(group, calls):
    out = {}
    for groups, rel in SAME_CODE.items():
        if group in groups and os.path.exists(os.path.join(ROOT, rel)):
            d = json.load(open(os.path.join(ROOT, rel)))
            out["sass"] = {"file": rel, "trees": [t["tree"] for t in d["trees"]], "same_sass": d["same_sass"]}
    if os.path.exists(os.path.join(ROOT, CORPUS_SINCE)):
        d = json.load(open(os.path.join(ROOT, CORPUS_SINCE)))
        for call in calls:
            tree = CALL_TREE.get(call)
            if tree in d:
                diff = [k for k in d[tree]["differ"] if k.split("/")[0] in CORPUS_GROUPS.get(group, ())]
                n = sum(v for k, v in d[tree]["groups"].items() if k in CORPUS_GROUPS.get(group, ()))
                out.setdefault("ptx", {})[call] = {"file": CORPUS_SINCE, "tree": tree, "corpus_kernels": n,
                                                   "differ_now": diff}
    return out or None


def bench_kernels():
    pins = pinned()
    ones = {(k, {"bfloat16": "bfloat16", "float16": "float16"}.get(dt, dt), n): v for (k, dt, n), v in one_process().items()}
    groups = {}
    for call, path, gpu in ABBA:
        d = json.load(_open(path))
        for g in d["groups"]:
            for r in g.get("rows", []):
                e = {"call": call, "gpu": gpu, "file": path, "b": d["b"][0], "b_over_a": round(r["b_over_a"], 4),
                     "pairs": [round(p, 4) for p in r["pairs"] if p is not None],
                     "own_spread": [None if x is None else round(x, 4) for x in (r["spread_a2_over_a1"], r["spread_b2_over_b1"])],
                     "verdict": abba_verdict(r)}
                groups.setdefault(_group(r["benchmark"]), {}).setdefault(r["benchmark"], []).append(e)
    out = {}
    for grp, rows in sorted(groups.items()):
        gv = {}
        for bench, es in sorted(rows.items()):
            verdicts = {e["verdict"] for e in es}
            v = ("regression" if "regression" in verdicts else
                 "no regression" if "no regression" in verdicts else "not resolved")
            pk = _pin_key(bench)
            pin = None
            if pk:
                pin = next(({"config": c, **p} for c, p in pins.items()
                            if c.startswith(pk[0] + " ") and f" {pk[1]} {pk[2]} " in f" {c} "), None)
                if pin and v == "not resolved" and pin["no_regression"]:
                    v = "no regression (pinned)"
                elif (pin and all(x < 0.98 for x in pin["speed_b_over_a_pairs"])
                      and all(abs(c - 1) < 0.02 for c in pin["control_pairs"])):
                    v = "regression (pinned)"
            op = ones.get(pk) if pk else None
            if op:   # the one-process A/B decides where its A/As are within 2% (rules); a regression anywhere counts
                vs = [c["verdict"] for calls in op.values() for c in calls if c["aa_within_2pct"]]
                if "regression" in vs:
                    v = "regression (one process)"
                elif vs and all(x == "no regression" for x in vs):
                    v = "no regression (one process)"
            gv[bench] = {"verdict": v, "abba": es, **({"pinned": pin} if pin else {}),
                         **({"one_process": {c: x for c, x in op.items()}} if op else {})}
        sc = _same_code(grp, sorted({e["call"] for es in rows.values() for e in es}))
        out[grp] = {"rows": gv, **({"measured_tree_vs_this_tree": sc} if sc else {})}
    return out


# -- the GPU suite and the fuzz ---------------------------------------------------------------------------
GPU_SUITE = ("S29 (s29, main 85f2fad1)", "gpu_tests_2026-11-30_s29_S_h200.log")


def gpu_suite():
    call, path = GPU_SUITE
    text = _open(path).read()
    m = re.search(r"=+ (.*) in [\d.]+s", text.strip().splitlines()[-1])
    summary = m.group(1) if m else text.strip().splitlines()[-1]
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    fuzz = sorted(set(re.findall(r"PASSED tests/gpu/test_gpu_differential.py::test_random_differential\[(\d+)\]", text)))
    fuzz_failed = re.findall(r"FAILED tests/gpu/test_gpu_differential.py::test_random_differential\[(\d+)\]", text)
    import importlib.util
    spec = importlib.util.spec_from_file_location("gd", os.path.join(ROOT, "tests", "gpu", "test_gpu_differential.py"))
    src = open(spec.origin).read()
    n_cases = sum(int(x) for x in re.findall(r"RANDOM(?:_T)?_SEED, RANDOM(?:_T)?_CASES = \d+, (\d+)", src))
    n_chunks = int(re.search(r"RANDOM_CHUNKS = (\d+)", src).group(1))
    return {
        "gpu_tests": {"call": call, "file": path, "summary": summary, "counts": counts,
                      "met": counts.get("failed", 0) == 0 and counts.get("error", counts.get("errors", 0)) == 0},
        "fuzz": {"call": call, "file": path, "cases": n_cases, "chunks_passed": len(fuzz), "chunks": n_chunks,
                 "chunks_failed": len(fuzz_failed),
                 "note": "a chunk passes only with 0 of its cases differing (GPU against the CPU interpreter)",
                 "met": len(fuzz) == n_chunks and not fuzz_failed},
    }


def cpu_tests():
    """The import test, the scheduling-decision test and the golden-IR-per-pass test, run here."""
    import subprocess
    tests = {"import (layering)": ["tests/test_layering.py"],
             "lower_to_llvm makes no scheduling decision": [
                 "tests/compiler/test_schedule_passes.py::test_codegen_makes_no_scheduling_decision"],
             "golden IR tests per pass": ["tests/compiler/test_pass_goldens.py"]}
    out = {}
    for name, args in tests.items():
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT,
                           capture_output=True, text=True)
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]
        out[name] = {"tests": args, "result": last, "met": r.returncode == 0}
    from kernelc.compiler.compiler import FRONTEND_PASSES, TILE_PASSES
    out["golden IR tests per pass"]["passes"] = len({p.name for p in FRONTEND_PASSES + TILE_PASSES})
    return out


def _calls_md(calls):
    """One call's processes on one entry: 'S (s20) 0.9989-0.9994 (4 processes)'; intervals for single runs."""
    groups = {}
    for c in calls:
        groups.setdefault(c["call"].split(", process")[0], []).append(c)
    out = []
    for name, cs in groups.items():
        if len(cs) == 1:
            c = cs[0]
            out.append(f"{name}: {c['x']:.4f} [{c['ci'][0]:.4f}, {c['ci'][1]:.4f}]")
        else:
            xs = sorted(c["x"] for c in cs)
            lo, hi = min(c["ci"][0] for c in cs), max(c["ci"][1] for c in cs)
            out.append(f"{name}: {xs[0]:.4f}-{xs[-1]:.4f} in {len(cs)} processes (intervals within [{lo:.4f}, {hi:.4f}])")
    return "; ".join(out)


def markdown(st) -> str:
    """The status as the table docs/performance.md carries: a line per memory-bound row and per other cell, a line
    per bench_kernels group (its rows' figures are in the JSON)."""
    met = lambda b: "met" if b else "not met"  # noqa: E731
    L = ["| cell | figure (x / Triton, 95% interval; calls) | verdict |", "|---|---|---|"]
    for name, r in st["memory_bound"].items():
        L.append(f"| {name} >= 1.0x Triton | {_calls_md(r['calls'])} | **{r['verdict']}** |")
    for k, v in st["against_torch"].items():
        L.append(f"| {v['benchmark']} >= 90% of torch's copy | kernelc {v['kernelc_GBps']} GB/s, torch "
                 f"{v['torch_GBps']} GB/s: {v['kernelc/torch']}x (`{v['file']}`) | {met(v['met'])} |")
    for k, v in st.get("stores_128_cpu", {}).items():
        L.append(f"| {k}: SASS global stores 128-bit (CPU, sm_90a) | "
                 + ", ".join(f"{n} `{o}`" for o, n in v["sass_global_ops"].items()) + f" | {met(v['met'])} |")
    for grp, g in st["bench_kernels_vs_766f1cd"].items():
        rows = "; ".join(f"{b.split(' ', 1)[1]} {r['abba'][0]['b_over_a']:.3f}"
                         + (f" (pinned {min(r['pinned']['speed_b_over_a_pairs']):.3f}-"
                            f"{max(r['pinned']['speed_b_over_a_pairs']):.3f})" if "pinned" in r else "")
                         + "".join(f" (one process, {cfg}, {c['call']}: "
                                   + ", ".join(f"{p['new_over_old']:.4f} [{p['ci95'][0]:.4f}, {p['ci95'][1]:.4f}]"
                                               for p in c["processes"]) + ")"
                                   for cfg, cs in r.get("one_process", {}).items() for c in cs)
                         + f" {r['verdict']}" for b, r in g["rows"].items())
        calls = sorted({e["call"] for r in g["rows"].values() for e in r["abba"]})
        same = g.get("measured_tree_vs_this_tree", {})
        ptx = same.get("ptx", {})
        differ = sorted({f"{len(x['differ_now'])} of {x['corpus_kernels']} corpus kernels" for x in ptx.values()})
        code = ("same SASS now" if same.get("sass", {}).get("same_sass") else
                "PTX now differs in " + ", ".join(differ) if any(x["differ_now"] for x in ptx.values()) else
                "same PTX now" if ptx else "")
        verdicts = {r["verdict"].split(" (")[0] for r in g["rows"].values()}
        v = "regression" if "regression" in verdicts else "not resolved" if "not resolved" in verdicts else "no regression"
        L.append(f"| bench_kernels `{grp}` vs 766f1cd (2%) | {rows} ({', '.join(calls)}; {code}) | {v} |")
    gt, fz = st["gpu_tests"], st["fuzz"]
    L.append(f"| all GPU tests pass | {gt['summary']} ({gt['call']}) | {met(gt['met'])} |")
    L.append(f"| GPU differential fuzz, 0 mismatches | {fz['cases']} cases in {fz['chunks']} chunks, {fz['chunks_passed']} "
             f"passed ({fz['call']}) | {met(fz['met'])} |")
    for k in ("import (layering)", "lower_to_llvm makes no scheduling decision", "golden IR tests per pass"):
        if k in st:
            v = st[k]
            L.append(f"| {k} | `{' '.join(v['tests'])}`: {v['result'].split(' in ')[0]}"
                     + (f" ({v['passes']} passes in the pipeline)" if "passes" in v else "") + f" | {met(v['met'])} |")
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(RES, "issue21_status_s29.json"))
    ap.add_argument("--no-live", action="store_true", help="skip the CPU compiles and tests")
    ap.add_argument("--md", help="also write the markdown table to this file")
    ap.add_argument("--mb-extra", action="append", default=[],
                    help="CALL=FILE=PREFIX: one more call's memory-bound figures (file under bench/results)")
    a = ap.parse_args(argv)
    extra = [tuple(s.split("=", 2)[:2]) + ("H200", s.split("=", 2)[2]) for s in a.mb_extra]
    status = {"rules": __doc__.split("Rules:")[1].split("    python3")[0].strip(),
              "memory_bound": memory_bound(extra), "memory_bound_code": memory_bound_code(),
              "against_torch": against_torch(),
              "bench_kernels_vs_766f1cd": bench_kernels(), **gpu_suite()}
    if not a.no_live:
        status["stores_128_cpu"] = stores_128()
        status.update(cpu_tests())
    with open(a.out, "w") as f:
        json.dump(status, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(markdown(status) + "\n")
    mb = status["memory_bound"]
    print("memory-bound rows:", {v: sum(1 for r in mb.values() if r["verdict"] == v) for v in ("above", "level", "mixed", "below")})
    for name, r in mb.items():
        print(f"  {name:36s} {r['verdict']:6s} " + "  ".join(f"{c['x']:.4f}" for c in r["calls"]))
    for k, v in status["against_torch"].items():
        print(f"  vs torch {k}: {v['kernelc/torch']}")
    for grp, rows in status["bench_kernels_vs_766f1cd"].items():
        print(f"  bench_kernels {grp}: " + ", ".join(f"{b.split(' ', 1)[1]} {r['verdict']}" for b, r in rows["rows"].items())
              + (f"  [code now vs the trees measured: "
                 f"{ {k: (v['same_sass'] if k == 'sass' else {c: len(x['differ_now']) for c, x in v.items()}) for k, v in rows['measured_tree_vs_this_tree'].items()} }]"
                 if "measured_tree_vs_this_tree" in rows else ""))
    for k in ("gpu_tests", "fuzz", "stores_128_cpu", "import (layering)", "lower_to_llvm makes no scheduling decision",
              "golden IR tests per pass"):
        if k in status:
            print(f"  {k}: {status[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
