"""Sizing the s26 solo design (one profiler a process, P/base and none/none2 pairs) from C2's swap run on the encoder
(bench/results/profiler_overhead_s25_swap_encoder_h200.*): the noise of one pair at the swap design's spacing, and
how many blocks a second of the solo design holds, from C2's own switch, settle and step times.

    python3 bench/experiments/profiler_overhead/solo_size.py [ROUNDS.json.gz] > results/solo_size_s26_cpu.log
"""
import gzip
import json
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def rsd(xs):
    m = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - m) for x in xs)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else os.path.join(ROOT, "bench/results/profiler_overhead_s25_swap_encoder_h200.encoder"
                                                   ".rounds.json.gz")
    from bench.reconcile_profilers import fine_pair_ratios
    d = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    # the results file (not the rounds file, written while the run went on) has the child's wall time
    res = path.replace(".encoder.rounds.json", ".json")
    if os.path.exists(res) and res != path:
        d = json.load(gzip.open(res) if res.endswith(".gz") else open(res))
    multi = d["children"][0]["multi"][2:]
    out = {"source": os.path.basename(path), "blocks": len(multi)}
    for a, b in (("none", "none2"), ("kprof", "proton")):
        _, pr = fine_pair_ratios(multi, a, b)
        out[f"{a}/{b}"] = {"pairs": len(pr), "robust_sd_%": round(100 * rsd([math.log(x) for x in pr]), 2)}
    med = lambda n, key: statistics.median(x for r in multi for s, x in zip(r["segments"], r[key]) if s == n)
    step = med("none", "seg_ms")
    # C2's switches: into kprof after an unprofiled state = kprof's start alone; into an unprofiled state after
    # kprof or Proton = its stop (plus padding, taken out); Proton's start after an unprofiled state
    def gap(prev_set, n):
        g = [r["gap_ms"][j] - r["pad_ms"][j] for r in multi for j in range(1, len(r["segments"]))
             if r["segments"][j] == n and r["segments"][j - 1] in prev_set]
        return statistics.median(g) if g else None
    unp = {"none", "none2"}
    t = {"step_ms": round(step, 2), "kprof_start_ms": gap(unp, "kprof"), "proton_start_ms": gap(unp, "proton"),
         "settle_kprof_ms": round(med("kprof", "settle_ms"), 2), "settle_proton_ms": round(med("proton", "settle_ms"), 2)}
    # stops: from kprof into none/none2 (kprof's stop) and from proton into none/none2 (Proton's finalize)
    for p in ("kprof", "proton"):
        g = [r["gap_ms"][j] - r["pad_ms"][j] for r in multi for j in range(1, len(r["segments"]))
             if r["segments"][j] in unp and r["segments"][j - 1] == p]
        t[f"{p}_stop_ms"] = round(statistics.median(g), 2) if g else None
    out["c2_times"] = t
    wall = (d["children"][0].get("wall_s") or 0) - (d["children"][0].get("setup_s") or 0)
    # a solo block: 3 lead steps, 4 P segments (start, settle, timed), 4 base (P's stop, 2 steps), 8 control
    # segments (padded to the median P<->base switch, 2 steps); plus C2's per-block rest (collection, file)
    per_block_c2 = wall / len(d["children"][0]["multi"]) * 1e3 if wall else None

    rows = {}
    for p in ("kprof", "proton"):
        st, sp, se = t[f"{p}_start_ms"], t[f"{p}_stop_ms"], t[f"settle_{p}_ms"]
        sw = (st + sp) / 2
        blk = 3 * step + 4 * (st + se + step) + 4 * (sp + 2 * step) + 8 * (sw + 2 * step)
        rows[p] = {"block_ms_model": round(blk, 1)}
    # C2's blocks in the same model, against C2's measured ms a block: the model's rest (collection, rounds file)
    st_k, st_p = t["kprof_start_ms"], t["proton_start_ms"]
    c2_blk = 3 * step + sum(x for r in multi for x in r["gap_ms"]) / len(multi) + sum(
        x for r in multi for x in r["settle_ms"]) / len(multi) + 16 * step
    out["c2_block_ms"] = {"measured": round(per_block_c2, 1) if per_block_c2 else None, "model": round(c2_blk, 1)}
    rest = (per_block_c2 - c2_blk) if per_block_c2 else 0
    sd = out["none/none2"]["robust_sd_%"] / 100
    for p, r in rows.items():
        r["block_ms"] = round(r["block_ms_model"] + rest, 1)
        for secs in (22, 25, 50):
            n = int(secs * 1e3 / r["block_ms"]) * 4
            r[f"pairs_in_{secs}s"] = n
            # sign-test half-width of a median of n pairs, normal approximation (1.2533 sd/sqrt(n))
            r[f"halfwidth95_%_{secs}s"] = round(100 * 1.96 * 1.2533 * sd / math.sqrt(n), 2)
            r[f"halfwidth97.5_%_{secs}s"] = round(100 * 2.2414 * 1.2533 * sd / math.sqrt(n), 2)
    out["solo"] = rows
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
