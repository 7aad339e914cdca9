"""Tutorial 06's backward kernel ``_attn_bwd`` at the tutorial's launch configuration, compiled on CPU by
kernelc and by Triton 3.6 (sm_90a), and every MMA loop's SASS side by side.

    python3 bench/experiments/tutorial_gaps/bwd06_sass.py TUTORIAL_06.py [--variants 64:0 64:1 128:1]
        [--json OUT] [--triton-site /work/ext/triton_site] [--only kernelc|triton] [--sass-dir DIR]

``TUTORIAL_06.py`` is Triton's tutorial (only its ``@jit`` functions are taken). The launch is the one its
``backward`` makes: 4 warps, 5 stages, BLOCK_M1 32, BLOCK_N1 128, BLOCK_M2 128, BLOCK_N2 32,
BLK_SLICE_FACTOR 2; pointers 16-byte aligned, ``stride_z``/``stride_h``/``stride_tok``/``H``/``N_CTX``
divisible by 16 and ``stride_d`` = 1 (both runtimes specialise on that). A variant is HEAD_DIM:CAUSAL.

Per variant and compiler: registers, local memory (frame), shared memory, blocks per SM (H100/H200: 64K
registers, 228 KB of shared memory), whole-kernel SASS counts, and per loop that holds an MMA (the body
between a label and the backward branch to it, in program order): HGMMA/HMMA counts and shapes, the
``WARPGROUP.DEPBAR`` waits, MUFU.EX2, TMA (UTMALDG), cp.async (LDGSTS), mbarrier ops (SYNCS), BAR.SYNC, LDSM,
LDS/STS, LDG, local-memory traffic (LDL/STL), and the instruction total. ``--off-knob KERNELC_RING_VIEWS``
also compiles kernelc with that knob off (``kernelc_off``: the code before the fix). ``--table`` prints the
comparison as Markdown. Nothing here is a test (docs/triton-tutorials.md, "06 backward").
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import cpu_compare  # noqa: E402

LOOP_KEYS = ("HGMMA", "HMMA", "WARPGROUP.DEPBAR", "WARPGROUP.ARRIVE", "MUFU.EX2", "UTMALDG", "LDGSTS", "LDGDEPBAR",
             "DEPBAR", "SYNCS", "BAR.SYNC", "BAR.ARV", "FENCE", "LDSM", "STSM", "LDS", "STS", "LDG", "STG", "LDL", "STL",
             "FMUL", "FADD", "FFMA", "F2FP", "SHFL", "MOV", "IMAD", "PRMT")
BLOCKS = dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2)
WARPS, STAGES = 4, 5
SIG = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "DO": "*fp16", "DQ": "*fp16", "DK": "*fp16",
       "DV": "*fp16", "M": "*fp32", "D": "*fp32", "stride_z": "i32", "stride_h": "i32", "stride_tok": "i32",
       "H": "i32", "N_CTX": "i32"}
DIV16 = ("stride_z", "stride_h", "stride_tok", "H", "N_CTX")


def parse_sass(text: str):
    """(instructions without predicates, label -> index) of one disassembled kernel."""
    instrs, labels, pending = [], {}, []
    for raw in text.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", raw)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*)?$", raw)
        if m:
            for lb in pending:
                labels[lb] = len(instrs)
            pending = []
            instrs.append(re.sub(r"^@!?U?P\w+\s+", "", m.group(2).rstrip(" ;")))
    return instrs, labels


def profile(body) -> dict:
    out = {k: sum(1 for x in body if x.split()[0] == k or x.startswith(k + ".")) for k in LOOP_KEYS}
    out["HGMMA_shapes"] = dict(collections.Counter(x.split()[0] for x in body if x.startswith("HGMMA")))
    out["HMMA_shapes"] = dict(collections.Counter(x.split()[0] for x in body if x.startswith("HMMA")))
    out["DEPBAR_args"] = [x.split(None, 1)[1] for x in body if x.startswith("WARPGROUP.DEPBAR")]
    out["total"] = len(body)
    return out


def mma_loops(sass_text: str) -> list:
    """Every innermost backward-branch loop holding an HGMMA or HMMA, in program order."""
    instrs, labels = parse_sass(sass_text)
    loops = []
    for i, ins in enumerate(instrs):
        m = re.match(r"BRA\s+.*`\((\.L_x_\d+)\)", ins)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            lo = labels[m.group(1)]
            body = instrs[lo:i + 1]
            if any(x.startswith(("HGMMA", "HMMA")) for x in body):
                loops.append((lo, i, body))
    # keep the innermost: drop a loop whose span holds another loop's backward branch (an enclosing loop, or
    # a wait's retry path after the loop that branches back into its body)
    inner = [lp for lp in loops if not any(o is not lp and lp[0] <= o[1] < lp[1] for o in loops)]
    return [dict(profile(b), start=lo, end=hi) for lo, hi, b in inner]


def whole(sass_text: str) -> dict:
    instrs, _ = parse_sass(sass_text)
    return profile(instrs)


def blocks_per_sm(regs: int, shared: int, warps: int = WARPS) -> dict:
    by_regs = 65536 // (((regs + 7) // 8 * 8) * 32 * warps)   # registers allocated per warp in 256-reg units
    by_smem = 233472 // (shared + 1024) if shared else 32
    return {"by_regs": by_regs, "by_smem": by_smem, "blocks": min(by_regs, by_smem, 32 // warps)}


def sass_of(cubin: bytes) -> str:
    from cubintools.sass import disassemble
    return disassemble(cubin, line_info=False)


def _kernelc(mod_path, sig, cx, div):
    from kernelc.compat import install
    install()
    import importlib.util
    spec = importlib.util.spec_from_file_location("bwd06_kernels", mod_path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    from kernelc.compiler.compiler import compile as kcompile
    ck = kcompile(m._attn_bwd, sig, dict(cx, stride_d=1), "sm_90a", WARPS, STAGES, divisibility=div)
    return {"shared": ck.shared, "n_spills_ptxas": getattr(ck, "n_spills", None)}, ck.asm["cubin"], ck.asm["ptx"]


_CHILD = r"""
import json, sys, importlib.util
args = json.loads(sys.argv[1])
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("bwd06_kernels", args["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = mod._attn_bwd
names = fn.arg_names
cx = dict(args["cx"], stride_d=1)
sig = {n: (args["sig"][n] if n in args["sig"] else "constexpr") for n in names}
attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in names
         if n in args["div16"] or args["sig"].get(n, "").startswith("*")}
src = ASTSource(fn, signature=sig, constexprs={(names.index(k),): v for k, v in cx.items()}, attrs=attrs)
ck = triton.compile(src, target=GPUTarget("cuda", 90, 64), options={"num_warps": args["w"], "num_stages": args["s"]})
json.dump({"cubin": ck.asm["cubin"].hex(), "ptx": ck.asm["ptx"], "shared": ck.metadata.shared,
           "version": triton.__version__}, sys.stdout)
"""


def _triton(site, mod_path, sig, cx):
    env = dict(os.environ, PYTHONPATH=site)
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(dict(mod=mod_path, sig=sig, cx=cx, w=WARPS, s=STAGES,
                                                                      div16=list(DIV16)))],
                       env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    res = json.loads(r.stdout)
    return {"shared": res["shared"], "version": res["version"]}, bytes.fromhex(res["cubin"]), res["ptx"]


TABLE_KEYS = ("HGMMA", "WARPGROUP.DEPBAR", "UTMALDG", "LDGSTS", "SYNCS", "BAR.SYNC", "LDS", "STS", "LDG", "LDL", "STL",
              "total")


def table(rows) -> str:
    """Markdown: per variant and compiler the kernel's resources, then per MMA loop the counts of TABLE_KEYS."""
    out = ["| variant | compiler | regs | local B | shared B | blocks/SM | SASS |", "|---|---|---:|---:|---:|---:|---:|"]
    loops = ["| variant | compiler | loop | " + " | ".join(TABLE_KEYS) + " |", "|---|---|---:|" + "---:|" * len(TABLE_KEYS)]
    for r in rows:
        var = f"d{r['head_dim']} {'causal' if r['causal'] else 'non-causal'}"
        for impl in ("kernelc_off", "kernelc", "triton"):
            x = r.get(impl)
            if x is None:
                continue
            name = {"kernelc_off": "kernelc, knob off", "kernelc": "kernelc"}.get(impl, "Triton 3.6")
            if "error" in x:
                out.append(f"| {var} | {name} | error: {x['error'][:80]} | | | | |")
                continue
            out.append(f"| {var} | {name} | {x['n_regs']} | {x['local_bytes']} | {x['shared']} | "
                       f"{x['occupancy']['blocks']} | {x['kernel']['total']} |")
            for i, lp in enumerate(x["loops"]):
                loops.append(f"| {var} | {name} | {i + 1} | " + " | ".join(str(lp[k]) for k in TABLE_KEYS) + " |")
    return "\n".join(out) + "\n\n" + "\n".join(loops)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--variants", nargs="*", default=["64:0", "64:1", "128:0", "128:1"], help="HEAD_DIM:CAUSAL")
    ap.add_argument("--only", choices=("kernelc", "triton"))
    ap.add_argument("--json")
    ap.add_argument("--sass-dir", help="write each kernel's SASS and PTX here")
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--table", help="only print the Markdown tables of a JSON this script wrote")
    ap.add_argument("--off-knob", help="also compile kernelc with this KERNELC_* knob set to 0 (row key 'kernelc_off')")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.load(open(args.table))))
        return 0
    text = cpu_compare.kernel_module(args.tutorial)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
    mod_path = os.path.join(tempfile.mkdtemp(prefix="bwd06_"), "tut06_kernels.py")
    with open(mod_path, "w") as f:
        f.write(text + "\n")
    from cubintools import inspect_cubin
    rows = []
    for var in args.variants:
        d, causal = (int(x) for x in var.split(":"))
        cx = dict(BLOCKS, HEAD_DIM=d, CAUSAL=bool(causal))
        if "CAUSAL" not in text.split("def _attn_bwd(", 1)[-1].split(")", 1)[0]:   # Triton 3.6: always causal
            cx.pop("CAUSAL")
        div = {n: 16 for n in DIV16}
        row = {"head_dim": d, "causal": bool(causal), "num_warps": WARPS, "num_stages": STAGES, **BLOCKS}
        impls = ("kernelc", "kernelc_off", "triton") if args.off_knob else ("kernelc", "triton")
        for impl in impls:
            if args.only and impl.split("_")[0] != args.only:
                continue
            try:
                if impl.startswith("kernelc"):
                    saved = os.environ.get(args.off_knob or "")
                    if impl == "kernelc_off":
                        os.environ[args.off_knob] = "0"
                    try:
                        r, cubin, ptx = _kernelc(mod_path, SIG, cx, div)
                    finally:
                        if impl == "kernelc_off":
                            os.environ.pop(args.off_knob) if saved is None else os.environ.__setitem__(args.off_knob, saved)
                    if args.off_knob:
                        r["knob"] = f"{args.off_knob}={'0' if impl == 'kernelc_off' else os.environ.get(args.off_knob, 'default')}"
                else:
                    r, cubin, ptx = _triton(args.triton_site, mod_path, SIG, cx)
                f = inspect_cubin(cubin).kernel(None)
                sass = sass_of(cubin)
                r.update(n_regs=f.n_regs, local_bytes=f.frame_size, occupancy=blocks_per_sm(f.n_regs, r["shared"]))
                r["kernel"] = whole(sass)
                r["loops"] = mma_loops(sass)
                r["ptx_wgmma"] = len(re.findall(r"wgmma\.mma_async", ptx))
                r["ptx_mma_sync"] = len(re.findall(r"\bmma\.sync", ptx))
                if args.sass_dir:
                    os.makedirs(args.sass_dir, exist_ok=True)
                    stem = os.path.join(args.sass_dir, f"bwd_d{d}_c{causal}_{impl}")
                    open(stem + ".sass", "w").write(sass)
                    open(stem + ".ptx", "w").write(ptx)
            except (Exception, SystemExit) as e:  # noqa: BLE001 -- a variant one compiler refuses is a result
                r = {"error": f"{type(e).__name__}: {e}"[-400:]}
            row[impl] = r
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
