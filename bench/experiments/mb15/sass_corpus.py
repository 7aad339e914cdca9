"""SASS of scripts/ptx_corpus.py's kernels as compiled by any kernelc tree, for A/B on CPU (no GPU).

    python3 bench/experiments/mb15/sass_corpus.py record TREE OUT.json      # e.g. TREE=/tmp/pre21 (766f1cd)
    KERNELC_UNIFORM_MASKS=all python3 bench/experiments/mb15/sass_corpus.py record . all.json
    python3 bench/experiments/mb15/sass_corpus.py compare A.json B.json [KEY_SUBSTRING]

``record`` runs this checkout's scripts/ptx_corpus.py kernel list against TREE's kernelc (TREE first on
sys.path) and keeps, per kernel, the registers, shared memory and SASS (opcodes with operands, register
numbers and addresses removed, so a renaming alone compares equal). ``compare`` prints per kernel that
differs: registers, instruction count and the opcodes whose counts changed.
"""
from __future__ import annotations

import collections
import json
import os
import re
import sys

HERE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def record(tree, out_path):
    tree = os.path.abspath(tree)
    sys.path.insert(0, tree)
    import kernelc
    assert os.path.dirname(os.path.dirname(os.path.abspath(kernelc.__file__))) == tree, kernelc.__file__
    sys.path.insert(1, HERE_ROOT)
    from cubintools import inspect_cubin, instructions
    import importlib.util
    spec = importlib.util.spec_from_file_location("ptx_corpus", os.path.join(HERE_ROOT, "scripts", "ptx_corpus.py"))
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    corpus.ROOT = tree
    real = kernelc.compile
    got = {}

    def wrapped(*a, **kw):
        ck = real(*a, **kw)
        cubin = ck.asm["cubin"]
        info = inspect_cubin(cubin)
        f = info.kernel(ck.name if ck.name in info.functions else None)
        ins = [i.opcode + " " + _norm(i.operands) for i in instructions(cubin)]
        got[len(got)] = {"n_regs": f.n_regs, "shared": ck.shared, "sass": ins}
        return ck

    kernelc.compile = wrapped
    ptx_path = out_path + ".ptx.json"
    # record() calls kernelc.compile once per key in order; pair them up by order of success
    order = []
    orig_print = print

    def spy(*a, **kw):
        if len(a) == 2 and isinstance(a[1], int):  # record()'s progress line: key, len(ptx)
            order.append(a[0])
        orig_print(*a, **kw)

    corpus.print = spy
    corpus.record(ptx_path)
    ptx = json.load(open(ptx_path))
    res, i = {}, 0
    for key in order:
        if key not in ptx:
            continue
        if ptx[key].startswith("ERROR"):
            res[key] = {"error": ptx[key]}
        else:
            res[key] = got[i]
            i += 1
    json.dump(res, open(out_path, "w"))
    print(f"{len(res)} kernels -> {out_path}")


_ADDR = re.compile(r"0x[0-9a-f]+|\bR\d+\b|\bP\d\b|\bUR\d+\b|\bUP\d\b|`\([^)]*\)")


def _norm(ops):
    return _ADDR.sub("#", ops).strip()


def compare(a_path, b_path, sub=""):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    n = 0
    for k in a:
        if sub not in k or k not in b:
            continue
        x, y = a[k], b[k]
        if x == y:
            continue
        n += 1
        if "error" in x or "error" in y:
            print(f"{k}: error {('error' in x)} -> {('error' in y)}")
            continue
        cx = collections.Counter(s.split(" ")[0] for s in x["sass"])
        cy = collections.Counter(s.split(" ")[0] for s in y["sass"])
        ch = {o: (cx[o], cy[o]) for o in sorted(set(cx) | set(cy)) if cx[o] != cy[o]}
        print(f"{k}: regs {x['n_regs']}->{y['n_regs']} smem {x['shared']}->{y['shared']} "
              f"sass {len(x['sass'])}->{len(y['sass'])} {' '.join(f'{o}:{p}->{q}' for o, (p, q) in ch.items())}")
    print(f"{n} of {len([k for k in a if sub in k])} differ")


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        record(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["compare"]:
        compare(sys.argv[2], sys.argv[3], *(sys.argv[4:5]))
    else:
        sys.exit(__doc__)
