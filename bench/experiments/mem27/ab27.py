"""Two ropes under L2 policies, interleaved in one process (session 27, helper mem27; issue 21).

Rows: Liger-Kernel's ``_triton_rope`` (its source unmodified, ``mem26/liger_rope.py``'s launch: 32 q / 8 kv heads,
head_dim 128, 4 x 4096 tokens bf16) with ``cos_bs`` 1 (``liger1``: one cos/sin row per position, re-read by the four
batches) or 4 (``liger4``: one row per token, nothing re-read), and the bench row ``rope 4x4096x32x128 bf16``
(``ours``: examples/kernels/memory_bound.py's ``rope_kernel``, fp32 cos/sin).

Columns (``--col [ROW/]TAG=KNOB[+EDIT...][@own]``; ``ROW/``: that row only): kernelc compiled under ``KERNELC_L2_REUSE=KNOB`` (``evict_last``,
``off``, or any value the options module has), its PTX then edited by mem21/variants.py's EDITS (``l2el:nost``:
cos/sin under createpolicy evict_last; ``l2en:nost``: the same instruction form with an evict_normal policy, i.e.
what the form costs when nothing is kept; ``l2elk:nost``: evict_last as an immediate policy, no createpolicy) and
reassembled as kernelc assembles; ``@own``: the column reads its own copy of cos/sin (every other column shares one
copy, as Liger's callers and mem26 did: whether lines one column kept under evict_last serve another column's reads,
across the L2 flush between launches); ``@demote``: its own copy, and after each launch ``demote.py``'s kernel gives
the copy's lines back the normal priority (timed with the launch: compare two ``@demote`` columns), so nothing a
launch kept is there for the next. Every column rotates its own copy of q (and k) in place. Triton runs the
same source (``triton``) and once more as the A/A (``triton[control]``). Ratios: per-round means of log ratios
(bench.bench_memory_bound.interleaved_round: an L2 flush before every launch), 95% t intervals over the rounds;
``x/off``: the column against the ``off`` column of the same round.

    python3 bench/experiments/mem27/ab27.py [--rows liger1,ours] [--rounds R] [--row-seconds S] [--out P] --col ...
    python3 bench/experiments/mem27/ab27.py --check --col ...    # CPU, sm_90a: each column's SASS, no timing
    python3 bench/experiments/mem27/ab27.py --cpu-smoke --col ...   # CPU: the timing loop in the interpreter

``LIGER_ROPE=/path/to/rope.py`` where the tree has no ``.ext/liger``.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
for _p in (ROOT, HERE, os.path.join(ROOT, "bench", "experiments", "mem26"), os.path.join(ROOT, "bench", "experiments", "mem21"),
           os.path.join(ROOT, "bench", "experiments", "mem20")):
    sys.path.insert(0, _p)

import liger_rope as LR   # noqa: E402  (mem26: Liger's source loader, launch and reference)

OURS = dict(bsz=4, seq_len=4096, n_heads=32, hd=128)
# Liger's llama4_rope (a kernel the rule was not tuned on): Llama-4 Scout's attention (40 q heads, 8 kv heads, head_dim
# 128) at 4 x 4096 tokens bf16; grid (tokens, heads), the freqs row of a position read by its 40 head programs of
# each of the 4 batches
LLAMA4 = dict(bsz=4, seq_len=4096, n_qh=40, n_kh=8, hd=128)
LIGER_LLAMA4 = os.environ.get("LIGER_LLAMA4", os.path.join(os.path.dirname(LR.LIGER_ROPE), "llama4_rope.py"))


def parse_col(spec: str):
    """``[ROW/]TAG=KNOB[+EDIT..][@own]`` -> (row or None, tag, knob, edits, own); ROW: that row only."""
    tag, rest = spec.split("=", 1)
    only, _, tag = tag.rpartition("/")
    rest, _, flag = rest.partition("@")
    if flag not in ("", "own", "demote"):
        raise SystemExit(f"{spec}: @own or @demote")
    knob, *edits = rest.split("+")
    import variants as V
    for e in edits:
        V.split_edit(e)
    return only or None, tag, knob, edits, flag or None


# -- the two kernels --------------------------------------------------------------------------------------------

def ours_module(under: str, tag: str):
    """examples/kernels/memory_bound.py as a module of its own, under kernelc or Triton."""
    from bench.common import module_from_source, to_triton
    src = open(os.path.join(ROOT, "examples", "kernels", "memory_bound.py")).read()
    if under == "triton":
        src = to_triton(src)
    return module_from_source(src, f"ab27_mb_{re.sub(r'[^A-Za-z0-9]', '_', tag)}", filename="memory_bound.py",
                              prefix=f"ab27_{tag}_")


class Row:
    """One kernel at one shape: its modules, inputs, launch and reference."""

    def __init__(self, name, small=False, bsz=None, seq_len=None):
        self.name = name
        self.liger = name.startswith("liger")
        if self.liger:
            self.cos_bs = int(name[5:])
            self.shape = dict(bsz=4, seq_len=4, n_qh=4, n_kh=2, hd=16) if small else dict(LR.SHAPE)
            if self.cos_bs not in (1, self.shape["bsz"]) and not (bsz and not small):
                raise ValueError(f"{name}: cos_bs must be 1 or bsz")
        elif name == "ours":
            self.shape = dict(bsz=2, seq_len=5, n_heads=3, hd=12) if small else dict(OURS)
        elif name == "llama4":
            self.shape = dict(bsz=2, seq_len=3, n_qh=4, n_kh=2, hd=32) if small else dict(LLAMA4)
            if not os.path.exists(LIGER_LLAMA4):
                raise FileNotFoundError(f"{LIGER_LLAMA4} (LIGER_LLAMA4=...): not on this machine")
        else:
            raise ValueError(f"unknown row {name!r} (liger1, liger4, ours, llama4)")
        if not small:   # --bsz / --seq-len: the same kernel at another shape (cos/sin tables of other sizes)
            self.shape.update({k: v for k, v in (("bsz", bsz), ("seq_len", seq_len)) if v})
            if self.liger and self.cos_bs not in (1, self.shape["bsz"]):
                self.cos_bs = self.shape["bsz"]

    def module(self, under, tag):
        if self.name == "llama4":
            return LR.load_liger(LIGER_LLAMA4, under, tag)
        return LR.load_liger(LR.LIGER_ROPE, under, tag) if self.liger else ours_module(under, tag)

    def kernel(self, mod):
        return mod._llama4_rope_kernel if self.name == "llama4" else mod._triton_rope if self.liger else mod.rope_kernel

    @property
    def kname(self):
        return "_llama4_rope_kernel" if self.name == "llama4" else "_triton_rope" if self.liger else "rope_kernel"

    def inputs(self, torch, device, dtype=None):
        """(tensors rotated in place, cos, sin)"""
        s = self.shape
        if self.name == "llama4":   # freqs as llama4_rope_forward takes them: (seq, hd/2, 2) fp32, real and imaginary
            g = torch.Generator(device=device).manual_seed(0)
            q = torch.randn(s["bsz"], s["seq_len"], s["n_qh"], s["hd"], device=device, generator=g).to(dtype or torch.bfloat16)
            k = torch.randn(s["bsz"], s["seq_len"], s["n_kh"], s["hd"], device=device, generator=g).to(dtype or torch.bfloat16)
            pos = torch.arange(s["seq_len"], device=device, dtype=torch.float32)[:, None]
            inv = 500000.0 ** (-torch.arange(0, s["hd"], 2, device=device, dtype=torch.float32) / s["hd"])
            ang = pos * inv
            return (q, k), torch.stack([ang.cos(), ang.sin()], -1).contiguous(), None
        if self.liger:
            q, k, cos, sin = LR.inputs(torch, device, self.cos_bs, dtype=dtype, **s)
            return (q, k), cos, sin
        g = torch.Generator(device=device).manual_seed(0)
        q = torch.randn(s["bsz"], s["seq_len"], s["n_heads"], s["hd"], device=device, generator=g)
        q = q.to(dtype or torch.bfloat16)
        pos = torch.arange(s["seq_len"], device=device, dtype=torch.float32)[:, None] * \
            torch.arange(s["hd"] // 2, device=device, dtype=torch.float32)[None, :] * 1e-3
        return (q,), torch.cos(pos), torch.sin(pos)

    def run(self, mod, xs, cos, sin):
        if self.name == "llama4":   # Liger's host function: q, k contiguous in their dtype, freqs real: no copies
            mod.llama4_rope_forward(xs[0], xs[1], cos)
        elif self.liger:
            LR.run_once(mod, xs[0], xs[1], cos, sin)
        else:
            mod.rope(xs[0], cos, sin)

    def reference(self, torch, xs, cos, sin):
        if self.name == "llama4":   # (q_re + i q_im) * (f_re + i f_im) on interleaved pairs, float32
            def rot(x):
                x = x.float().reshape(*x.shape[:-1], -1, 2)
                fr, fi = cos[None, :, None, :, 0], cos[None, :, None, :, 1]
                out = torch.stack([x[..., 0] * fr - x[..., 1] * fi, x[..., 0] * fi + x[..., 1] * fr], -1)
                return out.reshape(*out.shape[:-2], -1)
            return rot(xs[0]), rot(xs[1])
        if self.liger:
            return LR.reference(torch, xs[0], xs[1], cos, sin)
        q = xs[0]
        h = q.shape[-1] // 2
        x1, x2 = q[..., :h].float(), q[..., h:].float()
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return (torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1),)

    def sig(self):
        """kernelc's signature, constexprs and warps at the row's launch (for --check)."""
        if self.name == "llama4":   # llama4_rope_forward's launch: BLOCK_SIZE 64, 4 warps for head_dim/2 = 64
            s = self.shape
            sig = dict(q_ptr="*bf16", k_ptr="*bf16", freqs_complex_ptr="*fp32", q_row_stride="i32",
                       k_row_stride="i32", q_head_stride="i32", k_head_stride="i32", freqs_row_stride="i32",
                       seq_len="i32", batch_size="i32", imag_sign="fp32")
            cx = dict(head_dim_half=s["hd"] // 2, n_q_heads=s["n_qh"], n_k_heads=s["n_kh"], BLOCK_SIZE=64)
            return sig, cx, 4, {n: 16 for n, t in sig.items() if t != "fp32" and n != "batch_size"}
        if self.liger:
            s = self.shape
            sig = dict(q_ptr="*bf16", q_row_stride="i32", k_ptr="*bf16", k_row_stride="i32", cos="*bf16",
                       cos_row_stride="i32", sin="*bf16", sin_row_stride="i32", sl="i32")
            np2 = LR._np2
            cx = dict(bs=s["bsz"], cos_bs=self.cos_bs, n_qh=s["n_qh"], n_kh=s["n_kh"], hd=s["hd"],
                      pad_n_qh=np2(s["n_qh"]), pad_n_kh=np2(s["n_kh"]), pad_hd=np2(s["hd"]),
                      BLOCK_SIZE=max(np2(s["n_qh"]), np2(s["n_kh"])), BACKWARD_PASS=False)
            return sig, cx, 4, {n: 16 for n in sig}
        import asm_matrix as A
        sig_s, cx, nw = A.CASES["rope_kernel"]
        sig = dict(p.split("=") for p in sig_s.split(","))
        return sig, cx, nw, {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}


# -- CPU: the columns' SASS ---------------------------------------------------------------------------------------

def check(rows, cols, out_path) -> int:
    from kernelc.compat import install
    install()
    import variants as V
    from bench.bench_memory_bound import _env
    from cubintools import instructions, inspect_cubin
    from kernelc.compiler.compiler import compile as kcompile
    out = {"liger": LR.LIGER_ROPE, "rows": {}}
    for rn in rows:
        row = Row(rn)
        sig, cx, nw, div = row.sig()
        res = out["rows"][rn] = {}
        mods = {}
        for only, tag, knob, edits, own in cols:
            if only not in (None, rn):
                continue
            mod = mods.setdefault(knob, row.module("kernelc", f"{rn}_{knob}"))
            with _env({"KERNELC_L2_REUSE": knob, "KERNELC_CACHE_DIR": tempfile.mkdtemp(prefix="ab27_cc_")}):
                ck = kcompile(row.kernel(mod), sig, cx, "sm_90a", nw, 3, divisibility=div)
            cubin = V.build(ck.asm["ptx"], "own", edits) if edits else ck.asm["cubin"]
            f = inspect_cubin(cubin).kernel(ck.name)
            ins = [f"{i.opcode} {i.operands}" for i in instructions(cubin)]
            body = [x for x in ins if not x.startswith("NOP")]
            res[tag] = {"knob": knob, "edits": edits, "own_cos": own, "regs": f.n_regs,
                        "instructions": len(body), "sass_sha1": hashlib.sha1("\n".join(body).encode()).hexdigest()[:12],
                        "ldg": [x for x in body if x.startswith("LDG")],
                        "uniform_policy_ops": sum(1 for x in body if re.match(r"U(MOV|SHF|LOP3)", x)),
                        "marked_loads": ck.asm["tir"].count("l2='evict_last'"),
                        "ptx_policy": [ln.strip() for ln in ck.asm["ptx"].split("\n") if "createpolicy" in ln]}
            if not edits:   # reassembled as an edited column is: the same SASS as kernelc's own build?
                re_ins = [f"{i.opcode} {i.operands}" for i in instructions(V.build(ck.asm["ptx"], "own", []))]
                res[tag]["reassembled_same_sass"] = [x for x in re_ins if not x.startswith("NOP")] == body
            print(f"{rn:7s} {tag:8s} regs {f.n_regs} instr {len(body)} sha {res[tag]['sass_sha1']} "
                  f"marked {res[tag]['marked_loads']} ldg {len(res[tag]['ldg'])}", flush=True)
    if out_path:
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "w") as f:
            json.dump(out, f, indent=1)
    return 0


# -- GPU ------------------------------------------------------------------------------------------------------

def main(argv) -> int:
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="liger1,ours")
    ap.add_argument("--col", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--row-seconds", type=float, default=0, help="stop a row's rounds (after 3) before this")
    ap.add_argument("--out", default=None)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bsz", type=int, default=None, help="every row at this batch size")
    ap.add_argument("--seq-len", type=int, default=None, help="every row at this sequence length")
    ap.add_argument("--cpu-smoke", action="store_true", help="CPU: the interpreters, host clock (no result)")
    a = ap.parse_args(argv)
    cols = [parse_col(c) for c in a.col]
    rows = a.rows.split(",")
    for rn in rows:
        if not any(t == "off" for r, t, *_ in cols if r in (None, rn)):
            raise SystemExit(f"{rn}: a column tagged 'off' is the x/off reference")
    if a.check:
        return check(rows, cols, a.out)
    import torch
    import variants as V
    from bench.bench_memory_bound import CONTROL, _built, _env, column_env, interleaved_round, log_ratio_ci
    device = "cuda"
    if a.cpu_smoke:
        os.environ["KERNELC_INTERPRET"] = os.environ["TRITON_INTERPRET"] = "1"
        device, interleaved_round = "cpu", LR._host_round
    out_path = a.out or os.path.join(os.environ.get("OUT", tempfile.gettempdir()), "ab27.json")
    root = tempfile.mkdtemp(prefix="ab27-")
    res = {"gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu smoke (not a result)",
           "liger": LR.LIGER_ROPE, "cols": a.col, "rows": []}

    def dump():
        with open(out_path + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(out_path + ".tmp", out_path)
    t0 = time.time()
    for rn in rows:
        t_row = time.time()
        row = {"row": rn, "builds": {}, "errs": {}, "rounds": []}
        res["rows"].append(row)
        try:
            R = Row(rn, small=a.cpu_smoke, bsz=a.bsz, seq_len=a.seq_len)
            row["shape"] = R.shape
            xs0, cos, sin = R.inputs(torch, device, dtype=torch.float32 if a.cpu_smoke else None)
            want = R.reference(torch, xs0, cos, sin)
            T = R.module("triton", f"{rn}_triton")
            impls = {}
            for only, tag, knob, edits, own in cols:
                if only not in (None, rn):
                    continue
                mod = R.module("kernelc", f"{rn}_{tag}")
                c, s = (cos.clone(), sin if sin is None else sin.clone()) if own else (cos, sin)
                dem = None
                if own == "demote" and not a.cpu_smoke:   # the interpreter has no inline PTX
                    try:   # a demote kernel that does not build or run drops the column, not the row
                        from demote import demote
                        dem = (lambda c=c, s=s: (demote(c), s is not None and demote(s)))
                        dem()
                        torch.cuda.synchronize()
                    except Exception as e:
                        row["errs"][tag] = f"demote failed: {type(e).__name__}: {str(e)[:200]}"
                        print(f"{rn}/{tag}: {row['errs'][tag]}", flush=True)
                        continue
                xs = [x.clone() for x in xs0]
                with _env(column_env(root, f"{rn}_{tag}", {"KERNELC_L2_REUSE": knob})):
                    R.run(mod, xs, c, s)   # compiles under the column's knob, a cache of its own
                ck = _built(mod).get(R.kname)   # None in the interpreter
                b = row["builds"][tag] = {"knob": knob, "edits": edits, "own_cos": own}
                if ck is not None:
                    b.update(regs=ck.n_regs, cache_hint_loads=len(re.findall(r"L2::cache_hint", ck.asm["ptx"])))
                if edits and not a.cpu_smoke:
                    b.update(V.load_build(R.kernel(mod), "own", edits))
                    xs = [x.clone() for x in xs0]
                    R.run(mod, xs, c, s)
                if device == "cuda":
                    torch.cuda.synchronize()
                row["errs"][tag] = max((x.float() - w).abs().max().item() for x, w in zip(xs, want))
                xb = [x.clone() for x in xs0]   # each column rotates its own copy in place, as Liger does
                impls[tag] = ((lambda mod=mod, xb=xb, c=c, s=s: R.run(mod, xb, c, s)) if dem is None else
                              (lambda mod=mod, xb=xb, c=c, s=s, dem=dem: (R.run(mod, xb, c, s), dem())))
            xs = [x.clone() for x in xs0]
            R.run(T, xs, cos, sin)
            row["errs"]["triton"] = max((x.float() - w).abs().max().item() for x, w in zip(xs, want))
            xt = [x.clone() for x in xs0]
            impls["triton"] = lambda: R.run(T, xt, cos, sin)
            impls[CONTROL] = impls["triton"]
            print(f"{rn}: builds {row['builds']} errs {row['errs']} ({time.time() - t0:.0f} s)", flush=True)
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
                if n not in ("off", CONTROL):
                    oci = log_ratio_ci([rd["log"][n] - rd["log"]["off"] for rd in rds])
                    row[f"{n}/off_ci95"] = [round(v, 5) for v in oci] if oci else None
            kc = [n for n in impls if n not in ("triton", CONTROL)]
            row["pairs_ci95"] = {f"{x}/{y}": [round(v, 5) for v in log_ratio_ci(
                [rd["log"][x] - rd["log"][y] for rd in rds])] for x in kc for y in kc if x != y and len(rds) >= 3}
            for n in impls:
                row[f"{n}/us"] = round(sorted(rd["ms"][n] for rd in rds)[len(rds) // 2] * 1e3, 2)
        except Exception as e:   # a failing row is reported; the next still runs
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        dump()
        summary(row)
    return 0


def summary(row):
    print(f"{row['row']}: {len(row['rounds'])} rounds" + (f"  ERROR {row['error']}" if "error" in row else ""),
          flush=True)
    for k in row:
        if k.endswith("/us"):
            n = k[:-3]
            print(f"  {n:16s} {row[k]:8.2f} us  x/Triton {row.get(f'{n}/triton_ci95')}"
                  f"  x/off {row.get(f'{n}/off_ci95')}", flush=True)
    for pr in ("ond/offd", "ond/on", "offd/off"):
        if pr in row.get("pairs_ci95", {}):
            print(f"  {pr:16s} {row['pairs_ci95'][pr]}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
