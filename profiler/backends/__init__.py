"""Backend selection: ``cupti`` when CUPTI works here, else ``cpu`` (said once on stderr).

``backend=None`` (or ``"auto"``) and the ``KPROF_BACKEND`` environment variable choose; asking for
``cupti`` where it cannot work also falls back to ``cpu`` with the message: a profiler must never be
the reason a program fails.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

from .cpu import CpuBackend

__all__ = ["select", "CpuBackend", "fallback_message"]

_said = False
BACKENDS = ("auto", "cupti", "cpu")


def fallback_message(reason: str) -> str:
    return (f"kprof: {reason}; using the cpu backend: kernelc interpreter launches and scopes, "
            "timed with the host clock")


def _say_once(reason: str) -> None:
    global _said
    if not _said:
        _said = True
        print(fallback_message(reason), file=sys.stderr, flush=True)


def select(requested: Optional[str] = None, *, kernel_activity: str = "concurrent"):
    """The backend object for a new session."""
    req = (requested or os.environ.get("KPROF_BACKEND") or "auto").lower()
    if req not in BACKENDS:
        raise ValueError(f"unknown backend {requested!r}; expected one of {', '.join(BACKENDS)}")
    if req == "cpu":
        return CpuBackend()
    from .. import options
    for knob in ("cupti_attribution", "cupti_records", "cupti_buffer_bytes", "cupti_callbacks",
                 "cupti_runtime_callbacks"):
        options.get(knob)  # a malformed value is the user's error to fix, like an unknown backend
    from .cupti import BackendUnavailable, CuptiBackend
    try:
        return CuptiBackend.acquire(kernel_activity)
    except BackendUnavailable as e:
        _say_once(str(e))
    except Exception as e:  # anything unexpected while probing CUPTI: still never fail the program
        _say_once(f"CUPTI unavailable ({type(e).__name__}: {e})")
    return CpuBackend()
