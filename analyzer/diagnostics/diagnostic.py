"""The :class:`Diagnostic` record every check returns (its own module so the checks need not import the
registry that imports them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass
class Diagnostic:
    id: str
    number: int
    title: str
    severity: str
    message: str
    fix: str
    file: Optional[str] = None
    line: Optional[int] = None
    source: Optional[str] = None
    evidence: Dict[str, Any] = field(default_factory=dict)
    changes: List[Dict[str, Any]] = field(default_factory=list)
    basis: str = "static"          # "static" | "samples" | "static+samples"

    @property
    def is_finding(self) -> bool:
        return self.severity in ("error", "warning")

    @property
    def location(self) -> str:
        if self.line is None:
            return ""
        f = (self.file or "?").replace("\\", "/").rsplit("/", 1)[-1]
        return f"{f}:{self.line}"

    def to_json(self) -> dict:
        return {"id": self.id, "number": self.number, "title": self.title, "severity": self.severity,
                "message": self.message, "file": self.file, "line": self.line, "source": self.source,
                "evidence": self.evidence, "fix": self.fix, "changes": self.changes, "basis": self.basis}


Check = Callable[[Any], List[Diagnostic]]
