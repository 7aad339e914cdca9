"""CPU (sm_90a): softmax fwd's and rope's shipped builds against their PTX with load-side cache hints
(mem21/variants.py's edits), instruction by instruction: which SASS each hint gives and that nothing else moved.

For each edit the script compares the edited build's SASS with the shipped build's: registers, local memory, the
global load opcodes, and the instruction sequence with operands where the only allowed differences are the
global loads' opcodes (their modifiers) and, for a cache-policy edit, the instructions that make the policy and the
loads' policy operand. ``same_but_loads`` says the rest is identical.

    PYTHONPATH=.:<triton 3.6 site> python3 bench/experiments/mem25/load_hints_sass.py [--out PATH]
"""
from __future__ import annotations

import collections
import difflib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem20"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem21"))

# (kernel, edits): rope's loads 0-3 read cos/sin (each row read by every batch's program of that position:
# ``:nost``, no store to their addresses), 4-7 read q (read once, then written in place: ``:st``); ``nc`` on q is
# built for the SASS only (q is written by the kernel, so the read-only path is not a legal form for it)
COLS = {
    "softmax_fwd_kernel": ["nc", "l1na", "l2ef", "lu", "ldcs", "l1ef", "ncna", "l2pf"],
    "rope_kernel": ["nc", "l1na", "l2ef", "lu", "ldcs", "ncna", "l2pf", "nc:nost", "ncna:nost",
                    "nc:st", "l1na:st", "l2ef:st", "lu:st", "ldcs:st", "l2pf:st"],
}
_REG = re.compile(r"\b(U?R\d+|P\d+|UP\d+)\b")


def _norm(i) -> str:
    """An instruction without its register names (a changed allocation is not what is checked here)."""
    return f"{i.predicate} {i.opcode} {_REG.sub('r', i.operands)}".strip()


def compare(base, other) -> dict:
    """What differs between two builds' instruction lists, load opcodes aside."""
    a = [("LDG" if i.opcode.startswith("LDG") else "", _norm(i) if not i.opcode.startswith("LDG") else "LDG")
         for i in base]
    b = [("LDG" if i.opcode.startswith("LDG") else "", _norm(i) if not i.opcode.startswith("LDG") else "LDG")
         for i in other]
    sm = difflib.SequenceMatcher(a=[x[1] for x in a], b=[x[1] for x in b], autojunk=False)
    diffs = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            diffs.append({"op": tag, "base": [_norm(x) for x in base[i1:i2]][:8],
                          "edited": [_norm(x) for x in other[j1:j2]][:8]})
    ldg_ops = [_REG.sub("r", i.operands) for i in other if i.opcode.startswith("LDG")]
    base_ldg_ops = [_REG.sub("r", i.operands) for i in base if i.opcode.startswith("LDG")]
    return {"same_but_loads": not diffs and ldg_ops == base_ldg_ops,
            "load_operands_changed": ldg_ops != base_ldg_ops, "diffs": diffs[:6],
            "register_names_differ": [i.text for i in base] != [i.text for i in other] and not diffs}


def main(argv) -> int:
    import argparse
    from cubintools import inspect_cubin, instructions
    from kernelc.compat import install
    install()
    import asm_matrix as A
    import variants as V
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results", "load_hints_sass.json"))
    a = ap.parse_args(argv)
    out = {}
    for kname, edits in COLS.items():
        sig_s, cx, nw = A.CASES[kname]
        sig = dict(p.split("=") for p in sig_s.split(","))
        ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                      divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
        # the shipped cubin and the same PTX reassembled unedited ("free", kernelc's pick for both rows): the
        # edited builds are compared with the latter, so that only the edit differs
        shipped = instructions(ck.asm["cubin"])
        plain_cubin = V.build(ck.asm["ptx"], "own", [])
        plain = instructions(plain_cubin)
        f0 = inspect_cubin(plain_cubin).kernel(ck.name)
        row = {"regs": f0.n_regs, "local": f0.frame_size, "instructions": len(plain),
               "reassembled_equals_shipped": [i.text for i in plain] == [i.text for i in shipped],
               "loads": [i.opcode for i in plain if i.opcode.startswith("LDG")], "edits": {}}
        print(f"{kname}: {row['regs']} regs, {row['instructions']} instructions, loads {row['loads']}, "
              f"reassembled = shipped: {row['reassembled_equals_shipped']}")
        for e in edits:
            cubin = V.build(ck.asm["ptx"], "own", [e])
            ins = instructions(cubin)
            f = inspect_cubin(cubin).kernel(ck.name)
            c = compare(plain, ins)
            ent = {"regs": f.n_regs, "local": f.frame_size, "instructions": len(ins),
                   "loads": [i.opcode for i in ins if i.opcode.startswith("LDG")],
                   "load_operands": sorted({i.operands.split(",", 1)[1].strip() for i in ins
                                            if i.opcode.startswith("LDG")})[:3],
                   "opcodes_changed": {k: v for k, v in (collections.Counter(i.opcode for i in ins)
                                                         - collections.Counter(i.opcode for i in plain)).items()},
                   **c}
            row["edits"][e] = ent
            print(f"  {e:10s} regs {f.n_regs} local {f.frame_size} n {len(ins)} loads "
                  f"{dict(collections.Counter(ent['loads']))} same-but-loads {c['same_but_loads']} "
                  f"load operands changed {c['load_operands_changed']} diffs {len(c['diffs'])}")
            for d in c["diffs"][:3]:
                print(f"      {d['op']}: {d['base'][:3]} -> {d['edited'][:3]}")
        out[kname] = row
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
