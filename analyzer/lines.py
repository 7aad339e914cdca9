"""Per-line PC samples of a kernel: the hottest source lines, their stall reasons and source text.

Samples come from the kernel frame's line children (kprof: type ``"line"``, name ``"file.py:42"``,
metrics ``num_samples``, ``num_stalled_samples``, ``stalled_<reason>``; Proton's PC-sampling frames
are named ``"/dir/file.py:42@function"``) or, when there are none, from the frame's
``kprof.instructions`` list (``{"pc", "opcode", "line", "samples", "stalls"}``).  Instruction records
are always read for the hottest SASS opcode of each line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import stalls as S
from .facts import KernelFacts, LineStat, base
from .schema import clean_extra, clean_instructions, finite

SAMPLE_FRAME = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?:@(?P<func>.*))?$")
SAMPLES, STALLED, STALL_PREFIX = "num_samples", "num_stalled_samples", "stalled_"


def _num(v) -> float:
    return finite(v)   # NaN, inf, text and bools from a hand-edited profile count as 0


def is_sample_frame(node) -> bool:
    return (node.frame_type == "line" or SAMPLES in node.metrics) and bool(SAMPLE_FRAME.match(node.name))


def collect(facts: KernelFacts, frames: Iterable[Any]) -> None:
    """Fill ``facts.lines`` and the kernel-wide sample totals from the kernel's profile frames."""
    frames = list(frames)
    stats: Dict[Tuple[str, int], LineStat] = {}
    from_frames = False
    for f in frames:
        stack = list(f.children)
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if not is_sample_frame(node):
                continue
            m = SAMPLE_FRAME.match(node.name)
            key = (base(m.group("file")), int(m.group("line")))
            facts.add_files([m.group("file")])
            s = stats.setdefault(key, LineStat(key[0], key[1]))
            n = _num(node.metrics.get(SAMPLES))
            s.samples += n
            reasons = {k: v for k, v in node.metrics.items() if k.startswith(STALL_PREFIX)}
            S.merge(s.stalls, reasons)
            if STALLED in node.metrics:
                s.stalled += _num(node.metrics.get(STALLED))
            else:
                s.stalled += S.stalled_total({S.normalize(k): _num(v) for k, v in reasons.items()})
            from_frames = True
    src_file = None
    for f in frames:
        extra = clean_extra(f.extra)[0]
        if isinstance(extra.get("source"), dict) and extra["source"].get("file"):
            src_file = extra["source"]["file"]
            break
    for f in frames:
        for ins in clean_instructions(clean_extra(f.extra)[0].get("instructions")):
            file = ins.get("file") if isinstance(ins.get("file"), str) else (src_file or "?")
            key = (base(file), ins["line"])
            s = stats.setdefault(key, LineStat(key[0], key[1]))
            n = _num(ins.get("samples"))
            if not from_frames:
                s.samples += n
                st: Dict[str, float] = {}
                S.merge(st, ins.get("stalls") or {})
                for k, v in st.items():
                    s.stalls[k] = s.stalls.get(k, 0) + v
                s.stalled += S.stalled_total(st)
            if n and isinstance(ins.get("opcode"), str):
                s.opcodes[ins["opcode"]] = s.opcodes.get(ins["opcode"], 0) + n
    facts.lines = {k: v for k, v in stats.items() if v.samples > 0 or v.opcodes}
    facts.total_samples = sum(s.samples for s in facts.lines.values())
    facts.total_stalled = sum(s.stalled for s in facts.lines.values())
    totals: Dict[str, float] = {}
    for s in facts.lines.values():
        for k, v in s.stalls.items():
            totals[k] = totals.get(k, 0) + v
    facts.stall_totals = totals


@dataclass
class HotLine:
    file: str
    line: int
    samples: float
    share: float                    # of the kernel's samples
    stalled_share: float            # of this line's samples
    top_stalls: List[Tuple[str, float]]   # (reason, share of this line's samples)
    hot_instruction: Optional[str]
    text: Optional[str]
    via: List[Tuple[str, int]] = None    # kernel lines that inline this line (library code), else None

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "samples": self.samples, "share": round(self.share, 4),
                "stalled_share": round(self.stalled_share, 4),
                "stalls": [{"reason": r, "share": round(v, 4)} for r, v in self.top_stalls],
                "hot_instruction": self.hot_instruction, "source": self.text,
                "inlined_into": [{"file": f, "line": ln} for f, ln in self.via] if self.via else None}


def hot_lines(facts: KernelFacts, n: int = 8, top_stalls: int = 3) -> List[HotLine]:
    """The ``n`` lines with the most samples, with their share, main stalls and source text."""
    out = []
    total = facts.total_samples or 1.0
    for s in facts.hot_lines(n):
        stalls = [(r, v / s.samples) for r, v in s.top_stalls(top_stalls)] if s.samples else []
        hot = max(s.opcodes.items(), key=lambda kv: kv[1])[0] if s.opcodes else None
        users = facts.user_lines(s.file, s.line)
        via = users if users and users != [(s.file, s.line)] else None
        out.append(HotLine(s.file, s.line, s.samples, s.samples / total,
                           s.stalled / s.samples if s.samples else 0.0, stalls, hot,
                           facts.source_text(s.file, s.line), via))
    return out
