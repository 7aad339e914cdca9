"""Per-architecture peak throughput, for the ``util`` metric.

The numbers and formulas mirror Proton's viewer (``triton/profiler/specs.py``) so that ``util``
means the same thing in both tools:

* tensor-core peak flop/s for an 8-bit operand width, divided by ``width / 8`` for wider types
  (so fp16 gets half the fp8 peak, fp32 a quarter, ...);
* DRAM bandwidth ``2 * bus_width * memory_clock_rate / 8`` (double data rate; bus width in bits,
  memory clock in kHz as the driver reports it), except where a fixed figure is listed.

Peaks either are fixed (sm_80, sm_89: Proton uses the datasheet number) or scale with the
device's SM count and SM clock (sm_90, sm_100), so a part with more SMs or a down-clocked one gets its own peak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class ArchPeak:
    """Peak figures of one architecture; exactly one of the two flop fields is set."""

    label: str
    fp8_flops: float | None = None  # fixed peak flop/s at 8-bit width
    fp8_flops_per_sm_clock: float | None = None  # flop per SM per SM-clock cycle at 8-bit width
    bandwidth: float | None = None  # fixed bytes/s; None: from bus width and memory clock


# Proton's sm_90 figure is H100 PCIe's 1513 TFLOP/s (fp8) at 114 SMs and 1755 MHz, scaled by
# SMs and clock; expressed per SM per cycle it is the same formula.
_SM90_FP8_PER_SM_CLOCK = 1513e12 / (114 * 1755e6)

PEAKS: dict[str, dict[str, ArchPeak]] = {
    "CUDA": {
        "80": ArchPeak("sm_80 (A100)", fp8_flops=624e12),
        "89": ArchPeak("sm_89 (L4/L40/RTX 40)", fp8_flops=330.3e12),
        "90": ArchPeak("sm_90 (H100/H200)", fp8_flops_per_sm_clock=_SM90_FP8_PER_SM_CLOCK),
        "100": ArchPeak("sm_100 (B200)", fp8_flops_per_sm_clock=16384),
    },
    # AMD entries as in Proton (per CU per clock, fixed HBM bandwidth); Proton files may hold them.
    "HIP": {
        "gfx90a": ArchPeak("gfx90a (MI200)", fp8_flops_per_sm_clock=1024, bandwidth=3.2e12),
        "gfx942": ArchPeak("gfx942 (MI300)", fp8_flops_per_sm_clock=4096, bandwidth=5.3e12),
        "gfx950": ArchPeak("gfx950 (MI350)", fp8_flops_per_sm_clock=8192, bandwidth=8.0e12),
    },
}


def normalize_arch(device_type: str, arch: Any) -> str:
    """``"sm_90a"``, ``"90"``, ``90`` -> ``"90"`` for CUDA; HIP names are lower-cased."""
    text = str(arch).strip().lower()
    if device_type == "CUDA":
        m = re.fullmatch(r"(?:sm_?|compute_)?(\d+)[a-z]?", text)
        if m:
            return m.group(1)
    return text


def arch_peak(device_type: str, device: Mapping[str, Any]) -> ArchPeak | None:
    """The peak table entry for a ``device_info`` entry, or ``None`` for an unknown arch."""
    return PEAKS.get(device_type, {}).get(normalize_arch(device_type, device.get("arch", "")))


def peak_flops(device_type: str, device: Mapping[str, Any], width: int) -> float | None:
    """Peak flop/s for operands of ``width`` bits (8, 16, 32, 64), or ``None`` if unknown."""
    peak = arch_peak(device_type, device)
    if peak is None:
        return None
    if peak.fp8_flops is not None:
        fp8 = peak.fp8_flops
    else:
        try:  # clock_rate is in kHz
            fp8 = peak.fp8_flops_per_sm_clock * float(device["num_sms"]) * float(device["clock_rate"]) * 1e3
        except (KeyError, TypeError, ValueError):
            return None
    return fp8 / (width / 8)


def peak_bandwidth(device_type: str, device: Mapping[str, Any]) -> float | None:
    """Peak DRAM bytes/s, or ``None`` when neither a fixed figure nor bus data is known."""
    peak = arch_peak(device_type, device)
    if peak is not None and peak.bandwidth is not None:
        return peak.bandwidth
    try:
        bw = 2 * float(device["bus_width"]) * float(device["memory_clock_rate"]) * 1e3 / 8
    except (KeyError, TypeError, ValueError):
        return None
    return bw if bw > 0 else None


def describe_device(device_type: str, device_id: str, device: Mapping[str, Any]) -> str:
    """One line such as ``CUDA 0: sm_90 (H100/H200), 132 SMs at 1980 MHz; peak 989.4 TFLOP/s fp16,
    3352.3 GB/s``."""
    peak = arch_peak(device_type, device)
    arch = normalize_arch(device_type, device.get("arch", "?"))
    label = peak.label if peak else (f"sm_{arch}" if device_type == "CUDA" else arch)
    parts = [f"{device_type} {device_id}: {label}"]
    if "num_sms" in device and "clock_rate" in device:
        unit = "SMs" if device_type == "CUDA" else "CUs"
        parts[0] += f", {device['num_sms']} {unit} at {float(device['clock_rate']) / 1e3:.0f} MHz"
    bits = []
    f16 = peak_flops(device_type, device, 16)
    if f16 is not None:
        bits.append(f"{f16 / 1e12:.1f} TFLOP/s fp16")
    bw = peak_bandwidth(device_type, device)
    if bw is not None:
        bits.append(f"{bw / 1e9:.1f} GB/s")
    text = parts[0]
    if bits:
        text += "; peak " + ", ".join(bits)
    if peak is None:
        text += "; no peak table for this arch (util unavailable)"
    return text


def iter_devices(device_info: Mapping[str, Any]):
    """Yield ``(device_type, device_id, entry)`` over a profile's ``device_info``."""
    for dtype, devices in (device_info or {}).items():
        if isinstance(devices, Mapping):
            for did, entry in devices.items():
                if isinstance(entry, Mapping):
                    yield dtype, str(did), entry


def known_archs() -> str:
    """``"sm_80, sm_89, sm_90, sm_100"`` (CUDA) for messages."""
    return ", ".join(f"sm_{a}" for a in PEAKS["CUDA"])
