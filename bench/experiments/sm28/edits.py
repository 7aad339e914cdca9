"""PTX edits of kernelc's softmax fwd build (issue 21's last open row), as columns for mem21/variants.py.

Each edit is a text transform of kernelc's own PTX for a one-pass row kernel whose block reductions use the
broadcast cross-warp step (codegen/reduce.py: lane 0 of each warp stores its partial, a barrier, the threads
< num_warps read the partials and combine them with shuffles, thread 0 stores the result, a barrier, every thread
reads it). They fail loudly on PTX without that shape.

- ``w0``: the combine after the first barrier only in warp 0 (a warp-uniform branch around it; the other warps'
  combine is dead: only thread 0 stores its result). Exact: the same values reach the same stores.
- ``redux``: the max reductions' butterflies (the warp step and the cross-warp combine) as one
  ``redux.sync.max.s32`` on the float's order-preserving integer key (a NaN partial keyed as the minimum, so the
  result is max.f32's: the largest non-NaN value, NaN only where every value is NaN). Exact but for the payload
  of an all-NaN row's NaN.
- ``mtree``: a serial chain of ``max.f32`` (the in-thread part of a max reduction) as a balanced tree (max is
  associative and commutative: exact).
- ``rcp``: ``div.full.f32 q, e, s`` with one divisor ``s`` as ``mul.f32 q, e, r`` with ``r = rcp.approx.ftz(s)``
  computed once: div.full's SASS is that product where 2^-126 <= |s| <= 2^126 (outside it, it scales both operands
  first), so equal to it there; softmax's divisor is a sum of exp(x - max x) (in [1, n]).
- ``amax``: the max's cross-warp step as a shared-memory atomic max a warp (``atomic_max``; exact).
- ``ftz``: ``ex2.approx.ftz`` (``ex2_ftz``; not provably exact).
- ``pair``: the max's cross-warp step removed (NOT exact): each warp subtracts its own maximum m_w, and the sum's
  cross-warp step exchanges (m_w, sum_w) pairs: the combined sum is sum_w exp(m_w - M) * sum_w, each element
  is scaled by exp(m_w - M) / S. The same math as the shipped build up to rounding (a few fp32 ulp before the fp16
  conversion). Only a question: does the max's cross-warp step (2 barriers, 4 shuffles) cost the row time?

Timed on an H200 in session 28 (call R2, docs/performance.md "sm28"): none 0.3% faster than the shipped build.
"""
from __future__ import annotations

import re

_BAR = re.compile(r"^\s*bar\.sync\s+0;\s*$")
_XLD = re.compile(r"^\s*@(%p\d+)\s+ld\.shared\.b32\s+(%r\w+),\s*\[(%r\d+)\];\s*$")
_XST0 = re.compile(r"^\s*@(%p\d+)\s+st\.shared\.b32\s+\[(%r\d+)\],\s*(%r\w+);\s*$")
_TID = re.compile(r"^\s*mov\.u32\s+(%r\d+),\s*%tid\.x;\s*$", re.M)
_SHFL = re.compile(r"^\s*shfl\.sync\.bfly\.b32\s+(%r\d+),\s*(%r\d+),\s*(\d+),\s*31,\s*-1;\s*$")
_BIN = re.compile(r"^\s*(max|add)\.f32\s+(%r\d+),\s*(%r\d+),\s*(%r\d+);\s*$")


def _add_regs(ptx: str, decls) -> str:
    lines = ptx.split("\n")
    last = max(i for i, ln in enumerate(lines) if ln.strip().startswith(".reg"))
    lines[last + 1:last + 1] = [f"\t{d}" for d in decls]
    return "\n".join(lines)


def _tid(ptx: str) -> str:
    m = _TID.search(ptx)
    if not m:
        raise ValueError("no mov of %tid.x")
    return m.group(1)


def _xwarp_blocks(lines):
    """[(i_ld, i_st, i_bar)] for each broadcast cross-warp combine: the predicated partials' load, thread 0's
    store of the result, the barrier after it."""
    out = []
    for i, ln in enumerate(lines):
        if _XLD.match(ln):
            j = next(k for k in range(i + 1, len(lines)) if _XST0.match(lines[k]))
            b = next(k for k in range(j + 1, len(lines)) if _BAR.match(lines[k]))
            out.append((i, j, b))
    if not out:
        raise ValueError("no broadcast cross-warp combine (@p ld.shared.b32) in the PTX")
    return out


def warp0_only(ptx: str, sel=None) -> str:
    """``w0``: warps other than 0 branch from before the partials' load to the barrier after thread 0's store."""
    tid = _tid(ptx)
    lines = ptx.split("\n")
    blocks = _xwarp_blocks(lines)
    ins = {}
    for n, (i, j, b) in enumerate(blocks):
        ins[i] = [f"\tsetp.ge.u32 %pw0_{n}, {tid}, 32;", f"\t@%pw0_{n} bra.uni $L__sm28_w0_{n};"]
        ins[b] = [f"$L__sm28_w0_{n}:"]
    out = []
    for k, ln in enumerate(lines):
        out += ins.get(k, [])
        out.append(ln)
    return _add_regs("\n".join(out), [f".reg .pred %pw0_{n};" for n in range(len(blocks))])


def _butterfly_runs(lines, op):
    """Runs of ``shfl.bfly x -> t; op.f32 y, x, t`` pairs chained through y: [(first line, last line, input,
    output)]."""
    runs, i = [], 0
    while i < len(lines) - 1:
        s = _SHFL.match(lines[i])
        if s:
            src = s.group(2)
            start, cur, k = i, src, i
            while True:
                s2 = _SHFL.match(lines[k]) if k < len(lines) else None
                if not s2 or s2.group(2) != cur:
                    break
                # the op may be separated by .loc lines
                m = k + 1
                while m < len(lines) and lines[m].strip().startswith(".loc"):
                    m += 1
                b = _BIN.match(lines[m])
                if not b or b.group(1) != op or {b.group(3), b.group(4)} != {cur, s2.group(1)}:
                    break
                cur, k = b.group(2), m + 1
                while k < len(lines) and lines[k].strip().startswith(".loc"):
                    k += 1
            if cur != src:
                runs.append((start, k - 1, src, cur))
                i = k
                continue
        i += 1
    return runs


def redux_max(ptx: str, sel=None) -> str:
    """``redux``: every max butterfly as one redux.sync.max.s32 on an order-preserving integer key; the
    cross-warp combine's lanes that load no partial start at -inf (a butterfly over 16 lanes ignored them)."""
    lines = ptx.split("\n")
    runs = _butterfly_runs(lines, "max")
    if not runs:
        raise ValueError("no max.f32 butterfly")
    # lanes >= num_warps of the combine load nothing: give them the identity before the predicated load
    xlds = {m.group(2): i for i, m in ((i, _XLD.match(ln)) for i, ln in enumerate(lines)) if m}
    new, regs, pos = [], [], 0
    for n, (a, b, src, dst) in enumerate(runs):
        new += lines[pos:a]
        k, t, nn, ko = f"%rxk{n}", f"%rxt{n}", f"%pxn{n}", f"%rxo{n}"
        regs += [f".reg .b32 {k};", f".reg .b32 {t};", f".reg .b32 {ko};", f".reg .pred {nn};"]
        new += [f"\tshr.s32 {t}, {src}, 31;", f"\tand.b32 {t}, {t}, 0x7FFFFFFF;", f"\txor.b32 {k}, {src}, {t};",
                f"\tsetp.nan.f32 {nn}, {src}, {src};", f"\tselp.b32 {k}, 0x80000000, {k}, {nn};",
                f"\tredux.sync.max.s32 {ko}, {k}, -1;",
                f"\tshr.s32 {t}, {ko}, 31;", f"\tand.b32 {t}, {t}, 0x7FFFFFFF;", f"\txor.b32 {dst}, {ko}, {t};"]
        pos = b + 1
    new += lines[pos:]
    out = "\n".join(new)
    for r, i in xlds.items():   # a run reading the combine's loaded partial: its idle lanes hold -inf
        if any(src == r for _, _, src, _ in runs):
            out = re.sub(r"^(\s*@%p\d+\s+ld\.shared\.b32\s+" + re.escape(r) + r",)", f"\tmov.b32 {r}, 0xFF800000;\n\\1",
                         out, count=1, flags=re.M)
    return _add_regs(out, regs)


_MAXC = re.compile(r"^\s*max\.f32\s+(%r\d+),\s*(%r\d+),\s*(%r\d+);\s*$")


def max_tree(ptx: str, sel=None) -> str:
    """``mtree``: chains ``m1 = max(a, b); m2 = max(m1, c); ...`` (each link's result used only by the next) as a
    balanced tree over the same leaves, its result in the chain's last register."""
    lines = ptx.split("\n")
    out, regs, i, n = [], [], 0, 0
    uses = {}
    for ln in lines:
        for r in re.findall(r"%r\d+", ln):
            uses[r] = uses.get(r, 0) + 1
    while i < len(lines):
        m = _MAXC.match(lines[i])
        chain = []
        if m:
            leaves, dst, k = [m.group(2), m.group(3)], m.group(1), i + 1
            while k < len(lines):
                m2 = _MAXC.match(lines[k])
                if not m2 or m2.group(2) != dst or uses.get(dst, 0) != 2:
                    break
                leaves.append(m2.group(3))
                dst, k = m2.group(1), k + 1
            if len(leaves) >= 4:
                lvl, t = leaves, 0
                while len(lvl) > 1:
                    nxt = []
                    for a in range(0, len(lvl) - 1, 2):
                        r = dst if len(lvl) == 2 else f"%rmt{n}_{t}"
                        if r != dst:
                            regs.append(f".reg .b32 {r};")
                        out.append(f"\tmax.f32 {r}, {lvl[a]}, {lvl[a + 1]};")
                        nxt.append(r)
                        t += 1
                    if len(lvl) % 2:
                        nxt.append(lvl[-1])
                    lvl = nxt
                n += 1
                i = k
                continue
        out.append(lines[i])
        i += 1
    if not n:
        raise ValueError("no max.f32 chain of 3 or more links")
    return _add_regs("\n".join(out), regs)


_DIV = re.compile(r"^\s*div\.full\.f32\s+(%r\d+),\s*(%r\d+),\s*(%r\d+);\s*$")


def rcp_mul(ptx: str, sel=None) -> str:
    """``rcp``: div.full.f32 by one divisor as a product with its rcp.approx.ftz, computed before the first."""
    lines = ptx.split("\n")
    divs = [(i, _DIV.match(ln)) for i, ln in enumerate(lines) if _DIV.match(ln)]
    if not divs:
        raise ValueError("no div.full.f32")
    ds = {m.group(3) for _, m in divs}
    if len(ds) != 1:
        raise ValueError(f"{len(ds)} divisors")
    d = ds.pop()
    out = []
    for i, ln in enumerate(lines):
        if i == divs[0][0]:
            out.append(f"\trcp.approx.ftz.f32 %rrcp, {d};")
        m = _DIV.match(ln)
        out.append(f"\tmul.f32 {m.group(1)}, {m.group(2)}, %rrcp;" if m else ln)
    return _add_regs("\n".join(out), [".reg .b32 %rrcp;"])


_ST = re.compile(r"^\s*@(%p\d+)\s+st\.shared\.b32\s+\[(%r\d+)\],\s*(%r\d+);\s*$")
_BCAST = re.compile(r"^\s*ld\.shared\.b32\s+(%r\d+),\s*\[global_smem\];\s*$")
_LOG2E = "0f3FB8AA3B"


def pair(ptx: str, sel=None) -> str:
    """``pair`` (not exact, a question only): see the module's docstring. Expects exactly two broadcast block
    reductions, a max then a sum, in 128 bytes of scratch (16 warps: the maxima at 0, the sums at 64)."""
    lines = ptx.split("\n")
    blocks = _xwarp_blocks(lines)
    if len(blocks) != 2:
        raise ValueError(f"{len(blocks)} cross-warp combines, expected a max and a sum")
    dead, repl, before = set(), {}, {}
    info = []
    for i, j, b in blocks:
        st0 = max(k for k in range(i) if _ST.match(lines[k]))          # lane 0's store of its warp's partial
        bar1 = max(k for k in range(st0, i) if _BAR.match(lines[k]))
        bc = next(k for k in range(b, len(lines)) if _BCAST.match(lines[k]))
        info.append((st0, bar1, i, j, b, bc))
    (st0a, bar1a, lda, sta, bara, bca), (st0b, bar1b, ldb, stb, barb, bcb) = info
    ops = [(_BIN.match(lines[k]) or [None, None])[1] for k in range(lda, sta)]
    if "max" not in ops or "add" not in [(_BIN.match(lines[k]) or [None, None])[1] for k in range(ldb, stb)]:
        raise ValueError("expected a max combine, then a sum combine")
    mw = _ST.match(lines[st0a]).group(3)          # the warp's maximum
    m = _BCAST.match(lines[bca]).group(1)        # the block maximum the shipped build subtracts
    # the max's cross-warp step goes: its stores, barriers and combine; each warp subtracts its own maximum
    # (0 for a warp with no element above -inf, so no -inf - -inf)
    for k in [st0a, bar1a, bara, sta] + [k for k in range(lda, sta) if _SHFL.match(lines[k]) or _BIN.match(lines[k])
                                        or _XLD.match(lines[k])]:
        dead.add(k)
    repl[bca] = [f"\tsetp.eq.f32 %ppw0, {mw}, 0fFF800000;", f"\tselp.b32 {m}, 0f00000000, {mw}, %ppw0;"]
    # the sum's barrier before its stores guarded the max's scratch: gone with it. (s28 R2 timed a first version
    # that removed the barrier after those stores instead -- a race, wrong outputs: its timing does not count.)
    dead.add(max(k for k in range(bca, st0b) if _BAR.match(lines[k])))
    p3, a10, sw = _ST.match(lines[st0b]).groups()
    repl[st0b] = [f"\t@{p3} st.shared.b32 [{a10}], {m};", f"\t@{p3} st.shared.b32 [{a10}+64], {sw};"]
    p4, s33, a13 = _XLD.match(lines[ldb]).groups()
    repl[ldb] = [f"\tmov.b32 {s33}, 0f00000000;", "\tmov.b32 %rpm0, 0fFF800000;",
                 f"\t@{p4} ld.shared.b32 %rpm0, [{a13}];", f"\t@{p4} ld.shared.b32 {s33}, [{a13}+64];"]
    cur = "%rpm0"
    for n, lane in enumerate((1, 2, 4, 8)):
        repl[ldb] += [f"\tshfl.sync.bfly.b32 %rpt{n}, {cur}, {lane}, 31, -1;", f"\tmax.f32 %rpm{n + 1}, {cur}, %rpt{n};"]
        cur = f"%rpm{n + 1}"
    repl[ldb] += [f"\tsub.f32 %rpf0, %rpm0, {cur};", f"\tmul.f32 %rpf0, %rpf0, {_LOG2E};",
                  "\tex2.approx.f32 %rpf0, %rpf0;", f"\tmul.f32 {s33}, {s33}, %rpf0;"]
    p5, a14, stot = _ST.match(lines[stb]).groups()
    repl[stb] = [f"\t@{p5} st.shared.b32 [{a14}], {cur};", f"\t@{p5} st.shared.b32 [{a14}+64], {stot};"]
    s = _BCAST.match(lines[bcb]).group(1)
    repl[bcb] = ["\tld.shared.b32 %rpM, [global_smem];", "\tld.shared.b32 %rpS, [global_smem+64];",
                 f"\tsub.f32 %rpf1, {m}, %rpM;", f"\tmul.f32 %rpf1, %rpf1, {_LOG2E};", "\tex2.approx.f32 %rpf1, %rpf1;",
                 f"\tdiv.full.f32 {s}, %rpS, %rpf1;"]
    out = []
    for k, ln in enumerate(lines):
        if k in dead:
            continue
        out += repl.get(k, [ln])
    regs = [".reg .pred %ppw0;", ".reg .b32 %rpM;", ".reg .b32 %rpS;", ".reg .b32 %rpf0;", ".reg .b32 %rpf1;"]
    regs += [f".reg .b32 %rpm{n};" for n in range(5)] + [f".reg .b32 %rpt{n};" for n in range(4)]
    return _add_regs("\n".join(out), regs)



def _key(src, k, t, nn):
    """PTX: k = the order-preserving int key of the f32 in src (a NaN keyed as INT_MIN, below -inf's key)."""
    return [f"\tshr.s32 {t}, {src}, 31;", f"\tand.b32 {t}, {t}, 0x7FFFFFFF;", f"\txor.b32 {k}, {src}, {t};",
            f"\tsetp.nan.f32 {nn}, {src}, {src};", f"\tselp.b32 {k}, 0x80000000, {k}, {nn};"]


def _unkey(k, dst, t):
    return [f"\tshr.s32 {t}, {k}, 31;", f"\tand.b32 {t}, {t}, 0x7FFFFFFF;", f"\txor.b32 {dst}, {k}, {t};"]


_LDG = re.compile(r"\bld\.global\.")


def atomic_max(ptx: str, sel=None) -> str:
    """``amax`` (exact): the max reduction's cross-warp step as one shared-memory atomic max a warp on the
    order-preserving key, into a word thread 0 sets to the key's minimum before the loads are issued (a
    barrier there, at the program's start); then one barrier and every thread reads the word. Replaces
    lane 0's store, the combine (4 shuffles), thread 0's store and a barrier; the sum's barrier before its stores
    (which guarded the max's scratch) goes too: the word lies past the 16 partials (64 bytes of the 128)."""
    if ".maxntid 512" not in ptx:
        raise ValueError("amax expects 16 warps (.maxntid 512): the word at 64 bytes")
    tid = _tid(ptx)
    lines = ptx.split("\n")
    blocks = _xwarp_blocks(lines)
    i, j, b = blocks[0]
    if "max" not in [(_BIN.match(lines[k]) or [None, None])[1] for k in range(i, j)]:
        raise ValueError("the first block reduction is not a max")
    st0 = max(k for k in range(i) if _ST.match(lines[k]))
    bc = next(k for k in range(b, len(lines)) if _BCAST.match(lines[k]))
    p3, a10, mw = _ST.match(lines[st0]).groups()
    m = _BCAST.match(lines[bc]).group(1)
    # before the first load: ptxas does not move global loads above a barrier, and moves a barrier placed after
    # them down to the loads' first use (where it would cost as much as the step it replaces)
    first_ld = min(k for k in range(st0) if _LDG.search(lines[k]))
    repl, dead = {}, {b, j} | {k for k in range(i, j) if _SHFL.match(lines[k]) or _BIN.match(lines[k])
                              or _XLD.match(lines[k])}
    repl[first_ld] = [f"\tsetp.eq.u32 %pam0, {tid}, 0;", "\t@%pam0 st.shared.b32 [global_smem+64], 0x80000000;",
                      "\tbar.sync 0;", lines[first_ld]]
    repl[st0] = _key(mw, "%rak0", "%rat0", "%pan0") + [f"\t@{p3} red.shared.max.s32 [global_smem+64], %rak0;"]
    repl[bc] = ["\tld.shared.b32 %rak1, [global_smem+64];"] + _unkey("%rak1", m, "%rat1")
    if len(blocks) > 1:   # the next reduction's barrier before its partials' stores
        i2 = blocks[1][0]
        st2 = max(k for k in range(i2) if _ST.match(lines[k]))
        bar2 = max(k for k in range(bc, st2) if _BAR.match(lines[k]))
        dead.add(bar2)
    out = []
    for k, ln in enumerate(lines):
        if k in dead:
            continue
        out += repl.get(k, [ln])
    return _add_regs("\n".join(out), [".reg .pred %pam0;", ".reg .pred %pan0;", ".reg .b32 %rak0;",
                                       ".reg .b32 %rak1;", ".reg .b32 %rat0;", ".reg .b32 %rat1;"])



def ex2_ftz(ptx: str, sel=None) -> str:
    """``ftz``: ``ex2.approx.f32`` as ``ex2.approx.ftz.f32`` (no range fix-up around MUFU.EX2: s22's
    KERNELC_EXP_FTZ=softmax, timed then without intervals). A subnormal exp flushes to 0; for softmax's fp16
    output that changes no bit (such an exp over a sum >= 1 is below fp16's least subnormal), for fp32 it would."""
    out, n = re.subn(r"\bex2\.approx\.f32\b", "ex2.approx.ftz.f32", ptx)
    if not n:
        raise ValueError("no ex2.approx.f32")
    return out


EDITS = {"w0": warp0_only, "redux": redux_max, "mtree": max_tree, "rcp": rcp_mul, "pair": pair, "amax": atomic_max, "ftz": ex2_ftz}


def install():
    """Add these edits to mem21/variants.py's table (import it first)."""
    import variants as V
    for k, f in EDITS.items():
        V.EDITS[k] = (lambda f: (lambda p, s=None: f(p, s)))(f)
