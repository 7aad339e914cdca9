"""Tutorials 08 (grouped GEMM) and 09 (persistent matmul): every kernel at every autotune config of the
tutorial, compiled for sm_90a by kernelc and by Triton 3.6 on CPU, side by side. One command:

    python3 bench/experiments/tutorial_gaps/tutorial_sweep.py --tutorials DIR [--only 08,09]
        [--kernels grouped_matmul_tma_kernel,...] [--configs N] [--jobs J] [--out FILE.json]

``DIR`` holds Triton 3.6's ``08-grouped-gemm.py`` / ``09-persistent-matmul.py`` (not part of this
repository; only their imports and ``@triton.jit`` functions are taken, autotune decorators dropped).
The argument types and constexprs are those of the tutorials' benchmarks on an H100 (132 SMs): 08 at
its ``group_size`` = 4 tables, 09 at M = N = 8192, K = 512 fp16 (``python 09-persistent-matmul.py``'s
default), with Triton's runtime specialisation (16-divisible integers and pointers; integers equal to 1
become constants). Each compile runs in a fresh process with empty caches, so its time is a cold first
compile: wall and CPU seconds of the compile call (ptxas included; Triton's C launcher stub, which it
builds on the first launch, is not). Per compile: registers, spills, shared memory, the SASS opcode mix
of the whole kernel and of its main loop (the innermost loop holding the MMAs), and whether tensor maps
are built on the device (``tensormap.replace`` in the PTX).

Writes JSON (every row) and a Markdown summary next to it. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
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
NUM_SMS = 132   # H100 SXM

# --- the tutorials' autotune configs and benchmark arguments ---------------------------------------


def _cfg(kw, w=4, s=3):
    return {"kw": kw, "num_warps": w, "num_stages": s}


def _configs_08():
    return [_cfg(dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, NUM_SM=sm))
            for bm, bn, bk, sm in ((128, 128, 32, 84), (128, 128, 32, 128), (64, 64, 32, 84), (64, 64, 32, 128),
                                   (128, 128, 64, NUM_SMS), (64, 128, 64, NUM_SMS))]


def _configs_08_tma():
    return [_cfg(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk), w, s)
            for bn in (128, 256) for bk in (64, 128) for s in (3, 4) for w in (4, 8)]


def _configs_09(subtile=False):
    out = []
    for bn in (128, 256):
        for bk in (64, 128):
            for s in (2, 3, 4):
                for w in (4, 8):
                    for st in ((True, False) if subtile else (None,)):
                        kw = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8)
                        if st is not None:
                            kw["EPILOGUE_SUBTILE"] = st
                        out.append(_cfg(kw, w, s))
    return out


_G08 = {"group_a_ptrs": "*i64", "group_b_ptrs": "*i64", "group_c_ptrs": "*i64", "group_gemm_sizes": "*i32",
        "g_lds": "*i32", "group_size": "i32"}
_MNK = {"M": "i32", "N": "i32", "K": "i32"}
M09, N09, K09 = 8192, 8192, 512
# name -> (tutorial, signature builder(cfg) -> (sig, constexprs), configs)
# 09's naive/persistent kernels get b.T of a contiguous (N, K) tensor: stride_bk = 1, stride_bn = K.
_PTR09 = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **_MNK, "stride_am": "i32", "stride_bn": "i32",
          "stride_cm": "i32"}
_ONES09 = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1}


def _desc_sig(kw, subtile=False):
    bm, bn, bk = kw["BLOCK_SIZE_M"], kw["BLOCK_SIZE_N"], kw["BLOCK_SIZE_K"]
    return {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bn}, {bk}]>",
            "c_desc": f"tensordesc<fp16[{bm}, {bn // 2 if subtile else bn}]>", **_MNK}


KERNELS = {
    "grouped_matmul_kernel": ("08", lambda kw: (dict(_G08), {}), _configs_08),
    "grouped_matmul_tma_kernel": ("08", lambda kw: (dict(_G08), {"NUM_SM": NUM_SMS, "FP8": False}), _configs_08_tma),
    "matmul_kernel": ("09", lambda kw: (dict(_PTR09), dict(_ONES09)), _configs_09),
    "matmul_kernel_persistent": ("09", lambda kw: (dict(_PTR09), dict(_ONES09, NUM_SMS=NUM_SMS)), _configs_09),
    "matmul_kernel_tma": ("09", lambda kw: (_desc_sig(kw), {"FP8_OUTPUT": False, "WARP_SPECIALIZE": False}),
                          _configs_09),
    "matmul_kernel_tma_persistent": (
        "09", lambda kw: (_desc_sig(kw, kw["EPILOGUE_SUBTILE"]),
                          {"FP8_OUTPUT": False, "NUM_SMS": NUM_SMS, "WARP_SPECIALIZE": False}),
        lambda: _configs_09(subtile=True)),
    # on Hopper the tutorial runs it twice: ws=False with flatten=True (all 48 configs), and ws=True with
    # flatten=False (its prune drops the EPILOGUE_SUBTILE=True half)
    "matmul_kernel_descriptor_persistent": (
        "09", lambda kw: ({"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **_MNK},
                          {"NUM_SMS": NUM_SMS, "WARP_SPECIALIZE": False, "FLATTEN": True}),
        lambda: _configs_09(subtile=True)),
    "matmul_kernel_descriptor_persistent_ws": (
        "09", lambda kw: ({"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **_MNK},
                          {"NUM_SMS": NUM_SMS, "WARP_SPECIALIZE": True, "FLATTEN": False}),
        lambda: [c for c in _configs_09(subtile=True) if not c["kw"]["EPILOGUE_SUBTILE"]]),
}
TUTORIAL_FILES = {"08": "08-grouped-gemm.py", "09": "09-persistent-matmul.py"}
UNALIGNED = {"group_size"}   # 4: neither 1 nor a multiple of 16


def kernel_module(path: str) -> str:
    """The ``triton`` imports and every ``@triton.jit`` function of ``path``, as ``@triton.jit`` only
    (autotune and ``launch_metadata`` dropped: they are host code)."""
    src = open(path).read()
    keep = []
    for node in ast.parse(src).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = getattr(node, "module", None) or ""
            if (mod == "triton" or mod.startswith("triton.language")
                    or any(a.name in ("triton", "triton.language") for a in node.names)):
                keep.append(ast.get_source_segment(src, node))
        elif isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            body = ast.get_source_segment(src, node)
            keep.append("@triton.jit\n" + body[body.index("def "):])
    return "\n\n".join(keep) + "\n"


# --- one compile, in a child process ----------------------------------------------------------------

_CHILD_KERNELC = r"""
import importlib.util, json, resource, sys, time
a = json.loads(sys.argv[1])
t_import = time.perf_counter()
from kernelc.compat import install
install()
from kernelc.compiler.compiler import compile as kcompile
spec = importlib.util.spec_from_file_location("tutorial_sweep_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
t_import = time.perf_counter() - t_import
ru = lambda: sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                 for f in ("ru_utime", "ru_stime"))
c0, t0 = ru(), time.perf_counter()
ck = kcompile(getattr(mod, a["fn"]), a["sig"], a["cx"], "sm_90a", a["num_warps"], a["num_stages"],
              divisibility=a["div"], equal_to_1=tuple(a["eq1"]))
wall, cpu = time.perf_counter() - t0, ru() - c0
json.dump({"cubin": ck.asm["cubin"].hex(), "ptx": ck.asm["ptx"], "name": ck.name, "shared": ck.shared,
           "wall_s": wall, "cpu_s": cpu, "import_s": t_import, "timings": ck.timings,
           "global_scratch": getattr(ck, "global_scratch_bytes", 0), "extra_warps": ck.extra_warps,
           "notes": [str(n) for n in (ck.compile_log or [])][:40]}, sys.stdout)
"""

_CHILD_TRITON = r"""
import importlib.util, json, resource, sys, time
a = json.loads(sys.argv[1])
t_import = time.perf_counter()
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("tutorial_sweep_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
t_import = time.perf_counter() - t_import
fn = getattr(mod, a["fn"])
names = fn.arg_names
sig, cx = {}, {}
for i, n in enumerate(names):
    if n in a["sig"]:
        sig[n] = a["sig"][n]
    else:
        sig[n] = "constexpr"
        cx[(i,)] = a["cx"].get(n, a["eq1_values"].get(n))
attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if a["div"].get(n) == 16}
src = ASTSource(fn, signature=sig, constexprs=cx, attrs=attrs)
ru = lambda: sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                 for f in ("ru_utime", "ru_stime"))
c0, t0 = ru(), time.perf_counter()
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                    options={"num_warps": a["num_warps"], "num_stages": a["num_stages"]})
wall, cpu = time.perf_counter() - t0, ru() - c0
md = ck.metadata
json.dump({"cubin": ck.asm["cubin"].hex(), "ptx": ck.asm["ptx"], "name": md.name, "shared": md.shared,
           "wall_s": wall, "cpu_s": cpu, "import_s": t_import, "global_scratch": getattr(md, "global_scratch_size", 0),
           "extra_warps": 0, "version": triton.__version__}, sys.stdout)
"""


def compile_one(impl: str, mod_path: str, fn: str, sig: dict, cx: dict, eq1: dict, num_warps: int, num_stages: int,
                triton_site: str, timeout: int) -> dict:
    div = {n: (1 if n in UNALIGNED else 16) for n, t in sig.items() if t.startswith(("*", "i"))}
    for n, t in sig.items():
        if t.startswith("tensordesc"):
            div[n] = 16
    payload = dict(mod=mod_path, fn=fn, sig=sig, cx=cx, div=div, eq1=sorted(eq1), eq1_values=eq1,
                   num_warps=num_warps, num_stages=num_stages)
    if impl == "kernelc":
        # equal-to-1 integers are parameters of kernelc's signature that the compiler folds to 1
        payload["sig"] = dict(sig, **{n: "i32" for n in eq1})
    work = tempfile.mkdtemp(prefix=f"sweep_{impl}_")
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(work, "tc"), KERNELC_CACHE_DIR=os.path.join(work, "kc"),
               TRITON_HOME=work)
    env.pop("KERNELC_INTERPRET", None)
    env["PYTHONPATH"] = triton_site if impl == "triton" else ROOT
    child = _CHILD_TRITON if impl == "triton" else _CHILD_KERNELC
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", child, json.dumps(payload)], env=env, capture_output=True,
                           text=True, cwd=work, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if r.returncode:
        tail = r.stderr.strip().splitlines()
        return {"error": "\n".join(tail[-6:])[-1500:]}
    res = json.loads(r.stdout)
    res["process_s"] = time.perf_counter() - t0
    return res


# --- reading the binaries ---------------------------------------------------------------------------

_LABEL = re.compile(r"^\.L_x_(\d+):")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*$")
MMA = ("HGMMA", "HMMA", "QGMMA")
CATEGORIES = {
    "LDG": lambda o: o.startswith("LDG") and not o.startswith("LDGSTS") and not o.startswith("LDGDEPBAR"),
    "LDGSTS": lambda o: o.startswith("LDGSTS"),
    "UTMALDG": lambda o: o.startswith("UTMALDG"),
    "UTMASTG": lambda o: o.startswith("UTMASTG"),
    "UTMACCTL": lambda o: o.startswith("UTMACCTL"),
    "HGMMA": lambda o: o.startswith("HGMMA"),
    "HMMA": lambda o: o.startswith("HMMA"),
    "WARPGROUP": lambda o: o.startswith("WARPGROUP"),      # wgmma arrive / wait (DEPBAR)
    "LDGDEPBAR/DEPBAR": lambda o: o.startswith(("LDGDEPBAR", "DEPBAR")),
    "SYNCS": lambda o: o.startswith("SYNCS"),              # mbarrier ops
    "BAR": lambda o: o.startswith("BAR"),
    "LDS": lambda o: o.startswith("LDS") and not o.startswith("LDSM"),
    "LDSM": lambda o: o.startswith("LDSM"),
    "STS": lambda o: o.startswith("STS"),
    "STG": lambda o: o.startswith("STG"),
    "STL/LDL": lambda o: o.startswith(("STL", "LDL")),
    "FENCE": lambda o: o.startswith(("FENCE", "MEMBAR", "CCTL")),
}


def sass_functions(cubin: bytes):
    """[(pc, opcode, operands, labels-at-this-pc)] of the kernel, from ``nvdisasm -c``."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from cubintools.sass import disassemble
    text = disassemble(cubin, line_info=False)
    out, pending, labels = [], [], {}
    for raw in text.splitlines():
        s = raw.strip()
        m = _LABEL.match(s)
        if m:
            pending.append(m.group(1))
            continue
        m = _INSTR.match(raw)
        if m:
            pc = int(m.group(1), 16)
            body = m.group(2).rstrip(" ;")
            if body.startswith("@"):
                body = body.partition(" ")[2].lstrip()
            op, _, ops = body.partition(" ")
            for lab in pending:
                labels[lab] = pc
            pending = []
            out.append((pc, op, ops))
    return out, labels


def main_loop(instrs, labels):
    """(start, end) pcs of the innermost backward-branch loop holding the most MMA instructions."""
    loops = []
    for pc, op, ops in instrs:
        if not op.startswith("BRA"):
            continue
        m = re.search(r"`\(\.L_x_(\d+)\)", ops)
        tgt = labels.get(m.group(1)) if m else None
        if tgt is None:
            m = re.search(r"0x([0-9a-f]+)", ops)
            tgt = int(m.group(1), 16) if m else None
        if tgt is not None and tgt <= pc:
            n_mma = sum(1 for p, o, _ in instrs if tgt <= p <= pc and o.startswith(MMA))
            if n_mma:
                loops.append((tgt, pc, n_mma))
    if not loops:
        return None
    best = max(l[2] for l in loops)
    # innermost: the shortest loop among those with the most MMAs
    cands = [l for l in loops if l[2] == best]
    return min(cands, key=lambda l: l[1] - l[0])[:2]


def categorise(ops) -> dict:
    out = {}
    for name, pred in CATEGORIES.items():
        n = sum(1 for o in ops if pred(o))
        if n:
            out[name] = n
    return out


def summarise(res: dict, keep: str = "", tag: str = "") -> dict:
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from cubintools import inspect_cubin
    cubin = bytes.fromhex(res.pop("cubin"))
    ptx = res.pop("ptx")
    if keep:
        os.makedirs(keep, exist_ok=True)
        with open(os.path.join(keep, tag + ".cubin"), "wb") as f:
            f.write(cubin)
        with open(os.path.join(keep, tag + ".ptx"), "w") as f:
            f.write(ptx)
    info = inspect_cubin(cubin)
    f = info.kernel(res["name"] if res["name"] in info.functions else None)
    instrs, labels = sass_functions(cubin)
    ops = [o for _, o, _ in instrs]
    loop = main_loop(instrs, labels)
    loop_ops = [o for p, o, _ in instrs if loop and loop[0] <= p <= loop[1]]
    res.update(n_regs=f.n_regs, local_bytes=f.frame_size, sass_total=len(ops), sass=categorise(ops),
               main_loop={"instructions": len(loop_ops), **categorise(loop_ops)} if loop else None,
               mma_shapes=sorted({o for o in ops if o.startswith(MMA)}),
               wgmma_wait=sorted(set(re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx))),
               # the epilogue's stores inside the MMA loop: the tile loop and the K loop are one (flattened)
               loop_holds_epilogue=any(o.startswith(("STG", "UTMASTG", "UBLKCP")) for o in loop_ops),
               threads=int(next(iter(re.findall(r"\.(?:maxntid|reqntid)\s+(\d+)", ptx)), 0)),
               device_tensor_maps=len(re.findall(r"tensormap\.replace", ptx)) > 0,
               tensormap_fences=len(re.findall(r"fence\.proxy\.tensormap", ptx)),
               ptx_lines=ptx.count("\n"))
    return res


# --- the sweep ---------------------------------------------------------------------------------------

def jobs_for(names, n_configs, pick=()):
    for name in names:
        tut, sigf, cfgs = KERNELS[name]
        cfgs = cfgs()
        for i, c in enumerate(cfgs[:n_configs] if n_configs else cfgs):
            if pick and i not in pick:
                continue
            sig, cx = sigf(c["kw"])
            eq1 = {k: v for k, v in cx.items() if k.startswith("stride_")}
            cx = {k: v for k, v in cx.items() if k not in eq1}
            cx.update(c["kw"])
            fn = name[:-3] if name.endswith("_ws") else name
            yield dict(kernel=name, fn=fn, tutorial=tut, config=i, constexprs=c["kw"], num_warps=c["num_warps"],
                       num_stages=c["num_stages"], sig=sig, cx=cx, eq1=eq1)


def run_job(job, mods, triton_site, timeout, keep="", impls=("kernelc", "triton")):
    row = {k: job[k] for k in ("kernel", "tutorial", "config", "constexprs", "num_warps", "num_stages")}
    for impl in impls:
        res = compile_one(impl, mods[job["tutorial"]], job["fn"], job["sig"], job["cx"], job["eq1"],
                          job["num_warps"], job["num_stages"], triton_site, timeout)
        tag = f"{job['kernel']}.{job['config']}.{impl}"
        row[impl] = res if "error" in res else summarise(res, keep, tag)
    return row


def _cfg_label(r):
    kw = r["constexprs"]
    s = f"{kw.get('BLOCK_SIZE_M')}x{kw.get('BLOCK_SIZE_N')}x{kw.get('BLOCK_SIZE_K')} w{r['num_warps']} s{r['num_stages']}"
    if "NUM_SM" in kw:
        s += f" sm{kw['NUM_SM']}"
    if kw.get("EPILOGUE_SUBTILE"):
        s += " sub"
    return s


def _loop(d):
    ml = d.get("main_loop") or {}
    keys = ("LDG", "LDGSTS", "UTMALDG", "HGMMA", "HMMA", "WARPGROUP", "SYNCS", "BAR", "STL/LDL")
    return " ".join(f"{k}{ml[k]}" for k in keys if ml.get(k)) + f" ({ml.get('instructions', 0)})" if ml else "none"


def markdown(rows) -> str:
    lines = ["| kernel | config | regs k/t | spill B k/t | smem k/t | main loop kernelc | main loop Triton | "
             "dev maps k/t | compile CPU s k/t |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k, t = r["kernelc"], r["triton"]
        if "error" in k or "error" in t:
            err = (k.get("error") or t.get("error") or "").splitlines()[-1:] or [""]
            lines.append(f"| {r['kernel']} | {_cfg_label(r)} | error: {'kernelc' if 'error' in k else 'triton'}: "
                         f"{err[0][:150]} |||||||")
            continue
        lines.append(f"| {r['kernel']} | {_cfg_label(r)} | {k['n_regs']}/{t['n_regs']} | {k['local_bytes']}/"
                     f"{t['local_bytes']} | {k['shared']}/{t['shared']} | {_loop(k)} | {_loop(t)} | "
                     f"{int(k['device_tensor_maps'])}/{int(t['device_tensor_maps'])} | {k['cpu_s']:.2f}/{t['cpu_s']:.2f} |")
    lines += ["", "Per kernel (sums over its configs):", "",
              "| kernel | configs | compile CPU s kernelc | Triton | ratio | kernelc spills (configs) | errors k/t |",
              "|---|---|---|---|---|---|---|"]
    by = collections.OrderedDict()
    for r in rows:
        by.setdefault(r["kernel"], []).append(r)
    for name, rs in by.items():
        ok = [r for r in rs if "error" not in r["kernelc"] and "error" not in r["triton"]]
        kc = sum(r["kernelc"]["cpu_s"] for r in ok)
        tc = sum(r["triton"]["cpu_s"] for r in ok)
        sp = sum(1 for r in ok if r["kernelc"]["local_bytes"])
        ek = sum(1 for r in rs if "error" in r["kernelc"])
        et = sum(1 for r in rs if "error" in r["triton"])
        lines.append(f"| {name} | {len(rs)} | {kc:.1f} | {tc:.1f} | {kc / tc if tc else float('nan'):.2f} | {sp} | "
                     f"{ek}/{et} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--only", default="08,09", help="tutorials: 08,09")
    ap.add_argument("--kernels", default="", help="kernel names (default: all of the chosen tutorials)")
    ap.add_argument("--configs", type=int, default=0, help="only the first N configs of each kernel (0: all)")
    ap.add_argument("--pick", default="", help="only these config indices (0-based, comma-separated)")
    ap.add_argument("--impl", choices=("kernelc", "triton"), help="compile with this one only")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--keep", default="", help="also write each cubin and PTX to this directory")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "tutorials_08_09.json"))
    a = ap.parse_args(argv)
    tuts = a.only.split(",")
    names = [n for n in (a.kernels.split(",") if a.kernels else KERNELS) if KERNELS[n][0] in tuts]
    tmp = tempfile.mkdtemp(prefix="tutorial_sweep_")
    mods = {}
    for t in tuts:
        mods[t] = os.path.join(tmp, f"tut{t}_kernels.py")
        with open(mods[t], "w") as f:
            f.write(kernel_module(os.path.join(a.tutorials, TUTORIAL_FILES[t])))
    jobs = list(jobs_for(names, a.configs, {int(x) for x in a.pick.split(",") if x}))
    impls = (a.impl,) if a.impl else ("kernelc", "triton")
    print(f"{len(jobs)} configs x 2 compilers, {a.jobs} at a time", flush=True)
    rows = [None] * len(jobs)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(run_job, j, mods, a.triton_site, a.timeout, a.keep, impls): i for i, j in enumerate(jobs)}
        for n, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            i = futs[fut]
            rows[i] = fut.result()
            r = rows[i]
            desc = " | ".join(
                f"{impl[0]} error" if "error" in r[impl] else
                f"{impl[0]} {r[impl]['n_regs']}r {r[impl]['local_bytes']}B {_loop(r[impl])}" for impl in impls)
            print(f"[{n}/{len(jobs)} {time.time() - t0:6.0f}s] {r['kernel']} {_cfg_label(r)}: {desc}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from bench.common import environment
    try:
        env = environment()
    except Exception as e:  # no GPU here: environment() may want one
        env = {"error": str(e)}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"benchmark": "tutorial_sweep", "environment": env, "num_sms": NUM_SMS,
                   "kernelc_env": {k: v for k, v in os.environ.items() if k.startswith("KERNELC_")},
                   "shapes": {"08": "group_size=4", "09": f"M={M09} N={N09} K={K09} fp16"}, "rows": rows}, f, indent=1)
    md = markdown(rows) if len(impls) == 2 else ""
    with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
