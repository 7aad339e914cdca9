"""bench/bench_memory_bound.py on CPU: each case's inputs have the sizes its name says (a closure over the
reassigned R, C once ran every row kernel at 2048 x 4096), and --variant parses."""
import re

import pytest

from bench import bench_memory_bound as B


def test_cases_make_inputs_of_their_named_sizes(monkeypatch):
    monkeypatch.setattr(B, "SMOKE", True)   # the small sizes, on the CPU
    monkeypatch.setattr(B, "DEV", "cpu")
    checked = 0
    for name, (make, _call, _ref, _nbytes) in B.cases().items():
        m = re.search(r"\b(\d+(?:x\d+)+)\b", name)
        if m is None:
            continue
        dims = tuple(int(d) for d in m.group(1).split("x"))
        assert tuple(make()[0].shape) == dims, name
        checked += 1
    assert checked >= 13


def test_variant_options():
    argv = ["swiglu", "--variant", "bound:KERNELC_NVJITLINK_LAUNCH_BOUND=1", "--variant",
            "auto:KERNELC_ASSEMBLER=auto,KERNELC_TMA=0"]
    assert B.parse_variants(argv) == [("bound", {"KERNELC_NVJITLINK_LAUNCH_BOUND": "1"}),
                                      ("auto", {"KERNELC_ASSEMBLER": "auto", "KERNELC_TMA": "0"})]
    assert argv == ["swiglu"]
    for bad in ("bound", "bound:", ":KERNELC_TMA=0", "x:PATH=/bin"):
        with pytest.raises(SystemExit, match="--variant"):
            B.parse_variants(["--variant", bad])
