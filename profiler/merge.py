"""Merge per-rank profiles (``NAME.rank<r>.hatchet``) into one ``NAME.merged.hatchet``.

The merged tree is the union of the ranks' trees (frames matched by path).  Every frame carries:

* each summable metric summed over the ranks (``time (ns)`` is the time of all ranks together, so
  Proton's viewer and hatchet read the file as usual);
* per-rank columns ``<metric>:rank<r>`` for the headline metrics (times, ``count``, ``flops*``,
  ``bytes``): ``kprof-viewer`` derives ``time/ms:max``, ``time/ms:median``, ``time/ms:min``,
  ``imbalance`` (max/median) and ``time/ms:rank3`` from them, and ``--rank R`` shows one rank;
* on collective frames (NCCL kernels, host-timed ``torch.distributed`` calls): ``wait (ns)`` and
  ``transfer (ns)`` (summed, and per rank), estimated by matching the k-th call of the same
  collective in the same frame on every rank: ``transfer = min over ranks``, ``wait = own - min``.

The root's ``kprof`` dict holds ``{"distributed": {"merged": true, "world_size", "ranks",
"missing", "run_id", "per_rank": {rank: metadata}}}``.

Command line (merge files by hand, e.g. when the ranks wrote to node-local disks)::

    python -m profiler.merge -o train.merged.hatchet train.rank*.hatchet
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .format import (COUNT_METRIC, DEVICE_ID, DEVICE_TYPE, ProfileFormatError, ProfileNode, ROOT_NAME,
                     additive_metric_names, read_profile, write_profile)

__all__ = ["RankProfile", "merge_profiles", "gather_and_merge", "per_rank_name", "split_rank_name",
           "WAIT_METRIC", "TRANSFER_METRIC", "main"]

WAIT_METRIC = "wait (ns)"
TRANSFER_METRIC = "transfer (ns)"
STALE_SLACK_S = 60.0  # without a run id, a rank file older than rank 0's start minus this is a previous run's
_RANK_SUFFIX = re.compile(r"^(?P<base>.+):rank(?P<rank>\d+)$")
_PROPERTIES = frozenset({DEVICE_ID, DEVICE_TYPE, "stream_id", "start_time (ns)", "end_time (ns)"})


def per_rank_name(metric: str, rank: int) -> str:
    return f"{metric}:rank{rank}"


def split_rank_name(name: str) -> Optional[Tuple[str, int]]:
    """``"time (ns):rank3"`` -> ``("time (ns)", 3)``; ``None`` for any other name."""
    m = _RANK_SUFFIX.match(name)
    return (m.group("base"), int(m.group("rank"))) if m else None


def _per_rank_metric(name: str) -> bool:
    """Headline metrics get per-rank columns; sampling counters are only summed."""
    low = name.lower()
    return (re.fullmatch(r".*\((s|ms|us|ns)\)", low) is not None or low == COUNT_METRIC
            or low.startswith("flops") or low == "bytes")


class RankProfile:
    """One rank's profile as read from its file."""

    def __init__(self, rank: int, root: ProfileNode, device_info: Dict[str, Any], meta: Dict[str, Any], path: str = ""):
        self.rank = rank
        self.root = root
        self.device_info = device_info
        self.meta = meta
        self.path = path


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def merge_profiles(ranks: Sequence[RankProfile], world_size: Optional[int] = None,
                   missing: Sequence[int] = ()) -> Tuple[ProfileNode, Dict[str, Any]]:
    """The merged ``(root, device_info)`` of the ranks' profiles (see the module docstring)."""
    ranks = sorted(ranks, key=lambda p: p.rank)
    if not ranks:
        raise ValueError("no rank profiles to merge")
    seen = [p.rank for p in ranks]
    if len(set(seen)) != len(seen):
        raise ValueError(f"two profiles for the same rank among ranks {seen}")
    merged = ProfileNode(ROOT_NAME)
    instances: Dict[int, Tuple[ProfileNode, Dict[int, List[int]]]] = {}
    device_info: Dict[str, Any] = {}
    for p in ranks:
        additive = set(additive_metric_names(p.root))
        stack = [(p.root, merged)]
        while stack:
            src, dst = stack.pop()
            if src is not p.root:
                _add_metrics(dst, src.metrics, additive, p.rank)
                _add_extra(dst, src.extra, p.rank, instances)
            for c in src.children:
                stack.append((c, dst.child(c.name, c.frame_type)))
        for dtype, devs in (p.device_info or {}).items():
            if isinstance(devs, dict):
                for did, entry in devs.items():
                    device_info.setdefault(dtype, {}).setdefault(did, entry)
    for node, by_rank in instances.values():
        _split_collective(node, by_rank)
    world = world_size if world_size is not None else max(
        [int(p.meta.get("world_size") or 0) for p in ranks] + [max(seen) + 1])
    run_ids = sorted({str(p.meta.get("run_id")) for p in ranks if p.meta.get("run_id")})
    merged.extra = {"distributed": {
        "merged": True, "world_size": world, "ranks": seen, "missing": sorted(missing),
        "run_id": run_ids[0] if len(run_ids) == 1 else (run_ids or None),
        "per_rank": {str(p.rank): p.meta for p in ranks},
    }}
    return merged, device_info


def _add_metrics(dst: ProfileNode, metrics: Dict[str, Any], additive: set, rank: int) -> None:
    for k, v in metrics.items():
        if k in _PROPERTIES or not _is_number(v) or k not in additive:
            dst.metrics.setdefault(k, v)
            continue
        dst.metrics[k] = dst.metrics.get(k, 0) + v
        if _per_rank_metric(k):
            rk = per_rank_name(k, rank)
            dst.metrics[rk] = dst.metrics.get(rk, 0) + v


def _add_extra(dst: ProfileNode, extra: Optional[Dict[str, Any]], rank: int, instances: dict) -> None:
    if not extra:
        return
    inst = extra.get("instances_ns")
    if dst.extra is None:
        dst.extra = {k: v for k, v in extra.items() if k not in ("instances_ns", "instances_truncated")}
    if inst is not None:
        entry = instances.setdefault(id(dst), (dst, {}))
        entry[1].setdefault(rank, []).extend(int(x) for x in inst)


def _split_collective(node: ProfileNode, by_rank: Dict[int, List[int]]) -> None:
    """wait/transfer of one collective frame from its per-call durations on each rank."""
    ranks = sorted(by_rank)
    common = min(len(v) for v in by_rank.values())
    wait = {r: 0 for r in ranks}
    transfer = {r: 0 for r in ranks}
    for k in range(common):
        fastest = min(by_rank[r][k] for r in ranks)
        for r in ranks:
            wait[r] += by_rank[r][k] - fastest
            transfer[r] += fastest
    unmatched = {}
    for r in ranks:
        rest = by_rank[r][common:]
        if rest:
            transfer[r] += sum(rest)  # no partner call to compare with: all of it counts as transfer
            unmatched[str(r)] = len(rest)
    for r in ranks:
        node.metrics[per_rank_name(WAIT_METRIC, r)] = wait[r]
        node.metrics[per_rank_name(TRANSFER_METRIC, r)] = transfer[r]
    node.metrics[WAIT_METRIC] = sum(wait.values())
    node.metrics[TRANSFER_METRIC] = sum(transfer.values())
    node.extra = dict(node.extra or {})
    node.extra["collective"] = True
    node.extra["wait_estimate"] = {"matched_calls": common, "ranks": ranks, "unmatched_calls": unmatched,
                                   "method": "k-th call on every rank: transfer = fastest rank's time, "
                                             "wait = own time - fastest"}


# -- reading rank files -------------------------------------------------------------------------
def read_rank_file(path: str) -> RankProfile:
    """A per-rank profile; its rank comes from its metadata, else from the ``.rank<r>.`` file name."""
    root, devinfo = read_profile(path)
    meta = dict(((root.extra or {}).get("distributed") or {}))
    rank = meta.get("rank")
    if not isinstance(rank, int):
        m = re.search(r"\.rank(\d+)\.hatchet$", os.path.basename(path))
        if not m:
            raise ProfileFormatError(f"{path}: not a per-rank profile (no rank in its metadata or its name "
                                     "NAME.rank<r>.hatchet)")
        rank = int(m.group(1))
        meta["rank"] = rank
    if meta.get("merged"):
        raise ProfileFormatError(f"{path}: is already a merged profile; merge the NAME.rank<r>.hatchet files")
    return RankProfile(rank, root, devinfo, meta, path)


def _current(path: str, rank: int, info, wall_start: float) -> Tuple[Optional[RankProfile], str]:
    """The rank's file if it is this run's, else ``(None, why not)``."""
    if not os.path.exists(path):
        return None, "no profile"
    try:
        p = read_rank_file(path)
    except (ProfileFormatError, OSError) as e:
        return None, f"unreadable ({e})"
    if p.rank != rank:
        return None, f"{path} holds rank {p.rank}"
    theirs = p.meta.get("run_id")
    if info.run_id and theirs:
        if theirs != info.run_id:
            return None, f"{path} is from another run (run id {theirs})"
    else:
        try:
            if os.path.getmtime(path) < wall_start - STALE_SLACK_S:
                return None, f"{path} predates this run"
        except OSError as e:
            return None, f"unreadable ({e})"
    return p, ""


def rank_path(base: str, rank: int) -> str:
    """``NAME.rank<r>.hatchet`` for the un-suffixed output base ``NAME``."""
    return f"{base}.rank{rank}.hatchet"


def merged_path(base: str) -> str:
    return f"{base}.merged.hatchet"


def gather_and_merge(base: str, info, *, wall_start: float, timeout: float,
                     stop: Optional[threading.Event] = None, poll: float = 0.2, say=None) -> Optional[str]:
    """Rank 0: wait up to ``timeout`` seconds (or until ``stop`` is set) for every rank's
    ``base.rank<r>.hatchet``, then write ``base.merged.hatchet`` from those found; returns its path."""
    say = say or (lambda msg: print(f"kprof: {msg}", file=sys.stderr, flush=True))
    stop = stop or threading.Event()
    world = info.world_size
    found: Dict[int, RankProfile] = {}
    why: Dict[int, str] = {}
    t0 = time.monotonic()
    announced = False
    while True:
        for r in range(world):
            if r not in found:
                p, reason = _current(rank_path(base, r), r, info, wall_start)
                if p is not None:
                    found[r] = p
                    why.pop(r, None)
                else:
                    why[r] = reason
        waited = time.monotonic() - t0
        if len(found) == world or stop.is_set() or waited >= timeout:
            break
        if not announced and waited >= 2.0:
            announced = True
            say(f"rank 0 waits up to {timeout:g} s for the profiles of rank(s) "
                f"{', '.join(str(r) for r in sorted(why))} (--merge-timeout)")
        stop.wait(min(poll, max(0.0, timeout - waited)))
    missing = sorted(set(range(world)) - set(found))
    if not found:
        say(f"no rank profile of {base} found; nothing merged")
        return None
    root, devinfo = merge_profiles(list(found.values()), world, missing)
    if missing:
        root.extra["distributed"]["missing_reasons"] = {str(r): why.get(r, "no profile") for r in missing}
        cause = "interrupted" if stop.is_set() else f"after {time.monotonic() - t0:.1f} s"
        say(f"merging without rank(s) {', '.join(str(r) for r in missing)} ({cause}: "
            + "; ".join(f"rank {r}: {why.get(r, 'no profile')}" for r in missing[:4]) + ")")
    path = merged_path(base)
    write_profile(os.path.abspath(path), root, devinfo)
    return path


# -- command line -----------------------------------------------------------------------------
def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m profiler.merge",
                                 description="Merge per-rank kprof profiles (NAME.rank<r>.hatchet) into one.")
    ap.add_argument("profiles", nargs="+", help="per-rank profiles (shell globs are expanded)")
    ap.add_argument("-o", "--output", required=True, help="the merged profile to write (e.g. NAME.merged.hatchet)")
    ap.add_argument("--world-size", type=int, help="number of ranks (default: from the profiles' metadata)")
    args = ap.parse_args(argv)
    paths: List[str] = []
    for pat in args.profiles:
        paths.extend(sorted(glob.glob(pat)) or [pat])
    try:
        ranks = [read_rank_file(p) for p in paths]
        world = args.world_size or max([int(p.meta.get("world_size") or 0) for p in ranks] + [max(p.rank for p in ranks) + 1])
        missing = sorted(set(range(world)) - {p.rank for p in ranks})
        root, devinfo = merge_profiles(ranks, world, missing)
        write_profile(args.output, root, devinfo)
    except (ProfileFormatError, ValueError, OSError) as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 1
    note = f" (missing rank(s): {', '.join(map(str, missing))})" if missing else ""
    print(f"{ap.prog}: wrote {args.output} from {len(ranks)} rank(s){note}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
