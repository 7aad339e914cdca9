"""Recorded PC samples as a JSON file (test data, bench comparisons): write, read, attribute.

Layout (``"format": "kprof-pcsampling"``, version 1)::

    {"format", "version", "synthetic": bool, "description", "info": {period, ...},
     "stall_reasons": [[cupti index, cupti name], ...],          # the device's table, both families
     "records": [{"function", "pc", "correlation_id", "cubin_crc", "function_index",
                  "stalls": [[cupti index, samples], ...]}, ...],   # as CUPTI returned them
     "kernels": [{"name", "cubin_crc", "cache_key", "cubin_b64", "source": {file, first_line, lines}}],
     "expected": {kernel name: {"top_lines": [[file basename, line, samples], ...]}}}  # optional

Records keep CUPTI's raw stall-reason indices; the names table resolves them, so a reader applies
the same family rule as the live sampler.  The cubins make the file self-contained: instructions and
lines are recomputed from them (nvdisasm, the cubin's ``.debug_line``), exactly as for live data.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Iterable

from .attribution import KernelAttribution, KernelCode, SampleTable, attribute

__all__ = ["FORMAT", "dump", "load", "Recorded", "top_lines"]

FORMAT, VERSION = "kprof-pcsampling", 1


def dump(table: SampleTable, kernels: Iterable[dict], *, info: dict | None = None, description: str = "",
         synthetic: bool = False, expected: dict | None = None, extra: dict | None = None) -> dict:
    obj = {"format": FORMAT, "version": VERSION, "synthetic": bool(synthetic), "description": description,
           "info": dict(info or {}),
           "stall_reasons": [[int(i), n] for i, n in sorted(table.stall_names.items())],
           "records": table.to_records(), "kernels": list(kernels)}
    if expected:
        obj["expected"] = expected
    if extra:
        obj.update(extra)
    return obj


class Recorded:
    """A loaded test-data file: ``table`` (:class:`SampleTable`), ``codes`` (kernel name ->
    :class:`KernelCode` from the stored cubin), and the raw object."""

    def __init__(self, obj: dict, path: str = ""):
        if obj.get("format") != FORMAT:
            raise ValueError(f"{path or 'data'}: not a {FORMAT} file")
        if int(obj.get("version", 0)) > VERSION:
            raise ValueError(f"{path}: format version {obj['version']} is newer than this reader ({VERSION})")
        self.obj, self.path = obj, path
        self.stall_names = {int(i): str(n) for i, n in obj["stall_reasons"]}
        self.table = SampleTable.from_records(obj["records"], self.stall_names)
        self.codes: dict[str, KernelCode] = {}
        for k in obj.get("kernels", ()):
            cubin = base64.b64decode(k["cubin_b64"]) if k.get("cubin_b64") else None
            if cubin is None:
                continue
            code = KernelCode.from_cubin(cubin, k["name"], k.get("cubin_crc") or None)
            if k.get("source") and not code.source:
                code.source = k["source"]
            code.cache_key = k.get("cache_key")
            self.codes[k["name"]] = code

    @property
    def synthetic(self) -> bool:
        return bool(self.obj.get("synthetic"))

    @property
    def expected(self) -> dict:
        return self.obj.get("expected") or {}

    def code_for(self, function: str, cubin_crc: int = 0) -> KernelCode | None:
        code = self.codes.get(function)
        if code is None:
            return None
        if cubin_crc and code.cubin_crc and code.cubin_crc != cubin_crc:
            return None
        return code

    def attribute(self) -> dict[tuple[str, int], KernelAttribution]:
        return {key: attribute(counts, self.code_for(*key)) for key, counts in self.table.by_function().items()}


def load(path: str | os.PathLike) -> Recorded:
    with open(path) as f:
        return Recorded(json.load(f), os.fspath(path))


def top_lines(attrs: dict[tuple[str, int], KernelAttribution], kernel: str, n: int | None = 10) -> list[list]:
    """``[[file basename, line, samples], ...]`` of one kernel over all its (function, CRC) groups,
    highest first (ties: basename, line) -- the ranking stored as ``expected`` in test data."""
    acc: dict[tuple[str, int], int] = {}
    for (fname, _crc), a in attrs.items():
        if fname != kernel:
            continue
        for file, line, k in a.top_lines():
            key = (os.path.basename(file), line)
            acc[key] = acc.get(key, 0) + k
    rows = sorted(([f, ln, k] for (f, ln), k in acc.items()), key=lambda t: (-t[2], t[0], t[1]))
    return rows if n is None else rows[:n]
