"""The kprof dict of a kernel frame, checked field by field before the analyzer uses it.

A profile is a file anyone may have written or edited: every field of a kernel frame's ``"kprof"``
dict is checked against the layout kprof writes (:mod:`profiler.format`); a field of the wrong
type or range is left out, and its name is returned so the report can say so.  Fields the
analyzer does not read are kept as they are.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Tuple

__all__ = ["clean_extra", "clean_instructions", "finite"]


def finite(v: Any) -> float:
    """A metric value as a float; anything that is not a finite number (NaN, inf, text, bool) is 0."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0.0
    try:
        f = float(v)
    except OverflowError:   # an int beyond float range
        return 0.0
    return f if math.isfinite(f) else 0.0


def _int(lo: int, hi: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and lo <= v <= hi


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int)) or (isinstance(v, float) and math.isfinite(v))


def _grid(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and 1 <= len(v) <= 3 and all(type(x) is int and 0 <= x < 2 ** 31 for x in v)


def _source(v: Any) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("file", ""), str)
            and (v.get("first_line") is None or (type(v.get("first_line")) is int and 1 <= v["first_line"] < 2 ** 31))
            and _str_list(v.get("lines", [])))


_FIELDS: Dict[str, Callable[[Any], bool]] = {
    "kind": _str,
    "kernel": _str,
    "cache_key": _str,
    "other_cache_keys": _str_list,
    "grid": _grid,
    "num_warps": _int(1, 1024),
    "num_stages": _int(0, 64),
    "n_regs": _int(0, 1 << 16),
    "n_spills": _int(0, 1 << 40),
    "shared": _int(0, 1 << 40),
    "target": _str,
    "constexprs": lambda v: isinstance(v, dict) and all(isinstance(k, str) and _scalar(x) for k, x in v.items()),
    "signature": lambda v: isinstance(v, dict) and all(isinstance(k, str) and _scalar(x) for k, x in v.items()),
    "specialization": lambda v: isinstance(v, dict),
    "divisibility": lambda v: isinstance(v, (list, dict)),
    "equal_to_1": lambda v: isinstance(v, (list, dict)),
    "args": lambda v: isinstance(v, (list, dict)),
    "source": _source,
    "instructions": lambda v: isinstance(v, list),
}


def clean_extra(extra: Any) -> Tuple[Dict[str, Any], List[str]]:
    """``(the fields that match the layout, the names of those left out)``; a non-dict gives ``({}, [])``."""
    if not isinstance(extra, dict):
        return {}, []
    out: Dict[str, Any] = {}
    bad: List[str] = []
    for k, v in extra.items():
        check = _FIELDS.get(k)
        if check is None or check(v):
            out[k] = v
        else:
            bad.append(str(k))
    if "instructions" in out:
        out["instructions"] = clean_instructions(out["instructions"])
    return out, bad


def clean_instructions(v: Any) -> List[Dict[str, Any]]:
    """The instruction records of a kernel frame that have an integer line, with numeric samples
    and a dict of numeric stalls (others are left out)."""
    out = []
    for ins in v if isinstance(v, list) else ():
        if not isinstance(ins, dict) or type(ins.get("line")) is not int:
            continue
        stalls = ins.get("stalls")
        rec = dict(ins)
        rec["samples"] = finite(ins.get("samples"))
        rec["stalls"] = ({str(k): finite(x) for k, x in stalls.items()} if isinstance(stalls, dict) else {})
        if not isinstance(rec.get("file"), str):
            rec.pop("file", None)
        if not isinstance(rec.get("opcode"), str):
            rec.pop("opcode", None)
        out.append(rec)
    return out
