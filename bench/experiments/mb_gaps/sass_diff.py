"""The kernels of issue 21 that measured just below Triton (or below the pre-issue tree), compiled on CPU for
sm_90a by kernelc (this tree), by Triton 3.6 on the same source, and -- for bench_kernels' softmax -- by the
tree of commit 766f1cd, then compared instruction by instruction class.

    python3 bench/experiments/mb_gaps/sass_diff.py [--triton-site DIR] [--pre21 DIR] [names...]

``--pre21 DIR``: an extracted 766f1cd tree (``git archive 766f1cd | tar -x -C DIR``). Writes
results/sass_diff.json and prints one block per kernel. Each compile runs in its own process with the tree's
defaults; integers and pointers divisible by 16, as the runtimes specialise them for the bench's tensors.
Nothing here needs a GPU.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))

from cpu_compare import kernel_module, loads_before_first_use  # noqa: E402

MB = os.path.join(ROOT, "examples", "kernels", "memory_bound.py")
SM = os.path.join(ROOT, "examples", "kernels", "softmax.py")
BF = "*bf16"
# name -> (source, kernel, signature, constexprs, warps, stages, elements a program handles per row/tile)
CASES = {
    "geglu_bwd 4096x14336 bf16": (MB, "geglu_bwd_kernel",
                                  f"dc_ptr={BF},a_ptr={BF},b_ptr={BF},da_ptr={BF},db_ptr={BF},stride=i32,n_cols=i32",
                                  {"BLOCK_SIZE": 16384}, 16, 3, 16384),
    "swiglu_bwd 4096x14336 bf16": (MB, "swiglu_bwd_kernel",
                                   f"dc_ptr={BF},a_ptr={BF},b_ptr={BF},da_ptr={BF},db_ptr={BF},stride=i32,n_cols=i32",
                                   {"BLOCK_SIZE": 16384}, 16, 3, 16384),
    "log_softmax_bwd 8192x8192 fp16": (MB, "log_softmax_bwd_kernel",
                                       "dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32",
                                       {"BLOCK_SIZE": 8192}, 16, 3, 8192),
    "softmax_bwd 8192x8192 fp16": (MB, "softmax_bwd_kernel",
                                   "dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32",
                                   {"BLOCK_SIZE": 8192}, 16, 3, 8192),
    "rms_norm_bwd 8192x4096 bf16": (MB, "rms_norm_bwd_kernel",
                                    f"dy_ptr={BF},x_ptr={BF},w_ptr={BF},rstd_ptr=*fp32,dx_ptr={BF},dw_ptr=*fp32,"
                                    "stride=i32,n_rows=i32,n_cols=i32,rows_per_program=i32",
                                    {"BLOCK_SIZE": 4096}, 8, 3, 4096),
    "rope 4x4096x32x128 bf16": (MB, "rope_kernel", f"q_ptr={BF},q_row_stride=i32,cos_ptr=*fp32,sin_ptr=*fp32,"
                                "cos_row_stride=i32,seq_len=i32,n_heads=i32,head_dim=i32",
                                {"BLOCK_H": 32, "BLOCK_D": 64}, 4, 3, 4096),
    "transpose 8192x8192 fp32": (MB, "transpose_kernel", "x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32,stride_xm=i32,stride_ym=i32",
                                 {"BLOCK_M": 64, "BLOCK_N": 64}, 4, 3, 4096),
    "softmax 4096x4096 fp32 (bench_kernels)": (SM, "softmax_kernel",
                                               "output_ptr=*fp32,input_ptr=*fp32,input_row_stride=i32,"
                                               "output_row_stride=i32,n_rows=i32,n_cols=i32",
                                               {"BLOCK_SIZE": 4096, "num_stages": 2}, 16, 2, 4096),
}
PRE21_CASES = ("softmax 4096x4096 fp32 (bench_kernels)",)

_KERNELC_CHILD = r"""
import json, sys, importlib.util
a = json.loads(sys.argv[1])
sys.path.insert(0, a["root"])
from kernelc.compat import install
install()
spec = importlib.util.spec_from_file_location("sass_diff_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
import kernelc
from kernelc.compiler.compiler import compile as kcompile
ck = kcompile(getattr(mod, a["kernel"]), a["sig"], a["cx"], "sm_90a", a["num_warps"], a["num_stages"],
              divisibility=a["div"])
assert kernelc.__file__.startswith(a["root"]), kernelc.__file__
art = getattr(ck, "artifacts", None)
json.dump({"cubin": ck.asm["cubin"].hex(), "name": ck.name, "log": getattr(art, "ptxas_log", "") or "", "shared": ck.shared}, sys.stdout)
"""

_TRITON_CHILD = r"""
import json, sys, importlib.util
a = json.loads(sys.argv[1])
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("sass_diff_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, a["kernel"])
names = fn.arg_names
sig = {n: (a["sig"][n] if n in a["sig"] else "constexpr") for n in names}
attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if a["div"].get(n) == 16}
src = ASTSource(fn, signature=sig, constexprs={(names.index(k),): v for k, v in a["cx"].items()}, attrs=attrs)
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": a["num_warps"],
                                                                     "num_stages": a["num_stages"]})
json.dump({"cubin": ck.asm["cubin"].hex(), "name": ck.metadata.name, "log": "", "shared": ck.metadata.shared}, sys.stdout)
"""


def _compile(impl: str, tree: str, case, site: str, cache: str) -> dict:
    src, kernel, sig_text, cx, warps, stages, _ = case
    sig = dict(p.split("=", 1) for p in sig_text.split(","))
    div = {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
    fd, mod_path = tempfile.mkstemp(suffix=".py", prefix="sass_diff_")
    with os.fdopen(fd, "w") as f:
        f.write(kernel_module(src))
    payload = json.dumps(dict(root=tree, mod=mod_path, kernel=kernel, sig=sig, cx=cx, div=div, num_warps=warps,
                              num_stages=stages))
    if impl == "triton":
        env, child = dict(os.environ, PYTHONPATH=site), _TRITON_CHILD
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELC_")}
        env.update(PYTHONPATH=tree, KERNELC_CACHE_DIR=cache)
        child = _KERNELC_CHILD
    try:
        r = subprocess.run([sys.executable, "-c", child, payload], env=env, capture_output=True, text=True,
                           cwd=tempfile.gettempdir())
    finally:
        os.unlink(mod_path)
    if r.returncode:
        raise SystemExit(f"{impl} failed on {kernel}:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout)
    out["cubin"] = bytes.fromhex(out["cubin"])
    return out


_INT = ("IMAD", "IADD3", "LEA", "SHF", "LOP3", "SEL", "ISETP", "IABS", "I2F", "F2I", "PRMT", "MOV", "S2R", "S2UR",
        "ULDC", "UMOV", "ULEA", "UIADD3", "UIMAD", "USHF", "ULOP3", "CS2R", "IMNMX", "P2R", "R2P", "R2UR")
_FLOAT = ("FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "FCHK", "F2FP", "HADD2", "HFMA2", "HMUL2")


def summarise(cubin: bytes, name: str, warps: int, elems: int, shared: int = 0) -> dict:
    """``shared``: the build's shared memory per block, static and dynamic (the cubin holds only the static part)."""
    from cubintools import inspect_cubin, instructions
    from cubintools.sass import mean_loads_in_flight
    from cubintools.target import parse_target
    from kernelc.compiler.backend.ptxas import blocks_per_sm
    info = inspect_cubin(cubin)
    f = info.kernel(name if name in info.functions else None)
    ins = [i for i in instructions(cubin) if i.function == f.name]
    ops = collections.Counter(i.opcode for i in ins)
    base = collections.Counter(i.opcode.split(".")[0] for i in ins)
    threads = warps * 32
    per_thread = elems / threads

    def group(prefixes):
        return sum(v for k, v in base.items() if k.startswith(prefixes))

    shared = max(shared or 0, f.shared)
    blocks = blocks_per_sm(f.n_regs, threads, shared, parse_target("sm_90a").limits)
    return {
        "regs": f.n_regs, "shared": shared, "local": f.frame_size, "blocks_per_sm": blocks,
        "warps_per_sm": blocks * warps, "sass_total": len(ins), "sass_per_element": round(len(ins) / per_thread, 2),
        "ldg": {k: v for k, v in ops.items() if k.startswith("LDG")},
        "stg": {k: v for k, v in ops.items() if k.startswith("STG")},
        "lds_sts": {k: v for k, v in ops.items() if k.startswith(("LDS", "STS"))},
        "shfl": {k: v for k, v in ops.items() if k.startswith("SHFL")},
        "bar": {k: v for k, v in ops.items() if k.startswith("BAR")},
        "mufu": {k: v for k, v in ops.items() if k.startswith("MUFU")},
        "float": {k: base[k] for k in _FLOAT if base.get(k)},
        "int_address_math": group(_INT), "predicated": sum(1 for i in ins if i.predicate and i.predicate != "@PT"),
        "branches": group(("BRA", "BSSY", "BSYNC", "WARPSYNC")),
        "loads_before_first_use": loads_before_first_use(ins), "mean_loads_in_flight": mean_loads_in_flight(ins),
        "loads_in_flight_per_sm": round(blocks * warps * mean_loads_in_flight(ins), 1),
    }


def main(argv) -> int:
    site, pre21 = "/work/ext/triton_site", None
    for flag in ("--triton-site", "--pre21"):
        if flag in argv:
            i = argv.index(flag)
            if flag == "--triton-site":
                site = argv[i + 1]
            else:
                pre21 = argv[i + 1]
            del argv[i:i + 2]
    names = [k for k in CASES if not argv or any(a in k for a in argv)]
    cache = tempfile.mkdtemp(prefix="sass_diff_cache_")
    out = {}
    for name in names:
        case = CASES[name]
        impls = {"kernelc": ("kernelc", ROOT), "triton": ("triton", None)}
        if pre21 and name in PRE21_CASES:
            impls["kernelc 766f1cd"] = ("kernelc", pre21)
        row = {}
        for label, (impl, tree) in impls.items():
            c = _compile(impl, tree, case, site, os.path.join(cache, label.replace(" ", "_")))
            row[label] = summarise(c["cubin"], c["name"], case[4], case[6], c.get("shared", 0))
            notes = [ln for ln in c["log"].splitlines() if ln.startswith("kernelc:")]
            row[label]["ptxas_notes"] = notes
        out[name] = row
        print(f"== {name}")
        keys = list(next(iter(row.values())))
        for k in keys:
            if k == "ptxas_notes":
                continue
            print(f"  {k:24s} " + " | ".join(f"{label}: {r[k]}" for label, r in row.items()))
        for label, r in row.items():
            for n in r["ptxas_notes"]:
                print(f"  [{label}] {n}")
        sys.stdout.flush()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "sass_diff.json" if not argv else f"sass_diff_{'_'.join(argv)}.json")
    with open(path, "w") as f:
        json.dump({"cases": {k: [os.path.relpath(v[0], ROOT), *v[1:]] for k, v in CASES.items() if k in out},
                   "results": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
