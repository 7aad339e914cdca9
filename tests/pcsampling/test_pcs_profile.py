"""The profile layout: per-line children, metrics, instructions and source in the kernel frame's
extras, root summary; readable by profiler.format and shown by ``kprof-viewer --source``."""

import io
import os
import re

from profiler.format import ProfileNode, device_entry, read_profile, write_profile
from profiler.pcsampling import PCSampler, fixture
from profiler.viewer.cli import main as viewer_main

DEV = {"CUDA": {"0": device_entry("90", 132, 1980000, 2619000, 5120)}}


def viewer(*argv):
    out, err = io.StringIO(), io.StringIO()
    status = viewer_main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def build_profile(path):
    rec = fixture.load(path)
    s = PCSampler.from_recorded(rec, hook_kernelc=False)
    return rec, s, s.profile()


def test_layout(data_file):
    rec, s, root = build_profile(data_file)
    kernels = {k["name"] for k in rec.obj["kernels"]}
    nodes = {n.name: n for n in root.children}
    assert kernels <= set(nodes)
    for name in kernels:
        node = nodes[name]
        ex = node.extra
        assert ex["kind"] == "kernel" and ex["kernel"] == name
        assert set(ex["source"]) == {"file", "first_line", "lines"} and ex["source"]["lines"]
        assert ex["pcsampling"]["period"] == s.period and ex["pcsampling"]["samples"] > 0
        lines = [c for c in node.children]
        assert lines and all(c.frame_type == "line" and re.fullmatch(r"[\w.]+\.py:\d+", c.name) for c in lines)
        for c in lines:
            m = c.metrics
            stalls = {k: v for k, v in m.items() if k.startswith("stalled_")}
            assert m["num_samples"] == sum(stalls.values())
            assert m["num_stalled_samples"] == m["num_samples"] - m.get("stalled_selected", 0)
            assert all(v > 0 for v in stalls.values())
            assert not any(k.endswith("_not_issued") for k in m)
        ins = ex["instructions"]
        assert [i["pc"] for i in ins] == sorted(i["pc"] for i in ins)
        assert set(ins[0]) == {"pc", "opcode", "file", "line", "samples", "stalls"}
        # children + own (unattributed) == instructions == total
        own = node.metrics.get("num_samples", 0)
        assert sum(c.metrics["num_samples"] for c in lines) + own == sum(i["samples"] for i in ins)
        assert own == ex["pcsampling"]["unattributed_samples"]
    assert root.extra["pcsampling"]["family"].startswith("all samples")


def test_library_kernel_gets_totals(synthetic):
    _, _, root = build_profile(synthetic[0])
    lib = next(n for n in root.children if n.name.startswith("sm90_xmma_gemm"))
    assert lib.children == [] and lib.metrics["num_samples"] == 40 * 5
    assert lib.metrics["stalled_math_pipe_throttle"] == 160 and lib.metrics["num_stalled_samples"] == 160
    assert len(lib.extra["instructions"]) == 40 and lib.extra["instructions"][0]["line"] is None


def test_round_trip_and_viewer_source(data_file, tmp_path):
    rec, s, root = build_profile(data_file)
    path = tmp_path / "p.hatchet"
    write_profile(path, root, DEV)
    back, _ = read_profile(path)
    assert back.metrics["num_samples"] == 0  # hatchet's metric placeholders at the root
    for k in rec.obj["kernels"]:
        name = k["name"]
        node = next(n for n in back.children if n.name == name)
        status, out, err = viewer("--source", name, str(path))
        assert status == 0, err
        total = sum(c.metrics["num_samples"] for c in node.children)
        stalled = sum(c.metrics["num_stalled_samples"] for c in node.children)
        assert f"samples: {total} in total, {stalled} stalled" in out
        assert "from line frames" in out
        # The hottest line's row: its number, its samples, and the source text of that line.
        top = max(node.children, key=lambda c: (c.metrics["num_samples"], c.name))
        line_no = int(top.name.rsplit(":", 1)[1])
        src = node.extra["source"]
        row = next(ln for ln in out.splitlines() if re.match(rf"^\s*{line_no}\s+{top.metrics['num_samples']}\s", ln))
        if src["first_line"] <= line_no < src["first_line"] + len(src["lines"]):
            assert row.rstrip().endswith(src["lines"][line_no - src["first_line"]].strip())
    # The tree view shows the per-line frames and their samples.
    status, out, _ = viewer("-m", "num_samples", str(path))
    assert status == 0 and re.search(r"\w+\.py:\d+", out)


def test_top_lines_api(synthetic):
    rec, s, _ = build_profile(synthetic[0])
    top = s.top_lines("matmul_kernel", 5)
    want = [tuple(t) for t in rec.expected["matmul_kernel"]["top_lines"][:5]]
    assert [(os.path.basename(f), ln, n) for f, ln, n in top] == want


def test_save_round_trip(synthetic, tmp_path):
    rec, s, _ = build_profile(synthetic[0])
    # Saving needs the compiled kernels (kernelc launch records): feed them as the hook would.
    for ck, jit in synthetic[2].values():
        s.note_kernel(ck, jit)
    obj = s.save(str(tmp_path / "again.json"), description="round trip")
    again = fixture.load(tmp_path / "again.json")
    assert {k["name"] for k in obj["kernels"]} == {"matmul_kernel", "softmax_kernel"}
    assert again.table.by_function().keys() == rec.table.by_function().keys()
    a1 = {k: v.total for k, v in rec.attribute().items()}
    a2 = {k: v.total for k, v in again.attribute().items()}
    assert a1 == a2


def test_empty_profile():
    root = PCSampler(hook_kernelc=False).profile(ProfileNode("ROOT"))
    assert root.children == [] and root.extra["pcsampling"]["period"] == 10
