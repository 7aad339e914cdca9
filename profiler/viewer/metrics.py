"""Metric names: raw ones read from the file and derived ones computed from them.

Every metric a profile can show is listed in a *catalog* built from what the file holds (see
:func:`catalog`); the families of derived metrics are data tables below, not branches.  A
:class:`Metric` evaluates on a *row*: any object with ``inc`` (summable metrics summed over the
frame's subtree) and ``own`` (the frame's raw metrics, including ``device_id``/``device_type``).

Derivations mirror Proton's viewer: ``time/<unit>`` and rates use inclusive values; ``avg_time``
is inclusive time over inclusive count; ``util`` is per kernel frame (frames with a
``device_id``): ``max(sum_w flops<w> / peak_flops(w), bytes / peak_bandwidth) / time``.
"""

from __future__ import annotations

import difflib
import re
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .. import format as fmt
from ..merge import split_rank_name
from . import peaks

# --- data tables -------------------------------------------------------------------------------

# seconds per unit; raw time metrics carry their unit in the name, e.g. "time (ns)"
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
# rate prefixes: flop/s, gflop/s, tflop/s (and byte/s ...)
RATE_PREFIXES: dict[str, float] = {"": 1.0, "g": 1e9, "t": 1e12}
# rate families: derived-name stem -> which raw metrics feed the numerator.  "flop" sums every
# flop counter present (flops, flops8 ... flops64); the width-specific stems read one counter.
RATE_STEMS: dict[str, tuple[str, ...]] = {
    "flop": ("flops",) + tuple(f"flops{w}" for w in fmt.FLOP_WIDTHS),
    **{f"flop{w}": (f"flops{w}",) for w in fmt.FLOP_WIDTHS},
    "byte": ("bytes",),
}
FLOP_COUNTERS = RATE_STEMS["flop"]
# forgiving spellings, applied to the lower-cased, space-normalised name (first match wins)
ALIASES: tuple[tuple[str, str], ...] = (
    (r"^([tg]?)flops?(8|16|32|64)?/s$", r"\1flop\2/s"),  # flops/s, tflops/s, flop16/s
    (r"^([tg])flops?(8|16|32|64)?$", r"\1flop\2/s"),  # tflops, gflop16 (a bare "flops" is a count)
    (r"^([tg]?)(?:bytes?|b)/s$", r"\1byte/s"),  # gb/s, bytes/s, tbytes/s
    (r"^(.+)/(?:sec|secs|second|seconds)$", r"\1/s"),
    (r"^(.+)/(?:µs|usec)$", r"\1/us"),
    (r"^(.+)/(?:msec)$", r"\1/ms"),
    (r"^(.+)/(?:nsec)$", r"\1/ns"),
    (r"^(.*[^/ ]) ?%$", r"\1/%"),  # time% -> time/%
    (r"^utili[sz]ation$", "util"),
)

# Header note per kind, for -l.
KIND_DOC: dict[str, str] = {
    "raw": "raw, summed over subtrees",
    "own": "raw, per frame (not summed)",
    "time": "time converted to the unit",
    "avg_time": "inclusive time / inclusive count",
    "rate": "counter / time",
    "share": "share of the total, in percent",
    "util": "max(compute, bandwidth) fraction of peak, kernel frames only",
    "rank_stat": "across ranks (merged profiles): min, median, max, mean of the per-rank values",
    "imbalance": "across ranks (merged profiles): max / median of the per-rank time",
}
# statistics across ranks of a merged profile's per-rank columns (<metric>:rank<r>)
RANK_STATS: dict[str, Callable[[list[float]], float]] = {
    "min": min, "median": statistics.median, "max": max, "mean": statistics.fmean,
}


class MetricError(ValueError):
    """A metric name that cannot be shown for this profile; the message is one line."""


@dataclass(frozen=True)
class Metric:
    """One column: ``name`` (its header), how to compute it, and whether values add up."""

    name: str
    kind: str  # a key of _EVALUATORS
    sources: tuple[str, ...] = ()  # raw metric names read
    factor: float = 1.0  # unit factor: time values are multiplied by it, rates divided by it
    additive: bool = False  # adds up over frames: a missing frame counts as 0 in a diff
    base: "Metric | None" = None  # for share: the metric whose share is shown
    stat: str = ""  # for rank_stat: a key of RANK_STATS

    def value(self, row: Any, ctx: "EvalContext") -> float | None:
        """The metric on ``row`` (``None``: no data)."""
        return _EVALUATORS[self.kind](self, row, ctx)


@dataclass
class EvalContext:
    """What evaluation needs besides the row: the total row (for shares) and the devices."""

    total: Any
    device_info: Mapping[str, Any]
    time_source: str | None  # raw time metric used by rates and util, e.g. "time (ns)"


# --- evaluation ---------------------------------------------------------------------------------


def _sum_inc(row: Any, names: Iterable[str]) -> float | None:
    vals = [row.inc[n] for n in names if n in row.inc]
    return sum(vals) if vals else None


def _seconds(row: Any, source: str | None) -> float | None:
    if source is None or source not in row.inc:
        return None
    return row.inc[source] * TIME_UNITS[time_unit(source)]


def _eval_raw(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    return _sum_inc(row, m.sources)


def _eval_own(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    v = row.own.get(m.sources[0])
    return v if _is_number(v) else None


def _eval_time(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    v = row.inc.get(m.sources[0])
    return None if v is None else v * m.factor


def _eval_avg_time(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    t, n = row.inc.get(m.sources[0]), row.inc.get(m.sources[1])
    return None if t is None or not n else t * m.factor / n


def _eval_rate(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    num, secs = _sum_inc(row, m.sources), _seconds(row, ctx.time_source)
    return None if num is None or not secs else num / secs / m.factor


def _eval_share(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    v, total = m.base.value(row, ctx), m.base.value(ctx.total, ctx)
    return None if v is None or not total else 100.0 * v / total


def _eval_util(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    device = _row_device(row, ctx.device_info)
    secs = _seconds(row, ctx.time_source)
    if device is None or not secs:
        return None
    dtype, entry = device
    min_time_flops = 0.0
    for w in fmt.FLOP_WIDTHS:
        n = row.inc.get(f"flops{w}")
        if n:
            peak = peaks.peak_flops(dtype, entry, w)
            if peak is None:
                return None
            min_time_flops += n / peak
    has_flops = any(row.inc.get(f"flops{w}") for w in fmt.FLOP_WIDTHS)
    nbytes = row.inc.get("bytes")
    if not has_flops and not nbytes:
        return None  # nothing to compare with a peak (Proton shows 0 here; blank is more honest)
    min_time_bytes = 0.0
    if nbytes:
        bw = peaks.peak_bandwidth(dtype, entry)
        if bw is None:
            return None
        min_time_bytes = nbytes / bw
    if peaks.arch_peak(dtype, entry) is None:
        return None  # an arch without a peak table gets no util, even from bandwidth alone
    return max(min_time_flops, min_time_bytes) / secs


def _rank_values(m: Metric, row: Any) -> list[float] | None:
    vals = [row.inc.get(s) for s in m.sources]
    if all(v is None for v in vals):
        return None
    return [0.0 if v is None else v for v in vals]  # a rank without this frame spent nothing there


def _eval_rank_stat(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    vals = _rank_values(m, row)
    return None if vals is None else RANK_STATS[m.stat](vals) * m.factor


def _eval_imbalance(m: Metric, row: Any, ctx: EvalContext) -> float | None:
    vals = _rank_values(m, row)
    if vals is None:
        return None
    med = statistics.median(vals)
    return max(vals) / med if med > 0 else None


_EVALUATORS: dict[str, Callable[[Metric, Any, EvalContext], float | None]] = {
    "raw": _eval_raw,
    "own": _eval_own,
    "time": _eval_time,
    "avg_time": _eval_avg_time,
    "rate": _eval_rate,
    "share": _eval_share,
    "util": _eval_util,
    "rank_stat": _eval_rank_stat,
    "imbalance": _eval_imbalance,
}


def _row_device(row: Any, device_info: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    did = row.own.get(fmt.DEVICE_ID)
    if did is None:
        return None  # scopes and other internal frames: util is per kernel
    dtype = str(row.own.get(fmt.DEVICE_TYPE, "CUDA"))
    entry = (device_info.get(dtype) or {}).get(str(did))
    return (dtype, entry) if isinstance(entry, Mapping) else None


# --- catalog ----------------------------------------------------------------------------------


def time_unit(raw_name: str) -> str | None:
    """``"time (ns)"`` -> ``"ns"``; ``None`` for a metric that is not a time."""
    m = re.fullmatch(r".*\((s|ms|us|ns)\)", raw_name.strip())
    return m.group(1) if m else None


def short_name(raw_name: str) -> str:
    """``"time (ns)"`` -> ``"time"`` (Proton matches metrics without their unit)."""
    return raw_name.split("(")[0].strip()


def catalog(raw_names: Iterable[str], additive: Iterable[str]) -> dict[str, Metric]:
    """Every metric name this profile can show, canonical (lower-case) name -> :class:`Metric`.

    Raw metrics keep their file spelling as header; a raw time metric ``X (u)`` also gives
    ``X/s|ms|us|ns`` and ``avg_X/...``; counters give rates and ``X/%`` shares.
    """
    raw_names = list(raw_names)
    summed = set(additive)
    out: dict[str, Metric] = {}

    def put(m: Metric) -> None:
        out.setdefault(m.name.lower(), m)

    for name in raw_names:
        put(Metric(name, "raw" if name in summed else "own", (name,), additive=name in summed))
    present = set(raw_names)
    flop_sources = tuple(n for n in FLOP_COUNTERS if n in present)
    if flop_sources:  # "flops" is every flop counter together, whatever the widths
        out["flops"] = Metric("flops", "raw", flop_sources, additive=True)

    count = fmt.COUNT_METRIC if fmt.COUNT_METRIC in present else None
    time_source = main_time_metric(raw_names)
    for name in raw_names:
        unit = time_unit(name)
        if unit is None or name not in summed:
            continue
        stem = short_name(name)
        for target, secs in TIME_UNITS.items():
            factor = TIME_UNITS[unit] / secs
            put(Metric(f"{stem}/{target}", "time", (name,), factor, additive=True))
            if count:
                put(Metric(f"avg_{stem}/{target}", "avg_time", (name, count), factor))
    if time_source:
        for stem, sources in RATE_STEMS.items():
            have = tuple(s for s in sources if s in present)
            if not have:
                continue
            for prefix, scale in RATE_PREFIXES.items():
                put(Metric(f"{prefix}{stem}/s", "rate", have, scale))
        if any(f"flops{w}" in present for w in fmt.FLOP_WIDTHS) or "bytes" in present:
            put(Metric("util", "util", (time_source,)))
    _rank_metrics(raw_names, summed, time_source, put)
    for m in list(out.values()):
        if m.additive and m.kind == "raw":
            put(Metric(f"{short_name(m.name)}/%", "share", m.sources, base=m))
    return out


def _rank_metrics(raw_names: list[str], summed: set[str], time_source: str | None,
                  put: Callable[[Metric], None]) -> None:
    """Merged profiles: ``<stem>/<unit>:rank<r>``, ``<stem>/<unit>:<stat>`` and ``<stem>:<stat>``
    from the per-rank columns, and ``imbalance`` from those of the main time metric."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for name in raw_names:
        split = split_rank_name(name)
        if split is not None and name in summed:
            groups.setdefault(split[0], []).append((split[1], name))
    for base, cols in groups.items():
        cols.sort()
        sources = tuple(n for _, n in cols)
        stem, unit = short_name(base), time_unit(base)
        if unit:
            for target, secs in TIME_UNITS.items():
                factor = TIME_UNITS[unit] / secs
                for r, n in cols:
                    put(Metric(f"{stem}/{target}:rank{r}", "time", (n,), factor, additive=True))
                for stat in RANK_STATS:
                    put(Metric(f"{stem}/{target}:{stat}", "rank_stat", sources, factor, stat=stat))
        for stat in RANK_STATS:
            put(Metric(f"{stem}:{stat}", "rank_stat", sources, stat=stat))
        if base == time_source:
            put(Metric("imbalance", "imbalance", sources))


def main_time_metric(raw_names: Iterable[str]) -> str | None:
    """The raw time metric rates divide by: Proton's ``time (ns)``, else the first time metric
    whose name starts with ``time``."""
    names = list(raw_names)
    if fmt.TIME_METRIC in names:
        return fmt.TIME_METRIC
    for n in names:
        if time_unit(n) and short_name(n).lower() == "time":
            return n
    return None


# Names that exist for some profile, with what they need: for "needs X" messages.
_UNIVERSAL_RAW = [fmt.TIME_METRIC, fmt.COUNT_METRIC, *FLOP_COUNTERS, "bytes"]
_UNIVERSAL = catalog(_UNIVERSAL_RAW, _UNIVERSAL_RAW)


def canonical(spec: str) -> str:
    """Lower-case, normalise spaces, ``"time (ms)"`` -> ``"time/ms"``, apply :data:`ALIASES`."""
    s = re.sub(r"\s+", " ", spec.strip().lower())
    s = re.sub(r"\s*/\s*", "/", s)
    m = re.fullmatch(r"(.+?) ?\((s|ms|us|ns|%)\)", s)
    if m:
        s = f"{m.group(1)}/{m.group(2)}"
    for pattern, repl in ALIASES:
        new = re.sub(pattern, repl, s)
        if new != s:
            return new
    return s


def resolve(spec: str, cat: Mapping[str, Metric], raw_names: Iterable[str]) -> Metric:
    """The :class:`Metric` for a user-typed name; raises :class:`MetricError` (one line, with close
    matches for a misspelling, or what is missing for a metric this profile cannot derive)."""
    raw_names = list(raw_names)
    text = spec.strip()
    if not text:
        raise MetricError("empty metric name in -m (two commas in a row?)")
    low = text.lower()
    if low in cat:
        return cat[low]
    by_short: dict[str, str] = {}
    for n in raw_names:  # the first wins: "time" is "time (ns)", not a merged profile's "time (ns):rank1"
        by_short.setdefault(short_name(n).lower(), n)
    if low in by_short and by_short[low].lower() in cat:  # "time" means "time (ns)"
        return cat[by_short[low].lower()]
    key = canonical(text)
    if key in cat:
        return cat[key]
    if key.startswith("avg_") and "/" not in key:  # "avg_time" -> in the raw unit
        for name in raw_names:
            if short_name(name).lower() == key[4:] and time_unit(name):
                unit_key = f"{key}/{time_unit(name)}"
                if unit_key in cat:
                    return cat[unit_key]
    if key in _UNIVERSAL:
        missing = _describe_needs(_UNIVERSAL[key], raw_names)
        have = ", ".join(raw_names) or "nothing"
        raise MetricError(f"metric '{text}' needs {missing}, which this profile lacks "
                          f"(it has: {have}); run with -l to list what it can show")
    names = sorted(set(cat) | {short_name(n).lower() for n in raw_names})
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    hint = f" (did you mean {_or_list(close)}?)" if close else ""
    examples = [short_name(n) for n in raw_names if not n.startswith("stalled_")][:5]
    raw_hint = f"one of this profile's metrics ({', '.join(examples)}, ...)" if examples else "a raw metric"
    raise MetricError(f"unknown metric '{text}'{hint}; expected {raw_hint} or a derived one such as time/ms, "
                      "tflop/s, gbyte/s, util, time/% (-l lists them all)")


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _describe_needs(m: Metric, raw_names: list[str]) -> str:
    present = set(raw_names)
    if m.kind in ("rate", "util"):
        parts = []
        if main_time_metric(raw_names) is None:
            parts.append("a time metric (time (ns))")
        counters = [s for s in m.sources if s not in (fmt.TIME_METRIC,)]
        if m.kind == "util":
            counters = [f"flops{w}" for w in fmt.FLOP_WIDTHS] + ["bytes"]
        if counters and not any(c in present for c in counters):
            parts.append(" or ".join(counters))
        return " and ".join(parts) or "its source metrics"
    if m.kind == "avg_time":
        return "time (ns) and count"
    return " or ".join(m.sources)


def resolve_list(specs: Iterable[str], cat: Mapping[str, Metric], raw_names: Iterable[str]) -> list[Metric]:
    """Resolve several names, dropping duplicates (same header) but keeping the order."""
    out: list[Metric] = []
    seen: set[str] = set()
    raw_names = list(raw_names)
    for spec in specs:
        m = resolve(spec, cat, raw_names)
        if m.name not in seen:
            seen.add(m.name)
            out.append(m)
    return out


def split_specs(text: str) -> list[str]:
    """``"time/ms, tflop/s"`` -> ``["time/ms", "tflop/s"]``."""
    return [part.strip() for part in text.split(",")]


def default_specs(cat: Mapping[str, Metric], raw_names: list[str]) -> list[str]:
    """What to show without ``-m``: time in ms and its share, else the first raw metric."""
    if "imbalance" in cat and "time/ms:max" in cat:  # a merged profile: the spread across ranks
        return ["time/ms:min", "time/ms:median", "time/ms:max", "imbalance"]
    if "time/ms" in cat:
        return ["time/ms", "time/%"]
    return [raw_names[0]] if raw_names else []


def util_note(device_info: Mapping[str, Any]) -> tuple[bool, str | None]:
    """``(usable, note)``: whether any device has a peak table, and a note for devices without
    one (``None`` when every device is known)."""
    devices = list(peaks.iter_devices(device_info))
    if not devices:
        return False, ("util left out: the profile has no device_info, so no peak numbers "
                       f"(known: {peaks.known_archs()})")
    unknown = [(t, i, e) for t, i, e in devices if peaks.arch_peak(t, e) is None]
    if not unknown:
        return True, None
    names = ", ".join(f"{t} {i} arch {e.get('arch', '?')!s}" for t, i, e in unknown)
    usable = len(unknown) < len(devices)
    what = "util is blank on those frames" if usable else "util left out"
    return usable, f"no peak table for {names} (known: {peaks.known_archs()}); {what}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
