"""Sample -> instruction -> line attribution on recorded data: the synthetic file and every real
file recorded on the GPU (tests/pcsampling/data/*.json)."""

import os

import pytest

from profiler.pcsampling import fixture
from profiler.pcsampling.attribution import KernelCode, PCCounts, SampleTable, attribute
from profiler.pcsampling.stall_reasons import counted_reasons


def counted_by_function(obj):
    """Independent recount: samples of the counted family per function, straight from the records."""
    counted = counted_reasons((int(i), n) for i, n in obj["stall_reasons"])
    out = {}
    for r in obj["records"]:
        out[r["function"]] = out.get(r["function"], 0) + sum(n for i, n in r["stalls"] if i in counted)
    return out


def test_file_shape(data_file):
    rec = fixture.load(data_file)
    obj = rec.obj
    assert obj["records"] and obj["stall_reasons"] and obj["kernels"]
    names = [n for _, n in obj["stall_reasons"]]
    assert len(set(i for i, _ in obj["stall_reasons"])) == len(names)
    assert any("_stalled_" in n for n in names)
    for r in obj["records"]:
        assert r["pc"] % 16 == 0, "sm_70+ pc offsets are function-relative multiples of 16"
        assert r["stalls"] and all(n >= 0 for _, n in r["stalls"])
    kernel_names = {k["name"] for k in obj["kernels"]}
    assert kernel_names <= {r["function"] for r in obj["records"]}


def test_attribution_conserves_samples(data_file):
    rec = fixture.load(data_file)
    expected = counted_by_function(rec.obj)
    attrs = rec.attribute()
    got = {}
    for (fname, _crc), a in attrs.items():
        got[fname] = got.get(fname, 0) + a.total
        # per line + unattributed == per instruction == the kernel's total
        assert sum(i["samples"] for i in a.instructions) == a.total
        line_sum = sum(sum(s.values()) for s in a.lines.values())
        assert line_sum + sum(a.unattributed.values()) == a.total
        for ins in a.instructions:
            assert ins["samples"] == sum(ins["stalls"].values())
    assert got == expected


def test_kernelc_samples_land_on_kernel_lines(data_file):
    rec = fixture.load(data_file)
    attrs = rec.attribute()
    for k in rec.obj["kernels"]:
        name = k["name"]
        a = next(a for (f, _), a in attrs.items() if f == name)
        src = k["source"]
        base = os.path.basename(src["file"])
        first, last = src["first_line"], src["first_line"] + len(src["lines"]) - 1
        in_kernel = sum(sum(s.values()) for (f, ln), s in a.lines.items()
                        if os.path.basename(f) == base and first <= ln <= last)
        # Library code kernelc inlines (tl.max, tl.sum, ...) keeps its own file and lines.
        in_library = sum(sum(s.values()) for (f, ln), s in a.lines.items()
                         if "/kernelc/" in f.replace(os.sep, "/"))
        assert in_kernel + in_library >= 0.8 * a.total, f"{name}: {in_kernel}+{in_library}/{a.total} placed"
        assert in_kernel >= 0.3 * a.total, f"{name}: only {in_kernel}/{a.total} samples on the kernel's lines"
        placed = a.total - sum(a.unattributed.values())
        assert placed >= 0.9 * a.total
        # Every placed instruction is a real SASS instruction with an opcode (nvdisasm on the cubin).
        with_line = [i for i in a.instructions if i["line"] is not None]
        assert with_line and all(isinstance(i["opcode"], str) and i["opcode"] for i in with_line)


def test_top_lines_match_expected(data_file):
    rec = fixture.load(data_file)
    if not rec.expected:
        pytest.skip("no expected ranking in this file")
    attrs = rec.attribute()
    for name, exp in rec.expected.items():
        got = {}
        for (f, _), a in attrs.items():
            if f == name:
                for file, line, n in a.top_lines():
                    key = (os.path.basename(file), line)
                    got[key] = got.get(key, 0) + n
        top = sorted(((f, ln, n) for (f, ln), n in got.items()), key=lambda t: (-t[2], t[0], t[1]))
        want = [tuple(t) for t in exp["top_lines"]]
        assert [tuple(t) for t in top[:len(want)]] == want
        if "unattributed" in exp:
            un = sum(sum(a.unattributed.values()) for (f, _), a in attrs.items() if f == name)
            assert un == exp["unattributed"]


def test_launch_grouping(data_file):
    rec = fixture.load(data_file)
    by_launch = rec.table.by_launch()
    corr_ids = {r["correlation_id"] for r in rec.obj["records"] if r["correlation_id"]}
    assert {k for k in by_launch if k > 0} == corr_ids
    for key, counts in by_launch.items():
        if key > 0:
            assert counts.correlation_ids == {key}
    # Merging the launches of a function gives the per-function counts.
    per_fn = rec.table.by_function()
    for (fname, crc), counts in per_fn.items():
        merged = PCCounts(fname)
        for c in by_launch.values():
            if c.function == fname and c.cubin_crc == crc:
                merged.merge(c)
        assert merged.pcs == counts.pcs


def test_source_map_and_nvdisasm_lines_agree(synthetic):
    """Attribution uses the source map (.debug_line); nvdisasm's per-instruction lines agree, except on warpgroup
    MMAs, which ptxas leaves on the line of the instruction before them and kernelc's map puts on their dot's
    line (kernelc/compiler/backend/mma_lines.py)."""
    _, _, kernels = synthetic
    for name, (ck, jit) in kernels.items():
        code = KernelCode.from_compiled(ck, jit)
        for ins in ck.artifacts.instructions:
            if ins.function == name and ins.line:
                if ins.opcode.startswith(("HGMMA", "QGMMA", "IGMMA")):
                    assert code.locate(ins.pc) == ck.source_map.pc_to_line(ins.pc, name)
                else:
                    assert code.locate(ins.pc) == (ins.file, ins.line)
        assert code.source["file"].endswith(".py") and code.source["first_line"] > 0


def test_code_without_lines_gives_totals_only():
    t = SampleTable.from_records([{"function": "_Zlib", "pc": 32, "stalls": [[0, 3], [1, 1]]}],
                                 {0: "x__stalled_wait", 1: "x__stalled_selected"})
    (key, counts), = t.by_function().items()
    a = attribute(counts, None)
    assert a.lines == {} and a.unattributed == {"wait": 3, "selected": 1} and a.total == 4
    assert a.instructions == [{"pc": 32, "opcode": None, "file": None, "line": None, "samples": 4,
                               "stalls": {"wait": 3, "selected": 1}}]
    code = KernelCode("_Zlib", instructions=[(32, "FFMA", "/x/k.cu", 7)])
    b = attribute(counts, code)
    assert b.lines == {("/x/k.cu", 7): {"wait": 3, "selected": 1}} and b.instructions[0]["opcode"] == "FFMA"
