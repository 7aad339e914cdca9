"""Learn, from nvdisasm's own output, where sm_90 SASS keeps the register operands that
``cubintools.sass.mean_loads_in_flight`` reads, and write the table ``cubintools/sm90_fields.py``.

    python3 bench/experiments/mb_gaps/learn_sm90_fields.py DIR [DIR...]    # folders of sm_90/sm_90a cubins
    python3 bench/experiments/mb_gaps/learn_sm90_fields.py --check DIR...  # decoder against nvdisasm, per cubin
    python3 bench/experiments/mb_gaps/learn_sm90_fields.py --merge DIR...  # add the keys DIR's cubins teach to
                                                                          # the table, keeping the ones it has

Each instruction is 16 bytes; its low 12 bits (``key``) name the opcode and its operand form (register,
immediate, constant, uniform). For every key seen, the candidate byte fields (bits 16, 24, 32, 40 of the first
word, 0 and 8 of the second) are sorted into:

- ``regs``: fields that hold a printed ``R<n>`` operand, in the order nvdisasm prints them (the first is what
  the measure takes as the destination); 255 is RZ and is not printed;
- ``unseen``: fields that were 255 in every instance (a register field never used, or a constant): the
  decoder gives up (and the caller runs nvdisasm) where one holds anything else;
- the rest hold something else (immediates, uniform registers, predicates, modifiers) and are ignored.

A key whose instances no ordering explains is left out (the decoder gives up on it). For load keys the
access width (``.64``/``.128``) is learned from bits 9-11 of the second word. ``--check`` compares
``mean_loads_in_flight`` from the decoder with the one from nvdisasm's text on every cubin given. ``--merge``
keeps every key of the present table as it is and adds the keys it lacks (then ``--check`` the decoder on the
new cubins and the old): for a form the table's corpus did not hold, e.g. the uniform-register FSETP (0xc0b) of
tutorial 04's ``_seeded_dropout``, whose fill decision ran nvdisasm without it.
"""
from __future__ import annotations

import collections
import glob
import itertools
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

_REG = re.compile(r"\bR(\d+)\b")


def _instances(paths):
    from cubintools.cubin import _Elf
    from cubintools.sass import disassemble, parse_sass
    for p in paths:
        cubin = open(p, "rb").read()
        e = _Elf(cubin)
        flags, abi = e.elf["e_flags"], e.elf["e_ident"]["EI_ABIVERSION"]
        if ((flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF) != 90:   # as sm90_fields.decode_sm90 reads it
            continue
        for i in parse_sass(disassemble(cubin, line_info=False)):
            lo, hi = struct.unpack_from("<QQ", e.by_name[f".text.{i.function}"].data(), i.pc)
            yield lo, hi, i.opcode, tuple(int(r) for r in _REG.findall(i.operands))


def learn(paths):
    from cubintools.sm90_fields import FIELDS, field
    by = collections.defaultdict(dict)
    for lo, hi, op, regs in _instances(paths):
        by[lo & 0xFFF][(lo, hi)] = (op, regs)
    table, widths, left_out = {}, {}, {}
    for key, samples in sorted(by.items()):
        samples = list(samples.items())
        bases = {op.split(".")[0] for (_, _), (op, _) in samples}
        if len(bases) != 1:
            left_out[key] = f"several opcodes {sorted(bases)}"
            continue
        base = bases.pop()
        unseen = [f for f in FIELDS if all(field(lo, hi, f) == 255 for (lo, hi), _ in samples)]
        cand = [f for f in FIELDS if f not in unseen and
                all(field(lo, hi, f) in (255, *regs) for (lo, hi), (_, regs) in samples)]
        order = None
        for k in range(len(cand), -1, -1):      # as many fields as explain every instance
            for t in itertools.permutations(cand, k):
                if all([v for v in (field(lo, hi, f) for f in t) if v != 255] == list(regs)
                       for (lo, hi), (_, regs) in samples):
                    order = t
                    break
            if order is not None:
                break
        if order is None:
            left_out[key] = f"{base}: no field order explains its {len(samples)} encodings"
            continue
        table[key] = (base, order, tuple(unseen))
        if base.startswith("LDG"):
            w = {}
            for (lo, hi), (op, _) in samples:
                width = 4 if ".128" in op else 2 if ".64" in op else 1
                code = (hi >> 9) & 7
                if w.setdefault(code, width) != width:
                    left_out[key] = f"{base}: width not in bits 73-75"
                    table.pop(key, None)
            if key in table:
                widths[key] = w
    return table, widths, left_out, sum(len(s) for s in by.values())


def merge(table, widths, left_out, n, paths):
    """The present table with the learned keys it lacks added (a key it has stays as it is: it was learned from
    more instances)."""
    from cubintools.sm90_fields import KEYS, LOAD_WIDTHS
    added = {k: v for k, v in table.items() if k not in KEYS}
    print(f"adding {len(added)} keys: " + ", ".join(f"0x{k:03x} {v[0]}" for k, v in added.items()))
    merged = dict(sorted({**KEYS, **added}.items()))
    mwidths = dict(sorted({**LOAD_WIDTHS, **{k: w for k, w in widths.items() if k in added}}.items()))
    return merged, mwidths, {k: v for k, v in left_out.items() if k not in merged}, n, paths


def write(table, widths, left_out, n, paths, merged_from=None):
    out = os.path.join(ROOT, "cubintools", "sm90_fields.py")
    src = open(out).read()
    head = src[:src.index("# -- generated")]
    how = (f"from {n} distinct encodings of {len(paths)} cubins" if merged_from is None else
           f"{merged_from}, merged with {n} distinct encodings of {len(paths)} more cubins (--merge)")
    lines = [head + f"# -- generated by bench/experiments/mb_gaps/learn_sm90_fields.py {how}; do not edit by hand\n",
             "KEYS = {"]
    for key, (base, order, unseen) in table.items():
        lines.append(f"    0x{key:03x}: ({base!r}, {order!r}, {unseen!r}),")
    lines.append("}")
    lines.append("LOAD_WIDTHS = {")
    for key, w in widths.items():
        lines.append(f"    0x{key:03x}: {dict(sorted(w.items()))!r},")
    lines.append("}")
    lines.append(f"# left out: {', '.join(f'0x{k:03x} ({why})' for k, why in left_out.items()) or 'none'}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{out}: {len(table)} keys, {len(widths)} load keys, {len(left_out)} left out, from {n} encodings")


def check(paths):
    from cubintools.sass import encoded_loads_in_flight as mean_loads_in_flight_sm90
    from cubintools.sass import instructions, mean_loads_in_flight
    same = differ = gave_up = 0
    for p in paths:
        cubin = open(p, "rb").read()
        fast = mean_loads_in_flight_sm90(cubin)
        if fast is None:
            gave_up += 1
            continue
        slow = mean_loads_in_flight(instructions(cubin))
        if fast == slow:
            same += 1
        else:
            differ += 1
            print(f"DIFFERENT {p}: decoder {fast}, nvdisasm {slow}")
    print(f"{same} cubins the same, {differ} different, {gave_up} the decoder left to nvdisasm")
    return differ


def main(argv):
    checking, merging = "--check" in argv, "--merge" in argv
    dirs = [a for a in argv if a not in ("--check", "--merge")]
    paths = sorted(p for d in dirs for p in glob.glob(os.path.join(d, "*.cubin")))
    if checking:
        return 1 if check(paths) else 0
    if merging:
        import re as _re
        first = open(os.path.join(ROOT, "cubintools", "sm90_fields.py")).read()
        m = _re.search(r"learn_sm90_fields\.py (from [^;]*);", first)
        write(*merge(*learn(paths), paths), merged_from=m.group(1) if m else "an earlier table")
        return 0
    write(*learn(paths), paths)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
