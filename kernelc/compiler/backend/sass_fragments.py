"""Register A fragments that the assembled SASS overwrites inside a loop (kvr27, docs/attention.md).

A wgmma whose A operand is a loop-invariant register fragment (passes/stage_operands.py, KERNELC_WGMMA_A_REGS) reads
the same registers on every trip. ptxas 13.0 (nvJitLink 13.0.88, the GPU hosts') gave such registers to the loop's own
values after a pinned wgmma wait: from the second trip the wgmma read them (the D=64 attention backward's dK/dV kernel
at 64 x 128, 8 warps, KV_REGS: wrong dK and dV on an H200). :func:`overwritten_a_fragments` finds that in the SASS; the
compiler assembles such a kernel again with the fragments staged (KERNELC_WGMMA_A_REGS_PINNED=auto, compiler.py).
"""
from __future__ import annotations

import re
from typing import List, Set, Tuple

SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


_PRED = r"(?:@!?U?P\w+\s+)?"


def sass_writes(ins: str) -> Set[int]:
    """Registers an instruction writes, for :func:`overwritten_a_fragments`: its first register operand (SHFL's after
    its predicate) and as many after it as the width says (.64/.WIDE/CS2R: two, .128 and LDSM's .4: four, LDSM's .2:
    two); an HGMMA writes its accumulators (64xNx16: N/2 fp32 registers a thread, N/4 fp16); stores, reductions,
    branches and barriers write none."""
    h = re.match(_PRED + r"HGMMA\.64x(\d+)x\d+\.(F32|F16)\S*\s+R(\d+)\b", ins)
    if h:
        n = int(h.group(1)) // (2 if h.group(2) == "F32" else 4)
        return set(range(int(h.group(3)), int(h.group(3)) + n))
    m = re.match(_PRED + r"([A-Z0-9_.]+)\s+(?:PT, |P\d, )?R(\d+)\b", ins)
    if not m or m.group(1).startswith(("ST", "RED", "ATOM", "BRA", "BAR", "SYNCS", "WARPGROUP")):
        return set()
    n, op = int(m.group(2)), m.group(1)
    width = 4 if (".128" in op or (op.startswith("LDSM") and op.endswith(".4"))) else \
        2 if (".64" in op or "WIDE" in op or op == "CS2R" or (op.startswith("LDSM") and op.endswith(".2"))) else 1
    return set(range(n, n + width))


def overwritten_a_fragments(sass: str) -> Tuple[List[str], int]:
    """HGMMAs whose register A fragment comes into a loop from outside it and that the loop overwrites before its
    back edge, so that the next trip reads the overwritten registers: per register of the fragment, none of the
    loop's unpredicated instructions before the HGMMA writes it and an instruction after it does (HGMMA accumulators,
    predicated writes and the blocks the loop branches out to that branch back into it count). Loops: backward
    branches before the last EXIT (the try-wait retry stubs after it branch back into the body) around at least 8
    HGMMAs, innermost only."""
    ins, labels = [], {}
    for ln in sass.splitlines():
        lab = re.match(r"\s*(\.L_x_\d+):", ln)
        if lab:
            labels[lab.group(1)] = len(ins)
            continue
        m = SASS_LINE.search(ln)
        if m:
            ins.append(m.group(1))
    last_exit = max([k for k, x in enumerate(ins) if re.match(r"(@!?P\d\s+)?EXIT\b", x)] or [len(ins)])
    loops = []
    for j, x in enumerate(ins[:last_exit]):
        b = re.search(r"BRA `\((\.L_x_\d+)\)", x)
        if b and labels.get(b.group(1), j + 1) <= j and \
                sum(i.startswith("HGMMA") for i in ins[labels[b.group(1)]:j + 1]) >= 8:
            loops.append((labels[b.group(1)], j))
    inner = [(t, j) for t, j in loops if not any((u, k) != (t, j) and t <= u and k <= j for u, k in loops)]

    def out_of_line(top, end):
        """Writes of the code the loop branches to outside [top, end] that branches back into it."""
        out = set()
        for x in ins[top:end + 1]:
            b = re.search(r"BRA `\((\.L_x_\d+)\)", x)
            t = labels.get(b.group(1)) if b else None
            if t is None or top <= t <= end:
                continue
            k, w = t, set()
            while k < len(ins) and not re.match(r"(BRA|EXIT|RET)\b", ins[k]):
                w |= sass_writes(ins[k])
                k += 1
            back = re.search(r"BRA `\((\.L_x_\d+)\)", ins[k]) if k < len(ins) else None
            if back and top <= labels.get(back.group(1), -1) <= end:
                out |= w
        return out

    bad = []
    for top, end in inner:
        away = out_of_line(top, end)
        for k in range(top, end + 1):
            h = re.match(_PRED + r"HGMMA\.\S+ R\d+, R(\d+),", ins[k])
            if not h:
                continue
            a = set(range(int(h.group(1)), int(h.group(1)) + 4))
            before = set().union(*[sass_writes(i) for i in ins[top:k] if not i.startswith("@")])
            after = set().union(*[sass_writes(i) for i in ins[k + 1:end + 1]]) | away
            if (a - before) & after:
                bad.append(ins[k])
    return bad, len(inner)
