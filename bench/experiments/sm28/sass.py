"""CPU (sm_90a): each column's build of a memory-bound row kernel -- registers, instruction count, opcode counts
of interest, a hash of the SASS text -- and, with --dump DIR, its PTX and SASS.

    python3 bench/experiments/sm28/sass.py [--kernel softmax_fwd_kernel] [--dump DIR] [--json PATH] COL...

COL: ``TAG=EDIT[+EDIT...]`` (edits of cols.py's table) or ``TAG=`` (kernelc's own cubin, unedited)."""
import argparse
import collections
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem20"))
import cols  # noqa: E402,F401  (installs the edits)
import variants as V  # noqa: E402

KEEP = ("LDG", "STG", "BAR", "LDS", "STS", "SHFL", "REDUX", "MUFU", "BRA", "FMNMX", "EXIT", "FMUL", "FADD")


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("cols", nargs="+")
    ap.add_argument("--kernel", default="softmax_fwd_kernel")
    ap.add_argument("--dump")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import asm_matrix as A
    from cubintools import inspect_cubin, instructions
    from cubintools.sass import disassemble
    from kernelc.compat import install
    install()
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    sig_s, cx, nw = A.CASES[a.kernel]
    sig = dict(p.split("=") for p in sig_s.split(","))
    ck = kcompile(getattr(K, a.kernel), sig, cx, "sm_90a", nw, 3,
                  divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
    res = {}
    for spec in a.cols:
        tag, _, rest = spec.partition("=")
        edits = [e for e in rest.split("+") if e]
        cubin = ck.asm["cubin"] if not edits else V.build(ck.asm["ptx"], "free", edits)
        f = inspect_cubin(cubin).kernel(ck.name)
        ins = instructions(cubin)
        ops = collections.Counter(i.opcode.split(".")[0] for i in ins if i.opcode.startswith(KEEP))
        text = disassemble(cubin)
        body = "\n".join(ln.split("/*", 2)[-1] if False else ln for ln in text.split("\n") if "/*0" in ln)
        res[tag] = {"edits": edits, "regs": f.n_regs, "local": f.frame_size, "instructions": len(ins),
                    "ops": dict(sorted(ops.items())), "sass_sha": hashlib.sha256(body.encode()).hexdigest()[:12]}
        print(f"{tag:8s} regs {f.n_regs:2d} n {len(ins):3d} sha {res[tag]['sass_sha']} {dict(sorted(ops.items()))}")
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            open(os.path.join(a.dump, f"{tag}.sass"), "w").write(text)
            ptx = ck.asm["ptx"]
            for e in edits:
                n, s = V.split_edit(e)
                ptx = V.EDITS[n](ptx, s)
            open(os.path.join(a.dump, f"{tag}.ptx"), "w").write(ptx)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"kernel": a.kernel, "cols": res}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
