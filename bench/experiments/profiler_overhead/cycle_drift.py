"""Issue 23, session 25: does a profiler's per-launch cost grow with the number of its start/stop cycles in one
process, and is it kprof's code or CUPTI's?  (C2, 2026-11-29: in the swap design kprof/Proton rose from 0.98 to
1.05 between the encoder run's halves, kprof's own excess over the control growing ~linearly with its ~600
start/finalize cycles while Proton's stayed flat; tiny likewise, 1.6 -> 3.3 us a launch over 296 cycles.)

One process, one ``--variant``, ``--cycles`` cycles on the tiny loop (1-element ``torch.add``, launch-bound) or the
encoder; a cycle is the variant's start, untimed settle launches and a synchronize, ``--seg`` timed steps closed by
a synchronize, its stop -- and next to it the same settle and timed steps with nothing on (the control), the two in
alternating order.  Variants:

* ``kprof``: ``profiler.start`` / ``profiler.finalize`` (a user profiling each epoch; CUPTI is never finalized:
  kprof unsubscribes at its stop);
* ``kprof-keepall``: ``kprof`` keeping every start's callbacks (and so every backend) referenced, as kprof did before
  session 25 bounded them to the last ``KEEPALIVE_STARTS`` starts;
* ``kprof-fin``: the same as ``kprof``, then ``cupti.finalize()`` (what the swap design does before each Proton start);
* ``kprof-fin-noprobe``: ``kprof-fin`` with kprof's lazy start not turning the launch API records on and off again to
  learn whether CUPTI can (known from the process's first start; patched here, kprof unchanged), and its stop not
  turning off records that are not on: on the tiny loop (no scope) the records are then never touched after the
  first cycle;
* ``kprof-onefin``: ``kprof``, with one ``cupti.finalize()`` after the stop of cycle ``--onefin-at`` (R1: right after
  a finalize the unprofiled launch cost more and kprof's launches ~3x more than before it): the cycles before and after
  it are summarized apart;
* ``kprof-proton``: ``kprof-fin``, then Proton started (``hook="triton"``), the settle steps run under it, and
  finalized (the swap design's sequence without Proton's timed part);
* ``bare`` / ``bare-fin``: kprof's CUPTI calls and nothing of kprof's Python: a no-op subscriber with the two
  graph-node resource callbacks, cupti-python's buffer callbacks then libcupti's own (``cupti_raw.RawBuffers``, a
  new one per cycle, as kprof's raw records mode), the kernel, memcpy and memset kinds, the launch API records on
  and off again (kprof's lazy start), and at the stop a synchronize, a forced flush, the API records off, the
  kinds off, unsubscribe (``-fin``: and ``cupti.finalize()``); ``bare-fin-noapi``: ``bare-fin`` without touching the
  launch API records (as Proton, which places launches by callbacks).

Kept per cycle: the timed steps' ns per step (profiled and control), the start's and stop's ns, the process's
thread count, RSS, kprof's ``_KEEPALIVE`` and ``cupti_raw.OUTSTANDING`` lengths; thread names every 50 cycles.
``--summary FILE...`` reads such files: per variant the growth of log(profiled / control) over the run (a least-
squares slope, per 100 cycles, with 2 standard errors), the first and last 100 cycles' median excess per step, and
how the counters moved.  ``--fake`` (CPU): tests/profiler/fake_cupti.py stands in for cupti-python and libcupti, so
every path runs without a GPU (no number from it means anything).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

VARIANTS = ("kprof", "kprof-keepall", "kprof-fin", "kprof-fin-noprobe", "kprof-onefin", "kprof-proton", "bare",
            "bare-fin", "bare-fin-noapi")


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _thread_names():
    out = collections.Counter()
    try:
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    out[f.read().strip()] += 1
            except OSError:
                pass
    except OSError:
        pass
    return dict(out)


def _rss_kb():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError):
        return -1


def _install_fake():
    from _pytest.monkeypatch import MonkeyPatch
    from tests.profiler import fake_cupti
    mp = MonkeyPatch()
    os.environ["KPROF_BACKEND"] = "auto"
    fake = fake_cupti.install(mp, fake_cupti.FakeCupti())
    from profiler.backends import cupti as backend_mod
    mp.setattr(backend_mod, "_cuda_initialized", lambda: True)
    fake_cupti.install_libcupti(mp, fake)
    fake.finalize = lambda: None
    return fake


class Bare:
    """kprof's CUPTI calls at a start and a stop, without kprof (see the module notes)."""

    def __init__(self, finalize: bool, api: bool = True):
        from cupti import cupti

        from profiler.backends import cupti_raw
        from profiler.backends.cupti import launch_cbids
        self.c, self.raw_mod, self.fin = cupti, cupti_raw, finalize
        self.cbids = launch_cbids(cupti) if api else []
        self.keep = []

    def start(self):
        c = self.c
        cb = lambda userdata, domain, cbid, data: None   # noqa: E731
        bufs = (lambda: (8 << 20, 0), lambda activities: None)
        self.keep.append((cb, bufs))   # CUPTI may call them later: kept, as kprof keeps its own
        self.sub = c.subscribe(cb, None)
        c.activity_register_callbacks(*bufs)
        lib = self.raw_mod.find_libcupti()
        self.raw = None
        if lib is not None:
            raw = self.raw_mod.RawBuffers(lib, 8 << 20, 64 << 20, lambda: raw.take())
            self.keep.append(raw)
            raw.register()
            self.raw = raw
        K = c.ActivityKind
        self.kinds = [K.CONCURRENT_KERNEL, K.MEMCPY, K.MEMSET]
        for k in self.kinds:
            c.activity_enable(k)
        for on in (1, 0):   # kprof's lazy start: whether CUPTI can, then off until a scope
            for cbid in self.cbids:
                try:
                    c.activity_enable_driver_api(cbid, on)
                except Exception:
                    pass
        R = c.CallbackIdResource
        for cbid in (R.GRAPHNODE_CREATED, R.GRAPHNODE_CLONED):
            try:
                c.enable_callback(1, self.sub, c.CallbackDomain.RESOURCE, int(cbid))
            except Exception:
                pass

    def stop(self, sync):
        c = self.c
        sync()
        c.activity_flush_all(1)
        if self.raw is not None:
            self.raw.take()
        for cbid in self.cbids:
            try:
                c.activity_enable_driver_api(cbid, 0)
            except Exception:
                pass
        for k in self.kinds:
            c.activity_disable(k)
        c.unsubscribe(self.sub)
        if self.fin:
            c.finalize()


def run(args) -> dict:
    if args.fake:
        _install_fake()
    import torch
    cuda = torch.cuda.is_available() and not args.fake
    dev = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    import profiler
    from bench.reconcile_profilers import Encoder, Tiny, _step_seconds
    w = (Tiny if args.workload == "tiny" else Encoder)(dev, profiler.scope)
    for _ in range(args.warmup):
        w.step()
    sync()
    step_s = _step_seconds(w, sync)
    seg = max(1, int(round(args.seg_ms / 1e3 / step_s)))
    settle = max(1, int(round(args.settle_ms / 1e3 / step_s)))
    bare = Bare(args.variant.startswith("bare-fin"), api=not args.variant.endswith("noapi")) \
        if args.variant.startswith("bare") else None
    fin = proton = None
    if args.variant in ("kprof-fin", "kprof-fin-noprobe", "kprof-proton"):
        from cupti import cupti as _c
        fin = _c.finalize
    if args.variant == "kprof-proton":
        import triton.profiler as proton
    onefin = None
    if args.variant == "kprof-onefin":
        from cupti import cupti as _c1
        onefin = _c1.finalize
    from profiler.backends import cupti as kc
    from profiler.backends import cupti_raw
    if args.variant == "kprof-keepall":
        kc._KEEPALIVE = []   # unbounded, as before session 25
    if args.variant == "kprof-fin-noprobe":
        orig, known = kc.CuptiBackend._enable_api_records, []

        def api_records(self, on):
            if on and not self.running and known:   # a start's probe, answered by the first start's
                return known[0]
            if not on and not self.api_on:   # nothing on to turn off
                return True
            ok = orig(self, on)
            if on and not known:
                known.append(ok)
            return ok
        kc.CuptiBackend._enable_api_records = api_records
    out = os.path.join(args.outdir, f"cycle_{args.variant}_prof")

    def result(rows, names):
        return {"variant": args.variant, "workload": args.workload, "device": dev, "fake": bool(args.fake),
                "seg_steps": seg, "settle_steps": settle, "step_s": step_s, "cycles": len(rows), "rows": rows,
                "thread_names": names, "torch": torch.__version__,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    perf = time.perf_counter_ns
    rows, names = [], {}
    deadline = time.time() + args.deadline_s
    import gc

    def timed():
        t = perf()
        for _ in range(settle):
            w.step()
        sync()
        t = perf()
        for _ in range(seg):
            w.step()
        sync()
        return (perf() - t) / seg

    for i in range(args.cycles):
        if time.time() > deadline:
            break
        if i % args.gc_every == 0:   # untimed; a full collection takes ~0.1 s beside torch (R1: ~100 cycles in 12 s)
            gc.collect()
        gc.disable()
        try:
            r = {"i": i}
            for state in (("prof", "none") if i % 2 == 0 else ("none", "prof")):
                if state == "none":
                    r["none_ns"] = timed()
                    continue
                t = perf()
                if bare is not None:
                    bare.start()
                else:
                    profiler.start(out)
                r["start_ns"] = perf() - t
                r["prof_ns"] = timed()
                t = perf()
                if bare is not None:
                    bare.stop(sync)
                else:
                    profiler.finalize()
                    if fin is not None:
                        fin()
                    elif onefin is not None and i == args.onefin_at:
                        onefin()
                        r["finalized"] = True
                r["stop_ns"] = perf() - t
                if proton is not None:   # untimed: Proton's start, its settle steps and its finalize
                    t = perf()
                    proton.start(out + "_proton", hook="triton")
                    for _ in range(settle):
                        w.step()
                    sync()
                    proton.finalize()
                    r["proton_ns"] = perf() - t
        finally:
            gc.enable()
        r.update(threads=_threads(), rss_kb=_rss_kb(), keepalive=len(kc._KEEPALIVE),
                 outstanding=len(cupti_raw.OUTSTANDING))
        if i % 50 == 0:
            names[i] = _thread_names()
        rows.append(r)
        if i % 50 == 49:   # what a timeout would leave
            _dump(args, result(rows, names))
    names[len(rows) - 1] = _thread_names()
    return result(rows, names)


def _path(args):
    return os.path.join(args.outdir, f"cycle_{args.variant}_{args.workload}.json")


def _dump(args, d):
    with open(_path(args) + ".tmp", "w") as f:
        json.dump(d, f)
    os.replace(_path(args) + ".tmp", _path(args))


def _slope(ys):
    n = len(ys)
    if n < 3:
        return float("nan"), float("nan")
    xs = range(n)
    mx, my = (n - 1) / 2, statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    res = [y - my - b * (x - mx) for x, y in zip(xs, ys)]
    se = math.sqrt(sum(e * e for e in res) / max(1, n - 2) / sxx)
    return b, se


def _onefin(rows):
    """kprof-onefin: the medians of the unprofiled step and of kprof's excess (us) over the cycles before the finalize
    and after it (the cycle of the finalize left out), and the growth of log(profiled / control) after it."""
    at = next((i for i, r in enumerate(rows) if r.get("finalized")), None)
    if at is None:
        return None
    before, after = rows[:at], rows[at + 1:]
    if len(before) < 3 or len(after) < 3:
        return {"at": at}

    def med(rs, f):
        return round(statistics.median(f(r) for r in rs), 3)
    b, se = _slope([math.log(r["prof_ns"] / r["none_ns"]) for r in after])
    b0, se0 = _slope([math.log(r["prof_ns"] / r["none_ns"]) for r in before])
    return {"at": at, "none_us": [med(before, lambda r: r["none_ns"] / 1e3), med(after, lambda r: r["none_ns"] / 1e3)],
            "excess_us": [med(before, lambda r: (r["prof_ns"] - r["none_ns"]) / 1e3),
                          med(after, lambda r: (r["prof_ns"] - r["none_ns"]) / 1e3)],
            "ratio": [med(before, lambda r: r["prof_ns"] / r["none_ns"]), med(after, lambda r: r["prof_ns"] / r["none_ns"])],
            "growth_before_per_100_%": round(1e4 * b0, 3), "growth_before_2se_%": round(2e4 * se0, 3),
            "growth_after_per_100_%": round(1e4 * b, 3), "growth_after_2se_%": round(2e4 * se, 3)}


def summarize(d: dict) -> dict:
    rows = d["rows"]
    n = len(rows)
    lr = [math.log(r["prof_ns"] / r["none_ns"]) for r in rows]
    b, se = _slope(lr)
    bn, sen = _slope([math.log(r["none_ns"]) for r in rows])   # the control's own drift (the host's, or every state's)
    k = min(100, n // 3) or 1
    first, last = rows[:k], rows[-k:]

    def med(rs, f):
        return statistics.median(f(r) for r in rs)
    exc = lambda r: (r["prof_ns"] - r["none_ns"]) / 1e3   # noqa: E731  us a step
    return {"variant": d["variant"], "workload": d["workload"], "cycles": n, "seg_steps": d["seg_steps"],
            "growth_per_100_cycles_%": round(100 * b * 100, 3), "growth_2se_%": round(100 * 2 * se * 100, 3),
            "none_growth_per_100_cycles_%": round(100 * bn * 100, 3), "none_growth_2se_%": round(100 * 2 * sen * 100, 3),
            "ratio_first": round(math.exp(statistics.median(lr[:k])), 4),
            "ratio_last": round(math.exp(statistics.median(lr[-k:])), 4),
            "excess_us_first": round(med(first, exc), 3), "excess_us_last": round(med(last, exc), 3),
            "none_us_first": round(med(first, lambda r: r["none_ns"] / 1e3), 3),
            "none_us_last": round(med(last, lambda r: r["none_ns"] / 1e3), 3),
            "start_ms_first": round(med(first, lambda r: r["start_ns"] / 1e6), 3),
            "start_ms_last": round(med(last, lambda r: r["start_ns"] / 1e6), 3),
            "stop_ms_first": round(med(first, lambda r: r["stop_ns"] / 1e6), 3),
            "stop_ms_last": round(med(last, lambda r: r["stop_ns"] / 1e6), 3),
            "onefin": _onefin(rows),
            "threads": [rows[0]["threads"], rows[-1]["threads"]], "rss_mb": [rows[0]["rss_kb"] // 1024,
                                                                            rows[-1]["rss_kb"] // 1024],
            "keepalive": [rows[0]["keepalive"], rows[-1]["keepalive"]],
            "outstanding": [rows[0]["outstanding"], rows[-1]["outstanding"]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=VARIANTS)
    ap.add_argument("--workload", choices=("tiny", "encoder"), default="tiny")
    ap.add_argument("--cycles", type=int, default=500)
    ap.add_argument("--deadline-s", type=float, default=20.0, help="stop starting cycles after this many seconds")
    ap.add_argument("--seg-ms", type=float, default=3.0)
    ap.add_argument("--settle-ms", type=float, default=1.0)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--onefin-at", type=int, default=100, help="kprof-onefin: the cycle after whose stop CUPTI is finalized")
    ap.add_argument("--gc-every", type=int, default=1, help="collect garbage before every Nth cycle (off in between)")
    ap.add_argument("--outdir", default=".")
    ap.add_argument("--fake", action="store_true", help="CPU: tests/profiler/fake_cupti.py for cupti (dry run)")
    ap.add_argument("--summary", nargs="*", help="summarize these result files instead of running")
    a = ap.parse_args(argv)
    if a.summary is not None:
        for f in a.summary:
            with open(f) as fh:
                s = summarize(json.load(fh))
            print(json.dumps(s))
        return 0
    if a.variant is None:
        ap.error("--variant is required to run")
    os.makedirs(a.outdir, exist_ok=True)
    d = run(a)
    _dump(a, d)
    print(json.dumps(summarize(d)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
