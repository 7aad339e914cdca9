"""Where in kernelc's PTX is a memory-bound row's last 0.5% to Triton? Scripted edits of kernelc's PTX, each
a hypothesis taken from diffing kernelc's PTX/SASS against Triton's for the same source (docs/performance.md,
issue 21's last section), assembled by Triton's ptxas and timed against Triton's cubin with launches
interleaved (bench/interleaved.py). (GPU; ``--check`` runs on CPU.)

Edits (``EDITS``), each a text transform of kernelc's PTX for one kernel:
- ``xwarp``: the cross-warp step of each reduction written as Triton writes it: lane 0 of each warp stores its
  warp's value, threads < num_warps load them, reduce with shuffles, thread 0 stores the result, a second
  barrier, every thread loads it back (kernelc: every lane stores, one barrier, every warp reduces the
  num_warps values itself);
- ``bfly``: butterfly shuffles in Triton's order (16, 8, 4, 2, 1 instead of 1, 2, 4, 8, 16);
- ``log``: ``lg2.approx`` and ``z + lg2(s) * -ln2`` (fma) replaced by Triton's log (libdevice's polynomial) and
  ``z - log(s)`` (sub);
- ``fadd``: only the last step of ``log``: ``lse = lg2(s) * ln2`` once, then ``z - lse`` (sub, not fma);
- ``all``: xwarp, bfly and log at once;
- ``smem64`` (only with ``--edits``: R1c's 8 KB changed nothing): kernelc's cubin launched with the dynamic shared
  memory Triton asks for (64 bytes, all the kernel touches) instead of 128 (no PTX edit).

Columns: ``kernelc`` (its build), ``kernelc[ptx]`` (its PTX assembled by Triton's ptxas, no edit: what each edit
is measured from), ``kernelc[ptx+E]`` per edit, ``kernelc[triton cubin]`` (Triton's cubin through kernelc's
launcher), ``triton``, ``triton[control]``.

    python3 bench/experiments/mem19/ptx_edits.py --check              # CPU: every edit assembles; regs, SASS
    python3 bench/experiments/mem19/ptx_edits.py [--rounds R] [--out PATH] [--edits a,b] [--budget S]
        [--variant TAG:KERNELC_VAR=V,..] [prefixes...]   # GPU

``--variant`` adds ``kernelc[TAG]``: kernelc's own build under those knobs (its default assembler), e.g. the
compiler's form of an edit (``KERNELC_REDUCE_XWARP=broadcast``: ``xwarp``; ``KERNELC_REDUCE_BFLY=down``: ``bfly``).
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
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mb_gaps"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem18"))

_SHFL = re.compile(r"^(\s*shfl\.sync\.bfly\.b32\s+%\w+,\s*%\w+,\s*)(\d+)(,\s*31,\s*-1;)")
_DEST = re.compile(r"^\s*(?:@%\w+\s+)?[a-z][\w.]*\s+(%\w+)\s*,")


def _code(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(("//", ".loc", "$L"))


def _add_regs(ptx: str, decl: str, setup: str = "") -> str:
    """``decl`` after the kernel's last ``.reg`` line and ``setup`` after that (before the body)."""
    lines = ptx.split("\n")
    last = max(i for i, ln in enumerate(lines) if ln.strip().startswith(".reg"))
    lines[last + 1:last + 1] = [decl] + ([setup] if setup else [])
    return "\n".join(lines)


def num_warps(ptx: str) -> int:
    m = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)", ptx)
    return int(m.group(1)) // 32


def edit_bfly(ptx: str) -> str:
    """Each butterfly chain (a shuffle at distance 1 starts one) in the reverse order of distances."""
    lines = ptx.split("\n")
    chains, cur = [], None
    for i, ln in enumerate(lines):
        m = _SHFL.match(ln)
        if not m:
            continue
        if m.group(2) == "1":
            cur = []
            chains.append(cur)
        cur.append(i)
    for ch in chains:
        dists = [_SHFL.match(lines[i]).group(2) for i in ch]
        for i, d in zip(ch, reversed(dists)):
            lines[i] = _SHFL.sub(lambda m, d=d: m.group(1) + d + m.group(3), lines[i])
    if not chains:
        raise ValueError("no butterfly chain")
    return "\n".join(lines)


def edit_xwarp(ptx: str) -> str:
    """Triton's cross-warp step (module doc). kernelc's step reads ``st.shared [A], v; bar.sync 0;
    ... ld.shared x, [B]; log2(num_warps) shuffle+op pairs -> r``; here the store is lane 0's, the load
    threads < num_warps', and ``@tid==0 st.shared [B], r; bar.sync 0; ld.shared r, [global_smem]`` follows (B is
    global_smem + 4 * tid for those threads; kernelc's barrier before the next reduction's store already orders
    that store after these loads)."""
    nw = num_warps(ptx)
    steps = nw.bit_length() - 1
    lines = ptx.split("\n")
    out, i, n_red = [], 0, 0
    while i < len(lines):
        ln = lines[i]
        if re.match(r"^\s*st\.shared\.b32\s+\[%\w+\],\s*%\w+;", ln):
            out.append("\t@%mxp0 " + ln.strip())
            i += 1
            continue
        m = re.match(r"^\s*ld\.shared\.b32\s+(%\w+),\s*\[(%\w+)\];", ln)
        if m:
            out.append("\t@%mxp1 " + ln.strip())
            addr = m.group(2)
            i += 1
            shfls = 0
            while i < len(lines):
                out.append(lines[i])
                if _SHFL.match(lines[i]):
                    shfls += 1
                elif shfls == steps and _code(lines[i]):
                    dest = _DEST.match(lines[i]).group(1)
                    out += [f"\t@%mxp2 st.shared.b32 [{addr}], {dest};", "\tbar.sync 0;",
                            f"\tld.shared.b32 {dest}, [global_smem];"]
                    n_red += 1
                    i += 1
                    break
                i += 1
            continue
        out.append(ln)
        i += 1
    if not n_red:
        raise ValueError("no cross-warp reduction")
    setup = "\n".join(["\tmov.u32 %mxt0, %tid.x;", "\tand.b32 %mxt1, %mxt0, 31;", "\tsetp.eq.u32 %mxp0, %mxt1, 0;",
                       f"\tsetp.lt.u32 %mxp1, %mxt0, {nw};", "\tsetp.eq.u32 %mxp2, %mxt0, 0;"])
    return _add_regs("\n".join(out), "\t.reg .pred %mxp<3>;\n\t.reg .b32 %mxt<2>;", setup)


_LG2 = re.compile(r"lg2\.approx\.f32\s+(%\w+),\s*(%\w+);")
_FMA_LN2 = r"^(\s*)fma\.rn\.f32\s+(%\w+),\s*{},\s*0fBF317218,\s*(%\w+);"


def _lg2(ptx: str):
    found = _LG2.findall(ptx)
    if len(found) != 1:
        raise ValueError(f"{len(found)} lg2.approx")
    return found[0]


def edit_fadd(ptx: str) -> str:
    """``lse = lg2(s) * ln2`` once, then ``z - lse`` (sub) where kernelc writes fma(lg2(s), -ln2, z)."""
    a, _ = _lg2(ptx)
    ptx, n = re.subn(_FMA_LN2.format(re.escape(a)), r"\1sub.f32 \2, \3, %mlse;", ptx, flags=re.M)
    if not n:
        raise ValueError("no fma by -ln2")
    i = ptx.index("\n", ptx.index("end inline asm", _LG2.search(ptx).end()))
    ptx = ptx[:i + 1] + f"\tmul.rn.f32 %mlse, {a}, 0f3F317218;   // .rn: not contracted back into an fma\n" + ptx[i + 1:]
    return _add_regs(ptx, "\t.reg .b32 %mlse;")


# Triton 3.6's log (libdevice __nv_logf as its PTX for sm_90a shows it): %ml0 = s in, %mlse = log(s) out
_TRITON_LOG = """\tsetp.lt.f32 %mlp0, {s}, 0f00800000;
\tmul.f32 %ml1, {s}, 0f4B000000;
\tselp.f32 %ml2, %ml1, {s}, %mlp0;
\tselp.f32 %ml3, 0fC1B80000, 0f00000000, %mlp0;
\tadd.s32 %ml4, %ml2, -1059760811;
\tand.b32 %ml5, %ml4, -8388608;
\tsub.s32 %ml6, %ml2, %ml5;
\tcvt.rn.f32.s32 %ml7, %ml5;
\tmov.b32 %ml8, 0f34000000;
\tfma.rn.ftz.f32 %ml9, %ml7, %ml8, %ml3;
\tadd.f32 %ml10, %ml6, 0fBF800000;
\tmov.b32 %ml11, 0f3E1039F6;
\tmov.b32 %ml12, 0fBE055027;
\tfma.rn.ftz.f32 %ml13, %ml12, %ml10, %ml11;
\tmov.b32 %ml14, 0fBDF8CDCC;
\tfma.rn.ftz.f32 %ml15, %ml13, %ml10, %ml14;
\tmov.b32 %ml16, 0f3E0F2955;
\tfma.rn.ftz.f32 %ml17, %ml15, %ml10, %ml16;
\tmov.b32 %ml18, 0fBE2AD8B9;
\tfma.rn.ftz.f32 %ml19, %ml17, %ml10, %ml18;
\tmov.b32 %ml20, 0f3E4CED0B;
\tfma.rn.ftz.f32 %ml21, %ml19, %ml10, %ml20;
\tmov.b32 %ml22, 0fBE7FFF22;
\tfma.rn.ftz.f32 %ml23, %ml21, %ml10, %ml22;
\tmov.b32 %ml24, 0f3EAAAA78;
\tfma.rn.ftz.f32 %ml25, %ml23, %ml10, %ml24;
\tmov.b32 %ml26, 0fBF000000;
\tfma.rn.ftz.f32 %ml27, %ml25, %ml10, %ml26;
\tmul.f32 %ml28, %ml10, %ml27;
\tfma.rn.ftz.f32 %ml29, %ml28, %ml10, %ml10;
\tmov.b32 %ml30, 0f3F317218;
\tfma.rn.ftz.f32 %ml31, %ml9, %ml30, %ml29;
\tsetp.lt.u32 %mlp1, %ml2, 2139095040;
\tmov.b32 %ml32, 0f7F800000;
\t@!%mlp1 fma.rn.ftz.f32 %ml31, %ml2, %ml32, %ml32;
\tsetp.eq.f32 %mlp2, %ml2, 0f00000000;
\tselp.f32 %mlse, 0fFF800000, %ml31, %mlp2;"""


def edit_log(ptx: str) -> str:
    """Triton's log of the sum and ``z - log(s)`` (sub) for kernelc's lg2.approx and fma(lg2(s), -ln2, z)."""
    a, s = _lg2(ptx)
    ptx, n = re.subn(_FMA_LN2.format(re.escape(a)), r"\1sub.f32 \2, \3, %mlse;", ptx, flags=re.M)
    if not n:
        raise ValueError("no fma by -ln2")
    ptx = _LG2.sub(lambda m: f"mov.b32 {a}, {s};", ptx)   # the inline asm left as a move (a unused after)
    i = ptx.index("\n", ptx.index("end inline asm", ptx.index(f"mov.b32 {a}, {s};")))
    ptx = ptx[:i + 1] + _TRITON_LOG.format(s=s) + "\n" + ptx[i + 1:]
    return _add_regs(ptx, "\t.reg .pred %mlp<3>;\n\t.reg .b32 %ml<33>;\n\t.reg .b32 %mlse;")


def edit_all(ptx: str) -> str:
    for f in (edit_xwarp, edit_bfly):
        ptx = f(ptx)
    try:
        ptx = edit_log(ptx)
    except ValueError:   # a kernel without a log
        pass
    return ptx


EDITS = {"xwarp": edit_xwarp, "bfly": edit_bfly, "log": edit_log, "fadd": edit_fadd, "smem64": None,
         "all": edit_all}
SMEM = {"smem64": 64}   # the dynamic shared memory an edit launches with (kernelc's own otherwise)


def triton_ptxas() -> str:
    import importlib.util
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.origin:
        raise RuntimeError("no triton importable")
    return os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin", "ptxas")


def assemble(ptx: str, exe: str):
    from cubintools.target import parse_target
    from kernelc.compiler.backend.ptxas import _standalone, ptxas_max_ptx
    top = ptxas_max_ptx(exe)   # kernelc writes 9.0; Triton 3.6's ptxas reads up to 8.7 (nothing here needs more)
    if top:
        ptx = re.sub(r"^\.version\s+(\d+)\.(\d+)", lambda m: ".version %d.%d" % divmod(
            min(int(m.group(1)) * 10 + int(m.group(2)), top), 10), ptx, count=1, flags=re.M)
    return _standalone(ptx, parse_target("sm_90a"), 3, (), exe)


def edited(ptx: str, tag: str) -> str:
    f = EDITS.get(tag)
    return f(ptx) if f else ptx


# -- CPU: every edit applies and assembles ---------------------------------------------------------------

CPU_CASES = {   # kernel: (signature, constexprs, num_warps), as bench_memory_bound's rows specialise them
    "log_softmax_fwd_kernel": ("y_ptr=*fp16,x_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
    "log_softmax_bwd_kernel": ("dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
    "softmax_bwd_kernel": ("dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32", {"BLOCK_SIZE": 8192}, 16),
    "rms_norm_bwd_kernel": ("dy_ptr=*bf16,x_ptr=*bf16,w_ptr=*bf16,rstd_ptr=*fp32,dx_ptr=*bf16,dw_ptr=*fp32,stride=i32,"
                            "n_rows=i32,n_cols=i32,rows_per_program=i32", {"BLOCK_SIZE": 4096}, 8),
}


def check(exe: str) -> int:
    import collections
    from cubintools import instructions
    from kernelc.compat import install
    install()
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    bad = 0
    for kname, (sig, cx, nw) in CPU_CASES.items():
        sig = dict(p.split("=") for p in sig.split(","))
        div = {n: 16 for n in sig}
        ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3, divisibility=div)
        for tag in ["ptx"] + list(EDITS):
            try:
                ptx = edited(ck.asm["ptx"], tag)
            except ValueError as e:
                print(f"{kname:24s} {tag:7s} n/a ({e})")
                continue
            try:
                res = assemble(ptx, exe)
            except Exception as e:
                bad += 1
                print(f"{kname:24s} {tag:7s} FAILS: {str(e)[:400]}")
                continue
            ops = collections.Counter(i.opcode.split(".")[0] for i in instructions(res.cubin))
            print(f"{kname:24s} {tag:7s} regs {res.resources[ck.name].registers:3d}  sass {sum(ops.values()):4d}  "
                  + " ".join(f"{k}={ops[k]}" for k in ("BAR", "SHFL", "STS", "LDS", "MUFU", "FFMA", "FADD")))
    return 1 if bad else 0


# -- GPU: the columns, interleaved -----------------------------------------------------------------------

def load_edit(kfn, tag: str, exe: str) -> dict:
    """Reload ``kfn``'s one loaded specialisation from its own PTX with edit ``tag``, assembled by ``exe``."""
    from kernelc.runtime.driver import LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    ck = ent.compiled
    try:
        ptx = edited(ck.asm["ptx"], tag)
    except ValueError as e:
        return {"skipped": str(e)}
    res = assemble(ptx, exe)
    regs = res.resources[ck.name].registers
    dyn = SMEM.get(tag, ck.dynamic_shared) if ck.dynamic_shared else ck.dynamic_shared
    ent.function = LoadedFunction(res.cubin, ck.name, dyn, ent.function.threads // 32, regs, ent.device,
                                  total_shared=ck.shared - ck.dynamic_shared + dyn)
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None
    return {"regs": regs, "kernelc_regs": ck.n_regs, "shared": dyn}


def main(argv) -> int:
    import torch
    import tempfile
    from bench.bench_memory_bound import (CONTROL, _env, _err, _regs, cases, column_env, interleaved_round,
                                          kernelc_variant, log_ratio_ci, median_ci, parse_variants)
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    from swap_cubin import swap_in
    rounds, out_path = 6, os.path.join(os.environ.get("OUT", os.path.join(HERE, "results")), "ptx_edits.json")
    tags = [t for t in EDITS if t != "smem64"]
    deadline = float("inf")
    for opt in ("--rounds", "--out", "--edits", "--budget"):
        if opt in argv:
            i = argv.index(opt)
            v = argv[i + 1]
            del argv[i:i + 2]
            if opt == "--rounds":
                rounds = int(v)
            elif opt == "--budget":   # seconds after which no new row starts
                deadline = time.time() + float(v)
            elif opt == "--out":
                out_path = v
            else:
                tags = [t for t in v.split(",") if t]
    variants = parse_variants(argv)   # --variant TAG:KERNELC_VAR=V,..: kernelc's build under those knobs
    root = tempfile.mkdtemp(prefix="ptx-edits-")
    V = [(f"kernelc[{tag}]", kernelc_variant(tag), column_env(root, tag, env)) for tag, env in variants]
    exe = triton_ptxas()
    T = triton_twin("memory_bound")
    table = cases()
    names = [n for a in argv for n in table if n.startswith(a)] if argv else list(table)
    rows = []
    for name in dict.fromkeys(names):
        if time.time() > deadline:
            print(f"{name}: skipped (--budget spent)", flush=True)
            continue
        make, call, ref, nbytes = table[name]
        row = {"benchmark": name, "edits": {}}
        try:
            args = make()
            call(K, *[a.clone() for a in args])
            want = call(T, *[a.clone() for a in args])
            impls = [("kernelc", lambda: call(K, *args))]
            base = None
            for tag in ["ptx"] + tags:
                if base is not None and tag != "ptx":   # an edit that does not apply to this kernel: not built
                    try:
                        [edited(p, tag) for p in base]
                    except ValueError as e:
                        row["edits"][tag] = {"skipped": str(e)}
                        continue
                try:   # a failing edit is reported and left out; the other columns are timed all the same
                    M = kernelc_variant(f"edit_{tag}")
                    call(M, *[a.clone() for a in args])
                    fns = {kn: kf for kn, kf in vars(M).items()
                           if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                    if base is None:
                        from kernelc.runtime.launcher import get_state
                        base = [e.compiled.asm["ptx"] for kf in fns.values() for e in get_state(kf)["cache"].values()]
                    row["edits"][tag] = {kn: load_edit(kf, "" if tag == "ptx" else tag, exe) for kn, kf in fns.items()}
                    row[f"{tag}_max_abs_err_vs_triton"] = _err(call(M, *[a.clone() for a in args]), want)
                except Exception as e:
                    import traceback
                    traceback.print_exc()
                    row["edits"][tag] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                impls.append(("kernelc[ptx]" if tag == "ptx" else f"kernelc[ptx+{tag}]", lambda M=M: call(M, *args)))
            row["regs"] = {"kernelc": _regs(K)}
            for n, mod, env in V:   # compiles (first call) under the variant's knobs, into a cache of its own
                with _env(env):
                    row[f"{n}_max_abs_err_vs_triton"] = _err(call(mod, *[a.clone() for a in args]), want)
                row["regs"][n] = _regs(mod)
                impls.append((n, lambda mod=mod: call(mod, *args)))
            S = kernelc_variant("swap")
            call(S, *[a.clone() for a in args])
            try:
                row["swapped"] = {kn: swap_in(kf, getattr(T, kn)) for kn, kf in vars(S).items()
                                  if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                row["swap_max_abs_err_vs_triton"] = _err(call(S, *[a.clone() for a in args]), want)
                impls.append(("kernelc[triton cubin]", lambda: call(S, *args)))
            except Exception as e:
                row["swap_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            impls += [("triton", lambda: call(T, *args)), (CONTROL, lambda: call(T, *args))]
            rds = [interleaved_round(dict(impls), CONTROL, keep=False) for _ in range(rounds)]
            row["rounds"] = rds
            for n in rds[0]["log"]:
                logs = [rd["log"][n] for rd in rds]
                ci, mci = log_ratio_ci(logs), median_ci(logs)
                row[f"{n}/triton_ci95"] = [round(v, 5) for v in ci] if ci else None
                row[f"{n}/triton_median_ci95"] = [round(v, 5) for v in mci] if mci else None
            print(name, flush=True)
            for n in rds[0]["log"]:
                print(f"   {n:24s} {row[f'{n}/triton_ci95']}", flush=True)
            print("   errs", {k: v for k, v in row.items() if k.endswith("_err_vs_triton")},
                  "regs", {t: [v.get("regs") if isinstance(v, dict) else v for v in e.values()]
                           for t, e in row["edits"].items()}, flush=True)
        except Exception as e:  # one failing case must not hide the others
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        torch.cuda.empty_cache()
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "w") as f:   # after every row: a run cut short keeps the rows it finished
            json.dump({"rounds": rounds, "gpu": torch.cuda.get_device_name(), "edits": tags,
                       "variants": dict(variants), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    if "--check" in sys.argv:
        ptxas = os.environ.get("PTXAS") or "/work/ext/triton_site/triton/backends/nvidia/bin/ptxas"
        sys.exit(check(ptxas))
    sys.exit(main(sys.argv[1:]))
