"""Register prefetch of dot loops (``KERNELC_PREFETCH_DOT_LOOPS``) on CPU: per kernel and knob setting, registers,
local memory, shared memory, blocks per SM (H100/H200) and the prefetch notes of ``passes/pipeline_loads.py``.

    python3 bench/experiments/tutorial_gaps/prefetch_rule_cpu.py TUTORIAL_06.py [--modes off on auto] [--json OUT]
        [--only 06|example]

Kernels: tutorial 06's ``_attn_bwd`` at its launch (4 warps, 5 stages, BLOCK_M1 32, BLOCK_N1 128, BLOCK_M2 128,
BLOCK_N2 32, HEAD_DIM 64 and 128; the 3.6 text's backward is causal whatever the caller says) and
examples/kernels/attention_bwd.py's dK/dV, dQ and fused kernels at the configurations its wrapper launches (the
ones tests/compiler/test_attention_kernels.py compiles). Each setting compiles in its own process (the knob is
read at compile time; no disk cache). Nothing here is a test (docs/triton-tutorials.md, "dot-loop prefetch rule").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

_CHILD = r"""
import hashlib, json, os, re, sys, importlib.util
sys.path.insert(0, os.environ["ROOT"]); sys.path.insert(0, os.environ["HERE"])
args = json.loads(sys.argv[1])
import kernelc
from kernelc.compiler.compiler import compile as kcompile
P = lambda t: "*" + t
out = {}
def record(name, ck, warps):
    from bwd06_sass import blocks_per_sm
    log = "\n".join(ck.compile_log)
    out[name] = dict(n_regs=ck.n_regs, n_spills=ck.n_spills, shared=ck.shared,
                     blocks=blocks_per_sm(ck.n_regs, ck.shared, warps)["blocks"],
                     ptx_sha=hashlib.sha256(ck.asm["ptx"].encode()).hexdigest()[:16],
                     notes=[ln.strip() for ln in log.splitlines() if "prefetch" in ln or "dot loop" in ln])
    print(name, out[name]["n_regs"], out[name]["n_spills"], file=sys.stderr, flush=True)
if args["which"] in ("06", "all"):
    from kernelc.compat import install
    install()
    from bwd06_sass import BLOCKS, SIG, DIV16, WARPS, STAGES
    spec = importlib.util.spec_from_file_location("tut06_kernels", args["mod"])
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    div = {n: 16 for n in SIG if n in DIV16 or SIG[n].startswith("*")}
    for d in args["d06"]:
        ck = kcompile(m._attn_bwd, SIG, dict(BLOCKS, HEAD_DIM=d, stride_d=1), "sm_90a", WARPS, STAGES, divisibility=div)
        record(f"06 _attn_bwd d{d}", ck, WARPS)
if args["which"] in ("example", "all"):
    from examples.kernels import attention_bwd as B
    def C(name, kernel, sig, cx, cfg, ones):
        cfg = dict(cfg); w, s = cfg.pop("num_warps"), cfg.pop("num_stages")
        ck = kcompile(kernel, sig, dict(cx, **cfg), "sm_90a", w, s, divisibility={n: 16 for n in sig}, equal_to_1=ones)
        record(name, ck, w)
    dk_sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
                  LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
                  stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    dq_sig = {k: v for k, v in dk_sig.items() if k not in ("DK", "DV", "dq_stride_z", "dq_stride_h", "dq_stride_m")}
    fu_sig = {k: v for k, v in dk_sig.items() if not k.startswith("dq_")}
    for d in (64, 128):
        for causal in (False, True):
            C(f"example dkdv d{d} {'causal' if causal else 'non-causal'}", B.attn_bwd_dkdv_kernel, dk_sig,
              dict(HEAD_DIM=d, CAUSAL=causal, ATOMIC_DQ=False, EVEN_M=B.DKDV_EVEN_M.get(d, False)),
              B._cfg(B.DKDV_CONFIGS, d, None), ("stride_k",))
        C(f"example dq d{d} causal", B.attn_bwd_dq_kernel, dq_sig, dict(HEAD_DIM=d, CAUSAL=True),
          B._cfg(B.DQ_CONFIGS, d, None), ("stride_k",))
    for d, causal in ((64, True), (64, False), (128, True)):
        (bm1, bn1), (bm2, bn2), w, s = B.FUSED_CONFIGS[d]
        C(f"example fused d{d} {'causal' if causal else 'non-causal'}", B.attn_bwd_fused_kernel, fu_sig,
          dict(HEAD_DIM=d, CAUSAL=causal, BLOCK_M1=bm1, BLOCK_N1=bn1, BLOCK_M2=bm2, BLOCK_N2=bn2,
               DQ_DESC=B.FUSED_DQ_DESC.get(d, False), TAIL=B.FUSED_TAIL.get(d), EVEN_M=B.FUSED_EVEN_M.get(d, False),
               KV_REGS=B.FUSED_KV_REGS.get((d, causal), B.FUSED_KV_REGS.get(d, 0))),
          dict(num_warps=w, num_stages=s), ("stride_k",))
json.dump(out, sys.stdout)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--modes", nargs="+", default=["off", "on", "auto"], help="KERNELC_PREFETCH_DOT_LOOPS values")
    ap.add_argument("--only", choices=("06", "example"), default=None)
    ap.add_argument("--d06", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    import cpu_compare
    text = cpu_compare.kernel_module(args.tutorial)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
    mod_path = os.path.join(tempfile.mkdtemp(prefix="pf06_"), "tut06_kernels.py")
    with open(mod_path, "w") as f:
        f.write(text + "\n")
    res = {}
    for mode in args.modes:
        env = dict(os.environ, ROOT=ROOT, HERE=HERE, KERNELC_PREFETCH_DOT_LOOPS=mode,
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(dict(mod=mod_path, which=args.only or "all",
                                                                          d06=args.d06))],
                           env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
        if r.returncode:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        res[mode] = json.loads(r.stdout)
    names = list(next(iter(res.values())))
    print("| kernel | " + " | ".join(f"{m}: regs / spill B / blocks per SM" for m in args.modes) + " |")
    print("|---|" + "---:|" * len(args.modes))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{res[m][n]['n_regs']} / {res[m][n]['n_spills']} / {res[m][n]['blocks']}"
                                       for m in args.modes) + " |")
    if len(args.modes) > 1:
        for n in names:
            same = [m for m in args.modes[1:] if res[m][n]["ptx_sha"] == res[args.modes[0]][n]["ptx_sha"]]
            print(f"{n}: PTX the same as {args.modes[0]}'s under {', '.join(same) or 'none'}")
    for m in args.modes:
        for n in names:
            for note in res[m][n]["notes"]:
                print(f"{m} | {n} | {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
