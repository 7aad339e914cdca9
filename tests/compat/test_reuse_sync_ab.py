"""bench/experiments/tutorial_gaps/reuse_sync_ab.py's verdict (issue 20): the median's order-statistic interval and
the per-case and overall verdicts, on made-up rounds. CPU only; nothing here launches a kernel."""
import importlib.util
import math
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "reuse_sync_ab", os.path.join(ROOT, "bench", "experiments", "tutorial_gaps", "reuse_sync_ab.py"))
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def test_median_interval_holds_the_median_at_95_percent():
    xs = list(range(1, 101))
    med, lo, hi = ab.median_interval(xs)
    assert med == 50.5
    # n = 100: the 95% order statistics are the 40th and the 61st (1-based)
    assert (lo, hi) == (40, 61)
    # the coverage it claims: P(Binom(100, 1/2) in [40, 60]) >= 0.95
    cover = sum(math.comb(100, i) for i in range(40, 61)) / 2 ** 100
    assert cover >= 0.95
    assert ab.median_interval([3.0, 1.0, 2.0])[1:] == (1.0, 3.0)   # too few values: the whole range


def _run(case_ratio, rounds=40, seed=1):
    """Rounds all/needed/needed/all where all = needed * ratio, with 1% noise on every reading."""
    rng = random.Random(seed)
    out = {"cases": list(case_ratio), "rounds": []}
    for _ in range(rounds):
        rnd = []
        for case, ratio in case_ratio.items():
            for v in ab.ORDER:
                base = 6.0 * (ratio if v == "all" else 1.0)
                rnd.append({"case": case, "variant": v, "busy_us": base * (1 + rng.gauss(0, 0.01)), "covered": True})
        out["rounds"].append(rnd)
    return out


def test_verdicts_faster_slower_and_not_shown():
    s = ab.summarize(_run({"a": 1.05, "b": 1.0}))
    assert s["cases"]["a"]["needed"] == "faster" and s["cases"]["b"]["needed"] == "not shown"
    assert s["overall"] == "faster"
    assert abs(s["cases"]["a"]["all_over_needed_median"] - 1.05) < 0.01
    assert s["cases"]["a"]["covered_share"] == 1.0
    s = ab.summarize(_run({"a": 1.05, "b": 0.95}))
    assert s["cases"]["b"]["needed"] == "slower" and s["overall"] == "slower"   # slower anywhere: not faster
    assert ab.summarize(_run({"a": 1.0, "b": 1.0}))["overall"] == "not shown"
    assert ab.summarize({"cases": ["a"], "rounds": []})["overall"] == "no data"
