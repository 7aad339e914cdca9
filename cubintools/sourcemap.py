"""SASS pc <-> source line maps, per function, JSON-serialisable.

A :class:`SourceMap` is built from the cubin's DWARF ``.debug_line`` (:func:`SourceMap.from_cubin`; ~1 ms, no
nvdisasm needed) or from disassembled instructions (:func:`SourceMap.from_instructions`).  Both give the same map:
nvdisasm's ``-g`` annotations are read from the same ``.debug_line`` (the tests compare them instruction by
instruction).  pcs are byte offsets from the start of the function, as CUPTI's PC sampling reports them; on
sm_70 and later every instruction is 16 bytes.

The profiler stores ``to_dict()`` in profiles and the analyzer reads it back with ``from_dict()``.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["SourceMap", "FunctionLines"]

FORMAT_VERSION = 1


@dataclass
class FunctionLines:
    """Line ranges of one function: ``starts[i] <= pc < ends[i]`` is ``files[file_ids[i]]:lines[i]``."""
    starts: List[int] = field(default_factory=list)
    ends: List[int] = field(default_factory=list)
    file_ids: List[int] = field(default_factory=list)
    lines: List[int] = field(default_factory=list)

    def add(self, start: int, end: int, file_id: int, line: int) -> None:
        if end <= start:
            return
        if self.starts and self.ends[-1] == start and self.file_ids[-1] == file_id and self.lines[-1] == line:
            self.ends[-1] = end          # merge with the previous range
            return
        self.starts.append(start)
        self.ends.append(end)
        self.file_ids.append(file_id)
        self.lines.append(line)


class SourceMap:
    """Maps SASS pcs to ``(file, line)`` and lines back to pcs, for each function of a cubin."""

    def __init__(self, files: Optional[List[str]] = None, functions: Optional[Dict[str, FunctionLines]] = None,
                 default_function: Optional[str] = None, instruction_bytes: int = 16):
        self.files: List[str] = list(files or [])
        self.functions: Dict[str, FunctionLines] = dict(functions or {})
        self.default_function = default_function
        self.instruction_bytes = instruction_bytes
        self._file_index = {f: i for i, f in enumerate(self.files)}

    # ------------------------------------------------------------------------------------------- building
    def _file_id(self, path: str) -> int:
        i = self._file_index.get(path)
        if i is None:
            i = self._file_index[path] = len(self.files)
            self.files.append(path)
        return i

    @classmethod
    def from_sequences(cls, sequences, default_function: Optional[str] = None,
                       instruction_bytes: int = 16) -> "SourceMap":
        """From decoded ``.debug_line`` sequences (:func:`.cubin.line_sequences`)."""
        sm = cls(default_function=default_function, instruction_bytes=instruction_bytes)
        for seq in sequences:
            if seq.function is None:
                continue
            fl = sm.functions.setdefault(seq.function, FunctionLines())
            # Several rows at one address: the last one describes the instruction there.
            rows: List[Tuple[int, str, int]] = []
            for pc, path, line in seq.rows:
                if rows and rows[-1][0] == pc:
                    rows[-1] = (pc, path, line)
                else:
                    rows.append((pc, path, line))
            for i, (pc, path, line) in enumerate(rows):
                end = rows[i + 1][0] if i + 1 < len(rows) else seq.end
                if line > 0 and path:
                    fl.add(pc, end, sm._file_id(path), line)
        return sm

    @classmethod
    def from_cubin(cls, cubin: bytes, default_function: Optional[str] = None) -> "SourceMap":
        """From the cubin's ``.debug_line`` (empty map if it has none)."""
        from .cubin import line_sequences
        return cls.from_sequences(line_sequences(cubin), default_function)

    @classmethod
    def from_instructions(cls, instructions: Iterable, default_function: Optional[str] = None,
                          instruction_bytes: int = 16) -> "SourceMap":
        """From :class:`.sass.Instr` objects (``pc``, ``function``, ``file``, ``line``)."""
        sm = cls(default_function=default_function, instruction_bytes=instruction_bytes)
        for ins in instructions:
            if ins.line and ins.file:
                sm.functions.setdefault(ins.function, FunctionLines()).add(
                    ins.pc, ins.pc + instruction_bytes, sm._file_id(ins.file), ins.line)
        return sm

    def set_lines(self, function: str, lines: Dict[int, Tuple[str, int]]) -> int:
        """Attribute the instructions at ``lines``' pcs of ``function`` to the given ``(file, line)``s (a line
        the cubin's table got wrong and its producer knows). Returns how many changed."""
        fl = self.functions.get(function)
        if fl is None or not lines:
            return 0
        step = self.instruction_bytes
        per_pc = {}
        for s, e, f, ln in zip(fl.starts, fl.ends, fl.file_ids, fl.lines):
            for pc in range(s, e, step):
                per_pc[pc] = (f, ln)
        changed = 0
        for pc, (path, line) in lines.items():
            new = (self._file_id(path), int(line))
            if per_pc.get(pc) != new:
                per_pc[pc] = new
                changed += 1
        if changed:
            out = FunctionLines()
            for pc in sorted(per_pc):
                f, ln = per_pc[pc]
                out.add(pc, pc + step, f, ln)
            self.functions[function] = out
        return changed

    # -------------------------------------------------------------------------------------------- queries
    def _function(self, function: Optional[str]) -> Optional[FunctionLines]:
        if function is None:
            function = self.default_function
            if function is None and len(self.functions) == 1:
                function = next(iter(self.functions))
            if function is None:
                if not self.functions:
                    return None
                raise ValueError(f"the map covers {len(self.functions)} functions "
                                 f"({', '.join(self.functions)}): name one")
        return self.functions.get(function)

    def pc_to_line(self, pc: int, function: Optional[str] = None) -> Optional[Tuple[str, int]]:
        """``(file, line)`` of the instruction at ``pc`` of ``function`` (default: the kernel), or None."""
        fl = self._function(function)
        if fl is None:
            return None
        i = bisect.bisect_right(fl.starts, pc) - 1
        if i < 0 or pc >= fl.ends[i]:
            return None
        return self.files[fl.file_ids[i]], fl.lines[i]

    def _matching_file_ids(self, file: str) -> List[int]:
        if file in self._file_index:
            return [self._file_index[file]]
        tail = "/" + file.lstrip("/")
        return [i for i, f in enumerate(self.files) if f.endswith(tail)]

    def line_to_pcs(self, file: str, line: int, function: Optional[str] = None) -> List[int]:
        """pcs of the instructions of ``function`` (default: the kernel) attributed to ``file:line``.

        ``file`` is the path as recorded, or a trailing part of it (``"kern.py"``).
        """
        fl = self._function(function)
        if fl is None:
            return []
        ids = set(self._matching_file_ids(file))
        step = self.instruction_bytes
        out: List[int] = []
        for s, e, f, ln in zip(fl.starts, fl.ends, fl.file_ids, fl.lines):
            if ln == line and f in ids:
                out.extend(range(s, e, step))
        return out

    def lines(self, function: Optional[str] = None) -> List[Tuple[str, int]]:
        """The distinct ``(file, line)`` pairs of ``function``, in pc order of first appearance."""
        fl = self._function(function)
        if fl is None:
            return []
        seen, out = set(), []
        for f, ln in zip(fl.file_ids, fl.lines):
            key = (self.files[f], ln)
            if key not in seen:
                seen.add(key)
                out.append(key)
        return out

    def __bool__(self) -> bool:
        return any(fl.starts for fl in self.functions.values())

    def __eq__(self, other) -> bool:
        return isinstance(other, SourceMap) and self._canonical() == other._canonical()

    def _canonical(self):
        return {name: [(s, e, self.files[f], ln) for s, e, f, ln in zip(fl.starts, fl.ends, fl.file_ids, fl.lines)]
                for name, fl in self.functions.items() if fl.starts}

    def __repr__(self) -> str:
        n = sum(len(fl.starts) for fl in self.functions.values())
        return f"SourceMap({len(self.functions)} functions, {n} ranges, {len(self.files)} files)"

    # -------------------------------------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        """JSON-serialisable form: ``{"version", "files", "default_function", "instruction_bytes",
        "functions": {name: [[start, end, file_index, line], ...]}}``."""
        return {
            "version": FORMAT_VERSION,
            "files": list(self.files),
            "default_function": self.default_function,
            "instruction_bytes": self.instruction_bytes,
            "functions": {name: [[s, e, f, ln] for s, e, f, ln in zip(fl.starts, fl.ends, fl.file_ids, fl.lines)]
                          for name, fl in self.functions.items()},
        }

    @classmethod
    def from_dict(cls, d: dict) -> "SourceMap":
        if d.get("version", FORMAT_VERSION) > FORMAT_VERSION:
            raise ValueError(f"source map format {d['version']} is newer than this kernelc reads "
                             f"({FORMAT_VERSION})")
        functions = {}
        for name, ranges in d.get("functions", {}).items():
            fl = FunctionLines()
            for s, e, f, ln in ranges:
                fl.starts.append(int(s))
                fl.ends.append(int(e))
                fl.file_ids.append(int(f))
                fl.lines.append(int(ln))
            functions[name] = fl
        return cls(d.get("files", []), functions, d.get("default_function"), int(d.get("instruction_bytes", 16)))
