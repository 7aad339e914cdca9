"""The CPU-testable parts of the PC-sampling benchmarks: ncu CSV parsing and ranking agreement."""

import pytest

from bench import pcsampling_vs_ncu as V
from profiler.pcsampling.attribution import KernelCode

SASS_CSV = '''"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"
"0x7f0000000000","LDC R1, c[0x0][0x28]","2","1"
"0x7f0000000010","@P0 LDG.E.128 R4, desc[UR4][R2.64]","30","20"
"0x7f0000000020","HGMMA.64x128x16.F32 R24, gdesc[UR8], R24","50","10"
"0x7f0000000030","EXIT","0","0"
'''

CUDA_CSV = '''"/src/k.py"
"#","Source","Warp Stall Sampling (All Samples)"
"1","def k():","0"
"2","    a = load()","30"
"3","    acc = dot(a, a)","52"
'''


def code():
    return KernelCode("k", instructions=[(0, "LDC", "/src/k.py", 1), (16, "LDG.E.128", "/src/k.py", 2),
                                         (32, "HGMMA.64x128x16.F32", "/src/k.py", 3), (48, "EXIT", None, None)])


def test_parse_sass_view_and_map_to_lines():
    parsed = V.parse_ncu_source_csv(SASS_CSV)
    assert [a for a, _, _ in parsed["sass"]] == [0x7F0000000000 + 16 * i for i in range(4)]
    lines, agree = V.sass_to_lines(parsed["sass"], code())
    assert lines == {("k.py", 1): 2.0, ("k.py", 2): 30.0, ("k.py", 3): 50.0}
    assert agree == 1.0  # predicates skipped, opcodes with modifiers compared whole


def test_parse_cuda_view():
    parsed = V.parse_ncu_source_csv(CUDA_CSV)
    assert parsed["lines"] == {("k.py", 1): 0.0, ("k.py", 2): 30.0, ("k.py", 3): 52.0}


def test_agreement_and_table():
    ours = {("k.py", 3): 500, ("k.py", 2): 300, ("k.py", 1): 20}
    theirs = {("k.py", 3): 52.0, ("k.py", 2): 30.0, ("k.py", 1): 2.0}
    a = V.agreement(ours, theirs, 10)
    assert a["top1_equal"] and a["top5_overlap"] == 3 and a["spearman_topN"] == 1.0
    assert a["histogram_intersection"] == pytest.approx(0.99, abs=0.02)
    text = V.side_by_side("k", {"kprof": ours, "ncu": theirs}, 3)
    assert "k.py:3" in text and text.count("\n") == 4
    assert V.agreement({}, theirs, 5) == {}


def test_overhead_bench_parses_args():
    from bench import bench_pcsampling as B
    assert "proton_pcsampling" in B.VARIANTS and B._note({"error": "x"}) == "x"
    assert B._note({"note": "a", "info": {"b": 1}}) == 'a; {"b": 1}'
