"""Tutorial 06's ``_attn_fwd`` at the configs its autotuner may pick, compiled on CPU by kernelc and by
Triton 3.6 (sm_90a), and the SASS of the attention loop side by side.

    python3 bench/experiments/tutorial_gaps/fwd06_sass.py TUTORIAL_06.py --head-dim 64 [--stage 1]
        [--ws 0 1] [--configs BMxBNxSxW ...] [--json OUT] [--triton-site /work/ext/triton_site]

``TUTORIAL_06.py`` is Triton's tutorial (its ``@jit`` functions are taken, its autotune decorator dropped).
The descriptors are host ``TensorDescriptor``s (``tensordesc<fp16[...]>``), as the tutorial passes them on
a Hopper GPU without ``warp_specialize``; ``--device-desc``: pointers, the descriptors made in the kernel (its
path with ``warp_specialize`` on Hopper). Per
config and compiler: registers, spills, shared memory, and in the loop that holds the most HGMMAs (the
body between a label and the backward branch to it): HGMMA count and shapes, WARPGROUP.DEPBAR waits,
MUFU.EX2, TMA copies (UTMALDG), mbarrier waits (SYNCS), BAR.SYNC, global loads, local memory, and the
instruction total. Nothing here is a test (docs/triton-tutorials.md, "06 d64 forward").
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import cpu_compare  # noqa: E402

LOOP_KEYS = ("HGMMA", "WARPGROUP.DEPBAR", "WARPGROUP.ARRIVE", "MUFU.EX2", "UTMALDG", "SYNCS", "BAR.SYNC",
             "LDG", "LDL", "STL", "LDS", "LDSM", "STS", "FMUL", "FADD", "FFMA", "FMNMX", "SHFL")


def loop_profile(sass_text: str) -> dict:
    """The loop with the most HGMMAs: per-key instruction counts, HGMMA shapes, total."""
    instrs, labels = [], {}
    pending = []
    for raw in sass_text.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", raw)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*)?$", raw)
        if m:
            pc = int(m.group(1), 16)
            for lb in pending:
                labels[lb] = len(instrs)
            pending = []
            body = re.sub(r"^@!?U?P\w+\s+", "", m.group(2).rstrip(" ;"))
            instrs.append(body)
    best = None
    for i, ins in enumerate(instrs):
        m = re.match(r"BRA\s+.*`\((\.L_x_\d+)\)", ins)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            body = instrs[labels[m.group(1)]:i + 1]
            n = sum(1 for x in body if x.startswith("HGMMA"))
            if n and (best is None or n > best[0] or (n == best[0] and len(body) < len(best[1]))):
                best = (n, body)
    if best is None:
        return {}
    body = best[1]
    out = {k: sum(1 for x in body if x.startswith(k)) for k in LOOP_KEYS}
    out["HGMMA_shapes"] = dict(collections.Counter(x.split()[0] for x in body if x.startswith("HGMMA")))
    out["DEPBAR_args"] = [x.split(None, 1)[1] for x in body if x.startswith("WARPGROUP.DEPBAR")]
    out["total"] = len(body)
    return out


def sass_of(cubin: bytes) -> str:
    from cubintools.sass import disassemble
    return disassemble(cubin, line_info=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--stage", type=int, default=1, help="1: non-causal, 3: causal")
    ap.add_argument("--ws", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--configs", nargs="*", help="BMxBNxSTAGESxWARPS (default: the autotuner's Hopper list)")
    ap.add_argument("--device-desc", action="store_true",
                    help="pointers for the descriptors, built in the kernel (the tutorial's path with warp_specialize on Hopper)")
    ap.add_argument("--only", choices=("kernelc", "triton"))
    ap.add_argument("--json")
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    args = ap.parse_args(argv)
    D = args.head_dim
    if args.configs:
        configs = [tuple(int(x) for x in c.split("x")) for c in args.configs]
    else:  # tutorial 06's list on Hopper: 8 warps only for 128x128 blocks (keep), BLOCK_N <= HEAD_DIM
        configs = [(bm, bn, s, w) for bm in (64, 128) for bn in (32, 64, 128) for s in (2, 3, 4) for w in (4, 8)
                   if not (bm * bn < 128 * 128 and w == 8) and bn <= D]
    text = cpu_compare.kernel_module(args.tutorial)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
    mod = os.path.join(tempfile.mkdtemp(prefix="fwd06_"), "tut06_kernels.py")
    with open(mod, "w") as f:
        f.write(text + "\n")
    rows = []
    for (bm, bn, s, w) in configs:
        for ws in args.ws:
            sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
                   "desc_q": f"tensordesc<fp16[{bm}, {D}]>", "desc_k": f"tensordesc<fp16[{bn}, {D}]>",
                   "desc_v": f"tensordesc<fp16[{bn}, {D}]>", "desc_o": f"tensordesc<fp16[{bm}, {D}]>",
                   "N_CTX": "i32"}
            if args.device_desc:
                sig.update({d: "*fp16" for d in ("desc_q", "desc_k", "desc_v", "desc_o")})
            cx = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, FP8_OUTPUT=False, STAGE=args.stage,
                      warp_specialize=bool(ws), IS_HOPPER=True)
            div = {"M": 16, "N_CTX": 16, "desc_q": 16, "desc_k": 16, "desc_v": 16, "desc_o": 16}
            row = {"config": f"{bm}x{bn}x{s}x{w}", "ws": ws, "device_desc": args.device_desc}
            for impl in ("kernelc", "triton"):
                if args.only and impl != args.only:
                    continue
                try:
                    if impl == "kernelc":
                        r, cubin = _kernelc(mod, sig, cx, div, w, s)
                    else:
                        r, cubin = _triton(args.triton_site, mod, sig, cx, w, s)
                    r["loop"] = loop_profile(sass_of(cubin))
                except (Exception, SystemExit) as e:  # a config one compiler refuses
                    r = {"error": str(e)[-300:]}
                row[impl] = r
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _kernelc(mod, sig, cx, div, w, s):
    from kernelc.compat import install
    install()
    import importlib.util
    spec = importlib.util.spec_from_file_location("fwd06_kernels", mod)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    from kernelc.compiler.compiler import compile as kcompile
    ck = kcompile(m._attn_fwd, sig, cx, "sm_90a", w, s, divisibility=div)
    return dict(_regs(ck.asm["cubin"]), shared=ck.shared), ck.asm["cubin"]


_CHILD = r"""
import json, sys, importlib.util
args = json.loads(sys.argv[1])
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("fwd06_kernels", args["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = mod._attn_fwd
names = fn.arg_names
sig = {n: (args["sig"][n] if n in args["sig"] else "constexpr") for n in names}
attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in names
         if n in ("M", "N_CTX") or args["sig"].get(n) == args["elem"]}
src = ASTSource(fn, signature=sig, constexprs={(names.index(k),): v for k, v in args["cx"].items()}, attrs=attrs)
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": args["w"], "num_stages": args["s"]})
json.dump({"cubin": ck.asm["cubin"].hex(), "shared": ck.metadata.shared}, sys.stdout)
"""


def _triton(site, mod, sig, cx, w, s, elem="*fp16"):
    """Triton 3.6's compile of ``_attn_fwd`` in a child process; pointers of type ``elem`` get divisibility 16."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=site)
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(dict(mod=mod, sig=sig, cx=cx, w=w, s=s, elem=elem))],
                       env=env,
                       capture_output=True, text=True, cwd=tempfile.gettempdir())
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    res = json.loads(r.stdout)
    cubin = bytes.fromhex(res.pop("cubin"))
    res.update(_regs(cubin))
    return res, cubin


def _regs(cubin: bytes) -> dict:
    from cubintools import inspect_cubin
    f = inspect_cubin(cubin).kernel(None)
    return {"n_regs": f.n_regs, "local_bytes": f.frame_size}


if __name__ == "__main__":
    sys.exit(main())
