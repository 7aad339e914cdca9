"""kprof-viewer behaviour beyond the goldens: filters, diff arithmetic, colour, entry points."""

import os
import re
import subprocess
import sys

from profiler.format import ProfileNode, device_entry, write_profile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def rows(out):
    """{name: [cells...]} from a tree/flat output (tree glyphs and suffixes stripped)."""
    lines = out.splitlines()
    header = lines[0].split()
    ncols = len(header) - 1
    table = {}
    for line in lines[1:]:
        m = re.match(r"^((?:\s*\S+){%d})\s+(?:[│├└─ ]*)(.*)$" % ncols, line)
        if not m:
            continue
        table[m.group(2)] = m.group(1).split()
    return header, table


def test_include_recomputes_totals(viewer):
    status, out, _ = viewer("-i", "attn", "-m", "time/ms", "kprof_small.hatchet")
    _, t = rows(out)
    assert status == 0
    assert t["ROOT"] == ["4.488"]  # 2.29 + 1.95 + 0.248: only what passes through "attn"
    assert not any("mlp" in k or "adam" in k for k in t)


def test_exclude_drops_subtrees_and_recomputes(viewer):
    status, out, _ = viewer("-e", "^optimizer$", "-m", "time/ms", "kprof_small.hatchet")
    _, t = rows(out)
    assert t["ROOT"] == ["14.004"]  # 24.204 - 10.2
    assert "optimizer" not in t and not any(k.startswith("adam") for k in t)


def test_threshold_keeps_parents_and_true_totals(viewer):
    status, out, _ = viewer("-m", "time/ms", "-t", "5", "kprof_small.hatchet")
    _, t = rows(out)
    assert set(t) == {"ROOT", "train_step", "optimizer", "mlp", "adam_kernel [grid 2048x1x1, warps 4, stages 1, smem 0KiB]",
                      "matmul_kernel [grid 2048x1x1, warps 8, stages 4, smem 128KiB]"}
    assert t["mlp"] == ["9.516"]  # the hidden gelu kernel still counts in its parent


def test_depth(viewer):
    _, out, _ = viewer("-d", "1", "kprof_small.hatchet")
    _, t = rows(out)
    assert set(t) == {"ROOT", "train_step"}


def test_print_sorted_is_hottest_first_and_merges_same_names(tmp_path, viewer):
    root = ProfileNode("ROOT")
    for scope, t in (("a", 100), ("b", 300), ("c", 50)):
        root.child(scope).child("k1").add_metrics({"time (ns)": t, "count": 1, "device_id": "0", "device_type": "CUDA"})
    root.child("a").child("k2").add_metrics({"time (ns)": 400, "count": 1, "device_id": "0", "device_type": "CUDA"})
    write_profile(tmp_path / "p.hatchet", root, {"CUDA": {"0": device_entry("90", 132, 1980000, 2619000, 5120)}})
    status, out, _ = viewer("--print-sorted", "-m", "time/ns,count", str(tmp_path / "p.hatchet"))
    lines = out.splitlines()
    assert lines[0].split() == ["time/ns", "count", "name"]
    assert lines[1].split() == ["450.000", "3", "k1", "(x3", "frames)"]  # 100 + 300 + 50, three frames
    assert lines[2].split() == ["400.000", "1", "k2"]
    assert len(lines) == 3  # scopes measure nothing themselves: not listed


def test_diff_arithmetic(viewer):
    status, out, err = viewer("--diff-profile", "kprof_other.hatchet", "-m", "time/us,count", "kprof_small.hatchet")
    assert status == 0 and err == ""
    assert out.splitlines()[0].startswith("diff: kprof_small.hatchet minus kprof_other.hatchet")
    _, t = rows("\n".join(out.splitlines()[1:]))
    assert t["ROOT"] == ["+8974.000", "+10"]  # 24204 - 15230 us; 60 - 50 launches
    assert t["matmul_kernel [grid 1024x1x1, warps 8, stages 3, smem 96KiB]"] == ["-310.000", "0"]
    only_this = "adam_kernel [grid 2048x1x1, warps 4, stages 1, smem 0KiB] (only in kprof_small.hatchet)"
    only_other = "flash_attn_kernel [grid 256x32x1, warps 8, stages 2, smem 160KiB] (only in kprof_other.hatchet)"
    assert t[only_this] == ["+10200.000", "+10"]  # missing in other: counts as 0 there
    assert t[only_other] == ["-1100.000", "-10"]


def test_diff_is_antisymmetric(viewer):
    _, ab, _ = viewer("--diff-profile", "kprof_other.hatchet", "-m", "time/us", "kprof_small.hatchet")
    _, ba, _ = viewer("--diff-profile", "kprof_small.hatchet", "-m", "time/us", "kprof_other.hatchet")
    _, tab = rows("\n".join(ab.splitlines()[1:]))
    _, tba = rows("\n".join(ba.splitlines()[1:]))
    assert tab["train_step"] == ["+8974.000"] and tba["train_step"] == ["-8974.000"]


def test_diff_with_different_metric_sets(viewer):
    # this has flops16, other does not: tflop16/s is left out with a note, the rest is compared
    status, out, err = viewer("--diff-profile", "kprof_other.hatchet", "-m", "tflop16/s,gbyte/s", "kprof_small.hatchet")
    assert status == 0
    assert out.splitlines()[1].split() == ["gbyte/s", "name"]
    assert "'tflop16/s' is left out of the diff: kprof_other.hatchet does not have it" in err
    # a rate needs both sides: a frame in one profile only has no value and is not shown
    _, t = rows("\n".join(out.splitlines()[1:]))
    assert not any(k.startswith("adam_kernel") for k in t)
    assert t["matmul_kernel [grid 1024x1x1, warps 8, stages 3, smem 96KiB]"] == ["+52.411"]
    # neither profile has it: an error, not a silent empty table
    status, out, err = viewer("--diff-profile", "kprof_other.hatchet", "-m", "tflop16/s", "kprof_small.hatchet")
    assert status == 1 and "none of the metrics" in err
    # and the error is the one line on stderr, with the reason in it, not a note followed by an error (the
    # hypothesis fuzzer's find: a profile without the metric diffed against one with it)
    assert err.strip().splitlines() == [
        "kprof-viewer: error: none of the metrics tflop16/s exist in both kprof_small.hatchet and "
        "kprof_other.hatchet ('tflop16/s' is left out of the diff: kprof_other.hatchet does not have it)"]


def test_diff_with_proton_profile(viewer):
    status, out, err = viewer("--diff-profile", "proton_small.hatchet", "-m", "time/us", "kprof_small.hatchet")
    assert status == 0
    _, t = rows("\n".join(out.splitlines()[1:]))
    assert "torch_matmul (only in proton_small.hatchet)" in t


def test_color_on_forced_terminal(monkeypatch, data):
    from profiler.viewer.cli import main
    import io

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    buf = io.StringIO()
    assert main(["-m", "time/ms,util", data("kprof_small.hatchet")], stdout=buf, stderr=io.StringIO()) == 0
    colored = buf.getvalue()
    assert "\x1b[" in colored
    assert "colour of time/ms (share of the total)" in colored  # the legend
    # same layout as the plain output, plus the legend line
    monkeypatch.delenv("FORCE_COLOR")
    plain = io.StringIO()
    main(["-m", "time/ms,util", data("kprof_small.hatchet")], stdout=plain, stderr=io.StringIO())
    stripped = ANSI.sub("", colored).splitlines()
    assert stripped[:-1] == plain.getvalue().splitlines()
    # the hottest share is red, a small one is not
    root_line = next(line for line in colored.splitlines() if line.endswith("ROOT"))
    assert "\x1b[1;31m" in root_line


def test_no_color_flag_and_env(monkeypatch, data):
    from profiler.viewer.cli import main
    import io

    monkeypatch.setenv("FORCE_COLOR", "1")
    buf = io.StringIO()
    main(["--no-color", data("kprof_small.hatchet")], stdout=buf, stderr=io.StringIO())
    assert "\x1b[" not in buf.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    buf = io.StringIO()
    main([data("kprof_small.hatchet")], stdout=buf, stderr=io.StringIO())
    assert "\x1b[" not in buf.getvalue()


def test_long_names_shortened_in_the_middle(viewer):
    _, out, _ = viewer("-w", "80", "-m", "time/ms", "kprof_small.hatchet")
    line = next(line for line in out.splitlines() if "sm90_xmma" in line)
    name = line.split("├─ ")[-1]
    assert "…" in name and name.startswith("sm90_xmma_gemm") and name.endswith("kernel__5x_cublas")
    assert len(line) <= 80


def test_python_module_and_help():
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("FORCE_COLOR", None)
    r = subprocess.run([sys.executable, "-m", "profiler.viewer", "--help"], capture_output=True, text=True, env=env,
                       cwd=REPO)
    assert r.returncode == 0 and "--diff-profile" in r.stdout and "tflop/s" in r.stdout
    r = subprocess.run([sys.executable, "-m", "profiler.viewer", "-m", "time/ms",
                        os.path.join("tests", "viewer", "data", "proton_small.hatchet")],
                       capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 0 and "matmul_512x512x512" in r.stdout and "\x1b[" not in r.stdout
    r = subprocess.run([sys.executable, "-m", "profiler.viewer", "nope.hatchet"], capture_output=True, text=True,
                       env=env, cwd=REPO)
    assert r.returncode == 1 and r.stderr.count("\n") == 1


def test_import_is_light():
    code = ("import sys, profiler.viewer, profiler.viewer.cli; "
            "print(sorted(m for m in ('hatchet', 'pandas', 'rich', 'numpy') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_usage_error_exit_2(viewer, capsys):
    status, out, err = viewer("-d", "x", "kprof_small.hatchet")
    assert status == 2
