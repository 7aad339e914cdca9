"""KERNELC_LAUNCH_SMEM_MIN (an occupancy experiment): the bytes of dynamic shared memory a loaded kernel is launched
with at least; empty means what the kernel needs, anything but a number is a clear error."""
import pytest

from kernelc.options import OptionError
from kernelc.runtime.driver import _smem_min


def test_unset_is_zero(monkeypatch):
    monkeypatch.delenv("KERNELC_LAUNCH_SMEM_MIN", raising=False)
    assert _smem_min() == 0


def test_a_number_of_bytes(monkeypatch):
    monkeypatch.setenv("KERNELC_LAUNCH_SMEM_MIN", "46080")
    assert _smem_min() == 46080


def test_not_a_number_names_the_knob(monkeypatch):
    monkeypatch.setenv("KERNELC_LAUNCH_SMEM_MIN", "45K")
    with pytest.raises(OptionError, match="KERNELC_LAUNCH_SMEM_MIN='45K'"):
        _smem_min()
