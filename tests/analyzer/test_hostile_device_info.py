"""#28: device numbers the diagnostics divide by (SM count, clock, warps, grid) come from the profile;
zero, negative, non-finite or non-numeric ones are replaced by the architecture's defaults and the
report says the SM count is assumed, instead of a ZeroDivisionError or nonsense shares."""
import math

import pytest

import analyzer
from analyzer.facts import Device, positive_int
from profiler.format import ProfileNode

from .helpers import cache_case, case, kernel_node, write


@pytest.mark.parametrize("value", [0, -132, "abc", None, math.nan, math.inf, 1e300, 2.5, True, [132], {"n": 1}])
def test_bad_sm_counts_fall_back_to_the_architecture(value):
    d = Device.for_arch("sm_90a", value, value, "profile")
    assert d.num_sms == 132 and d.source == "assumed" and d.clock_khz is None


def test_good_values_are_kept():
    d = Device.for_arch("sm_80", "108", 1410000.0, "profile")
    assert (d.num_sms, d.clock_khz, d.source) == (108, 1410000, "profile")
    assert positive_int(7.0, 10) == 7 and positive_int(11, 10) is None


@pytest.mark.parametrize("sms,warps,grid", [(0, 0, [0, 0, 0]), (-4, -8, [-1, 2, 1]), ("x", "four", ["a", None]),
                                            (1e300, 2.5, [1e300])])
def test_analyze_survives_zero_and_junk_device_numbers(tmp_path, sms, warps, grid):
    c = case("few_programs")
    root = ProfileNode("ROOT")
    kernel_node(root, c, cache_case(c), grid=(2, 1, 1), extra={"num_warps": warps, "grid": grid})
    dev = {"CUDA": {"0": {"arch": "90", "num_sms": sms, "clock_rate": sms, "name": "H100"}}}
    rep = analyzer.analyze(write(tmp_path / "p.hatchet", root, device_info=dev), validate=False)
    k = rep.kernels[0]
    assert k.facts.device.num_sms == 132 and k.facts.device.source == "assumed"
    assert k.facts.num_warps >= 1 and all(g >= 1 for g in k.facts.grid)
    assert "132 SMs (assumed)" in rep.render(color=False)
