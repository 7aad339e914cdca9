"""Where the control's block-to-block spread comes from, and whether interleaving at a fine grain removes it
(issue 23, session 20).  One process, on a GPU; every workload built once.

Part A (unprofiled): blocks of each workload with a record per segment (~3 ms of the tiny loop, one step of
the encoder or ``train``): wall and thread CPU time (a wall time above the CPU time is time the thread did not
run: preemption or waits), the core the thread ran on at both ends (``sched_getcpu``), the GPU's SM clock
(NVML, every few segments; clocks are read, never set), and per block the garbage collector's collections
inside it (``gc.callbacks``; the collector left on here, after ``gc.freeze()``), the caching allocator's
counters, the block's position.  Blocks alternate between two affinities of the main thread: ``free`` (cores
2-5, as the bench pins) and ``pin1`` (core 2 alone; the process's other threads on 3-5).

Part B (toggle costs): what switching each profiler on and off costs -- kprof ``start``/``finalize`` and
``activate``/``deactivate``, CUPTI's activity kinds enable/disable, kprof's own CUPTI extras on/off (API
records, external correlation, callbacks, scopes and the kernelc hook), Proton ``start``/``finalize`` and
``activate``/``deactivate`` (last: Proton's finalize releases CUPTI).

Part C (the design): one kprof session started once; segments cycle through four states whose order rotates
and reverses every cycle (each state every position equally often):
  ``none``, ``none2``: every CUPTI kind, API record and callback off, ``profiler.scope`` a no-op and the
      kernelc hook out -- the two are the same state; ``none2/none`` is the A/A control of this design;
  ``floor``: kprof's kernel/memcpy/memset activity kinds on (its raw buffers), nothing else;
  ``kprof``: everything kprof's default start turns on (the kinds, the launch API records, external
      correlation, its callbacks, its scopes and the kernelc hook).
A state's switch is timed and left out of the segment it opens (a profiled run switches once, not per
segment).  Per block: each state's summed segment time over ``none``'s; the block ratios' median and
sign-test interval.  Block-level designs (the bench's) are recomputed from Part A on the same process.

Writes ``--out`` (JSON) and prints a summary.  Not a test; a measurement.
"""
import argparse
import ctypes
import gc
import json
import math
import os
import statistics as st
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

_libc = ctypes.CDLL(None)
_getcpu = _libc.sched_getcpu
perf = time.perf_counter_ns
tcpu = time.thread_time_ns


def log(*a):
    print(*a, flush=True)


def sign_ci(xs):
    from bench.reconcile_profilers import _sign_ci
    return _sign_ci(xs)


def pin_main(cpus_main, cpus_rest):
    main = os.getpid()
    for t in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(t), cpus_main if int(t) == main else cpus_rest)
        except OSError:
            pass


class GcCount:
    def __init__(self):
        self.n = 0
        self.ns = 0
        self._t = 0
        gc.callbacks.append(self)

    def __call__(self, phase, info):
        if phase == "start":
            self._t = perf()
        else:
            self.n += 1
            self.ns += perf() - self._t


def alloc_counts(torch):
    s = torch.cuda.memory_stats()
    return (s.get("allocation.all.allocated", 0), s.get("num_device_alloc", 0), s.get("num_alloc_retries", 0),
            s.get("num_sync_all_streams", 0))


def part_a(name, w, seg_steps, nblocks, segs_per_block, sync, nvml, gcc, torch):
    out = []
    for b in range(nblocks):
        cond = "free" if b % 2 == 0 else "pin1"
        if cond == "free":
            pin_main({2, 3, 4, 5}, {2, 3, 4, 5})
        else:
            pin_main({2}, {3, 4, 5})
        sync()
        a0 = alloc_counts(torch)
        g0, gns0 = gcc.n, gcc.ns
        segs = []
        t0 = perf()
        for s in range(segs_per_block):
            c0, w0, th0 = _getcpu(), perf(), tcpu()
            for _ in range(seg_steps):
                w.step()
            w1, th1, c1 = perf(), tcpu(), _getcpu()
            mhz = nvml.mhz() if (nvml and s % 8 == 0) else None
            segs.append((round((w1 - w0) / 1e3, 1), round((th1 - th0) / 1e3, 1), c0, c1, mhz))
        ti = perf()
        sync()
        t1 = perf()
        a1 = alloc_counts(torch)
        out.append({"cond": cond, "block": b, "ms_per_step": (t1 - t0) / 1e6 / (seg_steps * segs_per_block),
                    "tail_ms": (t1 - ti) / 1e6, "gc": gcc.n - g0, "gc_ms": (gcc.ns - gns0) / 1e6,
                    "alloc": [y - x for x, y in zip(a0, a1)], "segs": segs})
    pin_main({2, 3, 4, 5}, {2, 3, 4, 5})
    return out


def summarize_a(name, blocks):
    res = {}
    for cond in ("free", "pin1", "all"):
        bl = [b for b in blocks if cond == "all" or b["cond"] == cond]
        if len(bl) < 3:
            continue
        ms = [b["ms_per_step"] for b in bl]
        lr = [math.log(ms[i + 1] / ms[i]) for i in range(len(ms) - 1)]
        segs = [s for b in bl for s in b["segs"][1:]]
        wall = sum(s[0] for s in segs)
        cpu = sum(s[1] for s in segs)
        cores = {}
        for s in segs:
            cores.setdefault(s[2], []).append(s[0])
        migr = sum(1 for s in segs if s[2] != s[3])
        alt = []
        for b in bl:
            v = [s[0] for s in b["segs"][1:]]
            n = len(v) // 2 * 2
            alt.append(math.log(sum(v[1:n:2]) / sum(v[0:n:2])))
        mhz = sorted({s[4] for s in segs if s[4] is not None})
        res[cond] = {
            "blocks": len(bl), "ms_per_step_median": st.median(ms),
            "cv_blocks_pct": 100 * st.pstdev(ms) / st.mean(ms),
            "sd_next_block_pct": 100 * st.pstdev(lr) if len(lr) > 1 else None,
            "sd_alt1_within_block_pct": 100 * st.pstdev(alt),
            "cpu_over_wall": cpu / wall, "seg_migrations": migr, "segs": len(segs),
            "seg_us_by_core": {c: [len(v), round(st.median(v), 1)] for c, v in sorted(cores.items())},
            "sm_mhz": [mhz[0], mhz[-1]] if mhz else None,
            "gc_collections": sum(b["gc"] for b in bl), "gc_ms": round(sum(b["gc_ms"] for b in bl), 3),
            "allocs_per_block": st.median([b["alloc"][0] for b in bl]),
            "cudamalloc": sum(b["alloc"][1] for b in bl),
            "first_seg_over_rest": st.median([b["segs"][0][0] / st.median([s[0] for s in b["segs"][1:]]) for b in bl]),
            "last_third_over_first_third": st.median([
                sum(s[0] for s in b["segs"][-(len(b["segs"]) // 3):]) /
                sum(s[0] for s in b["segs"][1:1 + len(b["segs"]) // 3]) for b in bl]),
        }
        r = res[cond]
        log(f"  A {name} {cond:4s}: {r['blocks']} blocks, {r['ms_per_step_median']:.4f} ms/step, block cv "
            f"{r['cv_blocks_pct']:.1f}%, next-block sd {r['sd_next_block_pct'] or 0:.1f}%, alt1 sd "
            f"{r['sd_alt1_within_block_pct']:.2f}%, cpu/wall {r['cpu_over_wall']:.3f}, migrations "
            f"{migr}/{len(segs)}, by core {r['seg_us_by_core']}, SM MHz {r['sm_mhz']}, gc {r['gc_collections']} "
            f"({r['gc_ms']} ms), allocs/block {r['allocs_per_block']}, first-seg x{r['first_seg_over_rest']:.3f},"
            f" last/first third x{r['last_third_over_first_third']:.3f}")
    return res


# -- part C: states of one kprof session ---------------------------------------------------------------
class States:
    def __init__(self, profiler, cupti, backend, sess, real_scope):
        self.profiler, self.c, self.b, self.s, self.real_scope = profiler, cupti, backend, sess, real_scope
        K = cupti.ActivityKind
        self.core_kinds = [k for k in backend.kinds if int(k) != int(getattr(K, "EXTERNAL_CORRELATION", -1))]
        self.ext = bool(backend.external)
        self.light = bool(backend.light)
        self.cur = "kprof"

    def _core(self, on):
        for k in self.core_kinds:
            (self.c.activity_enable if on else self.c.activity_disable)(k)

    def _extras(self, on):
        from profiler import session as S
        b = self.b
        if self.light:
            b._enable_api_records(1 if on else 0)
        if self.ext:
            (self.c.activity_enable if on else self.c.activity_disable)(self.c.ActivityKind.EXTERNAL_CORRELATION)
        b._enable_callbacks(1 if on else 0)
        self.s.active = bool(on)   # scopes' session work and the kernelc hook (installed by _refresh)
        S._refresh()
        self.profiler.scope = self.real_scope if on else _null_scope

    def go(self, state):
        """Switch to ``state``; returns the ns it took."""
        t0 = perf()
        cur = self.cur
        if state in ("none", "none2"):
            state_key = "none"
        else:
            state_key = state
        cur_key = "none" if cur in ("none", "none2") else cur
        if state_key != cur_key:
            if cur_key == "kprof":
                self._extras(False)
                if state_key == "none":
                    self._core(False)
            elif cur_key == "floor":
                if state_key == "none":
                    self._core(False)
                else:
                    self._extras(True)
            else:   # from none
                self._core(True)
                if state_key == "kprof":
                    self._extras(True)
        self.cur = state
        return perf() - t0


def _null_scope(name, metrics=None, **kw):
    import contextlib
    return contextlib.nullcontext()


def order(names, i):
    k = (i // 2) % len(names)
    rot = names[k:] + names[:k]
    return rot if i % 2 == 0 else rot[::-1]


def part_c(name, w, seg_steps, states, secs, cycles, sync, backend):
    names = ["none", "none2", "floor", "kprof"]
    blocks = []
    switch_ns = {n: [] for n in names}
    ci = 0
    t_end = time.time() + secs
    while time.time() < t_end:
        sums = {n: 0 for n in names}
        per = {n: [] for n in names}
        sync()
        st0 = backend.stats() if hasattr(backend, "stats") else {}
        for _ in range(cycles):
            for n in order(names, ci):
                switch_ns[n].append(states.go(n))
                t0 = perf()
                for _ in range(seg_steps):
                    w.step()
                dt = perf() - t0
                sums[n] += dt
                per[n].append(dt)
            ci += 1
        sync()
        st1 = backend.stats() if hasattr(backend, "stats") else {}
        blocks.append({"sums_us": {n: v / 1e3 for n, v in sums.items()},
                       "loop": {k: st1.get(k, 0) - st0.get(k, 0) for k in st1 if isinstance(st1.get(k), int)}})
    return blocks, {n: (st.median(v) / 1e3 if v else None) for n, v in switch_ns.items()}


def summarize_c(name, blocks, sw):
    res = {"blocks": len(blocks), "switch_us_median": sw}
    ratios = {"none2/none": ("none2", "none"), "floor/none": ("floor", "none"), "kprof/none": ("kprof", "none"),
              "kprof/floor": ("kprof", "floor")}
    line = []
    for k, (a, b_) in ratios.items():
        xs = [bl["sums_us"][a] / bl["sums_us"][b_] for bl in blocks]
        m, lo, hi = sign_ci(xs)
        sd = 100 * st.pstdev([math.log(x) for x in xs])
        res[k] = {"median": m, "lo": lo, "hi": hi, "sd_log_pct": sd, "n": len(xs)}
        line.append(f"{k} {m:.4f} [{lo if lo is None else round(lo, 4)}, {hi if hi is None else round(hi, 4)}] "
                    f"(sd {sd:.2f}%)")
    log(f"  C {name}: {len(blocks)} blocks; " + "; ".join(line) + f"; switch us {sw}")
    return res


def analyse(path, budget_s=60.0):
    """The designs at a fixed time budget, from a run's JSON: the control's 95% half-width (sign test of the
    median, ~1.96 x 1.2533 x sd / sqrt(n)) if ``budget_s`` seconds went to it -- the block design (two
    unprofiled blocks a round apart, Part A's next-block sd; the bench's round also runs three profiled blocks
    and their starts and stops, so a control pair costs a round) against the fine one (Part C's none/none2)."""
    d = json.load(open(path))
    out = {}
    for wl, a in (d["parts"].get("A") or {}).items():
        sa = a["summary"].get("all") or {}
        bl = a["blocks"]
        t_blk = st.median([b["ms_per_step"] * sum(1 for _ in b["segs"]) for b in bl]) / 1e3   # s per block (1 seg ~ steps)
        row = {"block_next_sd_pct": sa.get("sd_next_block_pct")}
        c = (d["parts"].get("C") or {}).get(wl)
        if c:
            cs = c["summary"]
            nb = cs["blocks"]
            row.update({"fine_blocks": nb, "fine_aa_sd_pct": cs["none2/none"]["sd_log_pct"],
                        "fine_aa": [cs["none2/none"][k] for k in ("median", "lo", "hi")],
                        "kprof_floor": [cs["kprof/floor"][k] for k in ("median", "lo", "hi")],
                        "floor_none": [cs["floor/none"][k] for k in ("median", "lo", "hi")]})
        out[wl] = row
        log(f"{wl}: {row} (block ~{t_blk:.2f}s)")
    return out


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--analyse":
        analyse(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default="tiny,encoder,train")
    ap.add_argument("--deadline", type=float, default=110.0, help="seconds from start; parts are skipped past it")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every part's block count")
    args = ap.parse_args()
    T0 = time.time()
    os.sched_setaffinity(0, {2, 3, 4, 5})
    import torch
    torch.set_num_threads(4)
    torch.cuda.init()
    from bench.reconcile_profilers import WORKLOADS, _Nvml, _dyn_scope
    import profiler
    real_scope = profiler.scope
    profiler.scope = _null_scope   # unprofiled blocks: no scope code (as the bench's `none`)
    sync = torch.cuda.synchronize
    nvml = _Nvml()
    res = {"host": os.uname().nodename, "nproc": os.cpu_count(), "torch": torch.__version__, "parts": {}}
    wls = {}
    for wl in args.workloads.split(","):
        t = time.time()
        w = WORKLOADS[wl]("cuda", _dyn_scope)
        for _ in range(2000 if wl == "tiny" else 6):
            w.step()
        sync()
        t1 = time.perf_counter()
        n = 0
        while n < 3 or time.perf_counter() - t1 < 0.1:
            w.step()
            n += 1
        sync()
        step_s = (time.perf_counter() - t1) / n
        seg = max(1, int(round(0.003 / step_s))) if wl == "tiny" else 1
        wls[wl] = (w, seg, step_s)
        log(f"setup {wl}: {time.time() - t:.1f}s, step {step_s * 1e3:.4f} ms, {seg} steps/segment")
    gc.collect()
    gc.freeze()
    gcc = GcCount()

    def dump():   # after every part: a run cut off by its outer timeout keeps what it measured
        res["wall_s"] = time.time() - T0
        with open(args.out + ".tmp", "w") as f:
            json.dump(res, f)
        os.replace(args.out + ".tmp", args.out)
    log(f"setup done at {time.time() - T0:.1f}s")

    # A: unprofiled blocks with per-segment records (collector on), alternating affinity
    plan_a = {"tiny": (int(16 * args.scale), 66), "encoder": (int(12 * args.scale), 30),
              "train": (int(10 * args.scale), 24)}
    for wl, (w, seg, _) in wls.items():
        if time.time() - T0 > args.deadline * 0.5:
            log(f"A {wl}: skipped (time)")
            continue
        nb, spb = plan_a[wl]
        blocks = part_a(wl, w, seg, nb, spb, sync, nvml, gcc, torch)
        res["parts"].setdefault("A", {})[wl] = {"summary": summarize_a(wl, blocks), "blocks": blocks}
        dump()
    gc.collect()
    gc.disable()

    # B (kprof part) and C: one kprof session, started once
    out = "/tmp/spread_kprof"   # the profiles themselves are not needed
    B = res["parts"].setdefault("B", {})
    w0 = wls[next(iter(wls))][0]
    ks = []
    for i in range(3):
        t = perf()
        sid = profiler.start(f"{out}_ss{i}")
        t1 = perf()
        for _ in range(200):
            w0.step()
        sync()
        t2 = perf()
        profiler.finalize()
        ks.append(((t1 - t) / 1e6, (perf() - t2) / 1e6))
    B["kprof_start_finalize_ms"] = ks
    sid = profiler.start(out)
    sess = profiler.session.get(sid)
    backend = sess.backend
    from cupti import cupti
    profiler.scope = real_scope
    states = States(profiler, cupti, backend, sess, real_scope)
    B["kprof_state"] = {"light": states.light, "external": states.ext,
                        "raw": getattr(backend, "rawbufs", None) is not None,
                        "kinds": [str(k) for k in backend.kinds]}
    ad = []
    for _ in range(20):
        t = perf()
        profiler.deactivate()
        t1 = perf()
        profiler.activate()
        ad.append(((t1 - t) / 1e3, (perf() - t1) / 1e3))
    B["kprof_deactivate_activate_us"] = [st.median([a for a, _ in ad]), st.median([b for _, b in ad])]
    for nm in ("none", "floor", "kprof", "floor", "none", "kprof"):   # warm every switch
        states.go(nm)
    log(f"B kprof: start/finalize ms {[(round(a, 1), round(b, 1)) for a, b in ks]}, deactivate/activate us "
        f"{[round(x, 1) for x in B['kprof_deactivate_activate_us']]}, state {B['kprof_state']}")

    # seconds each workload's part C may take, and cycles per block (a block: cycles x 4 segments)
    plan_c = {"tiny": (12.0, 8), "encoder": (14.0, 4), "train": (16.0, 2)}   # even cycles: each block balanced
    for wl, (w, seg, _) in wls.items():
        secs, cyc = plan_c[wl]
        secs = min(secs * args.scale, args.deadline - 8 - (time.time() - T0))
        if secs < 3:
            log(f"C {wl}: skipped (time)")
            continue
        states.go("kprof")
        blocks, sw = part_c(wl, w, seg, states, secs, cyc, sync, backend)
        res["parts"].setdefault("C", {})[wl] = {"summary": summarize_c(wl, blocks, sw), "blocks": blocks,
                                               "seg_steps": seg, "cycles": cyc}
        dump()
    states.go("kprof")
    dump()
    t = perf()
    profiler.finalize()
    B["kprof_final_finalize_ms"] = (perf() - t) / 1e6
    gc.enable()

    # B (Proton part), last: its finalize releases CUPTI
    if time.time() - T0 < args.deadline - 6:
        try:
            from bench import reconcile_profilers as rp
            from bench.reconcile_profilers import _start
            rp._CB_OWNER[0] = "kprof"   # cupti-python's libcupti is attached: Proton's start detaches it first
            pr = []
            for i in range(2):
                t = perf()
                stop = _start("proton", f"{out}_proton{i}")
                t1 = perf()
                for _ in range(200):
                    w0.step()
                sync()
                t2 = perf()
                import triton.profiler as proton
                d = []
                for _ in range(5):
                    a = perf()
                    proton.deactivate()
                    b_ = perf()
                    proton.activate()
                    d.append(((b_ - a) / 1e3, (perf() - b_) / 1e3))
                t3 = perf()
                stop()
                pr.append({"start_ms": (t1 - t) / 1e6, "finalize_ms": (perf() - t3) / 1e6,
                           "deactivate_us": st.median([x for x, _ in d]), "activate_us": st.median([y for _, y in d])})
            B["proton"] = pr
            log(f"B proton: {pr}")
        except Exception as e:
            B["proton_error"] = repr(e)
            log(f"B proton: {e!r}")
    dump()
    log(f"done in {res['wall_s']:.1f}s -> {args.out}")


if __name__ == "__main__":
    main()
