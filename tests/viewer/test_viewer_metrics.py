"""Metric names and derivations, checked against numbers computed by hand (not by the viewer)."""

import json

import pytest

from profiler.viewer import metrics as M
from profiler.viewer import peaks, tree


@pytest.fixture
def small(data):
    return tree.load(data("kprof_small.hatchet"))


def find(profile, prefix):
    for node, _ in profile.root.walk():
        if node.name.startswith(prefix):
            return node
    raise AssertionError(prefix)


def value(profile, spec, node):
    cat = M.catalog(profile.raw_names, profile.additive)
    m = M.resolve(spec, cat, profile.raw_names)
    ctx = M.EvalContext(profile.root, profile.device_info, M.main_time_metric(profile.raw_names))
    return m.value(node, ctx)


def test_time_units_and_average(small):
    mm = find(small, "matmul_kernel [grid 1024")  # 10 launches, 2.29 ms in total
    assert value(small, "time", mm) == 2_290_000
    assert value(small, "time/ms", mm) == pytest.approx(2.29)
    assert value(small, "time/s", mm) == pytest.approx(2.29e-3)
    assert value(small, "time/us", mm) == pytest.approx(2290)
    assert value(small, "avg_time/us", mm) == pytest.approx(229)
    # the root sums all kernels: 2.29 + 0.248 + 1.95 + 8.59 + 0.926 + 10.2 ms
    assert value(small, "time/ms", small.root) == pytest.approx(24.204)
    assert value(small, "time/%", mm) == pytest.approx(100 * 2.29 / 24.204)


def test_rates(small):
    mm = find(small, "matmul_kernel [grid 1024")
    flops = 10 * 2 * 4096 ** 3
    assert value(small, "tflop16/s", mm) == pytest.approx(flops / 2.29e-3 / 1e12)  # ~600 TFLOP/s
    assert value(small, "gflop/s", mm) == pytest.approx(flops / 2.29e-3 / 1e9)
    assert value(small, "gbyte/s", mm) == pytest.approx(10 * 3 * 4096 * 4096 * 2 / 2.29e-3 / 1e9)
    adam = find(small, "adam_kernel")
    assert value(small, "tflop16/s", adam) is None  # no fp16 work there: blank, not 0
    assert value(small, "tflop/s", adam) == pytest.approx(12e9 / 10.2e-3 / 1e12)  # flops32 counts in flop/s
    # "flops" is every width together
    assert value(small, "flops", small.root) == 10 * 2 * 4096 ** 3 + 10 * 2 * 4096 * 16384 * 4096 + 12_000_000_000


def test_util_h100_by_hand(small):
    # H100 SXM: 132 SMs at 1980 MHz, 5120-bit bus at 2619 MHz (DDR).
    bw = 2 * 5120 * 2619e6 / 8
    fp16_peak = 1513e12 / (114 * 1755e6) * 132 * 1980e6 / 2
    adam = find(small, "adam_kernel")  # memory bound: 28 GB in 10.2 ms
    compute = 12e9 / (fp16_peak / 2)  # flops32 against the fp32 peak (half the fp16 one)
    assert value(small, "util", adam) == pytest.approx(max(compute, 28e9 / bw) / 10.2e-3)
    mm = find(small, "matmul_kernel [grid 1024")
    assert value(small, "util", mm) == pytest.approx((10 * 2 * 4096 ** 3 / fp16_peak) / 2.29e-3)
    assert value(small, "util", find(small, "attn")) is None  # util is per kernel frame
    assert value(small, "util", find(small, "sm90_xmma")) is None  # a kernel without flops/bytes


@pytest.mark.parametrize("arch,sms,clock_khz,expected_fp16", [
    ("80", 108, 1410000, 312e12),
    ("89", 58, 2505000, 165.15e12),
    ("90", 132, 1980000, 1513e12 / (114 * 1755e6) * 132 * 1980e6 / 2),
    ("sm_90a", 114, 1755000, 1513e12 / 2),  # Proton's reference part gives Proton's reference number
    ("100", 148, 1965000, 148 * 16384 * 1965e6 / 2),
])
def test_peak_table(arch, sms, clock_khz, expected_fp16):
    dev = {"arch": arch, "num_sms": sms, "clock_rate": clock_khz, "memory_clock_rate": 2619000, "bus_width": 5120}
    assert peaks.peak_flops("CUDA", dev, 16) == pytest.approx(expected_fp16)
    assert peaks.peak_flops("CUDA", dev, 8) == pytest.approx(2 * expected_fp16)
    assert peaks.peak_flops("CUDA", dev, 32) == pytest.approx(expected_fp16 / 2)
    assert peaks.peak_bandwidth("CUDA", dev) == pytest.approx(2 * 5120 * 2619e6 / 8)


def test_unknown_arch_has_no_peak():
    dev = {"arch": "75", "num_sms": 40, "clock_rate": 1590000, "memory_clock_rate": 5001000, "bus_width": 256}
    assert peaks.arch_peak("CUDA", dev) is None
    assert peaks.peak_flops("CUDA", dev, 16) is None
    usable, note = M.util_note({"CUDA": {"0": dev}})
    assert not usable and "arch 75" in note and "sm_90" in note and "left out" in note


@pytest.mark.parametrize("spec,name", [
    ("time", "time (ns)"), ("TIME", "time (ns)"), ("time (ns)", "time (ns)"),
    ("Time (MS)", "time/ms"), ("time / ms", "time/ms"), ("time/µs", "time/us"), ("time/sec", "time/s"),
    ("TFLOPS", "tflop/s"), ("tflops/s", "tflop/s"), ("GFLOP16/s", "gflop16/s"), ("tflops16", "tflop16/s"),
    ("flops", "flops"), ("FLOPS16", "flops16"),
    ("GB/s", "gbyte/s"), ("tbytes/s", "tbyte/s"), ("bytes/s", "byte/s"),
    ("avg_time", "avg_time/ns"), ("avg_time/ms", "avg_time/ms"),
    ("time%", "time/%"), ("Bytes/%", "bytes/%"), ("utilization", "util"),
])
def test_forgiving_names(small, spec, name):
    cat = M.catalog(small.raw_names, small.additive)
    assert M.resolve(spec, cat, small.raw_names).name == name


def test_misspelt_metric_gets_close_matches(small):
    cat = M.catalog(small.raw_names, small.additive)
    with pytest.raises(M.MetricError) as info:
        M.resolve("tflp16/s", cat, small.raw_names)
    msg = str(info.value)
    assert "unknown metric 'tflp16/s'" in msg and "did you mean tflop16/s" in msg and "expected" in msg


def test_metric_needing_a_missing_counter(data):
    other = tree.load(data("kprof_other.hatchet"))  # time, count, bytes: no flops
    cat = M.catalog(other.raw_names, other.additive)
    assert "gbyte/s" in cat and "tflop/s" not in cat
    with pytest.raises(M.MetricError, match="needs flops"):
        M.resolve("tflop16/s", cat, other.raw_names)


def test_unknown_arch_cli_notes_and_omits_util(tmp_path, data, viewer):
    with open(data("kprof_small.hatchet")) as f:
        doc = json.load(f)
    doc[1]["CUDA"]["0"]["arch"] = "75"  # Turing: not in the peak table
    path = tmp_path / "turing.hatchet"
    path.write_text(json.dumps(doc))
    status, out, err = viewer("-m", "time/ms,util", str(path))
    assert status == 0
    assert "util" not in out.splitlines()[0]  # the column is left out ...
    assert out.splitlines()[0].split() == ["time/ms", "name"]
    assert "note:" in err and "arch 75" in err and "util left out" in err  # ... with a note
    # util alone: the default columns instead of nothing
    status, out, err = viewer("-m", "util", str(path))
    assert status == 0 and out.splitlines()[0].split() == ["time/ms", "time/%", "name"]


def test_mixed_known_and_unknown_devices(tmp_path, data, viewer):
    with open(data("kprof_small.hatchet")) as f:
        doc = json.load(f)
    doc[1]["CUDA"]["1"] = dict(doc[1]["CUDA"]["0"], arch="61")
    path = tmp_path / "mixed.hatchet"
    path.write_text(json.dumps(doc))
    status, out, err = viewer("-m", "util", str(path))
    assert status == 0 and out.splitlines()[0].split() == ["util", "name"]
    assert "CUDA 1 arch 61" in err and "blank" in err


def test_no_device_info_util_note(tmp_path, viewer):
    from profiler.format import ProfileNode, write_profile

    root = ProfileNode("ROOT")
    root.child("k").add_metrics({"time (ns)": 10, "count": 1, "bytes": 100, "device_id": "0", "device_type": "CUDA"})
    write_profile(tmp_path / "cpu.hatchet", root, {})
    status, out, err = viewer("-m", "time/ns,util", str(tmp_path / "cpu.hatchet"))
    assert status == 0 and "util" not in out and "no device_info" in err
