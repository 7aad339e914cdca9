"""One compile knob, two values, timed in one process over tutorial cases (a GPU is needed for the timing; issue 20).

    python3 bench/experiments/tutorial_gaps/reuse_sync_ab.py --tutorials DIR --cases m03:256:fp8:SPEC ... --out ab.json
    python3 bench/experiments/tutorial_gaps/reuse_sync_ab.py --knob TMA_ELECT --values tid elect --tutorials DIR \
        --cases p09:descriptor:8192:8192:512:SPEC --out ab.json
    python3 bench/experiments/tutorial_gaps/reuse_sync_ab.py --cpu-ptx --tutorials DIR --cases ... [--out F]  # no GPU
    python3 bench/experiments/tutorial_gaps/reuse_sync_ab.py --summarize ab.json     # the verdict again, no GPU

``--knob`` names a ``KERNELC_*`` compile knob (default ``REUSE_SYNC``) and ``--values A B`` its two values (default
``all needed``). A compile knob only changes compiled code, so both values can live in one process: every tutorial a
case needs is loaded once per value (its own module, its own ``@jit`` functions and so its own in-memory kernel
cache), and each copy is compiled while the knob holds its value. The cases are ``host_gpu_split.py``'s (``m03``,
``g08`` held to one config, ``b06``, ``p09``, ...). The PTX of every kernel a case compiled is kept as counts of
``PTX_MARKS`` (they say whether the two copies really differ: ``differ``). Then rounds in the order A, B, B, A (per
case) time each value's GPU time with ``host_gpu_split.busy``'s pattern (L2 flush, events around one call, issued
behind a GPU sleep so that only GPU time is seen), ``--calls`` calls a visit, the median call of a visit its reading.
A round's ratio is its two A readings' mean over its two B readings' mean (above 1: B faster); adjacent visits share
the host's and the GPU's state, which separate processes do not (session 25's C2 request: 6% between repeats of one
kernel across processes).

Verdict, fixed before the run: per case the median round ratio with its distribution-free 95% interval (order
statistics of the binomial); B is *faster* at a case when the interval's lower end is above 1.000, *slower* when its
upper end is below 1.000, else *not shown*; overall *faster* only if faster at one case and slower at none. The
summary's keys name the values (``all_over_needed_median``, ``needed``: B's verdict). ``--wait-pid`` waits (untimed)
for another process (the request's correctness run) before the rounds.

``--cpu-ptx`` needs no GPU: each case's timed kernels (``commit_compare.py``'s jobs at the case's config) are compiled
for sm_90a under each value in this process, and the same counts say whether the two differ.

Nothing here is a test.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VARIANTS = ("all", "needed")
ORDER = ("all", "needed", "needed", "all")
PTX_MARKS = ("cp.async.wait_all", "cp.async.wait_group", "fence.proxy.async", "bar.sync", "barrier.sync",
             "elect.sync", "cp.async.bulk.tensor")
# 09's wrapper -> the kernel it launches
P09_KERNELS = {"naive": "matmul_kernel", "persistent": "matmul_kernel_persistent",
               "descriptor": "matmul_kernel_descriptor_persistent"}


def order(values):
    a, b = values
    return (a, b, b, a)


def knob_env(name: str) -> str:
    return name if name.startswith("KERNELC_") else "KERNELC_" + name


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


def verdict(ratios, values=VARIANTS):
    a, b = values
    med, lo, hi = median_interval(ratios)
    if lo > 1.0:
        v = "faster"
    elif hi < 1.0:
        v = "slower"
    else:
        v = "not shown"
    return {"rounds": len(ratios), f"{a}_over_{b}_median": med, "ci95": [lo, hi], b: v, "verdict": v}


def summarize(out: dict) -> dict:
    """Per case: each value's median reading (us), the round ratios' verdict on B; and the overall line."""
    values = tuple(out.get("values", VARIANTS))
    a_, b_ = values
    cases = {}
    for case in out.get("cases", []):
        per = {v: [] for v in values}
        ratios = []
        for rnd in out.get("rounds", []):
            vis = [x for x in rnd if x["case"] == case and "busy_us" in x]
            a = [x["busy_us"] for x in vis if x["variant"] == a_]
            n = [x["busy_us"] for x in vis if x["variant"] == b_]
            per[a_] += a
            per[b_] += n
            if a and n:
                ratios.append(statistics.fmean(a) / statistics.fmean(n))
        row = verdict(ratios, values) if ratios else {"rounds": 0, b_: "no data", "verdict": "no data"}
        row.update({f"{v}_us_median": (statistics.median(per[v]) if per[v] else None) for v in values})
        vis = [x for rnd in out.get("rounds", []) for x in rnd if x["case"] == case and "busy_us" in x]
        row["covered_share"] = (sum(bool(x["covered"]) for x in vis) / len(vis)) if vis else None
        cases[case] = row
    vs = [r["verdict"] for r in cases.values()]
    if not vs or "no data" in vs:
        overall = "no data"
    elif "slower" in vs:
        overall = "slower"
    elif "faster" in vs:
        overall = "faster"
    else:
        overall = "not shown"
    return {"cases": cases, "overall": overall, "values": list(values), "knob": out.get("knob", "KERNELC_REUSE_SYNC")}


def ptx_counts(ptx: str) -> dict:
    c = {m: ptx.count(m) for m in PTX_MARKS}
    c["chars"] = len(ptx)
    return c


def differ(counts: dict, values) -> dict:
    """Per case: do the two values' PTX differ (None where a side has an error or no kernel)."""
    a, b = values
    out = {}
    for case, per in counts.items():
        pa, pb = per.get(a), per.get(b)
        if not pa or not pb or any("error" in k for k in (pa, pb)):
            out[case] = None
        else:
            out[case] = pa != pb
    return out


# --- the CPU check: each case's timed kernels compiled under both values ---------------------------------------

def _spec_ok(job, spec) -> bool:
    want = dict(kv.split("=", 1) for kv in spec.split("/"))
    have = {k: str(v) for k, v in job["cx"].items()}
    have.update(w=str(job["num_warps"]), s=str(job["num_stages"]))
    return all(have.get(k) == v for k, v in want.items())


def cpu_jobs(case: str):
    """commit_compare.py's jobs (the tutorial kernels as the H200 runs get them) for the kernels ``case`` times."""
    sys.path.insert(0, HERE)
    import commit_compare as cc
    kind, *a = case.split(":")
    if kind == "m03":
        jobs = [j for j in cc.jobs_03() if j["label"].split()[0] == a[1] and _spec_ok(j, a[2])]
        want = 1
    elif kind == "g08":
        fn = {"triton": "grouped_matmul_kernel", "triton-tma": "grouped_matmul_tma_kernel"}[a[1]]
        jobs = [j for j in cc.jobs_sweep("08") if j["fn"] == fn and _spec_ok(j, a[2])]
        want = 1
    elif kind == "b06":
        jobs = [j for j in cc.jobs_06() if j["label"] in (f"bwd d{a[0]}", f"bwd_pre d{a[0]}")]
        want = 2
    elif kind == "p09":
        fn = P09_KERNELS[a[0]]
        jobs = [j for j in cc.jobs_sweep("09") if j["fn"] == fn and _spec_ok(j, a[4])
                and not j["cx"].get("WARP_SPECIALIZE")]
        want = 1
    else:
        raise ValueError(f"no CPU jobs for case kind {kind!r}")
    if len(jobs) != want:
        raise ValueError(f"{case}: {len(jobs)} compile jobs match, expected {want}")
    return jobs


def cpu_ptx(tutorials, cases, knob: str, values, modules=None) -> dict:
    """{case: {value: {kernel label: counts}}} compiled in this process with the knob set per value; ``modules``:
    {tutorial number: a module holding its kernels} in place of the tutorial files (tests)."""
    sys.path.insert(0, HERE)
    import commit_compare as cc
    import tutorial_sweep as ts
    from kernelc.compiler.compiler import compile as kcompile
    import importlib.util
    mods = dict(modules or {})

    def mod(tut):
        if tut not in mods:
            from kernelc.compat import install
            install()   # the kernel file says ``import triton``
            path = os.path.join(tempfile.mkdtemp(prefix="knob_ab_"), f"ab26_k{tut}.py")
            with open(path, "w") as f:
                f.write(ts.kernel_module(os.path.join(tutorials, cc.FILES[tut])))
            spec = importlib.util.spec_from_file_location(f"ab26_k{tut}", path)
            m = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = m
            spec.loader.exec_module(m)
            mods[tut] = m
        return mods[tut]

    env = knob_env(knob)
    old = os.environ.get(env)
    out = {}
    try:
        for case in cases:
            jobs = cpu_jobs(case)
            for v in values:
                os.environ[env] = v
                per = {}
                for j in jobs:
                    try:
                        ck = kcompile(getattr(mod(j["tut"]), j["fn"]), j["sig"], j["cx"], "sm_90a", j["num_warps"],
                                      j["num_stages"], divisibility=j["div"], equal_to_1=tuple(j["eq1"]))
                        per[j["label"]] = ptx_counts(ck.asm["ptx"])
                    except Exception as e:  # noqa: BLE001 -- recorded; differ() then says unknown
                        per[j["label"]] = {"error": f"{type(e).__name__}: {e}"[:300]}
                out.setdefault(case, {})[v] = per
    finally:
        if old is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = old
    return out


# --- the GPU run ---------------------------------------------------------------------------------------------------

def _entries():
    """{(id(fn), key): (kernel name, compiled)} of every kernel compiled in this process so far."""
    from kernelc.runtime.launcher import _with_state, get_state
    return {(id(fn), k): e for fn in list(_with_state) for k, e in get_state(fn)["cache"].items()}


@contextlib.contextmanager
def _tagged_loads(hg, tag):
    """host_gpu_split's loaders name their modules; here each value gets its own copy (name + tag), so its @jit
    functions, autotuners and kernel caches are its own."""
    orig = hg._load
    hg._load = lambda path, name, **kw: orig(path, f"{name}_{tag}", **kw)
    try:
        yield
    finally:
        hg._load = orig


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
    ap.add_argument("--knob", default="REUSE_SYNC", help="a KERNELC_* compile knob (the prefix may be left out)")
    ap.add_argument("--values", nargs=2, default=list(VARIANTS), metavar=("A", "B"))
    ap.add_argument("--tutorials")
    ap.add_argument("--cases", nargs="+", default=[])
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--budget-s", type=float, default=30.0, help="stop starting rounds this long after the rounds began")
    ap.add_argument("--until", type=float, default=0.0, help="also stop starting rounds at this time.time()")
    ap.add_argument("--max-rounds", type=int, default=1000)
    ap.add_argument("--wait-pid", type=int, default=0)
    ap.add_argument("--cpu-ptx", action="store_true", help="compile each case's kernels under both values, no GPU")
    ap.add_argument("--out")
    ap.add_argument("--summarize", metavar="JSON", help="print the verdict of a finished run's file and exit")
    a = ap.parse_args(argv)
    values = tuple(a.values)
    env = knob_env(a.knob)
    if a.summarize:
        if a.summarize.endswith(".gz"):
            import gzip
            with gzip.open(a.summarize, "rt") as f:
                s = summarize(json.load(f))
        else:
            s = summarize(json.load(open(a.summarize)))
        _print(s)
        return 0
    if not (a.tutorials and a.cases):
        ap.error("--tutorials and --cases are needed")
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    if a.cpu_ptx:
        counts = cpu_ptx(a.tutorials, a.cases, env, values)
        agg = {c: {v: _total(per) for v, per in d.items()} for c, d in counts.items()}
        res = {"knob": env, "values": list(values), "cases": a.cases, "ptx": counts, "differ": differ(agg, values)}
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)
        for c in a.cases:
            print(f"{c[:90]}: differ {res['differ'][c]}")
            for v in values:
                print(f"  {v}: {_marks(agg[c][v])}")
        return 0 if all(res["differ"].values()) else 3
    if not a.out:
        ap.error("--out is needed for a run")
    t_start = time.perf_counter()
    from kernelc.compat import install
    install()
    import torch
    import host_gpu_split as hg
    out = {"knob": env, "values": list(values), "cases": a.cases, "calls": a.calls, "order": order(values),
           "ptx": {}, "kernels": {}, "compile_s": {}, "rounds": []}
    built = {}
    old = os.environ.get(env)
    for v in values:
        os.environ[env] = v
        tag = "ab_" + "".join(ch if ch.isalnum() else "_" for ch in v)
        with _tagged_loads(hg, tag):
            cases = hg.Cases(a.tutorials)
            for case in a.cases:
                before = _entries()
                t0 = time.perf_counter()
                try:
                    fn, prepare, _ = cases.build(case)
                    prepare()
                    fn()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 -- the other cases still run
                    out["ptx"][f"{v} {case}"] = {"error": f"{type(e).__name__}: {e}"[:300]}
                    continue
                out["compile_s"][f"{v} {case}"] = time.perf_counter() - t0
                new = {k: e for k, e in _entries().items() if k not in before}
                per = {}
                for e in new.values():
                    try:
                        per[e.compiled.name] = ptx_counts(e.compiled.asm["ptx"])
                    except Exception as err:  # noqa: BLE001 -- an entry without PTX: differ then says unknown
                        per[getattr(getattr(e, "compiled", None), "name", "?")] = {"error": repr(err)[:200]}
                out["kernels"][f"{v} {case}"] = per
                out["ptx"][f"{v} {case}"] = _total(per) if per else {"error": "no kernel compiled"}
                built[v, case] = (fn, prepare, {k: e for k, e in new.items()})
    if old is None:
        os.environ.pop(env, None)
    else:
        os.environ[env] = old
    out["differ"] = differ({c: {v: out["ptx"].get(f"{v} {c}") for v in values} for c in a.cases}, values)
    from kernelc.runtime.launcher import _with_state, get_state
    n_compiles = lambda: sum(get_state(f)["compiles"] for f in list(_with_state))  # noqa: E731
    compiles0 = n_compiles()
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    if a.wait_pid:
        t0 = time.perf_counter()
        while _alive(a.wait_pid) and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        out["waited_s"] = time.perf_counter() - t0
    out["setup_s"] = time.perf_counter() - t_start
    cases_ok = [c for c in a.cases if all((v, c) in built for v in values)]
    t_rounds = time.perf_counter()
    try:
        for r in range(a.max_rounds):
            if time.perf_counter() - t_rounds > a.budget_s or (a.until and time.time() > a.until):
                break
            rnd = []
            for case in cases_ok:
                for v in order(values):
                    fn, prepare, _ = built[v, case]
                    prepare()
                    times, covered = _busy(fn, a.calls, flush)
                    rnd.append({"case": case, "variant": v, "busy_us": statistics.median(times),
                                "mean_us": statistics.fmean(times), "covered": covered})
            out["rounds"].append(rnd)
    except Exception as e:  # noqa: BLE001 -- the rounds so far are still a result
        out["rounds_error"] = f"{type(e).__name__}: {e}"[:400]
    out["rounds_s"] = time.perf_counter() - t_rounds
    # a compile during the rounds would mean a value's copy ran code it was not built with (or tuned anew)
    out["recompiled"] = n_compiles() - compiles0
    out["summary"] = summarize(out)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    for k, p in out["ptx"].items():
        print(k[:80], _marks(p))
    print("differ:", out["differ"])
    print("compiles during the rounds:", out["recompiled"])
    _print(out["summary"])
    return 0


def _total(per: dict) -> dict:
    """A case's counts summed over its kernels (an error on any kernel: the error)."""
    errs = [p["error"] for p in per.values() if "error" in p]
    if errs:
        return {"error": errs[0]}
    tot = {}
    for p in per.values():
        for m, n in p.items():
            tot[m] = tot.get(m, 0) + n
    return tot


def _marks(p: dict) -> dict:
    return {m: n for m, n in p.items() if n}


def _print(s):
    values = s.get("values", VARIANTS)
    a_, b_ = values
    print(f"{s.get('knob', 'KERNELC_REUSE_SYNC')}: {a_} over {b_}")
    for case, r in s["cases"].items():
        label = case.replace("BLOCK_SIZE_", "").replace("/GROUP_SIZE_M=8", "")
        if r["rounds"] == 0:
            print(f"{label}: no rounds")
            continue
        print(f"{label}: {a_} {r[a_ + '_us_median']:.3f} us, {b_} {r[b_ + '_us_median']:.3f} us; {a_}/{b_} median "
              f"{r[a_ + '_over_' + b_ + '_median']:.4f} [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}] over "
              f"{r['rounds']} rounds: {b_} {r['verdict']}")
    print(f"overall: {b_} {s['overall']}")


if __name__ == "__main__":
    sys.exit(main())
