"""The notebook API: hatchet GraphFrame and pandas DataFrame."""

import math

import pytest

from profiler.format import ProfileFormatError
from profiler.viewer import load_dataframe, load_graphframe
from profiler.viewer.metrics import MetricError


def test_graphframe_kprof(data):
    gf = load_graphframe(data("kprof_small.hatchet"))
    df = gf.dataframe
    root = df[df["name"] == "ROOT"].iloc[0]
    assert root["time (ns) (inc)"] == 24_204_000  # hatchet's own inclusive sums
    assert root["flops16 (inc)"] == 10 * 2 * 4096 ** 3 + 10 * 2 * 4096 * 16384 * 4096
    attn = df[df["name"] == "attn"].iloc[0]
    assert attn["time (ns) (inc)"] == 4_488_000
    assert "device_id" in df.columns and "time (ns)" in gf.exc_metrics


def test_graphframe_proton_drops_launch_metadata(data):
    gf = load_graphframe(data("proton_small.hatchet"))
    names = gf.dataframe["name"].tolist()
    assert "__proton_launch_metadata" not in names
    assert not any(n.startswith("void at::native::reduce_kernel") for n in names)
    root = gf.dataframe[gf.dataframe["name"] == "ROOT"].iloc[0]
    kernels = gf.dataframe[gf.dataframe["device_id"].notna()]
    assert root["time (ns) (inc)"] == kernels["time (ns)"].sum()


def test_dataframe_with_derived_metrics(data):
    df = load_dataframe(data("kprof_small.hatchet"), ["time/ms", "tflop16/s", "util"])
    assert list(df.columns[:6]) == ["name", "path", "depth", "frame_type", "parent", "kernel"]
    mm = df[df["name"].str.startswith("matmul_kernel [grid 1024")].iloc[0]
    assert mm["path"] == ("train_step", "attn", mm["name"])
    assert mm["kernel"] == "matmul_kernel" and mm["depth"] == 3
    assert mm["time/ms"] == pytest.approx(2.29)
    assert mm["tflop16/s"] == pytest.approx(10 * 2 * 4096 ** 3 / 2.29e-3 / 1e12)
    assert 0.5 < mm["util"] < 0.7
    assert df.loc[mm["parent"], "name"] == "attn"
    lines = df[df["frame_type"] == "line"]
    assert lines["num_samples"].sum() == 1580
    assert math.isnan(df.loc[0, "util"]) or df.loc[0, "util"] is None  # root: no util


def test_dataframe_frame_format(data):
    df = load_dataframe(data("kprof_python.hatchet"), "time/ms", frame_format="file:function:line")
    assert "model.py:30@forward" in df["name"].tolist()


def test_api_errors(data, tmp_path):
    with pytest.raises(ProfileFormatError, match="no such file"):
        load_dataframe(tmp_path / "missing.hatchet")
    with pytest.raises(ProfileFormatError, match="truncated JSON"):
        load_graphframe(data("bad_truncated.hatchet"))
    with pytest.raises(MetricError, match="did you mean"):
        load_dataframe(data("kprof_small.hatchet"), ["tflp/s"])
