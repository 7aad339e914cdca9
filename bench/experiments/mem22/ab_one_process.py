"""bench_kernels' matmul_tma row from two source trees in ONE process, launches interleaved (issue 21's A/B).

Two processes of one tree read this ~0.2 ms GEMM 5-12% apart (s21 R2), so A/Bs made of one process per tree cannot
resolve 2%. Here both trees' kernelc packages are imported into the same process, one after the other: each tree's
modules (kernelc, examples, ...) are imported from its root and kept as a private copy of ``sys.modules``, which is
put back in place before that tree's launches (so anything a launch imports late comes from its own tree). Each tree
is loaded twice (two copies: separately imported packages, separately loaded CUDA modules) so its own A/A spread is
measured in the same rounds as the A/B. Slots per round: old#1, new#1, old#2, new#2, cuBLAS (torch.matmul) as the
control, rotated every two rounds and reversed every other round, so that each slot takes every position equally
often. A slot is ``rep`` launches of the tree's own wrapper ``matmul_tma(a, b, **config)`` between two CUDA events,
on the same operands for every slot; no synchronisation between the slots of a round (the GPU runs them back to
back), and a GPU spin (``torch.cuda._sleep``) before each round keeps the GPU busy while the host queues the first
launches. The host's enqueue time per call is recorded, to show the slots are GPU-bound.

Configs: ``--pin BMxBNxWxS`` (both trees at that config, no autotuning) and/or ``--auto`` (each tree's own
autotuner, in this process; its pick is recorded).

    python3 ab_one_process.py --old /tmp/pre21 --new $PWD --pin 128x128x4x3 --auto --out ab.json
    python3 ab_one_process.py --old /tmp/pre21 --new $PWD --check      # CPU: imports both trees, no launch

Ratios are speeds (old time / new time: > 1 means the new tree is faster), per round, summarised as the median and a
95% t interval of the mean of log ratios over the rounds.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import sys
import time

TREE_PACKAGES = ("kernelc", "examples", "kprof", "profiler", "analyzer", "cubintools", "bench")


def _tree_module(name: str) -> bool:
    return name.split(".")[0] in TREE_PACKAGES


def _purge() -> None:
    for m in [m for m in sys.modules if _tree_module(m)]:
        del sys.modules[m]


class Tree:
    """One tree's matmul_tma wrapper, imported into this process under the usual names with its modules kept apart.
    Only one tree is active at a time: its modules in ``sys.modules``, its root first on ``sys.path`` (kernelc
    imports its compiler lazily, at the first compile), its cache dir in the environment."""
    active = None

    def __init__(self, tag: str, root: str, cache_dir: str):
        self.tag, self.root, self.cache_dir = tag, os.path.abspath(root), cache_dir
        self.modules = {}
        self.activate()
        self.mod = importlib.import_module("examples.kernels.matmul_tma")
        self.check()

    def check(self) -> None:
        """Every module of the tree's packages now loaded comes from this tree's root."""
        for name, m in sys.modules.items():
            f = getattr(m, "__file__", None)
            if _tree_module(name) and f and not os.path.abspath(f).startswith(self.root + os.sep):
                raise RuntimeError(f"{self.tag}: {name} imported from {f}, not from {self.root}")

    def activate(self) -> None:
        if Tree.active is self:
            return
        if Tree.active is not None:
            Tree.active.deactivate()
        _purge()
        sys.modules.update(self.modules)
        sys.path.insert(0, self.root)
        importlib.invalidate_caches()
        os.environ["KERNELC_CACHE_DIR"] = self.cache_dir
        Tree.active = self

    def deactivate(self) -> None:
        self.modules = {m: v for m, v in sys.modules.items() if _tree_module(m)}
        sys.path.remove(self.root)
        _purge()
        Tree.active = None

    def call(self, config: dict):
        f = self.mod.matmul_tma
        return lambda a, b: f(a, b, **config)

    def picked(self):
        bc = self.mod.matmul_tma_autotuned.best_config
        return None if bc is None else {"kwargs": dict(bc.kwargs), "num_warps": bc.num_warps,
                                        "num_stages": bc.num_stages}


def _strip_other_trees() -> list:
    """sys.path entries that hold a kernelc package (PYTHONPATH, the current dir) would serve a tree's lazy imports
    from the wrong tree: take them out for the run."""
    gone = [p for p in sys.path if os.path.isfile(os.path.join(p or os.getcwd(), "kernelc", "__init__.py"))]
    for p in gone:
        sys.path.remove(p)
    return gone


def _ci(logs):
    n = len(logs)
    m = statistics.fmean(logs)
    if n < 2:
        return math.exp(m), math.exp(m), math.exp(m)
    t = 1.96 if n > 60 else {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 8: 2.36, 10: 2.26, 15: 2.14,
                             20: 2.09, 30: 2.05, 40: 2.02}.get(n, 2.0)
    h = t * statistics.stdev(logs) / math.sqrt(n)
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def summarise(rounds, a: str, b: str) -> dict:
    """Speed of b relative to a (time a / time b) per round: median, min, max, 95% interval of the mean."""
    r = [x[a] / x[b] for x in rounds]
    g, lo, hi = _ci([math.log(v) for v in r])
    return {"median": statistics.median(r), "min": min(r), "max": max(r), "geomean": g, "ci95": [lo, hi],
            "n": len(r)}


def run_config(label, slots, a, b, rounds, rep, torch, sleep_ms=2.0):
    """slots: [(name, tree or None, fn)] -> per-round ms per slot, with the host's enqueue ms per call."""
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    res_err = {}
    for name, tree, fn in slots:   # warm-up (compiles / autotunes) and a correctness check against cuBLAS
        if tree is not None:
            tree.activate()
        c = fn(a, b)
        torch.cuda.synchronize()
        if tree is not None:
            ref = torch.matmul(a, b).float()
            # relative to |c| + 1: 16-bit outputs of 4096-term dots differ from cuBLAS's by an ulp or two (0.8%)
            err = ((c.float() - ref).abs() / (ref.abs() + 1)).max().item()
            if not err < 0.03:
                raise RuntimeError(f"{label} {name}: max |c - cuBLAS| / (|cuBLAS| + 1) = {err}")
            res_err[name] = err
    per_round, host, orders = [], {n: [] for n, _, _ in slots}, []
    for r in range(rounds):
        # every slot in every position equally often (rotated, and reversed every other round)
        k = (r // 2) % len(slots)
        order = slots[k:] + slots[:k]
        order = order if r % 2 == 0 else order[::-1]
        # the GPU busy while the host queues the round's first launches: without it the first slot's start event
        # fires on an idle GPU and its time takes in the host's first call (R1 of session 22: the slot that came
        # first every other round read 2-3% slower than its own copy elsewhere in the round)
        torch.cuda._sleep(int(sleep_ms * 2e6))
        marks = []
        for name, tree, fn in order:
            if tree is not None:
                tree.activate()
            s, e = ev(), ev()
            h0 = time.perf_counter()
            s.record()
            for _ in range(rep):
                fn(a, b)
            e.record()
            host[name].append((time.perf_counter() - h0) * 1e3 / rep)
            marks.append((name, s, e))
        torch.cuda.synchronize()
        per_round.append({n: s.elapsed_time(e) / rep for n, s, e in marks})
        orders.append([n for n, _, _ in marks])
    return per_round, {n: statistics.median(v) for n, v in host.items()}, res_err, orders


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the commit before the work (766f1cd's tree)")
    ap.add_argument("--new", required=True)
    ap.add_argument("--tree", action="append", default=[],
                    help="TAG=ROOT: one more tree (a patched copy), timed against old as new is")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--pin", action="append", default=[], help="BMxBNxWARPSxSTAGES, e.g. 128x128x4x3")
    ap.add_argument("--auto", action="store_true", help="also each tree's autotuned wrapper")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--rep", type=int, default=20)
    ap.add_argument("--sleep-ms", type=float, default=2.0, help="GPU spin before each round (at ~2 GHz)")
    ap.add_argument("--sets", type=int, default=1, help="operand sets (fresh allocations), each timed in turn")
    ap.add_argument("--cache", default=os.environ.get("TMPDIR", "/tmp"), help="parent of the per-tree caches")
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true", help="import both trees twice, no GPU")
    args = ap.parse_args(argv)
    import torch   # shared by both trees: imported before either
    print("taken off sys.path:", _strip_other_trees())
    _purge()
    trees = []
    for i in (1, 2):
        for tag, root in [("old", args.old), ("new", args.new)] + [tuple(x.split("=", 1)) for x in args.tree]:
            # one cache per tree (copy #2 reads what copy #1 wrote: the same cubin, loaded again)
            trees.append(Tree(f"{tag}#{i}", root, os.path.join(args.cache, f"kc_ab1p_{tag}")))
    for t in trees:
        t.activate()
        ver = importlib.import_module("kernelc.compiler.artifact").COMPILER_VERSION
        t.check()
        print(f"{t.tag}: {t.mod.__file__} (COMPILER_VERSION {ver})", flush=True)
    if len({id(t.mod) for t in trees}) != len(trees) or trees[0].mod.matmul_tma is trees[len(trees) // 2].mod.matmul_tma:
        raise RuntimeError("the four copies are not separate imports")
    if args.check:   # each copy compiles the pinned configs for sm_90a through its own (lazily imported) compiler
        import hashlib
        for p in args.pin:
            bm, bn, w, s = (int(v) for v in p.split("x"))
            for t in trees:
                t.activate()
                kc = importlib.import_module("kernelc")
                d = {"bfloat16": "bf16", "float16": "fp16"}[args.dtype]
                sig = {"a_desc": f"tensordesc<{d}[{bm}, 64]>", "b_desc": f"tensordesc<{d}[64, {bn}]>",
                       "c_desc": f"tensordesc<{d}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
                ck = kc.compile(t.mod.matmul_tma_kernel, sig, dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64,
                                GROUP_SIZE_M=8), target="sm_90a", num_warps=w, num_stages=s,
                                divisibility={n: 16 for n in sig})
                t.check()
                print(f"{t.tag} {p}: {ck.n_regs} registers, PTX sha1 {hashlib.sha1(ck.asm['ptx'].encode()).hexdigest()[:12]}")
        return 0

    extra = [x.split("=", 1)[0] for x in args.tree]
    dt = getattr(torch, args.dtype)
    configs = []
    for p in args.pin:
        bm, bn, w, s = (int(v) for v in p.split("x"))
        configs.append((f"pinned {bm}x{bn} w{w} s{s}", dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64,
                                                              GROUP_SIZE_M=8, num_warps=w, num_stages=s)))
    if args.auto:
        configs.append(("autotuned", {}))
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "n": args.n, "dtype": args.dtype,
           "rounds": args.rounds, "rep": args.rep, "old": args.old, "new": args.new, "results": []}
    t0 = time.time()
    for si in range(args.sets):
        torch.manual_seed(si)
        a = torch.randn(args.n, args.n, device="cuda", dtype=dt)
        b = torch.randn(args.n, args.n, device="cuda", dtype=dt)
        for label, cfg in configs:
            slots = [(t.tag, t, t.call(cfg)) for t in trees]
            slots.append(("cublas", None, lambda x, y: torch.matmul(x, y)))
            per_round, host, errs, orders = run_config(label, slots, a, b, args.rounds, args.rep, torch, args.sleep_ms)
            med = {n: statistics.median(r[n] for r in per_round) for n, _, _ in slots}
            res = {"set": si, "config": label, "ms_median": med, "host_ms_per_call": host, "rel_err_vs_cublas": errs,
                   "picked": {t.tag: t.picked() for t in trees} if not cfg else None,
                   "new_vs_old": summarise([{"o": r["old#1"] + r["old#2"], "n": r["new#1"] + r["new#2"]}
                                            for r in per_round], "o", "n"),
                   "old_aa": summarise(per_round, "old#1", "old#2"),
                   "new_aa": summarise(per_round, "new#1", "new#2"),
                   "new1_vs_old1": summarise(per_round, "old#1", "new#1"),
                   "new2_vs_old2": summarise(per_round, "old#2", "new#2"),
                   **{f"{tag}_vs_old": summarise([{"o": r["old#1"] + r["old#2"], "n": r[f"{tag}#1"] + r[f"{tag}#2"]}
                                                  for r in per_round], "o", "n")
                      for tag in extra},
                   **{f"{tag}_vs_new": summarise([{"o": r["new#1"] + r["new#2"], "n": r[f"{tag}#1"] + r[f"{tag}#2"]}
                                                  for r in per_round], "o", "n")
                      for tag in extra},
                   **{f"{tag}_aa": summarise(per_round, f"{tag}#1", f"{tag}#2") for tag in extra},
                   "rounds_ms": per_round, "orders": orders}
            for t in trees:
                t.activate()
                t.check()
            out["results"].append(res)
            nv = res["new_vs_old"]
            print(f"set {si} {label}: ms old {med['old#1']:.4f}/{med['old#2']:.4f} new {med['new#1']:.4f}/"
                  f"{med['new#2']:.4f} cuBLAS {med['cublas']:.4f}; new/old speed {nv['geomean']:.4f} "
                  f"[{nv['ci95'][0]:.4f}, {nv['ci95'][1]:.4f}] (rounds {nv['min']:.3f}-{nv['max']:.3f}); "
                  f"A/A old {res['old_aa']['geomean']:.4f} [{res['old_aa']['ci95'][0]:.4f}, "
                  f"{res['old_aa']['ci95'][1]:.4f}] new {res['new_aa']['geomean']:.4f} "
                  f"[{res['new_aa']['ci95'][0]:.4f}, {res['new_aa']['ci95'][1]:.4f}]; host ms/call "
                  + " ".join(f"{k} {v:.3f}" for k, v in host.items())
                  + (f"; picked {res['picked']}" if res["picked"] else "") + f" ({time.time() - t0:.0f}s)",
                  flush=True)
            for tag in extra:
                x, y, z = res[f"{tag}_vs_old"], res[f"{tag}_vs_new"], res[f"{tag}_aa"]
                print(f"    {tag}: ms {med[tag + '#1']:.4f}/{med[tag + '#2']:.4f}; over old {x['geomean']:.4f} "
                      f"[{x['ci95'][0]:.4f}, {x['ci95'][1]:.4f}], over new {y['geomean']:.4f} [{y['ci95'][0]:.4f}, "
                      f"{y['ci95'][1]:.4f}]; A/A {z['geomean']:.4f} [{z['ci95'][0]:.4f}, {z['ci95'][1]:.4f}]", flush=True)
            if args.out:
                json.dump(out, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
