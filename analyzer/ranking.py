"""Order diagnoses by the kernel time they could save, so the first line of a report is the biggest win.

Each diagnosis gets ``evidence["est_time_saved_share"]`` (a fraction of the kernel's time) and, with
a measured time, ``est_time_saved_ns``:

* a check that models its own saving sets the share itself (``uncoalesced-access``: the line's share
  of samples, else its share of the kernel's bytes, times ``1 - sector efficiency``);
* a finding on a line with samples: half the line's share of samples (the line's stalls, taken as
  halved by the fix);
* a kernel-wide finding: half the roofline's headroom when the time is measured, else half the
  kernel (warnings/errors) -- an upper bound that keeps kernel-wide problems above line-level guesses
  without numbers;
* infos: 0 (nothing to win by acting on them).
"""
from __future__ import annotations

from typing import List, Optional

KEY = "est_time_saved_share"


def estimate(facts, d, headroom: Optional[float]) -> float:
    ev = d.evidence
    if KEY in ev and ev[KEY] is not None:
        return float(ev[KEY])
    if not d.is_finding:
        return 0.0
    if ev.get("line_share_of_kernel") is not None:
        return 0.5 * float(ev["line_share_of_kernel"])
    if headroom is not None:
        return 0.5 * headroom
    return 0.5 if d.severity == "error" else 0.25


def rank(facts, diags: List, roofline=None) -> List:
    headroom = roofline.headroom if roofline is not None else None
    for d in diags:
        share = round(min(1.0, max(0.0, estimate(facts, d, headroom))), 4)
        d.evidence[KEY] = share
        if facts.time_ns:
            d.evidence["est_time_saved_ns"] = round(share * facts.time_ns, 1)
    from .diagnostics import SEVERITY_RANK
    return sorted(diags, key=lambda d: (-d.evidence[KEY], SEVERITY_RANK.get(d.severity, 9), d.number, d.line or 0))
