"""What separates nvJitLink's build of kernelc's PTX from Triton's ptxas's: the ptxas version (13.x against 12.8)
or the mode (relocatable ``-c``, as nvJitLink always runs ptxas, against a whole program, as Triton runs it)?

Each row kernel of bench_memory_bound is compiled by kernelc; its final PTX (the one kernelc assembled, with the
register ceiling kernelc's fill policy chose, read from its ptxas log) is then assembled once per assembler:

- ``njl``: nvJitLink (the one loaded: the GPU machines' is 13.0; here ``--nvjitlink LIB`` preloads one), as
  kernelc does (``.maxntid`` left out unless kernelc kept it, the same ``-maxrregcount``);
- ``pN``: a standalone ptxas (``--ptxas TAG=PATH``, e.g. ``p13=.../ptxas`` and ``p128=`` Triton's) as a whole
  program, with the PTX's ``.maxntid`` (as Triton and ``KERNELC_ASSEMBLER=ptxas`` run it);
- ``pNc``: the same ptxas with ``-c`` on the PTX nvJitLink gets (what nvJitLink runs), linked by nvJitLink;
- ``pNn``: the same ptxas as a whole program on the PTX nvJitLink gets (no ``.maxntid``, its ``-maxrregcount``).

and Triton's own cubin (``triton``). For each build: registers, SASS instruction count, loads in flight before the
first use, and the order of the memory/barrier/shuffle instructions (``--order``), so which builds share a
schedule shows on CPU.

    PYTHONPATH=. python3 bench/experiments/mem20/asm_matrix.py [--nvjitlink LIB] [--ptxas TAG=PATH ...]
        [--order] [--dump DIR] [--json PATH] [kernels...]
"""
from __future__ import annotations

import collections
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

TRITON_PTXAS = "/work/ext/triton_site/triton/backends/nvidia/bin/ptxas"

CASES = {   # kernel: (signature, constexprs, num_warps), as bench_memory_bound's rows specialise them
    "softmax_bwd_kernel": ("dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
    "log_softmax_bwd_kernel": ("dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
    "rms_norm_bwd_kernel": ("dy_ptr=*bf16,x_ptr=*bf16,w_ptr=*bf16,rstd_ptr=*fp32,dx_ptr=*bf16,dw_ptr=*fp32,stride=i32,"
                            "n_rows=i32,n_cols=i32,rows_per_program=i32", {"BLOCK_SIZE": 4096}, 8),
    "layer_norm_bwd_kernel": ("dy_ptr=*fp16,x_ptr=*fp16,w_ptr=*fp16,mean_ptr=*fp32,rstd_ptr=*fp32,dx_ptr=*fp16,"
                              "dw_ptr=*fp32,db_ptr=*fp32,stride=i32,n_rows=i32,n_cols=i32,rows_per_program=i32",
                              {"BLOCK_SIZE": 4096}, 8),
    "transpose_kernel": ("x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32,stride_xm=i32,stride_ym=i32",
                         {"BLOCK_M": 64, "BLOCK_N": 64}, 4),
    "softmax_fwd_kernel": ("y_ptr=*fp16,x_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
    "permute021_kernel": ("x_ptr=*fp16,y_ptr=*fp16,M=i32,N=i32,stride_xb=i32,stride_xm=i32,stride_yb=i32,"
                          "stride_yn=i32", {"BLOCK_M": 64, "BLOCK_N": 64}, 4),
    "swiglu_fwd_kernel": ("a_ptr=*bf16,b_ptr=*bf16,c_ptr=*bf16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 16384}, 16),
    "swiglu_bwd_kernel": ("dc_ptr=*bf16,a_ptr=*bf16,b_ptr=*bf16,da_ptr=*bf16,db_ptr=*bf16,stride=i32,n_cols=i32",
                          {"BLOCK_SIZE": 16384}, 16),
    "geglu_fwd_kernel": ("a_ptr=*bf16,b_ptr=*bf16,c_ptr=*bf16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 16384}, 16),
    "geglu_bwd_kernel": ("dc_ptr=*bf16,a_ptr=*bf16,b_ptr=*bf16,da_ptr=*bf16,db_ptr=*bf16,stride=i32,n_cols=i32",
                         {"BLOCK_SIZE": 16384}, 16),
    "cross_entropy_kernel": ("logits_ptr=*bf16,grad_ptr=*bf16,target_ptr=*i64,loss_ptr=*fp32,stride=i32,n_cols=i32,"
                             "inv_n_rows=fp32", {"BLOCK_SIZE": 32768}, 32),
    "rope_kernel": ("q_ptr=*bf16,q_row_stride=i32,cos_ptr=*fp32,sin_ptr=*fp32,cos_row_stride=i32,seq_len=i32,"
                    "n_heads=i32,head_dim=i32", {"BLOCK_H": 32, "BLOCK_D": 64}, 4),
    "log_softmax_fwd_kernel": ("y_ptr=*fp16,x_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
}

_MAXNTID = re.compile(r"^[ \t]*\.maxntid[^\n]*\n", re.M)
_CEIL = [re.compile(p) for p in (r"at up to (\d+) registers", r"at most (\d+) registers", r" at (\d+) registers \(")]


def preload_nvjitlink(lib: str) -> None:
    """Make cuda.bindings use the nvJitLink at ``lib`` (cuda.pathfinder takes a library already loaded)."""
    ctypes.CDLL(lib, mode=os.RTLD_GLOBAL)


def kernelc_build(ptxas_log: str, ptx: str):
    """(the PTX nvJitLink got, its extra options) for kernelc's chosen build, from kernelc's lines in the log."""
    first = ptxas_log.split("\n", 1)[0] if ptxas_log.startswith("kernelc:") else ""
    extra = ()
    for p in _CEIL:
        m = p.search(first)
        if m:
            extra = (f"-maxrregcount={m.group(1)}",)
            break
    keep_bound = "with its launch bound" in first or "assembled again with it" in ptxas_log
    return (ptx if keep_bound else _MAXNTID.sub("", ptx)), extra, first


def _lower_version(ptx: str, exe: str) -> str:
    from kernelc.compiler.backend.ptxas import ptxas_max_ptx
    top = ptxas_max_ptx(exe)
    if top:
        ptx = re.sub(r"^\.version\s+(\d+)\.(\d+)", lambda m: ".version %d.%d" % divmod(
            min(int(m.group(1)) * 10 + int(m.group(2)), top), 10), ptx, count=1, flags=re.M)
    return ptx


def ptxas_run(ptx: str, exe: str, extra=(), reloc: bool = False) -> bytes:
    ptx = _lower_version(ptx, exe)
    with tempfile.TemporaryDirectory(prefix="mem20-ptxas-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [exe, "-arch=sm_90a", "-O3", "-lineinfo", *(["-c"] if reloc else []), *extra, src, "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-2000:]}")
        return open(out, "rb").read()


def nvjitlink_link(obj: bytes, kind: str = "PTX", extra=()) -> bytes:
    """nvJitLink on one input: ``PTX`` (it runs its ptxas, relocatable) or ``CUBIN`` (a relocatable object: only the
    link step, so that a standalone ``ptxas -c``'s code is loaded as nvJitLink would load its own)."""
    from cuda.bindings import nvjitlink
    opts = ["-arch=sm_90a", "-Xptxas=-O3", *extra]
    h = nvjitlink.create(len(opts), opts)
    try:
        nvjitlink.add_data(h, getattr(nvjitlink.InputType, kind), obj, len(obj), "k")
        nvjitlink.complete(h)
        buf = bytearray(nvjitlink.get_linked_cubin_size(h))
        nvjitlink.get_linked_cubin(h, buf)
    finally:
        nvjitlink.destroy(h)
    return bytes(buf)


def builds(ptx: str, ptxas_log: str, ptxases: dict) -> dict:
    """Every assembler's cubin for kernelc's PTX (module doc); values are loadable cubins."""
    nj_ptx, extra, note = kernelc_build(ptxas_log, ptx)
    out = {"njl": nvjitlink_link(nj_ptx.encode(), "PTX", extra)}
    for tag, exe in ptxases.items():
        out[tag] = ptxas_run(ptx, exe)
        out[tag + "n"] = ptxas_run(nj_ptx, exe, extra)
        if _lower_version(ptx, exe) == ptx:   # nvJitLink links only objects of its own PTX versions or older
            out[tag + "c"] = nvjitlink_link(ptxas_run(nj_ptx, exe, extra, reloc=True), "CUBIN")
    return out


_MEM = re.compile(r"^(LDG|STG|LDS|STS|BAR|SHFL|MUFU|LDGSTS|RED|ATOM)")


def describe(cubin: bytes, name: str) -> dict:
    from cubintools import inspect_cubin, instructions
    from cubintools.sass import mean_loads_in_flight
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
    from cpu_compare import loads_before_first_use
    info = inspect_cubin(cubin)
    f = info.kernel(name if name in info.functions else None)
    ins = list(instructions(cubin))
    ops = collections.Counter(i.opcode.split(".")[0] for i in ins)
    order = [i.opcode for i in ins if _MEM.match(i.opcode)]
    return {"regs": f.n_regs, "sass": len(ins), "ops": dict(ops), "first_use": loads_before_first_use(ins),
            "in_flight": round(mean_loads_in_flight(ins), 2), "order": order,
            "text": [f"{i.opcode} {i.operands}" for i in ins]}


def triton_cubin(kname: str, sig: dict, cx: dict, nw: int) -> bytes:
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
    from cpu_compare import compile_triton, kernel_module
    fd, path = tempfile.mkstemp(suffix=".py", prefix="mem20_")
    with os.fdopen(fd, "w") as f:
        f.write(kernel_module(os.path.join(ROOT, "examples", "kernels", "memory_bound.py")))
    try:
        div = {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
        return compile_triton("/work/ext/triton_site", path, kname, sig, cx, div, nw, 3, True)["cubin"]
    finally:
        os.unlink(path)


def main(argv) -> int:
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels", nargs="*")
    ap.add_argument("--nvjitlink")
    ap.add_argument("--ptxas", action="append", default=[])
    ap.add_argument("--order", action="store_true")
    ap.add_argument("--dump")
    ap.add_argument("--json")
    ap.add_argument("--no-triton", action="store_true")
    a = ap.parse_args(argv)
    if a.nvjitlink:
        preload_nvjitlink(a.nvjitlink)
    ptxases = dict(p.split("=", 1) for p in a.ptxas) if a.ptxas else {"p128": TRITON_PTXAS}
    from cuda.bindings import nvjitlink
    print("nvJitLink", nvjitlink.version(), " ptxas:", ptxases, flush=True)
    from kernelc.compat import install
    install()
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    res = {}
    for kname in (a.kernels or list(CASES)):
        sig_s, cx, nw = CASES[kname]
        sig = dict(p.split("=") for p in sig_s.split(","))
        ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                      divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
        art = ck.artifacts
        cub = {"kernelc": ck.asm["cubin"], **builds(ck.asm["ptx"], art.ptxas_log, ptxases)}
        if not a.no_triton:
            cub["triton"] = triton_cubin(kname, sig, cx, nw)
        d = {t: describe(c, ck.name) for t, c in cub.items()}
        note = kernelc_build(art.ptxas_log, ck.asm["ptx"])[2]
        print(f"{kname}: {note or 'kernelc: free build'}")
        base = d["njl"]["text"]
        for t, v in d.items():
            same = "= njl" if v["text"] == base else ("same order" if v["order"] == d["njl"]["order"] else "")
            print(f"  {t:8s} regs {v['regs']:3d} sass {v['sass']:4d} first_use {v['first_use']:2d} "
                  f"in_flight {v['in_flight']:5.2f}  {same}")
            if a.order:
                print("           " + " ".join(o.split(".")[0] for o in v["order"]))
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            for t, v in d.items():
                with open(os.path.join(a.dump, f"{kname}_{t}.sass"), "w") as f:
                    f.write("\n".join(v["text"]) + "\n")
        res[kname] = {t: {k: v for k, v in x.items() if k != "text"} for t, x in d.items()}
        res[kname]["kernelc_note"] = note
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
