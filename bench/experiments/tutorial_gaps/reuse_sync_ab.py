"""``KERNELC_REUSE_SYNC=all`` against ``=needed`` in one process (a GPU is needed; issue 20).

    python3 bench/experiments/tutorial_gaps/reuse_sync_ab.py --tutorials DIR --cases m03:256:fp8:SPEC ... --out ab.json
    python3 bench/experiments/tutorial_gaps/reuse_sync_ab.py --summarize ab.json     # the verdict again, no GPU

The knob only changes compiled code, so both variants can live in one process: tutorial 03 is loaded once per
variant (its own module, its own ``@jit`` function and so its own in-memory kernel cache), and each copy is compiled
while ``KERNELC_REUSE_SYNC`` holds its value. Their PTX is kept (the counts of ``cp.async.wait_all``,
``cp.async.wait_group`` and ``fence.proxy.async`` say the two really differ). Then rounds in the order
all, needed, needed, all (per case) time each variant's GPU time with ``host_gpu_split.busy``'s pattern (L2 flush,
events around one call, issued behind a GPU sleep so that only GPU time is seen), ``--calls`` calls a visit, the
median call of a visit its reading. A round's ratio is its two ``all`` readings' mean over its two ``needed``
readings' mean (above 1: ``needed`` faster); adjacent visits share the host's and the GPU's state, which separate
processes do not (session 25's C2 request: 6% between repeats of one kernel across processes).

Verdict, fixed before the run: per case the median round ratio with its distribution-free 95% interval (order
statistics of the binomial); ``needed`` is *faster* at a case when the interval's lower end is above 1.000,
*slower* when its upper end is below 1.000, else *not shown*; overall *faster* only if faster at one case and slower
at none. ``--wait-pid`` waits (untimed) for another process (the request's correctness run) before the rounds.

Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VARIANTS = ("all", "needed")
ORDER = ("all", "needed", "needed", "all")
PTX_MARKS = ("cp.async.wait_all", "cp.async.wait_group", "fence.proxy.async", "bar.sync", "barrier.sync")


def median_interval(xs, conf=0.95):
    """(median, lo, hi): the median and the order statistics that hold it with probability >= conf (binomial,
    p = 1/2); with too few values for that, the whole range."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return (float("nan"),) * 3
    med = statistics.median(s)
    # largest k with P(Binom(n, 1/2) < k) <= (1 - conf) / 2: the interval [s[k-1], s[n-k]] (1-based)
    cdf, k = 0.0, 0
    for i in range(n + 1):
        p = math.comb(n, i) / 2 ** n
        if cdf + p > (1 - conf) / 2:
            break
        cdf += p
        k = i + 1
    if k == 0:
        return med, s[0], s[-1]
    return med, s[k - 1], s[n - k]


def verdict(ratios):
    med, lo, hi = median_interval(ratios)
    if lo > 1.0:
        v = "faster"
    elif hi < 1.0:
        v = "slower"
    else:
        v = "not shown"
    return {"rounds": len(ratios), "all_over_needed_median": med, "ci95": [lo, hi], "needed": v}


def summarize(out: dict) -> dict:
    """Per case: each variant's median reading (us), the round ratios' verdict; and the overall line."""
    cases = {}
    for case in out.get("cases", []):
        per = {v: [] for v in VARIANTS}
        ratios = []
        for rnd in out.get("rounds", []):
            vis = [x for x in rnd if x["case"] == case and "busy_us" in x]
            a = [x["busy_us"] for x in vis if x["variant"] == "all"]
            n = [x["busy_us"] for x in vis if x["variant"] == "needed"]
            per["all"] += a
            per["needed"] += n
            if a and n:
                ratios.append(statistics.fmean(a) / statistics.fmean(n))
        row = verdict(ratios) if ratios else {"rounds": 0, "needed": "no data"}
        row.update({f"{v}_us_median": (statistics.median(per[v]) if per[v] else None) for v in VARIANTS})
        vis = [x for rnd in out.get("rounds", []) for x in rnd if x["case"] == case and "busy_us" in x]
        row["covered_share"] = (sum(bool(x["covered"]) for x in vis) / len(vis)) if vis else None
        cases[case] = row
    vs = [r["needed"] for r in cases.values()]
    if not vs or "no data" in vs:
        overall = "no data"
    elif "slower" in vs:
        overall = "slower"
    elif "faster" in vs:
        overall = "faster"
    else:
        overall = "not shown"
    return {"cases": cases, "overall": overall}


def _new_ptx(tuner, before) -> str:
    """The PTX of the one kernel the tuner's function compiled since ``before`` (its cache's keys then)."""
    from kernelc.runtime.launcher import get_state
    new = [e for k, e in get_state(tuner.fn)["cache"].items() if k not in before]
    if len(new) != 1:
        raise RuntimeError(f"expected one new compiled kernel, found {len(new)}")
    return new[0].compiled.asm["ptx"]


def _alive(pid: int) -> bool:
    """The process runs (an exited child its shell has not reaped yet is a zombie: not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _busy(fn, calls, flush):
    """host_gpu_split.busy's pattern, returning every call's GPU time (us) and whether the host stayed ahead."""
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    torch.cuda.synchronize()
    hold_s = 3 * calls * max(one, 50e-6) + 5e-3
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    first = torch.cuda.Event()
    torch.cuda._sleep(int(hold_s * 2e9))
    first.record()
    for i in range(calls):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    covered = not first.query()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)], covered


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tutorials")
    ap.add_argument("--cases", nargs="+", default=[])
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--budget-s", type=float, default=30.0, help="stop starting rounds this long after the rounds began")
    ap.add_argument("--until", type=float, default=0.0, help="also stop starting rounds at this time.time()")
    ap.add_argument("--max-rounds", type=int, default=1000)
    ap.add_argument("--wait-pid", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--summarize", metavar="JSON", help="print the verdict of a finished run's file and exit")
    a = ap.parse_args(argv)
    if a.summarize:
        if a.summarize.endswith(".gz"):
            import gzip
            with gzip.open(a.summarize, "rt") as f:
                s = summarize(json.load(f))
        else:
            s = summarize(json.load(open(a.summarize)))
        _print(s)
        return 0
    if not (a.tutorials and a.cases and a.out):
        ap.error("--tutorials, --cases and --out are needed for a run")
    t_start = time.perf_counter()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    from kernelc.compat import install
    install()
    import torch
    import host_gpu_split as hg
    out = {"cases": a.cases, "calls": a.calls, "order": ORDER, "ptx": {}, "compile_s": {}, "rounds": []}
    built = {}
    for v in VARIANTS:
        os.environ["KERNELC_REUSE_SYNC"] = v
        cases = hg.Cases(a.tutorials)
        # the variant's own copy of the tutorial (a module of its own name: its own @jit function and kernel cache)
        cases._m03 = hg._load(os.path.join(a.tutorials, "03-matrix-multiplication.py"), f"t06s25_tut03_{v}",
                              stop_at="torch.manual_seed(0)")
        from kernelc.runtime.launcher import get_state
        for case in a.cases:
            before = set(get_state(cases._m03.matmul_kernel.fn)["cache"])
            t0 = time.perf_counter()
            fn, prepare, _ = cases.build(case)
            prepare()
            fn()
            torch.cuda.synchronize()
            out["compile_s"][f"{v} {case}"] = time.perf_counter() - t0
            try:
                ptx = _new_ptx(cases._m03.matmul_kernel, before)
                out["ptx"][f"{v} {case}"] = {m: ptx.count(m) for m in PTX_MARKS}
                out["ptx"][f"{v} {case}"]["chars"] = len(ptx)
            except Exception as e:  # noqa: BLE001 -- the timing still runs; "differ" then says unknown
                out["ptx"][f"{v} {case}"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            built[v, case] = (fn, prepare, cases._m03.matmul_kernel)
    os.environ.pop("KERNELC_REUSE_SYNC", None)
    for case in a.cases:
        pa, pn = out["ptx"][f"all {case}"], out["ptx"][f"needed {case}"]
        out.setdefault("differ", {})[case] = None if "error" in pa or "error" in pn else pa != pn
    compiles0 = {k: get_state(t.fn)["compiles"] for k, (_, _, t) in built.items()}
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    if a.wait_pid:
        t0 = time.perf_counter()
        while _alive(a.wait_pid) and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        out["waited_s"] = time.perf_counter() - t0
    out["setup_s"] = time.perf_counter() - t_start
    t_rounds = time.perf_counter()
    try:
        for r in range(a.max_rounds):
            if time.perf_counter() - t_rounds > a.budget_s or (a.until and time.time() > a.until):
                break
            rnd = []
            for case in a.cases:
                for v in ORDER:
                    fn, prepare, _ = built[v, case]
                    prepare()
                    times, covered = _busy(fn, a.calls, flush)
                    rnd.append({"case": case, "variant": v, "busy_us": statistics.median(times),
                                "mean_us": statistics.fmean(times), "covered": covered})
            out["rounds"].append(rnd)
    except Exception as e:  # noqa: BLE001 -- the rounds so far are still a result
        out["rounds_error"] = f"{type(e).__name__}: {e}"[:400]
    out["rounds_s"] = time.perf_counter() - t_rounds
    out["recompiled"] = {f"{v} {c}": get_state(t.fn)["compiles"] - compiles0[v, c] for (v, c), (_, _, t) in built.items()}
    out["summary"] = summarize(out)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    for k, p in out["ptx"].items():
        print(k[:80], {m: n for m, n in p.items() if n})
    print("recompiled during the rounds:", out["recompiled"])
    _print(out["summary"])
    return 0


def _print(s):
    for case, r in s["cases"].items():
        label = case.replace("BLOCK_SIZE_", "").replace("/GROUP_SIZE_M=8", "")
        if r["rounds"] == 0:
            print(f"{label}: no rounds")
            continue
        print(f"{label}: all {r['all_us_median']:.3f} us, needed {r['needed_us_median']:.3f} us; all/needed median "
              f"{r['all_over_needed_median']:.4f} [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}] over {r['rounds']} "
              f"rounds: needed {r['needed']}")
    print(f"overall: needed {s['overall']}")


if __name__ == "__main__":
    sys.exit(main())
