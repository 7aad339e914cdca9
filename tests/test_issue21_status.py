"""bench/experiments/mem21: the status table's verdict rules and variants.py's PTX edits (CPU, no compiles)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem21"))

import issue21_status as S  # noqa: E402
import variants as V  # noqa: E402


def _fig(x, lo, hi):
    return {"x": x, "ci": [lo, hi]}


def test_memory_bound_verdicts():
    assert S.mb_verdict([_fig(1.003, 1.001, 1.005), _fig(1.002, 1.0, 1.004)]) == "above"
    assert S.mb_verdict([_fig(1.0004, 0.9997, 1.0011)]) == "level"
    assert S.mb_verdict([_fig(0.999, 0.998, 0.9995), _fig(1.0, 0.999, 1.001)]) == "below"
    assert S.mb_verdict([_fig(0.999, 0.998, 0.9995), _fig(1.002, 1.001, 1.003)]) == "mixed"
    assert S.mb_verdict([]) == "not measured"


def test_abba_verdicts():
    row = {"pairs": [0.99, 1.01], "spread_a2_over_a1": 1.0, "spread_b2_over_b1": 1.0}
    assert S.abba_verdict(row) == "no regression"
    # both pairs 5% down, each tree repeating itself within 1%: a regression
    assert S.abba_verdict({**row, "pairs": [0.95, 0.95], "spread_a2_over_a1": 1.01, "spread_b2_over_b1": 0.99}) \
        == "regression"
    # the same pairs where a tree moved 10% between its own two processes: not resolved
    assert S.abba_verdict({**row, "pairs": [0.95, 0.95], "spread_a2_over_a1": 0.9}) == "not resolved"
    # one pair (a process cut short): never a regression
    assert S.abba_verdict({"pairs": [0.9, None], "spread_a2_over_a1": None, "spread_b2_over_b1": 1.0}) \
        == "not resolved"


PTX = """.visible .entry k(
)
{
\t.reg .pred \t%p<3>;
\t.reg .b64 \t%rd<7>;
\t@%p1 ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [ %rd1 + 0 ];
\t@%p1 st.global.v4.b32 [ %rd5 + 0 ], {%r24, %r25, %r26, %r27};
\tret;
}"""


def test_variant_edits_rewrite_only_global_accesses():
    assert "ld.global.nc.v4.b32" in V.EDITS["nc"](PTX)
    assert "st.global.cs.v4.b32 [ %rd5 + 0 ]" in V.EDITS["stcs"](PTX)
    ef = V.EDITS["l2ef"](PTX)
    # the policy is made once before the body, and the load takes it after its address
    assert ef.count("createpolicy.fractional.L2::evict_first.b64 %rdpol_ef, 1.0;") == 1
    assert "ld.global.L2::cache_hint.v4.b32 {%r1, %r2, %r3, %r4}, [ %rd1 + 0 ], %rdpol_ef;" in ef
    assert "st.global.v4.b32 [ %rd5 + 0 ]" in ef   # stores untouched
    both = V.EDITS["stef"](ef)
    assert both.count("createpolicy") == 1 and "%rdpol_ef;" in both.split("st.global")[1]
    assert V.parse_col("x=own+l2ef+stcs@KERNELC_REDUCE_XWARP=broadcast") == \
        ("x", "own", ["l2ef", "stcs"], {"KERNELC_REDUCE_XWARP": "broadcast"})


PTX2 = PTX.replace("\tret;", "\t@%p2 ld.global.v4.b32 {%r5, %r6, %r7, %r8}, [ %rd2 + 0 ];\n"
                   "\t@%p2 ld.global.v4.b32 {%r9, %r10, %r11, %r12}, [ %rd3 + 0 ];\n\tret;")


def test_variant_edits_on_selected_loads_and_rows():
    import pytest
    # ``NAME:SEL``: only the loads of those indices (rope's q loads, not its cos/sin loads)
    out = V.EDITS["l1na"](PTX2, V.split_edit("l1na:1-2")[1])
    assert "@%p1 ld.global.v4.b32 {%r1" in out
    assert "@%p2 ld.global.L1::no_allocate.v4.b32 {%r5" in out and "ld.global.L1::no_allocate.v4.b32 {%r9" in out
    assert V.split_edit("lu:0.2-3") == ("lu", {0, 2, 3}) and V.split_edit("ldcs") == ("ldcs", None)
    for e, form in (("lu", "ld.global.lu.v4"), ("ldcs", "ld.global.cs.v4"), ("l2pf", "ld.global.L2::256B.v4"),
                    ("ncna", "ld.global.nc.L1::no_allocate.v4"), ("l1ef", "ld.global.L1::evict_first.v4")):
        assert V.EDITS[e](PTX2).count(form) == 3 and "st.global.v4.b32 [ %rd5" in V.EDITS[e](PTX2)
    # ``st``/``nost``: the loads from addresses the kernel stores to (the first load's, %rd5 in PTX3), the others
    PTX3 = PTX2.replace("[ %rd1 + 0 ]", "[ %rd5 + 0 ]")
    st = V.EDITS["lu"](PTX3, V.split_edit("lu:st")[1])
    assert st.count("ld.global.lu.") == 1 and "ld.global.lu.v4.b32 {%r1, %r2, %r3, %r4}, [ %rd5 + 0 ]" in st
    nost = V.EDITS["nc"](PTX3, V.split_edit("nc:nost")[1])
    assert nost.count("ld.global.nc.") == 2 and "@%p1 ld.global.v4.b32 {%r1" in nost
    with pytest.raises(ValueError):   # no load reads a stored address in PTX2
        V.EDITS["lu"](PTX2, "st")
    # a selection past the loads there are is an error, not a silent no-op
    with pytest.raises(ValueError):
        V.EDITS["lu"](PTX2, {5})
    with pytest.raises(SystemExit):
        V.parse_col("x=own+nope:1")
    # ``ROW/TAG``: a column for the rows starting with ROW only
    assert V.parse_col("rope/luq=own+lu:4-7") == ("rope/luq", "own", ["lu:4-7"], {})
    assert V.col_rows("rope/luq") == ("rope", "luq") and V.col_rows("luq") == (None, "luq")


def test_variant_policy_forms():
    # mem27: the policy's form as an edit: evict_normal through createpolicy (the form, nothing kept), and evict_last
    # as the constant createpolicy makes (what codegen emits since mem27)
    en = V.EDITS["l2en"](PTX2, V.split_edit("l2en:1")[1])
    assert en.count("createpolicy.fractional.L2::evict_normal.b64 %rdpol_evict_normal, 1.0;") == 1
    assert en.count("ld.global.L2::cache_hint.") == 1 and en.count(", %rdpol_evict_normal;") == 1
    k = V.EDITS["l2elk"](PTX2, V.split_edit("l2elk:1-2")[1])
    assert "createpolicy" not in k and k.count("mov.b64 %rdpol_imm_evict_last, 0x14F0000000000000;") == 1
    assert k.count("ld.global.L2::cache_hint.") == 2 and k.count(", %rdpol_imm_evict_last;") == 2


PTX4 = PTX.replace("\t@%p1 ld.global", "\tmov.u32 \t%r80, %ctaid.x;\n\t@%p1 ld.global", 1)


def test_variant_edits_on_the_launch_shape():
    import pytest
    # rev: program i does program n-1-i's work; the one %ctaid.x read is replaced, registers declared
    rev = V.EDITS["rev"](PTX4)
    assert "mov.u32 \t%r80, %ctaid.x;" not in rev and "add.s32 %r80, %rrev_n, %rrev_c;" in rev
    assert ".reg .b32 %rrev_c;" in rev and "not.b32 %rrev_c, %rrev_c;" in rev
    # pers: a loop over the original programs p, p + P, ... below TOTAL, closing where the kernel returned
    name, sel = V.split_edit("pers:8192/528")
    assert (name, sel) == ("pers", "8192/528")
    pers = V.EDITS["pers"](PTX4, sel)
    body = pers.split("$L__pers_top:")[1]
    assert body.index("mov.u32 %r80, %rpers_pid;") < body.index("ld.global") < body.index("setp.lt.u32 %ppers, "
                                                                                            "%rpers_pid, 8192;")
    assert body.rstrip().endswith("@%ppers bra $L__pers_top;\n\tret;\n}") and "bar.sync" not in pers
    # a body using shared memory gets a barrier before the next row reuses it
    shared = PTX4.replace("\tret;", "\tld.shared.b32 %r9, [%r8];\n\tret;")
    assert "bar.sync 0;\n\tmov.u32 %rpers_n, %nctaid.x;" in V.EDITS["pers"](shared, sel)
    with pytest.raises(ValueError):   # no %ctaid.x read: nothing to loop over
        V.EDITS["pers"](PTX, sel)
    with pytest.raises(SystemExit):
        V.split_edit("pers:8192")
    # the clamp launches at most P programs along the first axis
    class _K:
        def __getitem__(self, grid):
            return grid
    assert V.PersistClamp(_K(), 528)[(8192,)] == (528,) and V.PersistClamp(_K(), 528)[(100, 2)] == (100, 2)
    assert "st.global.L1::no_allocate.v4.b32 [ %rd5 + 0 ]" in V.EDITS["stna"](PTX)
    # bmajor:B: program i does (i % B) * (n / B) + i // B
    bm = V.EDITS["bmajor"](PTX4, V.split_edit("bmajor:4")[1])
    assert "rem.u32 %rbm_b, %rbm_c, 4;" in bm and "mad.lo.s32 %r80, %rbm_b, %rbm_n, %rbm_c;" in bm
    assert "mov.u32 \t%r80, %ctaid.x;" not in bm
    # l2el: an evict_last policy, made once, on the selected loads only
    el = V.EDITS["l2el"](PTX2, V.split_edit("l2el:1-2")[1])
    assert el.count("createpolicy.fractional.L2::evict_last.b64 %rdpol_evict_last, 1.0;") == 1
    assert el.count(", %rdpol_evict_last;") == 2 and "@%p1 ld.global.v4.b32 {%r1" in el


def test_headroom_copies_in_the_interpreter():
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem26"))
    import copies as C
    M = C.kernelc_module()
    x = torch.randn(3, 37).half()
    y = torch.zeros_like(x)
    assert torch.equal(M.row_copy(y, x), x)
    q = torch.randn(2, 3, 3, 10).bfloat16()
    assert torch.equal(M.rope_negate(q.clone()), -q)


def test_headroom_summary(tmp_path):
    import json
    import math
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem26"))
    import headroom as H
    # kernelc 2% slower than the kernelc copy in every round, the row 200 MB
    rds = [{"ms": {"kernelc": 0.051, "copy[kc]": 0.05, "triton": 0.051},
            "log": {"kernelc": math.log(1.0) + d, "copy[kc]": math.log(1.02) + d, "triton[control]": 0.0}}
           for d in (0.0, 0.001, -0.001)]
    p = tmp_path / "v.json"
    p.write_text(json.dumps({"rows": [{"benchmark": "softmax fwd", "bytes": 200e6, "rounds": rds}]}))
    r = H.headroom(str(p))[0]
    assert r["cols"]["copy[kc]"]["GBps"] == 4000.0
    assert abs(r["cols"]["kernelc"]["x_copy[kc]"][0] - 1 / 1.02) < 1e-4
