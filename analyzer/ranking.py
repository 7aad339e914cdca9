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

With a measured time the roofline caps every estimate: a kernel at 80 % of its bound's peak cannot
get more than 20 % faster, whatever a stall or a model suggests (``est_time_saved_uncapped`` keeps the
check's own estimate).  A warning whose capped saving is below :data:`MIN_SAVING` is not a problem worth
acting on and becomes an info (``evidence["demoted"]`` says why); without a measured time nothing is
demoted (the static estimates are bounds, not measurements), nor with a roofline above 100 % of a peak (L2-resident data or a count
that is off: :attr:`analyzer.roofline.Roofline.plausible`).
"""
from __future__ import annotations

from typing import List, Optional

KEY = "est_time_saved_share"
MIN_SAVING = 0.05       # a kernel within 5 % of its roofline peak has nothing left to save
NEGLIGIBLE = 0.01       # an estimate below 1 % of the kernel's time is ~0 (a line's share of samples can be small
                        # on a real problem: tiny_tile_dot's dot line had 3.4 % of the H100 samples)


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
    headroom = roofline.headroom if roofline is not None and roofline.plausible else None
    for d in diags:
        share = round(min(1.0, max(0.0, estimate(facts, d, headroom))), 4)
        if headroom is not None and share > headroom:
            d.evidence["est_time_saved_uncapped"] = share
            share = round(headroom, 4)
        d.evidence[KEY] = share
        if d.is_finding and headroom is not None and (headroom < MIN_SAVING or share < NEGLIGIBLE):
            d.evidence["demoted"] = (f"{d.severity} -> info: at most {100 * share:.1f}% of the kernel's time to save "
                                     f"(the roofline leaves {100 * headroom:.1f}% headroom)")
            d.severity = "info"
            d.message += (f" (not a finding: at most {100 * share:.0f}% of the kernel's time to save; the kernel "
                          f"reaches {100 * (1 - headroom):.0f}% of its roofline peak)")
        if facts.time_ns:
            d.evidence["est_time_saved_ns"] = round(share * facts.time_ns, 1)
    from .diagnostics import SEVERITY_RANK
    return sorted(diags, key=lambda d: (-d.evidence[KEY], SEVERITY_RANK.get(d.severity, 9), d.number, d.line or 0))
