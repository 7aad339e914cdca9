"""PC samples -> SASS instructions -> source lines -> profile frames (pure Python + numpy).

Nothing here talks to CUPTI or the GPU, so all of it runs on recorded data:

* :class:`SampleTable` holds raw samples in long form, one row per (CUPTI PC record, stall reason):
  correlation id, function, cubin CRC, function-relative pc offset, CUPTI stall-reason index,
  samples.  It reads and writes the CUPTI-shaped record dicts of the test data files
  (``{"function", "pc", "correlation_id", "cubin_crc", "function_index", "stalls": [[index, n]]}``).
* :meth:`SampleTable.by_launch` / :meth:`SampleTable.by_function` group it into :class:`PCCounts`
  (per pc, samples per *short* stall-reason name, counting one family: see :mod:`.stall_reasons`).
* :class:`KernelCode` is what is known about a kernel's code: its SASS instructions (pc -> opcode,
  file, line), the kernelc source map, the kernel's source text.
* :func:`attribute` maps one kernel's counts onto its code (:class:`KernelAttribution`: per line,
  per instruction, and what could not be placed), and :func:`annotate` writes that into a kernel's
  :class:`~profiler.format.ProfileNode` in the layout the viewer and the analyzer read.
"""

from __future__ import annotations

import ast
import inspect
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .stall_reasons import NOT_STALLED, counted_reasons

__all__ = [
    "SampleTable", "PCCounts", "KernelCode", "KernelAttribution", "attribute", "annotate",
    "kernel_source", "line_frame_name", "line_metrics",
]

SAMPLES, STALLED, STALL_PREFIX = "num_samples", "num_stalled_samples", "stalled_"
INSTRUCTION_BYTES = 16  # sm_70 and later


# ------------------------------------------------------------------------------------------ samples
class SampleTable:
    """Raw PC samples in long form (see the module docstring).

    ``stall_names`` maps CUPTI stall-reason index -> CUPTI name (as ``cuptiPCSamplingGetStallReasons``
    reports it); which of them count is decided by :func:`.stall_reasons.counted_reasons`.
    """

    _COLS = (("corr", np.uint32), ("func", np.uint32), ("crc", np.uint64), ("pc", np.uint64),
             ("fidx", np.uint32), ("reason", np.uint32), ("samples", np.uint64))

    def __init__(self, stall_names: Mapping[int, str] | None = None):
        self.stall_names: dict[int, str] = {int(k): str(v) for k, v in (stall_names or {}).items()}
        self.functions: list[str] = []
        self._func_ids: dict[str, int] = {}
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._cache: dict[str, np.ndarray] | None = None

    # building
    def function_id(self, name: str) -> int:
        i = self._func_ids.get(name)
        if i is None:
            i = self._func_ids[name] = len(self.functions)
            self.functions.append(name)
        return i

    def add(self, corr, func, crc, pc, fidx, reason, samples) -> None:
        """Append rows (array-likes of equal length; ``func`` holds :meth:`function_id` ids)."""
        cols = tuple(np.asarray(a, dtype=t).ravel() for a, (_, t) in zip((corr, func, crc, pc, fidx, reason, samples),
                                                                          self._COLS))
        n = len(cols[0])
        if any(len(c) != n for c in cols):
            raise ValueError("SampleTable.add: columns of different lengths")
        if n:
            self._chunks.append(cols)
            self._cache = None

    def columns(self) -> dict[str, np.ndarray]:
        if self._cache is None:
            if self._chunks:
                self._cache = {name: np.concatenate([c[i] for c in self._chunks])
                               for i, (name, _) in enumerate(self._COLS)}
            else:
                self._cache = {name: np.zeros(0, dtype=t) for name, t in self._COLS}
            self._chunks = [tuple(self._cache[name] for name, _ in self._COLS)] if len(self._cache["pc"]) else []
        return self._cache

    def __len__(self) -> int:
        return len(self.columns()["pc"])

    def counted(self) -> dict[int, str]:
        """``{CUPTI index: short name}`` of the counted family."""
        return counted_reasons(self.stall_names.items())

    def total_samples(self) -> int:
        c = self.columns()
        keep = np.isin(c["reason"], np.fromiter(self.counted(), dtype=np.uint32))
        return int(c["samples"][keep].sum())

    # CUPTI-shaped records (test data files)
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], stall_names: Mapping[int, str]) -> "SampleTable":
        t = cls(stall_names)
        cols: list[list[int]] = [[] for _ in cls._COLS]
        for r in records:
            f = t.function_id(str(r["function"]))
            for idx, n in r.get("stalls") or ():
                for col, v in zip(cols, (r.get("correlation_id", 0) or 0, f, r.get("cubin_crc", 0) or 0,
                                         r["pc"], r.get("function_index", 0) or 0, idx, n)):
                    col.append(int(v))
        t.add(*cols)
        return t

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per (correlation id, function, cubin, pc), stalls as ``[[index, samples], ...]``."""
        c = self.columns()
        out: dict[tuple, dict[str, Any]] = {}
        for corr, f, crc, pc, fidx, reason, n in zip(*(c[name].tolist() for name, _ in self._COLS)):
            key = (corr, f, crc, pc)
            rec = out.get(key)
            if rec is None:
                rec = out[key] = {"function": self.functions[f], "pc": pc, "correlation_id": corr,
                                  "cubin_crc": crc, "function_index": fidx, "stalls": []}
            rec["stalls"].append([reason, n])
        return list(out.values())

    # grouping
    def by_launch(self) -> dict[int, "PCCounts"]:
        """Counts per correlation id (kernel launch); records without one (0) are grouped per
        function under negative keys ``-1 - function id``."""
        c = self.columns()
        keys = np.where(c["corr"] != 0, c["corr"].astype(np.int64), -1 - c["func"].astype(np.int64))
        return self._group(keys)

    def by_function(self) -> dict[tuple[str, int], "PCCounts"]:
        """Counts per (function name, cubin CRC), all launches together."""
        c = self.columns()
        if not len(c["pc"]):
            return {}
        pairs = np.stack([c["func"].astype(np.uint64), c["crc"]], axis=1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        groups = self._group(inv.ravel().astype(np.int64))
        return {(self.functions[int(uniq[g][0])], int(uniq[g][1])): pc for g, pc in groups.items()}

    def _group(self, keys: np.ndarray) -> dict[int, "PCCounts"]:
        c = self.columns()
        counted = self.counted()
        if not len(c["pc"]) or not counted:
            return {}
        lut_size = max(max(counted) + 1, int(c["reason"].max()) + 1)
        names = sorted(set(counted.values()))
        rid_of = {n: i for i, n in enumerate(names)}
        lut = np.full(lut_size, -1, dtype=np.int64)
        for idx, short in counted.items():
            lut[idx] = rid_of[short]
        rid = lut[c["reason"].astype(np.int64)]
        keep = (rid >= 0) & (c["samples"] > 0)
        if not keep.any():
            return {}
        k, pc, r, n = keys[keep], c["pc"][keep].astype(np.int64), rid[keep], c["samples"][keep]
        rows = np.stack([k, pc, r], axis=1)
        uniq, inv = np.unique(rows, axis=0, return_inverse=True)
        sums = np.bincount(inv.ravel(), weights=n.astype(np.float64), minlength=len(uniq))
        # Per group: its function, cubin and correlation ids.
        kk = keys[keep]
        meta: dict[int, tuple[int, int, set[int]]] = {}
        ukeys, first = np.unique(kk, return_index=True)
        fsel, csel, corr_sel = c["func"][keep], c["crc"][keep], c["corr"][keep]
        for key, i in zip(ukeys.tolist(), first.tolist()):
            meta[key] = (int(fsel[i]), int(csel[i]), set())
        pair = np.unique(np.stack([kk, corr_sel.astype(np.int64)], axis=1), axis=0)
        for key, corr in pair.tolist():
            if corr:
                meta[key][2].add(int(corr))
        out: dict[int, PCCounts] = {}
        for (key, p, ridx), s in zip(uniq.tolist(), sums.tolist()):
            g = out.get(key)
            if g is None:
                f, crc, corrs = meta[key]
                g = out[key] = PCCounts(self.functions[f], crc, corrs)
            stalls = g.pcs.setdefault(p, {})
            stalls[names[ridx]] = stalls.get(names[ridx], 0) + int(round(s))
        return out


@dataclass
class PCCounts:
    """One kernel's samples: ``pcs[pc] = {short reason: samples}`` (counted family only)."""
    function: str
    cubin_crc: int = 0
    correlation_ids: set[int] = field(default_factory=set)
    pcs: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(sum(s.values()) for s in self.pcs.values())

    def merge(self, other: "PCCounts") -> "PCCounts":
        """Add ``other``'s samples into this one (same kernel, more launches); returns self."""
        for pc, stalls in other.pcs.items():
            mine = self.pcs.setdefault(pc, {})
            for r, n in stalls.items():
                mine[r] = mine.get(r, 0) + n
        self.correlation_ids |= other.correlation_ids
        return self

    def copy(self) -> "PCCounts":
        return PCCounts(self.function, self.cubin_crc, set(self.correlation_ids),
                        {pc: dict(s) for pc, s in self.pcs.items()})


# --------------------------------------------------------------------------------------------- code
def kernel_source(function: Any = None, *, file: str | None = None, name: str | None = None) -> dict | None:
    """``{"file", "first_line", "lines"}`` for a kernel: from its Python function (a kernelc
    ``JITFunction``/``DeviceFunction`` or a plain function; decorators included), else by finding
    ``def <name>`` in ``file``.  None when neither works."""
    fn = function
    for _ in range(8):  # JITFunction.fn -> DeviceFunction.fn -> the Python function
        if fn is None or inspect.isfunction(fn):
            break
        fn = getattr(fn, "fn", None)
    if fn is not None and inspect.isfunction(fn):
        try:
            lines, first = inspect.getsourcelines(fn)
            path = inspect.getsourcefile(fn) or inspect.getfile(fn)
            return {"file": os.path.abspath(path), "first_line": int(first),
                    "lines": [ln.rstrip("\r\n") for ln in lines]}
        except (OSError, TypeError):
            pass
    if file and name:
        try:
            with open(file, encoding="utf-8") as f:
                text = f.read()
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            return None
        all_lines = text.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                end = getattr(node, "end_lineno", None) or node.lineno
                return {"file": file, "first_line": start, "lines": all_lines[start - 1:end]}
    return None


class KernelCode:
    """A kernel's code as attribution needs it: ``pc -> (opcode, file, line)`` and its source.

    Build with :meth:`from_compiled` (a kernelc ``CompiledKernel``), :meth:`from_cubin` (any cubin,
    e.g. a module's from CUPTI), or directly from instruction tuples.  Instructions are loaded
    lazily (nvdisasm, ~0.2 s), only for kernels that were sampled.
    """

    def __init__(self, name: str, instructions: Iterable | None = None, source_map: Any = None,
                 source: dict | None = None, cubin_crc: int | None = None, cache_key: str | None = None,
                 loader=None):
        self.name = name
        self.source_map = source_map
        self.source = source
        self.cubin_crc = cubin_crc
        self.cache_key = cache_key
        self._loader = loader
        self._instrs: dict[int, tuple[str | None, str | None, int | None]] | None = None
        if instructions is not None:
            self._instrs = self._table(instructions)

    def _table(self, instructions: Iterable) -> dict[int, tuple[str | None, str | None, int | None]]:
        table: dict[int, tuple[str | None, str | None, int | None]] = {}
        for ins in instructions:
            if isinstance(ins, Mapping):
                pc, op, file, line, fn = ins.get("pc"), ins.get("opcode"), ins.get("file"), ins.get("line"), ins.get("function")
            elif isinstance(ins, (tuple, list)):
                pc, op, file, line = (list(ins) + [None] * 4)[:4]
                fn = None
            else:  # cubintools.sass.Instr
                pc, op, file, line, fn = ins.pc, ins.opcode, ins.file, ins.line, getattr(ins, "function", None)
            if fn and fn != self.name:
                continue
            table[int(pc)] = (op, file, int(line) if line else None)
        return table

    @property
    def instructions(self) -> dict[int, tuple[str | None, str | None, int | None]]:
        if self._instrs is None:
            found: Iterable = ()
            if self._loader is not None:
                try:
                    found = self._loader() or ()
                except Exception:  # no nvdisasm, a cubin it cannot read: lines come from the map alone
                    found = ()
            self._instrs = self._table(found)
        return self._instrs

    @classmethod
    def from_compiled(cls, compiled: Any, function: Any = None, cubin_crc: int | None = None) -> "KernelCode":
        """From a kernelc ``CompiledKernel`` (and its ``JITFunction`` for the source text)."""
        name = compiled.name

        def load():
            art = getattr(compiled, "artifacts", None)
            if art is not None and getattr(art, "instructions", None) is not None:
                return art.instructions
            from cubintools.sass import instructions
            return instructions(compiled.asm["cubin"])

        smap = getattr(compiled, "source_map", None)
        src = kernel_source(function) if function is not None else None
        if src is None and smap is not None:
            files = _kernel_files(smap, name)
            if files:
                src = kernel_source(file=files[0], name=name)
        return cls(name, source_map=smap, source=src, cubin_crc=cubin_crc,
                   cache_key=getattr(compiled, "cache_key", None), loader=load)

    @classmethod
    def from_cubin(cls, cubin: bytes, function_name: str, cubin_crc: int | None = None,
                   disassemble: bool = True) -> "KernelCode":
        """From any cubin: lines from its ``.debug_line`` (if it has one), opcodes from nvdisasm."""
        smap = None
        try:
            from cubintools.sourcemap import SourceMap
            smap = SourceMap.from_cubin(cubin)
            if not smap:
                smap = None
        except Exception:
            smap = None

        def load():
            from cubintools.sass import disassemble as dis, parse_sass
            # nvdisasm's -fun takes symbol indices, not names: disassemble all, keep this function.
            return [i for i in parse_sass(dis(cubin, line_info=smap is not None)) if i.function == function_name]

        src = None
        if smap is not None:
            files = _kernel_files(smap, function_name)
            if files and files[0].endswith(".py"):
                src = kernel_source(file=files[0], name=function_name)
        return cls(function_name, source_map=smap, source=src, cubin_crc=cubin_crc,
                   loader=load if disassemble else None)

    def locate(self, pc: int) -> tuple[str, int] | None:
        """``(file, line)`` of the instruction at ``pc``, or None."""
        if self.source_map is not None:
            fn = self.name if self.name in getattr(self.source_map, "functions", {}) else None
            try:
                hit = self.source_map.pc_to_line(pc, fn)
            except ValueError:
                hit = None
            if hit is not None:
                return hit[0], int(hit[1])
        ins = self.instructions.get(pc)
        if ins is not None and ins[1] and ins[2]:
            return ins[1], ins[2]
        return None

    def opcode(self, pc: int) -> str | None:
        ins = self.instructions.get(pc)
        return ins[0] if ins else None


def _kernel_files(smap: Any, name: str) -> list[str]:
    """Files of a function's lines, most used first."""
    try:
        fn = name if name in smap.functions else None
        pairs = smap.lines(fn)
    except Exception:
        return []
    count: dict[str, int] = {}
    for f, _ in pairs:
        count[f] = count.get(f, 0) + 1
    return sorted(count, key=lambda f: -count[f])


# -------------------------------------------------------------------------------------- attribution
@dataclass
class KernelAttribution:
    """One kernel's samples placed on its code.

    ``lines[(file, line)] = {reason: samples}``; ``instructions`` the sampled instructions
    (``{"pc", "opcode", "file", "line", "samples", "stalls"}``, pc order); ``unattributed`` the
    samples at pcs without a source line (all of them for a kernel without line info).
    """
    function: str
    lines: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    instructions: list[dict[str, Any]] = field(default_factory=list)
    unattributed: dict[str, int] = field(default_factory=dict)
    launches: int = 0
    cubin_crc: int = 0

    @property
    def total(self) -> int:
        return sum(sum(s.values()) for s in self.lines.values()) + sum(self.unattributed.values())

    def top_lines(self, n: int | None = None) -> list[tuple[str, int, int]]:
        """``[(file, line, samples)]`` by samples, highest first (ties: file, line)."""
        rows = sorted(((f, ln, sum(s.values())) for (f, ln), s in self.lines.items()),
                      key=lambda t: (-t[2], t[0], t[1]))
        return rows if n is None else rows[:n]


def attribute(counts: PCCounts, code: KernelCode | None = None) -> KernelAttribution:
    """Place ``counts`` on ``code`` (None: per-kernel totals and per-pc detail only)."""
    out = KernelAttribution(counts.function, launches=len(counts.correlation_ids), cubin_crc=counts.cubin_crc)
    for pc in sorted(counts.pcs):
        stalls = counts.pcs[pc]
        n = sum(stalls.values())
        if not n:
            continue
        where = code.locate(pc) if code is not None else None
        op = code.opcode(pc) if code is not None else None
        out.instructions.append({"pc": int(pc), "opcode": op, "file": where[0] if where else None,
                                 "line": where[1] if where else None, "samples": n, "stalls": dict(stalls)})
        target = out.lines.setdefault(where, {}) if where else out.unattributed
        for r, k in stalls.items():
            target[r] = target.get(r, 0) + k
    return out


def line_frame_name(file: str, line: int) -> str:
    """The per-line frame's name: ``"matmul.py:42"`` (the file's basename, as the viewer shows it)."""
    return f"{os.path.basename(file)}:{int(line)}"


def line_metrics(stalls: Mapping[str, int]) -> dict[str, int]:
    """``num_samples``, ``num_stalled_samples`` (all but "selected") and ``stalled_<reason>``."""
    n = int(sum(stalls.values()))
    m = {SAMPLES: n, STALLED: n - int(sum(v for r, v in stalls.items() if r in NOT_STALLED))}
    for r in sorted(stalls):
        if stalls[r]:
            m[STALL_PREFIX + r] = int(stalls[r])
    return m


def annotate(node: Any, attr: KernelAttribution, code: KernelCode | None = None,
             info: Mapping[str, Any] | None = None) -> None:
    """Write ``attr`` into a kernel's ``ProfileNode``.

    * one child per source line, frame ``{"name": "file.py:42", "type": "line"}``, with
      ``num_samples``, ``num_stalled_samples`` and ``stalled_<reason>`` (added to an existing child of
      that name, so calling this for several launch groups of one node accumulates);
    * samples at pcs without a line go into the kernel frame's own metrics (metrics are exclusive,
      so inclusive totals still add up);
    * ``extra["instructions"]`` (per sampled instruction, merged by pc), ``extra["source"]`` when
      the code knows it and the node has none, ``extra["kind"] = "kernel"``, ``extra["kernel"]``,
      and ``extra["pcsampling"]`` (``info`` plus totals).
    """
    extra = node.extra if node.extra is not None else {}
    node.extra = extra
    extra.setdefault("kind", "kernel")
    extra.setdefault("kernel", attr.function)
    if code is not None and code.source and "source" not in extra:
        extra["source"] = dict(code.source)
    for (file, line), stalls in sorted(attr.lines.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        node.child(line_frame_name(file, line), "line").add_metrics(line_metrics(stalls))
    if attr.unattributed:
        node.add_metrics(line_metrics(attr.unattributed))
    merged = {int(i["pc"]): i for i in extra.get("instructions") or ()}
    for ins in attr.instructions:
        old = merged.get(ins["pc"])
        if old is None:
            merged[ins["pc"]] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in ins.items()}
        else:
            old["samples"] = old.get("samples", 0) + ins["samples"]
            st = old.setdefault("stalls", {})
            for r, n in ins["stalls"].items():
                st[r] = st.get(r, 0) + n
    extra["instructions"] = [merged[pc] for pc in sorted(merged)]
    ps = dict(extra.get("pcsampling") or {})
    ps.update(info or {})
    ps["samples"] = int(ps.get("samples", 0)) + attr.total
    ps["unattributed_samples"] = int(ps.get("unattributed_samples", 0)) + sum(attr.unattributed.values())
    ps["launches_sampled"] = int(ps.get("launches_sampled", 0)) + attr.launches
    if attr.cubin_crc:
        ps["cubin_crc"] = attr.cubin_crc
    extra["pcsampling"] = ps


def rank_lines(attrs: Sequence[KernelAttribution]) -> list[tuple[str, int, int]]:
    """Top lines over several attributions of one kernel (e.g. several launches)."""
    acc: dict[tuple[str, int], int] = {}
    for a in attrs:
        for (f, ln), s in a.lines.items():
            acc[(f, ln)] = acc.get((f, ln), 0) + sum(s.values())
    return sorted(((f, ln, n) for (f, ln), n in acc.items()), key=lambda t: (-t[2], t[0], t[1]))
