"""Is a memory-bound row's gap to Triton in the code, the assembler, or around the code? mb_gaps/swap_cubin.py's
columns, timed with their launches interleaved (bench/interleaved.py) so a 0.1% difference resolves. (GPU)

Columns: ``kernelc`` (kernelc's build and launch), ``kernelc[triton cubin]`` (Triton's cubin of the same source
through kernelc's launcher and wrapper), ``kernelc[TAG]`` per ``--variant`` (e.g. ``tptxas:KERNELC_ASSEMBLER=ptxas,
KERNELC_PTXAS=<Triton's ptxas>``: kernelc's PTX, Triton's assembler), ``triton`` and ``triton[control]``.
Per column: x / Triton from the rounds' per-repetition log ratios, mean with a t interval and median with an
order-statistic interval.

    python3 bench/experiments/mem18/swap_interleaved.py [--rounds R] [--out PATH] [--variant ...] [--barrier-flag]
        [prefixes...]

``--reqntid TAG`` adds ``kernelc[TAG reqntid]``: variant TAG's build (a standalone ptxas: KERNELC_ASSEMBLER=ptxas,
KERNELC_PTXAS=...) assembled again from its PTX with ``.maxntid N`` written ``.reqntid N``, as Triton's PTX says it.
``--barrier-flag`` adds ``kernelc[barrier flag]``: kernelc's own cubin with its ``.text`` section's barrier count set
as ptxas sets it (nvJitLink's cubins keep the count in ``.nv.info`` only); if it times like Triton, that flag is the
gap.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mb_gaps"))


def with_barrier_flag(cubin: bytes, name: str):
    """``(cubin, n)``: ``cubin`` with its ``.text.<name>`` section's barrier count (sh_flags bits 20-26, what ptxas
    writes and cuobjdump shows as ``SHF_BARRIERS=n``) set from the ``EIATTR_NUM_BARRIERS`` (0x4c) record of
    ``.nv.info.<name>``, which is where nvJitLink's cubins keep it (their ``.text`` flags say 0); n None when there
    is no such record (nothing patched)."""
    import io
    import struct
    from elftools.elf.elffile import ELFFile
    from cubintools.cubin import _records
    e = ELFFile(io.BytesIO(cubin))
    info = e.get_section_by_name(f".nv.info.{name}")
    nbar = None
    for attr, fmt, payload in _records(info.data()) if info is not None else []:
        if attr == 0x4c:
            nbar = int.from_bytes(payload[:2], "little") if payload else None
    if not nbar:
        return cubin, None
    out = bytearray(cubin)
    for i, sec in enumerate(e.iter_sections()):
        if sec.name == f".text.{name}":
            off = e["e_shoff"] + i * e["e_shentsize"] + 8     # Elf64_Shdr.sh_flags
            flags = struct.unpack_from("<Q", out, off)[0]
            struct.pack_into("<Q", out, off, (flags & ~(0x7F << 20)) | (nbar << 20))
    return bytes(out), nbar


def patch_in(kfn) -> dict:
    """Reload ``kfn``'s one loaded specialisation (kernelc's build) from its cubin with the barrier flag set."""
    from kernelc.runtime.driver import LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    ck = ent.compiled
    cubin, nbar = with_barrier_flag(ck.asm["cubin"], ck.name)
    ent.function = LoadedFunction(cubin, ck.name, ck.dynamic_shared, ent.function.threads // 32, ck.n_regs,
                                  ent.device, total_shared=ck.shared)
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None
    return {"barriers": nbar}


def reqntid_in(kfn, exe: str) -> dict:
    """Reload ``kfn``'s one loaded specialisation from its own PTX with ``.maxntid N`` written ``.reqntid N`` (as
    Triton's PTX says it), assembled by the standalone ptxas ``exe`` (the build ``kfn`` holds must come from the same
    ptxas, e.g. a ``KERNELC_ASSEMBLER=ptxas`` variant, so that the one difference is that directive)."""
    import re
    from cubintools.target import parse_target
    from kernelc.compiler.backend.ptxas import _standalone
    from kernelc.runtime.driver import LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    ck = ent.compiled
    ptx, n = re.subn(r"\.maxntid\s+(\d+)(\s*,\s*1\s*,\s*1)?", r".reqntid \1", ck.asm["ptx"])
    if n != 1:
        raise RuntimeError(f"{ck.name}: {n} .maxntid directives")
    res = _standalone(ptx, parse_target(ck.target.arch if hasattr(ck.target, "arch") else "sm_90a"), 3, (), exe)
    regs = res.resources[ck.name].registers
    ent.function = LoadedFunction(res.cubin, ck.name, ck.dynamic_shared, ent.function.threads // 32, regs,
                                  ent.device, total_shared=ck.shared)
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None
    return {"regs": regs, "maxntid_regs": ck.n_regs}


def main(argv) -> int:
    import tempfile
    import torch
    from bench.bench_memory_bound import (CONTROL, _env, _err, _regs, cases, column_env, interleaved_round,
                                          kernelc_variant, log_ratio_ci, median_ci, parse_variants)
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    from swap_cubin import swap_in
    rounds, out_path = 8, os.path.join(os.environ.get("OUT", HERE), "swap_interleaved.json")
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        del argv[i:i + 2]
    if "--out" in argv:
        i = argv.index("--out")
        out_path = argv[i + 1]
        del argv[i:i + 2]
    variants = parse_variants(argv)
    reqntid_of = None
    if "--reqntid" in argv:   # --reqntid TAG: TAG's build (a standalone-ptxas variant) with .reqntid
        i = argv.index("--reqntid")
        reqntid_of = argv[i + 1]
        del argv[i:i + 2]
    flags = [a for a in argv if a.startswith("--")]
    argv = [a for a in argv if not a.startswith("--")]
    root = tempfile.mkdtemp(prefix="swap-interleaved-")
    V = [(f"kernelc[{tag}]", kernelc_variant(tag), column_env(root, tag, env)) for tag, env in variants]
    T = triton_twin("memory_bound")
    rows = []
    table = cases()
    # in the order the prefixes are given: a run cut short by its time limit has the first-named rows
    names = [n for a in argv for n in table if n.startswith(a)] if argv else list(table)
    for name in dict.fromkeys(names):
        make, call, ref, nbytes = table[name]
        row = {"benchmark": name}
        try:
            args = make()
            call(K, *[a.clone() for a in args])
            want = call(T, *[a.clone() for a in args])
            S = kernelc_variant("swap")
            call(S, *[a.clone() for a in args])
            try:
                row["swapped"] = {kn: swap_in(kf, getattr(T, kn)) for kn, kf in vars(S).items()
                                  if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                row["swap_max_abs_err_vs_triton"] = _err(call(S, *[a.clone() for a in args]), want)
            except Exception as e:   # time the other columns all the same
                row["swap_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                S = None
            P = None
            if "--barrier-flag" in flags:   # kernelc's own cubin, its .text flags patched (with_barrier_flag)
                P = kernelc_variant("patched")
                call(P, *[a.clone() for a in args])
                row["patched"] = {kn: patch_in(kf) for kn, kf in vars(P).items()
                                  if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                row["patched_max_abs_err_vs_triton"] = _err(call(P, *[a.clone() for a in args]), want)
            row["regs"] = {"kernelc": _regs(K)}
            for n, mod, env in V:
                with _env(env):
                    row[f"{n}_max_abs_err_vs_triton"] = _err(call(mod, *[a.clone() for a in args]), want)
                row["regs"][n] = _regs(mod)
            Rq = None
            if reqntid_of:   # the variant's build again, its PTX saying .reqntid (reqntid_in)
                env = dict(variants)[reqntid_of]
                Rq = kernelc_variant("reqntid")
                with _env(column_env(root, "reqntid", env)):
                    call(Rq, *[a.clone() for a in args])
                row["reqntid"] = {kn: reqntid_in(kf, env["KERNELC_PTXAS"]) for kn, kf in vars(Rq).items()
                                  if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                row["reqntid_max_abs_err_vs_triton"] = _err(call(Rq, *[a.clone() for a in args]), want)
            impls = [("kernelc", lambda: call(K, *args))]
            if S is not None:
                impls.append(("kernelc[triton cubin]", lambda: call(S, *args)))
            if P is not None:
                impls.append(("kernelc[barrier flag]", lambda: call(P, *args)))
            impls += [(n, (lambda mod=mod: call(mod, *args))) for n, mod, _ in V]
            if Rq is not None:
                impls.append((f"kernelc[{reqntid_of} reqntid]", lambda: call(Rq, *args)))
            impls += [("triton", lambda: call(T, *args)), (CONTROL, lambda: call(T, *args))]
            rds = []
            for r in range(rounds):
                order = impls[r % len(impls):] + impls[:r % len(impls)]
                rds.append(interleaved_round(dict(order), CONTROL, keep=r in (0, rounds - 1)))
            row["rounds"] = rds
            for n in rds[0]["log"]:
                logs = [rd["log"][n] for rd in rds]
                ci, mci = log_ratio_ci(logs), median_ci(logs)
                row[f"{n}/triton_ci95"] = [round(v, 5) for v in ci] if ci else None
                row[f"{n}/triton_median_ci95"] = [round(v, 5) for v in mci] if mci else None
                ci = log_ratio_ci([rd["mlog"][n] for rd in rds])   # the per-round median's figure (R1b's)
                row[f"{n}/triton_mlog_ci95"] = [round(v, 5) for v in ci] if ci else None
            print(name, {k: v for k, v in row.items() if k.endswith("/triton_ci95")}, row.get("swapped"),
                  row.get("patched"), row.get("reqntid"), row["regs"],
                  "err", row.get("swap_max_abs_err_vs_triton"), row.get("swap_error", ""), flush=True)
        except Exception as e:  # one failing case must not hide the others
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        torch.cuda.empty_cache()
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "w") as f:   # after every row: a run cut short keeps the rows it finished
            json.dump({"rounds": rounds, "gpu": torch.cuda.get_device_name(), "variants": dict(variants),
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
