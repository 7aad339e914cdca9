"""profiler.format: the profile file layout (Proton's), atomic writes, reading and its errors."""

import json
import os

import pytest

from profiler import format as fmt
from profiler.format import ProfileFormatError, ProfileNode, read_profile, write_profile

H100 = {"CUDA": {"0": fmt.device_entry("90", 132, 1980000, 2619000, 5120)}}


def small_tree():
    root = ProfileNode("ROOT")
    k = root.child("train_step").child("matmul_kernel [grid 8x1x1, warps 4, stages 2, smem 32KiB]")
    k.add_metrics({"time (ns)": 1000, "count": 2, "device_id": "0", "device_type": "CUDA", "flops16": 4.0e6})
    k.add_metrics({"time (ns)": 500, "count": 1, "device_id": "0", "device_type": "CUDA", "flops16": 2.0e6})
    k.extra = {"kind": "kernel", "kernel": "matmul_kernel", "cache_key": "abc"}
    line = k.child("matmul.py:27", "line")
    line.add_metrics({"num_samples": 10, "num_stalled_samples": 7, "stalled_barrier": 3})
    return root, k


def test_node_layout_is_protons(tmp_path):
    root, _ = small_tree()
    path = tmp_path / "p.hatchet"
    write_profile(path, root, H100)
    text = path.read_text()
    # Proton (nlohmann dump(4)) writes a newline, the JSON with 4-space indent and sorted keys, a newline.
    assert text.startswith("\n[\n    {\n") and text.endswith("]\n")
    data = json.loads(text)
    assert isinstance(data, list) and len(data) == 2
    root_json, device_info = data
    assert list(root_json) == ["children", "frame", "metrics"]
    assert root_json["frame"] == {"name": "ROOT", "type": "function"}
    # zero placeholders at the root for every summable metric, not for device_id/device_type
    assert root_json["metrics"] == {"count": 0, "flops16": 0, "num_samples": 0, "num_stalled_samples": 0,
                                    "stalled_barrier": 0, "time (ns)": 0}
    kernel = root_json["children"][0]["children"][0]
    assert kernel["metrics"] == {"count": 3, "device_id": "0", "device_type": "CUDA", "flops16": 6.0e6,
                                 "time (ns)": 1500}
    assert kernel["kprof"]["kernel"] == "matmul_kernel"
    assert kernel["children"][0]["frame"] == {"name": "matmul.py:27", "type": "line"}
    assert "kprof" not in root_json  # extras only where set
    assert device_info == {"CUDA": {"0": {"arch": "90", "bus_width": 5120, "clock_rate": 1980000,
                                          "memory_clock_rate": 2619000, "num_sms": 132}}}


def test_round_trip(tmp_path):
    root, k = small_tree()
    write_profile(tmp_path / "p.hatchet", root, H100)
    back, dev = read_profile(tmp_path / "p.hatchet")
    assert dev == H100
    kb = back.children[0].children[0]
    assert kb.name == k.name and kb.metrics == k.metrics and kb.extra == k.extra
    assert kb.children[0].frame_type == "line"
    assert [n.name for n, _ in back.walk()] == [n.name for n, _ in root.walk()]


def test_child_merges_same_name_and_add_metrics_sums():
    root = ProfileNode("ROOT")
    a = root.child("s")
    assert root.child("s") is a and len(root.children) == 1
    a.add_metrics({"time (ns)": 5, "device_id": "0"})
    a.add_metrics({"time (ns)": 7, "device_id": "1"})
    assert a.metrics == {"time (ns)": 12, "device_id": "1"}


def test_inclusive_metrics():
    root, k = small_tree()
    inc = fmt.inclusive_metrics(root)
    assert inc[root]["time (ns)"] == 1500 and inc[root]["num_samples"] == 10
    assert inc[k]["flops16"] == 6.0e6 and inc[k]["num_samples"] == 10
    assert "time (ns)" not in inc[k.children[0]]  # absent, not 0: a line frame has no time
    assert "device_id" not in inc[root]


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "p.hatchet"
    root, _ = small_tree()
    write_profile(path, root, H100)
    before = path.read_bytes()
    # A failure while writing must leave the old file as it was and no temp file behind.
    real_fsync = os.fsync

    def boom(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    root2 = ProfileNode("ROOT")
    root2.child("other").add_metrics({"time (ns)": 1})
    with pytest.raises(OSError):
        write_profile(path, root2, H100)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["p.hatchet"]


def test_write_keeps_nan_as_text_under_kprof(tmp_path):
    # JSON has no NaN: the value moves to the node's "kprof" dict as text and the write succeeds.
    root = ProfileNode("ROOT")
    root.child("k").add_metrics({"time (ns)": float("nan"), "count": 1})
    moved = write_profile(tmp_path / "p.hatchet", root, {})
    assert moved == [("k", "time (ns)", "nan")]
    back, _ = read_profile(tmp_path / "p.hatchet")
    assert back.children[0].metrics == {"count": 1}
    assert back.children[0].extra == {"non_finite_metrics": {"time (ns)": "nan"}}


def test_reads_protons_own_test_example(tmp_path):
    # Proton's test/examples/frame.json layout: name-only frames, empty metrics, a HIP device.
    data = [{"children": [
        {"children": [{"children": [], "frame": {"name": "/home/user/projects/example.py/test.py:1@foo",
                                                 "type": "function"},
                       "metrics": {"count": 1, "device_id": "0", "device_type": "HIP", "time (ns)": 204800}}],
         "frame": {"name": "test0"}, "metrics": {}},
        {"children": [], "frame": {"name": "test1"},
         "metrics": {"count": 1, "device_id": "0", "device_type": "HIP", "time (ns)": 204800}}],
        "frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0}},
        {"HIP": {"0": {"arch": "gfx90a", "bus_width": 4096, "clock_rate": 1700000,
                       "memory_clock_rate": 1600000, "num_sms": 104}}}]
    path = tmp_path / "frame.json"
    path.write_text(json.dumps(data))
    root, dev = read_profile(path)
    assert [c.name for c in root.children] == ["test0", "test1"]
    assert root.children[0].frame_type == "function"  # defaulted
    assert fmt.inclusive_metrics(root)[root]["time (ns)"] == 409600
    assert dev["HIP"]["0"]["arch"] == "gfx90a"


@pytest.mark.parametrize("content,expect", [
    (None, "no such file"),
    ("", "file is empty"),
    ('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [', "truncated JSON"),
    ('[{"frame": {"name": "ROOT"}} {}]', "invalid JSON"),
    ('{"traceEvents": []}', "top level is a JSON object (a Chrome/Perfetto trace?)"),
    ('"hello"', "top level is a JSON string"),
    ("[1, 2, 3]", "list of 3 items"),
    ('[{"name": "ROOT"}, {}]', "first item is not a frame node"),
    ('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": []}, []]', "second item is a JSON list"),
    ('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": [{"frame": {"name": 3}}]}, {}]',
     "without a string \"name\""),
    ('[{"frame": {"name": "ROOT"}, "metrics": [], "children": []}, {}]', "\"metrics\" that is not an object"),
    ('[{"frame": {"name": "ROOT"}, "metrics": {}, "children": {}}, {}]', "\"children\" that is not a list"),
])
def test_read_errors_are_one_line(tmp_path, content, expect):
    path = tmp_path / "bad.hatchet"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ProfileFormatError) as info:
        read_profile(path)
    msg = str(info.value)
    assert expect in msg
    assert "\n" not in msg
    assert str(path) in msg
    assert "expected" in msg  # says what was expected


def test_binary_file_error(tmp_path):
    path = tmp_path / "p.hatchet"
    path.write_bytes(b"\x92\x83\xa5frame\xff\xfe")  # msgpack-ish
    with pytest.raises(ProfileFormatError, match="binary data"):
        read_profile(path)


def test_directory_error(tmp_path):
    with pytest.raises(ProfileFormatError, match="is a directory"):
        read_profile(tmp_path)


def test_reads_the_fixtures(data):
    for name in ("kprof_small.hatchet", "kprof_other.hatchet", "kprof_python.hatchet", "proton_small.hatchet"):
        root, dev = read_profile(data(name))
        assert root.name == "ROOT"
        assert "CUDA" in dev


def test_metric_not_at_root_is_per_frame_like_in_proton(tmp_path, viewer):
    # Proton leaves "(exc)" flexible metrics out of the root placeholders: hatchet then treats
    # them as per-frame values, not sums.  Here "queue_depth" is such a metric.
    data = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0}, "children": [
        {"frame": {"name": "s", "type": "function"}, "metrics": {"queue_depth": 7}, "children": [
            {"frame": {"name": "k", "type": "function"}, "children": [],
             "metrics": {"count": 1, "device_id": "0", "device_type": "CUDA", "time (ns)": 100, "queue_depth": 3}}]}]},
        {}]
    path = tmp_path / "exc.hatchet"
    path.write_text(json.dumps(data))
    root, _ = read_profile(path)
    assert fmt.additive_metric_names(root) == ["count", "time (ns)"]
    status, out, err = viewer("-m", "time/ns,queue_depth", str(path))
    assert status == 0
    lines = out.splitlines()
    assert lines[2].split() == ["100.000", "7", "└─", "s"]  # 7, not 7 + 3
    assert lines[3].split() == ["100.000", "3", "└─", "k"]
