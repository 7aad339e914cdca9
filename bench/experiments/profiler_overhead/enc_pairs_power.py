"""How many adjacent pairs the encoder's control needs, from the pairs runs already stored (issue 23, CPU only).

Reads ``--fine-order pairs`` results (``reconcile_profilers overhead``; per-segment times in ``children[].multi``)
and prints, per run and comparison (none/none2, kprof/floor):

* the pairs' log-ratio spread (sd and the MAD's robust sd), and the rank autocorrelation of consecutive pair
  ratios at lags 1 and 2 (near 0: consecutive pairs are independent units, so a sign test over all pairs holds);
* per block, what other estimators give on the same blocks (a within-block trend fitted out; first differences):
  whether anything but more pairs narrows the interval;
* the sign-test 95% interval's half-width expected at n pairs, by a smoothed bootstrap of the run's centred pair
  ratios (``--reps`` draws per n), and the run's pairs per second of blocks (its throughput);
* ``--need``: the pairs (and seconds of process at that throughput) for the control's interval to lie inside
  [0.99, 1.01] if its centre falls as far from 1 as ``--offset`` (%).

    python3 bench/experiments/profiler_overhead/enc_pairs_power.py RUN.json[.gz] ... [--out FILE]
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.reconcile_profilers import _sign_ci, fine_pair_ratios  # noqa: E402


def _load(path):
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def _ranks(v):
    order = sorted(range(len(v)), key=v.__getitem__)
    r = [0.0] * len(v)
    for i, j in enumerate(order):
        r[j] = float(i)
    return r


def _spearman(x, y):
    if len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else None


def _mad_sd(v):
    m = sorted(v)[len(v) // 2]
    d = sorted(abs(x - m) for x in v)
    return 1.4826 * d[len(d) // 2]


def _lstsq(X, y):
    """Least squares by the normal equations (small, well-conditioned systems: a few columns)."""
    k = len(X[0])
    A = [[sum(r[i] * r[j] for r in X) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * t for r, t in zip(X, y)) for i in range(k)]
    for i in range(k):   # Gauss-Jordan with partial pivoting
        p = max(range(i, k), key=lambda r: abs(A[r][i]))
        A[i], A[p], b[i], b[p] = A[p], A[i], b[p], b[i]
        if abs(A[i][i]) < 1e-12:
            return None
        for r in range(k):
            if r != i:
                f = A[r][i] / A[i][i]
                A[r] = [x - f * z for x, z in zip(A[r], A[i])]
                b[r] -= f * b[i]
    return [b[i] / A[i][i] for i in range(k)]


def block_estimates(rounds, a, b, how):
    """Per block, log(a/b) by ``trend`` (log time = a quadratic in the block's position + a state effect) or
    ``diff`` (first differences of log time on the differences of the state indicators)."""
    out = []
    for r in rounds:
        segs, ms = r.get("segments"), r.get("seg_ms")
        if not segs or not ms or min(ms) <= 0:
            continue
        states = sorted(set(segs))
        y = [math.log(v) for v in ms]
        n = len(y)
        ind = [[1.0 if s == st else 0.0 for st in states[1:]] for s in segs]
        if how == "trend":
            X = [[1.0, (i / (n - 1) - 0.5), (i / (n - 1) - 0.5) ** 2] + ind[i] for i in range(n)]
            c = _lstsq(X, y)
            eff = None if c is None else dict(zip(states, [0.0] + c[3:]))
        else:
            X = [[p - q for p, q in zip(ind[i + 1], ind[i])] for i in range(n - 1)]
            c = _lstsq(X, [y[i + 1] - y[i] for i in range(n - 1)])
            eff = None if c is None else dict(zip(states, [0.0] + c))
        if eff is not None and a in eff and b in eff:
            out.append(eff[a] - eff[b])
    return out


def expected_halfwidth(logs, n, reps, rng):
    """Median half-width (in %) of the sign-test 95% interval of n pairs drawn from the centred ``logs``."""
    m = sorted(logs)[len(logs) // 2]
    c = [x - m for x in logs]
    # a smoothed bootstrap (Silverman's bandwidth): drawing n > len(logs) values from the bare sample repeats
    # its values, and the ties make the order statistics' interval look narrower than it would be
    q = sorted(c)
    iqr = q[3 * len(q) // 4] - q[len(q) // 4]
    sd = math.sqrt(sum(x * x for x in c) / len(c))
    h = 0.9 * min(sd, iqr / 1.34) * len(c) ** -0.2
    hw = []
    for _ in range(reps):
        s = [math.exp(rng.choice(c) + rng.gauss(0.0, h)) for _ in range(n)]
        _, lo, hi = _sign_ci(s)
        if lo is not None:
            hw.append((hi - lo) / 2 * 100)
    hw.sort()
    return hw[len(hw) // 2] if hw else None


def analyse(path, skip, ns, reps, offset, seed):
    d = _load(path)
    rng = random.Random(seed)
    child = d["children"][0]
    rounds = child["multi"]
    wall = child.get("wall_s") or 0
    setup = child.get("setup_s") or 0
    res = {"file": Path(path).name, "blocks": len(rounds) - skip, "wall_s": wall, "setup_s": setup, "comparisons": {}}
    for a, b in (("none", "none2"), ("kprof", "floor")):
        blocks, pairs = fine_pair_ratios(rounds, a, b, skip)
        if not pairs:
            continue
        logs = [math.log(p) for p in pairs]
        pm, plo, phi = _sign_ci(pairs)
        bm, blo, bhi = _sign_ci(blocks)
        e = {"pairs": len(pairs), "pair_median": round(pm, 4), "pair_ci": [round(plo, 4), round(phi, 4)],
             "block_median": round(bm, 4), "block_ci": [round(blo, 4), round(bhi, 4)],
             "pair_sd_%": round(100 * math.sqrt(sum((x - sum(logs) / len(logs)) ** 2 for x in logs) / (len(logs) - 1)), 2),
             "pair_robust_sd_%": round(100 * _mad_sd(logs), 2),
             "lag1": round(_spearman(logs[:-1], logs[1:]), 3), "lag2": round(_spearman(logs[:-2], logs[2:]), 3),
             "block_sd_%": {}}
        for how, v in (("pairs", [math.log(x) for x in blocks]), ("trend", block_estimates(rounds[skip:], a, b, "trend")),
                       ("diff", block_estimates(rounds[skip:], a, b, "diff"))):
            e["block_sd_%"][how] = round(100 * _mad_sd(v), 2) if v else None
        pps = len(pairs) / max(1e-9, wall - setup)
        e["pairs_per_s_of_blocks"] = round(pps, 2)
        e["halfwidth_%_at"] = {str(n): round(expected_halfwidth(logs, n, reps, rng), 3) for n in ns}
        if a == "none":
            # smallest n (of a doubling search, then bisection) whose expected half-width + offset <= 1%
            lo_n, hi_n = 50, 50
            while expected_halfwidth(logs, hi_n, reps, rng) + offset > 1.0 and hi_n < 20000:
                lo_n, hi_n = hi_n, hi_n * 2
            while hi_n - lo_n > 25:
                mid = (lo_n + hi_n) // 2
                if expected_halfwidth(logs, mid, reps, rng) + offset > 1.0:
                    lo_n = mid
                else:
                    hi_n = mid
            e["need_pairs_at_offset"] = {"offset_%": offset, "pairs": hi_n,
                                         "s_of_blocks": round(hi_n / pps, 1) if pps else None}
        res["comparisons"][f"{a}/{b}"] = e
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--skip", type=int, default=2, help="settle blocks left out per process (the runs' rule)")
    ap.add_argument("--ns", default="300,600,900,1200", help="pair counts to give the expected half-width at")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--offset", type=float, default=0.3, help="the control centre's distance from 1 assumed, %%")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    ns = [int(x) for x in a.ns.split(",")]
    out = [analyse(p, a.skip, ns, a.reps, a.offset, a.seed) for p in a.runs]
    for r in out:
        print(f"{r['file']}: {r['blocks']} blocks, {r['wall_s']} s of process ({r['setup_s']} s set-up)")
        for k, e in r["comparisons"].items():
            print(f"  {k:12s} pairs {e['pairs']:4d}  pair median {e['pair_median']} {e['pair_ci']}  block median "
                  f"{e['block_median']} {e['block_ci']}")
            print(f"  {'':12s} pair sd {e['pair_sd_%']}% (robust {e['pair_robust_sd_%']}%)  lag1 {e['lag1']} lag2 "
                  f"{e['lag2']}  block robust sd, by estimator: {e['block_sd_%']}")
            print(f"  {'':12s} {e['pairs_per_s_of_blocks']} pairs/s; expected sign-test half-width at n pairs: "
                  f"{e['halfwidth_%_at']}" + (f"; inside [0.99, 1.01] at a {e['need_pairs_at_offset']['offset_%']}% "
                                              f"offset: {e['need_pairs_at_offset']['pairs']} pairs, "
                                              f"{e['need_pairs_at_offset']['s_of_blocks']} s of blocks"
                                              if "need_pairs_at_offset" in e else ""))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
