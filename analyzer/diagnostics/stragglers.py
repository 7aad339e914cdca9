"""10. Straggler rank: in a merged profile (``NAME.merged.hatchet`` from kprof under torchrun), the
rank that is busy longest (collective waits left out), the scope and kernels where its time differs from
the other ranks, and the collective in which the others waited for it.

A rank's *busy* time is its total time minus its estimated collective wait (``wait (ns):rank<r>``,
see :mod:`profiler.merge`): everyone's total is about the same when collectives synchronise the
ranks, so the slow rank shows as the one that waits least and computes most.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Tuple

from profiler.format import DEVICE_ID, TIME_METRIC, ProfileNode, inclusive_metrics
from profiler.merge import WAIT_METRIC, per_rank_name, split_rank_name

from .diagnostic import Diagnostic

MIN_EXCESS_NS = 1_000_000   # a straggler is at least 1 ms busier than the median of the others...
MIN_EXCESS_SHARE = 0.05     # ...and at least 5% of that median
ERROR_IMBALANCE = 1.5       # busy max / median at or above this is an error, else a warning
SCOPE_SHARE = 0.5           # descend into a child frame while it holds this share of the excess


def merged_info(root: ProfileNode) -> Optional[Dict[str, Any]]:
    d = (root.extra or {}).get("distributed")
    return d if isinstance(d, dict) and d.get("merged") else None


def _ranks(root: ProfileNode) -> List[int]:
    out = set()
    for node, _ in root.walk():
        for k in node.metrics:
            s = split_rank_name(k)
            if s is not None and s[0] == TIME_METRIC:
                out.add(s[1])
    return sorted(out)


def _is_collective(node: ProfileNode) -> bool:
    return bool((node.extra or {}).get("collective")) or any(
        split_rank_name(k) and split_rank_name(k)[0] == WAIT_METRIC for k in node.metrics)


def _median(vals: List[float]) -> float:
    return statistics.median(vals) if vals else 0.0


def check_profile(root: ProfileNode) -> List[Diagnostic]:
    info = merged_info(root)
    ranks = _ranks(root)
    if info is None or len(ranks) < 2:
        return []
    tcol = {r: per_rank_name(TIME_METRIC, r) for r in ranks}
    wcol = {r: per_rank_name(WAIT_METRIC, r) for r in ranks}
    inc = inclusive_metrics(root, list(tcol.values()) + list(wcol.values()))
    top = inc[root]
    busy = {r: top.get(tcol[r], 0.0) - top.get(wcol[r], 0.0) for r in ranks}
    slow = max(ranks, key=lambda r: (busy[r], -r))
    others = [r for r in ranks if r != slow]

    def diff(node: ProfileNode) -> Tuple[float, float, float]:
        """(slow rank's inclusive time minus collective wait, median of the others', difference)."""
        v = inc[node]

        def own(r):
            return v.get(tcol[r], 0.0) - v.get(wcol[r], 0.0)
        mine, med = own(slow), _median([own(r) for r in others])
        return mine, med, mine - med

    _, med_busy, excess = diff(root)
    imbalance = busy[slow] / med_busy if med_busy > 0 else float("inf")
    ev: Dict[str, Any] = {"slow_rank": slow, "ranks": ranks, "busy_ms": {str(r): round(busy[r] / 1e6, 3) for r in ranks},
                          "excess_ms": round(excess / 1e6, 3),
                          "imbalance": round(imbalance, 3) if imbalance != float("inf") else None}
    if info.get("missing"):
        ev["missing_ranks"] = list(info["missing"])
    if excess < MIN_EXCESS_NS or excess < MIN_EXCESS_SHARE * med_busy:
        return [Diagnostic("straggler-rank", 10, "ranks balanced", "info",
                           f"no straggler: the busiest rank ({slow}) is {excess / 1e6:.3f} ms above the median of the "
                           f"others ({med_busy / 1e6:.3f} ms busy, not waiting in collectives)",
                           "nothing to do", evidence=ev, basis="merged profile")]

    # the scope: follow the child holding most of the excess while it holds at least SCOPE_SHARE of it
    path: List[ProfileNode] = []
    node = root
    while True:
        kids = [(diff(c)[2], c) for c in node.children if not _is_collective(c)]
        if not kids:
            break
        d, best = max(kids, key=lambda kc: kc[0])
        if d < SCOPE_SHARE * excess:
            break
        path.append(best)
        node = best
    kernel_frames = []
    if path and DEVICE_ID in path[-1].metrics:  # ended on a kernel: its parent is the scope
        kernel_frames.append(path[-1])
        path = path[:-1]
    scope = "/".join(n.name for n in path) or "(top level)"
    under = path[-1] if path else root
    if not kernel_frames:
        kernel_frames = [n for n, _ in under.walk() if DEVICE_ID in n.metrics and not _is_collective(n)]
    kernels = sorted(((diff(k), k) for k in kernel_frames), key=lambda dk: -dk[0][2])
    kernels = [(d, k) for d, k in kernels if d[2] > 0.05 * excess][:3]
    scope_mine, scope_med, scope_diff = diff(under)
    ev.update({"scope": scope, "scope_ms": {"slow": round(scope_mine / 1e6, 3), "others_median": round(scope_med / 1e6, 3)},
               "kernels": [{"name": k.name, "slow_ms": round(d[0] / 1e6, 3), "others_median_ms": round(d[1] / 1e6, 3)}
                           for d, k in kernels]})

    # the collective the others waited in: the most waiting summed over the other ranks
    best_coll, best_wait, coll_path = None, 0.0, ""
    stack: List[Tuple[ProfileNode, str]] = [(c, c.name) for c in root.children]
    while stack:
        n, p = stack.pop()
        if _is_collective(n):
            w = sum(n.metrics.get(wcol[r], 0.0) for r in others)
            if w > best_wait:
                best_coll, best_wait, coll_path = n, w, p
        stack.extend((c, f"{p}/{c.name}") for c in n.children)
    msg = (f"rank {slow} is the straggler: {busy[slow] / 1e6:.3f} ms busy (time not spent waiting in collectives), "
           f"{excess / 1e6:.3f} ms more than the median of the other ranks (imbalance {imbalance:.2f}); "
           f"the difference is in {scope} ({scope_mine / 1e6:.3f} ms on rank {slow} vs {scope_med / 1e6:.3f} ms)")
    if kernels:
        msg += "; kernels: " + ", ".join(f"{k.name} (+{d[2] / 1e6:.3f} ms)" for d, k in kernels)
    if best_coll is not None:
        waits = {r: best_coll.metrics.get(wcol[r], 0.0) for r in ranks}
        ev["collective"] = {"path": coll_path, "wait_ms": {str(r): round(w / 1e6, 3) for r, w in waits.items()}}
        msg += (f"; the other ranks waited for it in {coll_path} (median "
                f"{_median([waits[r] for r in others]) / 1e6:.3f} ms each, rank {slow} {waits[slow] / 1e6:.3f} ms)")
    sev = "error" if imbalance >= ERROR_IMBALANCE else "warning"
    fix = (f"even out rank {slow}'s work in {scope}: uneven data shards or batch sizes, host-side stalls (data "
           "loading, I/O, a synchronisation) or a slower device; view it with kprof-viewer --rank "
           f"{slow} and compare with -m time/ms:rank{slow},time/ms:median")
    return [Diagnostic("straggler-rank", 10, "straggler rank", sev, msg, fix, evidence=ev, basis="merged profile")]
