"""The GPU benchmark's CPU-checkable parts: the kernel record built from a launch record, the
synthetic profile (static analysis + timing when kprof is unavailable), filling in a kprof profile
that lacks kernel records, and the analysis of both."""
import pytest

from kernelc.runtime.hooks import LaunchRecord
from profiler.format import DEVICE_ID, ProfileNode, read_profile, write_profile

from .helpers import H100, cache_case, case

bench = pytest.importorskip("bench.bench_analyzer")


def _record(name, **overrides):
    c = case(name)
    ck = cache_case(c, **overrides)
    cx = dict(c.constexprs)
    cx.update({k: v for k, v in overrides.items() if k not in ("num_warps", "num_stages")})
    meta = dict(cx)
    grid = c.grid(meta)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    values, mask = [], []
    args = c.make_args("cpu")
    runtime = iter(args)
    for n in c.kernel.arg_names:
        if n in cx:
            values.append(cx[n])
            mask.append(True)
        else:
            values.append(next(runtime))
            mask.append(False)
    return LaunchRecord(c.kernel_name, grid, ck.num_warps, ck.num_stages, ck.shared, 0, "cuda", ck, ck.cache_key,
                        c.kernel, values, mask, None)


def test_synthetic_profile_gets_the_diagnosis_and_uses_the_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "device_info", lambda: H100)
    rec = _record("few_programs")
    extra = bench.kernel_extra(rec)
    assert extra["cache_key"] == rec.cache_key and extra["grid"] == [4, 1, 1]
    assert {"name": "n", "kind": "int", "value": 1 << 24} in extra["args"]
    path = bench.synthetic_profile(str(tmp_path / "p.hatchet"), rec, 1.5, 10)
    kr = bench.analyze(path, "few_programs_scale")
    assert kr.facts.artifact_origin == "cache" and kr.facts.time_ns == pytest.approx(15e6)
    assert "low-utilisation" in kr.ids()
    # the recorded n = 2^24 pins the grid to CHUNK: cdiv(n, CHUNK) == 4 programs
    d = next(d for d in kr.findings if d.id == "low-utilisation")
    assert d.changes[0] == {"CHUNK": 16384}
    assert kr.suggestions and kr.suggestions[0].changes == {"CHUNK": 16384}


def test_enrich_fills_kernel_records_missing_from_a_kprof_profile(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "device_info", lambda: H100)
    rec = _record("register_occupancy")
    root = ProfileNode("ROOT")
    node = root.child(rec.display_name)
    node.add_metrics({"time (ns)": 1000, "count": 1, DEVICE_ID: "0", "device_type": "CUDA"})
    node.extra = {"kind": "kernel", "kernel": rec.name}        # a profiler that writes only this
    other = root.child("at::native::vectorized_elementwise_kernel")
    other.add_metrics({"time (ns)": 10, "count": 1, DEVICE_ID: "0", "device_type": "CUDA"})
    path = str(tmp_path / "k.hatchet")
    write_profile(path, root, H100)
    assert bench.enrich_profile(path, rec.name, bench.kernel_extra(rec))
    r2, _ = read_profile(path)
    k = [n for n, _ in r2.walk() if n.name == rec.display_name][0]
    assert k.extra["cache_key"] == rec.cache_key and k.extra["kernel"] == rec.name
    assert "low-occupancy" in bench.analyze(path, rec.name).ids()
    assert not bench.enrich_profile(path, "not_there", {})


def test_profiler_without_start_degrades_to_none(monkeypatch):
    import profiler
    if hasattr(profiler, "start"):
        monkeypatch.delattr(profiler, "start")
    path, why = bench.kprof_profile("x", lambda: None, sampling=True)
    assert path is None and "not available" in why
