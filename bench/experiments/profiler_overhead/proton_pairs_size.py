"""Size a kprof-vs-Proton pairs design from the stored runs (CPU only; issue 23, s25 design).

Proton cannot be switched per step in one process (its deactivate keeps CUPTI on; beside kprof's libcupti its
subscribe fails), but its finalize unsubscribes and calls cuptiFinalize (Triton 3.6's CuptiProfiler::doStop), so
each Proton segment can be bracketed by start/finalize, untimed, as kprof's can.  The cost of that is a longer gap
between the two timed segments of a pair.  This reads how fast the host noise grows with the distance between two
unprofiled segments of one process (a variogram of their log ratio), and from it the pairs -- and seconds -- a
control inside [0.99, 1.01] needs at the gap such a design has.

Sources: the pairs runs' none/none2 segments (``seg_ms``: slots of one untimed settle step + one timed step) and the
s19 multi-way runs' unprofiled blocks (``sched.none.seg_us``: contiguous ~3-ms or one-step segments); the s19
blocks also give block-to-block spread (what separate short processes would at best see).
"""
import argparse
import gzip
import json
import math
import os
import statistics as st

RES = os.path.join(os.path.dirname(__file__), "..", "..", "results")
PAIRS = {"train": ["profiler_overhead_s24_f_train_pairs_h200.json", "profiler_overhead_s24_r2_train_pairs_h200.rounds.json"],
         "encoder": ["profiler_overhead_s24_r1_enc_pairs_h200.json.gz", "profiler_overhead_s23_r1_enc_pairs_h200.json.gz",
                     "profiler_overhead_s22_r2_enc_pairs_h200.json.gz"]}
MULTI = {"train": "profiler_overhead_s19_r1_train_multi_h200.json", "encoder": "profiler_overhead_s19_r3_encoder_multi_h200.json",
         "tiny": "profiler_overhead_s19_r4_tiny_multi_h200.json"}
# switch costs measured in one process (s20 R1, H200): Proton start 9 ms (after the first), finalize 2.7 ms (tiny);
# kprof start 1.6 ms, finalize 2.4-2.6 ms.  Per swap (a stop and a start) ~12 ms for Proton, ~4 ms for kprof;
# the design spins the none states' gap to match (so the control sees the same gap).
GAP_SWITCH_MS = 12.0


def _load(name):
    p = os.path.join(RES, name)
    with (gzip.open(p) if p.endswith(".gz") else open(p)) as f:
        return json.load(f)


def rsd(xs):
    """Robust sd (1.4826 x MAD) of ``xs``."""
    if len(xs) < 3:
        return None
    m = st.median(xs)
    return 1.4826 * st.median([abs(x - m) for x in xs])


def variogram(seqs, dmax):
    """``seqs``: lists of (ms, is_unprofiled); robust sd of log(a/b) over unprofiled segments ``d`` apart."""
    out = {}
    for d in range(1, dmax + 1):
        v = [math.log(s[i][0] / s[i + d][0]) for s in seqs for i in range(len(s) - d)
             if s[i][1] and s[i + d][1] and s[i][0] > 0 and s[i + d][0] > 0]
        out[d] = (rsd(v), len(v))
    return out


def pairs_seqs(d, skip=2):
    seqs, slot = [], []
    for c in d["children"]:
        for r in (c.get("multi") or [])[skip:]:
            if "seg_ms" not in r:
                continue
            seqs.append([(m, n in ("none", "none2")) for m, n in zip(r["seg_ms"], r["segments"])])
            slot.append(st.median(r["seg_ms"]))
    return seqs, st.median(slot)


def multi_seqs(d, skip=2):
    seqs, seg, blocks = [], [], []
    for c in d["children"]:
        rounds = c.get("multi") or []
        for r in rounds[skip:]:
            s = (r.get("sched") or {}).get("none") or {}
            us = s.get("seg_us") or []
            if len(us) > 2:
                seqs.append([(x, True) for x in us[1:]])   # the block's first segment (after a switch) out
                seg.append(st.median(us))
            blocks.append(r["ms"]["none"])
    bb = [math.log(blocks[i + 1] / blocks[i]) for i in range(len(blocks) - 1)]
    return seqs, st.median(seg) / 1e3, rsd(bb), len(bb)


def k_gap_rsd(seqs, k, g):
    """Robust sd of log(mean of k segments / mean of the k segments that start g segments after them end):
    a swap pair of k-segment timed parts with g segments' time between them, read off contiguous segments."""
    v = []
    for s in seqs:
        for i in range(0, len(s) - 2 * k - g + 1):
            a = [x for x, ok in s[i:i + k] if ok]
            b = [x for x, ok in s[i + k + g:i + 2 * k + g] if ok]
            if len(a) == k and len(b) == k:
                v.append(math.log(sum(a) / sum(b)))
    return rsd(v), len(v)


def interp(vg, x):
    """The variogram's robust sd at distance ``x`` (segments, may be fractional; linear between points)."""
    ks = sorted(k for k, (s, n) in vg.items() if s is not None)
    if x <= ks[0]:
        return vg[ks[0]][0]
    for a, b in zip(ks, ks[1:]):
        if a <= x <= b:
            return vg[a][0] + (vg[b][0] - vg[a][0]) * (x - a) / (b - a)
    return vg[ks[-1]][0]


def need_pairs(sd, half):
    """Pairs for a sign-test 95% interval of the median of half-width ``half`` (log scale): the median's sd is
    ~1.2533 sd/sqrt(n) for a normal pair ratio."""
    return math.ceil((1.96 * 1.2533 * sd / half) ** 2)


def main(argv=None):
    global GAP_SWITCH_MS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--half", type=float, default=0.007, help="target half-width (0.7%%: room for a centre 0.3%% off 1)")
    ap.add_argument("--budget", type=float, default=400.0, help="seconds of one call")
    ap.add_argument("--gap-ms", type=float, default=GAP_SWITCH_MS, help="a stop and a start, ms")
    ap.add_argument("--settle", type=int, default=1, help="untimed steps after each start (Proton's first step: 59.7 ms "
                    "against ~22 ms on train, s19 R1)")
    a = ap.parse_args(argv)
    GAP_SWITCH_MS = a.gap_ms
    res = {}
    # set-up per process (fork server, workload built, s19-s24 logs): train ~7-9 s, encoder ~8 s, tiny ~5 s
    setup = {"train": 8.0, "encoder": 8.0, "tiny": 5.0}
    step_ms = {}
    for wl in ("tiny", "encoder", "train"):
        e = {}
        md = _load(MULTI[wl])
        seqs, seg_ms, bb, nbb = multi_seqs(md)
        vg = variogram(seqs, 16)
        e["multi_contiguous"] = {"source": MULTI[wl], "segment_ms": round(seg_ms, 3),
                                 "rsd_by_distance": {d: (None if s is None else round(s, 4), n) for d, (s, n) in vg.items()},
                                 "block_to_next_block_rsd": round(bb, 4), "block_pairs": nbb}
        vgp, slot = None, None
        if wl in PAIRS:
            allseq = []
            for f in PAIRS[wl]:
                s, sl = pairs_seqs(_load(f))
                allseq += s
                slot = sl if slot is None else slot
            vgp = variogram(allseq, 8)
            e["pairs_slots"] = {"sources": PAIRS[wl], "timed_step_ms": round(slot, 3),
                                "rsd_by_distance": {d: (None if s is None else round(s, 4), n) for d, (s, n) in vgp.items()}}
        step = slot if slot else seg_ms
        step_ms[wl] = step
        # the swap design: [start X; settle steps; timed segment; stop X] per state; between two timed segments
        # of a pair: a stop, a start, the settle steps.  In contiguous-segment units:
        seg = slot if slot else seg_ms   # one timed segment: one step (encoder, train) or ~3 ms (tiny)
        gap_ms = GAP_SWITCH_MS + a.settle * (slot if slot else seg_ms)
        if vgp:
            # pairs slots: distance 1 = one settle step + one switch between timed steps
            x = 1 + (gap_ms - slot) / (2 * slot)
            sd = interp(vgp, x)
            basis = f"pairs runs' variogram at {x:.2f} slots ({gap_ms:.1f} ms between timed steps)"
        else:
            x = 1 + gap_ms / seg_ms
            sd = interp(vg, x)
            basis = f"s19 contiguous segments' variogram at {x:.2f} segments ({gap_ms:.1f} ms between timed segments)"
        per_pair_s = 2 * (GAP_SWITCH_MS + (a.settle + 1) * seg) / 1e3
        n = need_pairs(sd, a.half)
        # cycle of 8 pairs: 4 kprof/Proton, 4 control -- the control needs n of its own
        secs = 2 * n * per_pair_s
        e["swap_design"] = {"gap_ms": round(gap_ms, 2), "pair_rsd": round(sd, 4), "basis": basis,
                            "seconds_per_pair": round(per_pair_s, 4), "control_pairs_needed": n,
                            "seconds_of_pairs_needed": round(secs, 1), "setup_s": setup[wl],
                            "fits_one_workload_in": round(secs + setup[wl] + 5, 1)}
        # separate short processes (option A): a process's median is at best a block's value; adjacent
        # processes are further apart than adjacent blocks, so the block-to-block spread is a lower bound
        npr = need_pairs(bb, a.half)
        e["process_pairs_design"] = {"pair_rsd_lower_bound": round(bb, 4), "process_pairs_needed": npr,
                                     "seconds_needed_at_least": round(npr * 2 * (setup[wl] + 2), 1)}
        if wl in ("tiny", "encoder"):
            # k timed segments a side (the s19 blocks' contiguous segments, unprofiled, host-bound enough that
            # a segment's end is its steps' end): longer timed parts against the fixed switch cost
            ks = {}
            for kk in (1, 2, 4, 8):
                g = max(1, round((GAP_SWITCH_MS + a.settle * seg_ms) / seg_ms))
                sd_k, nk = k_gap_rsd(seqs, kk, g)
                if sd_k is None or nk < 50:
                    continue
                pp = 2 * (GAP_SWITCH_MS + (a.settle + kk) * seg_ms) / 1e3
                nn = need_pairs(sd_k, a.half)
                ks[kk] = {"gap_segments": g, "pair_rsd": round(sd_k, 4), "n": nk, "seconds_per_pair": round(pp, 4),
                          "control_pairs_needed": nn, "seconds_of_pairs_needed": round(2 * nn * pp, 1)}
            e["timed_segments_per_side"] = ks
        res[wl] = e
    tot = sum(res[w]["swap_design"]["fits_one_workload_in"] for w in res)
    res["total_swap_s"] = round(tot, 1)
    res["budget_s"] = a.budget
    lines = []
    for wl in ("tiny", "encoder", "train"):
        e = res[wl]
        lines.append(f"{wl}: contiguous segments ({e['multi_contiguous']['segment_ms']} ms) rsd by distance "
                     + " ".join(f"{d}:{v[0]}" for d, v in list(e['multi_contiguous']['rsd_by_distance'].items())[:8])
                     + f"; block to next block {e['multi_contiguous']['block_to_next_block_rsd']}")
        if "pairs_slots" in e:
            lines.append(f"  pairs slots (step {e['pairs_slots']['timed_step_ms']} ms) rsd by distance "
                         + " ".join(f"{d}:{v[0]}(n={v[1]})" for d, v in e['pairs_slots']['rsd_by_distance'].items()))
        s = e["swap_design"]
        lines.append(f"  swap design: gap {s['gap_ms']} ms, pair rsd {s['pair_rsd']} ({s['basis']}); "
                     f"{s['control_pairs_needed']} control pairs, {s['seconds_of_pairs_needed']} s of pairs "
                     f"(+{s['setup_s']} s set-up) -> {s['fits_one_workload_in']} s")
        for kk, v in (e.get("timed_segments_per_side") or {}).items():
            lines.append(f"  k={kk} timed segments a side ({kk * e['multi_contiguous']['segment_ms']:.1f} ms), gap "
                         f"{v['gap_segments']} segments: pair rsd {v['pair_rsd']} (n={v['n']}) -> "
                         f"{v['control_pairs_needed']} control pairs, {v['seconds_of_pairs_needed']} s of pairs")
        p = e["process_pairs_design"]
        lines.append(f"  process pairs: rsd >= {p['pair_rsd_lower_bound']} -> >= {p['process_pairs_needed']} process "
                     f"pairs, >= {p['seconds_needed_at_least']} s")
    lines.append(f"swap design, three workloads: {res['total_swap_s']} s against a {a.budget:.0f}-s call")
    print("\n".join(lines))
    if a.out:
        with open(a.out + ".json", "w") as f:
            json.dump(res, f, indent=1)
        with open(a.out + ".log", "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
