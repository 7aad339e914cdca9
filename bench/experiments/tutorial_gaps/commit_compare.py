"""Does a tutorial reading taken on one commit still describe another? Every kernel a tutorial runs, at every config
its autotuner may pick, compiled for sm_90a by kernelc as of two commits (on CPU), PTX and SASS compared.

    python3 bench/experiments/tutorial_gaps/commit_compare.py --base 1c23cf7f --head HEAD --only 06,09 \\
        [--tutorials DIR] [--jobs 2] [--limit N] [--out FILE.json]

Each commit's ``kernelc`` and ``cubintools`` (``git archive``) go to a folder of their own; the kernels (the tutorial's
imports and ``@triton.jit`` functions, ``tutorial_sweep.kernel_module``) are one file shared by both sides, so a path
differs only where it names a commit's folder, and those are written ``<ROOT>``. Each side compiles in child
processes with an empty kernel cache. Compared: the PTX without its comment lines, and the SASS (``nvdisasm``
through cubintools, no line info). If the two commits' ``kernelc`` trees are identical, nothing is compiled (the
output says so): same compiler source, same inputs.

What is compiled (arguments as the tutorials' benchmarks pass them on an H200; integers and pointers 16-divisible
where the runtime would find them so, integers equal to 1 folded):

- 03: ``matmul_kernel``, every config of its CUDA list, fp16 (b row-major) and fp8 e5m2 (b = b.T);
- 06: ``_attn_fwd``, every config the Hopper filter keeps, D 64 and 128, fp16 and fp8, causal (STAGE 3) and not
  (STAGE 1) on host descriptors, and warp-specialised non-causal on pointers (descriptors made in the kernel);
  ``_attn_bwd_preprocess`` and ``_attn_bwd`` (fixed config) at D 64 and 128;
- 08, 09: ``tutorial_sweep.KERNELS`` (every kernel variant and config of the sweep: 09's pointer, persistent, TMA,
  TMA persistent, descriptor persistent with and without warp specialisation);
- 01, 02, 04, 05, 07: the kernels at their benchmarks' block sizes and warps (02: every BLOCK_SIZE of its table,
  05: every BLOCK_SIZE/warps pair of its forward and backward tables).

Writes JSON: per kernel job its label, whether PTX and SASS are identical, and for those that differ the SASS opcodes
each side has more of. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import tutorial_sweep as ts  # noqa: E402

FILES = {"01": "01-vector-add.py", "02": "02-fused-softmax.py", "03": "03-matrix-multiplication.py",
         "04": "04-low-memory-dropout.py", "05": "05-layer-norm.py", "06": "06-fused-attention.py",
         "07": "07-extern-functions.py", "08": "08-grouped-gemm.py", "09": "09-persistent-matmul.py"}


def _job(tut, fn, label, sig, cx, w, s, div=None, eq1=None):
    eq1 = dict(eq1 or {})
    # kernelc folds an equal-to-1 integer that is a parameter of its signature (as tutorial_sweep.compile_one does)
    sig = dict(sig, **{n: "i32" for n in eq1})
    if div is None:
        div = {n: 16 for n, t in sig.items() if (t.startswith(("*", "i")) or t.startswith("tensordesc"))
               and n not in eq1}
    return dict(tut=tut, fn=fn, label=label, sig=sig, cx=cx, div=div, eq1=sorted(eq1), num_warps=w, num_stages=s)


M03_CONFIGS = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
               (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
               (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
               (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4)]


def jobs_03():
    for dt in ("fp16", "fp8"):
        e = "*fp16" if dt == "fp16" else "*fp8e5"
        sig = {"a_ptr": e, "b_ptr": e, "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
               "stride_bk" if dt == "fp16" else "stride_bn": "i32", "stride_cm": "i32"}
        eq1 = {"stride_ak": 1, "stride_bn" if dt == "fp16" else "stride_bk": 1, "stride_cn": 1}
        for bm, bn, bk, s, w in M03_CONFIGS:
            cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, ACTIVATION="")
            yield _job("03", "matmul_kernel", f"{dt} {bm}x{bn}x{bk} w{w} s{s}", sig, cx, w, s, eq1=eq1)


def configs_06(d):
    """The Hopper list: BM 64/128 x BN 32/64/128 x stages 2/3/4 x warps 4/8, no 8 warps under 128x128 (``keep``);
    BN > D fails the kernel's static_assert on both sides (kept: an error on both is a comparison too)."""
    return [(bm, bn, s, w) for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)
            if not (bm * bn < 128 * 128 and w == 8)]


def jobs_06():
    for d in (64, 128):
        for fp8 in (False, True):
            e = "fp8e5" if fp8 else "fp16"
            for variant in ("host-causal", "host", "ws-ptr"):
                for bm, bn, s, w in configs_06(d):
                    if variant == "ws-ptr":
                        descs = {n: f"*{e}" for n in ("desc_q", "desc_k", "desc_v", "desc_o")}
                    else:
                        descs = {"desc_q": f"tensordesc<{e}[{bm}, {d}]>", "desc_k": f"tensordesc<{e}[{bn}, {d}]>",
                                 "desc_v": (f"tensordesc<{e}[{d}, {bn}]>" if fp8 else f"tensordesc<{e}[{bn}, {d}]>"),
                                 "desc_o": f"tensordesc<{e}[{bm}, {d}]>"}
                    sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32", **descs, "N_CTX": "i32"}
                    cx = dict(HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, FP8_OUTPUT=fp8,
                              STAGE=3 if variant == "host-causal" else 1, warp_specialize=variant == "ws-ptr",
                              IS_HOPPER=True)
                    div = {n: 16 for n in ("M", "H", "N_CTX", "desc_q", "desc_k", "desc_v", "desc_o")}  # Z = 4
                    yield _job("06", "_attn_fwd", f"fwd d{d} {e} {variant} {bm}x{bn} s{s} w{w}", sig, cx, w, s, div=div)
        bsig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "DO": "*fp16", "DQ": "*fp16",
                "DK": "*fp16", "DV": "*fp16", "M": "*fp32", "D": "*fp32", "stride_z": "i32", "stride_h": "i32",
                "stride_tok": "i32", "H": "i32", "N_CTX": "i32"}
        bcx = dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2, HEAD_DIM=d)
        yield _job("06", "_attn_bwd", f"bwd d{d}", bsig, bcx, 4, 5, eq1={"stride_d": 1})
        psig = {"O": "*fp16", "DO": "*fp16", "Delta": "*fp32", "Z": "i32", "H": "i32", "N_CTX": "i32"}
        yield _job("06", "_attn_bwd_preprocess", f"bwd_pre d{d}", psig, dict(BLOCK_M=128, HEAD_DIM=d), 4, 3,
                   div={"O": 16, "DO": 16, "Delta": 16, "H": 16, "N_CTX": 16})


def jobs_sweep(tut):
    for name, (t, _, _) in ts.KERNELS.items():
        if t != tut:
            continue
        for j in ts.jobs_for([name], 0):
            div = {n: (1 if n in ts.UNALIGNED else 16) for n, ty in j["sig"].items()
                   if ty.startswith(("*", "i", "tensordesc"))}
            yield _job(tut, j["fn"], f"{name} {ts._cfg_label(j)}", j["sig"], j["cx"], j["num_warps"],
                       j["num_stages"], div=div, eq1=j["eq1"])


def jobs_small(tut):
    if tut == "01":
        yield _job("01", "add_kernel", "add 1024", {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32",
                                                    "n_elements": "i32"}, dict(BLOCK_SIZE=1024), 4, 3)
    elif tut == "02":
        sig = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
               "n_rows": "i32", "n_cols": "i32"}
        for b in (256, 512, 1024, 2048, 4096, 8192, 16384):   # n_cols 128 * (2..99): next powers of two
            yield _job("02", "softmax_kernel", f"softmax {b}", sig, dict(BLOCK_SIZE=b, num_stages=4), 8, 4)
    elif tut == "04":
        yield _job("04", "_dropout", "dropout 1024", {"x_ptr": "*fp32", "x_keep_ptr": "*i8", "output_ptr": "*fp32",
                                                      "n_elements": "i32", "p": "fp32"}, dict(BLOCK_SIZE=1024), 4, 3)
        yield _job("04", "_seeded_dropout", "seeded 1024", {"x_ptr": "*fp32", "output_ptr": "*fp32",
                                                             "n_elements": "i32", "p": "fp32", "seed": "i32"},
                   dict(BLOCK_SIZE=1024), 4, 3)
    elif tut == "05":
        fsig = {"X": "*fp16", "Y": "*fp16", "W": "*fp16", "B": "*fp16", "Mean": "*fp32", "Rstd": "*fp32",
                "stride": "i32", "N": "i32", "eps": "fp32"}
        dsig = {"DX": "*fp16", "DY": "*fp16", "DW": "*fp16", "DB": "*fp16", "X": "*fp16", "W": "*fp16",
                "Mean": "*fp32", "Rstd": "*fp32", "Lock": "*i32", "stride": "i32", "N": "i32"}
        seen = set()
        for n in range(1024, 512 * 32, 512):   # its tables: N = 512 * i, i = 2..31, all 16-divisible
            b = min(65536 // 2, 1 << (n - 1).bit_length())
            w = min(max(b // 256, 1), 8)
            g = 256 if n <= 1024 else 128 if n <= 4096 else 96 if n <= 8192 else 64
            if (b, w, g) in seen:
                continue
            seen.add((b, w, g))
            yield _job("05", "_layer_norm_fwd_fused", f"fwd {b} w{w}", fsig, dict(BLOCK_SIZE=b), w, 3)
            yield _job("05", "_layer_norm_bwd_dx_fused", f"bwd_dx {b} w{w} g{g}", dsig,
                       dict(GROUP_SIZE_M=g, BLOCK_SIZE_N=b), w, 3)
        wsig = {"DW": "*fp16", "DB": "*fp16", "FINAL_DW": "*fp16", "FINAL_DB": "*fp16", "M": "i32", "N": "i32"}
        yield _job("05", "_layer_norm_bwd_dwdb", "dwdb 32x128", wsig, dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=128), 4, 3)
    elif tut == "07":
        yield _job("07", "asin_kernel", "asin 1024", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_elements": "i32"},
                   dict(BLOCK_SIZE=1024), 4, 3)


def all_jobs(tuts):
    for t in tuts:
        if t == "03":
            yield from jobs_03()
        elif t == "06":
            yield from jobs_06()
        elif t in ("08", "09"):
            yield from jobs_sweep(t)
        else:
            yield from jobs_small(t)


# --- one side: a child process compiling a list of jobs --------------------------------------------------------

_CHILD = r"""
import hashlib, importlib.util, json, re, sys, time
a = json.loads(open(sys.argv[1]).read())
from kernelc.compat import install
install()
from kernelc.compiler.compiler import compile as kcompile
from cubintools.sass import disassemble
mods = {}
def mod(tut):
    if tut not in mods:
        spec = importlib.util.spec_from_file_location("commit_compare_tut" + tut, a["mods"][tut])
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        mods[tut] = m
    return mods[tut]
def norm(text):
    return text.replace(a["root"], "<ROOT>")
for j in a["jobs"]:
    t0 = time.perf_counter()
    row = {"i": j["i"]}
    try:
        ck = kcompile(getattr(mod(j["tut"]), j["fn"]), j["sig"], j["cx"], "sm_90a", j["num_warps"], j["num_stages"],
                      divisibility=j["div"], equal_to_1=tuple(j["eq1"]))
        ptx = "\n".join(ln for ln in norm(ck.asm["ptx"]).splitlines() if not ln.lstrip().startswith("//"))
        sass = norm(disassemble(ck.asm["cubin"], line_info=False))
        for kind, text in (("ptx", ptx), ("sass", sass)):
            open(f"{a['dir']}/{j['i']}.{kind}", "w").write(text)
            row[kind] = hashlib.sha256(text.encode()).hexdigest()[:16]
        row.update(n_regs=ck.n_regs, shared=ck.shared)
    except BaseException as e:  # a config the compiler refuses: the same refusal on both sides is a match
        row["error"] = norm(f"{type(e).__name__}: {e}")[-300:]
    row["s"] = round(time.perf_counter() - t0, 3)
    print(json.dumps(row), flush=True)
"""


def _export(commit: str, dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    arch = subprocess.run(["git", "-C", ROOT, "archive", commit, "kernelc", "cubintools"], check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=arch, check=True)


def _side(root: str, jobs, mods, outdir: str, timeout: int, knobs=None):
    """Compile ``jobs`` with the kernelc under ``root`` (``knobs``: KERNELC_* values for this side, else every knob
    at its default); returns {i: row}."""
    os.makedirs(outdir, exist_ok=True)
    spec = os.path.join(outdir, f"jobs_{jobs[0]['i']}.json")
    with open(spec, "w") as f:
        json.dump({"jobs": jobs, "mods": mods, "root": root, "dir": outdir}, f)
    cache = tempfile.mkdtemp(prefix="cc_cache_")
    env = dict(os.environ, PYTHONPATH=root, KERNELC_CACHE_DIR=cache, KERNELC_SASS_CACHE_DIR="off")
    for k in [k for k in env if k.startswith("KERNELC_") and k not in ("KERNELC_CACHE_DIR", "KERNELC_SASS_CACHE_DIR")]:
        env.pop(k)   # every knob at its default: the comparison is of the defaults
    env.update(knobs or {})
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, spec], env=env, capture_output=True, text=True,
                           timeout=timeout, cwd=cache)
        out = r.stdout
        err = r.stderr.strip().splitlines()[-3:] if r.returncode else []
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = [f"timeout after {timeout} s"]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rows = {}
    for ln in out.splitlines():
        if ln.startswith("{"):
            d = json.loads(ln)
            rows[d["i"]] = d
    for j in jobs:
        rows.setdefault(j["i"], {"i": j["i"], "error": "child: " + " | ".join(err)[-300:], "child_failed": True})
    return rows


def _opcodes(sass: str) -> collections.Counter:
    c = collections.Counter()
    for ln in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", ln)
        if m:
            c[m.group(1)] += 1
    return c


def compare(jobs, base_rows, head_rows, base_dir, head_dir):
    out = []
    for j in jobs:
        b, h = base_rows[j["i"]], head_rows[j["i"]]
        row = {"tut": j["tut"], "fn": j["fn"], "label": j["label"]}
        if "error" in b or "error" in h:
            row["status"] = "error on both (same)" if b.get("error") == h.get("error") else "error differs"
            row["base_error"], row["head_error"] = b.get("error"), h.get("error")
        else:
            row["ptx_same"] = b["ptx"] == h["ptx"]
            row["sass_same"] = b["sass"] == h["sass"]
            row["status"] = "identical" if row["ptx_same"] and row["sass_same"] else "differs"
            row["regs"] = [b["n_regs"], h["n_regs"]]
            row["shared"] = [b["shared"], h["shared"]]
            if row["status"] == "differs":
                ob = _opcodes(open(os.path.join(base_dir, f"{j['i']}.sass")).read())
                oh = _opcodes(open(os.path.join(head_dir, f"{j['i']}.sass")).read())
                row["sass_instructions"] = [sum(ob.values()), sum(oh.values())]
                row["base_has_more"] = dict(sorted((ob - oh).items()))
                row["head_has_more"] = dict(sorted((oh - ob).items()))
        out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--only", default="06,09")
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--jobs", type=int, default=2, help="child processes at a time")
    ap.add_argument("--chunks", type=int, default=0, help="child processes a side (default: --jobs)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N kernel jobs (a quick look)")
    ap.add_argument("--match", default="", help="only jobs whose label contains this text")
    ap.add_argument("--head-knob", action="append", default=[], metavar="KERNELC_X=V",
                    help="compile the head side with this knob set (which change explains a difference)")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--keep", help="keep both sides' PTX and SASS in this folder")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    commits = {s: subprocess.run(["git", "-C", ROOT, "rev-parse", c], check=True, capture_output=True,
                                 text=True).stdout.strip() for s, c in (("base", a.base), ("head", a.head))}
    log = subprocess.run(["git", "-C", ROOT, "log", "--format=%h %s", f"{commits['base']}..{commits['head']}", "--",
                          "kernelc"], capture_output=True, text=True).stdout.splitlines()
    same_tree = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", commits["base"], commits["head"], "--",
                                "kernelc"]).returncode == 0
    tuts = a.only.split(",")
    jobs = [j for j in all_jobs(tuts) if a.match in j["label"]]
    head_knobs = dict(k.split("=", 1) for k in a.head_knob)
    if a.limit:
        jobs = jobs[:a.limit]
    for i, j in enumerate(jobs):
        j["i"] = i
    res = {"tool": "commit_compare", "base": commits["base"], "head": commits["head"], "tutorials": tuts,
           "kernelc_commits_between": log, "kernelc_tree_identical": same_tree, "n_jobs": len(jobs),
           "match": a.match, "head_knobs": head_knobs}
    if same_tree and not head_knobs:
        res["summary"] = {"identical": len(jobs), "note": "kernelc trees identical: nothing compiled"}
        print(f"kernelc identical between {commits['base'][:8]} and {commits['head'][:8]}: {len(jobs)} kernels "
              "compile the same (nothing compiled)")
    else:
        work = tempfile.mkdtemp(prefix="commit_compare_")
        mods = {}
        for t in tuts:
            mods[t] = os.path.join(work, f"tut{t}_kernels.py")
            with open(mods[t], "w") as f:
                f.write(ts.kernel_module(os.path.join(a.tutorials, FILES[t])))
        n = a.chunks or a.jobs
        tasks = []
        for side in ("base", "head"):
            root = os.path.join(work, side)
            _export(commits[side], root)
            for c in range(n):
                part = jobs[c::n]
                if part:
                    tasks.append((side, root, part))
        t0 = time.time()
        rows = {"base": {}, "head": {}}
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            futs = {ex.submit(_side, root, part, mods, os.path.join(a.keep or work, side), a.timeout,
                              head_knobs if side == "head" else None): side for side, root, part in tasks}
            for fut in concurrent.futures.as_completed(futs):
                rows[futs[fut]].update(fut.result())
                print(f"[{time.time() - t0:6.0f} s] a {futs[fut]} chunk done", flush=True)
        res["rows"] = compare(jobs, rows["base"], rows["head"], os.path.join(a.keep or work, "base"),
                              os.path.join(a.keep or work, "head"))
        res["compile_s"] = {s: round(sum(r.get("s", 0) for r in rows[s].values()), 1) for s in rows}
        res["wall_s"] = round(time.time() - t0, 1)
        st = collections.Counter(r["status"] for r in res["rows"])
        res["summary"] = dict(st)
        res["differs"] = [f"{r['tut']} {r['label']}" for r in res["rows"] if r["status"] in ("differs", "error differs")]
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(res["summary"]))
        for r in res["rows"]:
            if r["status"] in ("differs", "error differs"):
                print(f"{r['tut']} {r['label']}: {r['status']}; ptx same {r.get('ptx_same')}, sass same "
                      f"{r.get('sass_same')}; base has more {r.get('base_has_more')}, head has more "
                      f"{r.get('head_has_more')}{'; ' + str(r.get('head_error')) if 'head_error' in r else ''}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
