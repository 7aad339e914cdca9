"""--source: per-line samples and stalls from the profile alone (kprof line frames, Proton's
PC-sampling frames, or kprof.instructions)."""

import re

from profiler.format import ProfileNode, device_entry, write_profile

DEV = {"CUDA": {"0": device_entry("90", 132, 1980000, 2619000, 5120)}}


def line_row(out, line_no):
    for line in out.splitlines():
        if re.match(r"^\s*%s\s" % line_no, line):
            return line
    raise AssertionError(f"line {line_no} not in output")


def test_kprof_source_view_numbers(viewer):
    status, out, err = viewer("--source", "matmul_kernel", "kprof_small.hatchet")
    assert status == 0 and err == ""
    assert out.splitlines()[0] == "kernel matmul_kernel (/work/examples/kernels/matmul.py)"
    # 1568 samples in matmul.py plus 12 in core.py; 1580 - 295 "selected" = 1285 stalled
    assert "samples: 1580 in total, 1285 stalled (81.3%)" in out
    dot = line_row(out, 27)
    # 820 / 1580 = 51.9 %; math_pipe_throttle 300/820 = 37 %, wait 150/820 = 18 % ("selected" is no stall)
    assert re.search(r"27\s+820\s+51\.9\s+math_pipe_throttle 37%, wait 18%\s+HMMA\.16816\.F32 \(560\)\s+acc \+= kl\.dot\(a, b\)", dot)
    assert re.search(r"^\s*10\s+@kernelc\.jit$", line_row(out, 10))  # unsampled lines: source only
    assert "core.py:512" in out  # inlined code from another file is listed after the source


def test_source_kernel_lookup(viewer):
    assert viewer("--source", "MATMUL_KERNEL", "kprof_small.hatchet")[0] == 0  # case-insensitive
    status, out, err = viewer("--source", "_kernel", "kprof_small.hatchet")  # ambiguous
    assert status == 1 and "matches 5 kernels" in err
    status, out, err = viewer("--source", "matmull_kernel", "kprof_small.hatchet")
    assert status == 1 and "did you mean matmul_kernel" in err


def test_proton_style_pc_sampling_frames_without_source(tmp_path, viewer):
    # Proton names its PC-sampling frames "<dir>/<file>:<line>@<function>" under the kernel frame
    # and stores no source text.
    root = ProfileNode("ROOT")
    k = root.child("scope").child("matmul_kernel")
    k.add_metrics({"time (ns)": 1000, "count": 1, "device_id": "0", "device_type": "CUDA"})
    for line, n, lsb in ((40, 30, 20), (42, 70, 10)):
        k.child(f"/src/kern.py:{line}@matmul_kernel").add_metrics(
            {"num_samples": n, "num_stalled_samples": n - 5, "stalled_long_scoreboard": lsb, "stalled_not_Selected": 3})
    write_profile(tmp_path / "p.hatchet", root, DEV)
    status, out, err = viewer("--source", "matmul_kernel", str(tmp_path / "p.hatchet"))
    assert status == 0
    assert "no source text" in out
    assert re.search(r"kern\.py:42\s+70\s+70\.0\s+long_scoreboard 14%, not_selected 4%", out)
    assert re.search(r"kern\.py:40\s+30\s+30\.0\s+long_scoreboard 67%", out)


def test_instructions_only(tmp_path, viewer):
    root = ProfileNode("ROOT")
    k = root.child("k [grid 1x1x1, warps 4, stages 1, smem 0KiB]")
    k.add_metrics({"time (ns)": 10, "count": 1, "device_id": "0", "device_type": "CUDA"})
    k.extra = {"kind": "kernel", "kernel": "k",
               "source": {"file": "/x/k.py", "first_line": 1, "lines": ["def k():", "    a = load()", "    store(a)"]},
               "instructions": [{"pc": 0, "opcode": "LDG.E", "line": 2, "samples": 8, "stalls": {"long_scoreboard": 6, "selected": 2}},
                                {"pc": 16, "opcode": "STG.E", "line": 3, "samples": 2, "stalls": {"stalled_lg_throttle": 2}}]}
    write_profile(tmp_path / "p.hatchet", root, DEV)
    status, out, _ = viewer("--source", "k", str(tmp_path / "p.hatchet"))
    assert status == 0
    assert "samples: 10 in total, 8 stalled (80.0%); from instructions" in out
    assert re.search(r"2\s+8\s+80\.0\s+long_scoreboard 75%\s+LDG\.E \(8\)\s+a = load\(\)", out)
    assert re.search(r"3\s+2\s+20\.0\s+lg_throttle 100%\s+STG\.E \(2\)\s+store\(a\)", out)


def test_unsampled_kernel(viewer):
    status, out, _ = viewer("--source", "softmax_kernel", "kprof_small.hatchet")
    assert status == 0 and "no instruction samples" in out and "def softmax_kernel" in out
