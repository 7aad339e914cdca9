"""Compile time: cold (empty cache, fresh process) and warm (disk cache) first-launch latency of
vector add and a matmul, kernelc vs Triton, each in its own subprocess (GPU).

``--cpu --tutorials DIR``: no GPU; the compile of the tutorial kernels whose first calls were slower than
Triton's (04's ``_seeded_dropout``, 06's ``_attn_bwd``, 08's ``grouped_matmul_tma_kernel`` at its 16 autotune
configs), kernelc against Triton 3.6, each in a fresh process (``bench/results/compile_time_cpu.json``)::

    python3 -m bench compile --cpu --tutorials DIR [--repeats 5] [--kernels 04,06,08] [--timeline]
        [--triton-site /work/ext/triton_site] [--name compile_time_cpu]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import write_results  # noqa: E402

CHILD = r"""
import os, sys, time, json
sys.path.insert(0, {root!r})
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
which, kernel = sys.argv[1], sys.argv[2]
if which == "kernelc":
    from examples.kernels import vector_add as V, matmul as M
else:
    from bench.common import triton_twin
    V, M = triton_twin("vector_add"), triton_twin("matmul")
x = torch.rand(4096, device="cuda"); y = torch.rand(4096, device="cuda"); o = torch.empty_like(x)
a = torch.randn(512, 512, device="cuda", dtype=torch.float16); b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
c = torch.empty(512, 512, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
t0 = time.perf_counter()
if kernel == "vector_add":
    V.add_kernel[(4,)](x, y, o, 4096, BLOCK_SIZE=1024)
else:
    M.matmul_kernel[(16,)](a, b, c, 512, 512, 512, 512, 1, 512, 1, 512, 1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                           BLOCK_SIZE_K=32, GROUP_SIZE_M=8, num_warps=8, num_stages=3)
torch.cuda.synchronize()
secs = time.perf_counter() - t0
load = None
if which == "kernelc":
    k = V.add_kernel if kernel == "vector_add" else M.matmul_kernel
    ent = next(iter(k._cuda_state["cache"].values()))
    load = ent.compiled.timings.get("disk_cache_load")
print(json.dumps({{"seconds": secs, "disk_load": load}}))
"""


def run(which, kernel, cache):
    env = dict(os.environ, KERNELC_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
    p = subprocess.run([sys.executable, "-c", CHILD.format(root=ROOT), which, kernel], env=env, capture_output=True,
                       text=True, timeout=300)
    if p.returncode:
        return {"error": p.stderr[-500:]}, None
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out["seconds"], out.get("disk_load")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="compile tutorial kernels on the CPU, kernelc against Triton")
    ap.add_argument("--tutorials", help="folder holding Triton 3.6's tutorials (with --cpu)")
    ap.add_argument("--kernels", help="with --cpu: a comma-separated subset of 04,06,08")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeline", action="store_true", help="with --cpu: the stages of each threaded compile")
    ap.add_argument("--triton-site", default=os.environ.get("TRITON_SITE") or
                    ("/work/ext/triton_site" if os.path.isdir("/work/ext/triton_site") else None))
    ap.add_argument("--name", default="compile_time_cpu", help="with --cpu: the results file's name")
    ap.add_argument("--results-dir", help="where the results file goes (default bench/results)")
    ap.add_argument("--kernelc-roots", default=ROOT,
                    help="with --cpu: comma-separated checkouts whose kernelc to compile with (before/after in one "
                         "run, interleaved; default: this one)")
    a = ap.parse_args(argv)
    if a.cpu:
        if not a.tutorials:
            ap.error("--cpu needs --tutorials DIR")
        cpu_main(a)
        return
    rows = []
    for kernel in ("vector_add", "matmul"):
        for which in ("kernelc", "triton"):
            cache = tempfile.mkdtemp(prefix=f"cc_{which}_")
            cold, _ = run(which, kernel, cache)
            warm, load = run(which, kernel, cache)
            rows.append({"kernel": kernel, "compiler": which, "cold_s": cold, "warm_s": warm,
                         "disk_load_ms": load * 1e3 if load is not None else None})
    write_results("compile_time", rows, {
        "targets": "cold vector add <= 0.5 s, matmul <= 1.0 s, warm load from disk <= 10 ms",
        "note": "cold/warm_s: first launch in a fresh process (CUDA module load and one-time driver/runtime "
                "setup included); disk_load_ms: reading the compiled kernel from the disk cache"})


# --- CPU: compile times of tutorial kernels, kernelc against Triton 3.6 -------------------------------------
#
# ``--cpu --tutorials DIR``: the kernels whose first calls were slower than Triton's on an H100 (issue #20),
# compiled for sm_90a with no GPU, each measurement in a fresh process with an empty cache (so a first call's
# one-time imports count, as they do on a GPU):
#   04  _seeded_dropout (BLOCK_SIZE 1024, 4 warps), as tutorial 04 launches it;
#   06  _attn_bwd (HEAD_DIM 64, causal, 4 warps, 5 stages), as tutorial 06's backward launches it;
#   08  grouped_matmul_tma_kernel, its 16 autotune configs: one after another (Triton's autotuner compiles them
#       so), and for kernelc also on threads as kernelc's autotuner does (runtime/tuning.py), with a timeline.
# Triton compiles with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 64))`` in its own process
# (``--triton-site``: a directory with Triton on it, for a machine where it is not installed).

NUM_SMS = 132
_SIG04 = {"x_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32", "p": "fp32", "seed": "i32"}
_SIG06 = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "DO": "*fp16", "DQ": "*fp16",
          "DK": "*fp16", "DV": "*fp16", "M": "*fp32", "D": "*fp32", "stride_z": "i32", "stride_h": "i32",
          "stride_tok": "i32", "H": "i32", "N_CTX": "i32"}
_SIG08 = {"group_a_ptrs": "*i64", "group_b_ptrs": "*i64", "group_c_ptrs": "*i64", "group_gemm_sizes": "*i32",
          "g_lds": "*i32", "group_size": "i32"}


def tutorial_cases():
    """name -> (tutorial file, kernel, signature, [(constexprs, num_warps, num_stages)], arguments divisible
    by 16 (the runtimes' specialisation for torch tensors and these sizes))."""
    c06 = dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2, HEAD_DIM=64, CAUSAL=True,
               stride_d=1)
    c08 = [(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, NUM_SM=NUM_SMS, FP8=False), w, s)
           for bn in (128, 256) for bk in (64, 128) for s in (3, 4) for w in (4, 8)]
    sig09 = dict({n: "*fp16" for n in ("a_ptr", "b_ptr", "c_ptr")},
                 **{n: "i32" for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                                       "stride_cm", "stride_cn")})
    div09 = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]
    # tutorial 09's matmul_get_configs(): 24 configs per kernel
    c09 = [(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8), w, s)
           for bn in (128, 256) for bk in (64, 128) for s in (2, 3, 4) for w in (4, 8)]
    return {
        "09 matmul_kernel": ("09-persistent-matmul.py", "matmul_kernel", sig09, c09, div09),
        "09 matmul_kernel_persistent": ("09-persistent-matmul.py", "matmul_kernel_persistent", sig09,
                                        [(dict(cx, NUM_SMS=NUM_SMS), w, s) for cx, w, s in c09], div09),
        "04 _seeded_dropout": ("04-low-memory-dropout.py", "_seeded_dropout", _SIG04, [({"BLOCK_SIZE": 1024}, 4, 3)],
                               ["x_ptr", "output_ptr"]),   # n_elements = 10 in the tutorial
        "06 _attn_bwd": ("06-fused-attention.py", "_attn_bwd", _SIG06, [(c06, 4, 5)],
                         [k for k, t in _SIG06.items() if t.startswith("*")] +
                         ["stride_z", "stride_h", "stride_tok", "H", "N_CTX"]),
        "08 grouped_matmul_tma_kernel": ("08-grouped-gemm.py", "grouped_matmul_tma_kernel", _SIG08, c08,
                                         [k for k, t in _SIG08.items() if t.startswith("*")]),
    }


def _kernel_module(path: str) -> str:
    """The ``triton`` imports and the ``@jit`` functions of a tutorial, autotune decorators dropped."""
    import ast
    src = open(path).read()
    keep = []
    for node in ast.parse(src).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = getattr(node, "module", None) or ""
            if mod == "triton" or mod.startswith("triton.language") or \
                    any(a.name in ("triton", "triton.language") for a in node.names):
                keep.append(ast.get_source_segment(src, node))
        elif isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            body = ast.get_source_segment(src, node)
            keep.append("@triton.jit\n" + body[body.index("def "):])
    return "\n\n".join(keep) + "\n"


_CPU_CHILD_KERNELC = r"""
import json, os, sys, threading, time
a = json.loads(sys.argv[1])
t_start = time.perf_counter()
sys.path.insert(0, a["root"])
from kernelc.compat import install
install()
import importlib.util
spec = importlib.util.spec_from_file_location("bench_compile_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, a["fn"])
from kernelc.compiler.backend import parse_target
from kernelc.runtime.cache import cached_compile
from kernelc.errors import OutOfResources
t_import = time.perf_counter() - t_start
events = []
if a["timeline"]:
    # (thread, stage, start, end) of every stage of every compile, by wrapping the stage functions
    import kernelc.compiler.compiler as C, kernelc.compiler.codegen as CG, kernelc.compiler.backend as B
    import kernelc.compiler.backend.llvm_pool as LP, kernelc.compiler.backend.ptxas as PX
    def wrap(owner, attr, stage):
        f = getattr(owner, attr)
        def w(*args, **kw):
            t0 = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                events.append((threading.get_ident(), stage, t0, time.perf_counter()))
        setattr(owner, attr, w)
    import kernelc.compiler.backend.llvm as LL
    wrap(C, "generate_ir", "frontend"); wrap(C, "run_passes", "passes"); wrap(CG, "lower_to_llvm", "lower")
    wrap(B, "_finish", "finish"); wrap(C, "compile", "compile")
    if hasattr(LP, "to_cubin"):   # LLVM and the assembler, here or in a worker process
        wrap(LP, "to_cubin", "backend"); wrap(LL, "llvm_to_ptx", "llvm here"); wrap(LP, "assemble", "assemble")
        f_in = LP._in_worker
        def in_worker(kind, *args):
            t0 = time.perf_counter()
            try:
                return f_in(kind, *args)
            finally:
                events.append((threading.get_ident(), "worker " + kind, t0, time.perf_counter()))
        LP._in_worker = in_worker
    else:                         # an older checkout: LLVM here or in a worker, the assembler here
        wrap(LP, "to_ptx", "llvm"); wrap(PX, "ptx_to_cubin", "ptxas")
tgt = parse_target("sm_90a")
div = {n: 16 for n in a["div"]}
for n, t in a["sig"].items():
    if t.startswith("*"):
        div.setdefault(n, 1)
def one(cfg):
    cx, w, s = cfg
    t0 = time.perf_counter()
    try:
        ck = cached_compile(fn, a["sig"], cx, div, tuple(a.get("eq1", ())), w, s, tgt)
        return {"s": time.perf_counter() - t0, "regs": ck.n_regs, "timings": ck.timings}
    except OutOfResources as e:
        return {"s": time.perf_counter() - t0, "error": "OutOfResources"}
t0 = time.perf_counter()
if a["threads"]:
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(a["configs"])))) as ex:
        rows = list(ex.map(one, a["configs"]))
else:
    rows = [one(c) for c in a["configs"]]
wall = time.perf_counter() - t0
threads = sorted({e[0] for e in events})
tl = [(threads.index(th), st, round(s - t0, 4), round(e - t0, 4)) for th, st, s, e in events]
print(json.dumps({"wall_s": wall, "import_s": t_import, "configs": rows, "timeline": tl}))
"""

_CPU_CHILD_TRITON = r"""
import json, sys, time
a = json.loads(sys.argv[1])
t_start = time.perf_counter()
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
import importlib.util
spec = importlib.util.spec_from_file_location("bench_compile_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, a["fn"])
t_import = time.perf_counter() - t_start
names = fn.arg_names
rows = []
t0 = time.perf_counter()
for cx, w, s in a["configs"]:
    eq1 = a.get("eq1", [])   # integer arguments equal to 1: Triton specialises them as constants
    sig = {n: (a["sig"][n] if n in a["sig"] and n not in eq1 else "constexpr") for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n in a["div"]}
    src = ASTSource(fn, signature=sig, constexprs={(names.index(k),): v for k, v in dict(cx, **{n: 1 for n in eq1}).items()},
                    attrs=attrs)
    t1 = time.perf_counter()
    ck = triton.compile(src, target=GPUTarget("cuda", 90, 64), options={"num_warps": w, "num_stages": s})
    rows.append({"s": time.perf_counter() - t1, "shared": ck.metadata.shared})
print(json.dumps({"wall_s": time.perf_counter() - t0, "import_s": t_import, "configs": rows,
                  "version": triton.__version__}))
"""


# integer arguments the runtimes specialise as equal to 1 in the tutorial's own calls (contiguous A, B, C): without
# them 09's BN 256 / 4-warp configs load element by element and assemble for minutes (docs/triton-tutorials.md)
_EQ1 = {"09 matmul_kernel": ["stride_ak", "stride_bn", "stride_cn"],
        "09 matmul_kernel_persistent": ["stride_ak", "stride_bn", "stride_cn"]}


def _cpu_child(impl, mod_path, fn, sig, configs, div, threads, timeline, triton_site, timeout=600, root=ROOT, eq1=()):
    work = tempfile.mkdtemp(prefix=f"bc_{impl}_")
    env = dict(os.environ, KERNELC_CACHE_DIR=os.path.join(work, "kc"), TRITON_CACHE_DIR=os.path.join(work, "tc"),
               TRITON_HOME=work)
    env.pop("KERNELC_INTERPRET", None)
    if impl == "triton" and triton_site:
        env["PYTHONPATH"] = triton_site
    payload = json.dumps(dict(root=root, mod=mod_path, fn=fn, sig=sig, configs=configs, div=div, threads=threads,
                              timeline=timeline, eq1=list(eq1)))
    child = _CPU_CHILD_TRITON if impl == "triton" else _CPU_CHILD_KERNELC
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", child, payload], env=env, capture_output=True, text=True,
                           timeout=timeout, cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if p.returncode:
        return {"error": p.stderr.strip()[-1500:]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    return out


def _machine() -> dict:
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "load_1min": os.getloadavg()[0], "host": platform.node()}


def _timeline_summary(tl):
    """Per stage: summed seconds over the compiles, and the span from the first start to the last end."""
    out = {}
    for _, st, s, e in tl:
        d = out.setdefault(st, {"sum_s": 0.0, "first_start": s, "last_end": e, "n": 0})
        d["sum_s"] += e - s
        d["n"] += 1
        d["first_start"] = min(d["first_start"], s)
        d["last_end"] = max(d["last_end"], e)
    return {k: {kk: round(vv, 3) if isinstance(vv, float) else vv for kk, vv in v.items()} for k, v in out.items()}


def cpu_main(a) -> None:
    import statistics
    cases = tutorial_cases()
    if a.kernels:
        cases = {k: v for k, v in cases.items() if k.split()[0] in a.kernels.split(",")}
    mod_dir = tempfile.mkdtemp(prefix="bc_mods_")
    rows = []
    for name, (tfile, fn, sig, configs, div) in cases.items():
        path = os.path.join(a.tutorials, tfile)
        mod_path = os.path.join(mod_dir, tfile.replace("-", "_"))
        with open(mod_path, "w") as f:
            f.write(_kernel_module(path))
        roots = a.kernelc_roots.split(",")
        kc = ["kernelc" if r == roots[0] and len(roots) == 1 else f"kernelc@{r}" for r in roots]
        modes = [(k, False) for k in kc] + [("triton", False)] + ([(k, True) for k in kc] if len(configs) > 1 else [])
        per = {m: [] for m in modes}
        last = {}
        for r in range(a.repeats):
            # interleaved, so that a change in the machine's load hits both
            for impl, threads in (modes if r % 2 == 0 else modes[::-1]):
                res = _cpu_child("triton" if impl == "triton" else "kernelc", mod_path, fn, sig, configs, div,
                                 threads, a.timeline and threads, a.triton_site,
                                 root=impl.split("@", 1)[1] if "@" in impl else ROOT, eq1=_EQ1.get(name, ()))
                if "error" in res:
                    print(f"{name} {impl}{' threads' if threads else ''}: {res['error']}", file=sys.stderr)
                    continue
                per[(impl, threads)].append(res)
                last[(impl, threads)] = res
        for (impl, threads), runs in per.items():
            if not runs:
                continue
            row = {"kernel": name, "compiler": impl, "configs": len(configs),
                   "mode": "threads" if threads else "one after another",
                   "repeats": len(runs), "median_s": statistics.median(r["wall_s"] for r in runs),
                   "min_s": min(r["wall_s"] for r in runs),
                   "import_s": statistics.median(r["import_s"] for r in runs),
                   "per_config_s": [round(statistics.median(r["configs"][i]["s"] for r in runs), 3)
                                    for i in range(len(configs))],
                   "failed": sum(1 for c in runs[-1]["configs"] if c.get("error"))}
            if impl.startswith("kernelc") and not threads:
                keys = ("frontend", "tile_passes", "lower_to_llvm", "llvm_opt", "llc", "ptxas", "cubin_info",
                        "source_map")
                row["stages_s"] = {k: round(statistics.median(
                    sum(c.get("timings", {}).get(k, 0.0) for c in r["configs"]) for r in runs), 3) for k in keys}
            if threads and a.timeline:
                row["timeline"] = _timeline_summary(runs[-1]["timeline"])
                row["timeline_events"] = runs[-1]["timeline"]
            rows.append(row)
    for r in rows:
        print(f"{r['kernel']:32s} {r['compiler']:8s} {r['mode']:18s} median {r['median_s']:.3f} s "
              f"(min {r['min_s']:.3f}, {r['repeats']} runs){' stages ' + str(r['stages_s']) if 'stages_s' in r else ''}")
    write_results(a.name, [{k: v for k, v in r.items() if k != "timeline_events"} for r in rows],
                  {"machine": _machine(), "tutorials": a.tutorials,
                   "note": "CPU only: compile of each kernel for sm_90a in a fresh process with an empty cache "
                           "(median of --repeats runs, kernelc and Triton interleaved); 08: its 16 autotune configs, "
                           "one after another, and for kernelc on threads as its autotuner compiles them",
                   "timelines": {f"{r['kernel']} {r['compiler']} {r['mode']}": r["timeline_events"]
                                 for r in rows if "timeline_events" in r}},
                  **({"results_dir": a.results_dir} if a.results_dir else {}))


if __name__ == "__main__":
    main()
