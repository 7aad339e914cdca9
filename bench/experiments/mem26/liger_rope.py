"""Liger-Kernel's rope (``_triton_rope`` in ``.ext/liger/src/liger_kernel/ops/rope.py``, launched with the arguments
its ``rope_forward`` computes) under kernelc and under Triton, interleaved in one process (session 26, helper
lrope26; issue 21).

Liger's source is loaded unmodified three times: by Triton, and twice by kernelc (its two ``triton`` imports swapped
for ``kernelc``), each kernelc copy compiling under its own knobs and disk cache: ``kernelc`` (the default,
``KERNELC_L2_REUSE=evict_last``: with ``cos_bs == 1`` its cos/sin loads take an L2 evict_last policy, since
passes/simplify.py folds the constant ``tl.where(cos_bs == 1, ...)``), ``kernelc[l2off]`` (``KERNELC_L2_REUSE=off``).
Rows: ``cos_bs`` 1 (one cos/sin row per position, read by every batch: the loads that get the policy) and ``cos_bs ==
bsz`` (one row per token: nothing recurs, both kernelc builds are the same code). Columns timed by
``bench.bench_memory_bound.interleaved_round`` (an L2 flush before every launch; Triton and Triton's control, the
A/A); the ratios are per-round means of log ratios, 95% t intervals over the rounds.

    python3 bench/experiments/mem26/liger_rope.py [--cos-bs 1,4] [--rounds R] [--row-seconds S] [--out PATH]  # GPU
    python3 bench/experiments/mem26/liger_rope.py --check [--out PATH]   # CPU: the builds (sm_90a), interpreters

``LIGER_ROPE=/path/to/rope.py`` where the tree has no ``.ext/liger`` (on CPU: /work/main/.ext/liger/...).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
LIGER_ROPE = os.environ.get("LIGER_ROPE", os.path.join(ROOT, ".ext", "liger", "src", "liger_kernel", "ops", "rope.py"))

# Llama-3-8B's attention (32 q heads, 8 kv heads, head_dim 128) at 4 x 4096 tokens, bf16: q 128 MB, k 32 MB
SHAPE = dict(bsz=4, seq_len=4096, n_qh=32, n_kh=8, hd=128)
# the default spelled out (kernelc/options/), so that an ambient KERNELC_L2_REUSE cannot turn it off
KNOBS = {"kernelc": {"KERNELC_L2_REUSE": "evict_last"}, "kernelc[l2off]": {"KERNELC_L2_REUSE": "off"}}


def load_liger(path: str, under: str, tag: str):
    """Liger's rope.py as a module of its own, under ``under`` ("triton" or "kernelc")."""
    src = open(path).read()
    if under == "kernelc":
        new = src.replace("import triton.language as tl\n", "import kernelc.language as tl\n").replace(
            "import triton\n", "import kernelc as triton\n")
        if new.count("kernelc") != 2:
            raise RuntimeError(f"{path}: expected 'import triton' and 'import triton.language as tl'")
        src = new
    d = tempfile.mkdtemp(prefix=f"liger_rope_{tag}_")
    p = os.path.join(d, "rope.py")
    with open(p, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"liger_rope_{re.sub(r'[^A-Za-z0-9]', '_', tag)}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _np2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def launch_args(q, k, cos, sin):
    """``_triton_rope``'s grid, arguments and keywords as Liger's ``rope_forward`` computes them, for q, k of shape
    (bsz, seq_len, heads, head_dim), contiguous (``rope_forward`` transposes (bsz, heads, seq_len, head_dim) views
    back to these and makes them contiguous), cos/sin (1 or bsz, seq_len, head_dim)."""
    bsz, sl, nqh, hd = q.shape
    nkh = k.shape[2]
    pq, pk = _np2(nqh), _np2(nkh)
    args = (q, q.stride(1), k, k.stride(1), cos, cos.stride(-2), sin, sin.stride(-2), sl, bsz, cos.shape[0],
            nqh, nkh, hd, pq, pk, _np2(hd))
    return (bsz * sl,), args, dict(BLOCK_SIZE=max(pq, pk), BACKWARD_PASS=False)


def inputs(torch, device, cos_bs, bsz, seq_len, n_qh, n_kh, hd, dtype=None, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    dtype = dtype or torch.bfloat16
    q = torch.randn(bsz, seq_len, n_qh, hd, device=device, generator=g).to(dtype)
    k = torch.randn(bsz, seq_len, n_kh, hd, device=device, generator=g).to(dtype)
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd)
    emb = torch.cat([pos * inv, pos * inv], -1)                                 # (seq_len, hd), as HF's Llama
    emb = emb[None].expand(cos_bs, -1, -1) + torch.arange(cos_bs, device=device)[:, None, None] * 1e-3
    return q, k, emb.cos().to(dtype).contiguous(), emb.sin().to(dtype).contiguous()


def reference(torch, q, k, cos, sin):
    """rope in float32 (Liger's formula: the left half of cos/sin, rotate_half)."""
    h = q.shape[-1] // 2
    c, s = cos[..., :h].float()[:, :, None, :], sin[..., :h].float()[:, :, None, :]

    def rot(x):
        x1, x2 = x[..., :h].float(), x[..., h:].float()
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    return rot(q), rot(k)


def run_once(mod, q, k, cos, sin):
    grid, args, kw = launch_args(q, k, cos, sin)
    mod._triton_rope[grid](*args, **kw)


# -- CPU ----------------------------------------------------------------------------------------------------

def builds(mod, cos_bs: int, env: dict) -> dict:
    """kernelc's build of ``mod._triton_rope`` for sm_90a at the row's arguments (the runtime's specialisation:
    divisibility 16 of the pointers and of the integers that are multiples of 16)."""
    from bench.bench_memory_bound import _env
    from kernelc.compiler.compiler import compile as kcompile
    s = SHAPE
    sig = dict(q_ptr="*bf16", q_row_stride="i32", k_ptr="*bf16", k_row_stride="i32", cos="*bf16",
               cos_row_stride="i32", sin="*bf16", sin_row_stride="i32", sl="i32")
    cx = dict(bs=s["bsz"], cos_bs=cos_bs, n_qh=s["n_qh"], n_kh=s["n_kh"], hd=s["hd"], pad_n_qh=_np2(s["n_qh"]),
              pad_n_kh=_np2(s["n_kh"]), pad_hd=_np2(s["hd"]), BLOCK_SIZE=max(_np2(s["n_qh"]), _np2(s["n_kh"])),
              BACKWARD_PASS=False)
    with _env({**env, "KERNELC_CACHE_DIR": tempfile.mkdtemp(prefix="liger_rope_cc_")}):
        ck = kcompile(mod._triton_rope, sig, cx, "sm_90a", 4, 3, divisibility={n: 16 for n in sig})
    ptx, tir = ck.asm["ptx"], ck.asm["tir"]
    sass = ""
    try:
        from cubintools.sass import disassemble
        sass = "\n".join(re.sub(r"/\*[0-9a-f]+\*/", "", ln).strip()
                         for ln in disassemble(ck.asm["cubin"], line_info=False).splitlines())
    except Exception as e:   # no nvdisasm here: the PTX still says what changed
        sass = f"unavailable: {type(e).__name__}"
    return {"regs": ck.n_regs, "selects_in_tir": len(re.findall(r" = select ", tir)),
            "l2_marked_loads": tir.count("l2='evict_last'"),
            "cache_hint_loads": len(re.findall(r"L2::cache_hint", ptx)),
            "createpolicy": len(re.findall(r"createpolicy", ptx)),
            "ptx_sha1": hashlib.sha1(re.sub(r'\.file\s+\d+ "[^"]*"', "", ptx).encode()).hexdigest()[:12],
            "sass_sha1": hashlib.sha1(sass.encode()).hexdigest()[:12] if not sass.startswith("unavailable") else sass}


def check(out_path) -> int:
    import torch
    os.environ.setdefault("KERNELC_INTERPRET", "1")
    out = {"liger": LIGER_ROPE, "shape": SHAPE, "builds": {}, "interpreter": {}}
    mods = {tag: load_liger(LIGER_ROPE, "kernelc", tag) for tag in KNOBS}
    for cos_bs in (1, SHAPE["bsz"]):
        for tag, env in KNOBS.items():
            b = out["builds"][f"cos_bs={cos_bs}/{tag}"] = builds(mods[tag], cos_bs, env)
            print(f"cos_bs={cos_bs:<2d} {tag:15s} {b}", flush=True)
    # equality at a small shape: kernelc's interpreter (and Triton's, where Triton is importable) against float32
    small = dict(bsz=2, seq_len=5, n_qh=3, n_kh=2, hd=12)
    tri = None
    try:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        tri = load_liger(LIGER_ROPE, "triton", "triton")
    except Exception as e:
        out["interpreter"]["triton"] = f"not run: {type(e).__name__}: {str(e)[:120]}"
    for cos_bs in (1, small["bsz"]):
        x = inputs(torch, "cpu", cos_bs, dtype=torch.float32, **small)
        want = reference(torch, *x)
        for tag, mod in [("kernelc", mods["kernelc"])] + ([("triton", tri)] if tri is not None else []):
            q, k = x[0].clone(), x[1].clone()
            run_once(mod, q, k, x[2], x[3])
            err = max((q - want[0]).abs().max().item(), (k - want[1]).abs().max().item())
            out["interpreter"][f"cos_bs={cos_bs}/{tag}"] = err
            print(f"interpreter cos_bs={cos_bs} {tag}: max |err| {err:.3g}", flush=True)
            if err > 1e-5:
                print("MISMATCH", flush=True)
                return 1
    b = out["builds"]
    ok = (b["cos_bs=1/kernelc"]["cache_hint_loads"] == 2 and b["cos_bs=1/kernelc[l2off]"]["cache_hint_loads"] == 0
          and all(v["cache_hint_loads"] == 0 for n, v in b.items() if not n.startswith("cos_bs=1/")))
    out["policy on cos_bs=1's cos/sin loads only"] = ok
    print("policy on cos_bs=1's cos/sin loads only:", ok, flush=True)
    if out_path:
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if ok else 1


# -- GPU ----------------------------------------------------------------------------------------------------

def main(argv) -> int:
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--cos-bs", default="1,4", help="rows: cos/sin batch sizes (1, or bsz)")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--row-seconds", type=float, default=0, help="stop a row's rounds (after 3) before this")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="CPU, to test this script: a small shape in the interpreters, host-clock rounds (no result)")
    a = ap.parse_args(argv)
    if a.check:
        return check(a.out or os.path.join(HERE, "results", "liger_rope_check.json"))
    import torch
    from bench.bench_memory_bound import (CONTROL, _built, _env, column_env, interleaved_round, log_ratio_ci)
    shape, device = SHAPE, "cuda"
    if a.cpu_smoke:
        os.environ["KERNELC_INTERPRET"] = os.environ["TRITON_INTERPRET"] = "1"
        shape, device, interleaved_round = dict(bsz=2, seq_len=8, n_qh=4, n_kh=2, hd=16), "cpu", _host_round
    out_path = a.out or os.path.join(os.environ.get("OUT", os.path.join(HERE, "results")), "liger_rope.json")
    root = tempfile.mkdtemp(prefix="liger-rope-")
    T = load_liger(LIGER_ROPE, "triton", "triton")
    mods = {tag: load_liger(LIGER_ROPE, "kernelc", tag) for tag in KNOBS}
    res = {"gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu smoke (not a result)",
           "shape": shape, "liger": LIGER_ROPE, "rows": []}

    def dump():
        with open(out_path + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(out_path + ".tmp", out_path)
    t0 = time.time()
    for cos_bs in [int(c) for c in a.cos_bs.split(",")]:
        t_row = time.time()
        row = {"cos_bs": cos_bs, "builds": {}, "errs": {}, "rounds": []}
        res["rows"].append(row)
        try:
            if cos_bs not in (1, shape["bsz"]):
                raise ValueError(f"cos_bs {cos_bs}: Liger's cos is (1 or bsz={shape['bsz']}, seq_len, head_dim)")
            # --cpu-smoke in float32: Triton 3.6's interpreter gave NaN on these bf16 inputs (not looked into)
            x = inputs(torch, device, cos_bs, dtype=torch.float32 if a.cpu_smoke else None, **shape)
            q0, k0, cos, sin = x
            want = reference(torch, *x)
            impls = {}
            for tag, mod in list(mods.items()) + [("triton", T)]:
                q, k = q0.clone(), k0.clone()
                if tag in KNOBS:   # first call compiles, under the column's knobs and a cache of its own
                    with _env(column_env(root, f"{tag}_{cos_bs}", KNOBS[tag])):
                        run_once(mod, q, k, cos, sin)
                    ck = _built(mod).get("_triton_rope")   # None in the interpreter (--cpu-smoke)
                    row["builds"][tag] = {"regs": ck.n_regs,
                                          "cache_hint_loads": len(re.findall(r"L2::cache_hint", ck.asm["ptx"])),
                                          "compiled_here": "disk_cache_load" not in ck.timings} if ck else None
                else:
                    run_once(mod, q, k, cos, sin)
                if device == "cuda":
                    torch.cuda.synchronize()
                row["errs"][tag] = max((q.float() - want[0]).abs().max().item(),
                                       (k.float() - want[1]).abs().max().item())
                qb, kb = q0.clone(), k0.clone()   # each column rotates its own copy in place, as Liger does
                impls[tag] = (lambda mod=mod, qb=qb, kb=kb: run_once(mod, qb, kb, cos, sin))
            impls[CONTROL] = impls["triton"]
            row["bytes"] = 2 * (q0.numel() + k0.numel()) * q0.element_size() + 2 * cos.numel() * cos.element_size()
            print(f"cos_bs={cos_bs}: builds {row['builds']} errs {row['errs']} ({time.time() - t0:.0f} s)", flush=True)
            for _ in range(a.rounds):
                tr = time.time()
                row["rounds"].append(interleaved_round(dict(impls), CONTROL, keep=False))
                dump()
                if a.row_seconds and len(row["rounds"]) >= 3 and 2 * time.time() - tr - t_row > a.row_seconds:
                    break
            rds = row["rounds"]
            for n in rds[0]["log"]:
                ci = log_ratio_ci([rd["log"][n] for rd in rds])
                row[f"{n}/triton_ci95"] = [round(v, 5) for v in ci] if ci else None
                if n.startswith("kernelc["):
                    kci = log_ratio_ci([rd["log"][n] - rd["log"]["kernelc"] for rd in rds])
                    row[f"{n}/kernelc_ci95"] = [round(v, 5) for v in kci] if kci else None
            for n in impls:
                ms = sorted(rd["ms"][n] for rd in rds)[len(rds) // 2]
                row[f"{n}/us"] = round(ms * 1e3, 2)
                row[f"{n}/GBps"] = round(row["bytes"] / (ms * 1e-3) / 1e9)
        except Exception as e:   # a failing row is reported; the next still runs
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        dump()
        summary(row)
    return 0


def _host_round(fns, control=None, keep=False):
    """--cpu-smoke's stand-in for interleaved_round (the same keys; host clock, 5 repetitions): tests the script
    only."""
    import math
    import statistics
    t = {n: [] for n in fns}
    for _ in range(5):
        for n, f in fns.items():
            t0 = time.perf_counter()
            f()
            t[n].append((time.perf_counter() - t0) * 1e3)
    ms = {n: statistics.median(v) for n, v in t.items()}
    ref = [(a + b) / 2 for a, b in zip(t["triton"], t[control])]
    log = {n: statistics.fmean(math.log(r / x) for r, x in zip(ref, v))
           for n, v in t.items() if n not in ("triton", control)}
    log[control] = statistics.fmean(math.log(r / x) for r, x in zip(t["triton"], t[control]))
    return {"ms": ms, "log": log}


def summary(row):
    print(f"rope (Liger) cos_bs={row['cos_bs']}: {len(row['rounds'])} rounds"
          + (f"  ERROR {row['error']}" if "error" in row else ""), flush=True)
    for n in ("kernelc", "kernelc[l2off]", "triton", "triton[control]"):
        if f"{n}/us" in row:
            print(f"  {n:16s} {row[f'{n}/us']:8.2f} us {row[f'{n}/GBps']:5d} GB/s"
                  f"  x/Triton {row.get(f'{n}/triton_ci95')}"
                  + (f"  x/kernelc {row.get(f'{n}/kernelc_ci95')}" if n.startswith("kernelc[") else ""), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
