"""softmax bwd 8192^2 fp16 against Triton: builds and memory-instruction forms of kernelc's PTX, interleaved.

On CPU (bench/experiments/tutorial_gaps/cpu_compare.py, sm_90a) kernelc's broadcast build without a ceiling (47
registers, 2 blocks of 16 warps an SM) and Triton's (50, 2 blocks) are the same SASS but for register names and
how the second 16-byte load/store of a thread forms its address (kernelc: an immediate offset, Triton: its own
IMAD.WIDE); the shipped build (allreduce, 40 registers, 3 blocks) differs in the cross-warp step. Both read
0.999 of Triton (docs/performance.md, mem20 and call S). So the columns here ask whether anything *beyond*
Triton's form moves the row: cache hints on the streamed loads and stores, the read-only path, the occupancy.

Columns (``--col [ROW/]TAG=RECIPE[+EDIT...][@KNOB=V,...]``; ROW: only for the rows starting with it): kernelc
compiled under the knobs, its PTX edited by each EDIT and assembled by RECIPE (mem20/builds.py's: ``free``,
``bound``, ``whole``, ``capN``, ``own`` = kernelc's build, no reassembly; with an edit ``own`` means ``free``,
kernelc's pick for this row). Edits (text transforms of kernelc's PTX, ``EDITS``):
- ``nc``: global loads through the read-only path (``ld.global.nc``; SASS ``LDG.E.128.CONSTANT``);
- ``l1na``: global loads ``.L1::no_allocate`` (each byte is read once);
- ``l2ef``: global loads with an L2 ``evict_first`` cache policy (``createpolicy.fractional``, as Triton writes
  ``eviction_policy='evict_first'``);
- ``lu``, ``ldcs``, ``ncna``, ``l1ef``, ``l2pf`` (mem25): loads ``.lu`` (last use; SASS ``LDG.E.LU``), ``.cs``
  (``LDG.E.EF``, as ``.L1::evict_first``), ``.nc.L1::no_allocate`` (``LDG.E.NA.CONSTANT``), ``.L2::256B``
  (``LDG.E.LTC256B``);
- a load edit as ``NAME:SEL`` applies to some loads only: indices in the PTX's order (``4-7``, ``0.2``), ``st``
  (loads from addresses the kernel also stores to: rope's q) or ``nost`` (the others: rope's cos/sin);
- ``l2el``, ``l2en``, ``l2elk``, ``l2enk`` (mem26, mem27): loads with an L2 evict_last policy (createpolicy), the same
  form with an evict_normal policy, evict_last / evict_normal as the constant createpolicy makes (``mov.b64``; the
  evict_last one is what codegen emits since mem27);
- ``stcs``: global stores ``.cs`` (streaming: evict first);
- ``stef``: global stores with the L2 ``evict_first`` policy.
``tcubin``: Triton's cubin launched by kernelc's launcher (mb_gaps/swap_cubin.py), the launcher's A/A;
``tptx``: Triton's PTX assembled as kernelc assembles its own (nvJitLink, relocatable, no ``.reqntid``/``.maxntid``,
no ceiling) and launched by kernelc's launcher: whether kernelc's build path alone moves the row
(``--tptx keep``: nvJitLink with Triton's ``.reqntid``; ``--tptx whole``: Triton's ptxas, a whole program).
Edit ``req``: kernelc's ``.maxntid`` written as ``.reqntid`` (with recipe ``bound`` or ``whole``).

    python3 bench/experiments/mem21/variants.py [--rounds R] [--row-seconds S] [--out PATH] --col ... [rows...]  # GPU
    python3 bench/experiments/mem21/variants.py --check --col ...                                # CPU: builds, SASS
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem20"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mb_gaps"))

_LD = re.compile(r"\bld\.global\.(v[248]\.b\d+|b\d+)")
_ST = re.compile(r"\bst\.global\.(v[248]\.b\d+|b\d+)")
_MEMOP_END = re.compile(r"(\[[^\]]*\])\s*;")
_MEMOP_ADDR = re.compile(r"\[\s*([^\]]*?)\s*\]")


def _policy(ptx: str, kind: str = "evict_first") -> tuple:
    """A fresh 64-bit register holding an L2 ``kind`` policy (evict_first, evict_last), created at the top of the
    body."""
    reg = "%rdpol_ef" if kind == "evict_first" else f"%rdpol_{kind}"
    if reg in ptx:
        return ptx, reg
    lines = ptx.split("\n")
    last = max(i for i, ln in enumerate(lines) if ln.strip().startswith(".reg"))
    # ``imm_*`` (mem27): the policy as the 64-bit value createpolicy makes (CUTLASS's CacheHintSm90 constants), a
    # mov ptxas can place anywhere, instead of the createpolicy its SASS rebuilds with five dependent uniform ops
    make = (f"mov.b64 {reg}, {_POLICY_IMM[kind[4:]]};" if kind.startswith("imm_")
            else f"createpolicy.fractional.L2::{kind}.b64 {reg}, 1.0;")
    lines[last + 1:last + 1] = [f"\t.reg .b64 {reg};", f"\t{make}"]
    return "\n".join(lines), reg


# what ptxas 13.0 makes of createpolicy.fractional.L2::<kind>.b64 p, 1.0 (it folds it to these on sm_80)
_POLICY_IMM = {"evict_last": "0x14F0000000000000", "evict_first": "0x12F0000000000000",
               "evict_normal": "0x16F0000000000000"}


def _hinted(ptx: str, pat, repl, with_policy=False, sel=None, policy="evict_first") -> str:
    """``ptx`` with ``pat``'s accesses rewritten by ``repl``; ``sel``: only the accesses of these indices (in the
    PTX's order, from 0), e.g. rope's q loads and not its cos/sin loads."""
    n = len(pat.findall(ptx))
    if not n:
        raise ValueError("no such global access")
    if sel in ("st", "nost"):   # the accesses whose address a global store also writes (or the others)
        stored = {m.group(1) for m in (_MEMOP_ADDR.search(ln) for ln in ptx.split("\n") if _ST.search(ln)) if m}
        addrs = [_MEMOP_ADDR.search(ln).group(1) for ln in ptx.split("\n") if pat.search(ln)]
        sel = {i for i, a in enumerate(addrs) if (a in stored) == (sel == "st")}
        if not sel:
            raise ValueError("the selection holds no access")
    if sel is not None and not sel <= set(range(n)):
        raise ValueError(f"selection {sorted(sel)} outside the {n} accesses")
    if with_policy:
        ptx, pol = _policy(ptx, policy)
    out = []
    k = -1
    for ln in ptx.split("\n"):
        if pat.search(ln):
            k += 1
            if sel is not None and k not in sel:
                out.append(ln)
                continue
            ln = pat.sub(repl, ln, count=1)
            if with_policy:   # the cache-policy operand follows the address: ld {..}, [a], pol; st [a], {..}, pol
                ln = ln.rstrip()
                assert ln.endswith(";"), ln
                ln = ln[:-1].rstrip() + f", {pol};"
        out.append(ln)
    return "\n".join(out)


_CTAID = re.compile(r"^([ \t]*)mov\.u32\s+(%r\d+),\s*%ctaid\.x;[ \t]*$", re.M)


def _add_regs(ptx: str, decls) -> str:
    lines = ptx.split("\n")
    last = max(i for i, ln in enumerate(lines) if ln.strip().startswith(".reg"))
    lines[last + 1:last + 1] = [f"\t{d}" for d in decls]
    return "\n".join(lines)


def _one_ctaid(ptx: str):
    ms = list(_CTAID.finditer(ptx))
    if len(ms) != 1:
        raise ValueError(f"{len(ms)} reads of %ctaid.x, expected one")
    return ms[0]


def reverse_pids(ptx: str, sel=None) -> str:
    """Programs in reverse order (program i does the work of program n-1-i): the order in which the rows' DRAM
    pages are touched reversed, all else as built."""
    m = _one_ctaid(ptx)
    ind, dst = m.group(1), m.group(2)
    body = (f"{ind}mov.u32 %rrev_c, %ctaid.x;\n{ind}mov.u32 %rrev_n, %nctaid.x;\n"
            f"{ind}not.b32 %rrev_c, %rrev_c;\n{ind}add.s32 {dst}, %rrev_n, %rrev_c;")
    return _add_regs(ptx[:m.start()] + body + ptx[m.end():], [".reg .b32 %rrev_c;", ".reg .b32 %rrev_n;"])


def persistent(ptx: str, sel) -> str:
    """``pers:TOTAL/P``: the kernel as a persistent one: launched with P programs (``persist_clamp``), program p
    does programs p, p + P, ... < TOTAL of the original grid, a barrier between two where the body uses shared
    memory (its scratch is reused). The body is the shipped one: no load of one row overlaps the previous row's work beyond what the
    resident programs already overlap."""
    total = int(str(sel).split("/")[0])
    m = _one_ctaid(ptx)
    ind, dst = m.group(1), m.group(2)
    rets = [x for x in re.finditer(r"^([ \t]*)ret;[ \t]*$", ptx, re.M)]
    if len(rets) != 1 or rets[0].start() < m.end():
        raise ValueError(f"{len(rets)} ret instructions, expected one after the %ctaid.x read")
    r = rets[0]
    head = (f"{ind}mov.u32 %rpers_pid, %ctaid.x;\n$L__pers_top:\n{ind}mov.u32 {dst}, %rpers_pid;")
    # a barrier between two rows only where the body uses shared memory (its reduction scratch)
    bar = f"{ind}bar.sync 0;\n" if re.search(r"\b(ld|st|atom)\.shared", ptx) else ""
    tail = (f"{bar}{ind}mov.u32 %rpers_n, %nctaid.x;\n{ind}add.s32 %rpers_pid, %rpers_pid, %rpers_n;\n"
            f"{ind}setp.lt.u32 %ppers, %rpers_pid, {total};\n{ind}@%ppers bra $L__pers_top;\n{ind}ret;")
    out = ptx[:m.start()] + head + ptx[m.end():r.start()] + tail + ptx[r.end():]
    return _add_regs(out, [".reg .b32 %rpers_pid;", ".reg .b32 %rpers_n;", ".reg .pred %ppers;"])


def batch_major(ptx: str, sel) -> str:
    """``bmajor:B``: the programs of one position in each of B batches run next to each other (program i does
    program (i % B) * n/B + i // B's work; n = the grid, a multiple of B): rope's cos/sin row is then re-read by
    the next B-1 programs, from L2, instead of 4096 programs (64 MB of q traffic) later. q is then read as B
    sequential streams instead of one."""
    b = int(sel)
    m = _one_ctaid(ptx)
    ind, dst = m.group(1), m.group(2)
    body = (f"{ind}mov.u32 %rbm_c, %ctaid.x;\n{ind}mov.u32 %rbm_n, %nctaid.x;\n"
            f"{ind}div.u32 %rbm_n, %rbm_n, {b};\n{ind}rem.u32 %rbm_b, %rbm_c, {b};\n"
            f"{ind}div.u32 %rbm_c, %rbm_c, {b};\n{ind}mad.lo.s32 {dst}, %rbm_b, %rbm_n, %rbm_c;")
    return _add_regs(ptx[:m.start()] + body + ptx[m.end():],
                     [".reg .b32 %rbm_c;", ".reg .b32 %rbm_n;", ".reg .b32 %rbm_b;"])


class PersistClamp:
    """A JIT kernel launched with at most ``n`` programs along the grid's first axis (the ``pers`` edit's grid)."""

    def __init__(self, kernel, n: int):
        self.kernel, self.n = kernel, n

    def __getitem__(self, grid):
        g = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        return self.kernel[(min(g[0], self.n),) + g[1:]]

    def __getattr__(self, name):
        return getattr(self.kernel, name)


EDITS = {
    "nc": lambda p, s=None: _hinted(p, _LD, r"ld.global.nc.\1", sel=s),
    "l1na": lambda p, s=None: _hinted(p, _LD, r"ld.global.L1::no_allocate.\1", sel=s),
    "l2ef": lambda p, s=None: _hinted(p, _LD, r"ld.global.L2::cache_hint.\1", True, sel=s),
    # load-side forms for data read once (mem25): last use, streaming, read-only path without L1 allocation,
    # L1 evict_first, a 256-byte L2 prefetch
    "lu": lambda p, s=None: _hinted(p, _LD, r"ld.global.lu.\1", sel=s),
    "ldcs": lambda p, s=None: _hinted(p, _LD, r"ld.global.cs.\1", sel=s),
    "ncna": lambda p, s=None: _hinted(p, _LD, r"ld.global.nc.L1::no_allocate.\1", sel=s),
    "l1ef": lambda p, s=None: _hinted(p, _LD, r"ld.global.L1::evict_first.\1", sel=s),
    "l2pf": lambda p, s=None: _hinted(p, _LD, r"ld.global.L2::256B.\1", sel=s),
    # loads kept in L2 (mem26): rope's cos/sin (``:nost``), re-read by every batch's program of a position, 64 MB
    # of q traffic apart: more than the L2 holds
    "l2el": lambda p, s=None: _hinted(p, _LD, r"ld.global.L2::cache_hint.\1", True, sel=s, policy="evict_last"),
    # mem27: the same instruction form with an evict_normal policy (what the form costs without keeping anything),
    # and evict_last as an immediate policy (no createpolicy)
    "l2en": lambda p, s=None: _hinted(p, _LD, r"ld.global.L2::cache_hint.\1", True, sel=s, policy="evict_normal"),
    "l2elk": lambda p, s=None: _hinted(p, _LD, r"ld.global.L2::cache_hint.\1", True, sel=s, policy="imm_evict_last"),
    "l2enk": lambda p, s=None: _hinted(p, _LD, r"ld.global.L2::cache_hint.\1", True, sel=s, policy="imm_evict_normal"),
    "stcs": lambda p, s=None: _hinted(p, _ST, r"st.global.cs.\1", sel=s),
    "stef": lambda p, s=None: _hinted(p, _ST, r"st.global.L2::cache_hint.\1", True, sel=s),
    # program order and grid mapping (mem26): reversed program ids; a persistent grid (``pers:TOTAL/P``)
    "rev": reverse_pids,
    "pers": persistent,
    "bmajor": batch_major,
    # a store form s24 did not time: no L1 allocation on the write
    "stna": lambda p, s=None: _hinted(p, _ST, r"st.global.L1::no_allocate.\1", sel=s),
    # the launch bound as Triton writes it (.reqntid: exactly N threads) instead of kernelc's .maxntid (at most N)
    "req": lambda p, s=None: _sub_or_fail(re.compile(r"^([ \t]*)\.maxntid\b", re.M), r"\1.reqntid", p),
}


def split_edit(e: str):
    """``NAME[:SEL]`` -> (name, indices, "st", "nost" or None); SEL is ``i``, ``i-j`` or several joined by ``.``
    (``l1na:4-7``), or ``st`` (the accesses to addresses the kernel also stores to: rope's q loads) or ``nost``
    (the others: rope's cos/sin loads)."""
    name, _, sel = e.partition(":")
    if name not in EDITS:
        raise SystemExit(f"unknown edit {name!r} (have {sorted(EDITS)})")
    if not sel:
        return name, None
    if name == "pers":   # TOTAL/P: the original grid's programs, the programs launched
        t, _, p = sel.partition("/")
        if not (t.isdigit() and p.isdigit()):
            raise SystemExit(f"pers needs TOTAL/P, got {sel!r}")
        return name, sel
    if sel in ("st", "nost"):
        return name, sel
    if name == "bmajor":
        if not sel.isdigit():
            raise SystemExit(f"bmajor needs B, got {sel!r}")
        return name, sel
    idx = set()
    for part in sel.split("."):
        lo, _, hi = part.partition("-")
        idx |= set(range(int(lo), int(hi or lo) + 1))
    return name, idx


def _sub_or_fail(pat, repl, ptx):
    out, n = pat.subn(repl, ptx)
    if not n:
        raise ValueError(f"no {pat.pattern!r} in the PTX")
    return out


def parse_col(spec: str):
    """``TAG=RECIPE[+EDIT..][@K=V,..]`` -> (tag, recipe, [edits], env). ``ROW/TAG=...``: the column only for the
    rows whose name starts with ROW (``rope/l1naq=own+l1na:4-7``)."""
    tag, rest = spec.split("=", 1)
    rest, _, envs = rest.partition("@")
    recipe, *edits = rest.split("+")
    env = dict(kv.split("=", 1) for kv in envs.split(",") if kv)
    for e in edits:
        split_edit(e)
    return tag, recipe or "own", edits, env


def col_rows(tag: str):
    """(the row prefix a ``ROW/TAG`` column is limited to or None, the column's own tag)."""
    row, _, t = tag.rpartition("/")
    return (row or None), t


def build(ptx: str, recipe: str, edits) -> bytes:
    import builds as B
    for e in edits:
        name, sel = split_edit(e)
        ptx = EDITS[name](ptx, sel)
    if recipe == "own":
        recipe = "free"
    return B.assemble(ptx, recipe)


_REQNTID = re.compile(r"^[ \t]*\.(?:reqntid|maxntid)[^\n]*\n", re.M)


def triton_ptx_build(ptx: str, recipe: str = "free") -> bytes:
    """Triton's PTX assembled by ``recipe``: ``free`` as kernelc assembles its own (thread-count directive dropped,
    nvJitLink, no ceiling); ``keep`` nvJitLink with Triton's ``.reqntid``; ``whole`` Triton's ptxas as a whole
    program (as Triton assembles it)."""
    import asm_matrix as A
    if recipe == "free":
        return A.nvjitlink_link(_REQNTID.sub("", ptx).encode(), "PTX")
    if recipe == "keep":
        return A.nvjitlink_link(ptx.encode(), "PTX")
    if recipe == "whole":
        return A.ptxas_run(ptx, A.TRITON_PTXAS)
    raise ValueError(f"unknown recipe {recipe!r}")


def swap_tptx(kfn, tfn, recipe: str = "free") -> dict:
    """As swap_cubin.swap_in, with Triton's PTX assembled by ``triton_ptx_build`` in place of Triton's cubin."""
    import swap_cubin as SC
    from cubintools import inspect_cubin
    tk = SC._triton_compiled(tfn)
    cubin = triton_ptx_build(tk.asm["ptx"], recipe)
    f = inspect_cubin(cubin).kernel(tk.name)

    class _TK:   # Triton's build with the cubin swapped: what swap_in reads of it
        name, metadata, asm, n_regs = tk.name, tk.metadata, {**tk.asm, "cubin": cubin}, f.n_regs
    real = SC._triton_compiled
    SC._triton_compiled = lambda _tfn: _TK
    try:
        out = SC.swap_in(kfn, tfn)
    finally:
        SC._triton_compiled = real
    return {**out, "regs": f.n_regs, "local": f.frame_size}


def load_build(kfn, recipe: str, edits) -> dict:
    """Reload ``kfn``'s one loaded specialisation from its own PTX, edited and assembled by ``recipe``."""
    from cubintools import inspect_cubin
    from kernelc.runtime.driver import LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    ck = ent.compiled
    if recipe == "own" and not edits:
        return {"regs": ck.n_regs}
    cubin = build(ck.asm["ptx"], recipe, edits)
    f = inspect_cubin(cubin).kernel(ck.name)
    ent.function = LoadedFunction(cubin, ck.name, ck.dynamic_shared, ent.function.threads // 32, f.n_regs,
                                  ent.device, total_shared=ck.shared)
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None
    return {"regs": f.n_regs, "kernelc_regs": ck.n_regs, "local": f.frame_size}


_COPIES = {}


def copy_columns(name: str, args, row: dict) -> list:
    """Streaming columns for ``name``'s row (mem26): ``copy[kc]`` / ``copy[tr]`` the same copy source under
    kernelc / Triton with the row's grid and warps, ``copy[torch]`` torch's ``copy_`` of the same bytes (out of
    place). softmax fwd: ``row_copy`` into another tensor; rope: ``rope_negate`` in place on a tensor of q's shape
    (rope writes q in place), torch's copy_ from q into another tensor. Rows without copies get none."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem26"))
    import copies as C
    if not _COPIES:
        _COPIES["kc"], _COPIES["tr"] = C.kernelc_module(), C.triton_module()
    x = args[0]
    if name.startswith(("softmax fwd", "log_softmax fwd")):
        y = torch_empty_like(x)
        fns = {m: (lambda M=M: M.row_copy(y, x)) for m, M in _COPIES.items()}
        fns["torch"] = lambda: y.copy_(x)
    elif name.startswith("rope"):
        qb, qc = x.clone(), torch_empty_like(x)
        fns = {m: (lambda M=M: M.rope_negate(qb)) for m, M in _COPIES.items()}
        fns["torch"] = lambda: qc.copy_(x)
    else:
        return []
    xs = x.float()
    for m, f in fns.items():   # each column's result checked on its own: softmax's copy equals x, rope's -x
        if name.startswith("rope"):
            out, want = (qb, -xs) if m != "torch" else (qc, xs)
            if m != "torch":
                qb.copy_(x)
        else:
            out, want = y, xs
            y.zero_()
        f()
        row["errs"][f"copy[{m}]"] = (out.float() - want).abs().max().item()
    row["copy_regs"] = {m: {n: ck.n_regs for n, ck in _built_of(M).items()} for m, M in _COPIES.items() if m == "kc"}
    return [(f"copy[{m}]", f) for m, f in fns.items()]


def torch_empty_like(x):
    import torch
    return torch.empty_like(x)


def _built_of(mod) -> dict:
    from bench.bench_memory_bound import _built
    return _built(mod)


def main(argv) -> int:
    import argparse
    import tempfile
    import torch
    import builds as B
    import asm_matrix as A
    A.TRITON_PTXAS = B.triton_ptxas()
    from bench.bench_memory_bound import (CONTROL, _env, _err, _regs, cases, column_env, interleaved_round,
                                          kernelc_variant, log_ratio_ci, median_ci)
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    from swap_cubin import swap_in
    ap = argparse.ArgumentParser()
    ap.add_argument("rows", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", os.path.join(HERE, "results")), "variants.json"))
    ap.add_argument("--col", action="append", default=[])
    ap.add_argument("--row-seconds", type=float, default=0,
                    help="at most --rounds rounds a row, fewer (at least 3) where the row would run past this")
    ap.add_argument("--tcubin", action="store_true", help="also Triton's cubin through kernelc's launcher")
    ap.add_argument("--copies", action="store_true",
                    help="also streaming kernels of the row's bytes and launch shape (mem26/copies.py: kernelc, "
                         "Triton) and torch's copy_ (softmax fwd and rope rows)")
    ap.add_argument("--tptx", nargs="?", const="free", action="append", default=[],
                    help="also Triton's PTX assembled by RECIPE (free: kernelc's path, the default; keep; whole)")
    a = ap.parse_args(argv)
    cols = [parse_col(c) for c in a.col]
    root = tempfile.mkdtemp(prefix="mem21-variants-")
    T = triton_twin("memory_bound")
    table = cases()
    names = [n for r in (a.rows or ["softmax bwd"]) for n in table if n.startswith(r)]
    rows = []
    t0 = time.time()

    def dump(rs):
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out + ".tmp", "w") as f:   # replaced whole: a process killed mid-write leaves the last file
            json.dump({"rounds": a.rounds, "gpu": torch.cuda.get_device_name(), "cols": a.col, "rows": rs}, f,
                      indent=1)
        os.replace(a.out + ".tmp", a.out)
    for name in dict.fromkeys(names):
        make, call, ref, nbytes = table[name]
        row = {"benchmark": name, "builds": {}, "errs": {}}
        t_row = time.time()
        try:
            with _env(column_env(root, "kernelc")):   # never a build another process left on disk
                args = make()
                call(K, *[x.clone() for x in args])
            want = call(T, *[x.clone() for x in args])
            impls = [("kernelc", lambda: call(K, *args))]
            row["regs"] = {"kernelc": _regs(K)}
            for rtag, recipe, edits, env in cols:
                only, tag = col_rows(rtag)
                if only is not None and not name.startswith(only):
                    continue
                try:
                    M = kernelc_variant(f"v_{tag}")
                    with _env(column_env(root, tag, env)):
                        call(M, *[x.clone() for x in args])
                    fns = {kn: kf for kn, kf in vars(M).items()
                           if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                    row["builds"][tag] = {"recipe": recipe, "edits": edits, "env": env,
                                          **{kn: load_build(kf, recipe, edits) for kn, kf in fns.items()}}
                    for e in edits:   # a persistent build runs on a grid of P programs
                        if e.startswith("pers:"):
                            for kn, kf in fns.items():
                                setattr(M, kn, PersistClamp(kf, int(e.split("/")[1])))
                    row["errs"][tag] = _err(call(M, *[x.clone() for x in args]), want)
                except Exception as e:   # a failing column is reported and left out
                    import traceback
                    traceback.print_exc()
                    row["builds"][tag] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                impls.append((f"kernelc[{tag}]", lambda M=M: call(M, *args)))
            if a.tcubin:
                S = kernelc_variant("swap")
                with _env(column_env(root, "swap")):
                    call(S, *[x.clone() for x in args])
                try:
                    row["builds"]["tcubin"] = {kn: swap_in(kf, getattr(T, kn)) for kn, kf in vars(S).items()
                                               if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                    row["errs"]["tcubin"] = _err(call(S, *[x.clone() for x in args]), want)
                    impls.append(("kernelc[tcubin]", lambda: call(S, *args)))
                except Exception as e:
                    row["builds"]["tcubin"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            for rcp in a.tptx:
                tag = "tptx" if rcp == "free" else f"tptx_{rcp}"
                P = kernelc_variant(tag)
                with _env(column_env(root, tag)):
                    call(P, *[x.clone() for x in args])
                try:
                    row["builds"][tag] = {kn: swap_tptx(kf, getattr(T, kn), rcp) for kn, kf in vars(P).items()
                                          if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                    row["errs"][tag] = _err(call(P, *[x.clone() for x in args]), want)
                    impls.append((f"kernelc[{tag}]", lambda P=P: call(P, *args)))
                except Exception as e:
                    import traceback
                    traceback.print_exc()
                    row["builds"][tag] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            if a.copies:
                try:
                    impls += copy_columns(name, args, row)
                except Exception as e:   # the row's own columns still run
                    import traceback
                    traceback.print_exc()
                    row["copies_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            impls += [("triton", lambda: call(T, *args)), (CONTROL, lambda: call(T, *args))]
            row["bytes"] = nbytes(*args)
            rds = row["rounds"] = []
            for _ in range(a.rounds):   # written after every round: a process cut short keeps its rounds
                tr = time.time()
                rds.append(interleaved_round(dict(impls), CONTROL, keep=False))
                dump(rows + [row])
                # --row-seconds: stop (after 3 rounds, an interval's least) where one more round would overrun
                if a.row_seconds and len(rds) >= 3 and 2 * time.time() - tr - t_row > a.row_seconds:
                    break
            print(f"{name} ({time.time() - t0:.0f} s)", flush=True)
            for n in rds[0]["log"]:
                logs = [rd["log"][n] for rd in rds]
                ci, mci = log_ratio_ci(logs), median_ci(logs)
                row[f"{n}/triton_ci95"] = [round(v, 5) for v in ci] if ci else None
                row[f"{n}/triton_median_ci95"] = [round(v, 5) for v in mci] if mci else None
                b = row["builds"].get(n[8:-1], {}) if n.startswith("kernelc[") else {}
                regs = [v.get("regs") for v in b.values() if isinstance(v, dict) and "regs" in v]
                # against the shipped build in the same repetitions: the difference of the two log ratios a round
                kci = (log_ratio_ci([rd["log"][n] - rd["log"]["kernelc"] for rd in rds])
                       if n.startswith(("kernelc[", "copy[")) else None)
                row[f"{n}/kernelc_ci95"] = [round(v, 5) for v in kci] if kci else None
                print(f"   {n:20s} {row[f'{n}/triton_ci95']}  regs {regs or row['regs'].get('kernelc')}"
                      + (f"  /kernelc {row[f'{n}/kernelc_ci95']}" if kci else ""), flush=True)
            print("   errs", row["errs"], flush=True)
        except Exception as e:  # one failing row must not hide the others
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        torch.cuda.empty_cache()
        dump(rows)
    return 0


def check(argv) -> int:
    """CPU: each ``--col`` built for softmax bwd 8192, or ``--kernel NAME`` (asm_matrix.CASES; knobs applied):
    registers, spills, the memory opcodes."""
    import collections
    import asm_matrix as A
    import builds as B
    from cubintools import inspect_cubin, instructions
    from kernelc.compat import install
    install()
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    from bench.bench_memory_bound import _env
    A.TRITON_PTXAS = os.environ.get("MEM20_WHOLE_PTXAS", "/work/ext/triton_site/triton/backends/nvidia/bin/ptxas")
    cols = [parse_col(argv[i + 1]) for i, x in enumerate(argv) if x == "--col"]
    kname = argv[argv.index("--kernel") + 1] if "--kernel" in argv else "softmax_bwd_kernel"
    sig_s, cx, nw = A.CASES[kname]
    sig = dict(p.split("=") for p in sig_s.split(","))
    for tag, recipe, edits, env in cols:
        with _env(env):
            ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                          divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
        cubin = ck.asm["cubin"] if recipe == "own" and not edits else build(ck.asm["ptx"], recipe, edits)
        f = inspect_cubin(cubin).kernel(ck.name)
        ops = collections.Counter(i.opcode for i in instructions(cubin)
                                  if i.opcode.startswith(("LDG", "STG", "BAR", "LDS", "STS")))
        print(f"{tag:10s} regs {f.n_regs:3d} local {f.frame_size:3d}  {dict(sorted(ops.items()))}", flush=True)
    return 0


if __name__ == "__main__":
    if "--check" in sys.argv:
        sys.exit(check(sys.argv[1:]))
    sys.exit(main(sys.argv[1:]))
