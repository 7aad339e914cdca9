"""Every TMA / wgmma kernel kernelc's tests and benches compile, read back from SASS, under two checkouts: what a
change to the TMA issue (``elect_one``) or to the wgmma descriptors did to each (sm_90a, CPU).

    python3 bench/experiments/tutorial_gaps/tma_wgmma_survey.py --roots /work/main . --tutorials DIR \\
        [--json OUT] [--only SUBSTRING]

Each root is compiled in its own process (``PYTHONPATH=root``, the kernels and test helpers of that root).
Cases: ``examples/kernels/attention.py`` forward (head dims 64/128/256, causal or not, fp16, fp8) and its
backward (dK/dV plain, atomic and bulk dQ, dQ), the FA3-order and descriptor forwards
(``attention_fa3.py``, ``attention_tma.py``, 8 warps, warp-specialised), Triton's tutorial 06 forward at
every Hopper config (non-causal and causal, d64/d128, host descriptors) and its backward, and tutorial 09's
TMA and persistent-TMA matmuls. Per case: registers, spill bytes, SASS instructions, BRA / BSSY / ELECT-loop
counts (fwd06_branches.profile), and the key loop's instructions and branches. A row whose code did not
change is marked ``same``. Nothing here is a test (docs/triton-tutorials.md, "06 forward kernel: branches").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = r"""
import json, os, re, sys, hashlib, importlib.util, tempfile
root, tut, only = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, root)
sys.path.insert(0, os.path.join(root, "bench", "experiments", "tutorial_gaps"))
sys.path.insert(0, HERE_DIR)
from fwd06_branches import profile
import kernelc
from cubintools.sass import disassemble

cases = []
def case(name, fn):
    if only and only not in name:
        return
    cases.append((name, fn))

from tests.compiler import test_attention_kernels as TA
for D in (64, 128, 256):
    for causal in (False, True):
        case(f"attention fwd d{D} causal={int(causal)}", lambda D=D, c=causal: TA.compile_fwd(D, c))
case("attention fwd fp8 d128 causal=1", lambda: TA.compile_fwd(128, True, fp8=True))
for D in (64, 128):
    case(f"attention bwd dkdv d{D}", lambda D=D: TA.compile_dkdv(D, True))
    case(f"attention bwd dkdv atomic d{D}", lambda D=D: TA.compile_dkdv(D, True, atomic=True))
    case(f"attention bwd dq d{D}", lambda D=D: TA.compile_dq(D, True))
try:
    from tests.compiler import test_fa3_forward as TF
    from examples.kernels import attention_fa3, attention_tma
    for D in (64, 128):
        for causal in (False, True):
            case(f"fa3 fwd d{D} causal={int(causal)}", lambda D=D, c=causal: TF._fwd(attention_fa3.attn_fwd_fa3_kernel, D, c))
            case(f"tma fwd d{D} causal={int(causal)}", lambda D=D, c=causal: TF._fwd(attention_tma.attn_fwd_tma_kernel, D, c))
except Exception as ex:  # an older checkout without these helpers
    print("skip fa3:", ex, file=sys.stderr)

import cpu_compare
text = cpu_compare.kernel_module(os.path.join(tut, "06-fused-attention.py"))
text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
mod = os.path.join(tempfile.mkdtemp(prefix="survey06_"), "tut06_kernels.py")
open(mod, "w").write(text + "\n")
from kernelc.compat import install
install()
spec = importlib.util.spec_from_file_location("tut06_kernels", mod)
m06 = importlib.util.module_from_spec(spec); spec.loader.exec_module(m06)
from kernelc.compiler.compiler import compile as kcompile
def fwd06(D, bm, bn, s, w, stage):
    sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32",
           "desc_q": f"tensordesc<fp16[{bm}, {D}]>", "desc_k": f"tensordesc<fp16[{bn}, {D}]>",
           "desc_v": f"tensordesc<fp16[{bn}, {D}]>", "desc_o": f"tensordesc<fp16[{bm}, {D}]>", "N_CTX": "i32"}
    cx = dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, FP8_OUTPUT=False, STAGE=stage, warp_specialize=False, IS_HOPPER=True)
    div = {"M": 16, "N_CTX": 16, "desc_q": 16, "desc_k": 16, "desc_v": 16, "desc_o": 16}
    return kcompile(m06._attn_fwd, sig, cx, "sm_90a", w, s, divisibility=div)
for D in (64, 128):
    for stage in (1, 3):
        for bm in (64, 128):
            for bn in (32, 64, 128):
                for s in (2, 3, 4):
                    for w in (4, 8):
                        if (bm * bn < 128 * 128 and w == 8) or bn > D or (stage == 3 and bm < bn):
                            continue
                        case(f"tut06 fwd d{D} stage{stage} {bm}x{bn}x{s}x{w}",
                             lambda a=(D, bm, bn, s, w, stage): fwd06(*a))
def bwd06(D, causal):
    import bwd06_sass as B6
    cx = dict(B6.BLOCKS, HEAD_DIM=D, CAUSAL=causal, stride_d=1)
    return kcompile(m06._attn_bwd, B6.SIG, cx, "sm_90a", B6.WARPS, B6.STAGES, divisibility={n: 16 for n in B6.DIV16})
for D in (64, 128):
    case(f"tut06 bwd d{D} causal=1", lambda D=D: bwd06(D, True))

path09 = os.path.join(tut, "09-persistent-matmul.py")
text = cpu_compare.kernel_module(path09)
text = "\n".join(("@triton.jit" if ln.startswith("@triton.jit(launch_metadata") else ln)
                 for ln in text.splitlines() if not ln.startswith("@triton.autotune"))
mod9 = os.path.join(tempfile.mkdtemp(prefix="survey09_"), "tut09_kernels.py")
open(mod9, "w").write(text + "\n")
spec = importlib.util.spec_from_file_location("tut09_kernels", mod9)
m09 = importlib.util.module_from_spec(spec); spec.loader.exec_module(m09)
def mm09(name, bm, bn, bk, s, w):
    fn = getattr(m09, name)
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bn}, {bk}]>",
           "c_desc": f"tensordesc<fp16[{bm}, {bn // 2 if name.endswith('persistent') else bn}]>",
           "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, FP8_OUTPUT=False)
    if name.endswith("persistent"):
        cx.update(EPILOGUE_SUBTILE=True, NUM_SMS=132, WARP_SPECIALIZE=False)
    else:
        cx.update(WARP_SPECIALIZE=False)
    div = {k: 16 for k in sig}
    return kcompile(fn, sig, cx, "sm_90a", w, s, divisibility=div)
for name in ("matmul_kernel_tma", "matmul_kernel_tma_persistent"):
    for (bm, bn, bk, s, w) in ((128, 128, 64, 3, 8), (128, 256, 64, 3, 8), (128, 128, 128, 3, 8)):
        case(f"tut09 {name} {bm}x{bn}x{bk}x{s}x{w}", lambda a=(name, bm, bn, bk, s, w): mm09(*a))

# the 8-warp wgmma GEMMs of bench/bench_kernels.py (examples/kernels), at their 8-warp autotune configs
from examples.kernels import matmul as EM, matmul_tma as ET, matmul_persistent as EP, matmul_fp8 as EF
def ex_mm(bm, bn, s):
    sig = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
               stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
    cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="")
    return kcompile(EM.matmul_kernel, sig, cx, "sm_90a", 8, s, divisibility={n: 16 for n in sig},
                    equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
def ex_desc(kern, bm, bn, s, **extra):
    sig = {"a_desc": f"tensordesc<fp16[{bm}, 64]>", "b_desc": f"tensordesc<fp16[64, {bn}]>",
           "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, **extra)
    return kcompile(kern, sig, cx, "sm_90a", 8, s, divisibility={"a_desc": 16, "b_desc": 16, "c_desc": 16})
def ex_dp(bm, bn, s):
    sig = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32")
    cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=132, WARP_SPECIALIZE=False)
    return kcompile(EP.matmul_descriptor_persistent_kernel, sig, cx, "sm_90a", 8, s, divisibility={n: 16 for n in sig})
def ex_fp8(bm, bn, bk, s):
    sig = dict(a_ptr="*fp8e4nv", b_ptr="*fp8e4nv", c_ptr="*bf16", scale_a_ptr="*fp32", scale_b_ptr="*fp32", M="i32",
               N="i32", K="i32", stride_am="i32", stride_ak="i32", stride_bk="i32", stride_bn="i32",
               stride_cm="i32", stride_cn="i32")
    return kcompile(EF.matmul_fp8_kernel, sig, dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8),
                    "sm_90a", 8, s, divisibility={n: 16 for n in sig}, equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
for bm, bn, s in ((128, 256, 3), (128, 256, 4), (256, 128, 3)):
    case(f"ex matmul {bm}x{bn}x64 s{s} w8", lambda a=(bm, bn, s): ex_mm(*a))
for bm, bn, s in ((128, 128, 3), (128, 256, 3), (256, 128, 3)):
    case(f"ex matmul_tma {bm}x{bn}x64 s{s} w8", lambda a=(bm, bn, s): ex_desc(ET.matmul_tma_kernel, *a))
    case(f"ex matmul_persistent {bm}x{bn}x64 s{s} w8",
         lambda a=(bm, bn, s): ex_desc(EP.matmul_persistent_kernel, *a, NUM_SMS=132, WARP_SPECIALIZE=False))
    case(f"ex matmul_descriptor_persistent {bm}x{bn}x64 s{s} w8", lambda a=(bm, bn, s): ex_dp(*a))
for bm, bn, bk, s in ((128, 256, 128, 3), (256, 128, 128, 3), (128, 256, 64, 4)):
    case(f"ex matmul_fp8 {bm}x{bn}x{bk} s{s} w8", lambda a=(bm, bn, bk, s): ex_fp8(*a))

for name, fn in cases:
    try:
        ck = fn()
        cubin = ck.asm["cubin"]
        sass = disassemble(cubin, line_info=False)
        p = profile(sass)
        row = {"case": name, "n_regs": ck.n_regs, "spill_bytes": ck.n_spills, "shared": ck.shared,
               "sha": hashlib.sha1(bytes(cubin)).hexdigest()[:12],
               **{k: p.get(k) for k in ("instructions", "loop_instructions", "loop_branches",
                                        "branches_outside_loop", "elect_loops", "bssy_regions")},
               "r2ur": sum(1 for ln in sass.splitlines() if re.search(r"\bR2UR\b", ln)),
               "loop_r2ur": (p.get("loop_opcodes") or {}).get("R2UR", 0)}
    except BaseException as ex:
        row = {"case": name, "error": (type(ex).__name__ + ": " + str(ex))[-300:]}
    print(json.dumps(row), flush=True)
"""


def run_root(root: str, tutorials: str, only: str) -> dict:
    code = _CHILD.replace("HERE_DIR", repr(HERE))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    r = subprocess.run([sys.executable, "-c", code, os.path.abspath(root), tutorials, only or ""], env=env,
                       capture_output=True, text=True, cwd=tempfile.gettempdir())
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    rows = {}
    for ln in r.stdout.splitlines():
        if ln.startswith("{"):
            d = json.loads(ln)
            rows[d["case"]] = d
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--roots", nargs=2, required=True, metavar=("BASE", "NEW"))
    ap.add_argument("--tutorials", required=True, help="the directory holding Triton 3.6's tutorials")
    ap.add_argument("--only", help="cases whose name contains this")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    base, new = (run_root(r, args.tutorials, args.only) for r in args.roots)
    out = []
    keys = ("n_regs", "spill_bytes", "instructions", "loop_instructions", "loop_branches", "branches_outside_loop",
            "elect_loops", "bssy_regions", "r2ur", "loop_r2ur")
    for name in base:
        a, b = base[name], new.get(name, {"error": "missing"})
        row = {"case": name, "base": a, "new": b, "same": a.get("sha") == b.get("sha") and "sha" in a}
        out.append(row)
        if "error" in a or "error" in b:
            print(f"{name:44s} ERROR base={a.get('error', 'ok')} new={b.get('error', 'ok')}")
            continue
        diff = "same" if row["same"] else "  ".join(f"{k}={a.get(k)}->{b.get(k)}" for k in keys if a.get(k) != b.get(k))
        print(f"{name:44s} {diff}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"roots": args.roots, "rows": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
