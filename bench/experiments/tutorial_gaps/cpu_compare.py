"""Compile one Triton-syntax kernel with kernelc and with a real Triton, on CPU, and compare the binaries.

    python3 bench/experiments/tutorial_gaps/cpu_compare.py FILE KERNEL \\
        --sig 'DX=*fp16,DY=*fp16,...,N=i32' --cx 'GROUP_SIZE_M=64,BLOCK_SIZE_N=4096' --num-warps 8 \\
        [--num-stages 3] [--triton-site /work/ext/triton_site] [--no-fp-fusion] [--json]

FILE is a Triton program (a tutorial); only its imports and ``@triton.jit`` functions are taken (its host
code needs a GPU). kernelc compiles under the ``triton`` alias (``kernelc.compat``); Triton compiles
in a subprocess with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`` and its
bundled ptxas, which needs no GPU. Both cubins are read with ``cubintools``: registers, spills (local
memory), shared memory, SASS opcode counts, and the PTX float mul/add/fma counts.

Pointers are 16-byte aligned and integers divisible by 16 unless named in ``--unaligned``, as the
runtimes specialise them for torch tensors. Nothing here is a test; see docs/triton-tutorials.md.
"""
from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PTX_FLOAT = re.compile(r"^\s*(?:@%p\d+\s+)?(mul|add|sub|fma|neg)(\.rn)?(\.ftz)?\.(f32|f16x2|f16|bf16x2|bf16)\b", re.M)


def kernel_module(path: str) -> str:
    """The imports and ``@jit`` functions of ``path`` as module text (host code dropped)."""
    src = open(path).read()
    tree = ast.parse(src)
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            mod = getattr(node, "module", None) or ""
            if mod.startswith("triton") or any(n.startswith("triton") for n in names):
                keep.append(ast.get_source_segment(src, node))
            elif isinstance(node, ast.Import) and all(n in ("kernelc", "kernelc.language") for n in names):
                # kernelc's own examples (``import kernelc as triton``): the same source under both
                keep.append("\n".join(f"import {a.name.replace('kernelc', 'triton')} as {a.asname or a.name}"
                                      for a in node.names))
        elif isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            keep.append("\n".join(ast.unparse(d).join(("@", "")) for d in node.decorator_list) + "\n" +
                        ast.get_source_segment(src, node))
    return "\n\n".join(keep) + "\n"


def _kv(text: str) -> dict:
    out = {}
    for part in filter(None, (text or "").split(",")):
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(v, v)


_REG = re.compile(r"\bR(\d+)\b")
_NO_DEST = ("ST", "RED", "BAR", "BRA", "EXIT", "RET", "CALL", "SYNCS", "MEMBAR", "ISETP", "FSETP")


def loads_before_first_use(instrs) -> int:
    """Global loads issued before any instruction reads a register one of them writes: how many of a
    thread's loads are in flight together at the start (ptxas sinks loads when it saves registers)."""
    pending, n = set(), 0
    for i in instrs:
        regs = [int(r) for r in _REG.findall(i.operands)]
        if i.opcode.startswith("LDG"):
            width = 4 if ".128" in i.opcode else 2 if ".64" in i.opcode else 1
            if any(r in pending for r in regs[1:]):
                return n
            pending.update(range(regs[0], regs[0] + width)) if regs else None
            n += 1
            continue
        sources = regs if i.opcode.startswith(_NO_DEST) else regs[1:]
        if any(r in pending for r in sources):
            return n
    return n


def mean_loads_in_flight(instrs) -> float:
    """cubintools.sass.mean_loads_in_flight (the compiler's fill policy reads the same measure)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from cubintools.sass import mean_loads_in_flight as m
    return m(instrs)


def summarise(cubin: bytes, ptx: str, name: str) -> dict:
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from cubintools import inspect_cubin, instructions
    info = inspect_cubin(cubin)
    f = info.kernel(name if name in info.functions else None)
    instrs = list(instructions(cubin))
    ops = collections.Counter(i.opcode for i in instrs)
    ptx_ops = collections.Counter("".join(m[:3]) + "." + m[3] for m in PTX_FLOAT.findall(ptx))
    return {"n_regs": f.n_regs, "local_bytes": f.frame_size, "shared_static": f.shared,
            "sass_total": sum(ops.values()), "sass": dict(sorted(ops.items())), "ptx_float": dict(sorted(ptx_ops.items())),
            "loads_before_first_use": loads_before_first_use(instrs), "mean_loads_in_flight": mean_loads_in_flight(instrs)}


def compile_kernelc(mod_path, kernel, sig, cx, div, num_warps, num_stages, fp_fusion) -> dict:
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)   # this checkout's kernelc, not an installed one
    from kernelc.compat import install
    install()
    import importlib.util
    spec = importlib.util.spec_from_file_location("cpu_compare_kernels", mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import kernelc
    from kernelc.compiler.compiler import compile as kcompile
    ck = kcompile(getattr(mod, kernel), sig, cx, "sm_90a", num_warps, num_stages, divisibility=div,
                  enable_fp_fusion=fp_fusion)
    out = summarise(ck.asm["cubin"], ck.asm["ptx"], ck.name)
    out["cubin"] = ck.asm["cubin"]
    out["ptx"] = ck.asm["ptx"]
    out["shared"] = ck.shared
    out["impl"] = f"kernelc {kernelc.__file__}"
    return out


_TRITON_CHILD = r"""
import json, sys, importlib.util
args = json.loads(sys.argv[1])
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("cpu_compare_kernels", args["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, args["kernel"])
names = fn.arg_names
sig = {n: (args["sig"][n] if n in args["sig"] else "constexpr") for n in names}
attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if args["div"].get(n) == 16}
src = ASTSource(fn, signature=sig, constexprs={(names.index(k),): v for k, v in args["cx"].items()}, attrs=attrs)
opts = {"num_warps": args["num_warps"], "num_stages": args["num_stages"], "enable_fp_fusion": args["fp_fusion"]}
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
json.dump({"cubin": ck.asm["cubin"].hex(), "ptx": ck.asm["ptx"], "name": ck.metadata.name,
           "shared": ck.metadata.shared, "version": triton.__version__}, sys.stdout)
"""


def compile_triton(site, mod_path, kernel, sig, cx, div, num_warps, num_stages, fp_fusion) -> dict:
    env = dict(os.environ, PYTHONPATH=site)
    payload = json.dumps(dict(mod=mod_path, kernel=kernel, sig=sig, cx=cx, div=div, num_warps=num_warps,
                              num_stages=num_stages, fp_fusion=fp_fusion))
    r = subprocess.run([sys.executable, "-c", _TRITON_CHILD, payload], env=env, capture_output=True, text=True,
                       cwd=tempfile.gettempdir())
    if r.returncode:
        raise SystemExit(f"Triton failed:\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout)
    out = summarise(bytes.fromhex(res["cubin"]), res["ptx"], res["name"])
    out["cubin"] = bytes.fromhex(res["cubin"])
    out["ptx"] = res["ptx"]
    out["shared"] = res["shared"]
    out["impl"] = f"triton {res['version']}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("kernel")
    ap.add_argument("--sig", required=True, help="runtime arguments: name=type,... (*fp16, i32, fp32)")
    ap.add_argument("--cx", default="", help="constexprs: name=value,...")
    ap.add_argument("--num-warps", type=int, default=4)
    ap.add_argument("--num-stages", type=int, default=3)
    ap.add_argument("--unaligned", default="", help="arguments not 16-aligned/divisible: a,b,...")
    ap.add_argument("--no-fp-fusion", action="store_true")
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--only", choices=("kernelc", "triton"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dump", help="folder for each compiler's whole SASS and PTX (KERNEL_IMPL.sass, .ptx)")
    a = ap.parse_args(argv)
    sig = _kv(a.sig)
    cx = {k: _value(v) for k, v in _kv(a.cx).items()}
    unaligned = set(filter(None, a.unaligned.split(",")))
    div = {n: (1 if n in unaligned else 16) for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
    fd, mod_path = tempfile.mkstemp(suffix=".py", prefix="cpu_compare_")
    with os.fdopen(fd, "w") as f:
        f.write(kernel_module(a.file))
    try:
        res = {}
        if a.only != "triton":
            res["kernelc"] = compile_kernelc(mod_path, a.kernel, sig, cx, div, a.num_warps, a.num_stages,
                                             not a.no_fp_fusion)
        if a.only != "kernelc":
            res["triton"] = compile_triton(a.triton_site, mod_path, a.kernel, sig, cx, div, a.num_warps,
                                           a.num_stages, not a.no_fp_fusion)
    finally:
        os.unlink(mod_path)
    for impl, r in res.items():
        cubin, ptx = r.pop("cubin"), r.pop("ptx")
        if a.dump:
            from cubintools.sass import disassemble
            os.makedirs(a.dump, exist_ok=True)
            with open(os.path.join(a.dump, f"{a.kernel}_{impl}.sass"), "w") as f:
                f.write(disassemble(cubin, line_info=False))
            with open(os.path.join(a.dump, f"{a.kernel}_{impl}.ptx"), "w") as f:
                f.write(ptx)
    if a.json:
        json.dump(res, sys.stdout, indent=1)
        print()
        return 0
    for impl, r in res.items():
        print(f"{impl:8s} regs {r['n_regs']:4d}  local {r['local_bytes']:4d}  shared {r['shared']:6d}  "
              f"sass {r['sass_total']:5d}  ptx {r['ptx_float']}")
    keys = sorted(set().union(*(r["sass"] for r in res.values())))
    interesting = [k for k in keys if k.split(".")[0] in ("FFMA", "FMUL", "FADD", "HADD2", "HMUL2", "HFMA2", "LDG",
                                                           "STG", "LDS", "STS", "BAR", "SHFL", "MUFU", "F2F", "PRMT",
                                                           "F2FP", "HADD2.F32", "MOV", "IMAD", "LDGSTS")]
    for k in interesting:
        print(f"  {k:24s} " + "  ".join(f"{r['sass'].get(k, 0):5d}" for r in res.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
