"""bench/bench_attention.py end to end on CPU (``--device cpu``: the interpreter at a tiny size): every variant
runs, ``--check`` compares outputs and gradients with torch, and the results file has the rows."""
import json

from bench import bench_attention


def test_cpu_smoke_run_checks_and_writes_results(tmp_path, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    for name in ("DEVICE", "Z", "H"):  # main() sets them (and KERNELC_INTERPRET); restored afterwards
        monkeypatch.setattr(bench_attention, name, getattr(bench_attention, name))
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    rc = bench_attention.main(["--device", "cpu", "--batch", "1", "--heads", "1", "--seq", "128", "--head-dim", "16",
                               "--dtype", "fp16", "--causal", "1", "--full", "--check", "--results-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads((tmp_path / "attention.json").read_text())
    assert data["check_failures"] == []
    [row] = data["rows"]
    assert (row["seq"], row["head_dim"], row["dtype"], row["causal"]) == (128, 16, "fp16", True)
    for key in ("check_fwd", "check_fwd_tma", "check_fp8_fwd", "check_ours_bwd_separate", "check_ours_bwd_atomic",
                "check_ours_bwd_ds"):
        assert 0 <= row[key] < 0.1, key
    timed = {t["variant"] for t in data["timings"] if "ms" in t}
    assert {"ours_fwd", "ours_fwd_tma", "ours_fp8_fwd", "ours_bwd_separate", "ours_bwd_atomic",
            "ours_bwd_ds"} <= timed
    assert row["fwd_tflops"] > 0 and row["bwd_tflops"] > 0 and row["fp8_vs_our_fp16"] > 0
